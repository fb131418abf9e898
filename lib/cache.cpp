// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache: creation and destruction, the hit (get), put, poll,
// invalidate, flush, stats, and the end of every writer section.  The miss
// is in cache_miss.cpp.  See cache.hpp.
#include "cache.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <ctime>
#include <new>
#include <unistd.h>

#include "rcu.hpp"
#include "ring.hpp"

using namespace ummunot::detail;

namespace {

constexpr std::uint64_t default_max_entries = 65536;

} // namespace

// A writer section: mu_ held, end_writer() run on the way out, whichever
// way that is; then, with mu_ released, the grace period of whatever
// end_writer() detached for freeing.
class ummunot_cache::writer {
public:
	explicit writer(ummunot_cache &c, bool force_reclaim = false)
		: c_(c), l_(c.mu_), force_(force_reclaim)
	{
	}
	~writer()
	{
		entries::reclaim_batch b = c_.end_writer(force_);
		l_.unlock();
		if (b)
			c_.reclaim(b);
	}
	writer(const writer &) = delete;
	writer &operator=(const writer &) = delete;

private:
	ummunot_cache &c_;
	std::unique_lock<std::mutex> l_;
	bool force_;
};

/* ---------------------------------------------------- creation and end */

ummunot_cache::ummunot_cache(std::unique_ptr<ummunot_monitor> mon, const backend &be,
			     const ummunot_cache_config &cfg, ummunot_budget &budget,
			     std::uint64_t max_entries, std::uint64_t page)
	: mon_(std::move(mon)), be_(be), page_(page), max_entries_(max_entries),
	  max_cached_(cfg.max_cached_length), priv_size_(cfg.priv_size),
	  fork_gen_(fork_gen_now()), pump_(*mon_),
	  pins_(budget, cfg.max_pinned_bytes ? cfg.max_pinned_bytes : UINT64_MAX),
	  entries_(this, be_, pins_, cfg.priv_size)
{
}

int ummunot_cache::create(std::unique_ptr<ummunot_monitor> mon, const backend &be,
			  const ummunot_cache_config &cfg, ummunot_cache **out)
{
	fork_handlers_install();
	long pg = ::sysconf(_SC_PAGESIZE);
	std::uint64_t page = pg > 0 ? static_cast<std::uint64_t>(pg) : 4096;
	std::uint64_t regions = mon->hello().max_regions;
	if (regions < 2)
		return -EPROTO;		// one slot is needed for the entry being added
	std::uint64_t me = cfg.max_entries ? cfg.max_entries : default_max_entries;
	ummunot_budget &budget = cfg.budget ? *cfg.budget : ummunot_budget::process_default();

	mon->set_owned();
	std::unique_ptr<ummunot_cache> c(new (std::nothrow) ummunot_cache(
		std::move(mon), be, cfg, budget, std::min(me, regions - 1), page));
	if (!c)
		return -ENOMEM;
	if (c->pins_.cap() < c->page_)
		return -ENOMEM;
	if (!c->entries_.init(c->mon_.get()))
		return -ENOMEM;
	long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
	if (!c->hits_.init(cpus > 0 ? static_cast<unsigned int>(cpus) : 1))
		return -ENOMEM;
	if (ummunot_user_area *ua = c->mon_->user_area()) {
		// Version and the (zero) counters first, magic last: a reader
		// that sees the magic sees a user area in our format.  The
		// reader is the kernel printing fdinfo with plain loads, so the
		// release below pairs with nothing in userspace; it only keeps
		// the compiler and CPU from moving the magic before the rest.
		ring_store_relaxed(&ua->version, UMMUNOT_USER_AREA_VERSION);
		c->export_counters();
		ring_store_release(&ua->magic, UMMUNOT_USER_AREA_MAGIC);
	}
	*out = c.release();
	return 0;
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
	entries_.free_all(!forked());
}

/* ------------------------------------------------------ the hit and put */

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

	entry *e = nullptr;
	bool cached = !max_cached_ || b - a <= max_cached_;
	if (cached) {
		// Every event up to the ring's generation processed (its
		// entries DEAD)?  Else drain first.
		if (!pump_.current()) {
			writer w(*this);
			int r = pump_.drain(entries_);
			if (r < 0)
				return r;
		}
		unsigned int rt = rcu_read_lock();
		// The root's acquire (in range_index::find()) pairs with the
		// release store in range_index::publish().
		e = entries_.find(a, b, access);
		rcu_read_unlock(rt);
		if (e) {
			hits_.inc();
			*out = &e->pub;
			return 0;
		}
	}

	writer w(*this);
	int r = pump_.drain(entries_);
	if (r < 0)
		return r;
	if (!cached) {
		r = miss_uncached(a, b, access, &e);
	} else if ((e = entries_.find_locked(a, b, access))) {
		// Another thread added it meanwhile; under mu_ the working
		// index cannot change under us.
		hits_.inc();
		r = 0;
	} else {
		misses_++;
		r = miss(a, b, access, &e);
	}
	if (r)
		return r;
	*out = &e->pub;
	return 0;
}

int ummunot_cache::put(const ummunot_reg *reg)
{
	if (forked())
		return -ECHILD;
	if (!reg)
		return -EINVAL;
	// What can be refused from struct ummunot_reg alone, before reading
	// past it: a registration is an allocation of its own (aligned as
	// operator new aligns), names a non-empty page-aligned range, and its
	// resv is the check of its own address (reg_tag(): a copy elsewhere
	// fails it).  Anything else that passes (freed memory) is undefined:
	// we read owner below (ummunot_cache_put(3)).
	if (reinterpret_cast<std::uintptr_t>(reg) % __STDCPP_DEFAULT_NEW_ALIGNMENT__ ||
	    !reg->length || ((reg->addr | reg->length) & (page_ - 1)) ||
	    reg->resv != reg_tag(reg))
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
		writer w(*this);
		entries_.finalize(e);
	}
	return 0;
}

