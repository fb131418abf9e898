// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// libummunot-ofi: a libfabric import memory monitor (fi_ext.h, struct
// fid_mem_monitor) backed by a ummunot monitor.  include/ummunot/ofi.h
// states the contract; this comment says how it is kept.
//
// Locking.  libfabric calls subscribe(), valid() and (from 2.1 on)
// unsubscribe() with its mm_lock held, so they never run concurrently with
// each other; start() and stop() run under its mm_state_lock instead.  All
// state lives under one mutex of ours (mu), which the slow paths take; the
// fast path of valid() reads two words without it.  Lock order: mm_lock,
// then mu; nothing of ours calls into libfabric with mu held.
//
// The evictor.  From start() to stop() a thread of ours waits on the
// monitor's fd.  When events arrive it drains the ring (under mu), then,
// with no lock held, tells libfabric which ranges changed
// (import_ops->notify(), which takes mm_lock and drops every cache entry
// overlapping the range: their pages are unpinned at once, not when they
// are next looked up), and unregisters fired regions.  So the ioctls of
// an invalidation run outside mm_lock; under it remain only subscribe()'s
// REGISTER (a miss must be watched before it is cached) and a collection
// when the kernel's table is full.  In a forked child the thread does not
// exist: the drains of valid() and subscribe() do its work, as they do
// when the thread could not be started.
//
// The fast path and the evictor.  valid() answers "valid" without mu when
// the ring's generation equals the one the last complete read consumed up
// to (seen) and no invalidated record is outstanding.  A drain outside
// mm_lock could consume an event (seen moves) before it has marked the
// range invalidated; so every drain first counts itself into the
// invalidated word, then reads (the library stores seen with release at
// the end of a read), and valid() loads the invalidated word after the
// generation check (which loads seen with acquire): a valid() that sees
// the new seen sees the drain's count, and takes the slow path, which
// waits on mu for the drain to finish.
//
// Records.  Every subscribed range [addr, addr + len) has a record: live
// (a ummunot region watches it) or invalidated (its region fired, or the
// ring overflowed, or the table was collected).  An invalidated record
// stays until libfabric has shown that its cache entry is gone: valid()
// answered "invalid" for it (libfabric then uncaches the entry),
// unsubscribe() named it, or subscribe() named the same range again (the
// cache's tree holds one entry per range).  While any invalidated record
// is outstanding valid() takes the slow path: a range with no live record
// is invalid.  The fast path is: nothing invalidated outstanding, and the
// ring's generation did not move since the last complete read.
//
// Invalidated records are bounded: libfabric 1.17 to 2.0 evict entries
// from their cache without telling the monitor, so the record of an evicted
// range whose memory then changes would never be forgotten (200,000 such
// ranges: 200,000 records, 12 MiB).  Past max_invalidated of them, every
// invalidated record is dropped at once and the fast path stays off in
// this process for good (as after a fork): a range with no record is
// answered invalid by the slow path, which is exactly what a dropped
// record said, so only the fast path is lost, not correctness.
//
// Fired regions are unregistered soon (by the evictor, or at once when
// there is none): the kernel's table holds live records only.  libfabric
// 1.17 to 2.0 never unsubscribe, so live records of ranges the cache
// evicted stay until their memory changes; 2.1 unsubscribes every entry it
// drops from its cache (evicted, purged as overlapping, found invalid,
// notified) and a range whose subscribe() failed (unknown here: a no-op).
// A range notified to 1.17 to 2.0 is forgotten by the evictor once
// notify() has returned (no cache entry overlaps it any more).  When the
// kernel refuses a new region (ENOSPC) every range is invalidated and the
// table starts again from what the cache still uses (a "collection": one
// miss per live cache entry).

#include <ummunot/ofi.h>
#include <ummunot/ummunot.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include <sys/eventfd.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace {

struct range_key {
	std::uintptr_t addr;
	std::size_t len;
	bool operator==(const range_key &o) const { return addr == o.addr && len == o.len; }
};

struct range_hash {
	std::size_t operator()(const range_key &k) const noexcept
	{
		std::uint64_t x = k.addr * 0x9e3779b97f4a7c15ull ^ k.len;
		return static_cast<std::size_t>(x ^ (x >> 29));
	}
};

struct record {
	std::uint64_t handle;	// live: the ummunot region
	bool live;
};

using counter = std::atomic<std::uint64_t>;

