// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The library's RCU (lib/rcu.hpp): a writer swaps the published object,
// waits for a grace period, then poisons the old one; a reader that checks
// its object twice inside one read-side critical section (with a pause
// between) never sees it poisoned.  In each of the three ways readers
// count (per-CPU counters in rseq with membarrier; the same with fences; one
// shared atomic counter).  The control poisons without waiting and must be
// seen, so the check can fail.  Objects are poisoned, never freed: a
// violation is a count, not undefined behaviour.
#include "catch.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "rcu.hpp"

namespace {

using ummunot::detail::rcu;

constexpr std::uint64_t alive = 0xa11fe, dead = 0xdead;

struct obj {
	std::atomic<std::uint64_t> magic{alive};
};

struct result {
	long seen_dead = 0;
	long sections = 0;
	long swaps = 0;
};

result run(bool wait)
{
	std::vector<std::unique_ptr<obj>> pool;
	pool.push_back(std::make_unique<obj>());
	std::atomic<obj *> cur{pool.back().get()};
	std::atomic<bool> stop{false};
	std::atomic<long> bad{0}, sections{0};

	auto reader = [&] {
		long n = 0, b = 0;
		while (!stop.load(std::memory_order_relaxed)) {
			unsigned int t = ummunot::detail::rcu_read_lock();
			obj *o = cur.load(std::memory_order_acquire);
			std::uint64_t v1 = o->magic.load(std::memory_order_relaxed);
			for (int i = 0; i < 64; i++)
				std::atomic_signal_fence(std::memory_order_seq_cst);
			std::uint64_t v2 = o->magic.load(std::memory_order_relaxed);
			ummunot::detail::rcu_read_unlock(t);
			if (v1 != alive || v2 != alive)
				b++;
			n++;
		}
		bad += b;
		sections += n;
	};
	std::vector<std::thread> th;
	for (int i = 0; i < 2; i++)
		th.emplace_back(reader);

	result r;
	auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
	while (std::chrono::steady_clock::now() < end) {
		pool.push_back(std::make_unique<obj>());
		obj *old = cur.exchange(pool.back().get(), std::memory_order_acq_rel);
		if (wait)
			ummunot::detail::rcu_synchronize();
		old->magic.store(dead, std::memory_order_relaxed);
		r.swaps++;
		if (!wait)
			std::this_thread::yield();
	}
	stop = true;
	for (auto &t : th)
		t.join();
	r.seen_dead = bad.load();
	r.sections = sections.load();
	return r;
}

// Readers count as `mode` says while the test runs (no reader is inside a
// section when it switches: the counters stay balanced).
struct mode_guard {
	bool fast = rcu.fast.load();
	unsigned int nr = rcu.nr.load();
	mode_guard(bool f, bool percpu)
	{
		rcu.fast.store(f && fast);
		rcu.nr.store(percpu ? nr : 0);
	}
	~mode_guard()
	{
		rcu.fast.store(fast);
		rcu.nr.store(nr);
	}
};

} // namespace

TEST_CASE("rcu: no reader sees an object poisoned after a grace period", "[rcu][threads]")
{
	ummunot::detail::rcu_init();
	struct {
		const char *name;
		bool fast, percpu;
	} modes[] = {
		{"per-CPU counters, membarrier", true, true},
		{"per-CPU counters, fences", false, true},
		{"one shared counter, fences", false, false},
	};
	for (auto &m : modes) {
		mode_guard g(m.fast, m.percpu);
		result r = run(true);
		INFO(m.name << ": " << r.sections << " sections, " << r.swaps << " swaps, "
			    << r.seen_dead << " saw a poisoned object");
		CHECK(r.sections > 1000);
		CHECK(r.swaps > 10);
		CHECK(r.seen_dead == 0);
	}
}

TEST_CASE("rcu: the control (poisoned without a grace period) is seen", "[rcu][threads]")
{
	ummunot::detail::rcu_init();
	// Up to 5 runs of 0.7 s: a loaded machine may schedule the readers
	// away from every window in one.
	result r;
	for (int i = 0; i < 5 && r.seen_dead == 0; i++)
		r = run(false);
	INFO(r.sections << " sections, " << r.swaps << " swaps");
	CHECK(r.seen_dead > 0);
}

TEST_CASE("rcu: a grace period with no reader returns; nested sections count", "[rcu]")
{
	ummunot::detail::rcu_init();
	ummunot::detail::rcu_synchronize();
	unsigned int a = ummunot::detail::rcu_read_lock();
	unsigned int b = ummunot::detail::rcu_read_lock();
	ummunot::detail::rcu_read_unlock(b);
	std::atomic<bool> done{false};
	std::thread w([&] {
		ummunot::detail::rcu_synchronize();
		done = true;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	CHECK_FALSE(done.load());		// waits for the outer section
	ummunot::detail::rcu_read_unlock(a);
	w.join();
	CHECK(done.load());
}
