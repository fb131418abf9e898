// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache, an entry's life: creation of the cache, the miss (insert_locked), put,
// kill, deregistration, retirement and reclamation after a grace period,
// the live_ list, destruction, and the invariants the tests check.
// See lib/cache.hpp and Documentation/library.rst.
#include "cache.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <unistd.h>

#include "cache_impl.hpp"
#include "rcu.hpp"
#include "ring.hpp"

using namespace ummunot::detail;
using namespace ummunot::detail::cache_impl;

int ummunot_cache::create(std::unique_ptr<ummunot_monitor> mon, const backend &be,
			  const ummunot_cache_config &cfg, ummunot_cache **out)
{
	std::unique_ptr<ummunot_cache> c(new (std::nothrow) ummunot_cache);
	if (!c)
		return -ENOMEM;
	fork_handlers_install();
	c->fork_gen_ = fork_gen_now();
	c->be_ = be;
	c->priv_size_ = cfg.priv_size;
	long pg = ::sysconf(_SC_PAGESIZE);
	c->page_ = pg > 0 ? static_cast<std::uint64_t>(pg) : 4096;

	std::uint64_t regions = mon->hello().max_regions;
	if (regions < 2)
		return -EPROTO;		// one slot is needed for the entry being added
	std::uint64_t me = cfg.max_entries ? cfg.max_entries : default_max_entries;
	c->max_entries_ = std::min(me, regions - 1);
	c->max_pinned_ = cfg.max_pinned_bytes ? cfg.max_pinned_bytes : UINT64_MAX;
	c->max_cached_ = cfg.max_cached_length;
	c->budget_ = budget_ref(cfg.budget ? *cfg.budget : ummunot_budget::process_default());
	if (c->effective_cap() < c->page_)
		return -ENOMEM;

	if (!c->index_.init())
		return -ENOMEM;
	c->seen_gen_.store(mon->generation(), std::memory_order_relaxed);
	c->mon_ = std::move(mon);
	c->mon_->set_owned();
	c->gen_word_ = c->mon_->generation_word();
	if (ummunot_user_area *ua = c->mon_->user_area()) {
		// Version and the (zero) counters first, magic last: a reader
		// that sees the magic sees a user area in our format.  The
		// reader is the kernel printing fdinfo with plain loads, so the
		// release below pairs with nothing in userspace; it only keeps
		// the compiler and CPU from moving the magic before the rest.
		ring_store_relaxed(&ua->version, UMMUNOT_USER_AREA_VERSION);
		std::lock_guard<std::mutex> g(c->mu_);
		c->publish_locked();
		ring_store_release(&ua->magic, UMMUNOT_USER_AREA_MAGIC);
	}
	*out = c.release();
	return 0;
}

// The limit a single registration must fit under.
std::uint64_t ummunot_cache::effective_cap() const
{
	return std::min(max_pinned_, budget_->limit());
}

void ummunot_cache::destroy(ummunot_cache *c)
{
	if (!c)
		return;
	if (c->forked()) {
		// In a forked child.  If another thread of the parent held mu_
		// at the fork, any structure (lists, the index, the handle map,
		// the retire lists) may be half-way through a change, and every
		// destructor would walk it.  Touch none of it: close the
		// descriptor (else the parent's regions would live on until
		// this child exits) and leave the memory, a leak of the cache's
		// size at the fork, in this child only.
		if (!c->mu_.try_lock()) {
			if (int fd = c->fd(); fd >= 0)
				::close(fd);
			return;
		}
		c->mu_.unlock();
	}
	delete c;
}

ummunot_cache::~ummunot_cache()
{
	std::lock_guard<std::mutex> g(mu_);
	// In a forked child (destroy() made sure that no thread of the
	// parent was inside) the registrations are the parent's: never
	// deregister them here; the ring is not mapped.  Otherwise, putting a
	// registration back after destroy is a caller bug (documented);
	// entries still held are deregistered anyway so that nothing stays
	// pinned.  The regions go away with the file.
	free_all_locked(!forked());
}

