/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * libummunot-ucx: feeds UCX's registration cache (ucs_rcache) from ummunot
 * events, with UCX's own malloc/mmap hooks off.  Activated by preloading
 * the library (LD_PRELOAD=libummunot-ucx.so.0); nothing needs to call it.
 * This header only declares its statistics, for tests and monitoring:
 * look the function up with dlsym(RTLD_DEFAULT, "ummunot_ucx_stats") so
 * that a program works with and without the adapter.
 * libummunot-ucx(7) and Documentation/integrate-ucx.rst describe it.
 */
#ifndef UMMUNOT_UMMUNOT_UCX_H
#define UMMUNOT_UMMUNOT_UCX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Fields are only ever appended. */
struct ummunot_ucx_stats {
	uint32_t active;		/* 1: UCX's rcaches are fed from ummunot;
					 * 0: passive (no /dev/ummunot, a UCX
					 * release this adapter was not tested
					 * with, or UCX never created a
					 * registration cache) */
	uint32_t blind;			/* 1: the monitor was lost (a forked child
					 * could not open its own): every lookup
					 * invalidates everything */
	uint64_t rcaches;		/* UCX registration caches wrapped */
	uint64_t watched;		/* regions registered with ummunot */
	uint64_t unwatched;		/* regions unregistered at UCX's dereg */
	uint64_t watch_errors;		/* registrations ummunot refused */
	uint64_t syncs;			/* lookups that found the ring changed */
	uint64_t events;		/* events passed to ucm_vm_munmap() */
	uint64_t overflows;		/* ring overflows (resync) */
	uint64_t invalidate_all;	/* whole-address-space invalidations */
	uint64_t forks;			/* forked children that reopened */
	uint64_t dead_misses;		/* lookups answered "miss" because the
					 * region found was invalidated by a
					 * drain while UCX still held it */
	uint32_t refused;		/* 1: the gate refused the first UCX copy
					 * it judged (a release it was not
					 * tested with, an unknown release, a
					 * libucs that binds its own calls):
					 * active is 0 */
	uint32_t ucx_version;		/* the fed UCX copy's release, else the
					 * refused one's, (major << 16) | minor;
					 * 0: unknown or not judged yet */
	uint64_t passed_through;	/* UCX copies the gate passed through
					 * untouched (each said why on stderr) */
};

/*
 * Fills the first min(size, sizeof(struct ummunot_ucx_stats)) bytes and
 * returns that number, or -EINVAL if stats is NULL.
 */
int ummunot_ucx_stats(struct ummunot_ucx_stats *stats, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* UMMUNOT_UMMUNOT_UCX_H */
