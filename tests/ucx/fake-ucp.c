// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libucp.so.0 beside tests/ucx/fake-ucs.c: says UCX 1.18 and is linked
 * with that libucs (the adapter checks both).  Never installed.
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

struct ucx_rcache;
struct ucx_pgt_region;
int ucs_rcache_create(const void *params, const char *name, void *stats_parent,
		      struct ucx_rcache **rcache_p);
int ucs_rcache_get(struct ucx_rcache *rcache, void *address, size_t length, size_t alignment,
		   int prot, void *arg, struct ucx_pgt_region **region_p);
void ucs_rcache_destroy(struct ucx_rcache *rcache);

EXPORT void ucp_get_version(unsigned int *major, unsigned int *minor, unsigned int *release)
{
	*major = 1;
	*minor = 18;
	*release = 1;
}

/*
 * What UCP and UCT do with libucs: call it through this library's PLT, so
 * that a preloaded adapter sees this library as the caller
 * (tests/ucx/two-copies.c).  Never as a tail call, which UCX's callers of
 * these functions do not make either: the adapter binds a call by its
 * return address, and a tail call's is in the caller's caller (here the
 * test program, whose scope is the global one: the first copy).
 */
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

EXPORT int ucp_fake_create(const void *params, struct ucx_rcache **rcache_p)
{
	int st = ucs_rcache_create(params, "fake-ucp", NULL, rcache_p);

	NO_TAIL_CALL();
	return st;
}

EXPORT int ucp_fake_get(struct ucx_rcache *rcache, void *address, size_t length,
			struct ucx_pgt_region **region_p)
{
	int st = ucs_rcache_get(rcache, address, length, 1, 3, NULL, region_p);

	NO_TAIL_CALL();
	return st;
}

EXPORT void ucp_fake_destroy(struct ucx_rcache *rcache)
{
	ucs_rcache_destroy(rcache);
	NO_TAIL_CALL();
}
