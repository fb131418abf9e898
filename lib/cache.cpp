// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cache.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <new>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.hpp"
#include "rcu.hpp"
#include "ring.hpp"

using namespace ummunot::detail;

namespace {

constexpr std::uint64_t default_max_entries = 65536;
constexpr std::size_t reclaim_batch = 64;	// retired objects per grace period
constexpr unsigned int race_attempts = 3;
constexpr unsigned int drain_batch = 256;


bool zero(const std::uint64_t *p, std::size_t n)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

} // namespace

namespace ummunot::detail {

snapshot::snapshot(std::size_t c) : cap(c)
{
	// The arrays follow the header (whose size is a multiple of 8).
	auto *p = reinterpret_cast<unsigned char *>(this) + sizeof(snapshot);
	starts = reinterpret_cast<std::uint64_t *>(p);
	ends = starts + c;
	ents = reinterpret_cast<entry **>(ends + c);
}

snapshot::ptr snapshot::create(std::size_t cap)
{
	static_assert(sizeof(snapshot) % alignof(std::uint64_t) == 0 &&
		      sizeof(std::uint64_t) == sizeof(entry *));
	// Throws std::bad_alloc like the vectors did; callers catch it.
	void *mem = ::operator new(sizeof(snapshot) + cap * 3 * sizeof(std::uint64_t));
	return ptr(new (mem) snapshot(cap));
}

void snapshot::destroy(snapshot *s)
{
	if (!s)
		return;
	s->~snapshot();
	::operator delete(static_cast<void *>(s));
}

} // namespace ummunot::detail

int ummunot_cache::create(std::unique_ptr<ummunot_monitor> mon,
			  const ummunot_backend_ops *ops, void *ctx,
			  const ummunot_cache_attr *attr, ummunot_cache **out)
{
	std::unique_ptr<ummunot_cache> c(new (std::nothrow) ummunot_cache);
	if (!c)
		return -ENOMEM;
	c->ops_ = *ops;
	c->ctx_ = ctx;
	long pg = ::sysconf(_SC_PAGESIZE);
	c->page_ = pg > 0 ? static_cast<std::uint64_t>(pg) : 4096;

	std::uint64_t regions = mon->hello().max_regions;
	if (regions < 2)
		return -EPROTO;		// one slot is needed for the entry being added
	std::uint64_t me = attr && attr->max_entries ? attr->max_entries : default_max_entries;
	c->max_entries_ = std::min(me, regions - 1);

	struct rlimit rl;
	std::uint64_t lim = UINT64_MAX;
	if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lim = rl.rlim_cur;
	std::uint64_t mp = attr && attr->max_pinned_bytes ? attr->max_pinned_bytes : lim;
	c->max_pinned_ = std::min(mp, lim);
	if (c->max_pinned_ < c->page_)
		return -ENOMEM;

	c->index_.store(snapshot::create(0).release(), std::memory_order_relaxed);
	c->seen_gen_.store(mon->generation(), std::memory_order_relaxed);
	c->mon_ = std::move(mon);
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

ummunot_cache::~ummunot_cache()
{
	std::lock_guard<std::mutex> g(mu_);

	// Everything goes.  Putting a registration back after destroy is a
	// caller bug (documented); entries still held are deregistered anyway
	// so that nothing stays pinned.
	drop_all_locked();
	republish_locked({});
	while (live_)
		finalize_locked(live_);	// unlinks it
	to_unregister_.clear();		// the regions go away with the file
	reclaim_locked(true);
	snapshot::destroy(index_.load(std::memory_order_relaxed));
}

bool ummunot_cache::try_acquire(entry *e)
{
	std::uint64_t v = e->refs.load(std::memory_order_relaxed);

	do {
		if (v & entry::DEAD)
			return false;
	} while (!e->refs.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
						std::memory_order_relaxed));
	return true;
}

