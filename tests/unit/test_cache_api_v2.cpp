// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The 0.2 API that transports need: private data per registration,
// caller-driven invalidation, a size above which nothing is cached, the fd
// accessor, extensible structs, shared budgets, and the cache's monitor
// that refuses to be changed under the cache.
#include "catch.hpp"

#include <cstring>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.hpp"

using namespace test;

namespace {

struct cache2 {
	backend be;
	fake_device *fake = nullptr;
	ummunot_cache *cache = nullptr;
	ummunot_cache_ops ops = be.ops2();

	explicit cache2(ummunot_cache_config cfg)
	{
		cfg.size = sizeof(cfg);
		auto dev = std::make_unique<fake_device>();
		fake = dev.get();
		REQUIRE(ummunot::detail::cache_create_device_ops(std::move(dev), &ops, &be, &cfg,
								 &cache) == 0);
	}
	~cache2()
	{
		ummunot_cache_destroy(cache);
		CHECK(be.live() == 0);
	}
	const ummunot_reg *get(std::uint64_t a, std::uint64_t len)
	{
		const ummunot_reg *r = nullptr;
		return ummunot_cache_get(cache, at(a), len, 1, &r) ? nullptr : r;
	}
	struct ummunot_cache_stats_ext stats()
	{
		struct ummunot_cache_stats_ext s{};
		REQUIRE(ummunot_cache_stats_ext(cache, &s, sizeof(s)) == sizeof(s));
		return s;
	}
};

// Drop or raise CAP_IPC_LOCK in the effective set (the tests run as root
// in CI; the permitted set keeps it, so it can be raised again).
bool set_ipc_lock(bool on)
{
	__user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};
	if (syscall(SYS_capget, &h, d))
		return false;
	if (!(d[CAP_IPC_LOCK / 32].permitted & (1u << (CAP_IPC_LOCK % 32))))
		return !on;
	if (on)
		d[CAP_IPC_LOCK / 32].effective |= 1u << (CAP_IPC_LOCK % 32);
	else
		d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d) == 0;
}

} // namespace

TEST_CASE("private data: zeroed, filled by reg, aligned, per registration", "[api2]")
{
	ummunot_cache_config cfg{};
	cfg.priv_size = 40;
	cache2 c(cfg);
	const ummunot_reg *a = c.get(BASE, PAGE);
	const ummunot_reg *b = c.get(BASE + 8 * PAGE, PAGE);
	REQUIRE(a);
	REQUIRE(b);
	auto *pa = static_cast<std::uint64_t *>(ummunot_reg_priv(a));
	auto *pb = static_cast<std::uint64_t *>(ummunot_reg_priv(b));
	REQUIRE(pa);
	REQUIRE(pb);
	CHECK(reinterpret_cast<std::uintptr_t>(pa) % 16 == 0);
	CHECK(pa[0] == BASE);			// what reg wrote
	CHECK(pb[0] == BASE + 8 * PAGE);
	CHECK(pa[1] == 0);			// the rest zeroed
	CHECK(pa[4] == 0);
	pa[4] = 42;				// the caller's to use
	CHECK(c.get(BASE, PAGE) == a);
	CHECK(static_cast<std::uint64_t *>(ummunot_reg_priv(a))[4] == 42);
	ummunot_cache_put(c.cache, a);
	ummunot_cache_put(c.cache, a);
	ummunot_cache_put(c.cache, b);
	CHECK(ummunot_reg_priv(nullptr) == nullptr);

	fixture none;
	const ummunot_reg *r = none.get(BASE, PAGE);
	REQUIRE(r);
	CHECK(ummunot_reg_priv(r) == nullptr);	// priv_size 0
	ummunot_cache_put(none.cache, r);
}

TEST_CASE("config and ops sizes: too small EINVAL, unknown non-zero tail E2BIG", "[api2]")
{
	backend be;
	auto ops = be.ops2();
	ummunot_cache *c = nullptr;
	struct {
		ummunot_cache_config cfg;
		std::uint64_t future;
	} big{};
	big.cfg.size = sizeof(big);
	CHECK(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops, &be,
						       &big.cfg, &c) == 0);
	ummunot_cache_destroy(c);
	big.future = 1;
	CHECK(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops, &be,
						       &big.cfg, &c) == -E2BIG);
	big.cfg.size = 8;
	CHECK(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops, &be,
						       &big.cfg, &c) == -EINVAL);
	ummunot_cache_config cfg{};
	cfg.size = sizeof(cfg);
	cfg.priv_size = 4097;
	CHECK(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops, &be,
						       &cfg, &c) == -EINVAL);
	cfg.priv_size = 0;
	cfg.flags = 1;
	CHECK(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops, &be,
						       &cfg, &c) == -EINVAL);
	cfg.flags = 0;
	ops.size = 8;
	CHECK(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops, &be,
						       &cfg, &c) == -EINVAL);
	CHECK(ummunot_cache_create_ops(nullptr, &be, &cfg, &c) == -EINVAL);
}

