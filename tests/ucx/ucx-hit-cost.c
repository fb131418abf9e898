// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ucx-hit-cost: what a hit in UCX's registration cache costs, in whatever
 * configuration the environment sets up (run it plain, UCX's own hooks,
 * and with libummunot-ucx preloaded, UCX's hooks off, in one VM boot and
 * compare).  Two figures, each the median (and minimum) of 31 batches:
 *   get   ucs_rcache_get + ucs_rcache_region_put of a cached 1 MiB range
 *         (UCX 1.13's only lookup; on UCX 1.18 it passes through both the
 *         adapter's ucs_rcache_get and its ucs_pgtable_lookup, so it bounds
 *         what UCP's inline hit, which only calls ucs_pgtable_lookup, pays)
 *   pgt   ucs_pgtable_lookup on a page table that is not a cache's (the
 *         adapter's pass-through: memtype caches and the like)
 * Usage: ucx-hit-cost CONFIG-NAME [HITS-PER-BATCH]; one line on stdout.
 * Not a test: nothing is expected of the figures.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <ucs/datastruct/pgtable.h>

#include "bench-util.h"
#include "noop-rcache.h"

#define BATCHES 31


static ucs_pgt_dir_t *dir_alloc(const ucs_pgtable_t *pgt)
{
	(void)pgt;
	return aligned_alloc(64, sizeof(ucs_pgt_dir_t) + 64 - sizeof(ucs_pgt_dir_t) % 64);
}

static void dir_release(const ucs_pgtable_t *pgt, ucs_pgt_dir_t *dir)
{
	(void)pgt;
	free(dir);
}

int main(int argc, char **argv)
{
	const size_t len = 1 << 20;
	unsigned int per = argc > 2 ? (unsigned int)strtoul(argv[2], NULL, 0) : 100000, b, i;
	double get[BATCHES], pgt[BATCHES];
	static ucs_pgt_region_t preg __attribute__((aligned(64)));
	ucs_pgtable_t table;
	ucs_rcache_region_t *r;
	ucs_rcache_t *rc;
	char *buf;

	if (argc < 2 || !per) {
		fprintf(stderr, "usage: ucx-hit-cost CONFIG-NAME [HITS-PER-BATCH]\n");
		return 2;
	}
	buf = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return 1;
	memset(buf, 1, 2 * len);
	if (noop_rcache_create("hit-cost", UCM_EVENT_VM_UNMAPPED, &rc) != UCS_OK) {
		fprintf(stderr, "ucs_rcache_create failed (UCX's memory events unavailable?)\n");
		return 1;
	}
	if (noop_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
		return 1;
	ucs_rcache_region_put(rc, r);
	if (ucs_pgtable_init(&table, dir_alloc, dir_release) != UCS_OK)
		return 1;
	preg.start = (uintptr_t)buf + len;
	preg.end = preg.start + len;
	if (ucs_pgtable_insert(&table, &preg) != UCS_OK)
		return 1;
	for (b = 0; b < BATCHES; b++) {
		uint64_t t0 = bu_now_ns();

		for (i = 0; i < per; i++) {
			if (noop_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
				return 1;
			ucs_rcache_region_put(rc, r);
		}
		get[b] = (double)(bu_now_ns() - t0) / per;
		t0 = bu_now_ns();
		for (i = 0; i < per; i++)
			if (ucs_pgtable_lookup(&table, preg.start + (i & 255) * 64) != &preg)
				return 1;
		pgt[b] = (double)(bu_now_ns() - t0) / per;
	}
	double get_median = bu_median(get, BATCHES);	/* (sorts: [0] is the minimum) */
	double pgt_median = bu_median(pgt, BATCHES);

	ucs_pgtable_remove(&table, &preg);
	ucs_pgtable_cleanup(&table);
	ucs_rcache_destroy(rc);
	printf("%-10s adapter %d: get+put %.1f ns median (%.1f min), foreign pgtable lookup %.1f ns "
	       "median (%.1f min), %u per batch, %d batches\n", argv[1],
	       dlsym(RTLD_DEFAULT, "ummunot_ucx_stats") != NULL, get_median, get[0],
	       pgt_median, pgt[0], per, BATCHES);
	return 0;
}
