// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// range_index (lib/index.hpp), the cache's copy-on-write B+tree, on its
// own: searches at range boundaries, overlapping, adjacent and equal
// ranges, a randomised model check against a brute-force list, many
// entries, the cost of erasing k of n (nodes copied), and readers under
// RCU racing a writer (run under TSan by the sanitizer build).
#include "catch.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "cache.hpp"
#include "index.hpp"
#include "rcu.hpp"

using ummunot::detail::entry;
using ummunot::detail::range_index;

namespace {

struct pool {
	std::vector<std::unique_ptr<entry>> all;
	entry *make(std::uint64_t s, std::uint64_t e)
	{
		all.push_back(std::make_unique<entry>());
		all.back()->pub.addr = s;
		all.back()->pub.length = e - s;
		return all.back().get();
	}
};

// Every entry the working tree finds for (s, e), in the order found.
std::vector<entry *> all_working(const range_index &ix, std::uint64_t s, std::uint64_t e)
{
	std::vector<entry *> v;
	ix.find_working(s, e, [&](entry *x) {
		v.push_back(x);
		return false;
	});
	return v;
}

std::vector<entry *> all_published(const range_index &ix, std::uint64_t s, std::uint64_t e)
{
	std::vector<entry *> v;
	unsigned int rt = ummunot::detail::rcu_read_lock();
	ix.find(s, e, [&](entry *x) {
		v.push_back(x);
		return false;
	});
	ummunot::detail::rcu_read_unlock(rt);
	return v;
}

std::vector<entry *> brute(const std::vector<entry *> &set, std::uint64_t s, std::uint64_t e)
{
	std::vector<entry *> v;
	for (entry *x : set)
		if (x->start() <= s && x->end() >= e)
			v.push_back(x);
	return v;
}

bool same_set(std::vector<entry *> a, std::vector<entry *> b)
{
	std::sort(a.begin(), a.end());
	std::sort(b.begin(), b.end());
	return a == b;
}

bool descending_starts(const std::vector<entry *> &v)
{
	for (std::size_t i = 1; i < v.size(); i++)
		if (v[i - 1]->start() < v[i]->start())
			return false;
	return true;
}

void add(range_index &ix, entry *e)
{
	REQUIRE(ix.reserve());
	ix.insert(e->start(), e->end(), e);
}

void remove(range_index &ix, entry *e)
{
	REQUIRE(ix.reserve());
	REQUIRE(ix.erase(e->start(), e));
}

} // namespace

TEST_CASE("index: empty, boundaries, adjacent and overlapping ranges", "[index]")
{
	range_index ix;
	REQUIRE(ix.init());
	pool p;
	CHECK(all_working(ix, 0, 1).empty());
	CHECK(all_published(ix, 0x1000, 0x2000).empty());

	entry *a = p.make(0x1000, 0x2000);
	entry *b = p.make(0x2000, 0x3000);	// adjacent to a
	entry *c = p.make(0x1000, 0x4000);	// same start as a, longer
	entry *d = p.make(0x3800, 0x3900);	// inside c
	for (entry *x : {a, b, c, d})
		add(ix, x);
	REQUIRE(ix.check() == 0);
	// Not published yet: readers see nothing.
	CHECK(all_published(ix, 0x1000, 0x2000).empty());
	ix.publish();
	REQUIRE(ix.check() == 0);

	// Exactly a's range: a and c (start <= 0x1000, end >= 0x2000).
	CHECK(same_set(all_published(ix, 0x1000, 0x2000), {a, c}));
	// One byte before a's start: nothing starts that early.
	CHECK(all_published(ix, 0xfff, 0x1000).empty());
	// Across the a/b boundary: only c covers it.
	CHECK(same_set(all_published(ix, 0x1fff, 0x2001), {c}));
	// b's range: b and c.  The largest start first.
	auto v = all_published(ix, 0x2000, 0x3000);
	CHECK(same_set(v, {b, c}));
	CHECK(v.front() == b);
	// The last byte of c.
	CHECK(same_set(all_published(ix, 0x3fff, 0x4000), {c}));
	CHECK(all_published(ix, 0x4000, 0x4001).empty());
	CHECK(same_set(all_published(ix, 0x3800, 0x3900), {c, d}));

	// Erase one of two equal starts; the other stays.
	remove(ix, a);
	CHECK_FALSE(ix.erase(a->start(), a));	// not there any more
	REQUIRE(ix.check() == 0);
	CHECK(same_set(all_working(ix, 0x1000, 0x2000), {c}));
	CHECK(same_set(all_published(ix, 0x1000, 0x2000), {a, c}));	// old root
	ix.publish();
	CHECK(same_set(all_published(ix, 0x1000, 0x2000), {c}));
	CHECK(ix.size() == 3);
	ummunot::detail::rcu_synchronize();
	ix.free_retired();
	CHECK(ix.retired_bytes() == 0);
}

