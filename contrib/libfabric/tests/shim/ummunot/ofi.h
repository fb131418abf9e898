/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Stand-in for libummunot-ofi's <ummunot/ofi.h>, so that tests/ofi/ofi-reuse.c
 * builds against a libfabric with the native ummunot monitor and nothing of
 * libummunot: only its "default" (libfabric's own default monitor) and
 * "none" (negative control) monitors are usable; the others fail.
 */
#ifndef UMMUNOT_CONTRIB_OFI_SHIM_H
#define UMMUNOT_CONTRIB_OFI_SHIM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

struct ummunot_ofi_stats {
	uint64_t subscribes, subscribe_errors, valid_slow, invalid, events,
		 overflows, collections, regions;
};

static inline int ummunot_ofi_import(int flags)
{
	(void)flags;
	return -ENOSYS;
}

static inline int ummunot_ofi_stats(struct ummunot_ofi_stats *st, size_t size)
{
	(void)st;
	(void)size;
	return -ENOSYS;
}

#endif
