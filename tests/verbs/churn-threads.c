// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * 8 threads get/check/put/free while another thread munmaps: no stale hit, no leak.
 *
 * Memory is a row of adjacent slots (so the cache merges neighbours).  A
 * slot is used only under its mutex, as a correct program uses memory only
 * while it owns it.  Workers pick a slot, map it if it is not mapped, get a
 * registration for a random part of it, and check that the registration
 * reaches the pages mapped now: the CPU writes a fresh canary and an RDMA
 * READ through the rkey must return it, or an RDMA WRITE of a fresh canary
 * must be seen by the CPU.  Then they put it and sometimes free the slot
 * (munmap) or replace its pages (mmap(MAP_FIXED) over it).  The unmapper
 * thread munmaps runs of 1-3 slots all the time.  At the end, after a
 * flush, every registration must have been deregistered and nothing may
 * be pinned or watched.
 *
 * A single-threaded negative control first proves that the check catches
 * a stale registration (with the cache's monitoring switched off).
 */
#include "verbs-helpers.h"

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#define NR_WORKERS	8
#define NR_SLOTS	24
#define SLOT_PAGES	4
#define SECONDS		5.0

#define GET_FAILED	(-1)
#define RDMA_FAILED	(-2)

struct slot {
	pthread_mutex_t mu;
	unsigned char *addr;
	bool mapped;
	bool lost;	/* something else took the hole: never touched again */
};

struct worker {
	pthread_t thr;
	unsigned int id;
	struct vt_pair pair;
	uint64_t rng;
	uint64_t iters, frees, replaces, stale, get_errors;
	bool rdma_failed;	/* the pair is dead: this worker stopped */
	char first_error[256];
};

static struct vt_dev dev;
static struct ummunot_cache *cache;
static struct slot slots[NR_SLOTS];
static unsigned char *area;
static size_t slot_len;
static double deadline;
static uint64_t unmaps;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void slot_map(struct slot *s, bool replace)
{
	void *p = mmap(s->addr, slot_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS |
		       (replace ? MAP_FIXED : MAP_FIXED_NOREPLACE), -1, 0);

	if (p == MAP_FAILED && errno == EEXIST) {
		s->lost = true;
		return;
	}
	if (p != s->addr)
		vt_fail("mmap slot %p: %s", (void *)s->addr, strerror(errno));
	s->mapped = true;
}

static void slot_unmap(struct slot *s)
{
	if (s->mapped && munmap(s->addr, slot_len))
		vt_fail("munmap slot: %s", strerror(errno));
	s->mapped = false;
}

/*
 * Get a registration for [p, p + len) and check it reaches the pages
 * mapped there now.  Returns 0 if fresh, 1 if stale, or describes the
 * error in errbuf and returns GET_FAILED (the get or put failed; the QP
 * pair is still usable) or RDMA_FAILED (both QPs are in the error state).
 */
static int check_once(struct ummunot_cache *c, struct vt_pair *pair, unsigned char *p,
		      size_t len, uint64_t canary, bool by_write, char *errbuf, size_t errlen)
{
	const struct ummunot_reg *r;
	uint64_t v;
	int s, stale = 0;

	s = ummunot_cache_get(c, p, len, VT_ACCESS, &r);
	if (s < 0) {
		snprintf(errbuf, errlen, "get(%p, %zu): %s", (void *)p, len, strerror(-s));
		return GET_FAILED;
	}
	if (r->addr > (uintptr_t)p || r->addr + r->length < (uintptr_t)p + len) {
		snprintf(errbuf, errlen, "registration [%#llx, +%llu) does not cover [%p, +%zu)",
			 (unsigned long long)r->addr, (unsigned long long)r->length,
			 (void *)p, len);
		ummunot_cache_put(c, r);
		return GET_FAILED;
	}
	if (by_write) {
		memcpy(pair->stage, &canary, sizeof(canary));
		s = vt_rdma(pair, IBV_WR_RDMA_WRITE, 0, (uintptr_t)p, r->rkey, sizeof(canary));
		memcpy(&v, p, sizeof(v));
	} else {
		memcpy(p, &canary, sizeof(canary));
		s = vt_rdma(pair, IBV_WR_RDMA_READ, 0, (uintptr_t)p, r->rkey, sizeof(canary));
		memcpy(&v, pair->stage, sizeof(v));
	}
	if (s != IBV_WC_SUCCESS) {
		snprintf(errbuf, errlen, "RDMA %s through rkey %#x of [%#llx, +%llu): %s",
			 by_write ? "WRITE" : "READ", r->rkey, (unsigned long long)r->addr,
			 (unsigned long long)r->length,
			 s > 0 ? ibv_wc_status_str((enum ibv_wc_status)s) : strerror(-s));
		ummunot_cache_put(c, r);
		return RDMA_FAILED;
	}
	if (v != canary)
		stale = 1;
	s = ummunot_cache_put(c, r);
	if (s < 0) {
		snprintf(errbuf, errlen, "put: %s", strerror(-s));
		return GET_FAILED;
	}
	return stale;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t n = 0;

	while (vt_now() < deadline && !w->rdma_failed) {
		struct slot *s = &slots[rnd(&w->rng) % NR_SLOTS];
		size_t sp = rnd(&w->rng) % SLOT_PAGES;
		size_t np = 1 + rnd(&w->rng) % (SLOT_PAGES - sp);
		size_t skew = (rnd(&w->rng) % 64) * 8;
		uint64_t canary = ((uint64_t)w->id << 56) | ++n;
		unsigned int what;
		int r;

		pthread_mutex_lock(&s->mu);
		if (s->lost) {
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		if (!s->mapped)
			slot_map(s, false);
		if (s->mapped) {
			char err[256];

			r = check_once(cache, &w->pair, s->addr + sp * vt_page + skew,
				       np * vt_page - skew, canary, n & 1, err, sizeof(err));
			if (r < 0 && !w->first_error[0])
				memcpy(w->first_error, err, sizeof(err));
			if (r == GET_FAILED)
				w->get_errors++;	/* keep going: the QPs are fine */
			else if (r == RDMA_FAILED)
				w->rdma_failed = true;
			else
				w->stale += (uint64_t)r;
			w->iters++;
			what = rnd(&w->rng) % 8;
			if (what == 0) {
				slot_unmap(s);		/* free */
				w->frees++;
			} else if (what == 1) {
				slot_map(s, true);	/* new pages, same address */
				w->replaces++;
			}
		}
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static void *unmapper_main(void *arg)
{
	uint64_t rng = 0x1234567u;
	int i, k, j;

	(void)arg;
	while (vt_now() < deadline) {
		i = (int)(rnd(&rng) % NR_SLOTS);
		k = 1 + (int)(rnd(&rng) % 3);
		if (i + k > NR_SLOTS)
			k = NR_SLOTS - i;
		/* Ascending order; workers hold one slot at a time. */
		for (j = i; j < i + k; j++)
			pthread_mutex_lock(&slots[j].mu);
		for (j = i; j < i + k; j++)
			if (slots[j].mapped) {
				slot_unmap(&slots[j]);
				__atomic_add_fetch(&unmaps, 1, __ATOMIC_RELAXED);
			}
		for (j = i + k; j-- > i;)
			pthread_mutex_unlock(&slots[j].mu);
		usleep(200);
	}
	return NULL;
}

/* The check must see a stale registration when the cache is blind. */
static void negative_control(void)
{
	struct ummunot_cache *c = vt_cache_create(&dev, false);
	struct vt_pair pair;
	struct slot *s = &slots[0];
	char err[256] = "";
	int r, rw;

	vt_pair_create(&dev, &pair, vt_page);
	for (rw = 0; rw < 2; rw++) {
		/* Start from an empty cache: the previous round left a stale entry. */
		VT_ASSERT(ummunot_cache_flush(c) >= 0, "flush failed");
		slot_map(s, true);
		r = check_once(c, &pair, s->addr, slot_len, 0xc0ffee00u + rw, rw, err, sizeof(err));
		VT_ASSERT(r == 0, "control, first check: %s", r < 0 ? err : "stale");
		slot_map(s, true);	/* new pages under the cached registration */
		r = check_once(c, &pair, s->addr, slot_len, 0xc0ffee10u + rw, rw, err, sizeof(err));
		VT_ASSERT(r == 1, "control: the %s check did not catch a stale registration "
			  "with monitoring off (%s)", rw ? "WRITE" : "READ",
			  r < 0 ? err : "looked fresh");
	}
	slot_unmap(s);
	vt_pair_destroy(&pair);
	vt_cache_destroy_clean(c);
	vt_log("negative control: with monitoring off both checks catch the stale registration");
}

int main(int argc, char **argv)
{
	static struct worker w[NR_WORKERS];
	struct ummunot_cache_stats st;
	pthread_t unmapper;
	uint64_t iters = 0, stale = 0, get_errors = 0, frees = 0, replaces = 0;
	unsigned int rdma_failed = 0;
	double t0;
	unsigned int i;
	const char *e;

	vt_init(argc, argv);
	vt_dev_open(&dev);
	slot_len = SLOT_PAGES * vt_page;
	area = mmap(NULL, NR_SLOTS * slot_len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		vt_fail("mmap area: %s", strerror(errno));
	for (i = 0; i < NR_SLOTS; i++) {
		pthread_mutex_init(&slots[i].mu, NULL);
		slots[i].addr = area + i * slot_len;
		slots[i].mapped = true;
	}

	negative_control();

	cache = vt_cache_create(&dev, true);
	for (i = 0; i < NR_WORKERS; i++) {
		w[i].id = i + 1;
		w[i].rng = 0x9e3779b97f4a7c15ULL * (i + 1);
		vt_pair_create(&dev, &w[i].pair, vt_page);
	}
	e = getenv("UMMUNOT_CHURN_SECONDS");
	t0 = vt_now();
	deadline = t0 + (e ? atof(e) : SECONDS);
	for (i = 0; i < NR_WORKERS; i++)
		if (pthread_create(&w[i].thr, NULL, worker_main, &w[i]))
			vt_fail("pthread_create failed");
	if (pthread_create(&unmapper, NULL, unmapper_main, NULL))
		vt_fail("pthread_create failed");
	for (i = 0; i < NR_WORKERS; i++)
		pthread_join(w[i].thr, NULL);
	pthread_join(unmapper, NULL);

	for (i = 0; i < NR_WORKERS; i++) {
		iters += w[i].iters;
		stale += w[i].stale;
		get_errors += w[i].get_errors;
		rdma_failed += w[i].rdma_failed;
		frees += w[i].frees;
		replaces += w[i].replaces;
		if (w[i].first_error[0])
			fprintf(stderr, "worker %u: %llu failed gets, %s; first error: %s\n",
				w[i].id, (unsigned long long)w[i].get_errors,
				w[i].rdma_failed ? "stopped on an RDMA error" : "ran to the end",
				w[i].first_error);
		vt_pair_destroy(&w[i].pair);
	}
	vt_cache_stats(cache, &st);
	vt_log("%.1f s: %llu checked gets (%llu hits, %llu misses), %llu frees + %llu "
	       "replaces by workers, %llu munmaps by the unmapper, %llu invalidations, "
	       "%llu merges, %llu race retries, %llu resyncs; %llu stale, %llu failed gets, "
	       "%u workers stopped by RDMA errors",
	       vt_now() - t0, (unsigned long long)iters, (unsigned long long)st.hits,
	       (unsigned long long)st.misses, (unsigned long long)frees,
	       (unsigned long long)replaces, (unsigned long long)unmaps,
	       (unsigned long long)vt_invalidations(&st), (unsigned long long)st.merges,
	       (unsigned long long)st.race_retries, (unsigned long long)st.resyncs,
	       (unsigned long long)stale, (unsigned long long)get_errors, rdma_failed);
	VT_EQ("stale hits", 0, stale);
	VT_EQ("workers stopped by RDMA errors (a key the cache handed out was invalid)",
	      0, rdma_failed);
	/* The run must have exercised what it claims to test. */
	VT_ASSERT(st.hits > 0 && st.misses > 0 && vt_invalidations(&st) > 0 && unmaps > 0,
		  "run too short to mean anything");
	vt_cache_destroy_clean(cache);
	vt_log("no leak: every registration deregistered, nothing pinned or watched");
	/*
	 * Last, so that the checks above still run: a get of a mapped range
	 * owned by the caller must not fail (see merge-neighbour-freed).
	 */
	VT_EQ("failed gets of mapped, owned ranges", 0, get_errors);
	for (i = 0; i < NR_SLOTS; i++)
		if (slots[i].mapped)
			munmap(slots[i].addr, slot_len);
	vt_dev_close(&dev);
	return VT_EXIT_PASS;
}
