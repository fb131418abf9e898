// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Limits on entries and pinned bytes, LRU eviction, ENOMEM evict-and-retry.
#include <catch2/catch.hpp>

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

TEST_CASE("the entry limit evicts the least recently used unused entry", "[limits]")
{
	fixture f(limits(3, 1 << 20));
	// Gaps so that nothing merges.
	const ummunot_reg *a = f.get(BASE, PAGE);
	ummunot_cache_put(f.cache, a);
	const ummunot_reg *b = f.get(BASE + 2 * PAGE, PAGE);
	ummunot_cache_put(f.cache, b);
	const ummunot_reg *c = f.get(BASE + 4 * PAGE, PAGE);
	ummunot_cache_put(f.cache, c);
	// Touch a: b is now the oldest.
	REQUIRE(f.get(BASE, PAGE) == a);
	ummunot_cache_put(f.cache, a);
	const ummunot_reg *d = f.get(BASE + 6 * PAGE, PAGE);
	REQUIRE(d);
	CHECK(rec(b)->deregs == 1);
	CHECK(rec(a)->deregs == 0);
	CHECK(rec(c)->deregs == 0);
	auto s = f.stats();
	CHECK(s.entries == 3);
	CHECK(s.evictions == 1);
	ummunot_cache_put(f.cache, d);
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

TEST_CASE("the pinned-bytes limit never exceeds RLIMIT_MEMLOCK", "[limits]")
{
	struct rlimit rl;
	REQUIRE(getrlimit(RLIMIT_MEMLOCK, &rl) == 0);
	if (rl.rlim_cur == RLIM_INFINITY)
		SUCCEED("RLIMIT_MEMLOCK is unlimited here: nothing to clamp");
	fixture f(limits(0, ~0ULL));
	auto s = f.stats();
	if (rl.rlim_cur != RLIM_INFINITY)
		CHECK(s.max_pinned_bytes == rl.rlim_cur);
	else
		CHECK(s.max_pinned_bytes == ~0ULL);
	CHECK(s.max_entries == 65536 - 1);	// the fake's max_regions - 1
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
