// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mprotect yields PROTECTION_VMA: filtered and counted by default (region stays armed), delivered with MASK_ALL. */
#include "helpers.h"

#include <sys/mman.h>

#define HUGE_ALIGN (2UL << 20)

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h, prev;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	/* Touched (page tables exist) and inside one PMD: one invalidation. */
	p = t_map_anon_aligned(8, HUGE_ALIGN, true);
	h = t_register(&f, (uintptr_t)p, 8 * t_page, 12);
	T_OK("mprotect RO", mprotect(p, 8 * t_page, PROT_READ));
	t_expect_no_event(&f, "mprotect with the default filter");
	t_get_stats(&f, &st);
	T_ASSERT(st.filtered[UMMUNOT_EVENT_PROTECTION_VMA] >= 1,
		 "stats.filtered[PROTECTION_VMA]: expected >= 1, got %llu",
		 (unsigned long long)st.filtered[UMMUNOT_EVENT_PROTECTION_VMA]);
	t_log("mprotect: filtered[PROTECTION_VMA] = %llu",
	      (unsigned long long)st.filtered[UMMUNOT_EVENT_PROTECTION_VMA]);
	T_EQ("stats.events", 0, st.events);
	T_EQ("stats.regions_armed (filtered events do not disarm)", 1,
	     st.regions_armed);

	/* Still armed: the next delivered type reports. */
	T_OK("madvise DONTNEED", madvise(p, 8 * t_page, MADV_DONTNEED));
	t_expect_event(&f, 12, h, (uintptr_t)p, (uintptr_t)p + 8 * t_page,
		       UMMUNOT_EVENT_CLEAR);

	/* With every type delivered, mprotect reports itself. */
	prev = t_set_filter(&f, UMMUNOT_EVENT_MASK_ALL);
	T_EQ("SET_FILTER previous mask", UMMUNOT_EVENT_MASK_DEFAULT, prev);
	T_OK("mprotect RW", mprotect(p, 8 * t_page, PROT_READ | PROT_WRITE));
	t_touch(p, 8 * t_page);
	t_rearm(&f, h);
	T_OK("mprotect RO again", mprotect(p, 8 * t_page, PROT_READ));
	t_expect_event(&f, 12, h, (uintptr_t)p, (uintptr_t)p + 8 * t_page,
		       UMMUNOT_EVENT_PROTECTION_VMA);
	t_get_stats(&f, &st);
	T_EQ("stats.delivered[PROTECTION_VMA]", 1,
	     st.delivered[UMMUNOT_EVENT_PROTECTION_VMA]);
	T_EQ("stats.event_mask", UMMUNOT_EVENT_MASK_ALL, st.event_mask);

	munmap(p, 8 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
