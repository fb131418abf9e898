/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause */
/*
 * ummunot: kernel-to-user notification of changes to watched virtual ranges.
 *
 * This header is the single source of truth for the ABI between the ummunot
 * kernel module (kmod/) and userspace (lib/, tools/, tests/).  Once a version
 * is released nothing in it changes meaning: new behaviour comes with a new
 * feature bit, new fields come out of reserved space that is required to be
 * zero today.
 *
 * Overview (Documentation/abi.rst has the full text):
 *
 *   fd = open("/dev/ummunot", O_RDWR | O_CLOEXEC);
 *   ioctl(fd, UMMUNOT_IOC_HELLO, &hello);       handshake, ring size
 *   ring = mmap(NULL, hello.ring_mmap_size, PROT_READ | PROT_WRITE,
 *               MAP_SHARED, fd, hello.ring_mmap_offset);
 *   ioctl(fd, UMMUNOT_IOC_REGISTER, &batch);    watch ranges
 *   ... events appear in the ring before munmap() & co. return ...
 *
 * The file is bound to the address space (mm) of the process that opened
 * it.  Every ioctl and mmap from another address space (a forked child, a
 * process that received the fd over a socket) fails with EPERM and touches
 * nothing.
 *
 * Errnos common to all ioctls:
 *   ENOTTY  unknown ioctl command
 *   EFAULT  an argument pointer (or an array it points to) is not accessible
 *   EINVAL  a reserved field or padding is non-zero, an unknown flag is set,
 *           or a value is out of range (each ioctl lists its own cases)
 *   EPERM   the caller's address space is not the one that opened the file
 *   EBADFD  UMMUNOT_IOC_HELLO has not been done yet on this file
 */
#ifndef _UAPI_LINUX_UMMUNOT_H
#define _UAPI_LINUX_UMMUNOT_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define UMMUNOT_DEVICE_NAME	"ummunot"

/* Version of this ABI.  Bumped only for additions; version 1 stays valid. */
#define UMMUNOT_ABI_VERSION	1

/*
 * Feature bits, negotiated by UMMUNOT_IOC_HELLO: the caller asks for the
 * features it understands, the kernel answers with the subset it enables
 * and, separately, everything it supports.
 *
 * UMMUNOT_FEATURE_RING_GENERATION: the ring header's generation word moves
 *	on every event and every overflow (always granted in version 1).
 * UMMUNOT_FEATURE_EVENT_FILTER: UMMUNOT_IOC_SET_FILTER is available.
 * UMMUNOT_FEATURE_BATCH: REGISTER/UNREGISTER/REARM take arrays.
 * UMMUNOT_FEATURE_STATS: UMMUNOT_IOC_GET_STATS is available.
 * UMMUNOT_FEATURE_USER_AREA: the ring's header page has a user area that
 *	the kernel shows in /proc/PID/fdinfo (see UMMUNOT_RING_USER_AREA_*).
 * UMMUNOT_FEATURE_REARM_WAIT: REARM returns once every invalidation in
 *	flight over its regions has finished changing their pages, as
 *	REGISTER does (a kernel without this bit in supported_features may
 *	return at once: re-pinning right after it can take pages that the
 *	running invalidation then drops).  A behaviour, not an option: the
 *	kernel waits whether or not it was asked for.
 */
#define UMMUNOT_FEATURE_RING_GENERATION	(1ULL << 0)
#define UMMUNOT_FEATURE_EVENT_FILTER	(1ULL << 1)
#define UMMUNOT_FEATURE_BATCH		(1ULL << 2)
#define UMMUNOT_FEATURE_STATS		(1ULL << 3)
#define UMMUNOT_FEATURE_USER_AREA	(1ULL << 4)
#define UMMUNOT_FEATURE_REARM_WAIT	(1ULL << 5)
#define UMMUNOT_FEATURES_V1		(UMMUNOT_FEATURE_RING_GENERATION | \
					 UMMUNOT_FEATURE_EVENT_FILTER | \
					 UMMUNOT_FEATURE_BATCH | \
					 UMMUNOT_FEATURE_STATS | \
					 UMMUNOT_FEATURE_USER_AREA | \
					 UMMUNOT_FEATURE_REARM_WAIT)

