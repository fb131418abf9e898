// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * UCX's registration cache used by several threads at once (as with UCX
 * progress threads) while another thread gives buffers back to the kernel
 * and maps new pages at the same addresses.  No RDMA: the cache's
 * registration callback records a version number the remapping thread
 * writes into each new mapping; a lookup that returns a registration whose
 * version is not the buffer's current one returned a stale registration.
 * Each remap happens-before the lookups that follow it (a rwlock), so a
 * correct feeder must have invalidated the old registration by then, in
 * whichever thread drains the events.
 *
 * Usage: ucx-threads --expect clean|stale [--adapter|--no-adapter]
 *                    [--external] [--burst]
 *   --external  declare UCM_EVENT_VM_UNMAPPED external (UCX's hooks off,
 *               nothing feeding the cache: the negative control)
 *   --adapter   require libummunot-ucx active, with events delivered
 *   --burst     remap every buffer (128) between two lookups: with
 *               UMMUNOT_UCX_RING_ENTRIES=64 the ring overflows, and with
 *               --adapter at least one overflow must have been handled
 * Exit 0 as expected, 1 otherwise.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "noop-rcache.h"
#include "ummunot-ucx.h"

#define NBUF 128
#define GETTERS 3

struct treg {
	ucs_rcache_region_t super;
	uint64_t version;	/* the buffer's version when registered */
};

static ucs_rcache_t *rc;
static char *area;
static size_t page;
static pthread_rwlock_t phase;
static atomic_bool done;
static atomic_ulong stale, gets;
static atomic_long budget;	/* lookups allowed before the next remap */
static bool burst;

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); putchar('\n'); exit(1); } while (0)

static char *buf(unsigned int j) { return area + (size_t)j * 2 * page; }

static ucs_status_t reg(void *c, ucs_rcache_t *r, void *arg, ucs_rcache_region_t *region,
			uint16_t flags)
{
	(void)c; (void)r; (void)arg; (void)flags;
	((struct treg *)region)->version = *(volatile uint64_t *)region->super.start;
	return UCS_OK;
}

static void dereg(void *c, ucs_rcache_t *r, ucs_rcache_region_t *region)
{
	(void)c; (void)r; (void)region;
}

static void dump(void *c, ucs_rcache_t *r, ucs_rcache_region_t *region, char *b, size_t max)
{
	(void)c; (void)r; (void)region;
	snprintf(b, max, "threads");
}

static const ucs_rcache_ops_t ops = NOOP_RCACHE_OPS(reg, dereg, dump);

static void remap(unsigned int j, uint64_t version)
{
	char *b = buf(j), *p;

	if (munmap(b, page))
		FAIL("munmap: %s", strerror(errno));
	p = mmap(b, page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != b)
		FAIL("mmap at %p: %s", (void *)b, p == MAP_FAILED ? strerror(errno) : "moved");
	*(uint64_t *)p = version;
}

