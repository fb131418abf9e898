// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Limits on entries and pinned bytes, LRU eviction, ENOMEM evict-and-retry.
#include "catch.hpp"

#include <sys/resource.h>

#include "helpers.hpp"

using namespace test;

namespace {
ummunot_cache_attr limits(std::uint64_t entries, std::uint64_t bytes)
{
	ummunot_cache_attr a{};
	a.max_entries = entries;
	a.max_pinned_bytes = bytes;
	return a;
}
} // namespace

TEST_CASE("the entry limit evicts by CLOCK: an entry used since the hand passed survives", "[limits]")
{
	fixture f(limits(3, 1 << 20));
	// Gaps so that nothing merges.
	const ummunot_reg *a = f.get(BASE, PAGE);
	ummunot_cache_put(f.cache, a);
	const ummunot_reg *b = f.get(BASE + 2 * PAGE, PAGE);
	ummunot_cache_put(f.cache, b);
	const ummunot_reg *c = f.get(BASE + 4 * PAGE, PAGE);
	ummunot_cache_put(f.cache, c);
	// Every entry was put (referenced): the first sweep clears them all
	// and the hand takes the oldest, a.
	const ummunot_reg *d = f.get(BASE + 6 * PAGE, PAGE);
	REQUIRE(d);
	ummunot_cache_put(f.cache, d);
	CHECK(rec(a)->deregs == 1);
	CHECK(rec(b)->deregs == 0);
	CHECK(rec(c)->deregs == 0);
	// The hand is at b now.  Use b again: it gets a second chance and c,
	// unused since the sweep, goes.
	REQUIRE(f.get(BASE + 2 * PAGE, PAGE) == b);
	ummunot_cache_put(f.cache, b);
	const ummunot_reg *e = f.get(BASE + 8 * PAGE, PAGE);
	REQUIRE(e);
	CHECK(rec(b)->deregs == 0);
	CHECK(rec(c)->deregs == 1);
	CHECK(rec(d)->deregs == 0);
	auto s = f.stats();
	CHECK(s.entries == 3);
	CHECK(s.evictions == 2);
	ummunot_cache_put(f.cache, e);
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
}

TEST_CASE("entries in use are never evicted; a full cache says ENOSPC", "[limits]")
{
	fixture f(limits(2, 1 << 20));
	const ummunot_reg *a = f.get(BASE, PAGE);
	const ummunot_reg *b = f.get(BASE + 2 * PAGE, PAGE);
	REQUIRE(a);
	REQUIRE(b);
	const ummunot_reg *c = nullptr;
	CHECK(ummunot_cache_get(f.cache, at(BASE + 4 * PAGE), PAGE, 1, &c) == -ENOSPC);
	CHECK(f.be.deregs == 0);
	ummunot_cache_put(f.cache, b);
	REQUIRE(ummunot_cache_get(f.cache, at(BASE + 4 * PAGE), PAGE, 1, &c) == 0);
	CHECK(rec(b)->deregs == 1);
	ummunot_cache_put(f.cache, a);
	ummunot_cache_put(f.cache, c);
}

TEST_CASE("the pinned-bytes limit evicts until the new range fits", "[limits]")
{
	fixture f(limits(100, 4 * PAGE));
	const ummunot_reg *a = f.get(BASE, 2 * PAGE);
	ummunot_cache_put(f.cache, a);
	const ummunot_reg *b = f.get(BASE + 4 * PAGE, 2 * PAGE);
	ummunot_cache_put(f.cache, b);
	CHECK(f.stats().pinned_bytes == 4 * PAGE);
	const ummunot_reg *c = f.get(BASE + 8 * PAGE, PAGE);
	REQUIRE(c);
	CHECK(rec(a)->deregs == 1);	// oldest
	CHECK(rec(b)->deregs == 0);
	CHECK(f.stats().pinned_bytes == 3 * PAGE);
	const ummunot_reg *big = nullptr;
	CHECK(ummunot_cache_get(f.cache, at(BASE + 32 * PAGE), 5 * PAGE, 1, &big) == -E2BIG);
	ummunot_cache_put(f.cache, c);
}

