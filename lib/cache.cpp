// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cache.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <new>
#include <unistd.h>

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define UMMUNOT_HAVE_RSEQ 1
#else
#define UMMUNOT_HAVE_RSEQ 0
#endif

#include "ext.hpp"
#include "internal.hpp"
#include "rcu.hpp"
#include "ring.hpp"

using namespace ummunot::detail;

namespace {

constexpr std::uint64_t default_max_entries = 65536;
// Grace periods are batched by retired bytes: one waits when what is
// retired reaches half of what the cache holds (so that transient memory
// stays under 1.5x steady), and never for less than this.
constexpr std::size_t reclaim_min_bytes = 64 * 1024;
constexpr unsigned int race_attempts = 3;
constexpr unsigned int drain_batch = 256;
constexpr std::uint32_t max_priv_size = 4096;
// Entries a miss may merge with (more are left alone: the merged range
// would be huge anyway).  A fixed array: merging allocates nothing.
constexpr std::size_t max_merge = 16;

bool zero(const std::uint64_t *p, std::size_t n)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

bool contains(const entry *const *v, std::size_t n, const entry *e)
{
	return std::find(v, v + n, e) != v + n;
}

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
	c->budget_ = cfg.budget ? cfg.budget : &ummunot_budget::process_default();
	if (c->effective_cap() < c->page_)
		return -ENOMEM;

	if (!c->index_.init())
		return -ENOMEM;
	c->seen_gen_.store(mon->generation(), std::memory_order_relaxed);
	c->mon_ = std::move(mon);
	c->mon_->set_owned();
	c->gen_word_ = c->mon_->generation_word();
	c->budget_->attach();
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

ummunot_cache::~ummunot_cache()
{
	if (forked()) {
		// In a forked child the registrations are the parent's (never
		// deregister them here) and the ring is not mapped.  If another
		// thread held mu_ when the parent forked, the structures may be
		// half-changed: leave them (a bounded leak in the child) rather
		// than walk them.
		if (mu_.try_lock()) {
			free_all_locked(false);
			mu_.unlock();
		}
		return;
	}
	std::lock_guard<std::mutex> g(mu_);
	// Putting a registration back after destroy is a caller bug
	// (documented); entries still held are deregistered anyway so that
	// nothing stays pinned.  The regions go away with the file.
	free_all_locked(true);
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
	budget_->detach();
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

int ummunot_cache::put(const ummunot_reg *reg)
{
	if (forked())
		return -ECHILD;
	if (!reg)
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
	// unpublished; wait for those to finish.
	rcu_synchronize();
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

namespace {

// attr (0.1) -> config (0.2).
int config_from_attr(const ummunot_cache_attr *attr, ummunot_cache_config *cfg)
{
	*cfg = {};
	cfg->size = sizeof(*cfg);
	if (!attr)
		return 0;
	if (attr->flags || !zero(attr->resv, 4))
		return -EINVAL;
	cfg->device_path = attr->device_path;
	cfg->ring_entries = attr->ring_entries;
	cfg->max_entries = attr->max_entries;
	cfg->max_pinned_bytes = attr->max_pinned_bytes;
	return 0;
}

int read_config(const ummunot_cache_config *in, ummunot_cache_config *cfg)
{
	if (!in) {
		*cfg = {};
		cfg->size = sizeof(*cfg);
		return 0;
	}
	int r = read_ext(cfg, sizeof(*cfg), in, in->size, sizeof(*cfg));
	if (r)
		return r;
	if (cfg->flags || cfg->priv_size > max_priv_size)
		return -EINVAL;
	return 0;
}

int read_ops(const ummunot_cache_ops *in, backend *be, void *ctx)
{
	ummunot_cache_ops ops;

	if (!in)
		return -EINVAL;
	int r = read_ext(&ops, sizeof(ops), in, in->size, sizeof(ops));
	if (r)
		return r;
	if (!ops.reg || !ops.dereg)
		return -EINVAL;
	be->reg2 = ops.reg;
	be->dereg2 = ops.dereg;
	be->ctx = ctx;
	return 0;
}

int backend_from_ops1(const ummunot_backend_ops *ops, void *ctx, backend *be)
{
	if (!ops || !ops->reg || !ops->dereg)
		return -EINVAL;
	be->reg1 = ops->reg;
	be->dereg1 = ops->dereg;
	be->ctx = ctx;
	return 0;
}

int create_on_device(std::unique_ptr<device> dev, const backend &be,
		     const ummunot_cache_config &cfg, ummunot_cache **out)
{
	ummunot_monitor_attr ma{};
	ma.ring_entries = cfg.ring_entries;
	ummunot_monitor *m = nullptr;
	int r = monitor_open_device(std::move(dev), &ma, &m);
	if (r)
		return r;
	return ummunot_cache::create(std::unique_ptr<ummunot_monitor>(m), be, cfg, out);
}

int create_on_path(const backend &be, const ummunot_cache_config &cfg, ummunot_cache **out)
{
	try {
		ummunot_monitor_attr ma{};
		ma.device_path = cfg.device_path;
		ma.ring_entries = cfg.ring_entries;
		ummunot_monitor *m = nullptr;
		int r = ummunot_monitor_open(&ma, &m);
		if (r)
			return r;
		return ummunot_cache::create(std::unique_ptr<ummunot_monitor>(m), be, cfg, out);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
}

// The arguments of the 0.1 (ops + attr) and 0.2 (ops + config) creates,
// checked and converted once for both the device and the path variants.
int args_v1(const ummunot_backend_ops *ops, void *ctx, const ummunot_cache_attr *attr,
	    ummunot_cache **out, backend *be, ummunot_cache_config *cfg)
{
	if (!out)
		return -EINVAL;
	int r = backend_from_ops1(ops, ctx, be);
	return r ? r : config_from_attr(attr, cfg);
}

int args_v2(const ummunot_cache_ops *ops, void *ctx, const ummunot_cache_config *config,
	    ummunot_cache **out, backend *be, ummunot_cache_config *cfg)
{
	if (!out)
		return -EINVAL;
	int r = read_ops(ops, be, ctx);
	return r ? r : read_config(config, cfg);
}

} // namespace

namespace ummunot::detail {

int cache_create_device(std::unique_ptr<device> dev, const ummunot_backend_ops *ops,
			void *ctx, const ummunot_cache_attr *attr, ummunot_cache **out)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v1(ops, ctx, attr, out, &be, &cfg))
		return r;
	return create_on_device(std::move(dev), be, cfg, out);
}

int cache_create_device_ops(std::unique_ptr<device> dev, const ummunot_cache_ops *ops,
			    void *ctx, const ummunot_cache_config *config, ummunot_cache **out)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v2(ops, ctx, config, out, &be, &cfg))
		return r;
	return create_on_device(std::move(dev), be, cfg, out);
}

int cache_check(ummunot_cache *cache)
{
	return cache->check_invariants();
}

} // namespace ummunot::detail

