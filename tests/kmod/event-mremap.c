// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mremap: a move reports UNMAP on the old range (and on a replaced target); a shrink on the tail. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct t_expect exp[2];
	struct t_file f;
	uint64_t h, ht, hs;
	char *p, *dst, *s, *r;

	t_init(argc, argv);
	t_file_open(&f, 0);

	/* Move to a fixed target that is itself watched and mapped. */
	p = t_map_anon(4, true);
	dst = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 1);
	ht = t_register(&f, (uintptr_t)dst, 4 * t_page, 2);
	r = mremap(p, 4 * t_page, 4 * t_page, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	T_ASSERT(r == dst, "mremap to %p returned %p (%s)", dst, r, t_errname(errno));
	exp[0] = (struct t_expect){ 1, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
				    UMMUNOT_EVENT_UNMAP, false };
	exp[1] = (struct t_expect){ 2, ht, (uintptr_t)dst, (uintptr_t)dst + 4 * t_page,
				    UMMUNOT_EVENT_UNMAP, false };
	t_expect_events(&f, exp, 2);

	/* Nothing more when the moved mapping goes away: both are disarmed. */
	T_OK("munmap moved", munmap(dst, 4 * t_page));
	t_expect_no_event(&f, "munmap after mremap (regions disarmed)");

	/* Shrink in place: the cut-off tail is unmapped. */
	s = t_map_anon(8, true);
	hs = t_register(&f, (uintptr_t)s, 8 * t_page, 3);
	r = mremap(s, 8 * t_page, 3 * t_page, 0);
	T_ASSERT(r == s, "mremap shrink returned %p (%s)", r, t_errname(errno));
	t_expect_event(&f, 3, hs, (uintptr_t)s + 3 * t_page,
		       (uintptr_t)s + 8 * t_page, UMMUNOT_EVENT_UNMAP);
	munmap(s, 3 * t_page);

	t_file_close(&f);
	return T_EXIT_PASS;
}
