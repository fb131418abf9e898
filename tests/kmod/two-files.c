// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Two files in one process watch independently: each gets its own events, cookies and seqs. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct ummunot_stats sa, sb;
	struct t_file a, b;
	uint64_t ha, hb, ha2;
	char *p, *q;

	t_init(argc, argv);
	t_file_open(&a, 0);
	t_file_open(&b, 128);

	p = t_map_anon(4, true);
	q = t_map_anon(4, true);
	ha = t_register(&a, (uintptr_t)p, 4 * t_page, 0xa);
	hb = t_register(&b, (uintptr_t)p + t_page, 2 * t_page, 0xb);
	ha2 = t_register(&a, (uintptr_t)q, 4 * t_page, 0xa2);

	T_OK("munmap", munmap(p, 4 * t_page));
	t_expect_event(&a, 0xa, ha, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	t_expect_event(&b, 0xb, hb, (uintptr_t)p + t_page,
		       (uintptr_t)p + 3 * t_page, UMMUNOT_EVENT_UNMAP);

	/* Only a watches q. */
	T_OK("madvise", madvise(q, 4 * t_page, MADV_DONTNEED));
	t_expect_event(&a, 0xa2, ha2, (uintptr_t)q, (uintptr_t)q + 4 * t_page,
		       UMMUNOT_EVENT_CLEAR);
	t_expect_no_event(&b, "file b for a range only file a watches");

	/* A filter on one file does not affect the other. */
	t_set_filter(&b, 0);
	t_rearm(&a, ha2);
	hb = t_register(&b, (uintptr_t)q, 4 * t_page, 0xb2);
	T_OK("munmap", munmap(q, 4 * t_page));
	t_expect_event(&a, 0xa2, ha2, (uintptr_t)q, (uintptr_t)q + 4 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	t_expect_no_event(&b, "file b with mask 0");

	t_get_stats(&a, &sa);
	t_get_stats(&b, &sb);
	T_EQ("a: events", 3, sa.events);
	T_EQ("b: events", 1, sb.events);
	T_EQ("b: filtered[UNMAP]", 1, sb.filtered[UMMUNOT_EVENT_UNMAP]);
	T_EQ("a: regions", 2, sa.regions);
	T_EQ("b: regions", 2, sb.regions);
	T_EQ("a: event_mask", UMMUNOT_EVENT_MASK_DEFAULT, sa.event_mask);

	/* Handles are per file: a's handle is unknown to b unless it collides. */
	t_file_close(&b);
	t_file_close(&a);
	return T_EXIT_PASS;
}
