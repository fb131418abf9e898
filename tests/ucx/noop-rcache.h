/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A UCX registration cache (ucs_rcache) for checks and benchmarks that
 * register nothing: no size, count or unreleased-bytes limit, page-aligned
 * regions, and ops whose "registration" stores a key and counts itself.
 * C and C++.
 * Used by tests/ucx and bench/ (cache-hit, cache-mem, cache-scale,
 * vm-ucx-hit), so every UCX figure in Documentation/performance.md comes
 * from one configuration.
 */
#ifndef UMMUNOT_TESTS_NOOP_RCACHE_H
#define UMMUNOT_TESTS_NOOP_RCACHE_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {		/* UCX 1.13's rcache.h has no C++ guard of its own */
#endif
#include <ucm/api/ucm.h>
#include <ucp/api/ucp_version.h>
#include <ucs/memory/rcache.h>
#ifdef __cplusplus
}
#endif

/*
 * What changed in ucs_rcache between the UCX versions the project tests
 * (1.13 and 1.18): UCX 1.17 moved the alignment from the cache's params to
 * a fourth argument of ucs_rcache_get(); UCX 1.18 added ops->merge, which
 * it calls without a NULL check.  Programs here use noop_rcache_get() and
 * NOOP_RCACHE_OPS() and compile against both.
 */
#if UCP_API_VERSION >= UCP_VERSION(1, 17)
#define NOOP_RCACHE_GET_ALIGNMENT 1
#else
#define NOOP_RCACHE_GET_ALIGNMENT 0
#endif
#if UCP_API_VERSION >= UCP_VERSION(1, 18)
#define NOOP_RCACHE_HAVE_MERGE 1
static inline void noop_rcache_merge(void *ctx, ucs_rcache_t *rc, void *arg, ucs_rcache_region_t *r)
{
	(void)ctx; (void)rc; (void)arg; (void)r;
}
/* An ops struct from mem_reg, mem_dereg and dump_region (merge: nothing). */
#define NOOP_RCACHE_OPS(reg, dereg, dump) { reg, dereg, noop_rcache_merge, dump }
#else
#define NOOP_RCACHE_HAVE_MERGE 0
#define NOOP_RCACHE_OPS(reg, dereg, dump) { reg, dereg, dump }
#endif

/* ucs_rcache_get() with the alignment the cache was created with. */
static inline ucs_status_t noop_rcache_get(ucs_rcache_t *rc, void *address, size_t length,
					   int prot, void *arg, ucs_rcache_region_t **region_p)
{
#if NOOP_RCACHE_GET_ALIGNMENT
	return ucs_rcache_get(rc, address, length, UCS_RCACHE_MIN_ALIGNMENT, prot, arg, region_p);
#else
	return ucs_rcache_get(rc, address, length, prot, arg, region_p);
#endif
}

/* A region as a transport keeps it: UCX's part and the key it registered. */
struct noop_rcache_region {
	ucs_rcache_region_t super;
	uint32_t lkey;
};

/* Registrations made by noop_rcache_ops (relaxed: only read when quiet). */
static unsigned int noop_rcache_regs;

static inline ucs_status_t noop_rcache_reg(void *ctx, ucs_rcache_t *rc, void *arg,
					   ucs_rcache_region_t *r, uint16_t flags)
{
	(void)ctx; (void)rc; (void)arg; (void)flags;
	((struct noop_rcache_region *)r)->lkey = 1;
	__atomic_fetch_add(&noop_rcache_regs, 1, __ATOMIC_RELAXED);
	return UCS_OK;
}

static inline void noop_rcache_dereg(void *ctx, ucs_rcache_t *rc, ucs_rcache_region_t *r)
{
	(void)ctx; (void)rc; (void)r;
}

static inline void noop_rcache_dump(void *ctx, ucs_rcache_t *rc, ucs_rcache_region_t *r,
				    char *buf, size_t max)
{
	(void)ctx; (void)rc; (void)r;
	snprintf(buf, max, "noop");
}

static const ucs_rcache_ops_t noop_rcache_ops =
	NOOP_RCACHE_OPS(noop_rcache_reg, noop_rcache_dereg, noop_rcache_dump);

/*
 * Create an unlimited cache named @name whose regions are @region_size
 * bytes (at least sizeof(ucs_rcache_region_t)), registered through @ops,
 * subscribed to @ucm_events (0 or UCM_EVENT_VM_UNMAPPED, at priority 1000).
 */
static inline ucs_status_t rcache_create_unlimited(const char *name, size_t region_size,
						   const ucs_rcache_ops_t *ops,
						   unsigned int ucm_events, ucs_rcache_t **out)
{
	ucs_rcache_params_t p;

	memset(&p, 0, sizeof(p));
	p.region_struct_size = region_size;
#if !NOOP_RCACHE_GET_ALIGNMENT
	p.alignment = UCS_RCACHE_MIN_ALIGNMENT;
	p.max_alignment = (size_t)sysconf(_SC_PAGESIZE);
#endif
	p.ucm_events = ucm_events;
	p.ucm_event_priority = 1000;
	p.ops = ops;
	p.max_regions = ULONG_MAX;
	p.max_size = SIZE_MAX;
	p.max_unreleased = SIZE_MAX;
	return ucs_rcache_create(&p, name, NULL, out);
}

/* The same with struct noop_rcache_region and noop_rcache_ops. */
static inline ucs_status_t noop_rcache_create(const char *name, unsigned int ucm_events,
					      ucs_rcache_t **out)
{
	return rcache_create_unlimited(name, sizeof(struct noop_rcache_region),
				       &noop_rcache_ops, ucm_events, out);
}

#endif
