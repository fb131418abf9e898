// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx: UCX's registration cache (ucs_rcache) fed from ummunot
 * instead of UCX's malloc/mmap hooks, for UCX releases that have no
 * external event source (Documentation/integrate-ucx.rst).
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
 *                       registered with ummunot *before* UCX pins it (its
 *                       slot index is kept in bytes appended to UCX's
 *                       region struct), and unregistered at UCX's dereg;
 *                       records the cache's page table (ucs_pgtable_init
 *                       runs inside it) in a hash table without a limit;
 *   ucs_pgtable_init    records the page table of the cache being created
 *                       in this thread;
 *   ucs_pgtable_lookup  every lookup of a cached region goes through it
 *                       (UCX 1.14+ answers UCP's hits with an inline
 *                       function that calls it through the PLT; so does
 *                       ucs_rcache_get).  For our caches' page tables: drain
 *                       the ring if it moved, look up, and answer "miss" if
 *                       the region found was invalidated by a drain (UCX
 *                       may still hold it, queued for invalidation).  Any
 *                       other page table: UCX's answer, untouched;
 *   ucs_rcache_get      drains the ring first (UCX's miss path, and the
 *                       only lookup of 1.13, look at UCX's invalidation
 *                       queue before the page table);
 *   ucs_rcache_destroy  forgets the cache, then destroys it.
 *
 * Bindings.  Every interposed call is forwarded to the libucs its caller is
 * linked with (the caller's own dlopen() scope, found with dladdr()), never
 * to a library found by name: a process may hold two UCX copies.  Each copy
 * is judged once, at its first cache (inside ucp_init(), before MPI_Init()
 * returns): its release (ucp_get_version() of the libucp beside it) must be
 * one this adapter was tested with, and a probe cache must show that the
 * copy's own calls to ucs_pgtable_init/lookup reach the adapter (not so
 * with -Bsymbolic or inlined lookups).  The first copy that passes is fed
 * ("active"); any other is passed through untouched, with one line.  One
 * build serves every layout of UCX's interface (ucx-abi.h): no UCX header
 * is needed to build it.
 *
 * Events become ucm_vm_munmap(start, end - start) of the active copy: UCX
 * invalidates every region overlapping the range, in every rcache.
 * Overflow: resync, drain, invalidate everything.  fork(): the handlers
 * hold the adapter's locks across fork(); a child opens its own monitor
 * and invalidates everything (libummunot's -ECHILD contract).  A region
 * the module refuses to watch (a limit) is registered uncached: UCX gets
 * its registration, and the range is queued for invalidation at once, so
 * no later lookup can return it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#include "ucx-abi.h"
#include "ummunot-ucx.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- what this build knows about UCX ------------------------------- */

#define UCX_VER(maj, min) (((unsigned int)(maj) << 16) | (unsigned int)(min))

/*
 * The UCX releases this adapter is tested with: 1.13 and 1.18 as Debian
 * builds them, in CI (tests/ucx, tests/mpi/ucx); the others from their tags
 * by scripts/ucx-matrix, whose table (Documentation/ucx-releases.rst) shows
 * each one protected; 1.23 is UCX's master branch at the commit the table
 * names.  Any other release is refused at its first cache: a release is
 * added here when its row in that table says "protected".
 */
static const unsigned int tested_versions[] = {
	UCX_VER(1, 13), UCX_VER(1, 14), UCX_VER(1, 15), UCX_VER(1, 16), UCX_VER(1, 17),
	UCX_VER(1, 18), UCX_VER(1, 19), UCX_VER(1, 20), UCX_VER(1, 21), UCX_VER(1, 22),
	UCX_VER(1, 23),
};

static enum ucx_layout layout_of(unsigned int v)
{
	if (v >= UCX_VER(1, 18))
		return UCX_LAYOUT_118;
	if (v >= UCX_VER(1, 17))
		return UCX_LAYOUT_117;
	if (v >= UCX_VER(1, 13))
		return UCX_LAYOUT_113;
	return UCX_LAYOUT_NONE;
}

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
	uint32_t probe;			/* a probe cache's region: no orig ops */
	uint32_t pad;
};

/* ---- bindings: one per libucs copy in the process -------------------- */

enum bstate { B_NEW = 0, B_ACTIVE, B_PASS };

struct binding {
	uintptr_t base;			/* libucs's load address */
	const char *path;		/* libucs's file (never freed) */
	ucx_rcache_create_fn create;
	ucx_rcache_destroy_fn destroy;
	ucx_rcache_get_raw_fn get;
	ucx_region_put_fn put;
	ucx_pgtable_lookup_fn lookup;
	ucx_pgtable_init_fn pgt_init;
	ucx_vm_munmap_fn vm_munmap;
	ucx_external_event_fn set_external, unset_external;
	unsigned int version;		/* 0: unknown */
	enum ucx_layout layout;
	_Atomic int state;		/* enum bstate; set once, under gate_lock */
};

/* A range of code (a library) whose calls go to one binding. */
struct caller {
	uintptr_t lo, hi;
	struct binding *b;
};

#define MAX_BINDINGS 8
#define MAX_CALLERS 64

struct wrap {
	union {
		struct ucx_ops_113 o113;
		struct ucx_ops_118 o118;
	} ops;				/* ours: what UCX calls */
	void *orig_ctx;
	ucx_mem_reg_fn orig_reg;
	ucx_mem_dereg_fn orig_dereg;
	ucx_merge_fn orig_merge;	/* 1.18+: may be NULL */
	ucx_dump_region_fn orig_dump;
	size_t tail_off;
	struct binding *b;
	struct ucx_rcache *rcache;
	const struct ucx_pgtable *pgtable;	/* the cache's page table */
	int probe;			/* the gate's probe cache */
	struct wrap *next;		/* g.wraps, or the free list */
};

/*
 * The page tables of the caches we wrap, found by every lookup without a
 * lock: open addressing keyed by the page table's address, grown (never
 * shrunk) under list_lock.  A table is published with a release store
 * after its entries are written; a replaced table is kept (never freed), so
 * a reader that loaded it still reads valid memory.  A removed entry
 * becomes a tombstone.  A reader only ever looks up a page table whose
 * cache is alive, which was inserted before the reader could have it
 * (UCX hands the cache over after ucs_rcache_create() returned).
 */