static void *getter(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;

	while (!atomic_load(&done)) {
		unsigned int j = (unsigned int)rand_r(&seed) % NBUF;
		ucs_rcache_region_t *r;
		uint64_t want;

		if (atomic_fetch_sub(&budget, 1) <= 0) {
			atomic_fetch_add(&budget, 1);
			sched_yield();
			continue;
		}
		pthread_rwlock_rdlock(&phase);
		want = *(volatile uint64_t *)buf(j);
		if (noop_rcache_get(rc, buf(j), page, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
			FAIL("ucs_rcache_get failed");
		if (((struct treg *)r)->version != want)
			atomic_fetch_add(&stale, 1);
		ucs_rcache_region_put(rc, r);
		pthread_rwlock_unlock(&phase);
		atomic_fetch_add(&gets, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int (*stats_fn)(struct ummunot_ucx_stats *, size_t);
	bool external = false, want_adapter = false, want_none = false;
	uint64_t version[NBUF];
	const char *expect = NULL;
	struct ummunot_ucx_stats st;
	pthread_t t[GETTERS];
	unsigned int i, j, rounds;
	int k;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--external"))
			external = true;
		else if (!strcmp(argv[k], "--adapter"))
			want_adapter = true;
		else if (!strcmp(argv[k], "--no-adapter"))
			want_none = true;
		else if (!strcmp(argv[k], "--burst"))
			burst = true;
		else if (!strcmp(argv[k], "--expect") && k + 1 < argc)
			expect = argv[++k];
		else
			FAIL("unknown or incomplete argument '%s' (see the top of ucx-threads.c)", argv[k]);
	}
	if (!expect || (strcmp(expect, "clean") && strcmp(expect, "stale")))
		FAIL("--expect clean|stale is required");
	stats_fn = (int (*)(struct ummunot_ucx_stats *, size_t))dlsym(RTLD_DEFAULT, "ummunot_ucx_stats");
	if (want_adapter && !stats_fn)
		FAIL("libummunot-ucx is not loaded (LD_PRELOAD=libummunot-ucx.so.0)");
	if (want_none && stats_fn)
		FAIL("libummunot-ucx is loaded, but --no-adapter was asked for");
	if (external)
		ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);

	{
		/* glibc prefers readers by default: the remapper would starve. */
		pthread_rwlockattr_t a;

		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&phase, &a);
		pthread_rwlockattr_destroy(&a);
	}
	page = (size_t)sysconf(_SC_PAGESIZE);
	/* Every other page: no two buffers' registrations touch. */
	area = mmap(NULL, NBUF * 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	for (j = 0; j < NBUF; j++) {
		if (mprotect(buf(j), page, PROT_READ | PROT_WRITE))
			FAIL("mprotect: %s", strerror(errno));
		version[j] = 1;
		*(uint64_t *)buf(j) = 1;
	}
	if (rcache_create_unlimited("threads", sizeof(struct treg), &ops,
				    UCM_EVENT_VM_UNMAPPED, &rc) != UCS_OK)
		FAIL("ucs_rcache_create failed (UCX's memory events unavailable: hooks off without --external?)");
	for (j = 0; j < NBUF; j++) {	/* everything cached once */
		ucs_rcache_region_t *r;

		if (noop_rcache_get(rc, buf(j), page, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
			FAIL("ucs_rcache_get failed");
		ucs_rcache_region_put(rc, r);
	}
	for (i = 0; i < GETTERS; i++)
		if (pthread_create(&t[i], NULL, getter, (void *)(uintptr_t)(i + 1)))
			FAIL("pthread_create failed");
	rounds = burst ? 30 : 600;
	for (i = 0; i < rounds; i++) {
		pthread_rwlock_wrlock(&phase);
		if (burst) {
			for (j = 0; j < NBUF; j++)
				remap(j, ++version[j]);
		} else {
			j = (i * 37) % NBUF;
			remap(j, ++version[j]);
		}
		pthread_rwlock_unlock(&phase);
		/* The getters look things up before the next change. */
		atomic_store(&budget, burst ? 400 : 30);
		while (atomic_load(&budget) > 0)
			sched_yield();
	}
	atomic_store(&done, true);
	for (i = 0; i < GETTERS; i++)
		pthread_join(t[i], NULL);
	ucs_rcache_destroy(rc);

	printf("%u rounds (%s), %lu lookups in %u threads, %lu stale\n", rounds,
	       burst ? "every buffer each round" : "one buffer each round",
	       atomic_load(&gets), GETTERS, atomic_load(&stale));
	if (stats_fn) {
		stats_fn(&st, sizeof(st));
		printf("libummunot-ucx: active %u, watched %llu, unwatched %llu, syncs %llu, "
		       "events %llu, overflows %llu, invalidate-all %llu, dead-misses %llu\n", st.active,
		       (unsigned long long)st.watched, (unsigned long long)st.unwatched,
		       (unsigned long long)st.syncs, (unsigned long long)st.events,
		       (unsigned long long)st.overflows, (unsigned long long)st.invalidate_all,
		       (unsigned long long)st.dead_misses);
		/* --burst: every round may overflow, and then the whole
		 * cache is invalidated instead of single events. */
		if (want_adapter && (!st.active || (!st.events && !(burst && st.overflows))))
			FAIL("the adapter did not feed UCX's cache");
		if (want_adapter && burst && !st.overflows)
			FAIL("--burst: no ring overflow was handled (UMMUNOT_UCX_RING_ENTRIES=64?)");
	}
	if (!strcmp(expect, "clean") && atomic_load(&stale))
		FAIL("stale registrations returned");
	if (!strcmp(expect, "stale") && !atomic_load(&stale))
		FAIL("the negative control returned no stale registration");
	printf("PASS\n");
	return 0;
}