/*
 * Event types.  Values are this ABI's own, not the kernel's internal
 * enum mmu_notifier_event, so they never move.  Documentation/events.rst
 * says which system calls produce which type on which kernels, and why a
 * type is delivered or filtered by default.
 *
 * Delivered by default (the pages behind the range may have changed):
 *   UNMAP    munmap, mremap (source), mmap(MAP_FIXED) over the range,
 *            brk shrink, shmdt
 *   CLEAR    madvise(MADV_DONTNEED/FREE/REMOVE), copy-on-write break,
 *            page reclaim, KSM merge, THP split, page migration on most
 *            kernels
 *   RELEASE  the address space is being torn down (process exit)
 *   MIGRATE  device/page migration that reports itself as such
 *   OTHER    an invalidation reason this module does not know (newer
 *            kernel); delivered because it may change the pages
 * Filtered by default (same pages, only protection or bookkeeping changed):
 *   PROTECTION_VMA   mprotect, NUMA hinting, userfaultfd write-protect
 *   PROTECTION_PAGE  write-protection for fork's copy-on-write
 *   SOFT_DIRTY       /proc/PID/clear_refs soft-dirty tracking
 *   EXCLUSIVE        make_device_exclusive
 */
#define UMMUNOT_EVENT_UNMAP		1
#define UMMUNOT_EVENT_CLEAR		2
#define UMMUNOT_EVENT_PROTECTION_VMA	3
#define UMMUNOT_EVENT_PROTECTION_PAGE	4
#define UMMUNOT_EVENT_SOFT_DIRTY	5
#define UMMUNOT_EVENT_RELEASE		6
#define UMMUNOT_EVENT_MIGRATE		7
#define UMMUNOT_EVENT_EXCLUSIVE		8
#define UMMUNOT_EVENT_OTHER		9
#define UMMUNOT_EVENT_TYPE_MAX		16	/* size of per-type arrays */

#define UMMUNOT_EVENT_BIT(type)		(1ULL << (type))
#define UMMUNOT_EVENT_MASK_DEFAULT	(UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_UNMAP) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_CLEAR) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_RELEASE) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_MIGRATE) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_OTHER))
#define UMMUNOT_EVENT_MASK_ALL		(UMMUNOT_EVENT_MASK_DEFAULT | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_PROTECTION_VMA) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_PROTECTION_PAGE) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_SOFT_DIRTY) | \
					 UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_EXCLUSIVE))

/*
 * UMMUNOT_IOC_HELLO: the handshake.  Must be the first ioctl on a file and
 * is accepted once.  Its number and this structure never change.
 *
 * in:  abi_version   the version the caller speaks (1)
 *      features      features the caller wants
 *      ring_entries  requested ring size in entries; 0 picks the module's
 *                    default; otherwise rounded up to a power of two and at
 *                    least UMMUNOT_RING_MIN_ENTRIES
 *      flags, resv   must be zero
 * out: abi_version   the kernel's version
 *      features      features granted: (requested & supported), plus
 *                    UMMUNOT_FEATURE_RING_GENERATION, which v1 always grants
 *      supported_features  everything this kernel supports
 *      ring_entries  the ring's size in entries (a power of two)
 *      entry_size    sizeof(struct ummunot_event) as the kernel knows it
 *      header_size   offset of entry 0 from the start of the mapping
 *      max_regions   the most regions this file may watch at once
 *      ring_mmap_offset, ring_mmap_size   the mmap() arguments for the ring
 *
 * Errors: EINVAL (flags/resv non-zero, abi_version 0),
 *	   EPROTONOSUPPORT (abi_version newer than the kernel knows: the
 *	   kernel's version is still written back to abi_version),
 *	   E2BIG (ring_entries above the module's max_ring_entries),
 *	   ENOSPC (the ring would take the opener's user past the module's
 *	   max_user_memory), EALREADY (second handshake), ENOMEM.
 */