#define PGT_TOMBSTONE ((const struct ucx_pgtable *)1)

struct pgt_slot {
	_Atomic(const struct ucx_pgtable *) pgtable;	/* NULL: never used */
	_Atomic(struct wrap *) wrap;
};

struct pgt_table {
	size_t mask;			/* size - 1, size a power of two */
	size_t used;			/* live + tombstones (list_lock) */
	struct pgt_table *retired;	/* the tables this one replaced */
	struct pgt_slot slot[];
};

static struct {
	pthread_once_t start_once;
	_Atomic int active;		/* a binding is fed, monitor opened */
	_Atomic int refused;		/* the gate refused a UCX copy */
	unsigned int ucx_version;	/* the active copy's, or the last refused */
	int verbose;
	int started;
	_Atomic int blind;
	_Atomic(struct binding *) fed;	/* the active binding */
	_Atomic(struct ummunot_monitor *) mon;
	/* mon's inline "changed?" words, or NULL (lookup_check() then takes
	 * the slow path).  One per monitor, never freed: a lookup may still
	 * hold the previous one (one more per forked child that uses UCX). */
	_Atomic(const struct ummunot_monitor_check *) chk;
	struct ummunot_monitor *stale_mon;	/* the parent's, in a child */
	int need_open;			/* a child's monitor is not open yet */
	_Atomic unsigned int slow;
	uint64_t epoch;			/* under ring_lock; never 0 */

	/* Lock order: gate_lock (judging a UCX copy), drain_lock,
	 * ring_lock, list_lock, bind_lock.  drain_lock: one drain (read + dispatch) at a time;
	 * ring_lock: every call that consumes or mutates the monitor
	 * (libummunot: one consumer) and the slot table; list_lock: the
	 * wraps and the page-table hash.  UCX's locks are never held while
	 * ring_lock is taken except its pgt_lock in mem_reg/mem_dereg, and
	 * the drain dispatches without ring_lock.  A drain may run while
	 * this thread holds a cache's pgt_lock for reading (a lookup): UCX's
	 * unmap callback only try-locks it, and queues the range otherwise.
	 * bind_lock: bindings and callers (a leaf: no dl call under it). */
	pthread_mutex_t bind_lock;
	pthread_mutex_t drain_lock;
	pthread_mutex_t ring_lock;
	pthread_mutex_t list_lock;
	struct wrap *wraps, *free_wraps;

	_Atomic(struct slot *) chunks[SLOT_CHUNKS];
	uint32_t slots_hw;		/* slots handed out so far (ring_lock) */
	uint32_t free_head;		/* 0: empty (ring_lock) */

	_Atomic(struct pgt_table *) pgt;

	struct binding bindings[MAX_BINDINGS];
	_Atomic unsigned int nbindings;
	struct caller callers[MAX_CALLERS];
	_Atomic unsigned int ncallers;

	_Atomic uint64_t rcaches, watched, unwatched, watch_errors, syncs,
		events, overflows, invalidate_all, forks, dead_misses, passed_through;
	_Atomic int warned_watch;
} g = {
	.start_once = PTHREAD_ONCE_INIT,
	.epoch = 1,
	.slots_hw = 1,
	.bind_lock = PTHREAD_MUTEX_INITIALIZER,
	.drain_lock = PTHREAD_MUTEX_INITIALIZER,
	.ring_lock = PTHREAD_MUTEX_INITIALIZER,
	.list_lock = PTHREAD_MUTEX_INITIALIZER,
};

/* The cache whose ucs_rcache_create() runs in this thread (its page table
 * is the first ucs_pgtable_init() inside it); the probe's count of
 * lookups of its page table; whether this thread is dispatching events (a
 * lookup from inside UCX's unmap callbacks must not wait for its own
 * drain). */
static __thread struct wrap *tls_creating;
static __thread unsigned int tls_probe_lookups;
static __thread int tls_draining;

static void inc(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static int env_on(const char *name)
{
	const char *e = getenv(name);

	return e && *e && strcmp(e, "0");
}

/*
 * Fail-closed (UMMUNOT_REQUIRE=1, set by ummunot-exec in mode require):
 * the adapter could not protect this process, and the line before said
 * why.  The process must not run on unprotected: exit with ummunot-exec's
 * status.
 */
static void require_active(void)
{
	static const char msg[] = "libummunot-ucx: not active and UMMUNOT_REQUIRE is set, exiting\n";

	if (!env_on("UMMUNOT_REQUIRE"))
		return;
	(void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);	/* exiting either way */
	_exit(126);
}

/* ---- resolving the caller's libucs ---------------------------------- */

/* Our own load address: a symbol found there is the interposer itself. */
static uintptr_t self_base(void)
{
	static uintptr_t base;
	Dl_info di;

	if (!base && dladdr((void *)self_base, &di))
		base = (uintptr_t)di.dli_fbase;
	return base;
}

static uintptr_t base_of(const void *p)
{
	Dl_info di;

	return p && dladdr(p, &di) ? (uintptr_t)di.dli_fbase : 0;
}

struct range_q {
	uintptr_t addr, lo, hi;
};

static int range_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct range_q *q = arg;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int i, hit = 0;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s, e;

		if (ph->p_type != PT_LOAD)
			continue;
		s = info->dlpi_addr + ph->p_vaddr;
		e = s + ph->p_memsz;
		if (s < lo)
			lo = s;
		if (e > hi)
			hi = e;
		if (q->addr >= s && q->addr < e)
			hit = 1;
	}
	if (!hit)
		return 0;
	q->lo = lo;
	q->hi = hi;
	return 1;
}

/*
 * Look @name up as the library @base/@file sees it: in its own scope (the
 * object, then what it was linked with).  NULL if that finds nothing or
 * finds the interposer (the main program's scope is the global one).
 */
