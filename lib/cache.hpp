// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache: the registration cache.  See
// Documentation/library.rst for the design; the short version:
//
//  * The index is a copy-on-write B+tree of the entries' ranges
//    (range_index, lib/index.hpp), published with a release store and read
//    under liburcu-bp's read lock.  Writers (misses, event processing,
//    eviction, invalidation) are serialised by mu_ and copy the path they
//    change, O(log n); replaced nodes and entries are freed only after a
//    grace period (retire lists + rcu_synchronize(), batched by retired
//    bytes, never on the hit path).
//  * Every entry has one atomic word: the number of users, the REFERENCED
//    bit (CLOCK eviction) and the DEAD bit.  A hit is a CAS that fails once
//    DEAD is set; whoever moves the word to DEAD with no users deregisters
//    the entry, so that happens exactly once and never while it is in use.
//  * An entry's memory is retired only when it is both deregistered and
//    out of the published index.  DEAD entries wait on dead_ until they
//    are erased from the index; an erase that cannot allocate leaves them
//    there, unusable by hits (try_acquire() fails) and harmless, for the
//    next publish to retry.
//  * Marking entries DEAD (the event path) allocates nothing; every
//    allocation of a miss comes before the state it would change, or is
//    undone.
//  * Hit counters live in cache-line-sized shards picked by CPU.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <ummunot/ummunot.h>

#include "budget.hpp"
#include "index.hpp"
#include "monitor.hpp"

namespace ummunot::detail {

struct entry {
	ummunot_reg pub{};			// handed out; must stay first
	std::atomic<std::uint64_t> refs{0};	// users | REFERENCED | DEAD
	ummunot_cache *owner = nullptr;		// put() checks it
	// The module's handle while the entry is watched (in_module or
	// pending).  Once DEAD it is no longer needed, and ilink links the
	// entry on the cache's dead_ or unpub_ list (see index_erase_locked()).
	union {
		std::uint64_t handle = 0;
		entry *ilink;
	};
	// Cookies come from a 64-bit counter starting at 1 and never reach
	// 2^58.  The flags change under the cache's mutex only.
	std::uint64_t cookie : 58 = 0;
	std::uint64_t pending : 1 = 0;		// registered, not yet published
	std::uint64_t in_module : 1 = 0;	// handle is registered with the monitor
	std::uint64_t published : 1 = 0;	// in the index (working or published)
	std::uint64_t finalized : 1 = 0;	// deregistered
	std::uint64_t uncached : 1 = 0;		// above max_cached_length: private
	// While registered: the cache's list of registered entries (live_).
	// After finalize_locked(): next is the retire list's link.
	entry *prev = nullptr, *next = nullptr;
	// The caller's private area (priv_size bytes) follows at
	// entry_priv_offset, in the same allocation.

	// [start(), end()) is page aligned: pub.addr and pub.length are the
	// cache's own range, not the caller's.
	std::uint64_t start() const { return pub.addr; }
	std::uint64_t end() const { return pub.addr + pub.length; }

	static constexpr std::uint64_t DEAD = 1ULL << 63;
	static constexpr std::uint64_t REFERENCED = 1ULL << 62;
	static constexpr std::uint64_t COUNT = REFERENCED - 1;
};

// 88 bytes: a 96-byte malloc chunk (Documentation/performance.md counts it).
static_assert(sizeof(entry) == 88);

inline constexpr std::size_t entry_priv_offset = (sizeof(entry) + 15) / 16 * 16;

struct alignas(64) stat_shard {
	std::atomic<std::uint64_t> hits{0};
	std::atomic<std::uint64_t> misses{0};
};

// Both backend flavours: 0.1's ummunot_backend_ops and 0.2's
// ummunot_cache_ops (with the private area).
struct backend {
	int (*reg1)(void *, void *, size_t, int, void **, uint32_t *, uint32_t *) = nullptr;
	int (*dereg1)(void *, void *) = nullptr;
	int (*reg2)(void *, void *, size_t, int, void *, void **, uint32_t *, uint32_t *) = nullptr;
	int (*dereg2)(void *, void *, void *) = nullptr;
	void *ctx = nullptr;

	int reg(void *addr, size_t len, int access, void *priv, void **mr,
		uint32_t *lkey, uint32_t *rkey) const
	{
		return reg2 ? reg2(ctx, addr, len, access, priv, mr, lkey, rkey)
			    : reg1(ctx, addr, len, access, mr, lkey, rkey);
	}
	void dereg(void *mr, void *priv) const
	{
		// A failure leaves nothing we could retry or report to anyone.
		if (dereg2)
			(void)dereg2(ctx, mr, priv);
		else
			(void)dereg1(ctx, mr);
	}
};

} // namespace ummunot::detail