entry *ummunot_cache::lookup(const snapshot *s, std::uint64_t a, std::uint64_t b,
			     int access)
{
	const std::uint64_t *starts = s->starts;
	std::size_t n = s->size();

	if (n == 0)
		return nullptr;
	// lo = the first entry starting after a; candidates are before it.
	// Branch-free halving (the comparison becomes a conditional move):
	// random lookups make every branch of a classic binary search a coin
	// toss for the predictor, which cost more than the loads.
	const std::uint64_t *base = starts;
	while (n > 1) {
		std::size_t half = n / 2;
		base = base[half] <= a ? base + half : base;
		n -= half;
	}
	std::size_t lo = static_cast<std::size_t>(base - starts) + (*base <= a);
	for (std::size_t i = lo; i-- > 0;) {
		if (starts[i] + s->max_len <= a)
			break;		// nothing earlier can reach a
		if (s->ends[i] < b)
			continue;
		entry *e = s->ents[i];
		if ((e->pub.access & access) == access && try_acquire(e))
			return e;
	}
	return nullptr;
}

int ummunot_cache::get(std::uint64_t addr, std::uint64_t len, int access,
		       const ummunot_reg **out)
{
	if (!out || len == 0 || access < 0 || addr + len < addr)
		return -EINVAL;
	std::uint64_t a = addr & ~(page_ - 1);
	std::uint64_t b = (addr + len + page_ - 1) & ~(page_ - 1);
	if (b < addr + len)
		return -EINVAL;

	rcu_thread_state &me = rcu_thread_online();
	stat_shard &sh = shards_[me.shard % shards_.size()];
	// (F): pairs with the producer's (E) (the same load as
	// ummunot_monitor::generation(), without the pointer chase).
	// seen_gen_'s acquire pairs with the release in
	// process_events_locked(): if it equals the ring's generation, every
	// event up to there has been processed and its entries are DEAD and
	// unpublished.
	if (ring_load_acquire(gen_word_) != seen_gen_.load(std::memory_order_acquire)) {
		std::lock_guard<std::mutex> g(mu_);
		int r = process_events_locked();
		if (r < 0)
			return r;
	}

	rcu_read_lock();
	// Pairs with the release store in republish_locked().
	entry *e = lookup(index_.load(std::memory_order_acquire), a, b, access);
	rcu_read_unlock();
	if (e) {
		// last_used is stored by put() only: once per get/put pair.
		sh.hits.fetch_add(1, std::memory_order_relaxed);
		*out = &e->pub;
		return 0;
	}

	std::lock_guard<std::mutex> g(mu_);
	int r = process_events_locked();
	if (r < 0)
		return r;
	r = 0;
	// Another thread may have added it meanwhile; under mu_ the snapshot
	// cannot change under us.
	e = lookup(index_.load(std::memory_order_relaxed), a, b, access);
	if (e) {
		sh.hits.fetch_add(1, std::memory_order_relaxed);
	} else {
		sh.misses.fetch_add(1, std::memory_order_relaxed);
		try {
			r = insert_locked(a, b, access, &e);
		} catch (const std::bad_alloc &) {
			r = -ENOMEM;
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
	if (!reg)
		return -EINVAL;
	// pub is the first member of the standard-layout entry.
	entry *e = reinterpret_cast<entry *>(const_cast<ummunot_reg *>(reg));

	e->last_used.store(lru_tick_.load(std::memory_order_relaxed),
			   std::memory_order_relaxed);
	// Release: our use of the registration happens before whoever
	// deregisters it; acquire: if we are that one, we see the others' uses.
	std::uint64_t old = e->refs.fetch_sub(1, std::memory_order_acq_rel);
	if ((old & ~entry::DEAD) == 0) {
		e->refs.fetch_add(1, std::memory_order_relaxed);
		return -EINVAL;		// not held
	}
	if (old == (entry::DEAD | 1)) {
		std::lock_guard<std::mutex> g(mu_);
		finalize_locked(e);
		publish_locked();
	}
	return 0;
}

// Mark e dead (no new users), forget its handle.  Published entries are
// queued for unpublishing; if nobody uses e it is deregistered at once.
void ummunot_cache::kill_locked(entry *e)
{
	std::uint64_t old = e->refs.fetch_or(entry::DEAD, std::memory_order_acq_rel);

	if (old & entry::DEAD)
		return;
	by_handle_.erase(e->handle);
	if (e->in_module) {
		to_unregister_.push_back(e->handle);
		e->in_module = false;
	}
	if (e->pending)
		return;			// insert_locked() cleans up
	killed_.push_back(e);
	if (old == 0)
		finalize_locked(e);
}

// Deregister e (it is DEAD with no users) and retire its memory: readers
// holding an old snapshot may still look at e->refs until a grace period.
void ummunot_cache::finalize_locked(entry *e)
{
	ops_.dereg(ctx_, e->pub.mr);
	deregistrations_++;
	pinned_ -= e->pub.length;
	unlink_live_locked(e);
	e->next = retired_entries_;
	retired_entries_ = e;
	retired_count_++;
}

// Publish a new index: the old one without its DEAD entries, merged with
// add (in any order; usually one entry).  The old index is already sorted,
// so this is one linear merge, not a sort.
void ummunot_cache::republish_locked(const std::vector<entry *> &add)
{
	snapshot *old = index_.load(std::memory_order_relaxed);
	std::vector<entry *> in(add);

	std::sort(in.begin(), in.end(),
		  [](const entry *x, const entry *y) { return x->start() < y->start(); });
	// Exactly sized: DEAD only changes under mu_, so the count holds.
	std::size_t live = in.size();
	for (std::size_t i = 0; i < old->size(); i++)
		live += !(old->ents[i]->refs.load(std::memory_order_relaxed) & entry::DEAD);
	snapshot *s = snapshot::create(live).release();
	std::size_t k = 0;
	for (std::size_t i = 0; i < old->size(); i++) {
		entry *e = old->ents[i];
		if (e->refs.load(std::memory_order_relaxed) & entry::DEAD)
			continue;
		for (; k < in.size() && in[k]->start() < e->start(); k++)
			s->push_back(in[k]);
		s->push_back(e);
	}
	for (; k < in.size(); k++)
		s->push_back(in[k]);
	// Release: the entries' contents and DEAD marks of the dropped ones are
	// visible to readers that load the new snapshot (acquire in get()).
	index_.store(s, std::memory_order_release);
	old->next_retired = retired_snaps_;
	retired_snaps_ = old;
	retired_count_++;
	killed_.clear();
}

void ummunot_cache::unregister_locked()
{
	std::uint64_t chunk = mon_->hello().max_regions;

	for (std::size_t i = 0; i < to_unregister_.size(); i += chunk) {
		std::size_t n = std::min<std::size_t>(chunk, to_unregister_.size() - i);
		// Failure would only leave a quiet region behind in the module.
		(void)mon_->handles_op(UMMUNOT_IOC_UNREGISTER, &to_unregister_[i],
				       static_cast<unsigned int>(n), nullptr);
	}
	to_unregister_.clear();
}

std::size_t ummunot_cache::drop_all_locked()
{
	std::vector<entry *> v;

	v.reserve(by_handle_.size());
	for (auto &kv : by_handle_)
		v.push_back(kv.second);
	for (entry *e : v)
		kill_locked(e);
	return v.size();
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
			// RESYNC first, then drain, then drop everything.
			int r = mon_->resync(nullptr);
			if (r)
				return r;
			// Index 0: invalidated by the library itself (the
			// entries being added are not counted, they are retried).
			std::size_t n = 0;
			for (auto &kv : by_handle_)
				n += !kv.second->pending;
			drop_all_locked();
			invalidations_[0] += n;
			resyncs_++;
			published = false;
			continue;
		}
		if (n < 0)
			return n;
		total += n;
		if (complete) {
			if (!killed_.empty())
				republish_locked({});
			unregister_locked();
			// Pairs with the acquire in get().
			seen_gen_.store(g, std::memory_order_release);
			if (total || !published)
				publish_locked();
			return total;
		}
	}
}