TEST_CASE("stats_ext and query_ext fill what both sides know", "[api2]")
{
	cache2 c(ummunot_cache_config{});
	const ummunot_reg *r = c.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(c.cache, r);
	// An older caller (0.1's struct size): only those bytes.
	struct ummunot_cache_stats_ext s;
	std::memset(&s, 0xff, sizeof(s));
	CHECK(ummunot_cache_stats_ext(c.cache, &s, sizeof(struct ummunot_cache_stats)) ==
	      static_cast<int>(sizeof(struct ummunot_cache_stats)));
	CHECK(s.misses == 1);
	CHECK(s.uncached == ~0ULL);		// beyond the caller's size: untouched
	// A newer caller: the tail it knows and we do not is zeroed.
	struct {
		struct ummunot_cache_stats_ext s;
		std::uint64_t future[2];
	} n;
	std::memset(&n, 0xff, sizeof(n));
	CHECK(ummunot_cache_stats_ext(c.cache, &n.s, sizeof(n)) == sizeof(n.s));
	CHECK(n.future[0] == 0);
	CHECK(n.future[1] == 0);
	CHECK(ummunot_cache_stats_ext(c.cache, &n.s, 4) == -EINVAL);

	ummunot_monitor_info_ext mi{};
	ummunot_monitor *m = ummunot_cache_monitor(c.cache);
	CHECK(ummunot_monitor_query_ext(m, &mi, sizeof(mi)) == sizeof(mi));
	CHECK(mi.ring_entries == 256);
	CHECK(mi.header_size == 4096);
	CHECK(mi.ring_mmap_size >= 4096 + 256 * sizeof(ummunot_event));
}

TEST_CASE("invalidate: overlapping entries are never handed out again", "[api2]")
{
	cache2 c(ummunot_cache_config{});
	const ummunot_reg *a = c.get(BASE, PAGE);
	const ummunot_reg *b = c.get(BASE + 4 * PAGE, PAGE);
	const ummunot_reg *d = c.get(BASE + 8 * PAGE, PAGE);
	REQUIRE((a && b && d));
	ummunot_cache_put(c.cache, a);
	ummunot_cache_put(c.cache, d);
	// b is held: invalidated, but valid until its put.
	CHECK(ummunot_cache_invalidate(c.cache, at(BASE + PAGE), 4 * PAGE) == 1);
	CHECK(rec(b)->deregs == 0);
	CHECK(ummunot_cache_invalidate(c.cache, at(BASE + 8 * PAGE - 1), 2) == 1);	// d
	CHECK(rec(d)->deregs == 1);
	CHECK(c.get(BASE, PAGE) == a);			// untouched neighbour
	const ummunot_reg *b2 = c.get(BASE + 4 * PAGE, PAGE);
	REQUIRE(b2);
	CHECK(b2 != b);
	ummunot_cache_put(c.cache, b);
	CHECK(rec(b)->deregs == 1);
	CHECK(c.stats().caller_invalidations == 2);
	CHECK(ummunot_cache_invalidate(c.cache, at(BASE), 0) == -EINVAL);
	ummunot_cache_put(c.cache, a);
	ummunot_cache_put(c.cache, b2);
	CHECK(ummunot::detail::cache_check(c.cache) == 0);
}

TEST_CASE("max_cached_length: longer requests get a private registration", "[api2]")
{
	ummunot_cache_config cfg{};
	cfg.max_cached_length = 4 * PAGE;
	cache2 c(cfg);
	const ummunot_reg *big = c.get(BASE, 8 * PAGE);
	REQUIRE(big);
	const ummunot_reg *big2 = c.get(BASE, 8 * PAGE);
	REQUIRE(big2);
	CHECK(big2 != big);			// not cached
	CHECK(c.stats().uncached == 2);
	CHECK(c.stats().entries == 0);
	CHECK(c.fake->nr_regions() == 0);	// not watched either
	ummunot_cache_put(c.cache, big);
	CHECK(rec(big)->deregs == 1);		// deregistered at its put
	CHECK(ummunot_cache_put(c.cache, big) == -EINVAL);
	const ummunot_reg *small = c.get(BASE, 4 * PAGE);
	REQUIRE(small);
	CHECK(c.get(BASE, 4 * PAGE) == small);	// cached
	ummunot_cache_put(c.cache, small);
	ummunot_cache_put(c.cache, small);
	CHECK(ummunot_cache_flush(c.cache) == 1);	// the private one is not evictable
	CHECK(rec(big2)->deregs == 0);
	ummunot_cache_put(c.cache, big2);
	CHECK(c.stats().pinned_bytes == 0);
}

