/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * One page mapped, and mapped again at the same address, for the guest
 * tests that check a cache registers a range again (adapter-defects.c,
 * pgtable-driver.c).  The includer defines FAIL() and sets page.
 */
#ifndef UMMUNOT_TESTS_UCX_REMAP_H
#define UMMUNOT_TESTS_UCX_REMAP_H

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

static size_t page;

/* A new page, at @at (which must be free) or anywhere, filled. */
static char *map_page(char *at)
{
	char *p = mmap(at, page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	if (p == MAP_FAILED || (at && p != at))
		FAIL("mmap: %s", strerror(errno));
	memset(p, 0x5a, page);
	return p;
}

/* munmap() @p's page and map a new one at the same address. */
static void renew(char *p)
{
	if (munmap(p, page))
		FAIL("munmap: %s", strerror(errno));
	map_page(p);
}

#endif
