// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The miss, top to bottom: get() found nothing for [a, b) and holds the
// writer section.  miss() below reads in the order it happens:
//
//   1. plan: the range to register, [a, b) merged with the overlapping or
//      adjacent entries of the same access (at most max_merge of them);
//   2. room: charge its bytes, evicting unused entries (CLOCK) until it
//      fits the entry limit, the cache's cap and the budget; if the merged
//      range cannot fit, plan [a, b) alone;
//   3. watch: register the range with the module (an event from here on
//      for every change) and in the handle map;
//   4. pin: the backend's reg();
//   5. check: drain the ring; if the range changed between 3 and 4, undo
//      and retry (race_attempts times), unmerged;
//   6. publish: into the index with one user for the caller; the merged
//      entries are killed.  The writer section's end makes it visible.
//
// A request above max_cached_length takes miss_uncached() instead: a
// private registration, never in the index.
#include "cache.hpp"

#include <algorithm>
#include <cerrno>

using namespace ummunot::detail;

namespace {

inline constexpr unsigned int race_attempts = 3;
// Entries a miss may merge with (more are left alone: the merged range
// would be huge anyway).  A fixed array: merging allocates nothing.
inline constexpr std::size_t max_merge = 16;

// What a miss registers: [start, end), replacing the entries in merged.
struct plan {
	std::uint64_t a, b;		// the request (page aligned)
	std::uint64_t start, end;
	entry *merged[max_merge];
	std::size_t nmerged = 0;

	plan(std::uint64_t a_, std::uint64_t b_) : a(a_), b(b_), start(a_), end(b_) {}
	std::uint64_t bytes() const { return end - start; }
	// Give up the merge: [a, b) alone.  merged keeps its entries as the
	// ones make_room() must not evict (nmerged is what counts).
	void alone()
	{
		nmerged = 0;
		start = a;
		end = b;
	}
};

// Step 1.  Candidates start at or before end and end at or after start:
// the index's interval search (O(log n) a candidate), repeated while the
// union grows.
void plan_merge(entries &es, int access, plan &p)
{
	for (bool grew = true; grew && p.nmerged < max_merge;) {
		grew = false;
		es.for_each_covering(p.end, p.start, [&](entry *e) {
			if (e->pub.access != access ||
			    (e->refs.load(std::memory_order_relaxed) & entry::DEAD) ||
			    std::find(p.merged, p.merged + p.nmerged, e) != p.merged + p.nmerged)
				return false;
			p.merged[p.nmerged++] = e;
			p.start = std::min(p.start, e->start());
			p.end = std::max(p.end, e->end());
			grew = true;
			return p.nmerged == max_merge;
		});
	}
}

} // namespace

// Charge bytes for an entry about to be registered, evicting unused
// entries (never those in keep) until it fits under this cache's cap, the
// budget and max_entries (removed: entries the new one will replace).
int ummunot_cache::make_room(std::uint64_t bytes, std::size_t removed,
			     const entry *const *keep, std::size_t nkeep)
{
	bool refreshed = false;

	for (;;) {
		if (entries_.nr_live() < max_entries_ + removed && pins_.charge(bytes))
			break;
		if (entry *v = entries_.clock_victim(keep, nkeep)) {
			entries_.evict(v);
			continue;
		}
		if (!refreshed) {
			// The limit may have been raised (setrlimit) since.
			pins_.refresh();
			refreshed = true;
			continue;
		}
		entries_.settle();
		return bytes > pins_.cap() ? -E2BIG : -ENOSPC;
	}
	// The evicted out of the index and the module before we add to both.
	entries_.settle();
	return 0;
}

// 3. Watch [e->start(), e->end()): from here on every change produces an
// event.  Nothing to undo on failure.  keep: the entries being merged
// (never evicted to make room in the module).
int ummunot_cache::watch(entry *e, const entry *const *keep, std::size_t nkeep)
{
	ummunot_region rg{};
	rg.start = e->start();
	rg.length = e->pub.length;
	rg.cookie = entries_.new_cookie(e);
	int r = mon_->register_regions(&rg, 1, nullptr);
	if (r == -ENOSPC && entries_.evict_unused(keep, nkeep)) {
		// The module's per-process or per-user limit (not only
		// max_regions, which max_entries stays under): our own unused
		// entries hold regions too.
		entries_.settle();
		r = mon_->register_regions(&rg, 1, nullptr);
	}
	if (r)
		return r;
	if (!entries_.watch(e, rg.handle)) {
		std::uint64_t h = rg.handle;
		(void)mon_->handles_op(UMMUNOT_IOC_UNREGISTER, &h, 1, nullptr);
		return -ENOMEM;
	}
	return 0;
}

