// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Hits, misses, alignment, access superset, merging, invalidation.
#include "catch.hpp"

#include "helpers.hpp"

using namespace test;

TEST_CASE("a miss registers the page-aligned range, then it hits", "[cache]")
{
	fixture f;
	const ummunot_reg *r = f.get(BASE + 100, 2 * PAGE);	// spans 3 pages
	REQUIRE(r);
	CHECK(r->addr == BASE);
	CHECK(r->length == 3 * PAGE);
	CHECK(r->lkey != 0);
	CHECK(f.be.regs == 1);

	const ummunot_reg *r2 = f.get(BASE + PAGE, 10);
	CHECK(r2 == r);
	CHECK(f.be.regs == 1);
	auto s = f.stats();
	CHECK(s.hits == 1);
	CHECK(s.misses == 1);
	CHECK(s.entries == 1);
	CHECK(s.pinned_bytes == 3 * PAGE);
	CHECK(ummunot_cache_put(f.cache, r) == 0);
	CHECK(ummunot_cache_put(f.cache, r2) == 0);
	CHECK(ummunot_cache_put(f.cache, r2) == -EINVAL);	// not held any more
	CHECK(f.be.deregs == 0);				// cached, not released
}

TEST_CASE("bad arguments are rejected", "[cache]")
{
	fixture f;
	const ummunot_reg *r;
	CHECK(ummunot_cache_get(f.cache, at(BASE), 0, 1, &r) == -EINVAL);
	CHECK(ummunot_cache_get(f.cache, at(BASE), PAGE, -1, &r) == -EINVAL);
	CHECK(ummunot_cache_get(f.cache, at(BASE), PAGE, 1, nullptr) == -EINVAL);
	CHECK(ummunot_cache_get(f.cache, at(~0ULL - 10), 100, 1, &r) == -EINVAL);
	CHECK(ummunot_cache_get(nullptr, at(BASE), PAGE, 1, &r) == -EINVAL);
	CHECK(ummunot_cache_put(f.cache, nullptr) == -EINVAL);
	ummunot_backend_ops none{};
	ummunot_cache *c;
	CHECK(ummunot_cache_create_backend(&none, nullptr, nullptr, &c) == -EINVAL);
	ummunot_cache_attr a{};
	a.flags = 1;
	CHECK(ummunot_cache_create_backend(&f.ops, &f.be, &a, &c) == -EINVAL);
	CHECK(ummunot_cache_create(nullptr, nullptr, &c) < 0);
	CHECK(f.be.regs == 0);
}

TEST_CASE("access flags match as a superset", "[cache]")
{
	fixture f;
	const ummunot_reg *rw = f.get(BASE, PAGE, 0x3);
	REQUIRE(rw);
	const ummunot_reg *ro = f.get(BASE, PAGE, 0x1);
	CHECK(ro == rw);				// 0x3 covers 0x1
	const ummunot_reg *other = f.get(BASE, PAGE, 0x4);
	REQUIRE(other);
	CHECK(other != rw);				// 0x3 does not cover 0x4
	CHECK(other->access == 0x4);
	CHECK(f.be.regs == 2);
	ummunot_cache_put(f.cache, rw);
	ummunot_cache_put(f.cache, ro);
	ummunot_cache_put(f.cache, other);
}

