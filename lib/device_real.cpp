// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "device.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace ummunot::detail {
namespace {

class real_device final : public device {
public:
	explicit real_device(int fd) : fd_(fd) {}
	~real_device() override { ::close(fd_); }
	real_device(const real_device &) = delete;
	real_device &operator=(const real_device &) = delete;

	int ioctl(unsigned long cmd, void *arg) override
	{
		int r;

		do {
			r = ::ioctl(fd_, cmd, arg);
		} while (r < 0 && errno == EINTR);
		return r < 0 ? -errno : 0;
	}

	void *map_ring(std::uint64_t offset, std::uint64_t size, int *err) override
	{
		void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED,
				 fd_, static_cast<off_t>(offset));
		if (p == MAP_FAILED) {
			*err = -errno;
			return nullptr;
		}
		return p;
	}

	void unmap_ring(void *addr, std::uint64_t size) override { ::munmap(addr, size); }
	int fd() const override { return fd_; }

private:
	int fd_;
};

} // namespace

std::unique_ptr<device> device_open_real(const char *path, int *err)
{
	int fd = ::open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		*err = -errno;
		return nullptr;
	}
	return std::make_unique<real_device>(fd);
}

} // namespace ummunot::detail
