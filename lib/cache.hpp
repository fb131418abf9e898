// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache: the registration cache.  See
// Documentation/library.rst for the design; the short version:
//
//  * The index is an immutable sorted array of entries (a "snapshot"),
//    published with a release store and read under liburcu-memb's read
//    lock.  Writers (misses, event processing, eviction) are serialised by
//    mu_ and replace the snapshot; old snapshots and entries are freed only
//    after a grace period (retire list + rcu_synchronize(), never on the
//    hit path).
//  * Every entry has one atomic word: the number of users plus the DEAD
//    bit.  A hit is a CAS that fails once DEAD is set; whoever moves the
//    word to exactly DEAD (no users) deregisters the entry, so that happens
//    exactly once and never while it is in use.
//  * Hit counters live in cache-line-sized per-thread shards.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <ummunot/ummunot.h>

#include "monitor.hpp"

namespace ummunot::detail {

struct entry {
	ummunot_reg pub;			// handed out; must stay first
	std::atomic<std::uint64_t> refs{0};	// users | DEAD
	std::atomic<std::uint64_t> last_used{0};	// LRU tick
	std::uint64_t handle = 0;
	// Cookies come from a 64-bit counter starting at 1 and never reach
	// 2^62, so the two flags share the word (88 bytes, a 96-byte chunk).
	std::uint64_t cookie : 62 = 0;
	std::uint64_t pending : 1 = 0;		// registered, not yet published
	std::uint64_t in_module : 1 = 0;	// handle is registered with the monitor
	// While registered: the cache's list of registered entries (live_).
	// After finalize_locked(): next is the retire list's link.
	entry *prev = nullptr, *next = nullptr;

	// [start(), end()) is page aligned: pub.addr and pub.length are the
	// cache's own range, not the caller's.
	std::uint64_t start() const { return pub.addr; }
	std::uint64_t end() const { return pub.addr + pub.length; }

	static constexpr std::uint64_t DEAD = 1ULL << 63;
};

// The index.  The search touches starts[] only (one contiguous array of
// keys); ends[] is read for the few candidates; the entry itself only for
// the match (access check and CAS).  Slot i of the three arrays is one
// entry.  One allocation: this header, then the three arrays, exactly
// sized (capacity is fixed at create(); republish counts first).
struct snapshot {
	std::uint64_t *starts;			// sorted
	std::uint64_t *ends;
	entry **ents;
	std::size_t n = 0, cap;
	std::uint64_t max_len = 0;		// longest entry
	snapshot *next_retired = nullptr;

	struct deleter {
		void operator()(snapshot *s) const { destroy(s); }
	};
	using ptr = std::unique_ptr<snapshot, deleter>;

	static ptr create(std::size_t cap);
	static void destroy(snapshot *s);

	std::size_t size() const { return n; }
	void push_back(entry *e)
	{
		// Never past cap: republish_locked() counted the entries.
		starts[n] = e->start();
		ends[n] = e->end();
		ents[n] = e;
		n++;
		max_len = std::max(max_len, e->end() - e->start());
	}

private:
	explicit snapshot(std::size_t c);
	~snapshot() = default;
};

struct alignas(64) stat_shard {
	std::atomic<std::uint64_t> hits{0};
	std::atomic<std::uint64_t> misses{0};
};

} // namespace ummunot::detail

struct ummunot_cache {
public:
	static int create(std::unique_ptr<ummunot_monitor> mon,
			  const ummunot_backend_ops *ops, void *ctx,
			  const ummunot_cache_attr *attr, ummunot_cache **out);
	~ummunot_cache();
	ummunot_cache(const ummunot_cache &) = delete;
	ummunot_cache &operator=(const ummunot_cache &) = delete;

	int get(std::uint64_t addr, std::uint64_t len, int access,
		const ummunot_reg **out);
	int put(const ummunot_reg *reg);
	int poll();
	int flush();
	void stats(struct ummunot_cache_stats *st);
	ummunot_monitor *monitor() { return mon_.get(); }

private:
	using entry = ummunot::detail::entry;
	using snapshot = ummunot::detail::snapshot;

	ummunot_cache() = default;

	entry *lookup(const snapshot *s, std::uint64_t a, std::uint64_t b, int access);
	static bool try_acquire(entry *e);
	int process_events_locked();
	std::size_t drop_all_locked();
	void kill_locked(entry *e);
	void finalize_locked(entry *e);
	void republish_locked(const std::vector<entry *> &add);
	void unregister_locked();
	int make_room_locked(std::uint64_t bytes, std::size_t removed_entries,
			     const std::vector<entry *> &keep);
	int evict_locked(std::uint64_t bytes_target, std::uint64_t entries_target,
			 const std::vector<entry *> &keep);
	int insert_locked(std::uint64_t a, std::uint64_t b, int access, entry **out);
	void reclaim_locked(bool force);
	void publish_locked();
	void link_live_locked(entry *e);
	void unlink_live_locked(entry *e);

	std::unique_ptr<ummunot_monitor> mon_;
	ummunot_backend_ops ops_{};
	void *ctx_ = nullptr;
	std::uint64_t page_ = 4096;
	std::uint64_t max_entries_ = 0, max_pinned_ = 0;

	// Read on the hit path.
	alignas(64) std::atomic<snapshot *> index_{nullptr};
	const __u64 *gen_word_ = nullptr;		// the ring header's generation
	std::atomic<std::uint64_t> seen_gen_{0};	// events up to here processed
	std::atomic<std::uint64_t> lru_tick_{1};

	// Writer state, under mu_.
	alignas(64) std::mutex mu_;
	std::unordered_map<std::uint64_t, entry *> by_handle_;	// watched
	entry *live_ = nullptr;			// registered, not yet deregistered
	std::vector<std::uint64_t> to_unregister_;
	std::vector<entry *> killed_;		// unpublished since the last republish
	entry *retired_entries_ = nullptr;
	snapshot *retired_snaps_ = nullptr;
	std::size_t retired_count_ = 0;
	std::uint64_t next_cookie_ = 1;
	std::uint64_t pinned_ = 0;
	std::uint64_t invalidations_[UMMUNOT_EVENT_TYPE_MAX] = {};
	std::uint64_t evictions_ = 0, resyncs_ = 0, merges_ = 0;
	std::uint64_t registrations_ = 0, deregistrations_ = 0, race_retries_ = 0;

	std::array<ummunot::detail::stat_shard, 32> shards_;
};
