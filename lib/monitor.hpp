// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_monitor: one handshaken /dev/ummunot file and its ring.
//
// Thread safety: changed()/generation() may be called from any thread at
// any time.  consume(), resync() and the batch operations must be
// serialised by the caller (the ring has one consumer); the cache does so
// with its writer mutex.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>

#include <ummunot/ummunot.h>
#include <ummunot/user_area.h>

#include "device.hpp"
#include "fork.hpp"
#include "ring.hpp"

struct ummunot_monitor;

namespace ummunot::detail {
// The monitor is being destroyed: its seen word is no longer handed out
// (monitor_check.cpp).
void check_words_forget(const ummunot_monitor *m);
} // namespace ummunot::detail

struct ummunot_monitor {
public:
	static int open(std::unique_ptr<ummunot::detail::device> dev,
			const ummunot_monitor_attr *attr, ummunot_monitor **out);
	~ummunot_monitor();
	ummunot_monitor(const ummunot_monitor &) = delete;
	ummunot_monitor &operator=(const ummunot_monitor &) = delete;

	int fd() const { return dev_->fd(); }
	const ummunot_hello &hello() const { return hello_; }

	// (F): pairs with the producer's (E) store-release of generation.
	std::uint64_t generation() const
	{
		return ummunot::detail::ring_load_acquire(&hdr_->generation);
	}

	// The generation word itself, for callers that load it with (F) on a
	// hot path without going through this object.
	const __u64 *generation_word() const { return &hdr_->generation; }

	// The word changed() compares with, for the inline check of
	// <ummunot/ummunot.h> (ummunot_monitor_check_init()): C code loads it
	// with __atomic_load_n(), the builtin std::atomic is made of.
	const std::uint64_t *seen_word() const
	{
		static_assert(sizeof(seen_gen_) == sizeof(std::uint64_t) &&
			      alignof(decltype(seen_gen_)) == alignof(std::uint64_t) &&
			      std::atomic<std::uint64_t>::is_always_lock_free);
		return reinterpret_cast<const std::uint64_t *>(&seen_gen_);
	}

	// In a forked child, from the fork handler of monitor_check.cpp:
	// the inline check reads "changed" without touching the ring.
	void poison_seen() { seen_gen_.store(UMMUNOT_CHECK_FORKED, std::memory_order_relaxed); }

	// ummunot_monitor_check_init() handed out seen_word(): the fork
	// handler must poison it, and the destructor forget this monitor.
	// Under the lock of monitor_check.cpp.
	mutable bool check_words_out = false;

	bool changed() const
	{
		return generation() != seen_gen_.load(std::memory_order_acquire);
	}

	// Consume up to max pending events, calling fn(const ummunot_event &)
	// for each.  Returns the number consumed, -EOVERFLOW if the kernel lost
	// events (nothing consumed) or -EIO if the ring is inconsistent.
	// *complete tells whether the ring was empty afterwards.
	template <class F>
	int consume(unsigned int max, bool *complete, F &&fn);

	// Discard everything pending (used after RESYNC).
	int discard();

	// UMMUNOT_IOC_RESYNC first, then drain (discarding).  *dropped may be
	// nullptr.
	int resync(std::uint64_t *dropped);

	int register_regions(ummunot_region *regions, unsigned int count,
			     unsigned int *error_index);
	int handles_op(unsigned long cmd, const std::uint64_t *handles,
		       unsigned int count, unsigned int *error_index);
	int set_filter(std::uint64_t mask, std::uint64_t *old_mask);
	int stats(ummunot_stats *st);

	// The ring's user area (UMMUNOT_RING_USER_AREA_OFFSET of the header
	// page), or nullptr when the kernel did not grant
	// UMMUNOT_FEATURE_USER_AREA or the header is too small to hold it.
	ummunot_user_area *user_area() const { return user_area_; }

	// Remember g as fully consumed (for changed()).
	// Release: pairs with the acquire load of seen in changed() and
	// ummunot_monitor_check_changed(), so a caller that sees the new seen
	// also sees what the reader did before its read (see ring.rst, "The
	// inline test").
	void mark_seen(std::uint64_t g) { seen_gen_.store(g, std::memory_order_release); }

	// True in a child process forked after this monitor was opened: its
	// ring is not mapped there and its file belongs to the parent's mm.
	bool forked() const { return fork_gen_ != ummunot::detail::fork_gen_now(); }

	// A cache owns this monitor: the C API refuses the calls that would
	// change its state under the cache (-EBUSY).
	void set_owned() { owned_ = true; }
	bool owned() const { return owned_; }

private:
	ummunot_monitor() = default;
	int handshake(const ummunot_monitor_attr *attr);
	// One ioctl cmd over the count elements of array (a batch; the
	// caller checked that the kernel takes it).
	int batch_ioctl(unsigned long cmd, const void *array, unsigned int count,
			unsigned int *error_index);

	std::unique_ptr<ummunot::detail::device> dev_;
	ummunot_hello hello_{};
	void *map_ = nullptr;
	std::uint64_t map_size_ = 0;
	ummunot_ring_header *hdr_ = nullptr;
	const unsigned char *entries_ = nullptr;
	std::uint32_t nr_ = 0, mask_ = 0, entry_size_ = 0;
	ummunot_user_area *user_area_ = nullptr;
	std::uint64_t cons_ = 0;		// our consumer index (we are its only writer)
	std::atomic<std::uint64_t> seen_gen_{0};
	std::uint64_t fork_gen_ = 0;
	bool owned_ = false;
};

template <class F>
int ummunot_monitor::consume(unsigned int max, bool *complete, F &&fn)
{
	using namespace ummunot::detail;

	*complete = false;
	// The caller loads generation (F) before calling us, so every event
	// published before that generation is covered by the producer index
	// we load next.
	if (ring_load_acquire(&hdr_->overflow))
		return -EOVERFLOW;
	// (C): pairs with (B); entries below prod are completely written.
	std::uint64_t prod = ring_load_acquire(&hdr_->producer);
	std::uint64_t avail = prod - cons_;

	if (avail > nr_)
		return -EIO;
	unsigned int n = avail < max ? static_cast<unsigned int>(avail) : max;
	for (unsigned int i = 0; i < n; i++) {
		ummunot_event ev;
		const unsigned char *src = entries_ +
			static_cast<std::size_t>((cons_ + i) & mask_) * entry_size_;

		std::memcpy(&ev, src, sizeof(ev));
		fn(static_cast<const ummunot_event &>(ev));
	}
	cons_ += n;
	// (D): pairs with (A); we are done reading the slots below cons_.
	ring_store_release(&hdr_->consumer, cons_);
	*complete = cons_ == prod;
	return static_cast<int>(n);
}
