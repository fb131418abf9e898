// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A process with a renamed copy of libucs (another soname, as vendor stacks
 * ship it), loaded with dlopen(RTLD_LOCAL) and called through dlsym(): the
 * copy's own calls to ucs_pgtable_init/lookup reach the preloaded
 * libummunot-ucx, which must forward them to that copy (its caller's) and
 * never abort.  With UCX 1.13 the copy is the only libucs in the process
 * (the adapter looked UCX up by the name libucs.so.0 and called abort()
 * when it was not loaded); with 1.18, whose libucm links libucs.so.0, the
 * system's is loaded too.  Run by tests/ucx/renamed-copy.sh.
 *
 * Usage: ucx-copy PATH-OF-THE-COPY
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "noop-rcache.h"	/* types and the noop ops only: nothing here links UCX */

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); putchar('\n'); exit(1); } while (0)

int main(int argc, char **argv)
{
	ucs_status_t (*create)(const ucs_rcache_params_t *, const char *, ucs_stats_node_t *,
			       ucs_rcache_t **);
	void (*destroy)(ucs_rcache_t *);
	void (*put)(ucs_rcache_t *, ucs_rcache_region_t *);
	void *get;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	ucs_rcache_params_t p;
	ucs_rcache_region_t *r;
	ucs_rcache_t *rc;
	unsigned int i;
	char *buf;
	void *h;

	if (argc != 2)
		FAIL("usage: ucx-copy PATH");
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		FAIL("dlopen %s: %s", argv[1], dlerror());
	/* UCX 1.18's libucm links libucs.so.0 itself: there the system's
	 * libucs is loaded too, and the copy's calls must still reach the
	 * copy (two copies); 1.13's does not (the copy alone). */
	printf("%s\n", dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD) ?
	       "libucs.so.0 is loaded too (through libucm): two copies" :
	       "the renamed copy is the only libucs");
	*(void **)&create = dlsym(h, "ucs_rcache_create");
	*(void **)&destroy = dlsym(h, "ucs_rcache_destroy");
	*(void **)&put = dlsym(h, "ucs_rcache_region_put");
	get = dlsym(h, "ucs_rcache_get");
	if (!create || !destroy || !put || !get)
		FAIL("the copy lacks ucs_rcache_*");
	memset(&p, 0, sizeof(p));
	p.region_struct_size = sizeof(struct noop_rcache_region);
#if !NOOP_RCACHE_GET_ALIGNMENT
	p.alignment = UCS_RCACHE_MIN_ALIGNMENT;
	p.max_alignment = page;
#endif
	p.ucm_events = UCM_EVENT_VM_UNMAPPED;
	p.ucm_event_priority = 1000;
	p.ops = &noop_rcache_ops;
	p.max_regions = ULONG_MAX;
	p.max_size = SIZE_MAX;
	p.max_unreleased = SIZE_MAX;
	if (create(&p, "copy", NULL, &rc) != UCS_OK)
		FAIL("the copy's ucs_rcache_create failed");
	buf = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap");
	memset(buf, 1, page);
	for (i = 0; i < 3; i++) {
		ucs_status_t st;
#if NOOP_RCACHE_GET_ALIGNMENT
		st = ((ucs_status_t (*)(ucs_rcache_t *, void *, size_t, size_t, int, void *,
					ucs_rcache_region_t **))get)(rc, buf, page,
								     UCS_RCACHE_MIN_ALIGNMENT,
								     PROT_READ | PROT_WRITE, NULL, &r);
#else
		st = ((ucs_status_t (*)(ucs_rcache_t *, void *, size_t, int, void *,
					ucs_rcache_region_t **))get)(rc, buf, page,
								     PROT_READ | PROT_WRITE, NULL, &r);
#endif
		if (st != UCS_OK)
			FAIL("the copy's ucs_rcache_get failed");
		put(rc, r);
	}
	if (noop_rcache_regs != 1)
		FAIL("3 gets registered %u times (expected 1: the copy's cache works)", noop_rcache_regs);
	destroy(rc);
	printf("PASS: the renamed copy's cache works with the adapter preloaded\n");
	return 0;
}
