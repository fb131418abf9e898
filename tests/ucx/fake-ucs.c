// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A stand-in for libucs.so.0 (and the libucm calls it carries) for one
 * check of libummunot-ucx's gate: built twice, once linked normally and
 * once with -Bsymbolic-functions, under the soname libucs.so.0, beside a
 * libucp.so.0 (fake-ucp.c) that says UCX 1.18.  A registration cache as
 * small as can be: one region per cache, looked up through
 * ucs_pgtable_lookup() like UCX's own.  The adapter must accept the first
 * (its probe sees the calls) and refuse the second in one line, at the
 * first cache, because -Bsymbolic binds the library's calls to itself.
 * A lookup that misses while the cache holds its region drops that region
 * (UCX's miss path invalidates what the unmap event queued) and registers
 * again.  Two hooks for tests/ucx/pgtable-driver.c: the function given to
 * fake_ucs_set_destroy_hook() runs at the end of ucs_rcache_destroy(),
 * after the cache's memory was freed (where another thread may create a
 * cache at the same address), and
 * fake_pgtable_set() puts a region in a page table no cache owns;
 * fake_ucs_lookups() counts this copy's lookups (tests/ucx/two-copies.c).
 * Never installed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ucx-abi.h"

#define EXPORT __attribute__((visibility("default")))

struct ucx_pgtable {
	struct ucx_pgt_region *only;
};

/* Static, with a setter looked up in this copy: an exported variable would
 * be the first copy's in every copy (the global scope wins). */
static void (*destroy_hook)(void);

EXPORT void fake_ucs_set_destroy_hook(void (*hook)(void))
{
	destroy_hook = hook;
}
/* This copy's page-table lookups (static for the same reason). */
static unsigned long lookups;

EXPORT unsigned long fake_ucs_lookups(void)
{
	return lookups;
}

struct ucx_rcache {
	char head[512];	/* its own malloc size class (pgtable-driver.c) */
	struct ucx_pgtable pgtable;	/* inside the cache, as in UCX */
	struct ucx_params_117 params;
};

EXPORT ucx_status_t ucs_pgtable_init(struct ucx_pgtable *pgtable, void *alloc_cb,
				     void *release_cb)
{
	(void)alloc_cb;
	(void)release_cb;
	pgtable->only = NULL;
	return UCX_OK;
}

EXPORT struct ucx_pgt_region *ucs_pgtable_lookup(const struct ucx_pgtable *pgtable,
						 ucx_pgt_addr_t address)
{
	struct ucx_pgt_region *r = pgtable->only;

	lookups++;
	return r && address >= r->start && address < r->end ? r : NULL;
}

EXPORT ucx_status_t ucs_rcache_create(const struct ucx_params_117 *params, const char *name,
				      void *stats_parent, struct ucx_rcache **rcache_p)
{
	/* malloc, not calloc (nor malloc + memset, which the compiler makes
	 * calloc): glibc's calloc does not take a chunk just freed from its
	 * tcache, malloc does, as UCX's allocations may. */
	struct ucx_rcache *rc = malloc(sizeof(*rc));

	(void)name;
	(void)stats_parent;
	if (!rc)
		return UCX_ERR_NO_MEMORY;
	rc->params = *params;
	ucs_pgtable_init(&rc->pgtable, NULL, NULL);
	*rcache_p = rc;
	return UCX_OK;
}

EXPORT void ucs_rcache_destroy(struct ucx_rcache *rc)
{
	const struct ucx_ops_118 *ops = rc->params.ops;

	if (rc->pgtable.only) {
		ops->mem_dereg(rc->params.context, rc, rc->pgtable.only);
		free(rc->pgtable.only);
	}
	free(rc);
	if (destroy_hook)
		destroy_hook();
}

EXPORT void fake_pgtable_set(struct ucx_pgtable *pgtable, struct ucx_pgt_region *region)
{
	pgtable->only = region;
}

EXPORT ucx_status_t ucs_rcache_get(struct ucx_rcache *rc, void *address, size_t length,
				   size_t alignment, int prot, void *arg,
				   struct ucx_pgt_region **region_p)
{
	const struct ucx_ops_118 *ops = rc->params.ops;
	struct ucx_pgt_region *r = ucs_pgtable_lookup(&rc->pgtable, (uintptr_t)address);
	ucx_status_t st;

	(void)alignment;
	(void)prot;
	if (r) {
		*region_p = r;
		return UCX_OK;
	}
	if (rc->pgtable.only) {		/* one region per cache: drop it */
		ops->mem_dereg(rc->params.context, rc, rc->pgtable.only);
		free(rc->pgtable.only);
		rc->pgtable.only = NULL;
	}
	r = calloc(1, rc->params.region_struct_size);
	if (!r)
		return UCX_ERR_NO_MEMORY;
	r->start = (uintptr_t)address;
	r->end = (uintptr_t)address + length;
	st = ops->mem_reg(rc->params.context, rc, arg, r, 0);
	if (st != UCX_OK) {
		free(r);
		return st;
	}
	rc->pgtable.only = r;
	*region_p = r;
	return UCX_OK;
}

EXPORT void ucs_rcache_region_put(struct ucx_rcache *rc, struct ucx_pgt_region *region)
{
	(void)rc;
	(void)region;
}

EXPORT void ucm_vm_munmap(void *address, size_t length)
{
	(void)address;
	(void)length;
}

EXPORT void ucm_set_external_event(int events)
{
	(void)events;
}

EXPORT void ucm_unset_external_event(int events)
{
	(void)events;
}
