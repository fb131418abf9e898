// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot_monitor_check_changed(), the inline "changed?" test: the same
// answer as ummunot_monitor_changed() through every state of the ring, and
// "changed" (without touching the ring) in a forked child.
#include "catch.hpp"

#include <cstring>
#include <memory>

#include <sys/wait.h>
#include <unistd.h>

#include "helpers.hpp"

using namespace test;

namespace {

// As a caller sets it up: size set, the rest zero.
ummunot_monitor_check sized()
{
	ummunot_monitor_check c{};
	c.size = sizeof(c);
	return c;
}

struct check_fixture : monitor_fixture {
	ummunot_monitor_check chk = sized();

	check_fixture() { REQUIRE(ummunot_monitor_check_init(mon, &chk) == 0); }

	// Both forms, which must agree.
	int changed()
	{
		int out = ummunot_monitor_changed(mon);
		int in = ummunot_monitor_check_changed(&chk);
		CHECK(in == out);
		return in;
	}
};

} // namespace

TEST_CASE("check_init: arguments", "[check]")
{
	check_fixture f;
	ummunot_monitor_check c = sized();
	CHECK(ummunot_monitor_check_init(nullptr, &c) == -EINVAL);
	CHECK(ummunot_monitor_check_init(f.mon, nullptr) == -EINVAL);
	// Twice on one monitor: the same words.
	REQUIRE(ummunot_monitor_check_init(f.mon, &c) == 0);
	CHECK(c.generation == f.chk.generation);
	CHECK(c.seen == f.chk.seen);
	CHECK(c.generation == &f.fake->header()->generation);
}

TEST_CASE("check_init: the size and flags fields", "[check]")
{
	check_fixture f;
	// Below the 0.3 struct, or flags set: -EINVAL, the struct unchanged.
	for (std::uint32_t size : {0u, 8u, std::uint32_t(UMMUNOT_MONITOR_CHECK_SIZE_V1 - 1)}) {
		ummunot_monitor_check c{};
		c.size = size;
		CHECK(ummunot_monitor_check_init(f.mon, &c) == -EINVAL);
		CHECK(c.size == size);
		CHECK(c.generation == nullptr);
	}
	ummunot_monitor_check c = sized();
	c.flags = 1;
	CHECK(ummunot_monitor_check_init(f.mon, &c) == -EINVAL);
	CHECK(c.generation == nullptr);
	// The 0.3 struct is exactly size, flags and the two words.
	STATIC_REQUIRE(UMMUNOT_MONITOR_CHECK_SIZE_V1 == sizeof(ummunot_monitor_check));

	// A caller built against a newer header (a larger struct): the
	// known prefix filled, the rest zeroed, size says how much.
	struct newer {
		ummunot_monitor_check v1;
		std::uint64_t later[3];
	} n;
	std::memset(&n, 0xa5, sizeof(n));
	n.v1.size = sizeof(n);
	n.v1.flags = 0;
	REQUIRE(ummunot_monitor_check_init(f.mon, &n.v1) == 0);
	CHECK(n.v1.size == sizeof(ummunot_monitor_check));
	CHECK(n.v1.flags == 0);
	CHECK(n.v1.generation == f.chk.generation);
	CHECK(n.v1.seen == f.chk.seen);
	for (std::uint64_t w : n.later)
		CHECK(w == 0);
	CHECK(ummunot_monitor_check_changed(&n.v1) == 0);
}

TEST_CASE("the inline check agrees with ummunot_monitor_changed()", "[check]")
{
	check_fixture f;
	std::uint64_t h[3] = {f.watch(BASE, PAGE, 1), f.watch(BASE + 2 * PAGE, PAGE, 2),
			      f.watch(BASE + 4 * PAGE, PAGE, 3)};
	CHECK(f.changed() == 0);

	REQUIRE(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_UNMAP) == 1);
	CHECK(f.changed() == 1);
	ummunot_event ev[4];
	REQUIRE(ummunot_monitor_read(f.mon, ev, 4) == 1);
	CHECK(f.changed() == 0);

	// A read that leaves events behind is not complete.
	REQUIRE(f.fake->invalidate(BASE, BASE + 6 * PAGE, UMMUNOT_EVENT_CLEAR) == 2);
	CHECK(f.changed() == 1);
	REQUIRE(ummunot_monitor_read(f.mon, ev, 1) == 1);
	CHECK(f.changed() == 1);
	REQUIRE(ummunot_monitor_read(f.mon, ev, 4) == 1);
	CHECK(f.changed() == 0);

	// Filtered: nothing reaches the ring, nothing changed.
	REQUIRE(ummunot_monitor_rearm(f.mon, h, 3, nullptr) == 0);
	CHECK(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_PROTECTION_VMA) == 0);
	CHECK(f.changed() == 0);
}

TEST_CASE("the inline check says changed through overflow until the resync's drain", "[check]")
{
	check_fixture f;
	for (int i = 0; i < 70; i++)
		f.watch(BASE + i * PAGE, PAGE, i);
	REQUIRE(f.fake->invalidate(BASE, BASE + 70 * PAGE, UMMUNOT_EVENT_UNMAP) == 70);
	CHECK(f.changed() == 1);
	ummunot_event ev[8];
	CHECK(ummunot_monitor_read(f.mon, ev, 8) == -EOVERFLOW);
	CHECK(f.changed() == 1);
	REQUIRE(ummunot_monitor_resync(f.mon, nullptr) == 0);
	REQUIRE(ummunot_monitor_read(f.mon, ev, 8) == 0);
	CHECK(f.changed() == 0);
}

TEST_CASE("fork: the inline check says changed in the child, the parent is unaffected", "[check][fork]")
{
	check_fixture f;
	f.watch(BASE, PAGE, 1);
	REQUIRE(f.changed() == 0);

	pid_t pid = fork();
	if (pid == 0) {
		// The fake's ring is ordinary memory, still readable here: only
		// the fork handler's poisoning of seen can make this 1.
		int r = ummunot_monitor_check_changed(&f.chk) == 1 &&
			*f.chk.seen == UMMUNOT_CHECK_FORKED &&
			ummunot_monitor_changed(f.mon) == -ECHILD;
		ummunot_monitor_check c = sized();
		int e = ummunot_monitor_check_init(f.mon, &c);
		_exit(r && e == -ECHILD ? 0 : 1);
	}
	REQUIRE(pid > 0);
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK(WEXITSTATUS(st) == 0);

	CHECK(f.changed() == 0);
	REQUIRE(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_UNMAP) == 1);
	CHECK(f.changed() == 1);
}

TEST_CASE("fork after close: a closed monitor's words are forgotten", "[check][fork]")
{
	// A monitor whose words were handed out, closed before the fork: the
	// child's handler must not write into it (freed).  A second monitor
	// at work proves the handler ran.
	auto first = std::make_unique<check_fixture>();
	first.reset();
	check_fixture f;
	pid_t pid = fork();
	if (pid == 0)
		_exit(ummunot_monitor_check_changed(&f.chk) == 1 ? 0 : 1);
	REQUIRE(pid > 0);
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK(WEXITSTATUS(st) == 0);
}
