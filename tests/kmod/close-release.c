// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* close releases everything: module refcount returns, a new file starts with fresh stats and ring, old regions are gone. */
#include "helpers.h"

#include <sys/mman.h>
#include <unistd.h>

#define NR 2000
#define CYCLES 200
#define CYCLES_DEBUG 30	/* lockdep+KASAN: 200 took 234 s under load */

static void wait_refcnt(long want, const char *what)
{
	long rc = -1;

	for (int i = 0; i < 200; i++) {
		rc = t_module_refcnt();
		if (rc == want)
			return;
		usleep(10000);
	}
	t_fail("%s: module refcnt expected %ld, got %ld", what, want, rc);
}

int main(int argc, char **argv)
{
	static struct ummunot_region r[NR];
	struct ummunot_stats st, zero;
	struct t_file f;
	uint32_t idx;
	long base;
	int cycles;
	char *p;
	int ret;

	t_init(argc, argv);
	close(t_dev_open());
	base = t_module_refcnt();
	T_ASSERT(base >= 0, "cannot read /sys/module/ummunot/refcnt");

	p = t_map_anon(NR, true);
	cycles = t_debug_kernel() ? CYCLES_DEBUG : CYCLES;
	for (int c = 0; c < cycles; c++) {
		t_file_open(&f, 64);
		for (int i = 0; i < NR; i++)
			r[i] = (struct ummunot_region){ .start = (uintptr_t)p + i * t_page,
							.length = t_page, .cookie = i };
		ret = t_register_batch(f.fd, r, c % 2 ? NR : 10, &idx);
		T_ASSERT(ret == 0, "REGISTER: %s", t_errname(-ret));
		t_set_filter(&f, UMMUNOT_EVENT_MASK_ALL);
		T_OK("madvise", madvise(p, 100 * t_page, MADV_DONTNEED));	/* events */
		t_touch(p, 100 * t_page);
		if (c % 3 == 0) {
			/* fd first, ring mapping last */
			close(f.fd);
			T_ASSERT(t_module_refcnt() > base,
				 "refcnt %ld dropped to baseline with the ring still mapped",
				 t_module_refcnt());
			munmap(f.map, f.map_size);
		} else {
			t_file_close(&f);
		}
		wait_refcnt(base, "after close");
	}

	/* A new file is fresh and does not see the old regions. */
	t_file_open(&f, 0);
	t_get_stats(&f, &st);
	memset(&zero, 0, sizeof(zero));
	zero.event_mask = UMMUNOT_EVENT_MASK_DEFAULT;
	if (memcmp(&st, &zero, sizeof(st)))
		t_fail("stats of a new file are not fresh: regions %llu registered %llu events %llu "
		       "dropped %llu mask 0x%llx", (unsigned long long)st.regions,
		       (unsigned long long)st.regions_registered,
		       (unsigned long long)st.events, (unsigned long long)st.dropped,
		       (unsigned long long)st.event_mask);
	T_EQ("new ring producer", 0, t_producer(&f));
	T_EQ("new ring overflow", 0, t_overflow(&f));
	T_EQ("new ring dropped", 0, t_dropped(&f));
	T_OK("munmap", munmap(p, NR * t_page));
	t_expect_no_event(&f, "munmap of ranges watched by closed files");
	t_file_close(&f);
	wait_refcnt(base, "at the end");
	return T_EXIT_PASS;
}
