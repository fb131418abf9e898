// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The header-only C++ wrappers: RAII put, exceptions carry the errno.
#include <catch2/catch.hpp>

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
