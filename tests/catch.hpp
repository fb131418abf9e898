// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Catch2 for the host tests, 2.x or 3.x: every test includes this header
// ("catch.hpp"), never Catch2's own.  tests/unit/meson.build finds Catch2
// and sets UMMUNOT_CATCH2 to its major version:
//   2  Debian 12 (2.13): the single header catch2/catch.hpp; main() is
//      tests/unit/main.cpp (CATCH_CONFIG_MAIN).
//   3  Debian 13 (3.7): one header per feature and a compiled library;
//      main() is Catch2's own (pkg-config catch2-with-main, libCatch2Main).
// The tests use the test macros (TEST_CASE, SECTION, REQUIRE, CHECK,
// CHECK_THROWS_AS, FAIL, INFO) and GENERATE; add a 3.x header here when a
// test needs another feature (matchers: catch2/matchers/...).
#ifndef UMMUNOT_TESTS_CATCH_HPP
#define UMMUNOT_TESTS_CATCH_HPP

#if UMMUNOT_CATCH2 == 3
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#elif UMMUNOT_CATCH2 == 2
#include <catch2/catch.hpp>
#else
#error "UMMUNOT_CATCH2 must be 2 or 3 (set by tests/unit/meson.build)"
#endif

#endif
