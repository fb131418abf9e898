// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx: UCX's registration cache (ucs_rcache, UCX 1.13) fed from
 * ummunot instead of UCX's malloc/mmap hooks.
 *
 * UCX's rcache learns of unmapped memory only through UCM_EVENT_VM_UNMAPPED
 * callbacks, and has no check at lookup time.  With UCX's hooks off, UCX
 * lets an outside source deliver that event: ucm_set_external_event(), then
 * ucm_vm_munmap(addr, len) for every change.  The rcache must see that call
 * before its next lookup of the range; the kernel writes the ummunot event
 * before munmap() returns, so the adapter drains the ring right before each
 * lookup.  UCX offers no hook at lookup (its memory-event modules are only
 * loaded once UCX's own mmap hooks are installed, and only get an install
 * call), so the adapter interposes three UCX symbols (never a libc one):
 *
 *   ucs_rcache_create   wraps the cache's ops so that each region is
 *                       registered with ummunot *before* UCX pins it (its
 *                       handle is kept in bytes appended to UCX's region
 *                       struct), and unregistered at UCX's dereg;
 *   ucs_rcache_get      drains the ring first: one acquire load (plus a
 *                       relaxed one) when nothing changed;
 *   ucs_rcache_destroy  frees the wrapper.
 *
 * Events become ucm_vm_munmap(start, end - start): UCX invalidates every
 * region overlapping the range, in every rcache of the process.  Overflow:
 * resync, drain, invalidate everything.  fork(): a child opens its own
 * monitor and invalidates everything (libummunot's -ECHILD contract).
 * Documentation/integration-guide.rst ("UCX") says why this design.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>
#include <ummunot/ummunot.h>

#include "ummunot-ucx.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* Above every user address (x86-64 5-level paging: 2^56; arm64: 2^52). */
#define ALL_START ((uintptr_t)4096)
#define ALL_END ((uintptr_t)1 << 57)

/* g.slow bits: the hot path takes the slow path if any is set. */
#define SLOW_BUSY 1u	/* a drain consumed events it has not dispatched yet */
#define SLOW_FORCE 2u	/* invalidate everything at the next lookup */

/* Appended to UCX's region struct (params.region_struct_size). */
struct tail {
	uint64_t handle;
	uint64_t epoch;		/* g.epoch when registered; 0: not watched */
};

struct wrap {
	ucs_rcache_ops_t ops;		/* ours: what UCX calls */
	const ucs_rcache_ops_t *orig_ops;
	void *orig_ctx;
	size_t tail_off;
	ucs_rcache_t *rcache;
	struct wrap *next;
};

typedef ucs_status_t (*create_fn)(const ucs_rcache_params_t *, const char *,
				  ucs_stats_node_t *, ucs_rcache_t **);
typedef void (*destroy_fn)(ucs_rcache_t *);
typedef ucs_status_t (*get_fn)(ucs_rcache_t *, void *, size_t, int, void *,
			       ucs_rcache_region_t **);
typedef void (*ucm_vm_munmap_fn)(void *, size_t);
typedef void (*ucm_set_external_event_fn)(int);

static struct {
	pthread_once_t resolve_once;
	_Atomic int resolved;		/* 1: the pointers below are set */
	create_fn real_create;
	destroy_fn real_destroy;
	get_fn real_get;
	ucm_vm_munmap_fn vm_munmap;
	ucm_set_external_event_fn set_external_event;
	const char *resolve_error;

	pthread_once_t start_once;
	_Atomic int active;		/* monitor opened at first create */
	_Atomic int blind;
	_Atomic(struct ummunot_monitor *) mon;
	struct ummunot_monitor *stale_mon;	/* the parent's, in a child */
	int need_open;			/* a child's monitor is not open yet */
	_Atomic unsigned int slow;
	uint64_t epoch;			/* under ring_lock; never 0 */

	/* drain_lock: one drain (read + dispatch) at a time; ring_lock:
	 * every call that consumes or mutates the monitor (libummunot: one
	 * consumer).  Order: drain_lock, then ring_lock; UCX's locks are
	 * never held while ring_lock is taken except its pgt_lock in
	 * mem_reg/mem_dereg, and the drain dispatches without ring_lock. */
	pthread_mutex_t drain_lock;
	pthread_mutex_t ring_lock;
	pthread_mutex_t list_lock;
	struct wrap *wraps;

	_Atomic uint64_t rcaches, watched, unwatched, watch_errors, syncs,
		events, overflows, invalidate_all, forks;
	_Atomic int warned_watch;
} g = {
	.resolve_once = PTHREAD_ONCE_INIT,
	.start_once = PTHREAD_ONCE_INIT,
	.epoch = 1,
	.drain_lock = PTHREAD_MUTEX_INITIALIZER,
	.ring_lock = PTHREAD_MUTEX_INITIALIZER,
	.list_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void inc(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/*
 * The real functions, from the libraries UCX itself loaded (by handle, not
 * RTLD_NEXT: Open MPI dlopen()s UCX with its components, out of the
 * preloaded library's search scope).  Called from the wrappers only, so
 * libucs (and its libucm) are loaded by then.
 */
static void *sym_in(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	void *p = h ? dlsym(h, name) : NULL;

	if (h)
		dlclose(h);	/* drops only the reference NOLOAD took */
	return p;
}

static void resolve(void)
{
	g.real_create = (create_fn)sym_in("libucs.so.0", "ucs_rcache_create");
	g.real_destroy = (destroy_fn)sym_in("libucs.so.0", "ucs_rcache_destroy");
	g.real_get = (get_fn)sym_in("libucs.so.0", "ucs_rcache_get");
	g.vm_munmap = (ucm_vm_munmap_fn)sym_in("libucm.so.0", "ucm_vm_munmap");
	g.set_external_event = (ucm_set_external_event_fn)
		sym_in("libucm.so.0", "ucm_set_external_event");
	if (!g.real_create || !g.real_destroy || !g.real_get)
		g.resolve_error = "libucs.so.0 (ucs_rcache_*) is not loaded";
	else if (!g.vm_munmap || !g.set_external_event)
		g.resolve_error = "libucm.so.0 (ucm_vm_munmap, ucm_set_external_event) is not loaded";
	atomic_store_explicit(&g.resolved, 1, memory_order_release);
}

static void ensure_resolved(void)
{
	if (unlikely(!atomic_load_explicit(&g.resolved, memory_order_acquire)))
		pthread_once(&g.resolve_once, resolve);
	if (unlikely(g.resolve_error)) {
		/* The wrappers were called by something that is not UCX's
		 * libucs: there is nothing to call. */
		fprintf(stderr, "libummunot-ucx: fatal: %s\n", g.resolve_error);
		abort();
	}
}

static void invalidate_all(void)
{
	inc(&g.invalidate_all);
	g.vm_munmap((void *)ALL_START, ALL_END - ALL_START);
}

static struct ummunot_monitor *open_monitor(void)
{
	const char *e = getenv("UMMUNOT_UCX_RING_ENTRIES");
	struct ummunot_monitor_attr attr;
	struct ummunot_monitor *m = NULL;
	int r;

	memset(&attr, 0, sizeof(attr));
	/* 0: the module's default.  One event per watched region at most
	 * before the next drain; overflow is handled (resync, drop
	 * everything) but costs every registration. */
	if (e && *e) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(e, &end, 0);
		if (errno || *end || !v || v > UINT32_MAX)
			fprintf(stderr, "libummunot-ucx: ignoring UMMUNOT_UCX_RING_ENTRIES='%s' "
				"(expected a number of ring entries)\n", e);
		else
			attr.ring_entries = (uint32_t)v;
	}
	r = ummunot_monitor_open(&attr, &m);
	if (r) {
		fprintf(stderr, "libummunot-ucx: cannot open /dev/ummunot: %s; %s\n",
			strerror(-r),
			atomic_load(&g.active) ?
			"every lookup now invalidates UCX's registration caches" :
			"UCX's registration caches get no unmap events from ummunot "
			"(with UCX's hooks off they stay disabled)");
		return NULL;
	}
	return m;
}

/*
 * In a forked child: the inherited monitor answers -ECHILD (libummunot's
 * contract).  The child handler (single-threaded, async-signal context:
 * it only resets state) drops it and starts a new epoch (regions the
 * parent registered are never unregistered from here); the child's own
 * monitor is opened at its first use of a UCX cache (a child that only
 * execs pays nothing), and its first lookup invalidates everything.
 */
static void atfork_child(void)
{
	pthread_mutex_init(&g.drain_lock, NULL);
	pthread_mutex_init(&g.ring_lock, NULL);
	pthread_mutex_init(&g.list_lock, NULL);
	g.stale_mon = atomic_load(&g.mon);
	atomic_store(&g.mon, NULL);
	g.need_open = 1;
	g.epoch++;
	inc(&g.forks);
	atomic_store(&g.slow, SLOW_FORCE);
}

/* ring_lock held: the child's monitor, opened on first use. */
static struct ummunot_monitor *child_monitor_locked(void)
{
	struct ummunot_monitor *m;

	if (!g.need_open)
		return atomic_load(&g.mon);
	g.need_open = 0;
	if (g.stale_mon) {
		ummunot_monitor_close(g.stale_mon);	/* frees the child's copy */
		g.stale_mon = NULL;
	}
	m = open_monitor();
	if (!m)
		atomic_store(&g.blind, 1);
	atomic_store(&g.mon, m);
	return m;
}

/* UMMUNOT_UCX_STATS=1: one line of statistics on stderr at exit. */
static void print_stats(void)
{
	struct ummunot_ucx_stats st;

	ummunot_ucx_stats(&st, sizeof(st));
	fprintf(stderr, "libummunot-ucx: pid %ld: active %u, blind %u, rcaches %llu, "
		"watched %llu, unwatched %llu, watch-errors %llu, syncs %llu, events %llu, "
		"overflows %llu, invalidate-all %llu, forks %llu\n",
		(long)getpid(), st.active, st.blind,
		(unsigned long long)st.rcaches, (unsigned long long)st.watched,
		(unsigned long long)st.unwatched, (unsigned long long)st.watch_errors,
		(unsigned long long)st.syncs, (unsigned long long)st.events,
		(unsigned long long)st.overflows, (unsigned long long)st.invalidate_all,
		(unsigned long long)st.forks);
}

static void start(void)
{
	const char *e = getenv("UMMUNOT_UCX_STATS");
	struct ummunot_monitor *m;

	if (e && *e && strcmp(e, "0"))
		atexit(print_stats);
	m = open_monitor();
	if (!m)
		return;		/* passive: UCX as configured */
	atomic_store(&g.mon, m);
	/* After the open: libummunot's fork handler is installed, and
	 * child handlers run in registration order. */
	pthread_atfork(NULL, NULL, atfork_child);
	g.set_external_event(UCM_EVENT_VM_UNMAPPED);
	atomic_store_explicit(&g.active, 1, memory_order_release);
}

/* Read everything pending and hand it to UCX; drain_lock held. */
static void drain_locked(void)
{
	struct ummunot_event ev[64];
	struct ummunot_monitor *m;
	int n, i;

	/* BUSY before anything is consumed and until it is dispatched: a
	 * thread that finds nothing changed (the read below moves
	 * libummunot's "seen" generation) then finds BUSY set (release fence
	 * here, acquire fence after its changed()), and waits for us. */
	atomic_fetch_or_explicit(&g.slow, SLOW_BUSY, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	pthread_mutex_lock(&g.ring_lock);
	m = child_monitor_locked();
	pthread_mutex_unlock(&g.ring_lock);
	if (atomic_load(&g.slow) & SLOW_FORCE) {
		invalidate_all();
		atomic_fetch_and(&g.slow, ~SLOW_FORCE);
	}
	if (!m) {
		/* Blind: nothing watches UCX's regions. */
		invalidate_all();
		goto out;
	}
	for (;;) {
		pthread_mutex_lock(&g.ring_lock);
		n = ummunot_monitor_read(m, ev, 64);
		if (n == -EOVERFLOW) {
			/* ring.rst: resync, drain, drop everything. */
			inc(&g.overflows);
			ummunot_monitor_resync(m, NULL);
			while (ummunot_monitor_read(m, ev, 64) > 0)
				;
		}
		pthread_mutex_unlock(&g.ring_lock);
		if (n == -EOVERFLOW) {
			invalidate_all();
			continue;	/* events written after the resync */
		}
		if (n < 0) {
			fprintf(stderr, "libummunot-ucx: reading the event ring failed: %s; "
				"invalidating everything\n", strerror(-n));
			invalidate_all();
			break;
		}
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			g.vm_munmap((void *)(uintptr_t)ev[i].start,
				    ev[i].end - ev[i].start);
			inc(&g.events);
		}
	}
out:
	atomic_fetch_and_explicit(&g.slow, ~SLOW_BUSY, memory_order_release);
}

static __attribute__((noinline)) void sync_slow(void)
{
	inc(&g.syncs);
	pthread_mutex_lock(&g.drain_lock);
	drain_locked();
	pthread_mutex_unlock(&g.drain_lock);
}

/* ---- the rcache ops wrapper ---------------------------------------- */

static struct tail *tail_of(const struct wrap *w, ucs_rcache_region_t *region)
{
	return (struct tail *)((char *)region + w->tail_off);
}

static ucs_status_t wrap_mem_reg(void *context, ucs_rcache_t *rcache, void *arg,
				 ucs_rcache_region_t *region, uint16_t flags)
{
	struct wrap *w = context;
	struct tail *t = tail_of(w, region);
	struct ummunot_region r;
	struct ummunot_monitor *m;
	ucs_status_t st;
	int ret = 0;

	memset(&r, 0, sizeof(r));
	r.start = region->super.start;
	r.length = region->super.end - region->super.start;
	r.cookie = (uintptr_t)region;
	t->epoch = 0;
	/* Watch before UCX pins: a change after this point is reported. */
	pthread_mutex_lock(&g.ring_lock);
	m = child_monitor_locked();
	if (m) {
		ret = ummunot_monitor_register(m, &r, 1, NULL);
		if (!ret) {
			t->handle = r.handle;
			t->epoch = g.epoch;
		}
	}
	pthread_mutex_unlock(&g.ring_lock);
	if (ret) {
		inc(&g.watch_errors);
		if (!atomic_exchange(&g.warned_watch, 1))
			fprintf(stderr, "libummunot-ucx: cannot watch [%#lx, %#lx): %s; "
				"UCX's registration of it fails (warned once)\n",
				(unsigned long)region->super.start,
				(unsigned long)region->super.end, strerror(-ret));
		return ret == -ENOMEM ? UCS_ERR_NO_MEMORY : UCS_ERR_EXCEEDS_LIMIT;
	}
	if (m)
		inc(&g.watched);
	/* m == NULL: blind, every lookup invalidates everything. */
	st = w->orig_ops->mem_reg(w->orig_ctx, rcache, arg, region, flags);
	if (st != UCS_OK && t->epoch) {
		pthread_mutex_lock(&g.ring_lock);
		if (t->epoch == g.epoch)
			ummunot_monitor_unregister(atomic_load(&g.mon), &t->handle, 1, NULL);
		pthread_mutex_unlock(&g.ring_lock);
		t->epoch = 0;
	}
	return st;
}

static void wrap_mem_dereg(void *context, ucs_rcache_t *rcache,
			   ucs_rcache_region_t *region)
{
	struct wrap *w = context;
	struct tail *t = tail_of(w, region);

	if (t->epoch) {
		pthread_mutex_lock(&g.ring_lock);
		/* A region of another epoch was registered by the parent:
		 * its handle means nothing to this process's monitor. */
		if (t->epoch == g.epoch && atomic_load(&g.mon) &&
		    !ummunot_monitor_unregister(atomic_load(&g.mon), &t->handle, 1, NULL))
			inc(&g.unwatched);
		pthread_mutex_unlock(&g.ring_lock);
		t->epoch = 0;
	}
	w->orig_ops->mem_dereg(w->orig_ctx, rcache, region);
}

static void wrap_dump_region(void *context, ucs_rcache_t *rcache,
			     ucs_rcache_region_t *region, char *buf, size_t max)
{
	struct wrap *w = context;

	if (w->orig_ops->dump_region)
		w->orig_ops->dump_region(w->orig_ctx, rcache, region, buf, max);
	else if (max)
		buf[0] = '\0';
}

/* ---- the interposed UCX functions ----------------------------------- */

EXPORT ucs_status_t ucs_rcache_create(const ucs_rcache_params_t *params,
				      const char *name, ucs_stats_node_t *stats_parent,
				      ucs_rcache_t **rcache_p)
{
	ucs_rcache_params_t p;
	struct wrap *w;
	ucs_status_t st;

	ensure_resolved();
	pthread_once(&g.start_once, start);
	if (!atomic_load(&g.active) || !params || !params->ops ||
	    !(params->ucm_events & UCM_EVENT_VM_UNMAPPED))
		return g.real_create(params, name, stats_parent, rcache_p);

	w = calloc(1, sizeof(*w));
	if (!w)
		return UCS_ERR_NO_MEMORY;
	w->orig_ops = params->ops;
	w->orig_ctx = params->context;
	w->tail_off = (params->region_struct_size + 7) & ~(size_t)7;
	w->ops.mem_reg = wrap_mem_reg;
	w->ops.mem_dereg = wrap_mem_dereg;
	w->ops.dump_region = wrap_dump_region;
	p = *params;
	p.ops = &w->ops;
	p.context = w;
	p.region_struct_size = w->tail_off + sizeof(struct tail);
	st = g.real_create(&p, name, stats_parent, rcache_p);
	if (st != UCS_OK) {
		free(w);
		return st;
	}
	w->rcache = *rcache_p;
	pthread_mutex_lock(&g.list_lock);
	w->next = g.wraps;
	g.wraps = w;
	pthread_mutex_unlock(&g.list_lock);
	inc(&g.rcaches);
	return UCS_OK;
}

EXPORT void ucs_rcache_destroy(ucs_rcache_t *rcache)
{
	struct wrap **pp, *w = NULL;

	ensure_resolved();
	g.real_destroy(rcache);		/* deregisters through our ops */
	pthread_mutex_lock(&g.list_lock);
	for (pp = &g.wraps; *pp; pp = &(*pp)->next)
		if ((*pp)->rcache == rcache) {
			w = *pp;
			*pp = w->next;
			break;
		}
	pthread_mutex_unlock(&g.list_lock);
	free(w);
}

EXPORT ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address,
				   size_t length, int prot, void *arg,
				   ucs_rcache_region_t **region_p)
{
	ensure_resolved();
	if (likely(atomic_load_explicit(&g.active, memory_order_relaxed))) {
		struct ummunot_monitor *m =
			atomic_load_explicit(&g.mon, memory_order_acquire);
		int changed = m ? ummunot_monitor_changed(m) : 1;

		atomic_thread_fence(memory_order_acquire);
		if (unlikely(changed ||
			     atomic_load_explicit(&g.slow, memory_order_relaxed)))
			sync_slow();
	}
	return g.real_get(rcache, address, length, prot, arg, region_p);
}

EXPORT int ummunot_ucx_stats(struct ummunot_ucx_stats *stats, size_t size)
{
	struct ummunot_ucx_stats s;

	if (!stats)
		return -EINVAL;
	memset(&s, 0, sizeof(s));
	s.active = (uint32_t)atomic_load(&g.active);
	s.blind = (uint32_t)atomic_load(&g.blind);
	s.rcaches = atomic_load(&g.rcaches);
	s.watched = atomic_load(&g.watched);
	s.unwatched = atomic_load(&g.unwatched);
	s.watch_errors = atomic_load(&g.watch_errors);
	s.syncs = atomic_load(&g.syncs);
	s.events = atomic_load(&g.events);
	s.overflows = atomic_load(&g.overflows);
	s.invalidate_all = atomic_load(&g.invalidate_all);
	s.forks = atomic_load(&g.forks);
	if (size > sizeof(s))
		size = sizeof(s);
	memcpy(stats, &s, size);
	return (int)size;
}