static void *sym_from(const char *file, const char *name)
{
	void *h = dlopen(file, RTLD_LAZY | RTLD_NOLOAD);
	void *p;

	if (!h)
		return NULL;
	p = dlsym(h, name);
	dlclose(h);		/* drops only the reference NOLOAD took */
	if (p && base_of(p) == self_base())
		p = NULL;
	return p;
}

static void *binding_sym(const struct binding *b, const char *name)
{
	return sym_from(b->path, name);
}

/* The functions of the libucs @b->path (dl calls: never under bind_lock,
 * a UCX constructor may call us with the loader's lock held). */
static void binding_fill(struct binding *b)
{
	b->create = (ucx_rcache_create_fn)binding_sym(b, "ucs_rcache_create");
	b->destroy = (ucx_rcache_destroy_fn)binding_sym(b, "ucs_rcache_destroy");
	b->get = (ucx_rcache_get_raw_fn)binding_sym(b, "ucs_rcache_get");
	b->put = (ucx_region_put_fn)binding_sym(b, "ucs_rcache_region_put");
	b->lookup = (ucx_pgtable_lookup_fn)binding_sym(b, "ucs_pgtable_lookup");
	b->pgt_init = (ucx_pgtable_init_fn)binding_sym(b, "ucs_pgtable_init");
	/* libucm is a dependency of libucs: found in libucs's scope. */
	b->vm_munmap = (ucx_vm_munmap_fn)binding_sym(b, "ucm_vm_munmap");
	b->set_external = (ucx_external_event_fn)binding_sym(b, "ucm_set_external_event");
	b->unset_external = (ucx_external_event_fn)binding_sym(b, "ucm_unset_external_event");
}

/* bind_lock held: @lo..@hi calls @b (ignored when full or known). */
static void add_caller_locked(uintptr_t lo, uintptr_t hi, struct binding *b)
{
	unsigned int i, n = atomic_load_explicit(&g.ncallers, memory_order_relaxed);

	for (i = 0; i < n; i++)
		if (g.callers[i].lo == lo)
			return;
	if (n == MAX_CALLERS)
		return;
	g.callers[n].lo = lo;
	g.callers[n].hi = hi;
	g.callers[n].b = b;
	/* release: pairs with the acquire load in caller_binding(). */
	atomic_store_explicit(&g.ncallers, n + 1, memory_order_release);
}

/*
 * The binding the code at @ra calls: the libucs that @name resolves to in
 * the scope of the library @ra is in.  Cached per library (address range;
 * libucs's own range too).  NULL: nothing to call (no UCX in that scope).
 */
static struct binding *resolve_caller(const void *ra, const char *name)
{
	struct range_q q = { .addr = (uintptr_t)ra }, uq;
	struct binding cand, *b = NULL;
	unsigned int i, n;
	Dl_info di, ui;
	void *real;

	if (!dladdr(ra, &di) || !di.dli_fname)
		return NULL;
	real = sym_from(di.dli_fname, name);
	if (!real)
		real = dlsym(RTLD_NEXT, name);	/* the main program: global scope */
	if (!real || !dladdr(real, &ui) || !ui.dli_fname)
		return NULL;
	uq.addr = (uintptr_t)ui.dli_fbase;
	if (!dl_iterate_phdr(range_cb, &q) || !dl_iterate_phdr(range_cb, &uq))
		return NULL;
	memset(&cand, 0, sizeof(cand));
	cand.base = (uintptr_t)ui.dli_fbase;
	cand.path = strdup(ui.dli_fname);	/* never freed */
	if (!cand.path)
		return NULL;
	binding_fill(&cand);
	pthread_mutex_lock(&g.bind_lock);
	n = atomic_load_explicit(&g.nbindings, memory_order_relaxed);
	for (i = 0; i < n; i++)
		if (g.bindings[i].base == cand.base)
			b = &g.bindings[i];
	if (!b && n < MAX_BINDINGS) {
		b = &g.bindings[n];
		*b = cand;
		cand.path = NULL;
		atomic_store_explicit(&g.nbindings, n + 1, memory_order_release);
	}
	if (b) {
		add_caller_locked(uq.lo, uq.hi, b);
		add_caller_locked(q.lo, q.hi, b);
	}
	pthread_mutex_unlock(&g.bind_lock);
	free((void *)cand.path);
	return b;
}

static inline struct binding *caller_binding(const void *ra, const char *name)
{
	unsigned int i, n = atomic_load_explicit(&g.ncallers, memory_order_acquire);
	uintptr_t a = (uintptr_t)ra;

	for (i = 0; i < n; i++)
		if (a >= g.callers[i].lo && a < g.callers[i].hi)
			return g.callers[i].b;
	return resolve_caller(ra, name);
}

