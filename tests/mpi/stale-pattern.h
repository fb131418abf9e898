/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The data pattern of the stale-buffer checks (tests/mpi/stale-buffer and
 * tests/ofi/ofi-reuse): iteration i sends buffers filled for DATA(i); the
 * receiver fills its buffer for BEFORE(i) first, so a receive that matches
 * DATA(i - 1) is stale, one that still matches BEFORE(i) is lost, anything
 * else corrupt.  Words are never 0, so zeroed pages never match.
 */
#ifndef UMMUNOT_TESTS_STALE_PATTERN_H
#define UMMUNOT_TESTS_STALE_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline uint64_t word(uint64_t seed, size_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;

	x ^= x >> 31;
	return x | 1;
}

static inline void fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = word(seed, i);
}

static inline bool matches(const void *buf, size_t len, uint64_t seed)
{
	const uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != word(seed, i))
			return false;
	return true;
}

/* Seeds: the data of iteration i, and the receiver's fill before it. */
#define DATA(i)		((uint64_t)(i) * 2 + 0x1000)
#define BEFORE(i)	((uint64_t)(i) * 2 + 0x1001)

#endif
