// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx: UCX's registration cache (ucs_rcache) fed from ummunot
 * instead of UCX's malloc/mmap hooks.  Built and tested for UCX 1.13 and
 * 1.18 (the version gate below refuses anything else at run time).
 *
 * UCX's rcache learns of unmapped memory only through UCM_EVENT_VM_UNMAPPED
 * callbacks, and has no check at lookup time.  With UCX's hooks off, UCX
 * lets an outside source deliver that event: ucm_set_external_event(), then
 * ucm_vm_munmap(addr, len) for every change.  The rcache must see that call
 * before its next lookup of the range; the kernel writes the ummunot event
 * before munmap() returns, so the adapter drains the ring right before each
 * lookup.  UCX offers no hook at lookup, so the adapter interposes UCX
 * symbols (never a libc one):
 *
 *   ucs_rcache_create   wraps the cache's ops so that each region is
 *                       registered with ummunot *before* UCX pins it (the
 *                       index of its slot in an adapter-owned table is kept
 *                       in bytes appended to UCX's region struct), and
 *                       unregistered at UCX's dereg; records the cache's
 *                       page table (ucs_pgtable_init runs inside it);
 *   ucs_pgtable_init    records the page table of the cache being created
 *                       in this thread;
 *   ucs_pgtable_lookup  every lookup of a cached region goes through it:
 *                       UCX 1.14+ answers UCP's hits with an inline
 *                       function (ucs_rcache_lookup_unsafe, rcache.inl)
 *                       that calls it through the PLT, and ucs_rcache_get
 *                       calls it too.  For our caches' page tables only:
 *                       drain the ring if it moved, look up, and answer
 *                       "miss" if the region found was invalidated by a
 *                       drain (UCX may still hold it in its page table,
 *                       queued on its invalidation queue);
 *   ucs_rcache_get      drains the ring first (UCX 1.13's only lookup,
 *                       and UCX's miss path);
 *   ucs_rcache_destroy  forgets the wrapper.
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
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ucm/api/ucm.h>
#include <ucp/api/ucp_version.h>
#include <ucs/datastruct/pgtable.h>
#include <ucs/memory/rcache.h>
#include <ummunot/ummunot.h>

#include "ummunot-ucx.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- what this build knows about UCX ------------------------------- */

/* The UCX versions this adapter was tested with (major, minor).  A build
 * against any other, or a run against a UCX other than the one it was
 * built against, refuses to act (version_gate()). */
#define UCX_VER(maj, min) (((unsigned)(maj) << 16) | (unsigned)(min))
static const unsigned int tested_versions[] = { UCX_VER(1, 13), UCX_VER(1, 18) };
#define BUILT_VERSION UCX_VER(UCP_API_MAJOR, UCP_API_MINOR)

/* UCX 1.17: ucs_rcache_get() gained a size_t alignment argument and the
 * params lost alignment/max_alignment.  UCX 1.18: ucs_rcache_ops_t gained
 * merge (called with no NULL check). */
#if UCP_API_VERSION >= UCP_VERSION(1, 17)
#define HAVE_GET_ALIGNMENT 1
#else
#define HAVE_GET_ALIGNMENT 0
#endif
#if UCP_API_VERSION >= UCP_VERSION(1, 18)
#define HAVE_OPS_MERGE 1
#else
#define HAVE_OPS_MERGE 0
#endif

/* Every callback of the ops struct is wrapped: for the tested versions,
 * the struct must hold exactly the callbacks this file knows. */
#if (UCP_API_MAJOR == 1) && (UCP_API_MINOR == 13 || UCP_API_MINOR == 18)
_Static_assert(sizeof(ucs_rcache_ops_t) == (3 + HAVE_OPS_MERGE) * sizeof(void (*)(void)),
	       "ucs_rcache_ops_t has callbacks this adapter does not pass through");
#endif

/* Above every user address (x86-64 5-level paging: 2^56; arm64: 2^52). */
#define ALL_START ((uintptr_t)4096)
#define ALL_END ((uintptr_t)1 << 57)

/* g.slow bits: the hot path takes the slow path if any is set. */
#define SLOW_BUSY 1u	/* a drain consumed events it has not dispatched yet */
#define SLOW_FORCE 2u	/* invalidate everything at the next lookup */

/* ---- slots: one per watched region, in memory that is never freed ----
 *
 * The cookie of a region's ummunot registration is (slot index << 32 |
 * generation).  A drain maps an event to its slot and, if the generation
 * and handle still match (the region was not unregistered meanwhile),
 * marks the slot dead; it never touches the region (UCX may have freed
 * it).  The lookup hook reads the slot index from the region UCX returned
 * (the region is alive then: UCX's own locking) and the dead flag from
 * the table.  Index 0 is never used ("no slot"). */
#define SLOT_CHUNK_SHIFT 12
#define SLOT_CHUNK (1u << SLOT_CHUNK_SHIFT)
#define SLOT_CHUNKS 1024		/* 4 Mi slots */

struct slot {
	_Atomic uint32_t dead;		/* 1: a drain invalidated the region */
	uint32_t gen;			/* bumped at every free (ring_lock) */
	uint32_t in_use;		/* ring_lock */
	uint32_t next_free;		/* ring_lock */
	uint64_t handle;		/* ring_lock */
	uint64_t epoch;			/* g.epoch when registered (ring_lock) */
};

/* Appended to UCX's region struct (params.region_struct_size). */
struct tail {
	uint32_t slot;			/* 0: not watched */
	uint32_t gen;
};

struct wrap {
	ucs_rcache_ops_t ops;		/* ours: what UCX calls */
	const ucs_rcache_ops_t *orig_ops;
	void *orig_ctx;
	size_t tail_off;
	ucs_rcache_t *rcache;
	const ucs_pgtable_t *pgtable;	/* the cache's page table */
	struct wrap *next;
};

/* Page tables of the caches we wrap, read by every lookup without a lock:
 * an entry's wrap is written before its pgtable pointer is published with
 * a release store (pairs with the acquire load of g.npgt / the entry in
 * owner_of()); entries are cleared at destroy, and reused. */
#define MAX_RCACHES 256
struct pgt_entry {
	_Atomic(const ucs_pgtable_t *) pgtable;
	_Atomic(struct wrap *) wrap;
};

#if HAVE_GET_ALIGNMENT
typedef ucs_status_t (*get_fn)(ucs_rcache_t *, void *, size_t, size_t, int, void *,
			       ucs_rcache_region_t **);
#else
typedef ucs_status_t (*get_fn)(ucs_rcache_t *, void *, size_t, int, void *,
			       ucs_rcache_region_t **);
#endif
typedef ucs_status_t (*create_fn)(const ucs_rcache_params_t *, const char *,
				  ucs_stats_node_t *, ucs_rcache_t **);
typedef void (*destroy_fn)(ucs_rcache_t *);
typedef ucs_pgt_region_t *(*lookup_fn)(const ucs_pgtable_t *, ucs_pgt_addr_t);
typedef ucs_status_t (*pgt_init_fn)(ucs_pgtable_t *, ucs_pgt_dir_alloc_callback_t,
				    ucs_pgt_dir_release_callback_t);
typedef void (*ucm_vm_munmap_fn)(void *, size_t);
typedef void (*ucm_external_event_fn)(int);
typedef void (*ucp_get_version_fn)(unsigned *, unsigned *, unsigned *);

static struct {
	pthread_once_t resolve_once;
	_Atomic int resolved;		/* 1: the pointers below are set */
	create_fn real_create;
	destroy_fn real_destroy;
	get_fn real_get;
	lookup_fn real_lookup;
	pgt_init_fn real_pgt_init;
	ucm_vm_munmap_fn vm_munmap;
	ucm_external_event_fn set_external_event, unset_external_event;
	const char *resolve_error;

	pthread_once_t start_once;
	_Atomic int active;		/* version accepted, monitor opened */
	_Atomic int refused;		/* the version gate said no */
	unsigned int ucx_version;	/* found at run time, 0: unknown */
	int verbose;
	_Atomic int blind;
	_Atomic(struct ummunot_monitor *) mon;
	/* mon's inline "changed?" words, or NULL (lookup_check() then takes
	 * the slow path).  One per monitor, never freed: a lookup may still
	 * hold the previous one (one more per forked child that uses UCX). */
	_Atomic(const struct ummunot_monitor_check *) chk;
	struct ummunot_monitor *stale_mon;	/* the parent's, in a child */
	int need_open;			/* a child's monitor is not open yet */
	_Atomic unsigned int slow;
	uint64_t epoch;			/* under ring_lock; never 0 */

	/* drain_lock: one drain (read + dispatch) at a time; ring_lock:
	 * every call that consumes or mutates the monitor (libummunot: one
	 * consumer) and the slot table.  Order: drain_lock, then ring_lock;
	 * UCX's locks are never held while ring_lock is taken except its
	 * pgt_lock in mem_reg/mem_dereg, and the drain dispatches without
	 * ring_lock.  A drain may run while this thread holds a cache's
	 * pgt_lock for reading (ucs_rcache_get's lookup): UCX's unmap
	 * callback only try-locks it, and queues the range otherwise. */
	pthread_mutex_t drain_lock;
	pthread_mutex_t ring_lock;
	pthread_mutex_t list_lock;
	struct wrap *wraps;

	_Atomic(struct slot *) chunks[SLOT_CHUNKS];
	uint32_t slots_hw;		/* slots handed out so far (ring_lock) */
	uint32_t free_head;		/* 0: empty (ring_lock) */

	_Atomic unsigned int npgt;	/* entries of pgt[] ever used */
	struct pgt_entry pgt[MAX_RCACHES];

	_Atomic uint64_t rcaches, watched, unwatched, watch_errors, syncs,
		events, overflows, invalidate_all, forks, dead_misses;
	_Atomic int warned_watch;
} g = {
	.resolve_once = PTHREAD_ONCE_INIT,
	.start_once = PTHREAD_ONCE_INIT,
	.epoch = 1,
	.slots_hw = 1,
	.drain_lock = PTHREAD_MUTEX_INITIALIZER,
	.ring_lock = PTHREAD_MUTEX_INITIALIZER,
	.list_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The cache whose ucs_rcache_create() runs in this thread (its page table
 * is the first ucs_pgtable_init() inside it), and whether this thread is
 * dispatching events (a lookup from inside UCX's unmap callbacks must not
 * wait for its own drain). */
static __thread struct wrap *tls_creating;
static __thread int tls_draining;

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
	g.real_lookup = (lookup_fn)sym_in("libucs.so.0", "ucs_pgtable_lookup");
	g.real_pgt_init = (pgt_init_fn)sym_in("libucs.so.0", "ucs_pgtable_init");
	g.vm_munmap = (ucm_vm_munmap_fn)sym_in("libucm.so.0", "ucm_vm_munmap");
	g.set_external_event = (ucm_external_event_fn)
		sym_in("libucm.so.0", "ucm_set_external_event");
	g.unset_external_event = (ucm_external_event_fn)
		sym_in("libucm.so.0", "ucm_unset_external_event");
	if (!g.real_create || !g.real_destroy || !g.real_get || !g.real_lookup ||
	    !g.real_pgt_init)
		g.resolve_error = "libucs.so.0 (ucs_rcache_*, ucs_pgtable_*) is not loaded";
	else if (!g.vm_munmap || !g.set_external_event || !g.unset_external_event)
		g.resolve_error = "libucm.so.0 (ucm_vm_munmap, ucm_set_external_event) is not loaded";
	atomic_store_explicit(&g.resolved, 1, memory_order_release);
}

static inline void ensure_resolved(void)
{
	/* acquire: pairs with the release store at the end of resolve(). */
	if (unlikely(!atomic_load_explicit(&g.resolved, memory_order_acquire))) {
		pthread_once(&g.resolve_once, resolve);
		if (g.resolve_error) {
			/* The wrappers were called by something that is not
			 * UCX's libucs: there is nothing to call. */
			fprintf(stderr, "libummunot-ucx: fatal: %s\n", g.resolve_error);
			abort();
		}
	}
}

/* ---- the version gate ---------------------------------------------- */

/*
 * The UCX version of the loaded libraries: ucp_get_version() as the
 * process sees it (global scope first, then the loaded libucp.so.0, then
 * the libucp.so.0 next to the loaded libucs.so.0, loaded for the question
 * and kept: a process that uses libucs without libucp).  0 if unknown.
 */
static unsigned int runtime_version(void)
{
	ucp_get_version_fn fn = (ucp_get_version_fn)dlsym(RTLD_DEFAULT, "ucp_get_version");
	unsigned int maj = 0, min = 0, rel = 0;
	void *h = NULL;

	if (!fn) {
		h = dlopen("libucp.so.0", RTLD_NOW | RTLD_NOLOAD);
		if (!h) {
			Dl_info di;
			char path[PATH_MAX];
			const char *slash;

			if (dladdr((void *)g.real_create, &di) && di.dli_fname &&
			    (slash = strrchr(di.dli_fname, '/')) &&
			    (size_t)snprintf(path, sizeof(path), "%.*s/libucp.so.0",
					     (int)(slash - di.dli_fname), di.dli_fname) < sizeof(path))
				h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
		}
		fn = h ? (ucp_get_version_fn)dlsym(h, "ucp_get_version") : NULL;
	}
	if (fn)
		fn(&maj, &min, &rel);
	if (h)
		dlclose(h);
	if (!maj || maj > 0xffff || min > 0xffff)
		return 0;
	return UCX_VER(maj, min);
}

static void version_list(char *buf, size_t len)
{
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof(tested_versions) / sizeof(tested_versions[0]) && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%u.%u", i ? ", " : "",
					tested_versions[i] >> 16, tested_versions[i] & 0xffff);
}

/* 1: this build may act on the UCX it runs with.  Else one line on stderr. */
static int version_gate(void)
{
	unsigned int v = runtime_version();
	int tested = 0;
	size_t i;
	char list[64];

	g.ucx_version = v;
	for (i = 0; i < sizeof(tested_versions) / sizeof(tested_versions[0]); i++)
		tested |= tested_versions[i] == BUILT_VERSION;
	if (tested && v == BUILT_VERSION)
		return 1;
	version_list(list, sizeof(list));
	if (v)
		fprintf(stderr, "libummunot-ucx: refusing UCX %u.%u: this build supports "
			"UCX %u.%u only (built against %u.%u; tested: %s); active 0, "
			"every call goes to UCX unchanged\n", v >> 16, v & 0xffff,
			BUILT_VERSION >> 16, BUILT_VERSION & 0xffff,
			BUILT_VERSION >> 16, BUILT_VERSION & 0xffff, list);
	else
		fprintf(stderr, "libummunot-ucx: refusing: cannot tell which UCX is loaded "
			"(no ucp_get_version); this build supports UCX %u.%u only (tested: %s); "
			"active 0, every call goes to UCX unchanged\n",
			BUILT_VERSION >> 16, BUILT_VERSION & 0xffff, list);
	atomic_store(&g.refused, 1);
	return 0;
}

/* ---- slots ---------------------------------------------------------- */

/* Readers: the chunk was published (release) before any index in it was
 * handed out; the index reaches a reader through a region UCX publishes
 * under its own locks.  Consume-like: acquire on the chunk pointer. */
static inline struct slot *slot_at(uint32_t idx)
{
	struct slot *c = atomic_load_explicit(&g.chunks[idx >> SLOT_CHUNK_SHIFT],
					      memory_order_acquire);

	return &c[idx & (SLOT_CHUNK - 1)];
}

/* ring_lock held.  0: none left. */
static uint32_t slot_alloc(void)
{
	uint32_t idx = g.free_head;
	struct slot *s;

	if (idx) {
		s = slot_at(idx);
		g.free_head = s->next_free;
	} else {
		idx = g.slots_hw;
		if ((idx >> SLOT_CHUNK_SHIFT) >= SLOT_CHUNKS)
			return 0;
		if (!atomic_load_explicit(&g.chunks[idx >> SLOT_CHUNK_SHIFT],
					  memory_order_relaxed)) {
			struct slot *c = calloc(SLOT_CHUNK, sizeof(*c));

			if (!c)
				return 0;
			/* release: pairs with the acquire in slot_at(). */
			atomic_store_explicit(&g.chunks[idx >> SLOT_CHUNK_SHIFT], c,
					      memory_order_release);
		}
		g.slots_hw++;
		s = slot_at(idx);
	}
	s->in_use = 1;
	atomic_store_explicit(&s->dead, 0, memory_order_relaxed);
	return idx;
}

/* ring_lock held. */
static void slot_free(uint32_t idx)
{
	struct slot *s = slot_at(idx);

	s->in_use = 0;
	s->gen++;		/* events still in the ring no longer match */
	s->next_free = g.free_head;
	g.free_head = idx;
}

/*
 * ring_lock held: every watched region is invalid (overflow, fork, lost
 * monitor).  The release stores pair with nothing directly: the lookups
 * that must see them synchronise with this thread through drain_lock or
 * g.slow (see sync_slow() and lookup_check()).
 */
static void mark_all_dead_locked(void)
{
	uint32_t i;

	for (i = 1; i < g.slots_hw; i++) {
		struct slot *s = slot_at(i);

		if (s->in_use)
			atomic_store_explicit(&s->dead, 1, memory_order_release);
	}
}

static void invalidate_all(void)
{
	inc(&g.invalidate_all);
	pthread_mutex_lock(&g.ring_lock);
	mark_all_dead_locked();
	pthread_mutex_unlock(&g.ring_lock);
	/* After the marks: a lookup that finds a region UCX still holds
	 * (queued on its invalidation queue) answers "miss". */
	g.vm_munmap((void *)ALL_START, ALL_END - ALL_START);
}

/* ---- the monitor ---------------------------------------------------- */

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

/* Publish m's inline check words (NULL if m is or they cannot be had). */
static void publish_check(struct ummunot_monitor *m)
{
	struct ummunot_monitor_check *c = m ? malloc(sizeof(*c)) : NULL;

	if (c && ummunot_monitor_check_init(m, c) < 0) {
		free(c);
		c = NULL;
	}
	/* release: pairs with the acquire load in lookup_check(); the words
	 * are filled before a lookup can use them. */
	atomic_store_explicit(&g.chk, c, memory_order_release);
}

/*
 * In a forked child: the inherited monitor answers -ECHILD (libummunot's
 * contract).  The child handler (single-threaded, async-signal context:
 * it only resets state) drops it and starts a new epoch (regions the
 * parent registered are never unregistered from here); the child's own
 * monitor is opened at its first use of a UCX cache (a child that only
 * execs pays nothing), and its first lookup invalidates everything
 * (SLOW_FORCE: every slot marked dead, then ucm_vm_munmap of it all).
 */
static void atfork_child(void)
{
	pthread_mutex_init(&g.drain_lock, NULL);
	pthread_mutex_init(&g.ring_lock, NULL);
	pthread_mutex_init(&g.list_lock, NULL);
	g.stale_mon = atomic_load(&g.mon);
	atomic_store(&g.mon, NULL);
	/* The inherited words answer "changed" here anyway (fork check). */
	atomic_store(&g.chk, NULL);
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
	publish_check(m);
	return m;
}

/* UMMUNOT_UCX_STATS=1: one line of statistics on stderr at exit. */
static void print_stats(void)
{
	struct ummunot_ucx_stats st;
	char line[512];
	int n;

	ummunot_ucx_stats(&st, sizeof(st));
	/* One write(2): the lines of processes sharing a pipe (MPI ranks)
	 * must not interleave (stderr is unbuffered, and fprintf may write a
	 * long line in pieces). */
	n = snprintf(line, sizeof(line), "libummunot-ucx: pid %ld: active %u, blind %u, rcaches %llu, "
		"watched %llu, unwatched %llu, watch-errors %llu, syncs %llu, events %llu, "
		"overflows %llu, invalidate-all %llu, forks %llu, dead-misses %llu, "
		"refused %u, ucx %u.%u\n",
		(long)getpid(), st.active, st.blind,
		(unsigned long long)st.rcaches, (unsigned long long)st.watched,
		(unsigned long long)st.unwatched, (unsigned long long)st.watch_errors,
		(unsigned long long)st.syncs, (unsigned long long)st.events,
		(unsigned long long)st.overflows, (unsigned long long)st.invalidate_all,
		(unsigned long long)st.forks, (unsigned long long)st.dead_misses,
		st.refused, st.ucx_version >> 16, st.ucx_version & 0xffff);
	if (n > 0 && (size_t)n < sizeof(line) && write(STDERR_FILENO, line, (size_t)n) < 0)
		n = -1;		/* nothing to do about it at exit */
}

static int env_on(const char *name)
{
	const char *e = getenv(name);

	return e && *e && strcmp(e, "0");
}

/*
 * Fail-closed (UMMUNOT_REQUIRE=1, set by ummunot-exec in mode require):
 * the adapter could not become active, and the line above said why.  The
 * process must not run on unprotected: exit with ummunot-exec's status.
 */
static void require_active(void)
{
	static const char msg[] = "libummunot-ucx: not active and UMMUNOT_REQUIRE is set, exiting\n";

	if (!env_on("UMMUNOT_REQUIRE"))
		return;
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);	/* exiting either way */
	_exit(126);
}