/* A UCX function was called and nothing can answer it: say so once. */
static void no_ucx(const char *name)
{
	static _Atomic int said;

	if (!atomic_exchange(&said, 1))
		fprintf(stderr, "libummunot-ucx: %s called, but its caller is linked with "
			"no UCX library that has it; returning an error\n", name);
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

static void fed_munmap(uintptr_t start, uintptr_t end)
{
	struct binding *b = atomic_load_explicit(&g.fed, memory_order_acquire);

	if (b)
		b->vm_munmap((void *)start, end - start);
}

static void invalidate_all(void)
{
	inc(&g.invalidate_all);
	pthread_mutex_lock(&g.ring_lock);
	mark_all_dead_locked();
	pthread_mutex_unlock(&g.ring_lock);
	/* After the marks: a lookup that finds a region UCX still holds
	 * (queued for invalidation) answers "miss". */
	fed_munmap(ALL_START, ALL_END);
}

/* ---- the monitor ---------------------------------------------------- */

static struct ummunot_monitor *open_monitor(void)
{
	const char *e = getenv("UMMUNOT_UCX_RING_ENTRIES");
	struct ummunot_monitor_attr attr;
	struct ummunot_monitor *m = NULL;
	int r;

	memset(&attr, 0, sizeof(attr));
	/* 0: the module's default.  Overflow is handled (resync, drop
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
			"active 0, UCX runs as configured (with its hooks off its "
			"registration caches stay disabled)");
		return NULL;
	}
	return m;
}

/* Publish m's inline check words (NULL if m is or they cannot be had). */
static void publish_check(struct ummunot_monitor *m)
{
	struct ummunot_monitor_check *c = m ? calloc(1, sizeof(*c)) : NULL;

	if (c)
		c->size = sizeof(*c);
	if (c && ummunot_monitor_check_init(m, c) < 0) {
		free(c);
		c = NULL;
	}
	/* release: pairs with the acquire load in lookup_check(); the words
	 * are filled before a lookup can use them. */
	atomic_store_explicit(&g.chk, c, memory_order_release);
}

/*
 * fork(): no other thread may hold an adapter lock at the moment of the
 * fork (the child would inherit it locked, with nobody to unlock it), and
 * the slot table and wraps must be consistent: the prepare handler takes
 * every lock in order, the parent and child handlers release them.
 */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;

static void atfork_prepare(void)
{
	pthread_mutex_lock(&gate_lock);
	pthread_mutex_lock(&g.drain_lock);
	pthread_mutex_lock(&g.ring_lock);
	pthread_mutex_lock(&g.list_lock);
	pthread_mutex_lock(&g.bind_lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&g.bind_lock);
	pthread_mutex_unlock(&g.list_lock);
	pthread_mutex_unlock(&g.ring_lock);
	pthread_mutex_unlock(&g.drain_lock);
	pthread_mutex_unlock(&gate_lock);
}

/*
 * In a forked child the inherited monitor answers -ECHILD (libummunot's
 * contract).  The child drops it and starts a new epoch (regions the
 * parent registered are never unregistered from here); its own monitor is
 * opened at its first use of a UCX cache (a child that only execs pays
 * nothing), and its first lookup invalidates everything (SLOW_FORCE).
 */
static void atfork_child(void)
{
	g.stale_mon = atomic_load(&g.mon);
	atomic_store(&g.mon, NULL);
	/* The inherited words answer "changed" here anyway (fork check). */
	atomic_store(&g.chk, NULL);
	g.need_open = 1;
	g.epoch++;
	inc(&g.forks);
	atomic_store(&g.slow, SLOW_FORCE);
	atfork_parent();
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
	 * must not interleave. */
	n = snprintf(line, sizeof(line), "libummunot-ucx: pid %ld: active %u, blind %u, rcaches %llu, "
		"watched %llu, unwatched %llu, watch-errors %llu, syncs %llu, events %llu, "
		"overflows %llu, invalidate-all %llu, forks %llu, dead-misses %llu, "
		"refused %u, ucx %u.%u, passed-through %llu\n",
		(long)getpid(), st.active, st.blind,
		(unsigned long long)st.rcaches, (unsigned long long)st.watched,
		(unsigned long long)st.unwatched, (unsigned long long)st.watch_errors,
		(unsigned long long)st.syncs, (unsigned long long)st.events,
		(unsigned long long)st.overflows, (unsigned long long)st.invalidate_all,
		(unsigned long long)st.forks, (unsigned long long)st.dead_misses,
		st.refused, st.ucx_version >> 16, st.ucx_version & 0xffff,
		(unsigned long long)st.passed_through);
	if (n > 0 && (size_t)n < sizeof(line) && write(STDERR_FILENO, line, (size_t)n) < 0)
		n = -1;		/* nothing to do about it at exit */
}

/* Once per process, at the first UCX cache. */
static void start(void)
{
	if (env_on("UMMUNOT_UCX_STATS"))
		atexit(print_stats);
	g.verbose = env_on("UMMUNOT_UCX_VERBOSE") || env_on("UMMUNOT_VERBOSE");
	/* Only tests/ucx builds a copy without them (its fork test's negative
	 * control, never installed). */
#ifndef UMMUNOT_UCX_TEST_NO_FORK_HANDLERS
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
#else
	(void)atfork_prepare;
	(void)atfork_child;
#endif
	g.started = 1;
}

/* ---- events --------------------------------------------------------- */

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
			fed_munmap((uintptr_t)ev[i].start, (uintptr_t)ev[i].end);
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
 * libummunot's inline ummunot_monitor_check_changed() and one acquire
 * load of g.slow (plain loads on x86).
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

/* ---- the page-table hash -------------------------------------------- */

static inline size_t pgt_hash(const struct ucx_pgtable *p)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x;
}

/* The wrap whose cache owns @pgtable, or NULL (memtype caches, UCT's own
 * page tables, caches we do not wrap).  No lock: see struct pgt_table. */
static inline struct wrap *owner_of(const struct ucx_pgtable *pgtable)
{
	/* acquire: pairs with the release store of g.pgt in pgt_grow(). */
	struct pgt_table *t = atomic_load_explicit(&g.pgt, memory_order_acquire);
	size_t i;

	if (!t)
		return NULL;
	for (i = pgt_hash(pgtable) & t->mask;; i = (i + 1) & t->mask) {
		/* acquire: pairs with the release store in pgt_put(). */
		const struct ucx_pgtable *p =
			atomic_load_explicit(&t->slot[i].pgtable, memory_order_acquire);

		if (p == pgtable)
			return atomic_load_explicit(&t->slot[i].wrap, memory_order_relaxed);
		if (!p)
			return NULL;
	}
}

/* list_lock held; @t has a free slot. */
static void pgt_put(struct pgt_table *t, const struct ucx_pgtable *pgtable, struct wrap *w)
{
	size_t i;

	for (i = pgt_hash(pgtable) & t->mask;; i = (i + 1) & t->mask) {
		const struct ucx_pgtable *p =
			atomic_load_explicit(&t->slot[i].pgtable, memory_order_relaxed);

		if (!p || p == PGT_TOMBSTONE)
			break;
	}
	if (!atomic_load_explicit(&t->slot[i].pgtable, memory_order_relaxed))
		t->used++;
	atomic_store_explicit(&t->slot[i].wrap, w, memory_order_relaxed);
	atomic_store_explicit(&t->slot[i].pgtable, pgtable, memory_order_release);
}

/* list_lock held: a table with room for one more.  0: out of memory. */
static int pgt_grow(void)
{
	struct pgt_table *old = atomic_load_explicit(&g.pgt, memory_order_relaxed), *t;
	size_t size = old ? old->mask + 1 : 64, i;

	if (old && (old->used + 1) * 2 <= size)
		return 1;
	if (old) {
		size_t live = 0;

		for (i = 0; i <= old->mask; i++) {
			const struct ucx_pgtable *p = atomic_load_explicit(&old->slot[i].pgtable,
									   memory_order_relaxed);

			live += p && p != PGT_TOMBSTONE;
		}
		while ((live + 1) * 4 > size)
			size *= 2;
	}
	t = calloc(1, sizeof(*t) + size * sizeof(t->slot[0]));
	if (!t)
		return 0;
	t->mask = size - 1;
	t->retired = old;	/* kept: a reader may still hold it */
	for (i = 0; old && i <= old->mask; i++) {
		const struct ucx_pgtable *p =
			atomic_load_explicit(&old->slot[i].pgtable, memory_order_relaxed);

		if (p && p != PGT_TOMBSTONE)
			pgt_put(t, p, atomic_load_explicit(&old->slot[i].wrap,
							   memory_order_relaxed));
	}
	/* release: the entries are written before the table is seen. */
	atomic_store_explicit(&g.pgt, t, memory_order_release);
	return 1;
}

/* list_lock held.  0: out of memory (nothing published). */
static int publish(struct wrap *w)
{
	if (!pgt_grow())
		return 0;
	pgt_put(atomic_load_explicit(&g.pgt, memory_order_relaxed), w->pgtable, w);
	return 1;
}

/* list_lock held. */
static void unpublish(const struct wrap *w)
{
	struct pgt_table *t = atomic_load_explicit(&g.pgt, memory_order_relaxed);
	size_t i;

	if (!t || !w->pgtable)
		return;
	for (i = pgt_hash(w->pgtable) & t->mask;; i = (i + 1) & t->mask) {
		const struct ucx_pgtable *p =
			atomic_load_explicit(&t->slot[i].pgtable, memory_order_relaxed);

		if (!p)
			return;
		if (p == w->pgtable &&
		    atomic_load_explicit(&t->slot[i].wrap, memory_order_relaxed) == w) {
			atomic_store_explicit(&t->slot[i].pgtable, PGT_TOMBSTONE,
					      memory_order_release);
			return;
		}
	}
}

/* Wraps are never freed, only reused (a reader may hold one).  list_lock. */
static struct wrap *wrap_alloc_locked(void)
{
	struct wrap *w = g.free_wraps;

	if (w) {
		g.free_wraps = w->next;
		memset(w, 0, sizeof(*w));
		return w;
	}
	return calloc(1, sizeof(*w));
}

static void wrap_free(struct wrap *w)
{
	pthread_mutex_lock(&g.list_lock);
	w->next = g.free_wraps;
	g.free_wraps = w;
	pthread_mutex_unlock(&g.list_lock);
}

/* ---- the rcache ops wrapper ---------------------------------------- */

static struct tail *tail_of(const struct wrap *w, void *region)
{
	return (struct tail *)((char *)region + w->tail_off);
}

/*
 * The module refused to watch @region (a limit): UCX still gets its
 * registration, but uncached.  The range is queued for invalidation now
 * (UCX's unmap callback cannot take the page-table lock this thread holds
 * in mem_reg, so it queues), and every lookup looks at that queue before
 * the page table: no later lookup returns the region.
 */
static void make_uncached(const struct wrap *w, const struct ucx_pgt_region *region)
{
	w->b->vm_munmap((void *)region->start, region->end - region->start);
}

static ucx_status_t wrap_mem_reg(void *context, struct ucx_rcache *rcache, void *arg,
				 struct ucx_pgt_region *region, uint16_t flags)
{
	struct wrap *w = context;
	struct tail *t = tail_of(w, region);
	struct ummunot_region r;
	struct ummunot_monitor *m;
	ucx_status_t st;
	uint32_t idx = 0;
	int ret = 0;

	memset(t, 0, sizeof(*t));
	if (w->probe) {
		t->probe = 1;	/* the gate's probe: nothing to register */
		return UCX_OK;
	}
	memset(&r, 0, sizeof(r));
	r.start = region->start;
	r.length = region->end - region->start;
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
				"registrations ummunot cannot watch are not cached (warned once)\n",
				(unsigned long)region->start, (unsigned long)region->end,
				strerror(-ret));
	} else if (m) {
		inc(&g.watched);
	}
	/* m == NULL: blind, every lookup invalidates everything. */
	st = w->orig_reg(w->orig_ctx, rcache, arg, region, flags);
	if (st != UCX_OK && t->slot) {
		struct slot *s = slot_at(t->slot);

		pthread_mutex_lock(&g.ring_lock);
		if (s->epoch == g.epoch)
			ummunot_monitor_unregister(atomic_load(&g.mon), &s->handle, 1, NULL);
		slot_free(t->slot);
		pthread_mutex_unlock(&g.ring_lock);
		t->slot = 0;
	}
	if (st == UCX_OK && ret)
		make_uncached(w, region);
	return st;
}