TEST_CASE("index: random inserts and erases match a brute-force list", "[index]")
{
	std::mt19937_64 rng(GENERATE(1, 2, 3));
	range_index ix;
	REQUIRE(ix.init());
	pool p;
	std::vector<entry *> set, published;
	// Small address space: many overlaps, equal starts and adjacencies,
	// and enough entries for a tree of height 2 or 3.
	constexpr std::uint64_t space = 4096;
	for (int step = 0; step < 3000; step++) {
		bool ins = set.size() < 50 || rng() % 100 < (step < 1500 ? 70 : 35);
		if (ins) {
			std::uint64_t s = rng() % space, len = 1 + rng() % 64;
			entry *e = p.make(s, s + len);
			add(ix, e);
			set.push_back(e);
		} else {
			std::size_t i = rng() % set.size();
			remove(ix, set[i]);
			set.erase(set.begin() + static_cast<std::ptrdiff_t>(i));
		}
		REQUIRE(ix.check() == 0);
		REQUIRE(ix.size() == set.size());
		std::uint64_t qa = rng() % (space + 64), qb = qa + 1 + rng() % 32;
		auto got = all_working(ix, qa, qb);
		REQUIRE(same_set(got, brute(set, qa, qb)));
		REQUIRE(descending_starts(got));
		if (rng() % 8 == 0) {
			ix.publish();
			published = set;
			if (rng() % 4 == 0) {
				ummunot::detail::rcu_synchronize();
				ix.free_retired();
			}
		}
		// Readers see the last published tree, whatever changed since.
		REQUIRE(same_set(all_published(ix, qa, qb), brute(published, qa, qb)));
	}
	std::uint32_t h = ix.height();
	CHECK(h >= 1);
	// Erase everything: the tree shrinks back to one empty leaf.
	for (entry *e : set)
		remove(ix, e);
	REQUIRE(ix.check() == 0);
	CHECK(ix.size() == 0);
	CHECK(ix.height() == 0);
	CHECK(all_working(ix, 0, 1).empty());
	ix.publish();
}

TEST_CASE("index: many entries (10^5), sequential and random, stay shallow and full", "[index]")
{
	constexpr std::size_t n = 100000;
	range_index ix;
	REQUIRE(ix.init());
	pool p;
	std::vector<entry *> v;
	for (std::size_t i = 0; i < n; i++)
		v.push_back(p.make(i * 0x2000, i * 0x2000 + 0x1000));
	SECTION("increasing addresses") {
		for (entry *e : v)
			add(ix, e);
		ix.publish();
		REQUIRE(ix.check() == 0);
		// Appends split full nodes: close to one slot of every node used.
		CHECK(ix.bytes() < n * sizeof(range_index::node) / range_index::fanout * 11 / 10);
	}
	SECTION("random order") {
		std::mt19937_64 rng(7);
		auto w = v;
		std::shuffle(w.begin(), w.end(), rng);
		for (std::size_t i = 0; i < w.size(); i++) {
			add(ix, w[i]);
			if (i % 1000 == 0)
				ix.publish();
		}
		ix.publish();
		REQUIRE(ix.check() == 0);
		// Half-split nodes: at least half full.
		CHECK(ix.bytes() < n * sizeof(range_index::node) / range_index::fanout * 2);
	}
	CHECK(ix.size() == n);
	CHECK(ix.height() <= 4);
	// Every entry is found by its own range and by its last byte; the gap
	// after it finds nothing.
	for (std::size_t i = 0; i < n; i += 997) {
		CHECK(all_published(ix, v[i]->start(), v[i]->end()) == std::vector<entry *>{v[i]});
		CHECK(all_published(ix, v[i]->end() - 1, v[i]->end()) == std::vector<entry *>{v[i]});
		CHECK(all_published(ix, v[i]->end(), v[i]->end() + 1).empty());
	}
	ummunot::detail::rcu_synchronize();
	ix.free_retired();
}

TEST_CASE("index: erasing k of n copies O(k log n) nodes", "[index]")
{
	constexpr std::size_t n = 100000;
	range_index ix;
	REQUIRE(ix.init());
	pool p;
	std::vector<entry *> v;
	for (std::size_t i = 0; i < n; i++) {
		v.push_back(p.make(i * 0x2000, i * 0x2000 + 0x1000));
		add(ix, v.back());
	}
	ix.publish();
	ummunot::detail::rcu_synchronize();
	ix.free_retired();
	const std::size_t h = ix.height(), total = ix.bytes() / sizeof(range_index::node);
	REQUIRE(h >= 2);

	auto erase_retired = [&](std::size_t first, std::size_t k, std::size_t stride) {
		for (std::size_t i = 0; i < k; i++)
			remove(ix, v[first + i * stride]);
		ix.publish();
		REQUIRE(ix.check() == 0);
		std::size_t nodes = ix.retired_bytes() / sizeof(range_index::node);
		ummunot::detail::rcu_synchronize();
		ix.free_retired();
		return nodes;
	};
	// One entry: its path and at most one sibling a level.
	CHECK(erase_retired(5, 1, 1) <= 2 * h + 1);
	// k scattered entries: at most k paths, never more than the tree.
	std::size_t k = 100;
	std::size_t got = erase_retired(10, k, n / k - 1);
	CHECK(got <= k * (2 * h + 1));
	CHECK(got < total / 4);
	// k adjacent entries (one munmap over a range; between two of the
	// scattered ones): each node once.
	got = erase_retired(50000, 500, 1);
	CHECK(got <= 500 / (range_index::fanout / 4) + 4 * h);
	CHECK(ix.size() == n - 1 - k - 500);
}

