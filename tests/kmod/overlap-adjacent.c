// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Overlapping regions each report their own clipped range; adjacent and identical regions behave. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct t_expect exp[3];
	uint64_t a, b, c, d, e, g;
	struct t_file f;
	uintptr_t base;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(16, true);
	base = (uintptr_t)p;

	a = t_register(&f, base + 0 * t_page, 4 * t_page, 1);	/* [0, 4) */
	b = t_register(&f, base + 2 * t_page, 4 * t_page, 2);	/* [2, 6) */
	c = t_register(&f, base + 6 * t_page, 2 * t_page, 3);	/* [6, 8) adjacent to b */
	d = t_register(&f, base + 1 * t_page, 2 * t_page, 4);	/* [1, 3) inside a */
	e = t_register(&f, base + 2 * t_page, 4 * t_page, 5);	/* == b */
	g = t_register(&f, base + 8 * t_page, 2 * t_page, 6);	/* [8, 10) */

	/* Zap [3, 6): hits a [3,4), b [3,6), e [3,6); not c (starts at 6), d (ends at 3). */
	T_OK("madvise", madvise(p + 3 * t_page, 3 * t_page, MADV_DONTNEED));
	exp[0] = (struct t_expect){ 1, a, base + 3 * t_page, base + 4 * t_page,
				    UMMUNOT_EVENT_CLEAR, false };
	exp[1] = (struct t_expect){ 2, b, base + 3 * t_page, base + 6 * t_page,
				    UMMUNOT_EVENT_CLEAR, false };
	exp[2] = (struct t_expect){ 5, e, base + 3 * t_page, base + 6 * t_page,
				    UMMUNOT_EVENT_CLEAR, false };
	t_expect_events(&f, exp, 3);

	/* Zap [6, 8) exactly: only c; g starts where it ends. */
	T_OK("madvise", madvise(p + 6 * t_page, 2 * t_page, MADV_DONTNEED));
	t_expect_event(&f, 3, c, base + 6 * t_page, base + 8 * t_page,
		       UMMUNOT_EVENT_CLEAR);

	/* Unmap [0, 2): a is disarmed, d reports [1, 2). */
	T_OK("munmap", munmap(p, 2 * t_page));
	t_expect_event(&f, 4, d, base + 1 * t_page, base + 2 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	/* g last, untouched by all of the above. */
	T_OK("munmap", munmap(p + 8 * t_page, 8 * t_page));
	t_expect_event(&f, 6, g, base + 8 * t_page, base + 10 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	munmap(p, 16 * t_page);
	t_expect_no_event(&f, "final munmap (all disarmed)");
	t_file_close(&f);
	return T_EXIT_PASS;
}
