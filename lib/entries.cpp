// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The entries' life cycle: make, watch, publish, kill, finalize, retire,
// reclaim; the live list and the CLOCK over it; the index changes made
// visible by settle(); the invariants the tests check.  See entries.hpp.
#include "entries.hpp"

#include <algorithm>
#include <cstring>
#include <new>

#include "monitor.hpp"
#include "rcu.hpp"

namespace ummunot::detail {

namespace {

// Grace periods are batched by retired bytes: one waits when what is
// retired reaches half of what the cache holds (so that transient memory
// stays under 1.5x steady), and never for less than this.
constexpr std::size_t reclaim_min_bytes = 64 * 1024;

bool contains(const entry *const *v, std::size_t n, const entry *e)
{
	return std::find(v, v + n, e) != v + n;
}

} // namespace

bool entries::init(ummunot_monitor *mon)
{
	mon_ = mon;
	return index_.init();
}

entries::~entries()
{
	// free_all() ran (the cache's destructor), or nothing was ever made.
}

std::size_t entries::entry_bytes() const
{
	// Without a private area, exactly the entry (88 bytes: a 96-byte
	// malloc chunk; rounding up to the area's offset would cost 112).
	return priv_size_ ? entry_priv_offset + priv_size_ : sizeof(entry);
}

entry *entries::make()
{
	// operator new's default alignment covers the private area's 16
	// bytes; the aligned overload would round 88 up to 96 (a 112-byte
	// chunk).
	static_assert(__STDCPP_DEFAULT_NEW_ALIGNMENT__ >= 16 && entry_priv_offset % 16 == 0);
	void *mem = ::operator new(entry_bytes(), std::nothrow);

	if (!mem)
		return nullptr;
	auto *e = new (mem) entry;
	e->pub.resv = reg_tag(&e->pub);
	e->owner = owner_;
	if (priv_size_)
		std::memset(static_cast<unsigned char *>(mem) + entry_priv_offset, 0, priv_size_);
	return e;
}

void entries::free_entry(entry *e)
{
	e->~entry();
	::operator delete(static_cast<void *>(e));
}

void *entries::priv_of(entry *e) const
{
	return priv_size_ ? reinterpret_cast<unsigned char *>(e) + entry_priv_offset : nullptr;
}

void entries::clear_priv(entry *e)
{
	if (priv_size_)
		std::memset(priv_of(e), 0, priv_size_);
}

/* ------------------------------------------------------ the miss's entry */

bool entries::watch(entry *e, std::uint64_t handle)
{
	e->handle = handle;
	try {
		by_handle_.emplace(handle, e);
	} catch (const std::bad_alloc &) {
		return false;
	}
	e->in_module = true;
	e->pending = true;
	pending_ = e;
	return true;
}

bool entries::publish_new(entry *e)
{
	e->refs.store(1, std::memory_order_relaxed);
	if (!index_.reserve())
		return false;
	index_.insert(e->start(), e->end(), e);
	e->published = true;
	e->pending = false;
	pending_ = nullptr;
	nr_live_++;
	link_live(e);
	return true;
}

void entries::drop_registration(entry *e)
{
	be_.dereg(e->pub.mr, priv_of(e));
	counts_.deregistrations++;
}

void entries::add_uncached(entry *e)
{
	counts_.registrations++;
	counts_.uncached++;
	e->uncached = true;
	e->refs.store(entry::DEAD | 1, std::memory_order_relaxed);
	link_live(e);
}

/* ------------------------------------------------------------ the death */

void entries::forget_handle(entry *e)
{
	by_handle_.erase(e->handle);
	if (e->in_module) {
		queue_unregister(e->handle);
		e->in_module = false;
	}
}

void entries::kill(entry *e)
{
	std::uint64_t old = e->refs.fetch_or(entry::DEAD, std::memory_order_acq_rel);

	if (old & entry::DEAD)
		return;
	forget_handle(e);
	if (e->pending)
		return;			// the miss cleans up
	nr_live_--;
	nr_dead_published_++;
	// The handle is no longer needed: ilink takes its place.
	e->ilink = dead_;
	dead_ = e;
	if ((old & entry::COUNT) == 0)
		finalize(e);
}

bool entries::kill_event(std::uint64_t handle, std::uint64_t cookie)
{
	auto it = by_handle_.find(handle);
	// Unknown handle or other cookie: an event for a region we already
	// unregistered, still in the ring.
	if (it == by_handle_.end() || it->second->cookie != cookie)
		return false;
	kill(it->second);
	return true;
}

void entries::kill_all()
{
	for (entry *e = live_; e;) {
		entry *n = e->next;	// kill() may unlink e, not n
		if (!e->uncached)
			kill(e);
		e = n;
	}
	if (pending_)
		kill(pending_);
}

// Deregister e (DEAD with no users).  Its memory is retired once it is
// also out of the index (here, or in publish_index()).
void entries::finalize(entry *e)
{
	be_.dereg(e->pub.mr, priv_of(e));
	counts_.deregistrations++;
	pins_.uncharge(e->pub.length);
	unlink_live(e);
	e->finalized = true;
	if (!e->published)
		retire(e);
}

// Readers holding an old root may still look at e->refs until a grace
// period has passed.
void entries::retire(entry *e)
{
	e->next = retired_;
	retired_ = e;
	retired_bytes_ += entry_bytes();
}

/* ------------------------------------------------------------- eviction */

// CLOCK (second chance): the hand sweeps the live list; an entry put back
// since the hand last passed has REFERENCED set and gets it cleared; the
// first unused entry without it is the victim.  Two sweeps at most;
// amortised O(1): every cleared bit was set by a put.  Only atomic CAS on
// refs: a concurrent hit or put makes the CAS fail and the entry is passed
// over.
entry *entries::clock_victim(const entry *const *keep, std::size_t nkeep)
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

// e was just moved from 0 to DEAD (clock_victim(), evict_unused()).
void entries::evict(entry *e)
{
	forget_handle(e);
	nr_live_--;
	nr_dead_published_++;
	e->ilink = dead_;
	dead_ = e;
	finalize(e);
	counts_.evictions++;
}

std::size_t entries::evict_unused(const entry *const *keep, std::size_t nkeep)
{
	std::size_t n = 0;

	for (entry *e = live_; e;) {
		entry *next = e->next;	// evicting e unlinks e, not next
		std::uint64_t v = e->refs.load(std::memory_order_relaxed);
		// The CAS fails if a reader took it since we looked: it stays.
		if (!e->uncached && !contains(keep, nkeep, e) &&
		    !(v & (entry::DEAD | entry::COUNT)) &&
		    e->refs.compare_exchange_strong(v, entry::DEAD, std::memory_order_acq_rel)) {
			evict(e);
			n++;
		}
		e = next;
	}
	return n;
}

/* ------------------------------------------- the index, the module, memory */

void entries::queue_unregister(std::uint64_t handle)
{
	if (nr_unreg_ == unreg_.size())
		unregister_queued();
	unreg_[nr_unreg_++] = handle;
}

void entries::unregister_queued()
{
	if (!nr_unreg_)
		return;
	// Failure would only leave a quiet region behind in the module: its
	// one event names a handle we no longer know and is ignored.
	(void)mon_->handles_op(UMMUNOT_IOC_UNREGISTER, unreg_.data(),
			       static_cast<unsigned int>(nr_unreg_), nullptr);
	nr_unreg_ = 0;
}

// Erase the DEAD entries on dead_ from the working index: O(log n) each,
// and a node changed twice before the next publish is copied once.  Out of
// memory stops the walk: the rest stay in the index, unusable by hits
// (try_acquire() fails) and harmless, for the next call.
void entries::index_erase_dead()
{
	while (entry *e = dead_) {
		if (!index_.reserve())
			return;
		dead_ = e->ilink;
		bool found = index_.erase(e->start(), e);
		(void)found;	// check() counts dead_ against the index
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
void entries::publish_index()
{
	index_erase_dead();
	index_.publish();
	while (entry *e = unpub_) {
		unpub_ = e->ilink;
		e->ilink = nullptr;
		e->published = false;
		if (e->finalized)
			retire(e);
	}
}

void entries::settle()
{
	publish_index();
	unregister_queued();
}

// Half of what the cache holds: its index and its registered entries.
std::size_t entries::reclaim_threshold() const
{
	return std::max(reclaim_min_bytes, (index_.bytes() + nr_linked_ * entry_bytes()) / 2);
}

entries::reclaim_batch entries::take_reclaim(bool force)
{
	reclaim_batch b;
	std::size_t retired = index_.retired_bytes() + retired_bytes_;
	if (!retired || (!force && (batches_out_ || retired < reclaim_threshold())))
		return b;
	// Every reader that could still hold a retired node or entry was
	// inside a read-side critical section that began before they were
	// unpublished; the caller waits for those to finish, without the
	// lock.
	b.entries = retired_;
	b.entry_bytes = retired_bytes_;
	b.nodes = index_.take_retired();
	b.force = force;
	retired_ = nullptr;
	retired_bytes_ = 0;
	batches_out_++;
	return b;
}

void entries::finish_reclaim(reclaim_batch &b)
{
	batches_out_--;
	while (entry *e = b.entries) {
		b.entries = e->next;
		free_entry(e);
	}
	// Forced (flush): the spare nodes go too.
	index_.free_retired(b.nodes, b.force);
	b = {};
}

// Everything goes.  No reader can be inside the index (destroy must not
// race with other calls), so memory is freed now: first what only the live
// list reaches, then what the index reaches, then the retire list (the
// index frees its own nodes).
void entries::free_all(bool deregister)
{
	// Entries on unpub_ are out of the index: settle them first.
	publish_index();
	for (entry *e = live_; e;) {
		entry *n = e->next;
		if (deregister && !e->finalized) {
			be_.dereg(e->pub.mr, priv_of(e));
			pins_.uncharge(e->pub.length);
		}
		if (!e->published)
			free_entry(e);
		e = n;
	}
	live_ = live_tail_ = nullptr;
	index_.for_each([this](std::uint64_t, std::uint64_t, entry *e) { free_entry(e); });
	for (entry *e = retired_; e;) {
		entry *n = e->next;
		free_entry(e);
		e = n;
	}
	retired_ = nullptr;
}

/* -------------------------------------------------------- the live list */

// Every registered entry not yet deregistered (published, DEAD and still
// held, or uncached), oldest first, for the CLOCK and the destructor.  An
// intrusive list: no node or bucket per entry.  New entries go to the
// tail, so the hand meets them last.
void entries::link_live(entry *e)
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

void entries::unlink_live(entry *e)
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

/* ---------------------------------------------------------- invariants */

// Each check names its own line: a failing test prints which one broke.
int entries::check(const pin_budget &pins) const
{
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
	if (linked != nr_linked_ || pins.pinned() != bytes)
		return __LINE__;
	if (pins.pinned() > pins.max())
		return __LINE__;
	return 0;
}

} // namespace ummunot::detail
