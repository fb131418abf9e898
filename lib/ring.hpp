// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Accessors for the shared ring header.  The header is plain memory shared
// with the kernel (or the fake producer), so every access to a word the
// other side writes goes through these, with the ordering the uapi protocol
// names: (C)/(F) are acquire loads, (D) is a release store.
#pragma once

#include <cstdint>

#include <linux/types.h>

namespace ummunot::detail {

inline std::uint64_t ring_load_acquire(const __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

inline std::uint64_t ring_load_relaxed(const __u64 *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

inline void ring_store_release(__u64 *p, std::uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

inline void ring_store_relaxed(__u64 *p, std::uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

} // namespace ummunot::detail
