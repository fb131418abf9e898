// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Shrinking the heap with brk yields UNMAP on the released pages. */
#include "helpers.h"

#include <sys/syscall.h>
#include <unistd.h>

static uintptr_t sys_brk(uintptr_t addr)
{
	return (uintptr_t)syscall(SYS_brk, addr);
}

int main(int argc, char **argv)
{
	uintptr_t cur, base, top, got;
	struct t_file f;
	uint64_t h;

	t_init(argc, argv);
	t_file_open(&f, 0);

	/* No malloc from here on: we own the program break. */
	cur = sys_brk(0);
	base = (cur + t_page - 1) & ~(uintptr_t)(t_page - 1);
	top = base + 8 * t_page;
	got = sys_brk(top);
	if (got != top)
		t_skip("brk could not grow the heap to 0x%lx (got 0x%lx)",
		       (unsigned long)top, (unsigned long)got);
	t_touch((void *)base, 8 * t_page);
	h = t_register(&f, base + 2 * t_page, 6 * t_page, 5);

	got = sys_brk(base + 4 * t_page);	/* sbrk(-4 pages) */
	t_expect_event(&f, 5, h, base + 4 * t_page, top, UMMUNOT_EVENT_UNMAP);
	T_EQ("brk after shrink", base + 4 * t_page, got);

	sys_brk(cur);
	t_file_close(&f);
	return T_EXIT_PASS;
}