TEST_CASE("a cache's pinned bytes never exceed its budget's limit", "[limits]")
{
	ummunot_budget *bud = nullptr;
	REQUIRE(ummunot_budget_create(8 * PAGE, &bud) == 0);
	backend be;
	auto ops = be.ops2();
	ummunot_cache_config cfg{};
	cfg.size = sizeof(cfg);
	cfg.budget = bud;
	ummunot_cache *c = nullptr;
	REQUIRE(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops,
							 &be, &cfg, &c) == 0);
	struct ummunot_cache_stats_ext s{};
	REQUIRE(ummunot_cache_stats_ext(c, &s, sizeof(s)) == sizeof(s));
	CHECK(s.max_pinned_bytes == 8 * PAGE);
	CHECK(s.budget_limit == 8 * PAGE);
	CHECK(s.max_entries == 65536 - 1);	// the fake's max_regions - 1
	CHECK(ummunot_budget_destroy(bud) == -EBUSY);	// in use
	for (int i = 0; i < 6; i++) {
		const ummunot_reg *r = nullptr;
		REQUIRE(ummunot_cache_get(c, at(BASE + 4 * i * PAGE), 2 * PAGE, 1, &r) == 0);
		ummunot_cache_put(c, r);
		REQUIRE(ummunot_cache_stats_ext(c, &s, sizeof(s)) > 0);
		CHECK(s.pinned_bytes <= 8 * PAGE);
		CHECK(s.budget_used == s.pinned_bytes);
	}
	CHECK(s.evictions == 2);
	ummunot_cache_destroy(c);
	CHECK(be.live() == 0);
	CHECK(ummunot_budget_destroy(bud) == 0);
}

TEST_CASE("ENOMEM from the backend evicts unused entries and retries once", "[limits]")
{
	fixture f(limits(100, 1 << 20));
	const ummunot_reg *a = f.get(BASE, PAGE);
	ummunot_cache_put(f.cache, a);
	const ummunot_reg *held = f.get(BASE + 2 * PAGE, PAGE);

	f.be.fail_enomem = 1;
	const ummunot_reg *b = f.get(BASE + 4 * PAGE, PAGE);
	REQUIRE(b);
	CHECK(rec(a)->deregs == 1);		// evicted to make room
	CHECK(rec(held)->deregs == 0);		// in use: kept
	CHECK(f.stats().evictions == 1);

	f.be.fail_enomem = 2;			// the retry fails too
	const ummunot_reg *c = nullptr;
	CHECK(ummunot_cache_get(f.cache, at(BASE + 8 * PAGE), PAGE, 1, &c) == -ENOMEM);
	CHECK(f.fake->nr_regions() == 2);	// the failed attempt left nothing behind
	ummunot_cache_put(f.cache, b);
	ummunot_cache_put(f.cache, held);
}

TEST_CASE("ENOSPC from the module's REGISTER evicts unused entries and retries once", "[limits]")
{
	fixture f(limits(100, 1 << 20));
	const ummunot_reg *a = f.get(BASE, PAGE);
	ummunot_cache_put(f.cache, a);
	const ummunot_reg *held = f.get(BASE + 2 * PAGE, PAGE);
	REQUIRE(held);

	// The per-process or per-user limit of the module (not max_regions).
	f.fake->fail_next(UMMUNOT_IOC_REGISTER, -ENOSPC);
	const ummunot_reg *b = f.get(BASE + 4 * PAGE, PAGE);
	REQUIRE(b);
	CHECK(rec(a)->deregs == 1);		// its region made room
	CHECK(rec(held)->deregs == 0);
	CHECK(f.stats().evictions == 1);

	// Nothing left to evict: the error reaches the caller.
	f.fake->fail_next(UMMUNOT_IOC_REGISTER, -ENOSPC);
	const ummunot_reg *c = nullptr;
	CHECK(ummunot_cache_get(f.cache, at(BASE + 8 * PAGE), PAGE, 1, &c) == -ENOSPC);
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
	ummunot_cache_put(f.cache, b);
	ummunot_cache_put(f.cache, held);
}