// Invalidated records kept at most (about 60 bytes each): see "Invalidated
// records are bounded" above.
constexpr std::uint64_t max_invalidated = 16384;

void bump(counter &c, std::uint64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

struct state {
	// First member: libfabric hands this pointer back to every callback.
	fid_mem_monitor fid{};
	fi_ops_mem_monitor ops{};

	std::mutex mu;
	std::atomic<ummunot_monitor *> mon{nullptr};
	// mon's inline "changed?" words (ummunot_monitor_check_init()), or
	// null: the fast path's first word.  Published with a release store
	// after they are filled, loaded with acquire in ofi_valid() (the
	// pair).  One per monitor, never freed: a reader may still hold the
	// previous one (at most one more per forked child that uses us).
	std::atomic<const ummunot_monitor_check *> chk{nullptr};
	// Invalidated records outstanding (the fast path's second word).
	std::atomic<std::uint64_t> invalidated{0};
	std::unordered_map<range_key, record, range_hash> by_range;
	std::unordered_map<std::uint64_t, range_key> by_handle;	// live only
	std::vector<std::uint64_t> unreg;	// fired regions to unregister
	std::vector<range_key> dead;	// invalidated, libfabric not told yet

	counter subscribes{0}, subscribe_errors{0}, unsubscribes{0};
	counter valid_slow{0}, invalid{0}, events{0}, overflows{0};
	counter forks{0}, collections{0}, notified{0};
	// The fast path's second word stays non-zero for good: after a fork
	// or after invalidated records were dropped.
	bool untracked = false;
	// A drain in progress (counted in the fast path's second word).
	bool draining = false;

	// The evictor (see "The evictor" above).  evictor_on: it runs, in
	// this process (under mu; false in a forked child).
	pthread_t evictor{};
	bool evictor_on = false;
	pid_t evictor_pid = 0;
	int wake_fd = -1;			// eventfd: work or stop
	std::atomic<bool> evictor_stop{false};
};

state *g_state;		// set once by a successful import, never freed

#ifdef UMMUNOT_OFI_TEST
void (*test_after_read)();	// ummunot_ofi_test_set_after_read()
#endif
std::mutex g_import_mu;

state *of(fid_mem_monitor *m) { return reinterpret_cast<state *>(m); }

void warn(const char *fmt, int err)
{
	std::fprintf(stderr, "libummunot-ofi: ");
	std::fprintf(stderr, fmt, std::strerror(err));
	std::fputc('\n', stderr);
}

// --- under s->mu ------------------------------------------------------

#ifndef UMMUNOT_OFI_TEST_NO_DRAIN_COUNT
constexpr std::uint64_t drain_count = 1;
#else
constexpr std::uint64_t drain_count = 0;
#endif

// The invalidated records outstanding, as the fast path's word counts
// them (it also counts untracked and a drain in progress).
std::uint64_t nr_invalidated(const state *s)
{
	return s->invalidated.load(std::memory_order_relaxed) - (s->untracked ? 1 : 0) -
	       (s->draining ? drain_count : 0);
}

// Too many invalidated records: drop them all and keep the fast path off.
// Relative updates only: a drain's own count stays in the word.
void drop_invalidated(state *s)
{
	std::uint64_t n = nr_invalidated(s);

	for (auto it = s->by_range.begin(); it != s->by_range.end();)
		it = it->second.live ? std::next(it) : s->by_range.erase(it);
	s->dead.clear();	// a range with no record is invalid anyway
	if (!s->untracked) {
		s->untracked = true;
		s->invalidated.fetch_add(1, std::memory_order_relaxed);
	}
	s->invalidated.fetch_sub(n, std::memory_order_relaxed);
}

bool evictor_here(const state *s) { return s->evictor_on && s->evictor_pid == getpid(); }

void invalidate(state *s, std::unordered_map<range_key, record, range_hash>::iterator it)
{
	if (!it->second.live)
		return;
	s->unreg.push_back(it->second.handle);
	s->by_handle.erase(it->second.handle);
	it->second.live = false;
	s->invalidated.fetch_add(1, std::memory_order_relaxed);
	if (evictor_here(s))
		s->dead.push_back(it->first);
}

// After a batch of invalidate() calls (not inside one: they hold iterators).
void bound_invalidated(state *s)
{
	if (nr_invalidated(s) > max_invalidated)
		drop_invalidated(s);
}

void invalidate_all(state *s)
{
	for (auto it = s->by_range.begin(); it != s->by_range.end(); ++it)
		invalidate(s, it);
	bound_invalidated(s);
}

void forget(state *s, std::unordered_map<range_key, record, range_hash>::iterator it)
{
	if (it->second.live) {
		s->unreg.push_back(it->second.handle);
		s->by_handle.erase(it->second.handle);
	} else {
		s->invalidated.fetch_sub(1, std::memory_order_relaxed);
	}
	s->by_range.erase(it);
}

// Unregister the regions that fired or were invalidated.  Failures leave
// a region in the kernel's table that nothing refers to: it reports once
// into an event nobody matches, which is harmless.
void flush_unreg(state *s)
{
	ummunot_monitor *m = s->mon.load(std::memory_order_relaxed);
	std::size_t done = 0;

	while (done < s->unreg.size()) {
		unsigned int n = static_cast<unsigned int>(std::min<std::size_t>(s->unreg.size() - done, 256));
		unsigned int bad = n;
		int r = ummunot_monitor_unregister(m, s->unreg.data() + done, n, &bad);

		if (r < 0 && bad < n) {
			// Skip the one at fault (e.g. ENOENT) and go on.
			done += bad + 1;
			continue;
		}
		done += n;
	}
	s->unreg.clear();
}

// Read every pending event; if the ring cannot be read, every range is
// invalid.  Fired regions are left in unreg (flush_unreg()) and the ranges
// in dead for the evictor.
void drain_events(state *s)
{
	ummunot_monitor *m = s->mon.load(std::memory_order_relaxed);
	ummunot_event ev[64];

	// Counted in the fast path's word before the read can move seen (see
	// "The fast path and the evictor"): the library's store-release of
	// seen orders this count before it.
	s->draining = true;
#ifndef UMMUNOT_OFI_TEST_NO_DRAIN_COUNT	// the negative control's build only
	s->invalidated.fetch_add(1, std::memory_order_relaxed);
#endif
	for (;;) {
		int n = ummunot_monitor_read(m, ev, 64);

		if (n == -EOVERFLOW) {
			std::uint64_t dropped = 0;

			bump(s->overflows);
			int r = ummunot_monitor_resync(m, &dropped);
			if (r < 0)
				warn("resync after an overflow failed: %s", -r);
			invalidate_all(s);
			continue;	// then read what came after
		}
		if (n < 0) {
			warn("reading the event ring failed: %s; every range is invalid", -n);
			invalidate_all(s);
			break;
		}
		bump(s->events, static_cast<std::uint64_t>(n));
#ifdef UMMUNOT_OFI_TEST
		// Tests: the window between consuming events and marking them.
		if (n > 0 && test_after_read)
			test_after_read();
#endif
		for (int i = 0; i < n; i++) {
			auto h = s->by_handle.find(ev[i].handle);
			if (h == s->by_handle.end())
				continue;	// unregistered since: already invalid
			invalidate(s, s->by_range.find(h->second));
		}
		bound_invalidated(s);
		if (n < 64)
			break;
	}
#ifndef UMMUNOT_OFI_TEST_NO_DRAIN_COUNT
	s->invalidated.fetch_sub(1, std::memory_order_relaxed);
#endif
	s->draining = false;
}

void wake_evictor(state *s)
{
	std::uint64_t one = 1;

	if (write(s->wake_fd, &one, sizeof(one)) < 0) {
		// EAGAIN: the counter is full, the evictor is awake anyway.
	}
}

// A drain under libfabric's mm_lock (valid(), subscribe()): the evictor,
// when there is one, unregisters and notifies outside that lock.
void drain(state *s)
{
	drain_events(s);
	if (evictor_here(s)) {
		if (!s->dead.empty())
			wake_evictor(s);
	} else if (!s->unreg.empty()) {
		flush_unreg(s);
	}
}

// Publish m's inline check words (null if they cannot be had: the fast
// path then stays off and every hit asks the slow path).
void publish_check(state *s, ummunot_monitor *m)
{
	auto *c = new (std::nothrow) ummunot_monitor_check{};
	if (c)
		c->size = sizeof(*c);
	if (c && ummunot_monitor_check_init(m, c) < 0) {
		delete c;
		c = nullptr;
	}
	// release: pairs with the acquire load in ofi_valid(); the words
	// are filled before a hit can use them.
	s->chk.store(c, std::memory_order_release);
}

// In a forked child the inherited monitor refuses every call (-ECHILD):
// nothing the parent subscribed is watched here.  Forget it all (every
// inherited cache entry then has no record: invalid) and open our own.
int ensure_owner(state *s)
{
	ummunot_monitor *m = s->mon.load(std::memory_order_relaxed);

	if (m && ummunot_monitor_changed(m) != -ECHILD)
		return 0;
	if (m) {
		bump(s->forks);
		// The evictor was not forked with us.
		s->evictor_on = false;
		s->dead.clear();
		// The inherited check words say "changed" here (fork):
		// dropped, not freed (a hit may be reading them).
		s->chk.store(nullptr, std::memory_order_relaxed);
		ummunot_monitor_close(m);	// the child's copy only
		s->mon.store(nullptr, std::memory_order_relaxed);
	}
	s->by_range.clear();
	s->by_handle.clear();
	s->unreg.clear();
	s->untracked = true;
	// Every inherited cache entry is invalid now (it has no record), and
	// nothing says when the last of them is gone (libfabric 1.17 to 2.0
	// never unsubscribe; 2.1 does, but ranges the child no longer knows
	// cannot be counted down): in this child
	// the fast path stays off for good (one count that is never taken
	// back), so that no inherited entry is ever answered "valid".
	s->invalidated.store(1, std::memory_order_relaxed);

	ummunot_monitor *nm = nullptr;
	int r = ummunot_monitor_open(nullptr, &nm);
	if (r < 0)
		return r;
	s->mon.store(nm, std::memory_order_relaxed);
	publish_check(s, nm);
	return 0;
}

// --- fi_ops_mem_monitor -----------------------------------------------

// libfabric's notify(), if this libfabric gave us one.
using notify_fn = void (*)(fid_mem_monitor *, const void *, std::size_t);

notify_fn notifier(const state *s)
{
	const fi_ops_mem_notify *ops = s->fid.import_ops;

	if (!ops || ops->size < offsetof(fi_ops_mem_notify, notify) + sizeof(ops->notify))
		return nullptr;
	return ops->notify;
}

// The evictor's round: drain, unregister, then tell libfabric with no lock
// held; a 1.17-2.0 range so notified is forgotten afterwards (2.1's
// unsubscribe() has done it already).
void evictor_round(state *s, notify_fn notify)
{
	std::vector<range_key> todo;
	{
		std::lock_guard<std::mutex> g(s->mu);

		if (!evictor_here(s))
			return;
		drain_events(s);
		if (!s->unreg.empty())
			flush_unreg(s);
		todo.swap(s->dead);
	}
	if (todo.empty())
		return;
	if (notify) {
		for (const range_key &k : todo)
			notify(&s->fid, reinterpret_cast<const void *>(k.addr), k.len);
		bump(s->notified, todo.size());
	}
	std::lock_guard<std::mutex> g(s->mu);
	if (!notify || !evictor_here(s))
		return;
	for (const range_key &k : todo) {
		auto it = s->by_range.find(k);
		if (it != s->by_range.end() && !it->second.live)
			forget(s, it);
	}
	if (!s->unreg.empty())
		flush_unreg(s);
}

void *evictor_main(void *arg)
{
	state *s = static_cast<state *>(arg);
	notify_fn notify = notifier(s);
	int fd;
	{
		std::lock_guard<std::mutex> g(s->mu);
		fd = ummunot_monitor_fd(s->mon.load(std::memory_order_relaxed));
		// glibc gives a thread its own malloc arena at its first
		// allocation: a new mapping of 64 MiB or more.  Take it here,
		// at start, and not in the first round, which runs while the
		// application is between the munmap() that fired and the mmap()
		// that reuses the address (an mmap() with the old address as its
		// hint then lands elsewhere: tests/ofi's fork-munmap case saw
		// it).  A round of up to 256 fired regions then allocates nothing.
		s->unreg.reserve(256);
		s->dead.reserve(256);
	}
	pollfd p[2] = {{fd, POLLIN, 0}, {s->wake_fd, POLLIN, 0}};

	while (!s->evictor_stop.load(std::memory_order_acquire)) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			warn("the evictor's poll failed: %s; it stops", errno);
			break;
		}
		if (p[1].revents & POLLIN) {
			std::uint64_t v;
			if (read(s->wake_fd, &v, sizeof(v)) < 0) {
				// EAGAIN: another round emptied it.
			}
		}
		if (p[0].revents & (POLLERR | POLLNVAL)) {
			// Not ours any more (cannot happen in the owner):
			// the locked paths go on without the evictor.
			warn("the monitor's fd reported an error: %s; the evictor stops", EIO);
			break;
		}
		evictor_round(s, notify);
	}
	std::lock_guard<std::mutex> g(s->mu);
	if (!s->evictor_stop.load(std::memory_order_relaxed))
		s->evictor_on = false;	// gave up: the locked paths flush
	return nullptr;
}

