// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The cache publishes its counters in the ring's user area
// (include/ummunot/user_area.h), which the kernel shows in fdinfo for
// ummunot-stat.  Read back here from the fake device's header page.
#include "catch.hpp"

#include <chrono>
#include <thread>

#include <ummunot/user_area.h>

#include "helpers.hpp"

using namespace test;

namespace {

const ummunot_user_area *user_area(const fixture &f)
{
	auto *p = reinterpret_cast<const unsigned char *>(f.fake->header());
	return reinterpret_cast<const ummunot_user_area *>(p + UMMUNOT_RING_USER_AREA_OFFSET);
}

std::uint64_t word(const ummunot_user_area *ua, unsigned int i)
{
	return __atomic_load_n(reinterpret_cast<const std::uint64_t *>(ua) + i,
			       __ATOMIC_RELAXED);
}

} // namespace

TEST_CASE("a new cache writes the magic, the version and zero counters", "[user_area]")
{
	fixture f;
	auto *ua = user_area(f);
	CHECK(word(ua, UMMUNOT_USER_AREA_WORD_MAGIC) == UMMUNOT_USER_AREA_MAGIC);
	CHECK(word(ua, UMMUNOT_USER_AREA_WORD_VERSION) == UMMUNOT_USER_AREA_VERSION);
	for (unsigned int i = UMMUNOT_USER_AREA_WORD_HITS; i < UMMUNOT_USER_AREA_WORDS; i++)
		CHECK(word(ua, i) == 0);
}

TEST_CASE("misses, registrations, entries and pinned bytes are published by the miss",
	  "[user_area]")
{
	fixture f;
	auto *ua = user_area(f);
	const ummunot_reg *r = f.get(BASE, 3 * PAGE);
	REQUIRE(r);
	CHECK(ua->misses == 1);
	CHECK(ua->hits == 0);
	CHECK(ua->registrations == 1);
	CHECK(ua->entries == 1);
	CHECK(ua->pinned_bytes == 3 * PAGE);
	ummunot_cache_put(f.cache, r);
}

TEST_CASE("hits are published by a slow path at most every 10 ms, not by the hit",
	  "[user_area]")
{
	fixture f;
	auto *ua = user_area(f);
	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	for (int i = 0; i < 5; i++) {
		r = f.get(BASE, PAGE);
		REQUIRE(r);
		ummunot_cache_put(f.cache, r);
	}
	CHECK(ua->hits == 0);			// hits stay in the CPUs' counters
	// The sum over every possible CPU is not in every writer section: a
	// poll publishes hits once the last sum is 10 ms old.
	std::this_thread::sleep_for(std::chrono::milliseconds(25));
	REQUIRE(ummunot_cache_poll(f.cache) == 0);
	CHECK(ua->hits == 5);
	// Writer sections within 10 ms of that sum do not sum again (O(1) per
	// section, whatever the number of CPUs).  Asserted only when this
	// thread really got there within 5 ms (not so under a loaded machine).
	auto t0 = std::chrono::steady_clock::now();
	r = f.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	REQUIRE(ummunot_cache_poll(f.cache) == 0);
	if (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(5))
		CHECK(ua->hits == 5);
	CHECK(ua->misses == 1);
	// ummunot_cache_stats publishes at once, and agrees.
	r = f.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	auto s = f.stats();
	CHECK(s.hits == 7);
	CHECK(ua->hits == 7);
}

TEST_CASE("invalidations and deregistrations are published by event processing and put",
	  "[user_area]")
{
	fixture f;
	auto *ua = user_area(f);
	const ummunot_reg *held = f.get(BASE, PAGE);
	const ummunot_reg *r = f.get(BASE + 2 * PAGE, PAGE);
	REQUIRE(held);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	CHECK(f.fake->invalidate(BASE, BASE + 4 * PAGE, UMMUNOT_EVENT_UNMAP) == 2);
	CHECK(ua->invalidations[UMMUNOT_EVENT_UNMAP] == 0);	// not processed yet
	REQUIRE(ummunot_cache_poll(f.cache) == 2);
	CHECK(ua->invalidations[UMMUNOT_EVENT_UNMAP] == 2);
	CHECK(ua->entries == 0);
	CHECK(ua->deregistrations == 1);	// the unused one; the held one waits
	CHECK(ua->pinned_bytes == PAGE);
	ummunot_cache_put(f.cache, held);	// last user of a dead entry
	CHECK(ua->deregistrations == 2);
	CHECK(ua->pinned_bytes == 0);
}

TEST_CASE("evictions and resyncs are published", "[user_area]")
{
	ummunot_cache_attr a{};
	a.ring_entries = 64;
	fixture f(a);
	auto *ua = user_area(f);
	for (int i = 0; i < 65; i++) {
		const ummunot_reg *r = f.get(BASE + 2 * i * PAGE, PAGE);
		REQUIRE(r);
		ummunot_cache_put(f.cache, r);
	}
	// 65 events into 64 slots: overflow, resync, everything dropped.
	f.fake->invalidate(BASE, BASE + 200 * PAGE, UMMUNOT_EVENT_UNMAP);
	REQUIRE(ummunot_cache_poll(f.cache) >= 0);
	CHECK(ua->resyncs == 1);
	CHECK(ua->invalidations[0] == 65);	// dropped by the library itself
	CHECK(ua->entries == 0);
	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	CHECK(ummunot_cache_flush(f.cache) == 1);
	CHECK(ua->evictions == 1);
	CHECK(ua->deregistrations == 66);
	CHECK(ua->registrations == 66);
	for (unsigned int i = UMMUNOT_USER_AREA_WORDS_V1; i < UMMUNOT_USER_AREA_WORDS; i++)
		CHECK(word(ua, i) == 0);
}

TEST_CASE("without UMMUNOT_FEATURE_USER_AREA the header page is left alone", "[user_area]")
{
	fake_device::config cfg;
	cfg.supported = UMMUNOT_FEATURES_V1 & ~UMMUNOT_FEATURE_USER_AREA;
	fixture f({}, cfg);
	auto *ua = user_area(f);
	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	ummunot_cache_put(f.cache, r);
	for (unsigned int i = 0; i < UMMUNOT_USER_AREA_WORDS; i++)
		CHECK(word(ua, i) == 0);
}
