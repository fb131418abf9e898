// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache, event processing: draining the ring, overflow and resync, the
// module's UNREGISTER batches, poll, and the counters (stats, user area).
// See lib/cache.hpp and Documentation/library.rst.
#include "cache.hpp"

#include <cerrno>

#include "cache_impl.hpp"
#include "ring.hpp"

using namespace ummunot::detail;
using namespace ummunot::detail::cache_impl;

void ummunot_cache::queue_unregister_locked(std::uint64_t handle)
{
	if (nr_unreg_ == unreg_.size())
		unregister_locked();
	unreg_[nr_unreg_++] = handle;
}

void ummunot_cache::unregister_locked()
{
	if (!nr_unreg_)
		return;
	// Failure would only leave a quiet region behind in the module: its
	// one event names a handle we no longer know and is ignored.
	(void)mon_->handles_op(UMMUNOT_IOC_UNREGISTER, unreg_.data(),
			       static_cast<unsigned int>(nr_unreg_), nullptr);
	nr_unreg_ = 0;
}

// Kill everything: after an overflow nothing the cache knows can be
// trusted.  The entry being inserted (pending_) is killed too; its insert
// sees that and retries.
void ummunot_cache::drop_all_locked()
{
	for (entry *e = live_; e;) {
		entry *n = e->next;	// kill_locked() may unlink e, not n
		if (!e->uncached)
			kill_locked(e);
		e = n;
	}
	if (pending_)
		kill_locked(pending_);
}

int ummunot_cache::process_events_locked()
{
	int total = 0;
	bool published = true;

	for (;;) {
		// (F) before (C) inside consume(): if we empty the ring, every
		// event published up to generation g has been processed.
		std::uint64_t g = mon_->generation();
		bool complete = false;
		int n = mon_->consume(drain_batch, &complete, [&](const ummunot_event &ev) {
			auto it = by_handle_.find(ev.handle);
			// Unknown handle or other cookie: an event for a region we
			// already unregistered, still in the ring.  Ignore.
			if (it == by_handle_.end() || it->second->cookie != ev.cookie)
				return;
			if (ev.type < UMMUNOT_EVENT_TYPE_MAX)
				invalidations_[ev.type]++;
			kill_locked(it->second);
		});
		if (n == -EOVERFLOW) {
			// RESYNC first, then drop everything.  A failed RESYNC
			// changes nothing: the next call tries again.
			int r = mon_->resync(nullptr);
			if (r)
				return r;
			// Index 0: invalidated by the library itself (the
			// entry being added is not counted, it is retried).
			invalidations_[0] += nr_live_;
			drop_all_locked();
			resyncs_++;
			published = false;
			continue;
		}
		if (n < 0)
			return n;
		total += n;
		if (complete) {
			// Out of memory here is harmless: the DEAD entries stay
			// in the index, unusable, until a later publish.
			publish_index_locked();
			unregister_locked();
			// Pairs with the acquire in get().
			seen_gen_.store(g, std::memory_order_release);
			mon_->mark_seen(g);
			if (total || !published)
				publish_locked();
			return total;
		}
	}
}

int ummunot_cache::poll()
{
	if (forked())
		return -ECHILD;
	std::lock_guard<std::mutex> g(mu_);
	int r = process_events_locked();
	reclaim_locked(false);
	publish_locked();
	return r;
}

int ummunot_cache::stats(struct ummunot_cache_stats_ext *st)
{
	if (forked())
		return -ECHILD;
	std::lock_guard<std::mutex> g(mu_);

	*st = {};
	for (auto &sh : shards_) {
		st->hits += sh.hits.load(std::memory_order_relaxed);
		st->misses += sh.misses.load(std::memory_order_relaxed);
	}
	for (unsigned int i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		st->invalidations[i] = invalidations_[i];
	st->evictions = evictions_;
	st->resyncs = resyncs_;
	st->merges = merges_;
	st->registrations = registrations_;
	st->deregistrations = deregistrations_;
	st->race_retries = race_retries_;
	st->entries = nr_live_;
	st->pinned_bytes = pinned_;
	st->max_pinned_bytes = effective_cap();
	st->max_entries = max_entries_;
	st->uncached = uncached_;
	st->caller_invalidations = caller_invalidations_;
	st->budget_limit = budget_->limit();
	st->budget_used = budget_->used();
	publish_locked();
	return 0;
}

// Copy the counters into the ring's user area (include/ummunot/user_area.h),
// one relaxed 64-bit store per word: readers (fdinfo) promise no
// consistency across words.  Only slow paths call this; hits and misses
// are summed from the shards here, so the published hits lag until the
// next slow-path operation (Documentation/library.rst).
void ummunot_cache::publish_locked()
{
	ummunot_user_area *ua = mon_->user_area();

	if (!ua)
		return;
	std::uint64_t hits = 0, misses = 0;
	for (auto &sh : shards_) {
		hits += sh.hits.load(std::memory_order_relaxed);
		misses += sh.misses.load(std::memory_order_relaxed);
	}
	ring_store_relaxed(&ua->hits, hits);
	ring_store_relaxed(&ua->misses, misses);
	for (unsigned int i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		ring_store_relaxed(&ua->invalidations[i], invalidations_[i]);
	ring_store_relaxed(&ua->evictions, evictions_);
	ring_store_relaxed(&ua->resyncs, resyncs_);
	ring_store_relaxed(&ua->pinned_bytes, pinned_);
	ring_store_relaxed(&ua->entries, nr_live_);
	ring_store_relaxed(&ua->registrations, registrations_);
	ring_store_relaxed(&ua->deregistrations, deregistrations_);
}