// Under libfabric's mm_state_lock, when the first cache starts using us.
int ofi_start(fid_mem_monitor *fm)
{
	state *s = of(fm);
	std::lock_guard<std::mutex> g(s->mu);

	if (evictor_here(s) || s->wake_fd < 0 || ensure_owner(s) < 0 ||
	    ummunot_monitor_fd(s->mon.load(std::memory_order_relaxed)) < 0)
		return 0;	// no evictor: the locked paths do its work
	s->evictor_stop.store(false, std::memory_order_relaxed);
	int r = pthread_create(&s->evictor, nullptr, evictor_main, s);
	if (r) {
		warn("cannot start the evictor thread: %s; invalidated registrations "
		     "leave libfabric's cache when next looked up", r);
		return 0;
	}
	s->evictor_on = true;
	s->evictor_pid = getpid();
	return 0;
}

// Stops the evictor (not under mu: it may be waiting for it).
void stop_evictor(state *s)
{
	{
		std::lock_guard<std::mutex> g(s->mu);
		if (s->evictor_pid != getpid() || !s->evictor_on) {
			// None, or the parent's (not forked with us).
			s->evictor_on = false;
			s->evictor_pid = 0;
			return;
		}
		s->evictor_stop.store(true, std::memory_order_release);
	}
	wake_evictor(s);
	pthread_join(s->evictor, nullptr);
	std::lock_guard<std::mutex> g(s->mu);
	s->evictor_on = false;
	s->evictor_pid = 0;
	s->dead.clear();
}