static void start(void)
{
	struct ummunot_monitor *m;

	if (env_on("UMMUNOT_UCX_STATS"))
		atexit(print_stats);
	g.verbose = env_on("UMMUNOT_UCX_VERBOSE") || env_on("UMMUNOT_VERBOSE");
	if (!version_gate()) {
		require_active();
		return;		/* refused: UCX as configured */
	}
	m = open_monitor();
	if (!m) {
		require_active();
		return;		/* passive: UCX as configured */
	}
	atomic_store(&g.mon, m);
	publish_check(m);
	/* After the open: libummunot's fork handler is installed, and
	 * child handlers run in registration order. */
	pthread_atfork(NULL, NULL, atfork_child);
	g.set_external_event(UCM_EVENT_VM_UNMAPPED);
	atomic_store_explicit(&g.active, 1, memory_order_release);
	if (g.verbose)
		fprintf(stderr, "libummunot-ucx: active: UCX %u.%u (built against %u.%u), "
			"pid %ld\n", g.ucx_version >> 16, g.ucx_version & 0xffff,
			BUILT_VERSION >> 16, BUILT_VERSION & 0xffff, (long)getpid());
}

/*
 * The gate refused after activation (a cache whose page table could not be
 * seen): give UCX back its configuration.  Caches wrapped before stay fed.
 */
