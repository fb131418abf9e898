/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libummunot: userspace side of the ummunot kernel module.
 *
 * Two objects:
 *
 *   struct ummunot_monitor  one open /dev/ummunot with its event ring:
 *                           register/unregister/re-arm watched ranges,
 *                           read events, "did anything happen?" without a
 *                           syscall, overflow handling.
 *   struct ummunot_cache    a registration (ibv_mr) cache on top of a
 *                           monitor: get/put memory registrations, a hit
 *                           takes no lock and no syscall, and a get after
 *                           munmap()/free() returned never hands out the
 *                           old registration.
 *
 * Every function returns 0 (or a non-negative count) on success and a
 * negative errno on failure; no function sets errno as its result and no
 * C++ exception crosses this interface.  Documentation/library.rst and the
 * man pages in man/man3 describe each call, with its thread safety.
 *
 * Threads: any thread may call any function at any time, including from
 * pthread key destructors and during thread exit, with no registration;
 * the library's RCU is its own (per-CPU counters and membarrier, no
 * liburcu), so an application or another library using liburcu, any
 * flavour, may call any function inside its own read-side critical
 * section; the library never waits for a grace period while holding a
 * lock (Documentation/library.rst, "RCU: the library's own").
 *
 * fork(): monitors and caches belong to the address space that created
 * them.  In a child process every call on one inherited from the parent returns
 * -ECHILD without touching it, except ummunot_monitor_close(),
 * ummunot_cache_destroy() and the fd accessors: destroy and close release
 * the child's copy without deregistering anything, so the parent's
 * registrations and events are unaffected.  A child creates its own
 * objects if it needs them.
 *
 * This header compiles as C99, C11 and C++.
 */
#ifndef UMMUNOT_UMMUNOT_H
#define UMMUNOT_UMMUNOT_H

#include <stddef.h>
#include <stdint.h>
#include <linux/ummunot.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_pd;

#define UMMUNOT_DEFAULT_DEVICE_PATH "/dev/" UMMUNOT_DEVICE_NAME

/* ------------------------------------------------------------------ */
/* Monitor                                                             */
/* ------------------------------------------------------------------ */

struct ummunot_monitor;

/*
 * Attributes for ummunot_monitor_open().  Zero-initialise, then set what
 * you need; a NULL attr means all defaults.
 */
struct ummunot_monitor_attr {
	const char *device_path;	/* NULL: UMMUNOT_DEFAULT_DEVICE_PATH */
	uint32_t ring_entries;		/* 0: the module's default */
	uint32_t flags;			/* must be 0 */
	uint64_t features;		/* 0: every feature this library knows */
	uint64_t resv[4];		/* must be 0 */
};

/* What the handshake negotiated (ummunot_monitor_query()). */
struct ummunot_monitor_info {
	uint32_t abi_version;		/* the kernel's */
	uint32_t ring_entries;
	uint64_t features;		/* granted */
	uint64_t supported_features;	/* everything the kernel supports */
	uint32_t max_regions;
	uint32_t entry_size;
};

int ummunot_monitor_open(const struct ummunot_monitor_attr *attr,
			 struct ummunot_monitor **monitor);
/*
 * Closes a monitor this process opened; NULL is a no-op.  A cache's own
 * monitor (ummunot_cache_monitor()) belongs to the cache: closing it is
 * refused, i.e. does nothing (the function returns no status since 0.1);
 * ummunot_cache_destroy() releases it.
 */
void ummunot_monitor_close(struct ummunot_monitor *monitor);
int ummunot_monitor_fd(const struct ummunot_monitor *monitor);
int ummunot_monitor_query(const struct ummunot_monitor *monitor,
			  struct ummunot_monitor_info *info);

/*
 * Extensible form of struct ummunot_monitor_info (since 0.2): fields are
 * only ever appended.  ummunot_monitor_query_ext() fills the first
 * min(size, its own size) bytes, zeroes the rest of the caller's struct and
 * returns the number of bytes it filled.
 */