// Everything goes.  No reader can be inside the index (destroy must not
// race with other calls), so memory is freed now: first what only live_
// reaches, then what the index reaches, then the retire lists (the index
// frees its own nodes).
void ummunot_cache::free_all_locked(bool deregister)
{
	// Entries on unpub_ are out of the index: settle them first.
	publish_index_locked();
	for (entry *e = live_; e;) {
		entry *n = e->next;
		if (deregister && !e->finalized) {
			be_.dereg(e->pub.mr, priv(&e->pub));
			uncharge_locked(e->pub.length);
		}
		if (!e->published)
			free_entry(e);
		e = n;
	}
	live_ = live_tail_ = nullptr;
	index_.for_each([this](std::uint64_t, std::uint64_t, entry *e) { free_entry(e); });
	for (entry *e = retired_entries_; e;) {
		entry *n = e->next;
		free_entry(e);
		e = n;
	}
}

entry *ummunot_cache::new_entry()
{
	// Without a private area, exactly the entry (88 bytes: a 96-byte
	// malloc chunk; rounding up to the area's offset would cost 112).
	std::size_t sz = priv_size_ ? entry_priv_offset + priv_size_ : sizeof(entry);
	// operator new's default alignment covers the private area's 16
	// bytes; the aligned overload would round 88 up to 96 (a 112-byte
	// chunk).
	static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= 16 && entry_priv_offset % 16 == 0);
	void *mem = ::operator new(sz, std::nothrow);

	if (!mem)
		return nullptr;
	auto *e = new (mem) entry;
	e->owner = this;
	if (priv_size_)
		std::memset(static_cast<unsigned char *>(mem) + entry_priv_offset, 0, priv_size_);
	return e;
}

void ummunot_cache::free_entry(entry *e)
{
	e->~entry();
	::operator delete(static_cast<void *>(e));
}

void *ummunot_cache::priv(const ummunot_reg *reg)
{
	const auto *e = reinterpret_cast<const entry *>(reg);

	if (!e->owner->priv_size_)
		return nullptr;
	return const_cast<unsigned char *>(reinterpret_cast<const unsigned char *>(e)) +
	       entry_priv_offset;
}

int ummunot_cache::put(const ummunot_reg *reg)
{
	if (forked())
		return -ECHILD;
	if (!reg)
		return -EINVAL;
	// What can be refused from struct ummunot_reg alone, before reading
	// past it: a registration is an allocation of its own (aligned as
	// operator new aligns) and names a non-empty page-aligned range with
	// resv 0.  Anything else that passes (a copy of a registration, freed
	// memory) is undefined: we read owner below (ummunot_cache_put(3)).
	if (reinterpret_cast<std::uintptr_t>(reg) % __STDCPP_DEFAULT_NEW_ALIGNMENT__ ||
	    !reg->length || ((reg->addr | reg->length) & (page_ - 1)) || reg->resv)
		return -EINVAL;
	// pub is the first member of the standard-layout entry.
	entry *e = reinterpret_cast<entry *>(const_cast<ummunot_reg *>(reg));
	if (e->owner != this)
		return -EINVAL;

	// One CAS: drop our use and mark the entry recently used (CLOCK).  A
	// count of 0 means "not held": refuse without changing anything, so
	// nobody ever sees a transient count.  Release: our use of the
	// registration happens before whoever deregisters it; acquire: if we
	// are that one, we see the others' uses.
	std::uint64_t v = e->refs.load(std::memory_order_relaxed), nv;
	do {
		if ((v & entry::COUNT) == 0)
			return -EINVAL;
		nv = (v - 1) | entry::REFERENCED;
	} while (!e->refs.compare_exchange_weak(v, nv, std::memory_order_acq_rel,
						std::memory_order_relaxed));
	if ((nv & ~entry::REFERENCED) == entry::DEAD) {
		std::lock_guard<std::mutex> g(mu_);
		finalize_locked(e);
		reclaim_locked(false);
		publish_locked();
	}
	return 0;
}