int ummunot_cache::evict_locked(std::uint64_t bytes_target, std::uint64_t entries_target,
				const std::vector<entry *> &keep)
{
	snapshot *s = index_.load(std::memory_order_relaxed);
	std::vector<entry *> cand;
	std::uint64_t count = s->size();
	int n = 0;

	for (std::size_t i = 0; i < s->size(); i++)
		if (entry *e = s->ents[i]; e->refs.load(std::memory_order_relaxed) == 0 &&
		    std::find(keep.begin(), keep.end(), e) == keep.end())
			cand.push_back(e);
	std::stable_sort(cand.begin(), cand.end(), [](const entry *x, const entry *y) {
		return x->last_used.load(std::memory_order_relaxed) <
		       y->last_used.load(std::memory_order_relaxed);
	});
	for (entry *e : cand) {
		if (pinned_ <= bytes_target && count <= entries_target)
			break;
		std::uint64_t z = 0;
		// Fails if a reader took it since we looked: then it stays.
		if (!e->refs.compare_exchange_strong(z, entry::DEAD, std::memory_order_acq_rel))
			continue;
		by_handle_.erase(e->handle);
		to_unregister_.push_back(e->handle);
		e->in_module = false;
		killed_.push_back(e);
		finalize_locked(e);
		evictions_++;
		count--;
		n++;
	}
	if (!killed_.empty())
		republish_locked({});
	unregister_locked();
	return n;
}