void ofi_stop(fid_mem_monitor *fm)
{
	state *s = of(fm);

	stop_evictor(s);
	std::lock_guard<std::mutex> g(s->mu);

	// No cache is left: nothing will ask about these ranges again.
	if (ensure_owner(s) == 0) {
		for (auto &[k, rec] : s->by_range)
			if (rec.live)
				s->unreg.push_back(rec.handle);
		flush_unreg(s);
	}
	s->by_range.clear();
	s->by_handle.clear();
	s->unreg.clear();
	s->untracked = false;
	s->invalidated.store(0, std::memory_order_relaxed);
}

int ofi_subscribe(fid_mem_monitor *fm, const void *addr, std::size_t len)
{
	state *s = of(fm);
	std::lock_guard<std::mutex> g(s->mu);
	range_key k{reinterpret_cast<std::uintptr_t>(addr), len};

	bump(s->subscribes);
	if (len == 0) {
		bump(s->subscribe_errors);
		return -FI_EINVAL;
	}
	if (int r = ensure_owner(s); r < 0) {
		bump(s->subscribe_errors);
		return r;
	}
	// An event pending for this range must not leave it "live".
	drain(s);

	auto it = s->by_range.find(k);
	if (it != s->by_range.end()) {
		if (it->second.live)
			return 0;	// still watched, nothing changed since
		forget(s, it);		// its old cache entry is gone
	}

	for (int attempt = 0;; attempt++) {
		ummunot_region reg{};
		reg.start = k.addr;
		reg.length = k.len;
		int r = ummunot_monitor_register(s->mon.load(std::memory_order_relaxed), &reg, 1, nullptr);

		if (r == 0) {
			s->by_range.emplace(k, record{reg.handle, true});
			s->by_handle.emplace(reg.handle, k);
			return 0;
		}
		if (r == -ENOSPC && attempt == 0 && !s->by_handle.empty()) {
			// Collect: libfabric 1.17 to 2.0 never say which
			// ranges they evicted (2.1 unsubscribes them), so
			// invalidate them all; what it still uses comes back
			// one miss at a time.
			bump(s->collections);
			invalidate_all(s);
			flush_unreg(s);
			continue;
		}
		bump(s->subscribe_errors);
		return r;	// libfabric keeps the registration uncached
	}
}

