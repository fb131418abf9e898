// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Size-extensible structs (struct ummunot_*_ext, struct ummunot_cache_config,
// struct ummunot_cache_ops): the caller passes the size it was compiled
// with, as the kernel's copy_struct_from_user() and clone3() do.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace ummunot::detail {

// Out: fill min(dst_size, src_size) bytes, zero the rest of the caller's
// struct, return the number of bytes filled.
inline int copy_ext(void *dst, std::size_t dst_size, const void *src, std::size_t src_size)
{
	std::size_t n = dst_size < src_size ? dst_size : src_size;

	std::memcpy(dst, src, n);
	if (dst_size > n)
		std::memset(static_cast<char *>(dst) + n, 0, dst_size - n);
	return static_cast<int>(n);
}

// In: a caller struct of size user_size into ours (known bytes).  Smaller
// than min_size: -EINVAL; larger than ours with a non-zero byte we do not
// know: -E2BIG (a newer caller asks for something this library lacks).
inline int read_ext(void *dst, std::size_t known, const void *src, std::size_t user_size,
		    std::size_t min_size)
{
	if (user_size < min_size)
		return -EINVAL;
	const auto *p = static_cast<const unsigned char *>(src);
	for (std::size_t i = known; i < user_size; i++)
		if (p[i])
			return -E2BIG;
	std::memset(dst, 0, known);
	std::memcpy(dst, src, user_size < known ? user_size : known);
	return 0;
}

} // namespace ummunot::detail
