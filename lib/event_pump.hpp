// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The cache's event pump: drains the monitor's ring into the entries (each
// event kills the entry its region watches), resynchronises after an
// overflow (every entry killed), and records how far it got: seen_gen(),
// which a hit compares with the ring's generation word to know that every
// event up to there has been processed.  Calls the monitor and the entries;
// nothing calls back.  drain() runs under the cache's mutex.
#pragma once

#include <atomic>
#include <cstdint>

#include <linux/ummunot.h>

#include "entries.hpp"
#include "ring.hpp"

struct ummunot_monitor;

namespace ummunot::detail {

class event_pump {
public:
	explicit event_pump(ummunot_monitor &mon);

	// The hit: true if no event arrived since the last complete drain.
	// (F): pairs with the producer's (E); the acquire on seen_gen_ pairs
	// with the release in drain(): the entries of every event up to the
	// ring's generation are DEAD.
	[[gnu::always_inline]] bool current() const
	{
		return ring_load_acquire(gen_word_) == seen_gen_.load(std::memory_order_acquire);
	}

	// Process every pending event.  The number processed, or a negative
	// errno (a failed RESYNC: the next call tries again).  Ends with the
	// entries settled (the dead out of the published index) before it
	// says how far it got.
	int drain(entries &es);

	// Counters.
	const std::uint64_t *invalidations() const { return invalidations_; }
	std::uint64_t resyncs() const { return resyncs_; }

private:
	ummunot_monitor &mon_;
	const __u64 *const gen_word_;		// the ring header's generation
	std::atomic<std::uint64_t> seen_gen_{0};	// events up to here processed
	std::uint64_t invalidations_[UMMUNOT_EVENT_TYPE_MAX] = {};
	std::uint64_t resyncs_ = 0;
};

} // namespace ummunot::detail
