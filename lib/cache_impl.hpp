// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// What the lib/cache_*.cpp files that make up struct ummunot_cache share:
// its tuning constants and two small helpers.  Internal to the library.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "cache.hpp"

namespace ummunot::detail::cache_impl {

inline constexpr std::uint64_t default_max_entries = 65536;
// Grace periods are batched by retired bytes: one waits when what is
// retired reaches half of what the cache holds (so that transient memory
// stays under 1.5x steady), and never for less than this.
inline constexpr std::size_t reclaim_min_bytes = 64 * 1024;
inline constexpr unsigned int race_attempts = 3;
inline constexpr unsigned int drain_batch = 256;
inline constexpr std::uint32_t max_priv_size = 4096;
// Entries a miss may merge with (more are left alone: the merged range
// would be huge anyway).  A fixed array: merging allocates nothing.
inline constexpr std::size_t max_merge = 16;

inline bool zero(const std::uint64_t *p, std::size_t n)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

inline bool contains(const entry *const *v, std::size_t n, const entry *e)
{
	return std::find(v, v + n, e) != v + n;
}

} // namespace ummunot::detail::cache_impl
