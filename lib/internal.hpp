// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Internal, test-only entry points: open a monitor or create a cache over
// any device (e.g. the in-process fake producer) instead of a file.  Not
// exported from libummunot.so; the unit tests and benchmarks link the
// internal static library and the fake device (ummunot_fake_dep in
// lib/meson.build).
#pragma once

#include <memory>

#include <ummunot/ummunot.h>

#include "device.hpp"

namespace ummunot::detail {

int monitor_open_device(std::unique_ptr<device> dev,
			const ummunot_monitor_attr *attr, ummunot_monitor **out);

int cache_create_device(std::unique_ptr<device> dev,
			const ummunot_backend_ops *ops, void *ctx,
			const ummunot_cache_attr *attr, ummunot_cache **out);

// 0.2's create (ops with a private area, extensible config) over a device.
int cache_create_device_ops(std::unique_ptr<device> dev, const ummunot_cache_ops *ops,
			    void *ctx, const ummunot_cache_config *config,
			    ummunot_cache **out);

// 0 if the cache's internal invariants hold, else the line of the check
// that failed (lib/entries.cpp).  Takes the cache's lock.
int cache_check(ummunot_cache *cache);

} // namespace ummunot::detail