static void wrap_mem_dereg(void *context, struct ucx_rcache *rcache,
			   struct ucx_pgt_region *region)
{
	struct wrap *w = context;
	struct tail *t = tail_of(w, region);

	if (t->probe)
		return;
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
	w->orig_dereg(w->orig_ctx, rcache, region);
}

/* UCX 1.18+ calls merge without a NULL check: always present in ours. */
static void wrap_merge(void *context, struct ucx_rcache *rcache, void *arg,
		       struct ucx_pgt_region *region)
{
	struct wrap *w = context;

	if (w->orig_merge)
		w->orig_merge(w->orig_ctx, rcache, arg, region);
}

static void wrap_dump_region(void *context, struct ucx_rcache *rcache,
			     struct ucx_pgt_region *region, char *buf, size_t max)
{
	struct wrap *w = context;

	if (w->orig_dump && !tail_of(w, region)->probe)
		w->orig_dump(w->orig_ctx, rcache, region, buf, max);
	else if (max)
		buf[0] = '\0';
}

/* Fill w's ops from @orig (the caller's ucs_rcache_ops_t, of @layout). */
static void wrap_ops(struct wrap *w, enum ucx_layout layout, const void *orig)
{
	if (layout == UCX_LAYOUT_118) {
		const struct ucx_ops_118 *o = orig;

		if (o) {
			w->orig_reg = o->mem_reg;
			w->orig_dereg = o->mem_dereg;
			w->orig_merge = o->merge;
			w->orig_dump = o->dump_region;
		}
		w->ops.o118.mem_reg = wrap_mem_reg;
		w->ops.o118.mem_dereg = wrap_mem_dereg;
		w->ops.o118.merge = wrap_merge;
		w->ops.o118.dump_region = wrap_dump_region;
	} else {
		const struct ucx_ops_113 *o = orig;

		if (o) {
			w->orig_reg = o->mem_reg;
			w->orig_dereg = o->mem_dereg;
			w->orig_dump = o->dump_region;
		}
		w->ops.o113.mem_reg = wrap_mem_reg;
		w->ops.o113.mem_dereg = wrap_mem_dereg;
		w->ops.o113.dump_region = wrap_dump_region;
	}
}