int ummunot_cache::make_room_locked(std::uint64_t bytes, std::size_t removed,
				    const std::vector<entry *> &keep)
{
	if (bytes > max_pinned_)
		return -ENOSPC;
	std::uint64_t bytes_target = max_pinned_ - bytes;
	std::uint64_t entries_target = max_entries_ - 1 + removed;

	evict_locked(bytes_target, entries_target, keep);
	if (pinned_ > bytes_target ||
	    index_.load(std::memory_order_relaxed)->size() > entries_target)
		return -ENOSPC;
	return 0;
}

int ummunot_cache::insert_locked(std::uint64_t a, std::uint64_t b, int access,
				 entry **out)
{
	if (b - a > max_pinned_)
		return -E2BIG;

	// Merge with overlapping or adjacent entries of the same access.
	snapshot *s = index_.load(std::memory_order_relaxed);
	std::vector<entry *> chosen;
	std::uint64_t ns = a, ne = b;
	// Candidates start at or before ne and end at or after ns: a binary
	// search on starts[] and a backwards walk bounded by max_len, instead
	// of looking at every entry.
	for (bool grew = true; grew;) {
		grew = false;
		std::size_t hi = static_cast<std::size_t>(
			std::upper_bound(s->starts, s->starts + s->size(), ne) - s->starts);
		for (std::size_t i = hi; i-- > 0;) {
			if (s->starts[i] + s->max_len < ns)
				break;		// nothing earlier reaches ns
			entry *e = s->ents[i];
			if (s->ends[i] < ns || e->pub.access != access ||
			    std::find(chosen.begin(), chosen.end(), e) != chosen.end())
				continue;
			chosen.push_back(e);
			ns = std::min(ns, e->start());
			ne = std::max(ne, e->end());
			grew = true;
		}
	}
	int r = ne - ns <= max_pinned_ ? make_room_locked(ne - ns, chosen.size(), chosen)
				       : -ENOSPC;
	if (r && !chosen.empty()) {
		// Merged it does not fit; try the request alone.
		chosen.clear();
		ns = a;
		ne = b;
		r = make_room_locked(ne - ns, 0, chosen);
	}
	if (r)
		return r;

	auto e = std::make_unique<entry>();
	e->pub.access = access;
	e->pending = true;

	// Give up the merge: register [a, b) alone.  Used when the merged range
	// could not be pinned (a neighbour was unmapped after the drain: its
	// pages are gone, ours are not) or changed while being pinned (a retry
	// of the union would pin the same stale neighbour again).
	auto unmerge = [&]() {
		chosen.clear();
		ns = a;
		ne = b;
		return make_room_locked(ne - ns, 0, chosen);
	};

	for (unsigned int attempt = 0;;) {
		e->pub.addr = ns;
		e->pub.length = ne - ns;

		// 1. Watch the range: from here on every change produces an event.
		ummunot_region rg{};
		rg.start = ns;
		rg.length = ne - ns;
		e->cookie = next_cookie_++;
		rg.cookie = e->cookie;
		r = mon_->register_regions(&rg, 1, nullptr);
		if (r)
			return r;
		e->handle = rg.handle;
		e->in_module = true;
		e->refs.store(0, std::memory_order_relaxed);
		by_handle_[e->handle] = e.get();

		// 2. Pin it.
		void *mr = nullptr;
		std::uint32_t lkey = 0, rkey = 0;
		r = ops_.reg(ctx_, reinterpret_cast<void *>(ns), ne - ns, access, &mr, &lkey, &rkey);
		if (r == -ENOMEM) {
			evict_locked(0, 0, chosen);
			r = ops_.reg(ctx_, reinterpret_cast<void *>(ns), ne - ns, access,
				     &mr, &lkey, &rkey);
		}
		if (r) {
			kill_locked(e.get());
			unregister_locked();
			if (chosen.empty())
				return r;
			// Whatever the error, the request alone may still pin.
			r = unmerge();
			if (r)
				return r;
			continue;
		}
		registrations_++;
		pinned_ += ne - ns;
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
			kill_locked(e.get());
		unregister_locked();
		ops_.dereg(ctx_, mr);
		deregistrations_++;
		pinned_ -= ne - ns;
		if (r)
			return r;
		race_retries_++;
		if (++attempt == race_attempts)
			return -EAGAIN;
		if (!chosen.empty()) {
			r = unmerge();
			if (r)
				return r;
		}
	}

	// 4. Publish, holding one reference for the caller.
	e->pending = false;
	e->refs.store(1, std::memory_order_relaxed);
	lru_tick_.fetch_add(1, std::memory_order_relaxed);
	for (entry *c : chosen) {
		if (c->refs.load(std::memory_order_relaxed) & entry::DEAD)
			continue;
		kill_locked(c);
		merges_++;
	}
	entry *raw = e.release();
	link_live_locked(raw);
	republish_locked({raw});
	unregister_locked();
	*out = raw;
	return 0;
}

