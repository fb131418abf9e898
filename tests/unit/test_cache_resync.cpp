// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Ring overflow: the cache resyncs and drops every entry.
#include "catch.hpp"

#include <vector>

#include "helpers.hpp"

using namespace test;

TEST_CASE("overflow makes the cache drop everything, held entries on their last put", "[resync]")
{
	ummunot_cache_attr a{};
	a.ring_entries = 64;
	fixture f(a);
	std::vector<const ummunot_reg *> v;
	for (int i = 0; i < 80; i++) {
		const ummunot_reg *r = f.get(BASE + 2 * i * PAGE, PAGE);
		REQUIRE(r);
		v.push_back(r);
	}
	const ummunot_reg *held = v[5];
	mr_record *mheld = rec(held);	// held must not be touched after its put
	for (auto *r : v)
		if (r != held)
			ummunot_cache_put(f.cache, r);
	// A ring of 64 and 80 events: overflow.
	REQUIRE(f.fake->invalidate(BASE, BASE + 160 * PAGE, UMMUNOT_EVENT_UNMAP) == 80);
	CHECK(ummunot_monitor_changed(ummunot_cache_monitor(f.cache)) == 1);

	// The next get handles it: RESYNC, drain, drop all.
	const ummunot_reg *r = f.get(BASE + 300 * PAGE, PAGE);
	REQUIRE(r);
	auto s = f.stats();
	CHECK(s.resyncs == 1);
	CHECK(s.entries == 1);
	CHECK(f.be.deregs == 79);
	CHECK(rec(held)->deregs == 0);
	CHECK(f.fake->header()->overflow == 0);
	CHECK(f.fake->nr_regions() == 1);
	ummunot_cache_put(f.cache, held);
	CHECK(mheld->deregs == 1);
	// None of the old ranges hits.
	const ummunot_reg *again = f.get(BASE, PAGE);
	REQUIRE(again);
	CHECK(rec(again)->clock > mheld->clock);
	ummunot_cache_put(f.cache, again);
	ummunot_cache_put(f.cache, r);
}
