// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * regions_armed is always consistent: while batches of regions over one
 * page are registered and unregistered and that page is invalidated
 * continuously (callbacks disarm regions as soon as they are inserted),
 * every fdinfo and GET_STATS view has regions_armed <= regions (it used to
 * wrap below zero between the insert and the count).
 */
#include "helpers.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#define BATCH	4000
#define SECONDS	4.0

static struct t_file f;
static char *page;
static volatile int stop;
static char bad[256];

static void *invalidate(void *arg)
{
	(void)arg;
	while (!stop) {
		madvise(page, t_page, MADV_DONTNEED);
		page[0] = 1;
	}
	return NULL;
}

static unsigned long long field(const char *buf, const char *name)
{
	const char *s = strstr(buf, name);

	return s ? strtoull(s + strlen(name), NULL, 10) : ~0ULL;
}

static void *observe(void *arg)
{
	char path[64], buf[4096];
	unsigned long n = 0;

	(void)arg;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", f.fd);
	while (!stop && !bad[0]) {
		struct ummunot_stats st;
		unsigned long long regions, armed;
		ssize_t len;
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			break;
		len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len > 0) {
			buf[len] = 0;
			regions = field(buf, "\nregions: ");
			armed = field(buf, "\nregions_armed: ");
			if (armed > regions)
				snprintf(bad, sizeof(bad),
					 "fdinfo: regions_armed %llu > regions %llu",
					 armed, regions);
		}
		if (ioctl(f.fd, UMMUNOT_IOC_GET_STATS, &st) == 0 &&
		    st.regions_armed > st.regions)
			snprintf(bad, sizeof(bad),
				 "GET_STATS: regions_armed %llu > regions %llu",
				 (unsigned long long)st.regions_armed,
				 (unsigned long long)st.regions);
		n++;
	}
	t_log("%lu observations", n);
	return NULL;
}

int main(int argc, char **argv)
{
	struct ummunot_region *r;
	struct ummunot_stats st;
	pthread_t ti, to;
	uint64_t *h;
	double end;
	int rounds = 0;

	t_init(argc, argv);
	t_file_open(&f, 0);
	page = t_map_anon(1, true);
	r = calloc(BATCH, sizeof(*r));
	h = calloc(BATCH, sizeof(*h));
	T_ASSERT(r && h, "calloc");
	for (int i = 0; i < BATCH; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)page,
						.length = t_page, .cookie = i };

	if (pthread_create(&ti, NULL, invalidate, NULL) ||
	    pthread_create(&to, NULL, observe, NULL))
		t_fail("pthread_create");
	end = t_now() + SECONDS;
	while (t_now() < end && !bad[0]) {
		uint32_t idx;
		int ret = t_register_batch(f.fd, r, BATCH, &idx);

		T_EQ("REGISTER", 0, ret);
		for (int i = 0; i < BATCH; i++)
			h[i] = r[i].handle;
		ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, h, BATCH, &idx);
		T_EQ("UNREGISTER", 0, ret);
		rounds++;
	}
	stop = 1;
	pthread_join(ti, NULL);
	pthread_join(to, NULL);
	t_log("%d rounds of %d regions", rounds, BATCH);
	if (bad[0])
		t_fail("%s", bad);
	t_get_stats(&f, &st);
	T_EQ("regions at the end", 0, st.regions);
	T_EQ("armed at the end", 0, st.regions_armed);
	t_file_close(&f);
	return T_EXIT_PASS;
}