// Mark e dead (no new users), forget its handle.  Indexed entries wait on
// dead_ for the next publish_index_locked() to erase them; if nobody uses e
// it is deregistered at once.  Allocates nothing.
void ummunot_cache::kill_locked(entry *e)
{
	std::uint64_t old = e->refs.fetch_or(entry::DEAD, std::memory_order_acq_rel);

	if (old & entry::DEAD)
		return;
	by_handle_.erase(e->handle);
	if (e->in_module) {
		queue_unregister_locked(e->handle);
		e->in_module = false;
	}
	if (e->pending)
		return;			// insert_locked() cleans up
	nr_live_--;
	nr_dead_published_++;
	// The handle is no longer needed: ilink takes its place.
	e->ilink = dead_;
	dead_ = e;
	if ((old & entry::COUNT) == 0)
		finalize_locked(e);
}

// Deregister e (it is DEAD with no users).  Its memory is retired once it
// is also out of the index (here, or in publish_index_locked()).
void ummunot_cache::finalize_locked(entry *e)
{
	be_.dereg(e->pub.mr, priv(&e->pub));
	deregistrations_++;
	uncharge_locked(e->pub.length);
	unlink_live_locked(e);
	e->finalized = true;
	if (!e->published)
		retire_locked(e);
}

// Readers holding an old root may still look at e->refs until a grace
// period has passed.
void ummunot_cache::retire_locked(entry *e)
{
	e->next = retired_entries_;
	retired_entries_ = e;
	retired_entry_bytes_ += priv_size_ ? entry_priv_offset + priv_size_ : sizeof(entry);
}

int ummunot_cache::insert_uncached_locked(std::uint64_t a, std::uint64_t b, int access,
					  entry **out)
{
	int r = make_room_locked(b - a, 0, nullptr, 0);
	if (r)
		return r;
	entry *e = new_entry();
	if (!e) {
		uncharge_locked(b - a);
		return -ENOMEM;
	}
	e->pub.addr = a;
	e->pub.length = b - a;
	e->pub.access = access;
	void *mr = nullptr;
	std::uint32_t lkey = 0, rkey = 0;
	r = be_.reg(reinterpret_cast<void *>(a), b - a, access, priv(&e->pub), &mr, &lkey, &rkey);
	if (r) {
		uncharge_locked(b - a);
		free_entry(e);
		return r;
	}
	registrations_++;
	uncached_++;
	e->pub.mr = mr;
	e->pub.lkey = lkey;
	e->pub.rkey = rkey;
	e->uncached = true;
	// Born DEAD with one user: never found by a lookup, deregistered by
	// its put.
	e->refs.store(entry::DEAD | 1, std::memory_order_relaxed);
	link_live_locked(e);
	*out = e;
	return 0;
}