struct ummunot_monitor_info_ext {
	uint32_t abi_version;		/* the kernel's */
	uint32_t ring_entries;
	uint64_t features;		/* granted */
	uint64_t supported_features;	/* everything the kernel supports */
	uint32_t max_regions;
	uint32_t entry_size;
	uint32_t header_size;		/* ring header bytes (the events follow) */
	uint32_t resv;
	uint64_t ring_mmap_size;
};

int ummunot_monitor_query_ext(const struct ummunot_monitor *monitor,
			      struct ummunot_monitor_info_ext *info, size_t size);

/*
 * Batches are all-or-nothing (as in the kernel).  error_index may be NULL;
 * otherwise on failure it names the element at fault (count if none).
 * ummunot_monitor_register() writes each region's handle back.
 */
int ummunot_monitor_register(struct ummunot_monitor *monitor,
			     struct ummunot_region *regions, unsigned int count,
			     unsigned int *error_index);
int ummunot_monitor_unregister(struct ummunot_monitor *monitor,
			       const uint64_t *handles, unsigned int count,
			       unsigned int *error_index);
int ummunot_monitor_rearm(struct ummunot_monitor *monitor,
			  const uint64_t *handles, unsigned int count,
			  unsigned int *error_index);
int ummunot_monitor_set_filter(struct ummunot_monitor *monitor, uint64_t mask,
			       uint64_t *old_mask);

/* 1 if the ring's generation moved since the last complete read, else 0. */
int ummunot_monitor_changed(const struct ummunot_monitor *monitor);

/*
 * Copy up to max pending events into events and consume them.  Returns the
 * number copied, or -EOVERFLOW (nothing consumed) when the kernel lost
 * events: call ummunot_monitor_resync(), then drop every assumption.
 */
int ummunot_monitor_read(struct ummunot_monitor *monitor,
			 struct ummunot_event *events, unsigned int max);
/* UMMUNOT_IOC_RESYNC, then discard everything pending in the ring. */
int ummunot_monitor_resync(struct ummunot_monitor *monitor, uint64_t *dropped);
int ummunot_monitor_stats(struct ummunot_monitor *monitor,
			  struct ummunot_stats *stats);

/* ------------------------------------------------------------------ */
/* Registration cache                                                  */
/* ------------------------------------------------------------------ */

struct ummunot_cache;

/*
 * A registration handed out by ummunot_cache_get().  Read-only for the
 * caller and valid until the matching ummunot_cache_put().  It covers at
 * least the requested range (page aligned, possibly merged with
 * neighbours) with at least the requested access flags.
 */
struct ummunot_reg {
	uint64_t addr;		/* start of the registered range */
	uint64_t length;	/* its length in bytes */
	uint32_t lkey;
	uint32_t rkey;
	int access;		/* IBV_ACCESS_* actually registered */
	uint32_t resv;		/* the library's: a check of this struct's
				   own address, so that ummunot_cache_put()
				   refuses a copy; never 0, do not change */
	void *mr;		/* the backend's object: struct ibv_mr * for verbs */
};

/*
 * The registration backend.  reg pins [addr, addr + length) and fills
 * *mr, *lkey and *rkey; it returns 0 or a negative errno (-ENOMEM makes the
 * cache evict unused entries and retry once).  dereg undoes one successful
 * reg; it is called exactly once per registration, never while the
 * registration is in use.  Both may be called from any thread, never
 * concurrently for the same mr.
 */
struct ummunot_backend_ops {
	int (*reg)(void *ctx, void *addr, size_t length, int access,
		   void **mr, uint32_t *lkey, uint32_t *rkey);
	int (*dereg)(void *ctx, void *mr);
};

struct ummunot_cache_attr {
	const char *device_path;	/* NULL: UMMUNOT_DEFAULT_DEVICE_PATH */
	uint32_t ring_entries;		/* 0: the module's default */
	uint32_t flags;			/* must be 0 */
	uint64_t max_entries;		/* 0: 65536 (and at most max_regions) */
	uint64_t max_pinned_bytes;	/* 0: RLIMIT_MEMLOCK (soft); never above it */
	uint64_t resv[4];		/* must be 0 */
};

