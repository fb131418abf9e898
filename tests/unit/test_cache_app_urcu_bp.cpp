// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// An application that uses liburcu-bp itself, the flavour the library uses
// (one registry per process: the two share grace periods).  It may call
// into the cache inside its own read-side critical section: the library
// never waits for a grace period there (it would wait for the caller
// itself, forever, with every signal blocked), and frees what it retired
// at a later call instead.
#include "catch.hpp"

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <urcu/urcu-bp.h>

#include "helpers.hpp"

using namespace test;

namespace {

// Runs fn in a forked child (a deadlock in urcu_bp_synchronize_rcu() blocks
// every signal: only SIGKILL ends it).  Its exit status, 128 + signal, or
// -1 if it was still running after timeout.
template <class F>
int in_child_timed(F &&fn, std::chrono::seconds timeout)
{
	pid_t pid = ::fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		::_exit(fn());
	auto until = std::chrono::steady_clock::now() + timeout;
	int st = 0;
	for (;;) {
		pid_t w = ::waitpid(pid, &st, WNOHANG);
		REQUIRE(w >= 0);
		if (w == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (std::chrono::steady_clock::now() > until) {
			::kill(pid, SIGKILL);
			::waitpid(pid, &st, 0);
			return -1;
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
}

// Entries retired and waiting for a grace period: n gets, put back, then
// invalidated by an event.
bool retire_some(fixture &f, int n)
{
	for (int i = 0; i < n; i++) {
		const ummunot_reg *r = f.get(BASE + 2 * PAGE * i, PAGE);
		if (!r || ummunot_cache_put(f.cache, r))
			return false;
	}
	f.fake->invalidate(BASE, BASE + 2 * PAGE * n, UMMUNOT_EVENT_UNMAP);
	return true;
}

} // namespace

TEST_CASE("an application's own urcu_bp read lock around every slow-path call", "[threads]")
{
	int st = in_child_timed([] {
		fixture f;
		int bad = 0;
		if (!retire_some(f, 64))
			return 2;
		urcu_bp_read_lock();
		// Each of these may end with a grace period: poll (events),
		// invalidate, a miss, the last put of a dead entry, flush.
		bad += ummunot_cache_poll(f.cache) < 0;
		bad += ummunot_cache_invalidate(f.cache, at(BASE), 64 * 2 * PAGE) < 0;
		const ummunot_reg *r = f.get(BASE + 1000 * PAGE, PAGE);
		bad += !r;
		f.fake->invalidate(BASE + 1000 * PAGE, BASE + 1001 * PAGE, UMMUNOT_EVENT_UNMAP);
		bad += ummunot_cache_poll(f.cache) < 0;
		bad += r && ummunot_cache_put(f.cache, r) != 0;
		bad += !retire_some(f, 64);
		bad += ummunot_cache_flush(f.cache) < 0;
		urcu_bp_read_unlock();
		// Outside it, the next call frees what was left.
		bad += ummunot_cache_flush(f.cache) < 0;
		bad += ummunot::detail::cache_check(f.cache) != 0;
		return bad ? 1 : 0;
	}, std::chrono::seconds(30));
	CHECK(st == 0);
}

namespace {

// Thread A enters the application's read-side critical section; thread B
// then runs a writer section that waits for a grace period (flush: forced
// reclaim of what retire_some() left); while B waits, A calls into the
// cache (what = "miss": a new range; "hit": a cached range while an event
// is pending, which drains first) and leaves its section only afterwards.
// Returns 0 when A's call came back inside its section, 1 when it did but
// failed, 3 when it did not within 5 s (B then waits on A's section and A
// on B: the deadlock; the child is killed by the caller's timeout).
int app_section_during_grace_period(const char *what)
{
	fixture f;
	if (!retire_some(f, 64))
		return 2;
	const ummunot_reg *cached = f.get(BASE + 4000 * PAGE, PAGE);
	if (!cached || ummunot_cache_put(f.cache, cached))
		return 2;
	std::atomic<int> step{0};
	std::atomic<int> result{3};

	std::thread a([&] {
		urcu_bp_read_lock();
		step = 1;
		while (step.load() < 2) {
		}
		// Let B get into its grace period.
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		int bad = 0;
		if (!std::strcmp(what, "miss")) {
			const ummunot_reg *r = f.get(BASE + 3000 * PAGE, PAGE);
			bad = !r || ummunot_cache_put(f.cache, r);
		} else {
			f.fake->invalidate(BASE + 5000 * PAGE, BASE + 5001 * PAGE,
					   UMMUNOT_EVENT_UNMAP);
			const ummunot_reg *r = f.get(BASE + 4000 * PAGE, PAGE);
			bad = !r || ummunot_cache_put(f.cache, r);
		}
		result = bad;
		urcu_bp_read_unlock();
	});
	std::thread b([&] {
		while (step.load() < 1) {
		}
		step = 2;
		ummunot_cache_flush(f.cache);
	});
	auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (result.load() == 3 && std::chrono::steady_clock::now() < until)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	if (result.load() == 3)
		::_exit(3);	// deadlocked: threads cannot be joined
	a.join();
	b.join();
	if (ummunot::detail::cache_check(f.cache) != 0)
		return 4;
	return result.load();
}

} // namespace

TEST_CASE("another thread's grace period never waits for a read section that waits for it",
	  "[threads]")
{
	for (const char *what : {"miss", "hit"}) {
		INFO("thread A's call inside its read section: " << what);
		int st = in_child_timed([what] { return app_section_during_grace_period(what); },
					std::chrono::seconds(30));
		CHECK(st == 0);
	}
}

// An application thread stays inside its read-side critical section (not
// calling the cache) until thread C has done 200 misses and puts, or 10 s;
// meanwhile thread B's flush waits for a grace period, i.e. for A.  C must
// not wait for B: it finishes while A is still inside.
TEST_CASE("a long read section in the application stalls no other thread's calls", "[threads]")
{
	int st = in_child_timed([] {
		fixture f;
		if (!retire_some(f, 64))
			return 2;
		std::atomic<int> step{0};
		std::atomic<bool> c_done{false}, c_bad{false};
		std::atomic<bool> a_inside_when_c_done{false};

		std::thread a([&] {
			urcu_bp_read_lock();
			step = 1;
			auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
			while (!c_done.load() && std::chrono::steady_clock::now() < until)
				std::this_thread::sleep_for(std::chrono::milliseconds(1));
			a_inside_when_c_done = c_done.load();
			urcu_bp_read_unlock();
		});
		std::thread b([&] {
			while (step.load() < 1) {
			}
			step = 2;
			ummunot_cache_flush(f.cache);
		});
		std::thread c([&] {
			while (step.load() < 2) {
			}
			std::this_thread::sleep_for(std::chrono::milliseconds(50));
			for (int i = 0; i < 200; i++) {
				std::uint64_t x = BASE + 6000 * PAGE + 2 * PAGE * i;
				const ummunot_reg *r = f.get(x, PAGE);
				if (!r || ummunot_cache_put(f.cache, r))
					c_bad = true;
				f.fake->invalidate(x, x + PAGE, UMMUNOT_EVENT_UNMAP);
			}
			c_done = true;
		});
		a.join();
		b.join();
		c.join();
		if (c_bad.load() || ummunot::detail::cache_check(f.cache) != 0)
			return 1;
		return a_inside_when_c_done.load() ? 0 : 5;
	}, std::chrono::seconds(40));
	CHECK(st == 0);
}