static void refuse_late(const char *why)
{
	fprintf(stderr, "libummunot-ucx: refusing: %s; active 0, UCX's registration "
		"caches created from now on get no events from ummunot\n", why);
	atomic_store(&g.refused, 1);
	require_active();
	if (atomic_exchange(&g.active, 0) && !atomic_load(&g.rcaches))
		g.unset_external_event(UCM_EVENT_VM_UNMAPPED);
}

/* Mark the slot of a matching event dead; ring_lock held.  1: dispatch. */
static int event_live_locked(const struct ummunot_event *ev)
{
	uint32_t idx = (uint32_t)(ev->cookie >> 32), gen = (uint32_t)ev->cookie;
	struct slot *s;

	if (!idx || idx >= g.slots_hw)
		return 0;
	s = slot_at(idx);
	if (!s->in_use || s->gen != gen || s->handle != ev->handle || s->epoch != g.epoch)
		return 0;	/* the region was unregistered after the event */
	/* Before ucm_vm_munmap() for it (see drain_locked()). */
	atomic_store_explicit(&s->dead, 1, memory_order_release);
	return 1;
}

/* Read everything pending, mark, and hand it to UCX; drain_lock held. */
static void drain_locked(void)
{
	struct ummunot_event ev[64];
	struct ummunot_monitor *m;
	int n, i, live;

	/* BUSY before anything is consumed and until it is dispatched: a
	 * thread that finds nothing changed (the read below moves
	 * libummunot's "seen" generation) then finds BUSY set.  Pair: this
	 * release fence, and the acquire fence after changed() in
	 * lookup_check(). */
	atomic_fetch_or_explicit(&g.slow, SLOW_BUSY, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	tls_draining = 1;
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
		/* Marks first, under ring_lock (slots cannot be freed and
		 * reused meanwhile): a lookup that gets the region from
		 * UCX's page table after ucm_vm_munmap() queued its range
		 * answers "miss". */
		live = 0;
		for (i = 0; i < n; i++)
			if (event_live_locked(&ev[i]))
				ev[live++] = ev[i];
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
		for (i = 0; i < live; i++) {
			g.vm_munmap((void *)(uintptr_t)ev[i].start,
				    ev[i].end - ev[i].start);
			inc(&g.events);
		}
	}
out:
	tls_draining = 0;
	/* release: pairs with the acquire load of g.slow in lookup_check():
	 * a thread that reads BUSY cleared sees every mark above and
	 * whatever UCX's unmap callbacks did. */
	atomic_fetch_and_explicit(&g.slow, ~SLOW_BUSY, memory_order_release);
}

