// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libucp.so.0 beside tests/ucx/fake-ucs.c: says UCX 1.18 and is linked
 * with that libucs (the adapter checks both).  Never installed.
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

struct ucx_rcache;
int ucs_rcache_create(const void *params, const char *name, void *stats_parent,
		      struct ucx_rcache **rcache_p);

EXPORT void ucp_get_version(unsigned int *major, unsigned int *minor, unsigned int *release)
{
	*major = 1;
	*minor = 18;
	*release = 1;
}

/* A reference to libucs, as the real libucp has. */
EXPORT int ucp_fake_create(struct ucx_rcache **rcache_p)
{
	return ucs_rcache_create(NULL, NULL, NULL, rcache_p);
}
