// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// A miss that merges with a cached neighbour must not fail when that
// neighbour is unmapped (by another thread) after the ring was drained and
// before the merged range is pinned: the pin of the merged range fails
// (ibv_reg_mr gives EFAULT for unmapped pages) or races with the event,
// and the cache must then register the requested range alone.
// (tests/verbs/merge-neighbour-freed is the same scenario with verbs.)
#include "catch.hpp"

#include <set>

#include "helpers.hpp"

using namespace test;

namespace {

// A "process address space" of mapped pages; reg fails with -EFAULT for a
// range not entirely mapped, like ibv_reg_mr().
struct address_space {
	std::set<std::uint64_t> pages;

	void map(std::uint64_t a, std::uint64_t len)
	{
		for (std::uint64_t p = a; p < a + len; p += PAGE)
			pages.insert(p);
	}
	void unmap(std::uint64_t a, std::uint64_t len)
	{
		for (std::uint64_t p = a; p < a + len; p += PAGE)
			pages.erase(p);
	}
	bool mapped(std::uint64_t a, std::uint64_t len) const
	{
		for (std::uint64_t p = a; p < a + len; p += PAGE)
			if (!pages.count(p))
				return false;
		return true;
	}
};

} // namespace

TEST_CASE("a merged pin that fails because a neighbour was freed falls back to the request",
	  "[merge]")
{
	fixture f;
	address_space as;
	const std::uint64_t len = 4 * PAGE;
	const std::uint64_t A = BASE, B = BASE + len;

	as.map(A, 2 * len);
	f.be.check_reg = [&](std::uint64_t a, std::uint64_t l) {
		return as.mapped(a, l) ? 0 : -EFAULT;
	};
	const ummunot_reg *rb = f.get(B, len);
	REQUIRE(rb);
	REQUIRE(ummunot_cache_put(f.cache, rb) == 0);

	// "Another thread" munmaps B after get(A) drained the ring, just
	// before the pin: the module reports it, the pages are gone.
	int fired = 0;
	f.be.on_reg = [&](std::uint64_t, std::uint64_t) {
		if (fired++)
			return;
		as.unmap(B, len);
		f.fake->invalidate(B, B + len, UMMUNOT_EVENT_UNMAP);
	};
	const ummunot_reg *ra = nullptr;
	REQUIRE(ummunot_cache_get(f.cache, at(A), len, 1, &ra) == 0);
	REQUIRE(ra);
	CHECK(ra->addr == A);
	CHECK(ra->length == len);		// A alone, not the stale union
	CHECK(f.be.regs == 2);			// B, then A alone
	auto s = f.stats();
	CHECK(s.entries == 1);			// B was invalidated
	CHECK(s.invalidations[UMMUNOT_EVENT_UNMAP] == 1);
	CHECK(s.pinned_bytes == len);
	CHECK(f.fake->nr_regions() == 1);	// failed attempt's region is gone
	REQUIRE(ummunot_cache_put(f.cache, ra) == 0);
	CHECK(f.be.live() == 1);
}

TEST_CASE("a race retry of a merged range retries the request alone", "[merge]")
{
	fixture f;
	address_space as;
	const std::uint64_t len = 4 * PAGE;
	const std::uint64_t A = BASE, B = BASE + len;

	as.map(A, 2 * len);
	f.be.check_reg = [&](std::uint64_t a, std::uint64_t l) {
		return as.mapped(a, l) ? 0 : -EFAULT;
	};
	const ummunot_reg *rb = f.get(B, len);
	REQUIRE(rb);
	REQUIRE(ummunot_cache_put(f.cache, rb) == 0);

	// This time the pin of the union succeeds (B is still mapped while it
	// is pinned) and B is unmapped right after: the drain after the pin
	// sees the event for the new region and the cache retries.  The retry
	// must not pin the union again (B is gone now).
	int fired = 0;
	f.be.on_reg = [&](std::uint64_t, std::uint64_t) {
		if (fired++)
			return;
		f.fake->invalidate(B, B + len, UMMUNOT_EVENT_UNMAP);
		as.unmap(B, len);	// reg itself still sees B (it ran "before")
	};
	f.be.check_reg = [&](std::uint64_t a, std::uint64_t l) {
		// The first call is the union: B was mapped while it was pinned.
		if (fired == 1 && a == A && l == 2 * len)
			return 0;
		return as.mapped(a, l) ? 0 : -EFAULT;
	};
	const ummunot_reg *ra = nullptr;
	REQUIRE(ummunot_cache_get(f.cache, at(A), len, 1, &ra) == 0);
	REQUIRE(ra);
	CHECK(ra->addr == A);
	CHECK(ra->length == len);
	auto s = f.stats();
	CHECK(s.race_retries == 1);
	CHECK(s.entries == 1);
	CHECK(s.pinned_bytes == len);
	CHECK(f.fake->nr_regions() == 1);
	REQUIRE(ummunot_cache_put(f.cache, ra) == 0);
	CHECK(f.be.live() == 1);
}

TEST_CASE("a failing pin of the request alone is still reported", "[merge]")
{
	fixture f;
	f.be.check_reg = [&](std::uint64_t, std::uint64_t) { return -EFAULT; };
	const ummunot_reg *r = nullptr;
	CHECK(ummunot_cache_get(f.cache, at(BASE), PAGE, 1, &r) == -EFAULT);
	CHECK(f.be.regs == 0);
	CHECK(f.fake->nr_regions() == 0);
	CHECK(f.stats().entries == 0);
}
