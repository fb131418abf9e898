// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Eviction while other threads hit the entries being considered (the
// 0.1 cache sorted by a value hits changed: undefined behaviour, a SEGV in
// std::stable_sort under load).  Misses on a tiny cache force an eviction
// on nearly every miss while hitters churn a hot set; nothing held is
// evicted, nothing crashes, the cache's invariants hold.
#include "catch.hpp"

#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace test;

TEST_CASE("CLOCK eviction under concurrent hits", "[evict][concurrent]")
{
	ummunot_cache_attr a{};
	a.max_entries = 8;
	fixture f(a);
	std::atomic<bool> stop{false};
	std::atomic<int> bad{0}, hits{0};

	std::vector<std::thread> hitters;
	for (int t = 0; t < 3; t++)
		hitters.emplace_back([&, t] {
			unsigned int x = 17 + t;
			while (!stop.load()) {
				x = x * 1103515245 + 12345;
				std::uint64_t addr = BASE + 2 * PAGE * ((x >> 8) % 6);
				const ummunot_reg *r = nullptr;
				int e = ummunot_cache_get(f.cache, at(addr), PAGE, 1, &r);
				if (e == -ENOSPC)
					continue;
				if (e) {
					bad++;
					continue;
				}
				mr_record *m = rec(r);
				m->holders++;
				if (m->deregs.load())
					bad++;		// handed out after deregistration
				hits++;
				m->holders--;
				if (ummunot_cache_put(f.cache, r))
					bad++;
			}
		});
	// At least 4000 misses, and on until the hitters have really run
	// alongside (a loaded machine may not schedule them at first).
	for (int i = 0; i < 4000 || (hits.load() < 2000 && i < 4000000); i++) {
		const ummunot_reg *r = f.get(BASE + 2 * PAGE * (100 + i % 500), PAGE);
		if (r)
			ummunot_cache_put(f.cache, r);
	}
	stop = true;
	for (auto &t : hitters)
		t.join();
	CHECK(bad == 0);
	INFO("hits " << hits.load());
	CHECK(hits >= 2000);
	CHECK(f.stats().evictions > 1000);
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
	ummunot_cache_destroy(f.cache);
	f.cache = nullptr;
	CHECK(f.be.live() == 0);
	CHECK(f.be.all_deregistered_once());
}