struct ummunot_hello {
	__u32 abi_version;
	__u32 flags;
	__u64 features;
	__u64 supported_features;
	__u32 ring_entries;
	__u32 entry_size;
	__u32 header_size;
	__u32 max_regions;
	__u64 ring_mmap_offset;
	__u64 ring_mmap_size;
	__u64 resv[4];
};

#define UMMUNOT_RING_MIN_ENTRIES	64

/*
 * The ring.  One shared mapping: a header page, then ring_entries entries of
 * entry_size bytes.  The kernel is the only producer, the file's owner the
 * only consumer.  Fields are grouped by writer so that producer and consumer
 * never share a cache line.
 *
 * Read/write protocol (Documentation/ring.rst has the full diagram):
 *
 *   kernel (producer, under the file's event lock)   user (consumer)
 *   ---------------------------------------------    ---------------------
 *   (A) cons = load_acquire(&hdr->consumer)          (C) prod = load_acquire(&hdr->producer)
 *       if (prod - cons >= nr) -> overflow               read entries [cons, prod)
 *       write entry[prod & mask]                     (D) store_release(&hdr->consumer, prod)
 *   (B) store_release(&hdr->producer, prod + 1)
 *   (E) store_release(&hdr->generation, gen + 1)     (F) g = load_acquire(&hdr->generation)
 *
 *   (A) pairs with (D): the kernel never overwrites an entry the consumer
 *       has not finished reading.
 *   (B) pairs with (C): an entry is fully written before the consumer can
 *       see the producer index that covers it.
 *   (E) pairs with (F): whatever the kernel wrote before moving the
 *       generation (entries, producer, overflow) is visible to a consumer
 *       that sees the new generation.  "Did anything happen?" is one
 *       acquire load of generation compared with the last value seen.
 *
 * The kernel treats everything the consumer can write (consumer, and the
 * whole mapping) as untrusted: a bogus consumer index only makes the ring
 * look full to the kernel (events are then dropped and overflow is set).
 *
 * Overflow: when the ring is full the event is dropped, overflow becomes
 * non-zero and stays so until UMMUNOT_IOC_RESYNC, dropped counts the lost
 * events, and the region that produced it is disarmed like after any
 * event.  The consumer must then assume every region may have changed.
 */
#define UMMUNOT_RING_MAGIC	0x756d6e72U	/* "umnr" */
#define UMMUNOT_RING_VERSION	1

struct ummunot_ring_header {
	/* Written once by the kernel at the handshake. */
	__u32 magic;
	__u32 version;
	__u32 header_size;
	__u32 entry_size;
	__u32 nr_entries;
	__u32 entry_mask;
	__u64 features;
	__u64 resv0[12];

	/* Offset 128: written by the kernel, read by the consumer. */
	__u64 producer;		/* next index the kernel will write */
	__u64 generation;	/* moves on every event and every overflow */
	__u64 overflow;		/* non-zero: events were lost, resync */
	__u64 dropped;		/* events lost to overflow, cumulative */
	__u64 resv1[12];

	/* Offset 256: written by the consumer, read (untrusted) by the kernel. */
	__u64 consumer;		/* next index the consumer will read */
	__u64 resv2[15];
};

#define UMMUNOT_RING_HEADER_PRODUCER_OFFSET	128
#define UMMUNOT_RING_HEADER_CONSUMER_OFFSET	256

/*
 * The user area: bytes [2048, 4096) of the ring's header page belong to the
 * consumer.  The kernel never interprets them; it shows them as native
 * 64-bit words, each printed as 16 hex digits after a space, up to the last
 * non-zero word, as the "user_area:" line of /proc/PID/fdinfo/FD, so
 * that tools (ummunot-stat) can read a library's counters with the same
 * permission check as fdinfo and no cooperation from the process.  The
 * format of the bytes is the library's (lib/ documents libummunot's).
 */