/* The caller's params, seen through @layout; and ours, made from them. */
union params {
	struct ucx_params_113 p113;
	struct ucx_params_117 p117;
};

struct params_view {
	size_t *region_struct_size;
	int *ucm_events;
	const void **ops;
	void **context;
	int *flags;
	unsigned long *max_regions;
};

static struct params_view view_of(union params *p, enum ucx_layout layout)
{
	struct params_view v;

	if (layout == UCX_LAYOUT_113) {
		v.region_struct_size = &p->p113.region_struct_size;
		v.ucm_events = &p->p113.ucm_events;
		v.ops = &p->p113.ops;
		v.context = &p->p113.context;
		v.flags = &p->p113.flags;
		v.max_regions = &p->p113.max_regions;
	} else {
		v.region_struct_size = &p->p117.region_struct_size;
		v.ucm_events = &p->p117.ucm_events;
		v.ops = &p->p117.ops;
		v.context = &p->p117.context;
		v.flags = &p->p117.flags;
		v.max_regions = &p->p117.max_regions;
	}
	return v;
}

static size_t params_size(enum ucx_layout layout)
{
	return layout == UCX_LAYOUT_113 ? sizeof(struct ucx_params_113) :
					  sizeof(struct ucx_params_117);
}

/*
 * Create a cache of binding @b wrapped by @w (w->b, w->probe set) from the
 * caller's @params: our ops and context, our tail after UCX's region.
 * Returns UCX's status; on success w->rcache and w->pgtable are set and
 * the cache is published.  UCX_ERR_UNSUPPORTED: the cache was created
 * but its page table cannot be seen (destroyed again).
 */
static ucx_status_t create_wrapped(struct wrap *w, const void *params, const char *name,
				   void *stats_parent, struct ucx_rcache **rcache_p)
{
	enum ucx_layout layout = w->b->layout;
	union params p;
	struct params_view v = view_of(&p, layout);
	ucx_status_t st;
	int ok;

	memcpy(&p, params, params_size(layout));
	wrap_ops(w, layout, *v.ops);
	w->orig_ctx = *v.context;
	w->tail_off = (*v.region_struct_size + 7) & ~(size_t)7;
	*v.ops = &w->ops;
	*v.context = w;
	*v.region_struct_size = w->tail_off + sizeof(struct tail);
	tls_creating = w;
	st = w->b->create(&p, name, stats_parent, rcache_p);
	tls_creating = NULL;
	if (st != UCX_OK)
		return st;
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
	}
	pthread_mutex_unlock(&g.list_lock);
	if (ok)
		return UCX_OK;
	w->b->destroy(w->rcache);
	return UCX_ERR_UNSUPPORTED;
}

/* list_lock: take @rcache's wrap off the list and out of the hash. */
static struct wrap *forget(struct ucx_rcache *rcache)
{
	struct wrap **pp, *w = NULL;

	pthread_mutex_lock(&g.list_lock);
	for (pp = &g.wraps; *pp; pp = &(*pp)->next)
		if ((*pp)->rcache == rcache) {
			w = *pp;
			*pp = w->next;
			unpublish(w);
			break;
		}
	pthread_mutex_unlock(&g.list_lock);
	return w;
}

/* ---- the gate: judging a UCX copy once, at its first cache --------- */

/* UCX's release of @b: ucp_get_version() of the libucp.so.0 beside its
 * libucs, if that libucp is linked with this very libucs.  0: unknown. */