/* ---------------------------------------------------------------- C API */

extern "C" {

int ummunot_cache_create_backend(const struct ummunot_backend_ops *ops, void *ctx,
				 const struct ummunot_cache_attr *attr,
				 struct ummunot_cache **cache)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v1(ops, ctx, attr, cache, &be, &cfg))
		return r;
	return create_on_path(be, cfg, cache);
}

int ummunot_cache_create_ops(const struct ummunot_cache_ops *ops, void *ctx,
			     const struct ummunot_cache_config *config,
			     struct ummunot_cache **cache)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v2(ops, ctx, config, cache, &be, &cfg))
		return r;
	return create_on_path(be, cfg, cache);
}

void ummunot_cache_destroy(struct ummunot_cache *cache)
{
	delete cache;
}

int ummunot_cache_get(struct ummunot_cache *cache, const void *addr, size_t length,
		      int access, const struct ummunot_reg **reg)
{
	if (!cache)
		return -EINVAL;
	// Nothing in get throws (allocations are nothrow or caught where they
	// happen); this is the last line of defence of the C contract.
	try {
		return cache->get(reinterpret_cast<std::uintptr_t>(addr), length, access, reg);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_put(struct ummunot_cache *cache, const struct ummunot_reg *reg)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->put(reg);
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_poll(struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->poll();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_flush(struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->flush();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_invalidate(struct ummunot_cache *cache, const void *addr, size_t length)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->invalidate(reinterpret_cast<std::uintptr_t>(addr), length);
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_stats(struct ummunot_cache *cache, struct ummunot_cache_stats *stats)
{
	if (!cache || !stats)
		return -EINVAL;
	struct ummunot_cache_stats_ext st;
	int r = cache->stats(&st);
	if (r)
		return r;
	// 0.1's struct is a prefix of the extensible one.
	static_assert(offsetof(struct ummunot_cache_stats_ext, max_entries) ==
			      offsetof(struct ummunot_cache_stats, max_entries) &&
		      sizeof(struct ummunot_cache_stats) <= sizeof(struct ummunot_cache_stats_ext));
	std::memcpy(stats, &st, sizeof(*stats));
	return 0;
}

int ummunot_cache_stats_ext(struct ummunot_cache *cache,
			    struct ummunot_cache_stats_ext *stats, size_t size)
{
	if (!cache || !stats || size < sizeof(std::uint64_t))
		return -EINVAL;
	struct ummunot_cache_stats_ext st;
	int r = cache->stats(&st);
	if (r)
		return r;
	return copy_ext(stats, size, &st, sizeof(st));
}

struct ummunot_monitor *ummunot_cache_monitor(struct ummunot_cache *cache)
{
	return cache ? cache->monitor() : nullptr;
}

int ummunot_cache_fd(const struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	int fd = cache->fd();
	return fd >= 0 ? fd : -ENODEV;
}

void *ummunot_reg_priv(const struct ummunot_reg *reg)
{
	return reg ? ummunot_cache::priv(reg) : nullptr;
}

} // extern "C"
