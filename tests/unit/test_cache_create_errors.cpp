// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// create() that fails leaves nothing behind: a budget it refused stays
// destroyable, and a device it refuses does not crash the undo.
#include "catch.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include "helpers.hpp"

using namespace test;

namespace {

int create(fake_device::config fcfg, ummunot_cache_config cfg, backend &be,
	   ummunot_cache **out)
{
	static const ummunot_cache_ops ops = backend{}.ops2();
	cfg.size = sizeof(cfg);
	return ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(fcfg),
							&ops, &be, &cfg, out);
}

} // namespace

TEST_CASE("create: a budget too small for one page: ENOMEM, and the budget is not held",
	  "[create]")
{
	backend be;
	ummunot_budget *b = nullptr;
	REQUIRE(ummunot_budget_create(1000, &b) == 0);
	ummunot_cache_config cfg{};
	cfg.budget = b;
	ummunot_cache *c = nullptr;
	CHECK(create({}, cfg, be, &c) == -ENOMEM);
	CHECK(ummunot_budget_destroy(b) == 0);
}

TEST_CASE("create: max_pinned_bytes below a page: ENOMEM, and the budget is not held",
	  "[create]")
{
	backend be;
	ummunot_budget *b = nullptr;
	REQUIRE(ummunot_budget_create(1 << 20, &b) == 0);
	ummunot_cache_config cfg{};
	cfg.budget = b;
	cfg.max_pinned_bytes = 100;
	ummunot_cache *c = nullptr;
	CHECK(create({}, cfg, be, &c) == -ENOMEM);
	CHECK(ummunot_budget_destroy(b) == 0);

	// The same budget held by a cache that was created: EBUSY until it
	// is destroyed, then free to go.
	REQUIRE(ummunot_budget_create(1 << 20, &b) == 0);
	cfg.budget = b;
	cfg.max_pinned_bytes = 0;
	REQUIRE(create({}, cfg, be, &c) == 0);
	CHECK(ummunot_budget_destroy(b) == -EBUSY);
	ummunot_cache_destroy(c);
	CHECK(ummunot_budget_destroy(b) == 0);
}

TEST_CASE("create: a device with max_regions 1 is refused with EPROTO, no crash", "[create]")
{
	// In a child: before the fix the undo dereferenced a null budget.
	pid_t pid = ::fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		backend be;
		fake_device::config fcfg;
		fcfg.max_regions = 1;
		ummunot_cache *c = nullptr;
		int r = create(fcfg, {}, be, &c);
		::_exit(r == -EPROTO ? 0 : 1);
	}
	int st = 0;
	REQUIRE(::waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK((WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st)) == 0);
}
