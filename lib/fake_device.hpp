// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// An in-process stand-in for /dev/ummunot, for tests and benchmarks.  It
// implements the uapi (HELLO, REGISTER, UNREGISTER, REARM, SET_FILTER,
// RESYNC, GET_STATS with their validation and errnos) and is the ring's
// producer, following the (A), (B), (E) side of the barrier protocol
// exactly.  A test makes things happen with invalidate().
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "device.hpp"

namespace ummunot::detail {

class fake_device final : public device {
public:
	struct config {
		std::uint32_t default_entries = 256;
		std::uint32_t max_entries = 1u << 16;
		std::uint32_t max_regions = 1u << 16;
		std::uint64_t supported = UMMUNOT_FEATURES_V1;
		std::uint32_t header_size = 4096;
		std::uint32_t entry_size = sizeof(ummunot_event);
	};

	fake_device() : fake_device(config{}) {}
	explicit fake_device(const config &cfg);
	~fake_device() override;
	fake_device(const fake_device &) = delete;
	fake_device &operator=(const fake_device &) = delete;

	int ioctl(unsigned long cmd, void *arg) override;
	void *map_ring(std::uint64_t offset, std::uint64_t size, int *err) override;
	void unmap_ring(void *addr, std::uint64_t size) override;
	int fd() const override { return -1; }

	// "The pages behind [start, end) changed, reason type": every armed
	// region overlapping it reports once (clipped), unless filtered.
	// Returns the number of events generated (written or lost).
	unsigned int invalidate(std::uint64_t start, std::uint64_t end,
				std::uint32_t type);
	// Make the next ioctl with this command fail with err (negative).
	void fail_next(unsigned long cmd, int err);

	std::uint64_t nr_regions() const;
	bool is_armed(std::uint64_t handle) const;
	std::uint64_t ioctl_count(unsigned long cmd) const;
	ummunot_ring_header *header() const { return hdr_; }

private:
	struct region {
		std::uint64_t start, end, cookie;
		bool armed;
	};

	int ioctl_locked(unsigned long cmd, void *arg);
	int hello(ummunot_hello *h);
	int do_register(ummunot_batch *b);
	int do_handles(unsigned long cmd, ummunot_batch *b);
	void emit(std::uint64_t handle, const region &r, std::uint64_t start,
		  std::uint64_t end, std::uint32_t type);

	config cfg_;
	mutable std::mutex lock_;		// the "file's event lock"
	bool hello_done_ = false;
	std::uint64_t features_ = 0;
	void *ring_ = nullptr;
	std::uint64_t ring_size_ = 0;
	ummunot_ring_header *hdr_ = nullptr;
	unsigned char *entries_ = nullptr;
	std::uint32_t nr_ = 0;
	std::uint64_t prod_ = 0, gen_ = 0, seq_ = 0;
	std::uint64_t dropped_ = 0, dropped_at_resync_ = 0;
	std::uint64_t next_handle_ = 1;
	std::map<std::uint64_t, region> regions_;
	ummunot_stats st_{};
	std::map<unsigned long, std::uint64_t> calls_;
	unsigned long fail_cmd_ = 0;
	int fail_err_ = 0;
};

} // namespace ummunot::detail
