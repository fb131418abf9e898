// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Many threads get/put while another thread invalidates ranges.  Checks:
//  * no stale hit: a registration returned after an invalidation of its
//    range completed was made after that invalidation began;
//  * nothing is deregistered while held, everything exactly once.
#include "catch.hpp"

#include <atomic>
#include <thread>
#include <vector>

#include "helpers.hpp"

using namespace test;

TEST_CASE("concurrent get/put with invalidations never returns a stale registration",
	  "[concurrent]")
{
	constexpr int nbuf = 16, nthreads = 6, iters = 4000;
	ummunot_cache_attr a{};
	a.ring_entries = 64;		// small: overflows happen too
	a.max_entries = 12;		// and evictions
	fixture f(a);
	// stamp[i]: backend clock taken before the last completed invalidation
	std::atomic<std::uint64_t> stamp[nbuf];
	for (auto &s : stamp)
		s = 0;
	std::atomic<bool> stop{false};
	std::atomic<int> stale{0}, errors{0}, gets{0}, first_error{0}, invals{0};

	auto buf = [](int i) { return BASE + std::uint64_t(i) * 4 * PAGE; };

	std::thread inval([&] {
		unsigned int x = 1;
		while (!stop.load()) {
			x = x * 1103515245 + 12345;
			int i = (x >> 8) % nbuf;
			std::uint64_t s = f.be.clock.fetch_add(1);
			// "munmap(buf i) returned"
			f.fake->invalidate(buf(i), buf(i) + PAGE, UMMUNOT_EVENT_UNMAP);
			stamp[i].store(s, std::memory_order_release);
			invals++;
			std::this_thread::yield();
		}
	});

	std::vector<std::thread> th;
	for (int t = 0; t < nthreads; t++)
		th.emplace_back([&, t] {
			unsigned int x = t + 7;
			// iters gets at least, and on until the invalidator has
			// really run alongside (a loaded machine may starve it).
			for (int n = 0; n < iters || (invals.load() < 500 && n < 100 * iters); n++) {
				x = x * 1103515245 + 12345;
				int i = (x >> 8) % nbuf;
				std::uint64_t s = stamp[i].load(std::memory_order_acquire);
				const ummunot_reg *r = nullptr;
				int e = ummunot_cache_get(f.cache, at(buf(i)), 2 * PAGE,
							  1 + ((x >> 4) & 1), &r);
				if (e == -ENOSPC || e == -EAGAIN)
					continue;	// all entries held / range kept changing
				if (e) {
					int z = 0;
					first_error.compare_exchange_strong(z, e);
					errors++;
					continue;
				}
				gets++;
				mr_record *m = rec(r);
				m->holders++;
				if (m->clock < s || m->deregs.load())
					stale++;
				if (r->addr > buf(i) || r->addr + r->length < buf(i) + 2 * PAGE)
					errors++;
				m->holders--;
				if (ummunot_cache_put(f.cache, r))
					errors++;
			}
		});
	for (auto &t : th)
		t.join();
	stop = true;
	inval.join();

	INFO("first get error " << first_error.load());
	CHECK(errors == 0);
	CHECK(stale == 0);
	CHECK(gets > 0);
	auto s = f.stats();
	INFO("hits " << s.hits << " misses " << s.misses << " evictions " << s.evictions
		     << " resyncs " << s.resyncs << " races " << s.race_retries);
	CHECK(s.hits + s.misses >= static_cast<std::uint64_t>(gets.load()));
	CHECK(s.invalidations[UMMUNOT_EVENT_UNMAP] + s.resyncs > 0);
	ummunot_cache_destroy(f.cache);
	f.cache = nullptr;
	CHECK(f.be.live() == 0);
	CHECK(f.be.all_deregistered_once());
}