// 4. Pin it (the backend's reg).  On failure the watch is undone: e is
// killed, its region unregistered.
int ummunot_cache::pin(entry *e, int access, const entry *const *keep, std::size_t nkeep)
{
	void *mr = nullptr;
	std::uint32_t lkey = 0, rkey = 0;
	void *priv = entries_.priv_of(e);
	auto *addr = reinterpret_cast<void *>(e->start());
	int r = be_.reg(addr, e->pub.length, access, priv, &mr, &lkey, &rkey);
	if (r == -ENOMEM) {
		// The kernel's RLIMIT_MEMLOCK, or memory: make room.
		pins_.refresh();
		entries_.evict_unused(keep, nkeep);
		entries_.settle();
		entries_.clear_priv(e);
		r = be_.reg(addr, e->pub.length, access, priv, &mr, &lkey, &rkey);
	}
	if (r) {
		entries_.kill(e);
		entries_.settle();
		entries_.clear_priv(e);
		return r;
	}
	entries_.registered();
	e->pub.mr = mr;
	e->pub.lkey = lkey;
	e->pub.rkey = rkey;
	return 0;
}

// 5. Did the range change between 3 and 4?  Drain and look.  0: no; 1: it
// did; a negative errno: the drain failed.  Unless 0, the registration and
// the watch are undone.
int ummunot_cache::changed_while_pinned(entry *e)
{
	int r = pump_.drain(entries_);
	if (r > 0)
		r = 0;
	bool dead = e->refs.load(std::memory_order_relaxed) & entry::DEAD;
	if (!r && !dead)
		return 0;
	if (!dead)
		entries_.kill(e);
	entries_.settle();
	entries_.drop_registration(e);
	entries_.clear_priv(e);
	return r ? r : 1;
}

int ummunot_cache::miss(std::uint64_t a, std::uint64_t b, int access, entry **out)
{
	if (b - a > pins_.cap()) {
		pins_.refresh();
		if (b - a > pins_.cap())
			return -E2BIG;
	}

	// 1, 2.  Plan and charge; if the merged range does not fit, the
	// request alone.
	plan p(a, b);
	plan_merge(entries_, access, p);
	int r = p.bytes() <= pins_.cap() ? make_room(p.bytes(), p.nmerged, p.merged, p.nmerged)
					 : -ENOSPC;
	if (r && p.nmerged) {
		p.alone();
		r = make_room(p.bytes(), 0, p.merged, 0);
	}
	if (r)
		return r;
	// From here on p.bytes() are charged.

	entry *e = entries_.make();
	if (!e) {
		pins_.uncharge(p.bytes());
		return -ENOMEM;
	}
	e->pub.access = access;
	auto fail = [&](int err, bool charged) {
		if (charged)
			pins_.uncharge(p.bytes());
		entries_.free_new(e);
		return err;
	};
	// Used when the merged range could not be pinned (a neighbour was
	// unmapped after the drain: its pages are gone, ours are not) or
	// changed while being pinned (a retry of the union would pin the same
	// stale neighbour again).
	auto unmerge = [&]() {
		pins_.uncharge(p.bytes());
		p.alone();
		return make_room(p.bytes(), 0, p.merged, 0);
	};

	for (unsigned int attempt = 0;;) {
		e->pub.addr = p.start;
		e->pub.length = p.bytes();
		e->refs.store(0, std::memory_order_relaxed);
		if ((r = watch(e, p.merged, p.nmerged)))		// 3
			return fail(r, true);
		if ((r = pin(e, access, p.merged, p.nmerged))) {	// 4
			if (!p.nmerged)
				return fail(r, true);
			// Whatever the error, the request alone may still pin.
			if ((r = unmerge()))
				return fail(r, false);
			continue;
		}
		r = changed_while_pinned(e);			// 5
		if (r == 0)
			break;
		if (r < 0)
			return fail(r, true);
		race_retries_++;
		if (++attempt == race_attempts)
			return fail(-EAGAIN, true);
		if (p.nmerged && (r = unmerge()))
			return fail(r, false);
	}

	// 6. Publish, holding one reference for the caller, and kill the
	// entries it absorbed: the writer section's end publishes the index
	// once, so readers go from the old entries to the merged one.
	if (!entries_.publish_new(e)) {
		entries_.kill(e);	// still pending: the handle map and module only
		entries_.settle();
		entries_.drop_registration(e);
		return fail(-ENOMEM, true);
	}
	for (std::size_t i = 0; i < p.nmerged; i++)
		if (!(p.merged[i]->refs.load(std::memory_order_relaxed) & entry::DEAD))
			entries_.kill_merged(p.merged[i]);
	*out = e;
	return 0;
}

int ummunot_cache::miss_uncached(std::uint64_t a, std::uint64_t b, int access, entry **out)
{
	int r = make_room(b - a, 0, nullptr, 0);
	if (r)
		return r;
	entry *e = entries_.make();
	if (!e) {
		pins_.uncharge(b - a);
		return -ENOMEM;
	}
	e->pub.addr = a;
	e->pub.length = b - a;
	e->pub.access = access;
	void *mr = nullptr;
	std::uint32_t lkey = 0, rkey = 0;
	r = be_.reg(reinterpret_cast<void *>(a), b - a, access, entries_.priv_of(e), &mr,
		    &lkey, &rkey);
	if (r) {
		pins_.uncharge(b - a);
		entries_.free_new(e);
		return r;
	}
	e->pub.mr = mr;
	e->pub.lkey = lkey;
	e->pub.rkey = rkey;
	// Born DEAD with one user: never found by a lookup, deregistered by
	// its put.
	entries_.add_uncached(e);
	*out = e;
	return 0;
}