void *ummunot_cache::priv(const ummunot_reg *reg)
{
	auto *e = reinterpret_cast<entry *>(const_cast<ummunot_reg *>(reg));
	return e->owner->entries_.priv_of(e);
}

/* --------------------------------------------------- the other callers */

int ummunot_cache::poll()
{
	if (forked())
		return -ECHILD;
	writer w(*this);
	return pump_.drain(entries_);
}

int ummunot_cache::invalidate(std::uint64_t addr, std::uint64_t len)
{
	if (forked())
		return -ECHILD;
	if (len == 0 || addr + len < addr)
		return -EINVAL;
	writer w(*this);
	std::uint64_t end = addr + len;
	int n = 0;
	// Entries overlapping [addr, end): start <= end - 1 and end >= addr + 1.
	// kill() changes no index node, so the walk is undisturbed; k entries
	// cost O(k log n) here and in the erase.
	entries_.for_each_covering(end - 1, addr + 1, [&](entry *e) {
		if (e->refs.load(std::memory_order_relaxed) & entry::DEAD)
			return false;
		entries_.kill(e);
		caller_invalidations_++;
		n++;
		return false;
	});
	return n;
}

int ummunot_cache::flush()
{
	if (forked())
		return -ECHILD;
	writer w(*this, true);
	int r = pump_.drain(entries_);
	if (r < 0)
		return r;
	return static_cast<int>(entries_.evict_unused(nullptr, 0));
}

int ummunot_cache::stats(struct ummunot_cache_stats_ext *st)
{
	if (forked())
		return -ECHILD;
	writer w(*this);

	*st = {};
	st->hits = hits_.sum();
	// The user area agrees with what this call returns.
	if (ummunot_user_area *ua = mon_->user_area())
		ring_store_relaxed(&ua->hits, st->hits);
	st->misses = misses_;
	for (unsigned int i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		st->invalidations[i] = pump_.invalidations()[i];
	const entries::counts &n = entries_.count();
	st->evictions = n.evictions;
	st->resyncs = pump_.resyncs();
	st->merges = n.merges;
	st->registrations = n.registrations;
	st->deregistrations = n.deregistrations;
	st->race_retries = race_retries_;
	st->entries = entries_.nr_live();
	st->pinned_bytes = pins_.pinned();
	st->max_pinned_bytes = pins_.cap();
	st->max_entries = max_entries_;
	st->uncached = n.uncached;
	st->caller_invalidations = caller_invalidations_;
	st->budget_limit = pins_.shared().limit();
	st->budget_used = pins_.shared().used();
	return 0;
}

int ummunot_cache::check_invariants()
{
	std::lock_guard<std::mutex> g(mu_);
	return entries_.check(pins_);
}

/* ------------------------------------------ the end of a writer section */

// In this order: the index changes become visible to hits and the module
// forgets the regions of dead entries (entries::settle()); the counters go
// to the user area; what was retired is detached for freeing if a grace
// period is due.  Every writer section ends here (class writer).
entries::reclaim_batch ummunot_cache::end_writer(bool force_reclaim)
{
	entries_.settle();
	export_counters();
	return entries_.take_reclaim(force_reclaim);
}

// Without mu_: a grace period waits for readers, and a reader may be
// delayed (preempted) anywhere; only this thread waits, others' writer
// sections go on (and detach no batch of their own meanwhile).
void ummunot_cache::reclaim(entries::reclaim_batch &b)
{
	rcu_synchronize();
	std::lock_guard<std::mutex> g(mu_);
	entries_.finish_reclaim(b);
}

// Copy the counters into the ring's user area (include/ummunot/user_area.h),
// one relaxed 64-bit store per word: readers (fdinfo) promise no
// consistency across words.  Only writer sections do this, in O(1): hits
// are a sum over every possible CPU's counter, so they are summed here at
// most once per kHitsExportNs (and by every stats() call); the exported
// hits lag by up to that and the next writer section
// (Documentation/library.rst).
void ummunot_cache::export_counters()
{
	ummunot_user_area *ua = mon_->user_area();

	if (!ua)
		return;
	const entries::counts &n = entries_.count();
	struct timespec ts;
	::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	const std::uint64_t now = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
				  static_cast<std::uint64_t>(ts.tv_nsec);
	if (now - hits_exported_ns_ >= kHitsExportNs || hits_exported_ns_ == 0) {
		hits_exported_ns_ = now ? now : 1;
		ring_store_relaxed(&ua->hits, hits_.sum());
	}
	ring_store_relaxed(&ua->misses, misses_);
	for (unsigned int i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		ring_store_relaxed(&ua->invalidations[i], pump_.invalidations()[i]);
	ring_store_relaxed(&ua->evictions, n.evictions);
	ring_store_relaxed(&ua->resyncs, pump_.resyncs());
	ring_store_relaxed(&ua->pinned_bytes, pins_.pinned());
	ring_store_relaxed(&ua->entries, entries_.nr_live());
	ring_store_relaxed(&ua->registrations, n.registrations);
	ring_store_relaxed(&ua->deregistrations, n.deregistrations);
}
