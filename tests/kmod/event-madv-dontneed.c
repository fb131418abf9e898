// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* madvise(MADV_DONTNEED) on a watched range yields CLEAR clipped to the range. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(8, true);
	h = t_register(&f, (uintptr_t)p + t_page + 100, 2 * t_page, 9);
	T_OK("madvise DONTNEED", madvise(p, 8 * t_page, MADV_DONTNEED));
	t_expect_event(&f, 9, h, (uintptr_t)p + t_page + 100,
		       (uintptr_t)p + 3 * t_page + 100, UMMUNOT_EVENT_CLEAR);
	t_get_stats(&f, &st);
	T_EQ("stats.delivered[CLEAR]", 1, st.delivered[UMMUNOT_EVENT_CLEAR]);
	T_EQ("stats.events", 1, st.events);
	munmap(p, 8 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
