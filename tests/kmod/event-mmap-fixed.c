// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mmap(MAP_FIXED) over part of a watched range yields UNMAP clipped to the overlap. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct t_file f;
	uint64_t h;
	char *p, *r;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(8, true);
	h = t_register(&f, (uintptr_t)p + 2 * t_page, 4 * t_page, 77);
	/* Replace pages 4..9 of an 8-page area: overlaps region pages 4..5. */
	r = mmap(p + 4 * t_page, 4 * t_page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	T_ASSERT(r == p + 4 * t_page, "mmap MAP_FIXED returned %p (%s)", r,
		 t_errname(errno));
	t_expect_event(&f, 77, h, (uintptr_t)p + 4 * t_page,
		       (uintptr_t)p + 6 * t_page, UMMUNOT_EVENT_UNMAP);
	munmap(p, 8 * t_page);
	t_expect_no_event(&f, "munmap after MAP_FIXED (region disarmed)");

	t_file_close(&f);
	return T_EXIT_PASS;
}