TEST_CASE("the cache's monitor: no state changes, and changed() clears once processed",
	  "[api2]")
{
	fixture f;
	ummunot_monitor *m = ummunot_cache_monitor(f.cache);
	REQUIRE(m);
	std::uint64_t h = 1, old = 0;
	ummunot_event ev[2];
	ummunot_region rg{};
	rg.start = BASE;
	rg.length = PAGE;
	CHECK(ummunot_monitor_register(m, &rg, 1, nullptr) == -EBUSY);
	CHECK(ummunot_monitor_unregister(m, &h, 1, nullptr) == -EBUSY);
	CHECK(ummunot_monitor_rearm(m, &h, 1, nullptr) == -EBUSY);
	CHECK(ummunot_monitor_read(m, ev, 2) == -EBUSY);
	CHECK(ummunot_monitor_resync(m, nullptr) == -EBUSY);
	// Closing it is refused too (a no-op: close returns no status); the
	// cache still sees events through it below, and ASan would report
	// the use after free if the close had freed it.
	ummunot_monitor_close(m);
	CHECK(ummunot_cache_monitor(f.cache) == m);
	// The filter changes what the kernel produces, not the cache's state.
	CHECK(ummunot_monitor_set_filter(m, UMMUNOT_EVENT_MASK_DEFAULT, &old) == 0);
	CHECK(old == UMMUNOT_EVENT_MASK_DEFAULT);
	CHECK(ummunot_cache_fd(f.cache) == -ENODEV);	// the fake has no fd

	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	CHECK(ummunot_monitor_changed(m) == 0);
	f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_UNMAP);
	CHECK(ummunot_monitor_changed(m) == 1);
	CHECK(ummunot_cache_poll(f.cache) == 1);
	CHECK(ummunot_monitor_changed(m) == 0);
}

TEST_CASE("two caches share one budget", "[api2]")
{
	ummunot_budget *bud = nullptr;
	REQUIRE(ummunot_budget_create(6 * PAGE, &bud) == 0);
	ummunot_cache_config cfg{};
	cfg.budget = bud;
	{
		cache2 x(cfg), y(cfg);
		const ummunot_reg *a = x.get(BASE, 4 * PAGE);
		REQUIRE(a);
		// y cannot evict x's entries: only 2 pages are left.
		const ummunot_reg *r = nullptr;
		CHECK(ummunot_cache_get(y.cache, at(BASE), 4 * PAGE, 1, &r) == -ENOSPC);
		const ummunot_reg *b = y.get(BASE + 16 * PAGE, 2 * PAGE);
		REQUIRE(b);
		CHECK(x.stats().budget_used == 6 * PAGE);
		ummunot_cache_put(x.cache, a);
		CHECK(ummunot_cache_flush(x.cache) == 1);	// x gives its bytes back
		const ummunot_reg *c = y.get(BASE, 4 * PAGE);
		REQUIRE(c);
		CHECK(y.stats().budget_used == 6 * PAGE);
		ummunot_cache_put(y.cache, b);
		ummunot_cache_put(y.cache, c);
		CHECK(ummunot_budget_destroy(bud) == -EBUSY);
	}
	CHECK(ummunot_budget_destroy(bud) == 0);
	CHECK(ummunot_budget_create(0, nullptr) == -EINVAL);
	CHECK(ummunot_budget_destroy(nullptr) == -EINVAL);
}

TEST_CASE("the default budget follows RLIMIT_MEMLOCK and CAP_IPC_LOCK, re-read", "[api2]")
{
	struct rlimit saved;
	REQUIRE(getrlimit(RLIMIT_MEMLOCK, &saved) == 0);
	// Unprivileged view: without CAP_IPC_LOCK the rlimit counts.
	REQUIRE(set_ipc_lock(false));
	struct rlimit rl = saved;
	rl.rlim_cur = 4 * PAGE;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur)
		rl.rlim_cur = rl.rlim_max;
	REQUIRE(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	{
		ummunot_budget *own = nullptr;
		REQUIRE(ummunot_budget_create(0, &own) == 0);	// rlimit-following
		ummunot_cache_config cfg{};
		cfg.budget = own;
		cache2 c(cfg);
		CHECK(c.stats().budget_limit == rl.rlim_cur);
		const ummunot_reg *a = c.get(BASE, 4 * PAGE);
		REQUIRE(a);
		const ummunot_reg *r = nullptr;
		CHECK(ummunot_cache_get(c.cache, at(BASE + 16 * PAGE), PAGE, 1, &r) == -ENOSPC);
		// setrlimit later: the budget re-reads it when it runs short.
		rl.rlim_cur = 8 * PAGE;
		if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= rl.rlim_cur) {
			REQUIRE(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
			const ummunot_reg *b = c.get(BASE + 16 * PAGE, PAGE);
			REQUIRE(b);
			CHECK(c.stats().budget_limit == 8 * PAGE);
			ummunot_cache_put(c.cache, b);
		}
		// With CAP_IPC_LOCK the kernel does not count: no limit.
		if (set_ipc_lock(true)) {
			const ummunot_reg *big = c.get(BASE + 64 * PAGE, 32 * PAGE);
			REQUIRE(big);
			CHECK(c.stats().budget_limit == ~0ULL);
			ummunot_cache_put(c.cache, big);
		}
		ummunot_cache_put(c.cache, a);
		ummunot_cache_destroy(c.cache);
		c.cache = nullptr;
		CHECK(ummunot_budget_destroy(own) == 0);
	}
	REQUIRE(setrlimit(RLIMIT_MEMLOCK, &saved) == 0);
	set_ipc_lock(true);
}