static __attribute__((noinline)) void sync_slow(void)
{
	if (tls_draining)
		return;		/* called back from inside our own drain */
	inc(&g.syncs);
	/* The mutex orders this thread after the previous drainer: its marks
	 * and UCX's invalidations happen-before our lookup. */
	pthread_mutex_lock(&g.drain_lock);
	drain_locked();
	pthread_mutex_unlock(&g.drain_lock);
}

/*
 * Before a lookup in one of our caches: drain if the ring moved or a
 * drain is in flight.  Cost when nothing changed, with no call:
 * libummunot's inline ummunot_monitor_check_changed() (the fork word, then
 * an acquire load of the ring's generation and a relaxed one of the
 * generation last consumed) and one acquire load of g.slow (plain loads
 * on x86).
 */
static inline void lookup_check(void)
{
	/* acquire: pairs with the release store in publish_check(). */
	const struct ummunot_monitor_check *c =
		atomic_load_explicit(&g.chk, memory_order_acquire);
	/* (F) inside: pairs with the kernel's (E) (ring.rst). */
	int changed = c ? ummunot_monitor_check_changed(c) : 1;

	/* acquire fence: pairs with the release fence after setting BUSY in
	 * drain_locked() (a drainer that moved "seen" has BUSY visible). */
	atomic_thread_fence(memory_order_acquire);
	if (unlikely(changed || atomic_load_explicit(&g.slow, memory_order_acquire)))
		sync_slow();
}

