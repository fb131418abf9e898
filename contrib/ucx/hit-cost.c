// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hit-cost: what a registration-cache hit costs in one UCX build, to
 * compare a UCX tree with and without contrib/ucx/series (no event source
 * set in either).  Built by contrib/ucx/hit-cost against a UCX source and
 * build tree, because the hit UCP takes is the inline
 * ucs_rcache_lookup_unsafe() of rcache.inl, which UCX does not install.
 *
 *   hit-cost lookup N   N x (ucs_rcache_lookup_unsafe + put_unsafe) on one
 *                       cached 64 KiB region, as ucp_memh_get() does under
 *                       UCP's context lock
 *   hit-cost get N      N x (ucs_rcache_get + ucs_rcache_region_put), the
 *                       out-of-line hit
 *
 * Prints "MODE N NS_PER_HIT".  The cache is tests/ucx/noop-rcache.h's,
 * listening to UCM_EVENT_VM_UNMAPPED as UCP's does, with the event declared
 * external so that no UCM hook is installed; registration is a no-op.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <ucm/api/ucm.h>
#include <ucs/debug/log_def.h>	/* rcache.inl needs it and its includes */
#include <ucs/profile/profile.h>
#include <ucs/datastruct/queue.h>
#include <ucs/memory/rcache.h>
#include <ucs/memory/rcache.inl>

/* The cache every UCX figure of the project uses (tests/ucx). */
#include "noop-rcache.h"

#define LEN (64 * 1024)

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The measured loop; its own function so that callgrind can count it alone. */
static __attribute__((noinline)) unsigned long
hit_loop(ucs_rcache_t *rcache, ucs_rcache_region_t *region, void *buf,
	 unsigned long n, int get)
{
	ucs_rcache_region_t *r;
	ucs_status_t status;
	unsigned long i;

	for (i = 0; i < n; i++) {
		if (get) {
			status = noop_rcache_get(rcache, buf, LEN,
						 PROT_READ | PROT_WRITE, NULL, &r);
			if (status != UCS_OK || r != region)
				break;
			ucs_rcache_region_put(rcache, r);
		} else {
			r = ucs_rcache_lookup_unsafe(rcache, buf, LEN,
						     UCS_RCACHE_MIN_ALIGNMENT,
						     PROT_READ | PROT_WRITE);
			if (r != region)
				break;
			ucs_rcache_region_put_unsafe(rcache, r);
		}
		/* One hit at a time, as an MPI send makes them. */
		__asm__ __volatile__("" ::: "memory");
	}
	return i;
}

int main(int argc, char **argv)
{
	ucs_rcache_region_t *region;
	ucs_rcache_t *rcache;
	ucs_status_t status;
	unsigned long i, n;
	double t0, t1;
	void *buf;
	int get;

	if (argc != 3 || (strcmp(argv[1], "lookup") && strcmp(argv[1], "get"))) {
		fprintf(stderr, "usage: %s lookup|get N\n", argv[0]);
		return 2;
	}
	get = strcmp(argv[1], "get") == 0;
	n = strtoul(argv[2], NULL, 0);

	ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
	status = noop_rcache_create("hit-cost", UCM_EVENT_VM_UNMAPPED, &rcache);
	if (status != UCS_OK) {
		fprintf(stderr, "ucs_rcache_create: %s\n", ucs_status_string(status));
		return 1;
	}
	buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED)
		return 1;
	status = noop_rcache_get(rcache, buf, LEN, PROT_READ | PROT_WRITE, NULL,
				 &region);
	if (status != UCS_OK) {
		fprintf(stderr, "ucs_rcache_get: %s\n", ucs_status_string(status));
		return 1;
	}

	t0 = now_ns();
	i = hit_loop(rcache, region, buf, n, get);
	t1 = now_ns();
	if (i != n) {
		fprintf(stderr, "hit-cost: iteration %lu missed\n", i);
		return 1;
	}
	printf("%s %lu %.2f\n", argv[1], n, n ? (t1 - t0) / n : 0.0);

	ucs_rcache_region_put(rcache, region);
	ucs_rcache_destroy(rcache);
	munmap(buf, LEN);
	return 0;
}
