// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache, eviction and limits: charging the pinned bytes to the cache and its
// budget, CLOCK, evicting to make room, flush.
// See lib/cache.hpp and Documentation/library.rst.
#include "cache.hpp"

#include <cerrno>

#include "cache_impl.hpp"

using namespace ummunot::detail;
using namespace ummunot::detail::cache_impl;

bool ummunot_cache::charge_locked(std::uint64_t bytes)
{
	if (bytes > max_pinned_ || pinned_ > max_pinned_ - bytes)
		return false;
	if (!budget_->try_charge(bytes))
		return false;
	pinned_ += bytes;
	return true;
}

void ummunot_cache::uncharge_locked(std::uint64_t bytes)
{
	pinned_ -= bytes;
	budget_->uncharge(bytes);
}

// CLOCK (second chance): the hand sweeps live_; an entry put back since the
// hand last passed has REFERENCED set and gets it cleared; the first unused
// entry without it is the victim.  Two sweeps at most; amortised O(1): every
// cleared bit was set by a put.  Only atomic CAS on refs: a concurrent hit
// or put makes the CAS fail and the entry is passed over.
entry *ummunot_cache::clock_victim_locked(const entry *const *keep, std::size_t nkeep)
{
	for (std::size_t visits = 2 * nr_linked_ + 2; visits--;) {
		entry *e = hand_ ? hand_ : live_;
		if (!e)
			return nullptr;
		hand_ = e->next;
		if (e->uncached || contains(keep, nkeep, e))
			continue;
		std::uint64_t v = e->refs.load(std::memory_order_relaxed);
		if (v & (entry::DEAD | entry::COUNT))
			continue;
		if (v & entry::REFERENCED) {
			e->refs.compare_exchange_strong(v, v & ~entry::REFERENCED,
							std::memory_order_relaxed);
			continue;
		}
		if (e->refs.compare_exchange_strong(v, entry::DEAD, std::memory_order_acq_rel))
			return e;
	}
	return nullptr;
}

// e was just moved from 0 to DEAD by clock_victim_locked().
void ummunot_cache::evict_one_locked(entry *e)
{
	by_handle_.erase(e->handle);
	queue_unregister_locked(e->handle);
	e->in_module = false;
	nr_live_--;
	nr_dead_published_++;
	e->ilink = dead_;
	dead_ = e;
	finalize_locked(e);
	evictions_++;
}

std::size_t ummunot_cache::evict_all_locked(const entry *const *keep, std::size_t nkeep)
{
	std::size_t n = 0;

	for (entry *e = live_; e;) {
		entry *next = e->next;	// evicting e unlinks e, not next
		std::uint64_t v = e->refs.load(std::memory_order_relaxed);
		// The CAS fails if a reader took it since we looked: it stays.
		if (!e->uncached && !contains(keep, nkeep, e) &&
		    !(v & (entry::DEAD | entry::COUNT)) &&
		    e->refs.compare_exchange_strong(v, entry::DEAD, std::memory_order_acq_rel)) {
			evict_one_locked(e);
			n++;
		}
		e = next;
	}
	publish_index_locked();
	unregister_locked();
	return n;
}

// Charge bytes for an entry about to be registered, evicting unused
// entries (never those in keep) until it fits under this cache's cap, the
// budget and max_entries (removed: entries the new one will replace).
int ummunot_cache::make_room_locked(std::uint64_t bytes, std::size_t removed,
				    const entry *const *keep, std::size_t nkeep)
{
	bool refreshed = false;
	int r = 0;

	for (;;) {
		if (nr_live_ < max_entries_ + removed && charge_locked(bytes))
			break;
		if (entry *v = clock_victim_locked(keep, nkeep)) {
			evict_one_locked(v);
			continue;
		}
		if (!refreshed) {
			// The limit may have been raised (setrlimit) since.
			budget_->refresh();
			refreshed = true;
			continue;
		}
		r = bytes > effective_cap() ? -E2BIG : -ENOSPC;
		break;
	}
	publish_index_locked();
	unregister_locked();
	return r;
}

int ummunot_cache::flush()
{
	if (forked())
		return -ECHILD;
	std::lock_guard<std::mutex> g(mu_);
	int r = process_events_locked();
	if (r < 0)
		return r;
	std::uint64_t before = evictions_;
	evict_all_locked(nullptr, 0);
	reclaim_locked(true);
	publish_locked();
	return static_cast<int>(evictions_ - before);
}
