// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Hits are counted per CPU without a lock prefix (lib/percpu.hpp, an rseq
// critical section): every hit counts exactly once, whatever the threads,
// their migrations and preemptions do.
#include "catch.hpp"

#include <sys/rseq.h>

#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace test;

TEST_CASE("concurrent hits are counted exactly", "[concurrent]")
{
	INFO("glibc's rseq area: " << __rseq_size << " bytes (0: the atomic fallback)");
	fixture f;
	constexpr int nthreads = 4, iters = 50000, nbuf = 8;
	for (int i = 0; i < nbuf; i++) {
		const ummunot_reg *r = f.get(BASE + 2 * PAGE * i, PAGE);
		REQUIRE(r);
		REQUIRE(ummunot_cache_put(f.cache, r) == 0);
	}
	std::atomic<int> bad{0};
	std::vector<std::thread> th;
	for (int t = 0; t < nthreads; t++)
		th.emplace_back([&, t] {
			for (int n = 0; n < iters; n++) {
				const ummunot_reg *r = f.get(BASE + 2 * PAGE * ((n + t) % nbuf), PAGE);
				if (!r || ummunot_cache_put(f.cache, r))
					bad++;
				if (n % 1000 == 0)
					std::this_thread::yield();	// migrations, preemptions
			}
		});
	for (auto &t : th)
		t.join();
	CHECK(bad == 0);
	auto s = f.stats();
	CHECK(s.misses == nbuf);
	CHECK(s.hits == std::uint64_t(nthreads) * iters);
}
