// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A region reports once, stays quiet until REARM, and not at all after UNREGISTER (queued events stay). */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h, h2;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 31);

	T_OK("madvise", madvise(p, t_page, MADV_DONTNEED));
	t_expect_event(&f, 31, h, (uintptr_t)p, (uintptr_t)p + t_page,
		       UMMUNOT_EVENT_CLEAR);
	t_get_stats(&f, &st);
	T_EQ("regions_armed after event", 0, st.regions_armed);
	T_EQ("regions after event", 1, st.regions);

	t_touch(p, 4 * t_page);
	T_OK("madvise", madvise(p + t_page, t_page, MADV_DONTNEED));
	t_expect_no_event(&f, "second invalidation before REARM");

	t_rearm(&f, h);
	t_rearm(&f, h);		/* re-arming an armed region is not an error */
	t_get_stats(&f, &st);
	T_EQ("regions_armed after REARM", 1, st.regions_armed);
	t_touch(p, 4 * t_page);
	T_OK("madvise", madvise(p + 2 * t_page, t_page, MADV_DONTNEED));
	t_expect_event(&f, 31, h, (uintptr_t)p + 2 * t_page,
		       (uintptr_t)p + 3 * t_page, UMMUNOT_EVENT_CLEAR);

	/* An event queued before UNREGISTER stays in the ring. */
	t_rearm(&f, h);
	h2 = t_register(&f, (uintptr_t)p, 4 * t_page, 32);
	T_OK("madvise", madvise(p + 3 * t_page, t_page, MADV_DONTNEED));
	{
		struct t_expect exp[2] = {
			{ 31, h, (uintptr_t)p + 3 * t_page, (uintptr_t)p + 4 * t_page,
			  UMMUNOT_EVENT_CLEAR, false },
			{ 32, h2, (uintptr_t)p + 3 * t_page, (uintptr_t)p + 4 * t_page,
			  UMMUNOT_EVENT_CLEAR, false },
		};

		t_unregister(&f, h);
		t_unregister(&f, h2);
		t_expect_events(&f, exp, 2);
	}
	t_get_stats(&f, &st);
	T_EQ("regions after UNREGISTER", 0, st.regions);

	/* Unregistered handles are unknown now. */
	{
		uint32_t idx;
		int ret = t_handle_batch(f.fd, UMMUNOT_IOC_REARM, &h, 1, &idx);

		T_EQ("REARM of an unregistered handle: -errno", -ENOENT, ret);
		ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, &h, 1, &idx);
		T_EQ("UNREGISTER twice: -errno", -ENOENT, ret);
	}

	T_OK("munmap", munmap(p, 4 * t_page));
	t_expect_no_event(&f, "munmap after UNREGISTER");
	t_file_close(&f);
	return T_EXIT_PASS;
}
