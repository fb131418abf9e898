// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* SET_FILTER: returns the previous mask, filtered types are counted and do not disarm, delivered types report. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h, prev;
	char *p, *r;

	t_init(argc, argv);
	t_file_open(&f, 0);

	prev = t_set_filter(&f, UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_CLEAR));
	T_EQ("previous mask", UMMUNOT_EVENT_MASK_DEFAULT, prev);
	t_get_stats(&f, &st);
	T_EQ("stats.event_mask", UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_CLEAR), st.event_mask);

	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 16);
	T_OK("munmap", munmap(p, 4 * t_page));
	t_expect_no_event(&f, "munmap with UNMAP filtered out");
	t_get_stats(&f, &st);
	T_EQ("stats.filtered[UNMAP]", 1, st.filtered[UMMUNOT_EVENT_UNMAP]);
	T_EQ("stats.events", 0, st.events);
	T_EQ("stats.regions_armed", 1, st.regions_armed);

	/* Same addresses again: the still-armed region reports CLEAR. */
	r = mmap(p, 4 * t_page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (r != p)
		t_skip("could not map %p again (%s)", p, t_errname(errno));
	t_touch(p, 4 * t_page);
	T_OK("madvise DONTNEED", madvise(p, 4 * t_page, MADV_DONTNEED));
	t_expect_event(&f, 16, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_CLEAR);

	/* Mask 0: nothing is delivered, everything is counted. */
	prev = t_set_filter(&f, 0);
	T_EQ("previous mask", UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_CLEAR), prev);
	t_rearm(&f, h);
	t_touch(p, 4 * t_page);
	T_OK("madvise DONTNEED", madvise(p, 4 * t_page, MADV_DONTNEED));
	t_expect_no_event(&f, "DONTNEED with mask 0");
	t_get_stats(&f, &st);
	T_EQ("stats.filtered[CLEAR]", 1, st.filtered[UMMUNOT_EVENT_CLEAR]);
	T_EQ("stats.delivered[CLEAR]", 1, st.delivered[UMMUNOT_EVENT_CLEAR]);

	prev = t_set_filter(&f, UMMUNOT_EVENT_MASK_DEFAULT);
	T_EQ("previous mask", 0, prev);
	T_OK("munmap", munmap(p, 4 * t_page));
	t_expect_event(&f, 16, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	t_file_close(&f);
	return T_EXIT_PASS;
}
