// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The registration cache's entries: what an entry is, and the one part that
// owns every entry from its birth to its free (Documentation/library.rst,
// "The parts of the cache").
//
//  * entry: one registration.  One atomic word (refs) holds the number of
//    users, the REFERENCED bit (CLOCK) and the DEAD bit.  A hit is a CAS
//    that fails once DEAD is set; whoever moves the word to DEAD with no
//    users deregisters the entry, so that happens exactly once and never
//    while it is in use.
//  * entries: the index of their ranges (range_index, read by hits under
//    RCU), the handle map (module handle -> entry, for events), the live
//    list (registered, not yet deregistered: the CLOCK's and the
//    destructor's), the lists of dead entries on their way out of the
//    index, the retire list, and the batch of module handles to unregister.
//    Life cycle: make -> (watch) -> publish -> kill -> finalize -> retire ->
//    reclaim.  An entry's memory is retired only when it is both
//    deregistered and out of the published index.  Marking entries DEAD
//    allocates nothing.
//
// Called by the cache (the miss, invalidate, flush, get, put) and by the
// event pump (kill_event(), kill_all()); it calls only the backend, the pin
// budget (uncharge) and the monitor (UNREGISTER).  Every member function
// but the hit's find() runs under the cache's mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include <ummunot/ummunot.h>

#include "index.hpp"
#include "pin_budget.hpp"

struct ummunot_monitor;

namespace ummunot::detail {

// struct ummunot_reg's resv word in a registration: a check of the
// struct's own address (never 0), so that put() tells a registration from a
// copy of it elsewhere, or from memory that holds none, without reading
// past struct ummunot_reg.  A copy passes only if its address hashes to the
// same 32 bits (2^-32).
inline std::uint32_t reg_tag(const ummunot_reg *r)
{
	std::uint64_t x = reinterpret_cast<std::uintptr_t>(r) * 0x9e3779b97f4a7c15ull;
	return static_cast<std::uint32_t>(x >> 32) | 1;
}

struct entry {
	ummunot_reg pub{};			// handed out; must stay first
	std::atomic<std::uint64_t> refs{0};	// users | REFERENCED | DEAD
	ummunot_cache *owner = nullptr;		// put() checks it
	// The module's handle while the entry is watched (in_module or
	// pending).  Once DEAD it is no longer needed, and ilink links the
	// entry on the dead_ or unpub_ list (see entries::publish_index()).
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
	// While registered: the live list.  After finalize(): next is the
	// retire list's link.
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

	// The hit's acquire: one CAS, refused once DEAD.
	[[gnu::always_inline]] bool try_acquire()
	{
		std::uint64_t v = refs.load(std::memory_order_relaxed);

		do {
			if (v & DEAD)
				return false;
		} while (!refs.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
						     std::memory_order_relaxed));
		return true;
	}
};

// 88 bytes: a 96-byte malloc chunk (bench/cache-mem counts it).
static_assert(sizeof(entry) == 88);

inline constexpr std::size_t entry_priv_offset = (sizeof(entry) + 15) / 16 * 16;

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

class entries {
public:
	// Counters, read by stats and copied into the user area.
	struct counts {
		std::uint64_t registrations = 0, deregistrations = 0;
		std::uint64_t evictions = 0, merges = 0, uncached = 0;
	};

	entries(ummunot_cache *owner, const backend &be, pin_budget &pins,
		std::uint32_t priv_size)
		: owner_(owner), be_(be), pins_(pins), priv_size_(priv_size)
	{
	}
	~entries();
	entries(const entries &) = delete;
	entries &operator=(const entries &) = delete;

	// The monitor UNREGISTERs go to (set once, by create()).  false: out
	// of memory for the index.
	bool init(ummunot_monitor *mon);

	// --- the hit, inside an RCU read-side critical section ------------
	// An entry containing [a, b) with the access, acquired.
	[[gnu::always_inline]] entry *find(std::uint64_t a, std::uint64_t b, int access)
	{
		return index_.find(a, b, [access](entry *e) {
			return (e->pub.access & access) == access && e->try_acquire();
		});
	}

	// --- everything else: under the cache's mutex ---------------------
	// The same in the working index.
	entry *find_locked(std::uint64_t a, std::uint64_t b, int access)
	{
		return index_.find_working(a, b, [access](entry *e) {
			return (e->pub.access & access) == access && e->try_acquire();
		});
	}
	// Every entry of the working index with start <= s and end >= e, until
	// f returns true.
	template <class F>
	void for_each_covering(std::uint64_t s, std::uint64_t e, F &&f) const
	{
		index_.find_working(s, e, f);
	}