#define UMMUNOT_RING_USER_AREA_OFFSET		2048
#define UMMUNOT_RING_USER_AREA_SIZE		2048

/*
 * One event: the region identified by handle (and its cookie) saw an
 * invalidation of type over [start, end), already clipped to the region.
 * seq counts every event the file generated, starting at 1, including
 * events lost to overflow: a gap in seq is a lost event.
 */
struct ummunot_event {
	__u64 cookie;
	__u64 handle;
	__u64 start;
	__u64 end;
	__u64 seq;
	__u32 type;		/* UMMUNOT_EVENT_* */
	__u32 flags;		/* zero in version 1 */
	__u64 resv[2];
};

/*
 * A region to watch, used by UMMUNOT_IOC_REGISTER.
 * in:  start, length  the virtual range [start, start + length); need not be
 *                     page aligned, need not be mapped yet; length > 0 and
 *                     the range must not wrap or pass the end of user space
 *      cookie         any value; reported back in every event
 *      flags, resv    must be zero
 * out: handle         names the region in events, UNREGISTER and REARM
 */
struct ummunot_region {
	__u64 start;
	__u64 length;
	__u64 cookie;
	__u64 handle;
	__u32 flags;
	__u32 resv;
};

/*
 * Arrays for REGISTER (struct ummunot_region[count]), UNREGISTER and REARM
 * (__u64 handle[count]).  Batches are all-or-nothing: on error nothing was
 * registered, unregistered or re-armed, and error_index names the first
 * element at fault (or count if no single element is).  On a failed
 * REGISTER the handle fields are unspecified: a value found there names no
 * region (UNREGISTER of it fails with ENOENT).
 */
struct ummunot_batch {
	__u64 ptr;		/* user pointer to the array */
	__u32 count;		/* elements, 1 .. max_regions */
	__u32 flags;		/* must be zero */
	__u32 error_index;	/* out */
	__u32 resv;
};

/*
 * UMMUNOT_IOC_REGISTER: watch count regions.  When the ioctl returns, every
 * later invalidation of a region produces an event (an invalidation that
 * was already in flight has completed).  Regions are armed: each reports
 * once, then stays quiet until re-armed or unregistered.  Handles are
 * written back only once every region of the batch is watched; if writing
 * them faults, the whole batch is removed again (EFAULT; events for those
 * handles may already be in the ring, as after an UNREGISTER).  A signal
 * never makes it fail: the one step that gives up on a signal (setting up
 * notifier tracking at an address space's first REGISTER) restarts the
 * call transparently, as fork() does.
 * Errors: EINVAL (count 0, length 0, wrap-around, beyond user space,
 *	   flags/resv), ENOSPC (the file's max_regions would be exceeded -
 *	   error_index is the first element that did not fit - or the
 *	   module's max_regions_per_mm for the address space, or
 *	   max_user_memory for the opener's user - error_index is count),
 *	   ENOMEM, EFAULT.
 *
 * UMMUNOT_IOC_UNREGISTER: stop watching.  Events already in the ring stay.
 * Errors: ENOENT (unknown handle), EINVAL (count 0 or too large, duplicate
 *	   handle in one batch), EFAULT.
 *
 * UMMUNOT_IOC_REARM: let regions report again.  Re-arming an armed region
 * (or naming one twice) is not an error.
 * Errors: ENOENT (unknown handle), EINVAL (count 0 or too large), EFAULT.
 */

/*
 * UMMUNOT_IOC_SET_FILTER: choose which event types are delivered.
 * Types outside the mask are counted in the statistics and otherwise
 * ignored (the region stays armed).  A failed call never changes the
 * filter; concurrent calls take effect one after the other.
 * Errors: EINVAL (a bit outside UMMUNOT_EVENT_MASK_ALL, flags/resv),
 *	   EFAULT (the previous mask cannot be written back).
 */