TEST_CASE("overlapping and adjacent ranges with equal access merge", "[cache]")
{
	fixture f;
	const ummunot_reg *a = f.get(BASE, 2 * PAGE);
	const ummunot_reg *b = f.get(BASE + 2 * PAGE, PAGE);	// adjacent
	REQUIRE(a);
	REQUIRE(b);
	CHECK(b->addr == BASE);
	CHECK(b->length == 3 * PAGE);
	CHECK(f.stats().merges == 1);
	CHECK(f.stats().entries == 1);
	// a was replaced but is still held: not deregistered yet.
	CHECK(f.be.deregs == 0);
	mr_record *ma = rec(a);		// a must not be touched after its put
	CHECK(ummunot_cache_put(f.cache, a) == 0);
	CHECK(f.be.deregs == 1);
	CHECK(ma->deregs == 1);
	// The merged entry now serves the whole range.
	const ummunot_reg *c = f.get(BASE + PAGE, PAGE);
	CHECK(c == b);
	// Different access: no merge.
	const ummunot_reg *d = f.get(BASE + 3 * PAGE, PAGE, 0x2);
	REQUIRE(d);
	CHECK(d->addr == BASE + 3 * PAGE);
	CHECK(f.stats().entries == 2);
	for (auto *x : {b, c, d})
		ummunot_cache_put(f.cache, x);
}

TEST_CASE("an invalidation overlapping part of an entry drops the entry", "[cache]")
{
	fixture f;
	const ummunot_reg *r = f.get(BASE, 4 * PAGE);
	REQUIRE(r);
	mr_record *mr = rec(r);
	ummunot_cache_put(f.cache, r);
	// "munmap of one page in the middle returned"
	REQUIRE(f.fake->invalidate(BASE + PAGE, BASE + 2 * PAGE, UMMUNOT_EVENT_UNMAP) == 1);
	// Unused, so the next get deregisters it on the spot and registers anew.
	const ummunot_reg *r2 = f.get(BASE + 3 * PAGE, PAGE);
	REQUIRE(r2);
	CHECK(rec(r2) != mr);
	CHECK(mr->deregs == 1);
	CHECK(r2->addr == BASE + 3 * PAGE);
	auto s = f.stats();
	CHECK(s.invalidations[UMMUNOT_EVENT_UNMAP] == 1);
	CHECK(s.misses == 2);
	CHECK(s.hits == 0);
	CHECK(s.pinned_bytes == PAGE);
	// The dead entry's module region was unregistered; only the new one is left.
	CHECK(f.fake->nr_regions() == 1);
	ummunot_cache_put(f.cache, r2);
}

TEST_CASE("an entry invalidated while held is deregistered exactly once, on the last put", "[cache]")
{
	fixture f;
	const ummunot_reg *r1 = f.get(BASE, PAGE);
	const ummunot_reg *r2 = f.get(BASE, PAGE);
	REQUIRE(r1 == r2);
	REQUIRE(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_CLEAR) == 1);
	CHECK(ummunot_cache_poll(f.cache) == 1);
	CHECK(f.stats().entries == 0);		// unpublished at once
	CHECK(rec(r1)->deregs == 0);		// but still in use
	const ummunot_reg *r3 = f.get(BASE, PAGE);	// a fresh one
	REQUIRE(r3);
	CHECK(r3 != r1);
	CHECK(ummunot_cache_put(f.cache, r1) == 0);
	CHECK(rec(r2)->deregs == 0);
	mr_record *m2 = rec(r2);
	CHECK(ummunot_cache_put(f.cache, r2) == 0);
	CHECK(m2->deregs == 1);
	CHECK(m2->dereg_while_held == 0);
	ummunot_cache_put(f.cache, r3);
	ummunot_cache_destroy(f.cache);
	f.cache = nullptr;
	CHECK(f.be.all_deregistered_once());
	CHECK(f.be.live() == 0);
}

TEST_CASE("flush evicts only unused entries", "[cache]")
{
	fixture f;
	const ummunot_reg *a = f.get(BASE, PAGE);
	const ummunot_reg *b = f.get(BASE + 8 * PAGE, PAGE);
	mr_record *ma = rec(a);		// a must not be touched after its put
	ummunot_cache_put(f.cache, a);
	CHECK(ummunot_cache_flush(f.cache) == 1);
	CHECK(ma->deregs == 1);
	CHECK(rec(b)->deregs == 0);
	CHECK(f.stats().evictions == 1);
	ummunot_cache_put(f.cache, b);
}
