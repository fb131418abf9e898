/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libummunot-ofi: libfabric's own MR cache (the verbs provider's, which
 * verbs;ofi_rxm uses) learns every invalidation from the kernel.
 *
 * ummunot_ofi_import() gives libfabric (>= 1.17, the fi_ext.h import
 * monitor) a struct fid_mem_monitor backed by a ummunot monitor:
 *
 *   subscribe(addr, len)  watches [addr, addr + len) with one ummunot
 *                         region (an address-space change there writes an
 *                         event before the changing system call returns);
 *   valid(addr, len)      on every cache hit, under libfabric's lock: when
 *                         no event arrived and no invalidated range is
 *                         outstanding, one acquire load of the ring's
 *                         generation; otherwise it drains the ring and
 *                         answers for the range;
 *   unsubscribe           stops watching (libfabric 2.1 calls it for
 *                         every entry it drops; 1.17 to 2.0 never do: a
 *                         range whose region fired is unregistered at
 *                         once, and an invalidated range is forgotten when
 *                         valid() has said so or it is subscribed again;
 *                         past 16384 invalidated ranges outstanding all
 *                         are forgotten, and valid() takes its slow path,
 *                         a locked lookup, from then on);
 *   overflow              every range is invalid;
 *   fork()                a child watches nothing it inherited: every
 *                         inherited cache entry is invalid there, and the
 *                         child opens its own ummunot monitor.
 *
 * While a cache uses it, a thread of its own waits on the ring, and for
 * every range that changed calls libfabric's notify() (outside libfabric's
 * lock and its own), so invalidated registrations leave libfabric's cache
 * and are unpinned at once; it also unregisters fired regions, so that no
 * ioctl but subscribe()'s runs under libfabric's lock.  In a forked child
 * there is no such thread: invalidated registrations leave the cache when
 * next looked up or evicted.
 *
 * Activation: call ummunot_ofi_import() before the first fi_domain(), or
 * for an unmodified application preload libummunot-ofi-preload.so, whose
 * constructor calls it (ummunot-ofi(3)).
 *
 * Every function returns 0 or a negative errno.
 */
#ifndef UMMUNOT_OFI_H
#define UMMUNOT_OFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Opens a ummunot monitor (checking that /dev/ummunot works) and imports it
 * as libfabric's memory monitor.  flags must be 0.
 *
 * Errors: -EINVAL (flags), -EALREADY (imported already by this process),
 * -EBUSY (libfabric already has an imported monitor, e.g. Open MPI's, or a
 * domain is open), -ENOSYS (libfabric has no monitor import: older than
 * 1.13), -ENOTSUP (FI_MR_CACHE_MONITOR is set in the environment: libfabric
 * would ignore the import), any error of ummunot_monitor_open() (-ENOENT:
 * no module, -EACCES: no permission).  On error nothing was imported and
 * libfabric keeps its own monitor.
 */
int ummunot_ofi_import(unsigned int flags);

/* Counters since the import; fields are only ever appended. */
struct ummunot_ofi_stats {
	uint64_t subscribes;		/* subscribe() calls */
	uint64_t subscribe_errors;	/* of which refused (range not cached) */
	uint64_t unsubscribes;		/* unsubscribe() calls */
	uint64_t valid_slow;		/* valid() calls that looked further than
					   the ring's generation (hits that took
					   the fast path are not counted: libfabric
					   counts its hits) */
	uint64_t invalid;		/* valid() calls that answered "invalid" */
	uint64_t events;		/* events read from the ring */
	uint64_t overflows;		/* ring overflows: every range invalid */
	uint64_t forks;			/* monitors reopened in a forked child */
	uint64_t collections;		/* region table full: every range
					   invalidated to rebuild it */
	uint64_t regions;		/* ranges watched now */
	uint64_t invalidated;		/* invalidated ranges not yet forgotten */
	uint64_t notified;		/* ranges the evictor thread reported
					   to libfabric (notify()) */
};

/*
 * Fills the first min(size, sizeof(struct ummunot_ofi_stats)) bytes and
 * returns that count.  -ENOENT if nothing was imported, -EINVAL on a NULL
 * stats or a size under 8.
 */
int ummunot_ofi_stats(struct ummunot_ofi_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOT_OFI_H */