struct ummunot_filter {
	__u64 mask;		/* in: UMMUNOT_EVENT_BIT()s; out: previous mask */
	__u32 flags;
	__u32 resv;
};

/*
 * UMMUNOT_IOC_RESYNC: acknowledge an overflow.  Clears the ring's overflow
 * word.  The consumer calls it first, then drains the ring, then drops every
 * assumption about its regions (a cache drops every entry).
 * Errors: EINVAL (flags/resv non-zero).
 */
struct ummunot_resync {
	__u32 flags;
	__u32 resv;
	__u64 dropped;		/* out: events lost since the previous resync */
};

/* UMMUNOT_IOC_GET_STATS: this file's counters (output only). */
struct ummunot_stats {
	__u64 regions;			/* watched now */
	__u64 regions_armed;		/* of which armed */
	__u64 regions_registered;	/* cumulative */
	__u64 events;			/* written to the ring */
	__u64 dropped;			/* lost to overflow */
	__u64 overflows;		/* times the ring went from ok to overflow */
	__u64 ring_high_water;		/* most entries ever pending */
	__u64 event_mask;		/* current filter */
	__u64 delivered[UMMUNOT_EVENT_TYPE_MAX];	/* by type */
	__u64 filtered[UMMUNOT_EVENT_TYPE_MAX];		/* by type */
	__u64 resv[8];
};

#define UMMUNOT_IOC_MAGIC	0xCE

#define UMMUNOT_IOC_HELLO	_IOWR(UMMUNOT_IOC_MAGIC, 0x00, struct ummunot_hello)
#define UMMUNOT_IOC_REGISTER	_IOWR(UMMUNOT_IOC_MAGIC, 0x01, struct ummunot_batch)
#define UMMUNOT_IOC_UNREGISTER	_IOWR(UMMUNOT_IOC_MAGIC, 0x02, struct ummunot_batch)
#define UMMUNOT_IOC_REARM	_IOWR(UMMUNOT_IOC_MAGIC, 0x03, struct ummunot_batch)
#define UMMUNOT_IOC_SET_FILTER	_IOWR(UMMUNOT_IOC_MAGIC, 0x04, struct ummunot_filter)
#define UMMUNOT_IOC_RESYNC	_IOWR(UMMUNOT_IOC_MAGIC, 0x05, struct ummunot_resync)
#define UMMUNOT_IOC_GET_STATS	_IOR(UMMUNOT_IOC_MAGIC, 0x06, struct ummunot_stats)

/* Layout checks (C11/C++11): every structure is a multiple of 8 bytes. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define _UMMUNOT_STATIC_ASSERT(c, m) static_assert(c, m)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define _UMMUNOT_STATIC_ASSERT(c, m) _Static_assert(c, m)
#else
#define _UMMUNOT_STATIC_ASSERT(c, m) extern int _ummunot_static_assert[(c) ? 1 : -1]
#endif
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_hello) == 88, "ummunot_hello size");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_ring_header) == 384, "ring header size");
_UMMUNOT_STATIC_ASSERT(__builtin_offsetof(struct ummunot_ring_header, producer) ==
		       UMMUNOT_RING_HEADER_PRODUCER_OFFSET, "producer offset");
_UMMUNOT_STATIC_ASSERT(__builtin_offsetof(struct ummunot_ring_header, consumer) ==
		       UMMUNOT_RING_HEADER_CONSUMER_OFFSET, "consumer offset");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_event) == 64, "event size");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_region) == 40, "region size");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_batch) == 24, "batch size");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_filter) == 16, "filter size");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_resync) == 16, "resync size");
_UMMUNOT_STATIC_ASSERT(sizeof(struct ummunot_stats) == 384, "stats size");
#undef _UMMUNOT_STATIC_ASSERT

#endif /* _UAPI_LINUX_UMMUNOT_H */