void ofi_unsubscribe(fid_mem_monitor *fm, const void *addr, std::size_t len)
{
	state *s = of(fm);
	std::lock_guard<std::mutex> g(s->mu);
	range_key k{reinterpret_cast<std::uintptr_t>(addr), len};

	bump(s->unsubscribes);
	if (ensure_owner(s) < 0)
		return;
	auto it = s->by_range.find(k);
	if (it == s->by_range.end())
		return;
	forget(s, it);
	// Under mm_lock: the evictor unregisters it with its next round (an
	// event of the region before that is one nobody matches).
	if (!s->unreg.empty() && !evictor_here(s))
		flush_unreg(s);
}

bool ofi_valid_slow(state *s, const void *addr, std::size_t len)
{
	std::lock_guard<std::mutex> g(s->mu);
	range_key k{reinterpret_cast<std::uintptr_t>(addr), len};

	bump(s->valid_slow);
	if (ensure_owner(s) < 0) {
		bump(s->invalid);
		return false;
	}
	drain(s);
	auto it = s->by_range.find(k);
	if (it != s->by_range.end() && it->second.live)
		return true;
	if (it != s->by_range.end())
		forget(s, it);	// libfabric uncaches the entry on "false"
	bump(s->invalid);
	return false;
}

// Runs on every cache hit, under libfabric's mm_lock.
bool ofi_valid(fid_mem_monitor *fm, const void *addr, std::size_t len)
{
	state *s = of(fm);

	// acquire: pairs with the release store in publish_check().
	const ummunot_monitor_check *c = s->chk.load(std::memory_order_acquire);
	// Inline, no call: the fork check, then the acquire load (F) of the
	// ring's generation (pairs with the kernel's (E)) against the one the
	// last complete read consumed up to; 0: no event since the last read.
	// Then no invalidated record and no drain: seen was loaded with
	// acquire, so a seen moved by a drain comes with the drain's count.
	if (c && ummunot_monitor_check_changed(c) == 0 &&
	    s->invalidated.load(std::memory_order_relaxed) == 0)
		return true;
	return ofi_valid_slow(s, addr, len);
}

