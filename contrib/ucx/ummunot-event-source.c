// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx-source: ummunot as UCX's external memory-event source.
 *
 * Needs a UCX with the patch series of contrib/ucx/series (UCX master, or
 * its v1.18 backport), which adds ucs_rcache_set_event_source() with the
 * optional region callbacks.  Nothing is interposed: loaded
 * into a process (LD_PRELOAD, or linked by whoever initialises UCX), its
 * constructor, before any UCX registration cache exists,
 *
 *   - opens /dev/ummunot (libummunot's monitor) and maps the ring a second
 *     time, read-only, for the address of the ring header's generation word:
 *     the kernel moves it (store-release) on every event before munmap()
 *     returns, and UCX loads it (acquire) on every cache lookup;
 *   - gives UCX that counter, a poll callback that drains the ring into
 *     ucm_vm_munmap(), and region callbacks that register each range UCX
 *     caches with ummunot before UCX pins it (and unregister it after UCX
 *     unpinned it);
 *   - declares UCM_EVENT_VM_UNMAPPED external, so that UCX keeps its
 *     registration cache with its own malloc/mmap hooks off.
 *
 * Threads: libummunot's monitor has one consumer, so ring_lock serialises
 * every read, register, unregister and resync; drain_lock makes a poll wait
 * for a poll that runs in another thread, so that no poll returns before the
 * events it was called for are delivered (UCX's contract for poll).  Neither
 * lock is held while waiting for the other in the other order: poll takes
 * drain_lock then ring_lock; the region callbacks (called by UCX with its
 * page-table lock held) take ring_lock only; ucm_vm_munmap() is called with
 * drain_lock held and ring_lock free, and UCX's unmap callback never blocks
 * on the page-table lock (it try-locks, or queues under a spinlock).
 *
 * fork(): the ring mapping is not inherited (the module sets VM_DONTCOPY),
 * so the child's caches would load an unmapped counter.  The atfork child
 * handler maps a private page range at the same address with a counter value
 * no cache has seen; the child's first lookup then polls, and the poll opens
 * a monitor for the child, maps its ring over the placeholder (MAP_FIXED,
 * same size) and invalidates everything cached (the parent's regions are
 * not watched in the child).  If the child cannot, every poll invalidates
 * everything and moves the placeholder counter: every lookup then misses
 * (slow, never stale).  Not exercised by the MPI check in this directory.
 *
 * Environment: UMMUNOT_UCX_SOURCE_STATS=1 prints one line per process at
 * exit: "active 1" when UCX took the source, then the counters.  UMMUNOT_UCX_SOURCE_CONTROL=unfed is a negative control for
 * tests, never for production: it only declares UCM_EVENT_VM_UNMAPPED
 * external (UCX's cache stays on) and feeds nothing, so cache hits go stale.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ummunot/ummunot.h>
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

/* Weak: with a UCX that lacks the patch the constructor says so and stays out. */
extern ucs_status_t ucs_rcache_set_event_source(const ucs_rcache_event_source_t *)
	__attribute__((weak));

#define MAX_BATCH 64
#define PRE "libummunot-ucx-source: "

struct region_priv {		/* in UCX's region, UCS_RCACHE_EVENT_SOURCE_PRIV_SIZE */
	uint64_t handle;
	uint64_t epoch;		/* the process (monitor) that registered it */
};

_Static_assert(sizeof(struct region_priv) <= UCS_RCACHE_EVENT_SOURCE_PRIV_SIZE,
	       "region_priv fits UCX's per-region area");

static struct {
	pthread_mutex_t ring_lock;
	pthread_mutex_t drain_lock;
	struct ummunot_monitor *mon;	/* NULL: none (fallback in a child) */
	struct ummunot_ring_header *hdr; /* our mapping; the counter lives here */
	size_t map_size;
	uint64_t epoch;			/* moves at fork, in the child */
	int child_pending;		/* forked: reopen at the next poll */
	int fallback;			/* no monitor: invalidate everything */
	uint64_t fork_gen;
	int stats;
	int active;			/* UCX took the source */
	uint64_t polls, events, overflows, adds, removes, add_errors;
} S = {
	.ring_lock = PTHREAD_MUTEX_INITIALIZER,
	.drain_lock = PTHREAD_MUTEX_INITIALIZER,
};

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static void invalidate_everything(void)
{
	ucm_vm_munmap((void *)0, SIZE_MAX);
}

/* Map the monitor's ring read-only at addr (NULL: anywhere). */
static struct ummunot_ring_header *map_ring(struct ummunot_monitor *mon,
					    void *addr, size_t *size)
{
	struct ummunot_monitor_info_ext info;
	void *p;
	int rc;

	rc = ummunot_monitor_query_ext(mon, &info, sizeof(info));
	if (rc < 0)
		return NULL;
	if (addr != NULL && info.ring_mmap_size != *size)
		return NULL;
	p = mmap(addr, info.ring_mmap_size, PROT_READ, MAP_SHARED |
		 (addr != NULL ? MAP_FIXED : 0), ummunot_monitor_fd(mon), 0);
	if (p == MAP_FAILED)
		return NULL;
	*size = info.ring_mmap_size;
	return p;
}

/* In a forked child, from the first poll: a monitor of our own. */
static void reopen_in_child(void)
{
	struct ummunot_monitor *mon = NULL;

	S.child_pending = 0;
	if (S.mon != NULL)
		ummunot_monitor_close(S.mon);	/* the child's copy only */
	S.mon = NULL;
	if (ummunot_monitor_open(NULL, &mon) == 0 &&
	    map_ring(mon, S.hdr, &S.map_size) == S.hdr) {
		S.mon = mon;
		S.fallback = 0;
	} else {
		if (mon != NULL)
			ummunot_monitor_close(mon);
		S.fallback = 1;
		fprintf(stderr, PRE "pid %d: no ummunot monitor after fork: "
			"UCX's caches will miss on every lookup\n", (int)getpid());
	}
	/* What the parent cached is not watched here. */
	invalidate_everything();
}

/* UCX: deliver everything published so far.  Must not return early. */
static void source_poll(void *arg)
{
	struct ummunot_event ev[MAX_BATCH];
	int n, i;

	(void)arg;
	pthread_mutex_lock(&S.drain_lock);
	count(&S.polls, 1);
	if (S.child_pending)
		reopen_in_child();
	if (S.fallback) {
		invalidate_everything();
		/* Our private placeholder: move it so the next lookup polls too. */
		__atomic_store_n(&S.hdr->generation, S.hdr->generation + 1,
				 __ATOMIC_RELEASE);
		pthread_mutex_unlock(&S.drain_lock);
		return;
	}
	for (;;) {
		pthread_mutex_lock(&S.ring_lock);
		n = ummunot_monitor_read(S.mon, ev, MAX_BATCH);
		if (n == -EOVERFLOW)
			ummunot_monitor_resync(S.mon, NULL);
		pthread_mutex_unlock(&S.ring_lock);

		if (n == -EOVERFLOW) {
			/* Lost events: any region may have changed. */
			count(&S.overflows, 1);
			invalidate_everything();
			continue;	/* and deliver what came after the resync */
		}
		if (n < 0) {
			fprintf(stderr, PRE "reading the ring failed (%s): "
				"invalidating everything\n", strerror(-n));
			invalidate_everything();
			break;
		}
		for (i = 0; i < n; i++)
			ucm_vm_munmap((void *)(uintptr_t)ev[i].start,
				      ev[i].end - ev[i].start);
		count(&S.events, n);
		if (n < MAX_BATCH)
			break;
	}
	pthread_mutex_unlock(&S.drain_lock);
}

/* UCX (page-table lock held): watch a range before it is pinned. */
static ucs_status_t source_region_add(void *arg, void *address, size_t length,
				      void *priv)
{
	struct region_priv *p = priv;
	struct ummunot_region r;
	int rc;

	(void)arg;
	memset(&r, 0, sizeof(r));
	r.start = (uintptr_t)address;
	r.length = length;
	pthread_mutex_lock(&S.ring_lock);
	p->epoch = S.epoch;
	if (S.mon == NULL) {
		/* Fallback (after fork): every lookup invalidates everything. */
		p->handle = 0;
		pthread_mutex_unlock(&S.ring_lock);
		return UCS_OK;
	}
	rc = ummunot_monitor_register(S.mon, &r, 1, NULL);
	pthread_mutex_unlock(&S.ring_lock);
	if (rc < 0) {
		if (__atomic_fetch_add(&S.add_errors, 1, __ATOMIC_RELAXED) == 0)
			fprintf(stderr, PRE "ummunot refused to watch %p+%zu (%s): "
				"UCX's registration fails\n", address, length,
				strerror(-rc));
		return rc == -ENOMEM || rc == -ENOSPC ? UCS_ERR_NO_RESOURCE :
							UCS_ERR_IO_ERROR;
	}
	p->handle = r.handle;
	count(&S.adds, 1);
	return UCS_OK;
}

/* UCX (after the range was unpinned): stop watching it. */
static void source_region_remove(void *arg, void *address, size_t length,
				 void *priv)
{
	struct region_priv *p = priv;

	(void)arg;
	(void)address;
	(void)length;
	pthread_mutex_lock(&S.ring_lock);
	/* A parent's region is not the child's to unregister. */
	if (S.mon != NULL && p->epoch == S.epoch && p->handle != 0) {
		ummunot_monitor_unregister(S.mon, &p->handle, 1, NULL);
		count(&S.removes, 1);
	}
	pthread_mutex_unlock(&S.ring_lock);
}

static void atfork_prepare(void)
{
	if (S.hdr != NULL)
		S.fork_gen = __atomic_load_n(&S.hdr->generation, __ATOMIC_ACQUIRE);
}

static void atfork_child(void)
{
	void *p;

	if (S.hdr == NULL)
		return;
	/* The counter UCX loads must stay mapped: a private placeholder. */
	p = mmap(S.hdr, S.map_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED) {
		static const char msg[] = PRE "cannot map the counter in a forked child\n";
		ssize_t w = write(2, msg, sizeof(msg) - 1);
		(void)w;
		abort();
	}
	/* A value no cache has seen: the child's first lookup polls. */
	S.hdr->generation = S.fork_gen + (UINT64_C(1) << 62);
	S.epoch++;
	S.child_pending = 1;
	pthread_mutex_init(&S.ring_lock, NULL);
	pthread_mutex_init(&S.drain_lock, NULL);
}

static void print_stats(void)
{
	/* The UCP in the process, if any (this library needs only UCS, UCM). */
	void (*get_version)(unsigned *, unsigned *, unsigned *);
	unsigned major = 0, minor = 0, release = 0;

	*(void **)&get_version = dlsym(RTLD_DEFAULT, "ucp_get_version");
	if (get_version != NULL)
		get_version(&major, &minor, &release);
	fprintf(stderr, PRE "pid %d: active %d, polls %" PRIu64 " events %" PRIu64
		" overflows %" PRIu64 " regions %" PRIu64 " unregistered %" PRIu64
		" refused %" PRIu64 ", ucx %u.%u\n", (int)getpid(), S.active, S.polls,
		S.events, S.overflows, S.adds, S.removes, S.add_errors, major, minor);
}

__attribute__((constructor)) static void source_init(void)
{
	ucs_rcache_event_source_t src;
	const char *e = getenv("UMMUNOT_UCX_SOURCE_STATS");
	ucs_status_t status;
	int rc;

	S.stats = e != NULL && *e != '\0' && strcmp(e, "0") != 0;
	if (S.stats)
		atexit(print_stats);
	e = getenv("UMMUNOT_UCX_SOURCE_CONTROL");
	if (e != NULL && strcmp(e, "unfed") == 0) {
		fprintf(stderr, PRE "negative control: UCX's cache on, fed by "
			"nobody\n");
		ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
		return;
	}
	if (ucs_rcache_set_event_source == NULL) {
		fprintf(stderr, PRE "this UCX has no ucs_rcache_set_event_source() "
			"(build it with contrib/ucx/series): "
			"doing nothing\n");
		return;
	}
	rc = ummunot_monitor_open(NULL, &S.mon);
	if (rc < 0) {
		S.mon = NULL;
		fprintf(stderr, PRE "cannot open %s (%s): doing nothing\n",
			UMMUNOT_DEFAULT_DEVICE_PATH, strerror(-rc));
		return;
	}
	S.hdr = map_ring(S.mon, NULL, &S.map_size);
	if (S.hdr == NULL) {
		fprintf(stderr, PRE "cannot map the ring: doing nothing\n");
		goto err_close;
	}

	memset(&src, 0, sizeof(src));
	src.field_mask = UCS_RCACHE_EVENT_SOURCE_FIELD_COUNTER |
			 UCS_RCACHE_EVENT_SOURCE_FIELD_POLL |
			 UCS_RCACHE_EVENT_SOURCE_FIELD_REGION_ADD |
			 UCS_RCACHE_EVENT_SOURCE_FIELD_REGION_REMOVE;
	src.counter = (const volatile uint64_t *)&S.hdr->generation;
	src.poll = source_poll;
	src.region_add = source_region_add;
	src.region_remove = source_region_remove;
	status = ucs_rcache_set_event_source(&src);
	if (status != UCS_OK) {
		fprintf(stderr, PRE "ucs_rcache_set_event_source: %s: doing nothing\n",
			ucs_status_string(status));
		goto err_unmap;
	}
	/* Only now: UCX's caches stay on with its hooks off, fed by us. */
	ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
	pthread_atfork(atfork_prepare, NULL, atfork_child);
	S.active = 1;
	return;

err_unmap:
	munmap(S.hdr, S.map_size);
	S.hdr = NULL;
err_close:
	ummunot_monitor_close(S.mon);
	S.mon = NULL;
}