struct ummunot_cache_stats {
	uint64_t hits;
	uint64_t misses;
	uint64_t invalidations[UMMUNOT_EVENT_TYPE_MAX];	/* entries, by event type */
	uint64_t evictions;		/* CLOCK / limit / flush */
	uint64_t resyncs;		/* ring overflows handled */
	uint64_t merges;		/* entries absorbed into a larger one */
	uint64_t registrations;		/* successful backend reg calls */
	uint64_t deregistrations;	/* backend dereg calls */
	uint64_t race_retries;		/* range changed while being pinned */
	uint64_t entries;		/* published now */
	uint64_t pinned_bytes;		/* registered now (incl. retired, in use) */
	uint64_t max_pinned_bytes;	/* effective limit */
	uint64_t max_entries;		/* effective limit */
};

/* Verbs backend: ibv_reg_mr()/ibv_dereg_mr() on pd. */
int ummunot_cache_create(struct ibv_pd *pd, const struct ummunot_cache_attr *attr,
			 struct ummunot_cache **cache);
/* Any backend (tests, benchmarks, other transports). */
int ummunot_cache_create_backend(const struct ummunot_backend_ops *ops,
				 void *ctx, const struct ummunot_cache_attr *attr,
				 struct ummunot_cache **cache);
/* Every registration must have been put back. */
void ummunot_cache_destroy(struct ummunot_cache *cache);

int ummunot_cache_get(struct ummunot_cache *cache, const void *addr,
		      size_t length, int access, const struct ummunot_reg **reg);
int ummunot_cache_put(struct ummunot_cache *cache, const struct ummunot_reg *reg);

/* Process pending events now (e.g. from an epoll loop); returns their number. */
int ummunot_cache_poll(struct ummunot_cache *cache);
/* Evict every entry nobody uses; returns how many were evicted. */
int ummunot_cache_flush(struct ummunot_cache *cache);
int ummunot_cache_stats(struct ummunot_cache *cache,
			struct ummunot_cache_stats *stats);
/*
 * Deprecated (use ummunot_cache_fd()): the cache's monitor, owned by the
 * cache.  fd, query, query_ext, changed, stats and set_filter work on it
 * (a filter that drops events makes the cache hand out stale
 * registrations: a negative control for tests, never for production);
 * register, unregister, rearm, read and resync would corrupt the cache's
 * state and return -EBUSY.
 */
struct ummunot_monitor *ummunot_cache_monitor(struct ummunot_cache *cache);

/* ------------------------------------------------------------------ */
/* Since 0.2 (version node UMMUNOT_0.2)                                */
/* ------------------------------------------------------------------ */

/*
 * A pinned-bytes budget that several caches share (e.g. one cache per
 * HCA).  max_bytes 0 means "what the kernel allows this process":
 * RLIMIT_MEMLOCK, re-read whenever the budget runs short or a
 * registration fails with -ENOMEM, and unlimited with CAP_IPC_LOCK or an
 * infinite limit.  Caches created without a budget share the process-wide
 * one, which is of that kind.  A cache makes room by evicting its own
 * unused entries only.
 */
struct ummunot_budget;

int ummunot_budget_create(uint64_t max_bytes, struct ummunot_budget **budget);
/* -EBUSY while a cache still uses it. */
int ummunot_budget_destroy(struct ummunot_budget *budget);

/*
 * The registration backend, extensible form.  size is
 * sizeof(struct ummunot_cache_ops) as the caller compiled it.  reg pins
 * [addr, addr + length) and fills *mr, *lkey and *rkey; priv is the
 * registration's private area (struct ummunot_cache_config.priv_size bytes,
 * zeroed, 16-byte aligned; NULL when priv_size is 0), which reg may fill.
 * It returns 0 or a negative errno (-ENOMEM makes the cache evict unused
 * entries and retry once).  dereg undoes one successful reg, exactly once,
 * never while the registration is in use and never in a forked child.
 * Both may be called from any thread that calls into the cache, with the
 * cache's internal lock held: they must not call back into the same cache.
 */