// live_: every registered entry not yet deregistered (published, or DEAD
// and still held), for the destructor.  An intrusive list: no node or
// bucket per entry.
void ummunot_cache::link_live_locked(entry *e)
{
	e->prev = nullptr;
	e->next = live_;
	if (live_)
		live_->prev = e;
	live_ = e;
}

void ummunot_cache::unlink_live_locked(entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		live_ = e->next;
	if (e->next)
		e->next->prev = e->prev;
	e->prev = e->next = nullptr;
}

void ummunot_cache::reclaim_locked(bool force)
{
	if (!retired_count_ || (!force && retired_count_ < reclaim_batch))
		return;
	// Every reader that could still hold a retired snapshot or entry was
	// inside a read-side critical section that began before they were
	// unpublished; wait for those to finish.
	rcu_synchronize();
	for (entry *e = retired_entries_; e;) {
		entry *n = e->next;
		delete e;
		e = n;
	}
	for (snapshot *s = retired_snaps_; s;) {
		snapshot *n = s->next_retired;
		snapshot::destroy(s);
		s = n;
	}
	retired_entries_ = nullptr;
	retired_snaps_ = nullptr;
	retired_count_ = 0;
}

int ummunot_cache::poll()
{
	std::lock_guard<std::mutex> g(mu_);
	int r = process_events_locked();
	reclaim_locked(false);
	publish_locked();
	return r;
}