	// A new entry (zeroed private area), or nullptr.  free_new() undoes it
	// while it was never watched or registered.
	entry *make();
	void free_new(entry *e)
	{
		if (pending_ == e)
			pending_ = nullptr;
		free_entry(e);
	}
	// e's private area (nullptr without one), and zeroing it.
	void *priv_of(entry *e) const;
	void clear_priv(entry *e);

	// The miss's entry: watched by the module under handle (false, nothing
	// changed: out of memory), then registered (counted), then published
	// with one user.  publish_new() fails (false) only when out of memory.
	std::uint64_t new_cookie(entry *e)
	{
		e->cookie = next_cookie_++;
		return e->cookie;
	}
	bool watch(entry *e, std::uint64_t handle);
	void registered() { counts_.registrations++; }
	bool publish_new(entry *e);
	// A registration the miss gave up on (after kill()): deregistered now.
	void drop_registration(entry *e);
	// A private registration (above max_cached_length): born DEAD with one
	// user, never in the index; deregistered by its put.
	void add_uncached(entry *e);

	// Mark e DEAD (no new users) and forget its handle (the UNREGISTER is
	// queued); deregistered at once if nobody uses it.  Allocates nothing.
	void kill(entry *e);
	// Merged away into a new entry.
	void kill_merged(entry *e)
	{
		kill(e);
		counts_.merges++;
	}
	// The event pump: the region (handle, cookie) changed.  false: not
	// ours (already unregistered, or an older cookie).
	bool kill_event(std::uint64_t handle, std::uint64_t cookie);
	// The event pump after an overflow: every cached entry, and the one
	// being inserted (its miss sees that and retries).
	void kill_all();
	// put(): e's last user left and it is DEAD.
	void finalize(entry *e);

	// Eviction.  The CLOCK's victim (never one in keep), moved to DEAD with
	// no users, or nullptr; evict() finishes it.  evict_unused(): every
	// unused entry not in keep; returns how many.
	entry *clock_victim(const entry *const *keep, std::size_t nkeep);
	void evict(entry *e);
	std::size_t evict_unused(const entry *const *keep, std::size_t nkeep);

	// Make the index changes visible to hits (DEAD entries erased, the
	// working index published) and send the queued UNREGISTERs.  Every
	// writer section ends with it (ummunot_cache::writer).
	void settle();
	// Free what was retired, after a grace period, when enough has piled
	// up (force: anything at all, and the index's spare nodes).  In two
	// steps, so that the grace period is waited for without the writer's
	// lock (other threads' writer sections go on meanwhile):
	// take_reclaim() detaches what is due (nothing while another thread's
	// batch is out, unless forced); finish_reclaim(), under the lock
	// again after a grace period, frees it.
	struct reclaim_batch {
		entry *entries = nullptr;
		std::size_t entry_bytes = 0;
		range_index::retired_batch nodes;
		bool force = false;
		explicit operator bool() const { return entries || nodes.list; }
	};
	reclaim_batch take_reclaim(bool force);
	void finish_reclaim(reclaim_batch &b);
	// Destruction: everything goes (deregister: the backend's too).
	void free_all(bool deregister);

	std::size_t nr_live() const { return nr_live_; }
	const counts &count() const { return counts_; }
	// Tests: 0 if every invariant holds, else a line number in
	// entries.cpp.
	int check(const pin_budget &pins) const;

private:
	void free_entry(entry *e);
	void index_erase_dead();
	void publish_index();
	void retire(entry *e);
	void unregister_queued();
	void queue_unregister(std::uint64_t handle);
	void link_live(entry *e);
	void unlink_live(entry *e);
	void forget_handle(entry *e);
	std::size_t entry_bytes() const;
	std::size_t reclaim_threshold() const;

	// The hit reads index_ (its published root) only.
	range_index index_;

	ummunot_cache *const owner_;
	const backend &be_;
	pin_budget &pins_;
	const std::uint32_t priv_size_;
	ummunot_monitor *mon_ = nullptr;

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
	entry *retired_ = nullptr;
	std::size_t retired_bytes_ = 0;
	unsigned int batches_out_ = 0;		// taken, not finished
	std::uint64_t next_cookie_ = 1;
	counts counts_;
};

} // namespace ummunot::detail