struct ummunot_cache_ops {
	uint64_t size;
	int (*reg)(void *ctx, void *addr, size_t length, int access, void *priv,
		   void **mr, uint32_t *lkey, uint32_t *rkey);
	int (*dereg)(void *ctx, void *mr, void *priv);
};

/*
 * Cache configuration, extensible form.  size is
 * sizeof(struct ummunot_cache_config) as the caller compiled it; bytes the
 * library does not know must be zero (else -E2BIG).  Zero-initialise, set
 * size, then what you need.
 */
struct ummunot_cache_config {
	uint64_t size;
	uint64_t flags;			/* must be 0 */
	const char *device_path;	/* NULL: UMMUNOT_DEFAULT_DEVICE_PATH */
	uint32_t ring_entries;		/* 0: the module's default */
	uint32_t priv_size;		/* private bytes per registration, <= 4096 */
	uint64_t max_entries;		/* 0: 65536 (and at most max_regions) */
	uint64_t max_pinned_bytes;	/* 0: the budget's limit; never above it */
	uint64_t max_cached_length;	/* 0: cache every length; longer
					 * requests get a private registration,
					 * deregistered at its put */
	struct ummunot_budget *budget;	/* NULL: the process-wide budget */
};

int ummunot_cache_create_ops(const struct ummunot_cache_ops *ops, void *ctx,
			     const struct ummunot_cache_config *config,
			     struct ummunot_cache **cache);
/* Verbs backend (ibv_reg_mr()/ibv_dereg_mr() on pd) with a config. */
int ummunot_cache_create_verbs(struct ibv_pd *pd,
			       const struct ummunot_cache_config *config,
			       struct ummunot_cache **cache);

/* The private area of a registration from get (NULL if priv_size is 0). */
void *ummunot_reg_priv(const struct ummunot_reg *reg);

/*
 * The caller knows that [addr, addr + length) changed: no later get hands
 * out a registration overlapping it (those in use stay valid until their
 * put, then are deregistered).  Returns the number of entries invalidated.
 */
int ummunot_cache_invalidate(struct ummunot_cache *cache, const void *addr,
			     size_t length);

/* A file descriptor for poll/epoll: readable when ummunot_cache_poll() has
 * work.  Owned by the cache. */
int ummunot_cache_fd(const struct ummunot_cache *cache);

/*
 * Extensible form of struct ummunot_cache_stats (same first fields, then
 * more; fields are only ever appended).  ummunot_cache_stats_ext() fills
 * the first min(size, its own size) bytes, zeroes the rest of the caller's
 * struct and returns the number of bytes it filled.
 */
struct ummunot_cache_stats_ext {
	uint64_t hits;
	uint64_t misses;
	uint64_t invalidations[UMMUNOT_EVENT_TYPE_MAX];
	uint64_t evictions;
	uint64_t resyncs;
	uint64_t merges;
	uint64_t registrations;
	uint64_t deregistrations;
	uint64_t race_retries;
	uint64_t entries;
	uint64_t pinned_bytes;
	uint64_t max_pinned_bytes;
	uint64_t max_entries;
	/* since 0.2 */
	uint64_t uncached;		/* gets above max_cached_length */
	uint64_t caller_invalidations;	/* entries ummunot_cache_invalidate() killed */
	uint64_t budget_limit;		/* the budget's limit now */
	uint64_t budget_used;		/* bytes charged to it by all its caches */
};

int ummunot_cache_stats_ext(struct ummunot_cache *cache,
			    struct ummunot_cache_stats_ext *stats, size_t size);

/* ------------------------------------------------------------------ */
/* Since 0.3 (version node UMMUNOT_0.3)                                */
/* ------------------------------------------------------------------ */

