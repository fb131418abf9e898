// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx and the page tables it finds lookups in (fake UCX,
 * tests/ucx/fake-ucs.c; run preloaded, in the guest with /dev/ummunot):
 *
 * 1. A cache created at the address of one just destroyed.  UCX frees a
 *    destroyed cache inside ucs_rcache_destroy(); another thread may create
 *    a cache at the same address before destroy returns (the fake does it
 *    there, through fake_ucs_set_destroy_hook(), so the window is always hit).
 *    The new cache's lookups must reach the new cache's wrap.  The adapter
 *    that took a cache out of its table only after UCX's destroy found the
 *    old wrap for the new cache's page table (same address) and read the
 *    new cache's regions at the old cache's tail offset: here, a slot index
 *    the driver's mem_reg filled with 0xff bytes (a crash, or the wrong
 *    slot).  Then the range is mapped again: the new cache must register it
 *    again (fed).
 * 2. A page table no cache owns (UCX's memtype cache and others): its
 *    lookups get UCX's answer untouched, even for a range whose fed region
 *    was just invalidated.
 *
 * Usage: pgtable-driver DIR [--expect-stale]
 *   --expect-stale  the negative control, without the adapter: the fake's
 *                   cache is fed by nobody, and after the range is mapped
 *                   again the new cache must hand out its old region.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake-driver.h"
#include "remap.h"
#include "ummunot-ucx.h"

#define SMALL_REGION	64	/* the destroyed cache's region_struct_size */
#define LARGE_REGION	128	/* the new cache's: its tail further out */

typedef ucx_status_t (*get7_fn)(struct ucx_rcache *, void *, size_t, size_t, int, void *,
				struct ucx_pgt_region **);

static ucx_status_t (*create_fn)(const struct ucx_params_117 *, const char *, void *,
				 struct ucx_rcache **);
static void (*destroy_fn)(struct ucx_rcache *);
static get7_fn get_fn;

static unsigned int regs;		/* mem_reg calls that reached the driver */
static struct ucx_rcache *old_rc, *new_rc;
static char *buf_b;
static int adapter;

/* mem_reg: fill the caller's part of the region (after start and end)
 * with 0xff: a tail read at the wrong offset finds slot 0xffffffff. */
static ucx_status_t fill_reg(void *ctx, struct ucx_rcache *rc, void *arg,
			     struct ucx_pgt_region *r, uint16_t flags)
{
	size_t size = (size_t)(uintptr_t)ctx;

	(void)rc; (void)arg; (void)flags;
	memset((char *)r + sizeof(*r), 0xff, size - sizeof(*r));
	regs++;
	return UCX_OK;
}

static const struct ucx_ops_118 fill_ops = { fill_reg, fake_dereg, fake_merge, fake_dump };

static struct ucx_rcache *cache(size_t region_size)
{
	struct ucx_params_117 p;
	struct ucx_rcache *rc;

	fake_params(&p);
	p.region_struct_size = region_size;
	p.ops = &fill_ops;
	p.context = (void *)(uintptr_t)region_size;
	if (create_fn(&p, "pgtable-driver", NULL, &rc) != UCX_OK)
		FAIL("ucs_rcache_create failed");
	return rc;
}

static struct ucx_pgt_region *get(struct ucx_rcache *rc, char *at)
{
	struct ucx_pgt_region *r;

	if (get_fn(rc, at, page, 1, PROT_READ | PROT_WRITE, NULL, &r) != UCX_OK)
		FAIL("ucs_rcache_get failed");
	return r;
}

/* Inside ucs_rcache_destroy(old_rc), after UCX freed it. */
static void create_in_destroy(void)
{
	struct ucx_pgt_region *r;
	unsigned int before;

	new_rc = cache(LARGE_REGION);
	if (new_rc != old_rc)
		FAIL("precondition: the new cache is at %p, not at the destroyed one's %p "
		     "(malloc did not reuse the address)", (void *)new_rc, (void *)old_rc);
	r = get(new_rc, buf_b);
	before = regs;
	if (get(new_rc, buf_b) != r || regs != before)
		FAIL("the new cache's second get of an unchanged range was not a hit");
	printf("a cache created inside destroy, at the destroyed cache's address: hit\n");
}

int main(int argc, char **argv)
{
	struct ucx_pgt_region *(*lookup_fn)(const struct ucx_pgtable *, ucx_pgt_addr_t);
	ucx_status_t (*pgt_init_fn)(struct ucx_pgtable *, void *, void *);
	void (*pgt_set_fn)(struct ucx_pgtable *, struct ucx_pgt_region *);
	void (*set_hook)(void (*)(void));
	int (*stats_fn)(struct ummunot_ucx_stats *, size_t);
	struct ucx_pgt_region foreign, *r;
	struct ummunot_ucx_stats st;
	void *pgt_storage[8];
	struct ucx_pgtable *pgt = (struct ucx_pgtable *)pgt_storage;
	char path[PATH_MAX], *buf_a;
	unsigned int before;
	int expect_stale;

	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--expect-stale")))
		FAIL("usage: pgtable-driver DIR [--expect-stale]");
	expect_stale = argc == 3;
	page = (size_t)sysconf(_SC_PAGESIZE);
	snprintf(path, sizeof(path), "%s/libucp.so.0", argv[1]);
	if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL))
		FAIL("dlopen %s: %s", path, dlerror());
	*(void **)&create_fn = dlsym(RTLD_DEFAULT, "ucs_rcache_create");
	*(void **)&destroy_fn = dlsym(RTLD_DEFAULT, "ucs_rcache_destroy");
	*(void **)&get_fn = dlsym(RTLD_DEFAULT, "ucs_rcache_get");
	*(void **)&lookup_fn = dlsym(RTLD_DEFAULT, "ucs_pgtable_lookup");
	*(void **)&pgt_init_fn = dlsym(RTLD_DEFAULT, "ucs_pgtable_init");
	*(void **)&pgt_set_fn = dlsym(RTLD_DEFAULT, "fake_pgtable_set");
	*(void **)&set_hook = dlsym(RTLD_DEFAULT, "fake_ucs_set_destroy_hook");
	*(void **)&stats_fn = dlsym(RTLD_DEFAULT, "ummunot_ucx_stats");
	if (!create_fn || !destroy_fn || !get_fn || !lookup_fn || !pgt_init_fn || !pgt_set_fn ||
	    !set_hook)
		FAIL("the fake UCX at %s is incomplete", argv[1]);
	adapter = stats_fn != NULL;
	if (adapter == expect_stale)
		FAIL("%s", expect_stale ? "the control runs without libummunot-ucx preloaded" :
		     "libummunot-ucx is not preloaded");

	buf_a = map_page(NULL);
	buf_b = map_page(NULL);

	/* 1. A cache created at a destroyed cache's address, inside destroy. */
	old_rc = cache(SMALL_REGION);
	get(old_rc, buf_a);
	set_hook(create_in_destroy);
	destroy_fn(old_rc);
	set_hook(NULL);
	if (!new_rc)
		FAIL("the fake's destroy hook did not run");
	renew(buf_b);
	before = regs;
	get(new_rc, buf_b);
	if (expect_stale) {
		if (regs != before)
			FAIL("control: the unfed cache registered the remapped range again");
		printf("control: the unfed cache handed out its old region (stale)\nPASS\n");
		destroy_fn(new_rc);
		return 0;
	}
	if (regs == before)
		FAIL("stale: the new cache handed out its old region after munmap + mmap");
	printf("after munmap + mmap: registered again\n");

	/* 2. A page table no cache owns, over the same range. */
	if (pgt_init_fn(pgt, NULL, NULL) != UCX_OK)
		FAIL("ucs_pgtable_init of a page table of our own failed");
	memset(&foreign, 0, sizeof(foreign));
	foreign.start = (uintptr_t)buf_b;
	foreign.end = (uintptr_t)buf_b + page;
	pgt_set_fn(pgt, &foreign);
	renew(buf_b);			/* invalidates the fed region over it */
	if (lookup_fn(pgt, (uintptr_t)buf_b) != &foreign)
		FAIL("a lookup in a page table no cache owns did not get UCX's answer");
	before = regs;
	r = get(new_rc, buf_b);
	if (regs == before || !r)
		FAIL("stale: the fed cache handed out its old region after munmap + mmap");
	if (lookup_fn(pgt, (uintptr_t)buf_b) != &foreign)
		FAIL("a lookup in a page table no cache owns did not get UCX's answer");
	printf("a page table no cache owns: UCX's answer, before and after the drain\n");

	destroy_fn(new_rc);
	if (stats_fn(&st, sizeof(st)) < 0)
		FAIL("ummunot_ucx_stats");
	printf("adapter: active %u, refused %u, rcaches %llu, watched %llu, dead misses %llu\n",
	       st.active, st.refused, (unsigned long long)st.rcaches,
	       (unsigned long long)st.watched, (unsigned long long)st.dead_misses);
	if (!st.active || st.refused)
		FAIL("the adapter was not active");
	printf("PASS\n");
	return 0;
}