/* The wrap whose cache owns @pgtable, or NULL (memtype caches, UCT's own
 * page tables, caches we do not wrap). */
static inline struct wrap *owner_of(const ucs_pgtable_t *pgtable)
{
	/* acquire: pairs with the release store of g.npgt in publish(). */
	unsigned int i, n = atomic_load_explicit(&g.npgt, memory_order_acquire);

	for (i = 0; i < n; i++)
		/* acquire: pairs with the release store of .pgtable. */
		if (atomic_load_explicit(&g.pgt[i].pgtable, memory_order_acquire) == pgtable)
			return atomic_load_explicit(&g.pgt[i].wrap, memory_order_relaxed);
	return NULL;
}

/* list_lock held.  0: table full. */
static int publish(struct wrap *w)
{
	unsigned int i, n = atomic_load_explicit(&g.npgt, memory_order_relaxed);

	for (i = 0; i < n; i++)
		if (!atomic_load_explicit(&g.pgt[i].pgtable, memory_order_relaxed))
			break;
	if (i == MAX_RCACHES)
		return 0;
	atomic_store_explicit(&g.pgt[i].wrap, w, memory_order_relaxed);
	atomic_store_explicit(&g.pgt[i].pgtable, w->pgtable, memory_order_release);
	if (i == n)
		atomic_store_explicit(&g.npgt, n + 1, memory_order_release);
	return 1;
}