/*
 * ummunot_monitor_changed() without the call: the two words it compares,
 * so that a hot path (a cache hit) can inline the test.  Filled once by
 * ummunot_monitor_check_init(); valid until ummunot_monitor_close() of the
 * monitor (for a cache's monitor: ummunot_cache_destroy()).  The words
 * are the library's; read them only through ummunot_monitor_check_changed().
 *
 * Extensible: the caller sets size to sizeof(struct ummunot_monitor_check)
 * as its header declares it and flags to 0 before the call,
 *
 *	struct ummunot_monitor_check chk = { .size = sizeof(chk) };
 *
 * Fields are only ever appended, each release's after the last; a size
 * below UMMUNOT_MONITOR_CHECK_SIZE_V1 is -EINVAL.  The library fills the
 * first min(size, its own size) bytes, zeroes the rest of the caller's
 * struct and stores the number of bytes it filled in size, so code built
 * against a newer header tests size before it reads a newer field.
 *
 * The inline test below is part of the ABI: a library whose words can no
 * longer be read that way answers -EOPNOTSUPP, and the caller then asks
 * ummunot_monitor_changed() (a call) instead.  Both adapters do.
 */
struct ummunot_monitor_check {
	uint32_t size;			/* in: the caller's sizeof; out: filled */
	uint32_t flags;			/* in: 0; out: 0 (none defined) */
	const __u64 *generation;	/* the ring header's generation word */
	const uint64_t *seen;		/* the generation the last complete
					 * ummunot_monitor_read() consumed up
					 * to; UMMUNOT_CHECK_FORKED in a child */
};

/* The size of the 0.3 struct: size, flags, generation and seen. */
#define UMMUNOT_MONITOR_CHECK_SIZE_V1 \
	(offsetof(struct ummunot_monitor_check, seen) + sizeof(const uint64_t *))

/* seen in a child forked after ummunot_monitor_check_init(). */
#define UMMUNOT_CHECK_FORKED UINT64_MAX

/*
 * 0, or -EINVAL (NULL argument, size below UMMUNOT_MONITOR_CHECK_SIZE_V1,
 * flags not 0), -ECHILD (a parent's monitor in a forked child), -ENOMEM,
 * -EOPNOTSUPP (this library offers no inline words).  On error the
 * caller's struct is unchanged.
 */
int ummunot_monitor_check_init(const struct ummunot_monitor *monitor,
			       struct ummunot_monitor_check *check);

/*
 * 1 if the ring's generation moved since the last complete read (or this
 * process is a child forked after ummunot_monitor_check_init(): the ring
 * is not mapped there, and the library's calls return -ECHILD), else 0.
 * Same answer as ummunot_monitor_changed(), with two loads of the
 * caller's struct, two of the words and no call.
 */
static inline int
ummunot_monitor_check_changed(const struct ummunot_monitor_check *check)
{
	/*
	 * seen first: in a forked child the library's fork handler has set
	 * it to UMMUNOT_CHECK_FORKED, and the ring (not mapped there: the
	 * kernel sets VM_DONTCOPY) is never dereferenced.  seen and
	 * generation only grow, so a seen older than the generation loaded
	 * next reads as "changed".  Acquire: pairs with the
	 * library's store-release of seen at the end of a read, so a caller
	 * that sees the new seen also sees what the reading thread did before
	 * that ummunot_monitor_read() (e.g. a count of ranges it is about to
	 * invalidate).
	 */
	uint64_t seen = __atomic_load_n(check->seen, __ATOMIC_ACQUIRE);

	if (seen == UMMUNOT_CHECK_FORKED)
		return 1;
	/*
	 * (F) of the ring protocol (include/uapi/linux/ummunot.h,
	 * Documentation/ring.rst): acquire, pairs with the kernel's (E)
	 * store-release of generation, so a caller that sees 0 may rely on
	 * every event published before it having been consumed.
	 */
	return __atomic_load_n(check->generation, __ATOMIC_ACQUIRE) != seen;
}

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOT_UMMUNOT_H */