int ummunot_cache::insert_locked(std::uint64_t a, std::uint64_t b, int access,
				 entry **out)
{
	if (b - a > effective_cap()) {
		budget_->refresh();
		if (b - a > effective_cap())
			return -E2BIG;
	}

	// Merge with overlapping or adjacent entries of the same access.
	entry *chosen[max_merge];
	std::size_t nchosen = 0;
	std::uint64_t ns = a, ne = b;
	// Candidates start at or before ne and end at or after ns: the
	// index's interval search (O(log n) a candidate).
	for (bool grew = true; grew && nchosen < max_merge;) {
		grew = false;
		std::uint64_t s0 = ns, e0 = ne;
		index_.find_working(e0, s0, [&](entry *e) {
			if (e->pub.access != access ||
			    (e->refs.load(std::memory_order_relaxed) & entry::DEAD) ||
			    contains(chosen, nchosen, e))
				return false;
			chosen[nchosen++] = e;
			ns = std::min(ns, e->start());
			ne = std::max(ne, e->end());
			grew = true;
			return nchosen == max_merge;
		});
	}
	int r = ne - ns <= effective_cap() ? make_room_locked(ne - ns, nchosen, chosen, nchosen)
					   : -ENOSPC;
	if (r && nchosen) {
		// Merged it does not fit; try the request alone.
		nchosen = 0;
		ns = a;
		ne = b;
		r = make_room_locked(ne - ns, 0, chosen, 0);
	}
	if (r)
		return r;
	// From here on [ns, ne) is charged.

	entry *e = new_entry();
	if (!e) {
		uncharge_locked(ne - ns);
		return -ENOMEM;
	}
	e->pub.access = access;
	e->pending = true;

	// Give up the merge: register [a, b) alone.  Used when the merged range
	// could not be pinned (a neighbour was unmapped after the drain: its
	// pages are gone, ours are not) or changed while being pinned (a retry
	// of the union would pin the same stale neighbour again).
	auto unmerge = [&]() {
		uncharge_locked(ne - ns);
		nchosen = 0;
		ns = a;
		ne = b;
		return make_room_locked(ne - ns, 0, chosen, 0);
	};
	auto fail = [&](int err, bool charged) {
		if (charged)
			uncharge_locked(ne - ns);
		pending_ = nullptr;
		free_entry(e);
		return err;
	};

	for (unsigned int attempt = 0;;) {
		e->pub.addr = ns;
		e->pub.length = ne - ns;
		e->refs.store(0, std::memory_order_relaxed);

		// 1. Watch the range: from here on every change produces an event.
		ummunot_region rg{};
		rg.start = ns;
		rg.length = ne - ns;
		e->cookie = next_cookie_++;
		rg.cookie = e->cookie;
		r = mon_->register_regions(&rg, 1, nullptr);
		if (r == -ENOSPC && evict_all_locked(chosen, nchosen))
			// The module's per-process or per-user limit (not only
			// max_regions, which max_entries stays under): our own
			// unused entries hold regions too.
			r = mon_->register_regions(&rg, 1, nullptr);
		if (r)
			return fail(r, true);
		e->handle = rg.handle;
		try {
			by_handle_.emplace(e->handle, e);
		} catch (const std::bad_alloc &) {
			std::uint64_t h = rg.handle;
			(void)mon_->handles_op(UMMUNOT_IOC_UNREGISTER, &h, 1, nullptr);
			return fail(-ENOMEM, true);
		}
		e->in_module = true;
		pending_ = e;

		// 2. Pin it.
		void *mr = nullptr;
		std::uint32_t lkey = 0, rkey = 0;
		void *p = priv(&e->pub);
		r = be_.reg(reinterpret_cast<void *>(ns), ne - ns, access, p, &mr, &lkey, &rkey);
		if (r == -ENOMEM) {
			// The kernel's RLIMIT_MEMLOCK, or memory: make room.
			budget_->refresh();
			evict_all_locked(chosen, nchosen);
			if (priv_size_)
				std::memset(p, 0, priv_size_);
			r = be_.reg(reinterpret_cast<void *>(ns), ne - ns, access, p,
				    &mr, &lkey, &rkey);
		}
		if (r) {
			kill_locked(e);
			unregister_locked();
			if (!nchosen)
				return fail(r, true);
			// Whatever the error, the request alone may still pin.
			r = unmerge();
			if (r)
				return fail(r, false);
			if (priv_size_)
				std::memset(p, 0, priv_size_);
			continue;
		}
		registrations_++;
		e->pub.mr = mr;
		e->pub.lkey = lkey;
		e->pub.rkey = rkey;

		// 3. Did it change between 1 and 2?  Drain and look.
		r = process_events_locked();
		if (r > 0)
			r = 0;
		bool dead = e->refs.load(std::memory_order_relaxed) & entry::DEAD;
		if (!r && !dead)
			break;
		if (!dead)
			kill_locked(e);
		unregister_locked();
		be_.dereg(mr, p);
		deregistrations_++;
		if (priv_size_)
			std::memset(p, 0, priv_size_);
		if (r)
			return fail(r, true);
		race_retries_++;
		if (++attempt == race_attempts)
			return fail(-EAGAIN, true);
		if (nchosen) {
			r = unmerge();
			if (r)
				return fail(r, false);
		}
	}

	// 4. Publish, holding one reference for the caller, and retire the
	// entries it absorbed.
	e->refs.store(1, std::memory_order_relaxed);
	if (!index_insert_locked(e)) {
		kill_locked(e);		// still pending: by_handle_ and module only
		unregister_locked();
		be_.dereg(e->pub.mr, priv(&e->pub));
		deregistrations_++;
		return fail(-ENOMEM, true);
	}
	e->pending = false;
	pending_ = nullptr;
	nr_live_++;
	link_live_locked(e);
	for (std::size_t i = 0; i < nchosen; i++) {
		if (chosen[i]->refs.load(std::memory_order_relaxed) & entry::DEAD)
			continue;
		kill_locked(chosen[i]);
		merges_++;
	}
	// One publish: readers go from the old entries to the merged one.
	publish_index_locked();
	unregister_locked();
	*out = e;
	return 0;
}

