// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache: the registration cache.  Documentation/library.rst
// ("The parts of the cache") has the map; the short version:
//
//  * entries (lib/entries.hpp) own every entry and the index of their
//    ranges, a copy-on-write B+tree (lib/index.hpp) that hits read under
//    the library's RCU read lock (lib/rcu.hpp); its life cycle: make,
//    watch, publish, kill, finalize, retire, reclaim.
//  * the event pump (lib/event_pump.hpp) drains the monitor's ring into the
//    entries and says how far it got (the hit's first check).
//  * the pin budget (lib/pin_budget.hpp) charges what the cache pins to its
//    own cap and the shared budget.
//  * the cache (this class: lib/cache.cpp, the miss in lib/cache_miss.cpp)
//    orchestrates get, put, poll, invalidate, flush and stats.  Writers
//    (everything but a hit and a put that is not the last) hold mu_ for a
//    writer section; the end of every writer section is one routine,
//    end_writer(): the index changes published, the queued UNREGISTERs
//    sent, retired memory reclaimed when a grace period is due, the
//    counters exported to the user area.
//  * Hits are counted per CPU without a lock prefix (lib/percpu.hpp).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include <ummunot/ummunot.h>

#include "entries.hpp"
#include "event_pump.hpp"
#include "fork.hpp"
#include "monitor.hpp"
#include "percpu.hpp"
#include "pin_budget.hpp"

struct ummunot_cache {
public:
	// config is complete (read_ext()ed); ops filled in.
	static int create(std::unique_ptr<ummunot_monitor> mon,
			  const ummunot::detail::backend &be,
			  const ummunot_cache_config &config, ummunot_cache **out);
	// ummunot_cache_destroy(): deletes c, or, in a forked child whose
	// parent had another thread inside c, abandons it (see cache.cpp).
	static void destroy(ummunot_cache *c);
	~ummunot_cache();
	ummunot_cache(const ummunot_cache &) = delete;
	ummunot_cache &operator=(const ummunot_cache &) = delete;

	int get(std::uint64_t addr, std::uint64_t len, int access,
		const ummunot_reg **out);
	int put(const ummunot_reg *reg);
	int poll();
	int flush();
	int invalidate(std::uint64_t addr, std::uint64_t len);
	int stats(struct ummunot_cache_stats_ext *st);
	ummunot_monitor *monitor() { return mon_.get(); }
	int fd() const { return mon_->fd(); }
	bool forked() const { return fork_gen_ != ummunot::detail::fork_gen_now(); }
	static void *priv(const ummunot_reg *reg);

	// Tests: 0 if every invariant holds, else a line number in
	// entries.cpp.
	int check_invariants();

private:
	using entry = ummunot::detail::entry;
	class writer;

	ummunot_cache(std::unique_ptr<ummunot_monitor> mon, const ummunot::detail::backend &be,
		      const ummunot_cache_config &cfg, ummunot_budget &budget,
		      std::uint64_t max_entries, std::uint64_t page);

	// The end of a writer section, under mu_; returns what is due for
	// freeing after a grace period, which ~writer() waits for after
	// releasing mu_ (reclaim()).
	ummunot::detail::entries::reclaim_batch end_writer(bool force_reclaim);
	void reclaim(ummunot::detail::entries::reclaim_batch &b);
	void export_counters();

	// The miss (cache_miss.cpp).
	int miss(std::uint64_t a, std::uint64_t b, int access, entry **out);
	int miss_uncached(std::uint64_t a, std::uint64_t b, int access, entry **out);
	int make_room(std::uint64_t bytes, std::size_t removed, const entry *const *keep,
		      std::size_t nkeep);
	int watch(entry *e, const entry *const *keep, std::size_t nkeep);
	int pin(entry *e, int access, const entry *const *keep, std::size_t nkeep);
	int changed_while_pinned(entry *e);

	// Configuration.
	const std::unique_ptr<ummunot_monitor> mon_;
	const ummunot::detail::backend be_;
	const std::uint64_t page_;
	const std::uint64_t max_entries_, max_cached_;
	const std::uint32_t priv_size_;
	const std::uint64_t fork_gen_;

	// Read on the hit path: the pump's generation words first, then the
	// entries (whose first member is the index's published root).
	alignas(64) ummunot::detail::event_pump pump_;
	ummunot::detail::pin_budget pins_;
	ummunot::detail::entries entries_;

	// Writer state, under mu_.
	alignas(64) std::mutex mu_;
	std::uint64_t race_retries_ = 0, caller_invalidations_ = 0, misses_ = 0;

	ummunot::detail::percpu_counter hits_;
	// When export_counters() last summed hits_ (CLOCK_MONOTONIC_COARSE,
	// ns), under mu_: the sum is O(possible CPUs), so writer sections do
	// it at most once per kHitsExportNs and stats() always.
	std::uint64_t hits_exported_ns_ = 0;
	static constexpr std::uint64_t kHitsExportNs = 10'000'000;
};
