// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Catch2 2.x's main() for every host test (tests/unit, tests/tools).  With
// Catch2 3.x meson links Catch2's own main instead and does not build this
// file (tests/catch.hpp).
#if UMMUNOT_CATCH2 != 2
#error "main.cpp is for Catch2 2.x only"
#endif
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
