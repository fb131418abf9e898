// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Device operations: everything the library asks of /dev/ummunot.
// The real device is ioctl()+mmap() on a file descriptor; the fake device
// (fake_device.hpp, tests only) implements the same uapi in process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <linux/ummunot.h>

namespace ummunot::detail {

class device {
public:
	virtual ~device() = default;
	// ioctl(fd, cmd, arg): 0 or -errno.
	virtual int ioctl(unsigned long cmd, void *arg) = 0;
	// mmap of the ring: pointer or nullptr with *err = -errno.
	virtual void *map_ring(std::uint64_t offset, std::uint64_t size, int *err) = 0;
	virtual void unmap_ring(void *addr, std::uint64_t size) = 0;
	// The fd for epoll, or -1 when there is none (fake).
	virtual int fd() const = 0;
};

// Opens path (O_RDWR|O_CLOEXEC).  nullptr and *err = -errno on failure.
std::unique_ptr<device> device_open_real(const char *path, int *err);

} // namespace ummunot::detail