int ofi_close(fid *)
{
	return 0;	// the state lives as long as the process
}

int ofi_no_bind(fid *, fid *, std::uint64_t) { return -FI_ENOSYS; }
int ofi_no_control(fid *, int, void *) { return -FI_ENOSYS; }
int ofi_no_ops_open(fid *, const char *, std::uint64_t, void **, void *) { return -FI_ENOSYS; }
int ofi_no_tostr(const fid *, char *, std::size_t) { return -FI_ENOSYS; }
int ofi_no_ops_set(fid *, const char *, std::uint64_t, void *, void *) { return -FI_ENOSYS; }

// UMMUNOT_OFI_RING_ENTRIES: the ring's size (0 or unset: the module's
// default).  More events than this between two looks at the ring is an
// overflow: every range invalid, one miss per cache entry in use.
std::uint32_t ring_entries_from_env()
{
	const char *e = std::getenv("UMMUNOT_OFI_RING_ENTRIES");

	if (!e || !*e)
		return 0;
	char *end;
	errno = 0;
	unsigned long v = std::strtoul(e, &end, 0);
	if (errno || *end || v > UINT32_MAX || e[0] == '-') {
		std::fprintf(stderr, "libummunot-ofi: ignoring UMMUNOT_OFI_RING_ENTRIES='%s' "
			     "(expected a number of ring entries)\n", e);
		return 0;
	}
	return static_cast<std::uint32_t>(v);
}

fi_ops g_fid_ops = {
	sizeof(fi_ops),
	ofi_close,
	ofi_no_bind,
	ofi_no_control,
	ofi_no_ops_open,
	ofi_no_tostr,
	ofi_no_ops_set,
};

// The monitor libfabric is given, over m.
state *make_state(ummunot_monitor *m)
{
	state *s = new (std::nothrow) state;
	if (!s)
		return nullptr;
	s->mon.store(m, std::memory_order_relaxed);
	publish_check(s, m);
	// Without it there is no evictor (start() checks).
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->ops.size = sizeof(s->ops);
	s->ops.start = ofi_start;
	s->ops.stop = ofi_stop;
	s->ops.subscribe = ofi_subscribe;
	s->ops.unsubscribe = ofi_unsubscribe;
	s->ops.valid = ofi_valid;
	s->fid.fid.fclass = FI_CLASS_MEM_MONITOR;
	s->fid.fid.context = s;
	s->fid.fid.ops = &g_fid_ops;
	s->fid.export_ops = &s->ops;
	return s;
}

