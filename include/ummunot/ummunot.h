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
 * man pages in man/man3 describe each call.
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
void ummunot_monitor_close(struct ummunot_monitor *monitor);
int ummunot_monitor_fd(const struct ummunot_monitor *monitor);
int ummunot_monitor_query(const struct ummunot_monitor *monitor,
			  struct ummunot_monitor_info *info);

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
	uint32_t resv;
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
	uint64_t evictions;		/* LRU / limit / flush */
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
/* The cache's monitor (for its fd); owned by the cache. */
struct ummunot_monitor *ummunot_cache_monitor(struct ummunot_cache *cache);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOT_UMMUNOT_H */
