// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The registration race: the range changes after the module started
// watching it but before/while the backend pins it.  The cache must notice
// (the event arrives for the new handle) and never publish that pin.
#include "catch.hpp"

#include "helpers.hpp"

using namespace test;

TEST_CASE("an invalidation between REGISTER and publish is caught and retried", "[race]")
{
	fixture f;
	int fired = 0;
	f.be.on_reg = [&](std::uint64_t a, std::uint64_t len) {
		// Only the first attempt races with "munmap".
		if (fired++ == 0)
			CHECK(f.fake->invalidate(a, a + len, UMMUNOT_EVENT_UNMAP) == 1);
	};
	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	CHECK(f.be.regs == 2);
	CHECK(f.be.deregs == 1);		// the stale pin went back
	CHECK(f.be.mrs.front().deregs == 1);
	CHECK(rec(r) == &f.be.mrs.back());
	auto s = f.stats();
	CHECK(s.race_retries == 1);
	CHECK(s.invalidations[UMMUNOT_EVENT_UNMAP] == 1);
	CHECK(s.entries == 1);
	CHECK(f.fake->nr_regions() == 1);	// the first region was unregistered
	ummunot_cache_put(f.cache, r);
}

TEST_CASE("a range that keeps changing gives EAGAIN and leaves nothing behind", "[race]")
{
	fixture f;
	f.be.on_reg = [&](std::uint64_t a, std::uint64_t len) {
		f.fake->invalidate(a, a + len, UMMUNOT_EVENT_CLEAR);
	};
	const ummunot_reg *r = nullptr;
	CHECK(ummunot_cache_get(f.cache, at(BASE), PAGE, 1, &r) == -EAGAIN);
	CHECK(f.be.live() == 0);
	CHECK(f.fake->nr_regions() == 0);
	CHECK(f.stats().entries == 0);
	CHECK(f.stats().pinned_bytes == 0);
}

TEST_CASE("an overflow during registration drops everything and retries", "[race]")
{
	ummunot_cache_attr a{};
	a.ring_entries = 64;
	fixture f(a);
	// 64 unused entries fill the ring's worth of regions.
	for (int i = 0; i < 64; i++) {
		const ummunot_reg *r = f.get(BASE + 2 * i * PAGE, PAGE);
		REQUIRE(r);
		ummunot_cache_put(f.cache, r);
	}
	int fired = 0;
	f.be.on_reg = [&](std::uint64_t, std::uint64_t) {
		// 65 events (64 old entries + the one being added) into 64 slots.
		if (fired++ == 0)
			f.fake->invalidate(BASE, BASE + 256 * PAGE, UMMUNOT_EVENT_UNMAP);
	};
	const ummunot_reg *r = f.get(BASE + 200 * PAGE, PAGE);
	REQUIRE(r);
	auto s = f.stats();
	CHECK(s.resyncs == 1);
	CHECK(s.race_retries == 1);
	CHECK(s.entries == 1);
	CHECK(f.be.live() == 1);
	CHECK(f.fake->nr_regions() == 1);
	ummunot_cache_put(f.cache, r);
}