/* list_lock held. */
static void unpublish(const struct wrap *w)
{
	unsigned int i, n = atomic_load_explicit(&g.npgt, memory_order_relaxed);

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&g.pgt[i].wrap, memory_order_relaxed) == w)
			atomic_store_explicit(&g.pgt[i].pgtable, NULL, memory_order_relaxed);
}

/* ---- the rcache ops wrapper ---------------------------------------- */

static struct tail *tail_of(const struct wrap *w, void *region)
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
	uint32_t idx = 0;
	int ret = 0;

	memset(&r, 0, sizeof(r));
	r.start = region->super.start;
	r.length = region->super.end - region->super.start;
	t->slot = 0;
	t->gen = 0;
	/* Watch before UCX pins: a change after this point is reported. */
	pthread_mutex_lock(&g.ring_lock);
	m = child_monitor_locked();
	if (m) {
		idx = slot_alloc();
		if (!idx) {
			ret = -ENOMEM;
		} else {
			struct slot *s = slot_at(idx);

			r.cookie = (uint64_t)idx << 32 | s->gen;
			ret = ummunot_monitor_register(m, &r, 1, NULL);
			if (!ret) {
				s->handle = r.handle;
				s->epoch = g.epoch;
				t->slot = idx;
				t->gen = s->gen;
			} else {
				slot_free(idx);
			}
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
	if (st != UCS_OK && t->slot) {
		struct slot *s = slot_at(t->slot);

		pthread_mutex_lock(&g.ring_lock);
		if (s->epoch == g.epoch)
			ummunot_monitor_unregister(atomic_load(&g.mon), &s->handle, 1, NULL);
		slot_free(t->slot);
		pthread_mutex_unlock(&g.ring_lock);
		t->slot = 0;
	}
	return st;
}

static void wrap_mem_dereg(void *context, ucs_rcache_t *rcache,
			   ucs_rcache_region_t *region)
{
	struct wrap *w = context;
	struct tail *t = tail_of(w, region);

	if (t->slot) {
		struct slot *s = slot_at(t->slot);

		pthread_mutex_lock(&g.ring_lock);
		/* A region of another epoch was registered by the parent:
		 * its handle means nothing to this process's monitor. */
		if (s->in_use && s->gen == t->gen) {
			if (s->epoch == g.epoch && atomic_load(&g.mon) &&
			    !ummunot_monitor_unregister(atomic_load(&g.mon), &s->handle, 1, NULL))
				inc(&g.unwatched);
			slot_free(t->slot);
		}
		pthread_mutex_unlock(&g.ring_lock);
		t->slot = 0;
	}
	w->orig_ops->mem_dereg(w->orig_ctx, rcache, region);
}

#if HAVE_OPS_MERGE
/* UCX 1.18 calls merge without a NULL check: always pass it through. */
static void wrap_merge(void *context, ucs_rcache_t *rcache, void *arg,
		       ucs_rcache_region_t *region)
{
	struct wrap *w = context;

	if (w->orig_ops->merge)
		w->orig_ops->merge(w->orig_ctx, rcache, arg, region);
}
#endif

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
	int ok;

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
#if HAVE_OPS_MERGE
	w->ops.merge = wrap_merge;
#endif
	w->ops.dump_region = wrap_dump_region;
	p = *params;
	p.ops = &w->ops;
	p.context = w;
	p.region_struct_size = w->tail_off + sizeof(struct tail);
	tls_creating = w;
	st = g.real_create(&p, name, stats_parent, rcache_p);
	tls_creating = NULL;
	if (st != UCS_OK) {
		free(w);
		return st;
	}
	w->rcache = *rcache_p;
	/* The page table must be the one inside this cache's struct: else
	 * ucs_pgtable_init() was not called through the PLT, and neither,
	 * then, is ucs_pgtable_lookup(): lookups could not be checked. */
	ok = w->pgtable && (const char *)w->pgtable > (const char *)w->rcache &&
	     (const char *)w->pgtable < (const char *)w->rcache + 4096;
	pthread_mutex_lock(&g.list_lock);
	if (ok)
		ok = publish(w);
	if (ok) {
		w->next = g.wraps;
		g.wraps = w;
		inc(&g.rcaches);
	}
	pthread_mutex_unlock(&g.list_lock);
	if (ok)
		return UCS_OK;
	/* Not ours to feed: give UCX the cache it asked for. */
	refuse_late(w->pgtable ? "too many UCX registration caches to track" :
		    "cannot see the page table of UCX's registration cache "
		    "(ucs_pgtable_init is not interposable in this libucs)");
	g.real_destroy(w->rcache);
	free(w);
	return g.real_create(params, name, stats_parent, rcache_p);
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
	if (w)
		unpublish(w);
	pthread_mutex_unlock(&g.list_lock);
	/* No lookup of this cache's page table can run now (that would be
	 * a lookup in a destroyed cache); other caches' lookups never match
	 * its entry. */
	free(w);
}