int ummunot_cache::flush()
{
	std::lock_guard<std::mutex> g(mu_);
	int r = process_events_locked();
	if (r < 0)
		return r;
	std::uint64_t before = evictions_;
	evict_locked(0, 0, {});
	reclaim_locked(true);
	publish_locked();
	return static_cast<int>(evictions_ - before);
}

void ummunot_cache::stats(struct ummunot_cache_stats *st)
{
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
	st->entries = index_.load(std::memory_order_relaxed)->size();
	st->pinned_bytes = pinned_;
	st->max_pinned_bytes = max_pinned_;
	st->max_entries = max_entries_;
	publish_locked();
}

// Copy the counters into the ring's user area (include/ummunot/user_area.h),
// one relaxed 64-bit store per word: readers (fdinfo) promise no
// consistency across words.  Only slow paths call this; hits and misses
// are summed from the per-thread shards here, so the published hits lag
// until the next slow-path operation (Documentation/library.rst).
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
	ring_store_relaxed(&ua->entries, index_.load(std::memory_order_relaxed)->size());
	ring_store_relaxed(&ua->registrations, registrations_);
	ring_store_relaxed(&ua->deregistrations, deregistrations_);
}

namespace ummunot::detail {

static int check_cache_args(const ummunot_backend_ops *ops, const ummunot_cache_attr *attr,
			    ummunot_cache **out)
{
	if (!out || !ops || !ops->reg || !ops->dereg)
		return -EINVAL;
	if (attr && (attr->flags || !zero(attr->resv, 4)))
		return -EINVAL;
	return 0;
}

int cache_create_device(std::unique_ptr<device> dev, const ummunot_backend_ops *ops,
			void *ctx, const ummunot_cache_attr *attr, ummunot_cache **out)
{
	int r = check_cache_args(ops, attr, out);
	if (r)
		return r;
	ummunot_monitor_attr ma{};
	ma.ring_entries = attr ? attr->ring_entries : 0;
	ummunot_monitor *m = nullptr;
	r = monitor_open_device(std::move(dev), &ma, &m);
	if (r)
		return r;
	return ummunot_cache::create(std::unique_ptr<ummunot_monitor>(m), ops, ctx, attr, out);
}

} // namespace ummunot::detail

/* ---------------------------------------------------------------- C API */

extern "C" {

int ummunot_cache_create_backend(const struct ummunot_backend_ops *ops, void *ctx,
				 const struct ummunot_cache_attr *attr,
				 struct ummunot_cache **cache)
{
	int r = check_cache_args(ops, attr, cache);
	if (r)
		return r;
	try {
		ummunot_monitor_attr ma{};
		ma.device_path = attr ? attr->device_path : nullptr;
		ma.ring_entries = attr ? attr->ring_entries : 0;
		ummunot_monitor *m = nullptr;
		r = ummunot_monitor_open(&ma, &m);
		if (r)
			return r;
		return ummunot_cache::create(std::unique_ptr<ummunot_monitor>(m), ops, ctx,
					     attr, cache);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
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
	return cache->get(reinterpret_cast<std::uintptr_t>(addr), length, access, reg);
}

int ummunot_cache_put(struct ummunot_cache *cache, const struct ummunot_reg *reg)
{
	if (!cache)
		return -EINVAL;
	return cache->put(reg);
}

int ummunot_cache_poll(struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->poll();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
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
	}
}

int ummunot_cache_stats(struct ummunot_cache *cache, struct ummunot_cache_stats *stats)
{
	if (!cache || !stats)
		return -EINVAL;
	cache->stats(stats);
	return 0;
}

struct ummunot_monitor *ummunot_cache_monitor(struct ummunot_cache *cache)
{
	return cache ? cache->monitor() : nullptr;
}

} // extern "C"
