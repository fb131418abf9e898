// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache, the index: the hit (get), lookups, and the changes to the index that
// publish_index_locked() makes visible; invalidation of a range.
// See lib/cache.hpp and Documentation/library.rst.
#include "cache.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define UMMUNOT_HAVE_RSEQ 1
#else
#define UMMUNOT_HAVE_RSEQ 0
#endif

#include "cache_impl.hpp"
#include "rcu.hpp"
#include "ring.hpp"

using namespace ummunot::detail;
using namespace ummunot::detail::cache_impl;

namespace {

// The hit counters' shard: the CPU we run on, read from the thread's rseq
// area that glibc (2.35+) registers, one load; no thread-local storage of
// our own and no system call (sched_getcpu() costs about 10 ns here).  Any
// value is correct: the counters are atomic, sharding only spreads the
// cache lines.  Without rseq every thread uses shard 0.
unsigned int shard_index()
{
#if UMMUNOT_HAVE_RSEQ
	if (__rseq_size >= offsetof(struct rseq, cpu_id) + sizeof(__u32)) {
		const auto *r = reinterpret_cast<const struct rseq *>(
			static_cast<const char *>(__builtin_thread_pointer()) + __rseq_offset);
		// The kernel stores cpu_id on every return to this thread.
		auto c = static_cast<std::int32_t>(__atomic_load_n(&r->cpu_id, __ATOMIC_RELAXED));
		return c > 0 ? static_cast<unsigned int>(c) : 0;
	}
#endif
	return 0;
}

} // namespace

[[gnu::always_inline]] inline bool ummunot_cache::try_acquire(entry *e)
{
	std::uint64_t v = e->refs.load(std::memory_order_relaxed);

	do {
		if (v & entry::DEAD)
			return false;
	} while (!e->refs.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
						std::memory_order_relaxed));
	return true;
}

// The hit: inside an RCU read-side critical section, in the published
// index, an entry containing [a, b) with the access, that we could
// acquire.  Candidates start at or before a and end at or after b.
entry *ummunot_cache::lookup(std::uint64_t a, std::uint64_t b, int access)
{
	return index_.find(a, b, [access](entry *e) {
		return (e->pub.access & access) == access && try_acquire(e);
	});
}

// The same under mu_, in the working index.
entry *ummunot_cache::lookup_locked(std::uint64_t a, std::uint64_t b, int access)
{
	return index_.find_working(a, b, [access](entry *e) {
		return (e->pub.access & access) == access && try_acquire(e);
	});
}

int ummunot_cache::get(std::uint64_t addr, std::uint64_t len, int access,
		       const ummunot_reg **out)
{
	if (forked())
		return -ECHILD;
	if (!out || len == 0 || access < 0 || addr + len < addr)
		return -EINVAL;
	std::uint64_t a = addr & ~(page_ - 1);
	std::uint64_t b = (addr + len + page_ - 1) & ~(page_ - 1);
	if (b < addr + len)
		return -EINVAL;

	stat_shard &sh = shards_[shard_index() % shards_.size()];
	entry *e = nullptr;
	if (!max_cached_ || b - a <= max_cached_) {
		// (F): pairs with the producer's (E) (the same load as
		// ummunot_monitor::generation(), without the pointer chase).
		// seen_gen_'s acquire pairs with the release in
		// process_events_locked(): if it equals the ring's generation,
		// every event up to there has been processed and its entries
		// are DEAD.
		if (ring_load_acquire(gen_word_) != seen_gen_.load(std::memory_order_acquire)) {
			std::lock_guard<std::mutex> g(mu_);
			int r = process_events_locked();
			if (r < 0)
				return r;
		}

		rcu_read_lock();
		// The root's acquire (in range_index::find()) pairs with the
		// release store in range_index::publish().
		e = lookup(a, b, access);
		rcu_read_unlock();
		if (e) {
			sh.hits.fetch_add(1, std::memory_order_relaxed);
			*out = &e->pub;
			return 0;
		}
	}

	std::lock_guard<std::mutex> g(mu_);
	int r = process_events_locked();
	if (r < 0)
		return r;
	if (max_cached_ && b - a > max_cached_) {
		r = insert_uncached_locked(a, b, access, &e);
	} else {
		// Another thread may have added it meanwhile; under mu_ the
		// working index cannot change under us.
		e = lookup_locked(a, b, access);
		if (e) {
			sh.hits.fetch_add(1, std::memory_order_relaxed);
			r = 0;
		} else {
			sh.misses.fetch_add(1, std::memory_order_relaxed);
			r = insert_locked(a, b, access, &e);
		}
	}
	reclaim_locked(false);
	publish_locked();
	if (r)
		return r;
	*out = &e->pub;
	return 0;
}

// Add e to the working index.  false, changing nothing, when out of
// memory.
bool ummunot_cache::index_insert_locked(entry *e)
{
	if (!index_.reserve())
		return false;
	index_.insert(e->start(), e->end(), e);
	e->published = true;
	return true;
}

// Erase the DEAD entries on dead_ from the working index: O(log n) each,
// and a node changed twice before the next publish is copied once.  Out of
// memory stops the walk: the rest stay in the index, unusable by hits and
// harmless, for the next call.
void ummunot_cache::index_erase_locked()
{
	while (entry *e = dead_) {
		if (!index_.reserve())
			return;
		dead_ = e->ilink;
		bool found = index_.erase(e->start(), e);
		(void)found;	// check_invariants() counts dead_ against the index
		nr_dead_published_--;
		// Still reachable from the published root: see below.
		e->ilink = unpub_;
		unpub_ = e;
	}
}

// Make the working index the published one.  The entries erased since the
// last publish are then out of every index a new reader can find; those
// already deregistered are retired (readers that loaded the old root may
// still look at them until a grace period has passed).
void ummunot_cache::publish_index_locked()
{
	index_erase_locked();
	index_.publish();
	while (entry *e = unpub_) {
		unpub_ = e->ilink;
		e->ilink = nullptr;
		e->published = false;
		if (e->finalized)
			retire_locked(e);
	}
}

int ummunot_cache::invalidate(std::uint64_t addr, std::uint64_t len)
{
	if (forked())
		return -ECHILD;
	if (len == 0 || addr + len < addr)
		return -EINVAL;
	std::lock_guard<std::mutex> g(mu_);
	std::uint64_t end = addr + len;
	int n = 0;
	// Entries overlapping [addr, end): start <= end - 1 and end >= addr + 1.
	// kill_locked() changes no index node, so the walk is undisturbed; k
	// entries cost O(k log n) here and in the erase.
	index_.find_working(end - 1, addr + 1, [&](entry *e) {
		if (e->refs.load(std::memory_order_relaxed) & entry::DEAD)
			return false;
		kill_locked(e);
		caller_invalidations_++;
		n++;
		return false;
	});
	publish_index_locked();
	unregister_locked();
	reclaim_locked(false);
	publish_locked();
	return n;
}
