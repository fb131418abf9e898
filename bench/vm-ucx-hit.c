// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vm-ucx-hit: the cost of a hit in UCX's registration cache (ucs_rcache_get
 * + ucs_rcache_region_put of a cached range), in whatever configuration the
 * environment sets up: run it plain (UCX's own hooks) and with
 * libummunot-ucx preloaded (UCX's hooks off) in one VM boot, and compare.
 * The registration callback pins nothing (the hit path does not call it).
 * JSON on stdout: {"config": ..., "adapter": 0|1, "hit_ns_median": ...,
 * "hit_ns_min": ..., "batches": N, "hits_per_batch": M}.
 * Usage: vm-ucx-hit CONFIG-NAME [--quick]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "bench-util.h"
#include "noop-rcache.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	const size_t len = 1 << 20;
	unsigned int batches = 31, per = 200000, b, i;
	ucs_rcache_t *rc;
	ucs_rcache_region_t *r;
	double v[31];
	void *buf;
	int adapter;

	if (argc < 2)
		bu_die("usage: vm-ucx-hit CONFIG-NAME [--quick]");
	if (argc > 2 && !strcmp(argv[2], "--quick"))
		per = 20000;
	adapter = dlsym(RTLD_DEFAULT, "ummunot_ucx_stats") != NULL;
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		bu_die("mmap failed");
	memset(buf, 1, len);
	if (noop_rcache_create("bench", UCM_EVENT_VM_UNMAPPED, &rc) != UCS_OK)
		bu_die("ucs_rcache_create failed (UCX's memory events unavailable?)");
	if (ucs_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
		bu_die("ucs_rcache_get (miss) failed");
	ucs_rcache_region_put(rc, r);
	for (b = 0; b < batches; b++) {
		uint64_t t0 = bu_now_ns();

		for (i = 0; i < per; i++) {
			if (ucs_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
				bu_die("ucs_rcache_get (hit) failed");
			ucs_rcache_region_put(rc, r);
		}
		v[b] = (double)(bu_now_ns() - t0) / per;
	}
	qsort(v, batches, sizeof(v[0]), cmp_double);
	ucs_rcache_destroy(rc);
	printf("{\"config\": \"%s\", \"adapter\": %d, \"hit_ns_median\": %.2f, "
	       "\"hit_ns_min\": %.2f, \"batches\": %u, \"hits_per_batch\": %u}\n",
	       argv[1], adapter, v[batches / 2], v[0], batches, per);
	return 0;
}