int fill_stats(state *s, struct ummunot_ofi_stats *stats, size_t size)
{
	struct ummunot_ofi_stats v{};
	auto ld = [](const counter &c) { return c.load(std::memory_order_relaxed); };
	v.subscribes = ld(s->subscribes);
	v.subscribe_errors = ld(s->subscribe_errors);
	v.unsubscribes = ld(s->unsubscribes);
	v.valid_slow = ld(s->valid_slow);
	v.invalid = ld(s->invalid);
	v.events = ld(s->events);
	v.overflows = ld(s->overflows);
	v.forks = ld(s->forks);
	v.collections = ld(s->collections);
	v.notified = ld(s->notified);
	{
		std::lock_guard<std::mutex> g(s->mu);
		v.regions = s->by_handle.size();
		v.invalidated = nr_invalidated(s);
	}
	std::size_t n = std::min(size, sizeof(v));
	std::memcpy(stats, &v, n);
	if (size > n)
		std::memset(reinterpret_cast<char *>(stats) + n, 0, size - n);
	return static_cast<int>(n);
}

} // namespace

#ifdef UMMUNOT_OFI_TEST
// Tests only (tests/unit/test_ofi_monitor.cpp; never in libummunot-ofi.so):
// the monitor ummunot_ofi_import() would give libfabric, over m (the fake
// device's), without fi_import(); its counters; and its end (the imported
// one is never freed), which closes m.
fid_mem_monitor *ummunot_ofi_test_monitor(ummunot_monitor *m)
{
	state *s = make_state(m);
	return s ? &s->fid : nullptr;
}

void ummunot_ofi_test_free(fid_mem_monitor *fm)
{
	state *s = of(fm);
	stop_evictor(s);
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	ummunot_monitor_close(s->mon.load(std::memory_order_relaxed));
	delete s->chk.load(std::memory_order_relaxed);
	delete s;
}

int ummunot_ofi_test_stats(fid_mem_monitor *fm, struct ummunot_ofi_stats *stats)
{
	return fill_stats(of(fm), stats, sizeof(*stats));
}

void ummunot_ofi_test_set_after_read(void (*fn)())
{
	test_after_read = fn;
}

// What the evictor does with the ring, outside libfabric's lock.
void ummunot_ofi_test_drain(fid_mem_monitor *fm)
{
	state *s = of(fm);
	std::lock_guard<std::mutex> g(s->mu);
	drain_events(s);
	if (!s->unreg.empty())
		flush_unreg(s);
}
#endif

extern "C" {

int ummunot_ofi_import(unsigned int flags)
{
	if (flags)
		return -EINVAL;
	std::lock_guard<std::mutex> g(g_import_mu);
	if (g_state)
		return -EALREADY;
	if (const char *e = std::getenv("FI_MR_CACHE_MONITOR"); e && *e)
		return -ENOTSUP;

	ummunot_monitor *m = nullptr;
	ummunot_monitor_attr attr{};
	attr.ring_entries = ring_entries_from_env();
	if (int r = ummunot_monitor_open(&attr, &m); r < 0)
		return r;

	state *s = make_state(m);
	if (!s) {
		ummunot_monitor_close(m);
		return -ENOMEM;
	}

	int r = fi_import(FI_VERSION(1, 13), "mr_cache", nullptr, 0, 0, &s->fid.fid, s);
	if (r != 0) {
		if (s->wake_fd >= 0)
			close(s->wake_fd);
		delete s->chk.load(std::memory_order_relaxed);
		ummunot_monitor_close(m);
		delete s;
		// libfabric returns -FI_Exxx, which are -errno values.
		return r == -FI_ENOSYS ? -ENOSYS : r;
	}
	g_state = s;
	return 0;
}

int ummunot_ofi_stats(struct ummunot_ofi_stats *stats, size_t size)
{
	if (!stats || size < sizeof(std::uint64_t))
		return -EINVAL;
	state *s;
	{
		std::lock_guard<std::mutex> g(g_import_mu);
		s = g_state;
	}
	if (!s)
		return -ENOENT;

	return fill_stats(s, stats, size);
}

} // extern "C"
