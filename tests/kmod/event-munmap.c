// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* munmap of a watched range yields one UNMAP event before munmap returns. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h, h2, gen;
	char *p, *q;

	t_init(argc, argv);
	t_file_open(&f, 0);

	t_get_stats(&f, &st);
	T_EQ("fresh stats.event_mask", UMMUNOT_EVENT_MASK_DEFAULT, st.event_mask);
	T_EQ("fresh stats.events", 0, st.events);

	p = t_map_anon(4, true);
	q = t_map_anon(2, false);	/* never touched: no page tables */
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 0x1111);
	h2 = t_register(&f, (uintptr_t)q, 2 * t_page, 0x2222);
	T_ASSERT(h != h2, "two regions got the same handle 0x%llx",
		 (unsigned long long)h);
	t_expect_no_event(&f, "after REGISTER");

	gen = t_generation(&f);
	T_OK("munmap", munmap(p, 4 * t_page));
	t_expect_event(&f, 0x1111, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	T_ASSERT(t_generation(&f) != gen, "generation did not move (%llu)",
		 (unsigned long long)gen);

	/* A range that was never faulted in still reports. */
	T_OK("munmap untouched", munmap(q, 2 * t_page));
	t_expect_event(&f, 0x2222, h2, (uintptr_t)q, (uintptr_t)q + 2 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	t_get_stats(&f, &st);
	T_EQ("stats.regions", 2, st.regions);
	T_EQ("stats.regions_armed", 0, st.regions_armed);
	T_EQ("stats.regions_registered", 2, st.regions_registered);
	T_EQ("stats.events", 2, st.events);
	T_EQ("stats.delivered[UNMAP]", 2, st.delivered[UMMUNOT_EVENT_UNMAP]);
	T_EQ("stats.dropped", 0, st.dropped);
	T_ASSERT(st.ring_high_water >= 1, "ring_high_water %llu",
		 (unsigned long long)st.ring_high_water);
	for (int t = 0; t < UMMUNOT_EVENT_TYPE_MAX; t++)
		T_EQ("stats.filtered[type]", 0, st.filtered[t]);

	t_file_close(&f);
	return T_EXIT_PASS;
}
