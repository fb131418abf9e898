// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A SET_FILTER that fails (EFAULT writing the previous mask back) changes
 * nothing, not even for a moment, and never undoes a concurrent SET_FILTER:
 * one thread keeps failing to set mask A (its argument is read-only) while
 * another sets B and C in turn; the mask is never A and is always the last
 * one the successful thread set.
 */
#include "helpers.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define SECONDS 3.0

static struct t_file f;
static struct ummunot_filter *ro;	/* read-only page */
static volatile int stop;
static char bad[256];

static const uint64_t mask_a = UMMUNOT_EVENT_MASK_ALL;
static const uint64_t mask_b = UMMUNOT_EVENT_MASK_DEFAULT;
static const uint64_t mask_c = UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_UNMAP);

static void *failing(void *arg)
{
	unsigned long n = 0;

	(void)arg;
	while (!stop && !bad[0]) {
		if (ioctl(f.fd, UMMUNOT_IOC_SET_FILTER, ro) != -1 || errno != EFAULT) {
			snprintf(bad, sizeof(bad), "SET_FILTER with a read-only argument: %s",
				 t_errname(errno));
			break;
		}
		n++;
	}
	t_log("%lu failed SET_FILTERs", n);
	return NULL;
}

static void *observing(void *arg)
{
	struct ummunot_stats st;

	(void)arg;
	while (!stop && !bad[0]) {
		if (ioctl(f.fd, UMMUNOT_IOC_GET_STATS, &st) == 0 &&
		    st.event_mask == mask_a)
			snprintf(bad, sizeof(bad),
				 "a failed SET_FILTER's mask was in effect");
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t1, t2;
	unsigned long n = 0;
	double end;

	t_init(argc, argv);
	t_file_open(&f, 0);
	ro = mmap(NULL, t_page, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(ro != MAP_FAILED, "mmap");
	*ro = (struct ummunot_filter){ .mask = mask_a };
	T_OK("mprotect", mprotect(ro, t_page, PROT_READ));

	if (pthread_create(&t1, NULL, failing, NULL) ||
	    pthread_create(&t2, NULL, observing, NULL))
		t_fail("pthread_create");
	end = t_now() + SECONDS;
	while (t_now() < end && !bad[0]) {
		uint64_t want = (n & 1) ? mask_c : mask_b;
		struct ummunot_stats st;

		t_set_filter(&f, want);
		t_get_stats(&f, &st);
		if (st.event_mask != want)
			snprintf(bad, sizeof(bad),
				 "mask 0x%llx right after setting 0x%llx (undone by a failed call)",
				 (unsigned long long)st.event_mask,
				 (unsigned long long)want);
		n++;
	}
	stop = 1;
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	t_log("%lu successful SET_FILTERs", n);
	if (bad[0])
		t_fail("%s", bad);
	t_file_close(&f);
	return T_EXIT_PASS;
}
