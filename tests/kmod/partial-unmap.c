// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Unmapping part of a region reports only the overlap, including unaligned region edges. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct t_file f;
	uint64_t h1, h2, h3;
	uintptr_t b;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(32, true);
	b = (uintptr_t)p;

	/* Region pages 1..5, unmap pages 3..7: event [3, 5). */
	h1 = t_register(&f, b + 1 * t_page, 4 * t_page, 21);
	T_OK("munmap", munmap(p + 3 * t_page, 4 * t_page));
	t_expect_event(&f, 21, h1, b + 3 * t_page, b + 5 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	/* Unaligned region [8p+100, 11p+100), unmap pages 8..10: [8p+100, 10p). */
	h2 = t_register(&f, b + 8 * t_page + 100, 3 * t_page, 22);
	T_OK("munmap", munmap(p + 8 * t_page, 2 * t_page));
	t_expect_event(&f, 22, h2, b + 8 * t_page + 100, b + 10 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	/* Unmap strictly inside a region (a hole): [14p, 15p). */
	h3 = t_register(&f, b + 12 * t_page + 7, 6 * t_page, 23);
	T_OK("munmap", munmap(p + 14 * t_page, t_page));
	t_expect_event(&f, 23, h3, b + 14 * t_page, b + 15 * t_page,
		       UMMUNOT_EVENT_UNMAP);

	/* A region of one byte in the middle of a page. */
	t_rearm(&f, h3);
	T_OK("munmap", munmap(p + 16 * t_page, t_page));
	t_expect_event(&f, 23, h3, b + 16 * t_page, b + 17 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	h1 = t_register(&f, b + 20 * t_page + 1000, 1, 24);
	T_OK("munmap", munmap(p + 20 * t_page, t_page));
	t_expect_event(&f, 24, h1, b + 20 * t_page + 1000, b + 20 * t_page + 1001,
		       UMMUNOT_EVENT_UNMAP);

	munmap(p, 32 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
