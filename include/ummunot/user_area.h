/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * ummunot/user_area.h: the format of the ring's user area as libummunot
 * writes it and ummunot-stat reads it.
 *
 * The kernel gives the consumer bytes [UMMUNOT_RING_USER_AREA_OFFSET,
 * + UMMUNOT_RING_USER_AREA_SIZE) of the ring's header page and never
 * interprets them; it only prints them, as native-endian 64-bit words, on
 * the "user_area:" line of /proc/PID/fdinfo/FD (trailing zero words are
 * omitted).  This header is the contract between the library (the writer)
 * and tools such as ummunot-stat (the readers):
 *
 *   - every field is one 64-bit word, so the fdinfo line decodes word by
 *     word with no packing questions (word i = byte offset 8 * i);
 *   - magic is UMMUNOT_USER_AREA_MAGIC; a reader that sees anything else
 *     shows the counters as unknown ("-"), never garbage;
 *   - the layout is append-only: fields are never moved, resized or given
 *     a new meaning; a new field takes a reserved word (zero until then)
 *     and version goes up.  A reader decodes the fields it knows and
 *     ignores the rest, so old tools keep working with new libraries;
 *   - the counters are cumulative since the monitor was opened, except
 *     pinned_bytes and entries which are current values;
 *   - the writer stores each word with a single relaxed 64-bit store; a
 *     reader may see one counter updated and not another (no snapshot
 *     consistency across words is promised, nor needed for statistics).
 *
 * Words not listed (all of reserved[]) must be written as zero.
 */
#ifndef UMMUNOT_USER_AREA_H
#define UMMUNOT_USER_AREA_H

#include <linux/types.h>
#include <linux/ummunot.h>

/* "umnlib\0\0" read as a little-endian u64: the bytes 'u','m','n','l','i','b',0,0. */
#define UMMUNOT_USER_AREA_MAGIC		0x000062696c6e6d75ULL
#define UMMUNOT_USER_AREA_VERSION	1

/* Offsets, in 64-bit words, of each field (the fdinfo line's word index). */
#define UMMUNOT_USER_AREA_WORD_MAGIC		0
#define UMMUNOT_USER_AREA_WORD_VERSION		1
#define UMMUNOT_USER_AREA_WORD_HITS		2
#define UMMUNOT_USER_AREA_WORD_MISSES		3
#define UMMUNOT_USER_AREA_WORD_INVALIDATIONS	4	/* 16 words, by UMMUNOT_EVENT_* */
#define UMMUNOT_USER_AREA_WORD_EVICTIONS	20
#define UMMUNOT_USER_AREA_WORD_RESYNCS		21
#define UMMUNOT_USER_AREA_WORD_PINNED_BYTES	22
#define UMMUNOT_USER_AREA_WORD_ENTRIES		23
#define UMMUNOT_USER_AREA_WORD_REGISTRATIONS	24
#define UMMUNOT_USER_AREA_WORD_DEREGISTRATIONS	25
#define UMMUNOT_USER_AREA_WORDS_V1		26	/* words defined by version 1 */

#define UMMUNOT_USER_AREA_WORDS		(UMMUNOT_RING_USER_AREA_SIZE / 8)

struct ummunot_user_area {
	__u64 magic;		/* UMMUNOT_USER_AREA_MAGIC, written last at init */
	__u64 version;		/* UMMUNOT_USER_AREA_VERSION of the writer */
	__u64 hits;		/* cache lookups answered from the cache */
	__u64 misses;		/* lookups that had to register memory */
	/*
	 * Cache entries invalidated, indexed by the event type that caused
	 * it (UMMUNOT_EVENT_*; index 0 counts invalidations the library
	 * made for another reason, e.g. a resync after overflow).
	 */
	__u64 invalidations[UMMUNOT_EVENT_TYPE_MAX];
	__u64 evictions;	/* entries dropped to respect the cache's limits */
	__u64 resyncs;		/* overflows handled (UMMUNOT_IOC_RESYNC calls) */
	__u64 pinned_bytes;	/* bytes registered by live entries, now */
	__u64 entries;		/* live cache entries, now */
	__u64 registrations;	/* ibv_reg_mr (backend register) calls */
	__u64 deregistrations;	/* ibv_dereg_mr (backend deregister) calls */
	__u64 reserved[UMMUNOT_USER_AREA_WORDS - UMMUNOT_USER_AREA_WORDS_V1];
};

/* Layout checks (C11/C++11). */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define _UMMUNOT_UA_ASSERT(c, m) static_assert(c, m)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define _UMMUNOT_UA_ASSERT(c, m) _Static_assert(c, m)
#else
#define _UMMUNOT_UA_ASSERT(c, m) extern int _ummunot_ua_static_assert[(c) ? 1 : -1]
#endif
_UMMUNOT_UA_ASSERT(sizeof(struct ummunot_user_area) <= UMMUNOT_RING_USER_AREA_SIZE,
		   "user area struct must fit in the ring's user area");
_UMMUNOT_UA_ASSERT(sizeof(struct ummunot_user_area) == UMMUNOT_RING_USER_AREA_SIZE,
		   "user area struct covers the whole user area");
_UMMUNOT_UA_ASSERT(__builtin_offsetof(struct ummunot_user_area, hits) ==
		   8 * UMMUNOT_USER_AREA_WORD_HITS, "hits word");
_UMMUNOT_UA_ASSERT(__builtin_offsetof(struct ummunot_user_area, invalidations) ==
		   8 * UMMUNOT_USER_AREA_WORD_INVALIDATIONS, "invalidations word");
_UMMUNOT_UA_ASSERT(__builtin_offsetof(struct ummunot_user_area, evictions) ==
		   8 * UMMUNOT_USER_AREA_WORD_EVICTIONS, "evictions word");
_UMMUNOT_UA_ASSERT(__builtin_offsetof(struct ummunot_user_area, deregistrations) ==
		   8 * UMMUNOT_USER_AREA_WORD_DEREGISTRATIONS, "deregistrations word");
_UMMUNOT_UA_ASSERT(__builtin_offsetof(struct ummunot_user_area, reserved) ==
		   8 * UMMUNOT_USER_AREA_WORDS_V1, "reserved words");
#undef _UMMUNOT_UA_ASSERT

#endif /* UMMUNOT_USER_AREA_H */
