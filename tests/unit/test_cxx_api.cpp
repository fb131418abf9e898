// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The header-only C++ wrappers: RAII put, exceptions carry the errno.
#include "catch.hpp"

#include <ummunot/ummunot.hpp>

#include "helpers.hpp"

using namespace test;

TEST_CASE("C++ wrappers: registration is put back when it goes out of scope", "[cxx]")
{
	fixture f;
	ummunot::cache c(std::exchange(f.cache, nullptr));
	{
		auto r = c.get(at(BASE), PAGE, 1);
		REQUIRE(r);
		CHECK(r.addr() == BASE);
		CHECK(r.length() == PAGE);
		REQUIRE(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_UNMAP) == 1);
		CHECK(c.poll() == 1);
		CHECK(rec(r.get())->deregs == 0);	// still held by r
		auto moved = std::move(r);
		CHECK(!r);
	}
	CHECK(f.be.deregs == 1);			// put on scope exit
	CHECK(c.stats().invalidations[UMMUNOT_EVENT_UNMAP] == 1);
}

TEST_CASE("C++ wrappers throw std::system_error with the errno", "[cxx]")
{
	try {
		ummunot::monitor m("/nonexistent/ummunot");
		FAIL("no exception");
	} catch (const std::system_error &e) {
		CHECK(e.code().value() == ENOENT);
	}
	fixture f;
	ummunot::cache c(std::exchange(f.cache, nullptr));
	CHECK_THROWS_AS(c.get(at(BASE), 0, 1), std::system_error);
}

TEST_CASE("C++ wrappers: 0.2 cache (private area, invalidate, stats_ext)", "[cxx]")
{
	backend be;
	ummunot_cache_ops ops = be.ops2();
	ummunot_cache_config cfg{};
	cfg.size = sizeof(cfg);
	cfg.priv_size = 16;
	ummunot_cache *raw = nullptr;
	REQUIRE(ummunot::detail::cache_create_device_ops(std::make_unique<fake_device>(), &ops,
							 &be, &cfg, &raw) == 0);
	ummunot::cache c(raw);
	{
		auto r = c.get(at(BASE), PAGE, 1);
		REQUIRE(r.priv());
		CHECK(*static_cast<std::uint64_t *>(r.priv()) == BASE);
		CHECK(c.invalidate(at(BASE), PAGE) == 1);
	}
	CHECK(be.deregs == 1);
	CHECK(c.stats_ext().caller_invalidations == 1);
	CHECK_THROWS_AS(c.fd(), std::system_error);	// the fake device has no fd
}