TEST_CASE("index: readers under RCU while a writer inserts, erases and frees", "[index][concurrent]")
{
	// Permanent entries at even slots are always there: a reader that
	// misses one saw a broken tree.  Odd slots come and go; readers check
	// whatever they find covers their query (a freed entry would be caught
	// by ASan/TSan, a wrong one by the check).
	constexpr std::uint64_t slots = 4000, stride = 0x2000;
	range_index ix;
	REQUIRE(ix.init());
	pool perm;
	for (std::uint64_t i = 0; i < slots; i += 2)
		add(ix, perm.make(i * stride, i * stride + 0x1000));
	ix.publish();

	std::atomic<bool> stop{false};
	std::atomic<long> wrong{0}, missing{0}, lookups{0};
	auto reader = [&](unsigned int seed) {
		std::mt19937_64 rng(seed);
		while (!stop.load(std::memory_order_relaxed)) {
			std::uint64_t i = rng() % slots;
			std::uint64_t a = i * stride + (rng() % 0x1000) / 8 * 8, b = a + 8;
			unsigned int rt = ummunot::detail::rcu_read_lock();
			entry *got = ix.find(a, b, [&](entry *e) {
				if (e->start() > a || e->end() < b)
					wrong++;
				return true;
			});
			ummunot::detail::rcu_read_unlock(rt);
			if (i % 2 == 0 && !got)
				missing++;
			lookups++;
		}
	};
	std::vector<std::thread> th;
	for (unsigned int t = 0; t < 2; t++)
		th.emplace_back(reader, t + 1);

	// The writer owns the odd entries: made, indexed, erased, freed after
	// a grace period.
	std::mt19937_64 rng(99);
	std::vector<std::unique_ptr<entry>> in(slots), retired;
	long ops = 0;
	for (int round = 0; round < 400 || lookups.load() < 20000; round++) {
		for (int j = 0; j < 32; j++, ops++) {
			std::uint64_t i = (rng() % (slots / 2)) * 2 + 1;
			REQUIRE(ix.reserve());
			if (in[i]) {
				REQUIRE(ix.erase(in[i]->start(), in[i].get()));
				retired.push_back(std::move(in[i]));
			} else {
				in[i] = std::make_unique<entry>();
				// Sometimes long: it covers permanent neighbours too.
				std::uint64_t len = rng() % 4 ? 0x1000 : 3 * stride;
				in[i]->pub.addr = i * stride;
				in[i]->pub.length = len;
				ix.insert(in[i]->start(), in[i]->end(), in[i].get());
			}
		}
		ix.publish();
		if (round % 4 == 3) {
			ummunot::detail::rcu_synchronize();
			ix.free_retired();
			retired.clear();	// the erased entries: no reader left
		}
		REQUIRE(ix.check() == 0);
		if (round > 100000)
			break;		// readers starved: still judged below
	}
	stop = true;
	for (auto &t : th)
		t.join();
	ummunot::detail::rcu_synchronize();
	ix.free_retired();
	INFO("lookups " << lookups.load() << ", writer ops " << ops);
	CHECK(lookups.load() > 0);
	CHECK(wrong.load() == 0);
	CHECK(missing.load() == 0);
}

// The hit's search, range_index::find(), tries the rightmost candidate path
// first.  At an inner node below the root, every child that starts at or
// before the query may end before it (the query straddles the last entries
// of a leaf) while the subtree's summary said "something here ends late
// enough" because of entries starting after the query.  The search must
// then go on in the root's other subtrees, where one earlier large entry
// covers every query, instead of reporting a miss (which sends a cache hit
// to the locked slow path).
TEST_CASE("index: find() covers a query from an earlier subtree at every level", "[index]")
{
	range_index ix;
	REQUIRE(ix.init());
	pool p;
	constexpr std::uint64_t pg = 4096, n = 3000;
	entry *big = p.make(0, (n + 2) * pg);
	add(ix, big);
	for (std::uint64_t k = 1; k <= n; k++)
		add(ix, p.make(k * pg, (k + 1) * pg));
	ix.publish();
	REQUIRE(ix.check() == 0);
	REQUIRE(ix.height() >= 2);

	// [k, k + 2) pages straddles two small entries: only big covers it.
	std::uint64_t found = 0, missed = 0;
	for (std::uint64_t k = 1; k <= n; k++) {
		unsigned int rt = ummunot::detail::rcu_read_lock();
		entry *r = ix.find(k * pg, (k + 2) * pg, [](entry *) { return true; });
		ummunot::detail::rcu_read_unlock(rt);
		(r == big ? found : missed)++;
	}
	CHECK(missed == 0);
	CHECK(found == n);
	// And a search that accepts nothing visits every candidate.
	for (std::uint64_t k = 1; k <= n; k += 97)
		CHECK(same_set(all_published(ix, k * pg, (k + 2) * pg), {big}));
}