EXPORT ucs_status_t ucs_pgtable_init(ucs_pgtable_t *pgtable,
				     ucs_pgt_dir_alloc_callback_t alloc_cb,
				     ucs_pgt_dir_release_callback_t release_cb)
{
	struct wrap *w = tls_creating;

	ensure_resolved();
	if (w && !w->pgtable) {
		w->pgtable = pgtable;	/* the first one inside ucs_rcache_create */
		tls_creating = NULL;
	}
	return g.real_pgt_init(pgtable, alloc_cb, release_cb);
}

EXPORT ucs_pgt_region_t *ucs_pgtable_lookup(const ucs_pgtable_t *pgtable,
					    ucs_pgt_addr_t address)
{
	ucs_pgt_region_t *r;
	struct wrap *w;
	struct tail *t;

	ensure_resolved();
	w = owner_of(pgtable);
	if (likely(!w))
		return g.real_lookup(pgtable, address);
	lookup_check();
	r = g.real_lookup(pgtable, address);
	if (!r)
		return NULL;
	/* The region is alive (UCX's caller holds what keeps it in the page
	 * table); its tail was written in mem_reg.  The dead flag: relaxed,
	 * because what makes a mark visible is the synchronisation in
	 * lookup_check() (drain_lock, or g.slow read with acquire). */
	t = tail_of(w, r);
	if (t->slot && atomic_load_explicit(&slot_at(t->slot)->dead, memory_order_relaxed)) {
		inc(&g.dead_misses);
		return NULL;	/* a miss: UCX's miss path drains its queue */
	}
	return r;
}

#if HAVE_GET_ALIGNMENT
EXPORT ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address,
				   size_t length, size_t alignment, int prot, void *arg,
				   ucs_rcache_region_t **region_p)
#else
EXPORT ucs_status_t ucs_rcache_get(ucs_rcache_t *rcache, void *address,
				   size_t length, int prot, void *arg,
				   ucs_rcache_region_t **region_p)
#endif
{
	ensure_resolved();
	/* Draining here, before UCX takes its page-table lock, lets UCX's
	 * unmap callback invalidate at once instead of queueing. */
	if (likely(atomic_load_explicit(&g.active, memory_order_relaxed)) &&
	    atomic_load_explicit(&g.rcaches, memory_order_relaxed))
		lookup_check();
#if HAVE_GET_ALIGNMENT
	return g.real_get(rcache, address, length, alignment, prot, arg, region_p);
#else
	return g.real_get(rcache, address, length, prot, arg, region_p);
#endif
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
	s.dead_misses = atomic_load(&g.dead_misses);
	s.refused = (uint32_t)atomic_load(&g.refused);
	s.ucx_version = g.ucx_version;
	if (size > sizeof(s))
		size = sizeof(s);
	memcpy(stats, &s, size);
	return (int)size;
}