struct ummunot_cache {
public:
	// config is complete (read_ext()ed); ops filled in.
	static int create(std::unique_ptr<ummunot_monitor> mon,
			  const ummunot::detail::backend &be,
			  const ummunot_cache_config &config, ummunot_cache **out);
	// ummunot_cache_destroy(): deletes c, or, in a forked child whose
	// parent had another thread inside c, abandons it (see cache_entry.cpp).
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
	// cache_entry.cpp.
	int check_invariants();

private:
	using entry = ummunot::detail::entry;

	ummunot_cache() = default;

	entry *lookup(std::uint64_t a, std::uint64_t b, int access);
	entry *lookup_locked(std::uint64_t a, std::uint64_t b, int access);
	static bool try_acquire(entry *e);
	entry *new_entry();
	void free_entry(entry *e);
	int process_events_locked();
	void drop_all_locked();
	void kill_locked(entry *e);
	void finalize_locked(entry *e);
	void retire_locked(entry *e);
	bool index_insert_locked(entry *e);
	void index_erase_locked();
	void publish_index_locked();
	std::size_t reclaim_threshold() const;
	void queue_unregister_locked(std::uint64_t handle);
	void unregister_locked();
	bool charge_locked(std::uint64_t bytes);
	void uncharge_locked(std::uint64_t bytes);
	entry *clock_victim_locked(const entry *const *keep, std::size_t nkeep);
	void evict_one_locked(entry *e);
	std::size_t evict_all_locked(const entry *const *keep, std::size_t nkeep);
	int make_room_locked(std::uint64_t bytes, std::size_t removed,
			     const entry *const *keep, std::size_t nkeep);
	int insert_locked(std::uint64_t a, std::uint64_t b, int access, entry **out);
	int insert_uncached_locked(std::uint64_t a, std::uint64_t b, int access, entry **out);
	void reclaim_locked(bool force);
	void publish_locked();
	void link_live_locked(entry *e);
	void unlink_live_locked(entry *e);
	std::uint64_t effective_cap() const;
	void free_all_locked(bool deregister);

	std::unique_ptr<ummunot_monitor> mon_;
	ummunot::detail::backend be_;
	ummunot::detail::budget_ref budget_;	// held from create() on
	std::uint64_t page_ = 4096;
	std::uint64_t max_entries_ = 0, max_pinned_ = 0, max_cached_ = 0;
	std::uint32_t priv_size_ = 0;
	std::uint64_t fork_gen_ = 0;

	// Read on the hit path.
	alignas(64) const __u64 *gen_word_ = nullptr;	// the ring header's generation
	std::atomic<std::uint64_t> seen_gen_{0};	// events up to here processed
	ummunot::detail::range_index index_;	// its root_ shares this line

	// Writer state, under mu_.
	alignas(64) std::mutex mu_;
	std::unordered_map<std::uint64_t, entry *> by_handle_;	// watched
	entry *live_ = nullptr;			// registered, not yet deregistered
	entry *live_tail_ = nullptr;
	entry *hand_ = nullptr;			// CLOCK hand into live_
	entry *pending_ = nullptr;		// being inserted
	std::size_t nr_linked_ = 0;		// entries in live_
	std::size_t nr_live_ = 0;		// published and not DEAD
	std::size_t nr_dead_published_ = 0;	// DEAD, still in the index (dead_)
	entry *dead_ = nullptr;			// DEAD, to be erased from the index
	entry *unpub_ = nullptr;		// erased, still in the published root
	std::array<std::uint64_t, 64> unreg_{};	// handles to UNREGISTER
	std::size_t nr_unreg_ = 0;
	entry *retired_entries_ = nullptr;
	std::size_t retired_entry_bytes_ = 0;
	std::uint64_t next_cookie_ = 1;
	std::uint64_t pinned_ = 0;		// charged: registered or being registered
	std::uint64_t invalidations_[UMMUNOT_EVENT_TYPE_MAX] = {};
	std::uint64_t evictions_ = 0, resyncs_ = 0, merges_ = 0;
	std::uint64_t registrations_ = 0, deregistrations_ = 0, race_retries_ = 0;
	std::uint64_t uncached_ = 0, caller_invalidations_ = 0;

	std::array<ummunot::detail::stat_shard, 32> shards_;
};
