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

#include <chrono>
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