static unsigned int binding_version(const struct binding *b)
{
	const char *slash = strrchr(b->path, '/');
	char path[PATH_MAX];
	ucx_get_version_fn fn;
	unsigned int maj = 0, min = 0, rel = 0;
	void *h, *p;

	if (!slash || (size_t)snprintf(path, sizeof(path), "%.*s/libucp.so.0",
				       (int)(slash - b->path), b->path) >= sizeof(path))
		return 0;
	h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		h = dlopen(path, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	if (!h)
		return 0;
	p = dlsym(h, "ucs_rcache_create");
	fn = (ucx_get_version_fn)dlsym(h, "ucp_get_version");
	/* The libucp there must use this libucs (not another copy). */
	if (fn && p && base_of(p) == self_base())
		p = NULL;
	if (fn && (!p || base_of(p) == b->base))
		fn(&maj, &min, &rel);
	dlclose(h);
	if (!maj || maj > 0xffff || min > 0xffff)
		return 0;
	return UCX_VER(maj, min);
}

static int tested(unsigned int v)
{
	size_t i;

	for (i = 0; i < sizeof(tested_versions) / sizeof(tested_versions[0]); i++)
		if (tested_versions[i] == v)
			return 1;
	return 0;
}

/*
 * UMMUNOT_UCX_UNTESTED=X.Y: try release X.Y although it is not in the
 * tested list (how scripts/ucx-matrix tests a release before it joins the
 * list; the probe and every other check still apply).
 */
static int untested_allowed(unsigned int v)
{
	const char *e = getenv("UMMUNOT_UCX_UNTESTED");
	unsigned int maj, min;
	char end;

	return e && sscanf(e, "%u.%u%c", &maj, &min, &end) == 2 && UCX_VER(maj, min) == v;
}

/*
 * A probe cache: created, one get (a miss: UCX looks the page table up
 * first), put, destroyed.  Its page table must be seen at init and its
 * lookup must reach us; else this libucs binds its own calls (linked with
 * -Bsymbolic, or lookups inlined) and its caches cannot be fed.
 */
static const char *probe(struct binding *b)
{
	static char page[4096] __attribute__((aligned(4096)));
	union params p;
	struct params_view v = view_of(&p, b->layout);
	struct ucx_pgt_region *region = NULL;
	struct ucx_rcache *rc = NULL;
	struct wrap *w, *f;
	ucx_status_t st;

	pthread_mutex_lock(&g.list_lock);
	w = wrap_alloc_locked();
	pthread_mutex_unlock(&g.list_lock);
	if (!w)
		return "out of memory";
	w->b = b;
	w->probe = 1;
	memset(&p, 0, sizeof(p));
	*v.region_struct_size = 1024;	/* above any release's region */
	*v.flags = UCX_RCACHE_FLAG_NO_PFN_CHECK;
	*v.max_regions = ULONG_MAX;
	if (b->layout == UCX_LAYOUT_113) {
		p.p113.alignment = 64;
		p.p113.max_alignment = sizeof(page);
		p.p113.max_size = SIZE_MAX;
		p.p113.max_unreleased = SIZE_MAX;
	} else {
		p.p117.max_size = SIZE_MAX;
		p.p117.max_unreleased = SIZE_MAX;
	}
	*v.ops = NULL;		/* wrap_ops() with no original: ours only */
	st = create_wrapped(w, &p, "ummunot-probe", NULL, &rc);
	if (st == UCX_ERR_UNSUPPORTED) {
		wrap_free(w);
		return "its own calls to ucs_pgtable_init() do not reach this adapter "
		       "(libucs linked with -Bsymbolic?)";
	}
	if (st != UCX_OK) {
		wrap_free(w);
		return "a probe registration cache could not be created";
	}
	tls_probe_lookups = 0;
	if (b->layout == UCX_LAYOUT_113)
		st = b->get(rc, page, sizeof(page), PROT_READ | PROT_WRITE, 0,
			    (uintptr_t)&region, 0);
	else
		st = b->get(rc, page, sizeof(page), 64, PROT_READ | PROT_WRITE, 0,
			    (uintptr_t)&region);
	if (st == UCX_OK && region)
		b->put(rc, region);
	f = forget(rc);
	b->destroy(rc);
	if (f)
		wrap_free(f);
	if (st != UCX_OK)
		return "a probe lookup failed";
	if (!tls_probe_lookups)
		return "its lookups do not reach this adapter's ucs_pgtable_lookup() "
		       "(libucs linked with -Bsymbolic, or lookups inlined)";
	return NULL;
}

static void pass_through(struct binding *b, const char *why)
{
	fprintf(stderr, "libummunot-ucx: not feeding UCX %u.%u at %s: %s; every call to it goes "
		"to UCX unchanged\n", b->version >> 16, b->version & 0xffff, b->path, why);
	inc(&g.passed_through);
	if (!atomic_load(&g.active)) {
		g.ucx_version = b->version;
		atomic_store(&g.refused, 1);
	}
	atomic_store(&b->state, B_PASS);
	require_active();
}

/* The state of @b, judged now if it was not yet (gate_lock). */
static int judge(struct binding *b)
{
	struct ummunot_monitor *m;
	const char *why;
	char list[200];
	size_t i, off;
	int st = atomic_load(&b->state);

	if (likely(st != B_NEW))
		return st;
	pthread_once(&g.start_once, start);
	pthread_mutex_lock(&gate_lock);
	/* The probe calls the copy's own functions, never ours: the gate is
	 * not re-entered while it holds gate_lock. */
	st = atomic_load(&b->state);
	if (st != B_NEW) {
		pthread_mutex_unlock(&gate_lock);	/* judged meanwhile */
		return st;
	}
	if (!b->create || !b->destroy || !b->get || !b->put || !b->lookup || !b->pgt_init ||
	    !b->vm_munmap || !b->set_external || !b->unset_external) {
		pass_through(b, "that libucs (or its libucm) lacks functions this adapter calls");
		goto out;
	}
	b->version = binding_version(b);
	b->layout = layout_of(b->version);
	if (!b->version) {
		pass_through(b, "cannot tell which release it is (no libucp.so.0 beside it "
			     "that uses it)");
		goto out;
	}
	if (!tested(b->version) && untested_allowed(b->version)) {
		fprintf(stderr, "libummunot-ucx: UCX %u.%u at %s is not a release this adapter "
			"was tested with; trying it because UMMUNOT_UCX_UNTESTED=%u.%u\n",
			b->version >> 16, b->version & 0xffff, b->path, b->version >> 16,
			b->version & 0xffff);
	} else if (!tested(b->version)) {
		off = (size_t)snprintf(list, sizeof(list),
				       "not a release this adapter was tested with (tested:");
		for (i = 0; i < sizeof(tested_versions) / sizeof(tested_versions[0]) &&
			    off < sizeof(list); i++)
			off += (size_t)snprintf(list + off, sizeof(list) - off, " %u.%u",
						tested_versions[i] >> 16,
						tested_versions[i] & 0xffff);
		if (off < sizeof(list))
			snprintf(list + off, sizeof(list) - off, ")");
		pass_through(b, list);
		goto out;
	}
	if (atomic_load(&g.fed)) {
		pass_through(b, "a second UCX copy in this process (the first one is fed)");
		goto out;
	}
	why = probe(b);
	if (why) {
		pass_through(b, why);
		goto out;
	}
	m = atomic_load(&g.mon);
	if (!m) {
		m = open_monitor();
		if (!m) {
			g.ucx_version = b->version;
			atomic_store(&b->state, B_PASS);
			require_active();
			goto out;
		}
		atomic_store(&g.mon, m);
		publish_check(m);
	}
	b->set_external(UCX_EVENT_VM_UNMAPPED);
	g.ucx_version = b->version;
	atomic_store_explicit(&g.fed, b, memory_order_release);
	atomic_store(&b->state, B_ACTIVE);
	atomic_store_explicit(&g.active, 1, memory_order_release);
	if (g.verbose)
		fprintf(stderr, "libummunot-ucx: active: UCX %u.%u at %s, pid %ld\n",
			b->version >> 16, b->version & 0xffff, b->path, (long)getpid());
out:
	st = atomic_load(&b->state);
	pthread_mutex_unlock(&gate_lock);
	return st;
}

/* ---- the interposed UCX functions ----------------------------------- */

#define CALLER __builtin_return_address(0)

EXPORT ucx_status_t ucs_rcache_create(const void *params, const char *name,
				      void *stats_parent, struct ucx_rcache **rcache_p)
{
	struct binding *b = caller_binding(CALLER, "ucs_rcache_create");
	union params view;
	struct params_view v;
	struct wrap *w;
	ucx_status_t st;

	if (unlikely(!b || !b->create)) {
		no_ucx("ucs_rcache_create");
		return UCX_ERR_UNSUPPORTED;
	}
	if (judge(b) != B_ACTIVE || !params)
		return b->create(params, name, stats_parent, rcache_p);
	memcpy(&view, params, params_size(b->layout));
	v = view_of(&view, b->layout);
	if (!*v.ops || !(*v.ucm_events & UCX_EVENT_VM_UNMAPPED))
		return b->create(params, name, stats_parent, rcache_p);
	pthread_mutex_lock(&g.list_lock);
	w = wrap_alloc_locked();
	pthread_mutex_unlock(&g.list_lock);
	if (!w)
		return UCX_ERR_NO_MEMORY;
	w->b = b;
	st = create_wrapped(w, params, name, stats_parent, rcache_p);
	if (st == UCX_OK) {
		inc(&g.rcaches);
		return UCX_OK;
	}
	wrap_free(w);
	if (st == UCX_ERR_UNSUPPORTED) {
		/* UCM's unmap event is external now: an unwrapped cache would
		 * get no events.  UCX runs without this cache instead. */
		fprintf(stderr, "libummunot-ucx: cannot see the page table of UCX's "
			"registration cache '%s'; refusing to create it (UCX runs without it)\n",
			name ? name : "");
		require_active();
	}
	return st;
}

EXPORT void ucs_rcache_destroy(struct ucx_rcache *rcache)
{
	struct binding *b = caller_binding(CALLER, "ucs_rcache_destroy");
	struct wrap *w;

	if (unlikely(!b || !b->destroy)) {
		no_ucx("ucs_rcache_destroy");
		return;
	}
	/* Out of the hash first: a cache created meanwhile at the same
	 * address can never match this wrap. */
	w = forget(rcache);
	b->destroy(rcache);		/* deregisters through our ops */
	if (w)
		wrap_free(w);
}

EXPORT ucx_status_t ucs_pgtable_init(struct ucx_pgtable *pgtable, void *alloc_cb,
				     void *release_cb)
{
	struct wrap *w = tls_creating;
	struct binding *b;

	if (w && !w->pgtable) {
		w->pgtable = pgtable;	/* the first one inside ucs_rcache_create */
		tls_creating = NULL;
		b = w->b;
	} else {
		b = caller_binding(CALLER, "ucs_pgtable_init");
	}
	if (unlikely(!b || !b->pgt_init)) {
		no_ucx("ucs_pgtable_init");
		return UCX_ERR_UNSUPPORTED;
	}
	return b->pgt_init(pgtable, alloc_cb, release_cb);
}

EXPORT struct ucx_pgt_region *ucs_pgtable_lookup(const struct ucx_pgtable *pgtable,
						 ucx_pgt_addr_t address)
{
	struct ucx_pgt_region *r;
	struct binding *b;
	struct wrap *w = owner_of(pgtable);
	struct tail *t;

	if (likely(!w)) {
		/* Not a cache we feed: UCX's answer, untouched. */
		b = caller_binding(CALLER, "ucs_pgtable_lookup");
		if (unlikely(!b || !b->lookup)) {
			no_ucx("ucs_pgtable_lookup");
			return NULL;
		}
		return b->lookup(pgtable, address);
	}
	if (unlikely(w->probe)) {
		tls_probe_lookups++;	/* the gate's probe: nothing to check */
		return w->b->lookup(pgtable, address);
	}
	lookup_check();
	r = w->b->lookup(pgtable, address);
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

/* Six or seven arguments, passed on as they came (ucx-abi.h). */
EXPORT ucx_status_t ucs_rcache_get(struct ucx_rcache *rcache, void *address, size_t length,
				   uintptr_t a3, uintptr_t a4, uintptr_t a5, uintptr_t a6)
{
	struct binding *b = caller_binding(CALLER, "ucs_rcache_get");
	ucx_status_t st;

	if (unlikely(!b || !b->get)) {
		no_ucx("ucs_rcache_get");
		return UCX_ERR_UNSUPPORTED;
	}
	/* Draining before UCX looks at its invalidation queue: an event not
	 * yet dispatched would let its slow path return a stale region. */
	if (b == atomic_load_explicit(&g.fed, memory_order_relaxed) &&
	    atomic_load_explicit(&g.rcaches, memory_order_relaxed))
		lookup_check();
	st = b->get(rcache, address, length, a3, a4, a5, a6);
	/* No tail call: it would store a6 back into our seventh argument's
	 * slot, which is the caller's own frame when it passed six. */
	__asm__ __volatile__("" : : : "memory");
	return st;
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
	s.passed_through = atomic_load(&g.passed_through);
	if (size > sizeof(s))
		size = sizeof(s);
	memcpy(stats, &s, size);
	return (int)size;
}