// live_: every registered entry not yet deregistered (published, DEAD and
// still held, or uncached), oldest first, for the CLOCK and the destructor.
// An intrusive list: no node or bucket per entry.  New entries go to the
// tail, so the hand meets them last.
void ummunot_cache::link_live_locked(entry *e)
{
	e->next = nullptr;
	e->prev = live_tail_;
	if (live_tail_)
		live_tail_->next = e;
	else
		live_ = e;
	live_tail_ = e;
	nr_linked_++;
}

void ummunot_cache::unlink_live_locked(entry *e)
{
	if (hand_ == e)
		hand_ = e->next;
	if (e->prev)
		e->prev->next = e->next;
	else
		live_ = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		live_tail_ = e->prev;
	e->prev = e->next = nullptr;
	nr_linked_--;
}

// Half of what the cache holds: its index and its registered entries.
std::size_t ummunot_cache::reclaim_threshold() const
{
	std::size_t esz = priv_size_ ? entry_priv_offset + priv_size_ : sizeof(entry);
	return std::max(reclaim_min_bytes, (index_.bytes() + nr_linked_ * esz) / 2);
}

void ummunot_cache::reclaim_locked(bool force)
{
	std::size_t retired = index_.retired_bytes() + retired_entry_bytes_;
	if (!retired || (!force && retired < reclaim_threshold()))
		return;
	// Every reader that could still hold a retired node or entry was
	// inside a read-side critical section that began before they were
	// unpublished; wait for those to finish.  Not inside the caller's own
	// liburcu-bp read-side critical section: then a later call frees them.
	if (!rcu_try_synchronize())
		return;
	for (entry *e = retired_entries_; e;) {
		entry *n = e->next;
		free_entry(e);
		e = n;
	}
	// Forced (flush): the spare nodes go too.
	index_.free_retired(force);
	retired_entries_ = nullptr;
	retired_entry_bytes_ = 0;
}

// Each check names its own line: a failing test prints which one broke.
int ummunot_cache::check_invariants()
{
	std::lock_guard<std::mutex> g(mu_);
	std::size_t live = 0, dead = 0;
	std::uint64_t bytes = 0;

	if (index_.check() || unpub_)
		return __LINE__;
	int bad = 0;
	index_.for_each([&](std::uint64_t start, std::uint64_t end, entry *e) {
		if (bad)
			return;
		if (start != e->start() || end != e->end() || !e->published) {
			bad = __LINE__;
			return;
		}
		if (e->refs.load(std::memory_order_relaxed) & entry::DEAD) {
			dead++;
			return;
		}
		live++;
		if (e->finalized || e->pending || !e->in_module) {
			bad = __LINE__;
			return;
		}
		auto it = by_handle_.find(e->handle);
		if (it == by_handle_.end() || it->second != e)
			bad = __LINE__;
	});
	if (bad)
		return bad;
	std::size_t ndead = 0;
	for (entry *e = dead_; e; e = e->ilink)
		ndead++;
	if (ndead != dead)
		return __LINE__;
	if (live != nr_live_ || dead != nr_dead_published_)
		return __LINE__;
	if (by_handle_.size() != live + (pending_ ? 1 : 0))
		return __LINE__;
	std::size_t linked = 0;
	for (entry *e = live_; e; e = e->next) {
		linked++;
		if (e->finalized || (e->next && e->next->prev != e))
			return __LINE__;
		bytes += e->pub.length;
	}
	if (linked != nr_linked_ || pinned_ != bytes)
		return __LINE__;
	if (pinned_ > max_pinned_)
		return __LINE__;
	return 0;
}
