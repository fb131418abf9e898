// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* madvise(MADV_FREE) on touched anonymous pages yields CLEAR. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct t_file f;
	uint64_t h;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 10);
	if (madvise(p + t_page, 2 * t_page, MADV_FREE)) {
		if (errno == EINVAL)
			t_skip("MADV_FREE not supported by this kernel (EINVAL)");
		t_fail("madvise MADV_FREE: %s", t_errname(errno));
	}
	t_expect_event(&f, 10, h, (uintptr_t)p + t_page,
		       (uintptr_t)p + 3 * t_page, UMMUNOT_EVENT_CLEAR);
	munmap(p, 4 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
