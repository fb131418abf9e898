// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_monitor, the C API: argument checks and the extern "C"
// entry points, which catch every exception.  The monitor itself is in
// lib/monitor.cpp.
#include "monitor.hpp"

#include <cerrno>
#include <cstdint>
#include <new>

#include "ext.hpp"
#include "internal.hpp"

using namespace ummunot::detail;

namespace {

// Every C entry point on an existing monitor: NULL, a parent's monitor in
// a forked child, and (for calls that change state) a cache's monitor.
int check(const ummunot_monitor *m, bool mutating)
{
	if (!m)
		return -EINVAL;
	if (m->forked())
		return -ECHILD;
	if (mutating && m->owned())
		return -EBUSY;
	return 0;
}

bool zero(const std::uint64_t *p, std::size_t n)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

} // namespace

namespace ummunot::detail {

int monitor_open_device(std::unique_ptr<device> dev,
			const ummunot_monitor_attr *attr, ummunot_monitor **out)
{
	if (!dev || !out)
		return -EINVAL;
	if (attr && (attr->flags || !zero(attr->resv, 4) ||
		     (attr->features & ~UMMUNOT_FEATURES_V1)))
		return -EINVAL;
	return ummunot_monitor::open(std::move(dev), attr, out);
}

} // namespace ummunot::detail

/* ---------------------------------------------------------------- C API */

extern "C" {

int ummunot_monitor_open(const struct ummunot_monitor_attr *attr,
			 struct ummunot_monitor **monitor)
{
	if (!monitor)
		return -EINVAL;
	if (attr && (attr->flags || !zero(attr->resv, 4) ||
		     (attr->features & ~UMMUNOT_FEATURES_V1)))
		return -EINVAL;
	try {
		int r = 0;
		const char *path = attr && attr->device_path ? attr->device_path
							     : UMMUNOT_DEFAULT_DEVICE_PATH;
		auto dev = device_open_real(path, &r);
		if (!dev)
			return r;
		return ummunot_monitor::open(std::move(dev), attr, monitor);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

void ummunot_monitor_close(struct ummunot_monitor *monitor)
{
	// A cache's monitor belongs to the cache (ummunot_cache_destroy()
	// releases it): closing it would leave the cache on a freed ring.
	if (monitor && monitor->owned())
		return;
	delete monitor;
}

int ummunot_monitor_fd(const struct ummunot_monitor *monitor)
{
	if (!monitor)
		return -EINVAL;
	int fd = monitor->fd();
	return fd >= 0 ? fd : -ENODEV;
}

int ummunot_monitor_query(const struct ummunot_monitor *monitor,
			  struct ummunot_monitor_info *info)
{
	if (!info)
		return -EINVAL;
	if (int r = check(monitor, false))
		return r;
	const ummunot_hello &h = monitor->hello();
	*info = ummunot_monitor_info{};
	info->abi_version = h.abi_version;
	info->ring_entries = h.ring_entries;
	info->features = h.features;
	info->supported_features = h.supported_features;
	info->max_regions = h.max_regions;
	info->entry_size = h.entry_size;
	return 0;
}

int ummunot_monitor_register(struct ummunot_monitor *monitor,
			     struct ummunot_region *regions, unsigned int count,
			     unsigned int *error_index)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->register_regions(regions, count, error_index);
}

int ummunot_monitor_unregister(struct ummunot_monitor *monitor,
			       const uint64_t *handles, unsigned int count,
			       unsigned int *error_index)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->handles_op(UMMUNOT_IOC_UNREGISTER, handles, count, error_index);
}

int ummunot_monitor_rearm(struct ummunot_monitor *monitor,
			  const uint64_t *handles, unsigned int count,
			  unsigned int *error_index)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->handles_op(UMMUNOT_IOC_REARM, handles, count, error_index);
}

int ummunot_monitor_set_filter(struct ummunot_monitor *monitor, uint64_t mask,
			       uint64_t *old_mask)
{
	// Allowed on a cache's monitor: it changes which events are produced,
	// not the cache's state (0.1 programs use it for a negative control).
	if (int r = check(monitor, false))
		return r;
	return monitor->set_filter(mask, old_mask);
}

int ummunot_monitor_changed(const struct ummunot_monitor *monitor)
{
	if (int r = check(monitor, false))
		return r;
	return monitor->changed() ? 1 : 0;
}

int ummunot_monitor_read(struct ummunot_monitor *monitor,
			 struct ummunot_event *events, unsigned int max)
{
	if (!events && max)
		return -EINVAL;
	if (int r = check(monitor, true))
		return r;
	if (max > INT32_MAX)
		max = INT32_MAX;
	// (F) first: if we empty the ring, everything up to g was consumed.
	std::uint64_t g = monitor->generation();
	bool complete;
	unsigned int i = 0;
	int n = monitor->consume(max, &complete, [&](const ummunot_event &ev) {
		events[i++] = ev;
	});
	if (n >= 0 && complete)
		monitor->mark_seen(g);
	return n;
}

int ummunot_monitor_resync(struct ummunot_monitor *monitor, uint64_t *dropped)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->resync(dropped);
}

int ummunot_monitor_stats(struct ummunot_monitor *monitor,
			  struct ummunot_stats *stats)
{
	if (!stats)
		return -EINVAL;
	if (int r = check(monitor, false))
		return r;
	return monitor->stats(stats);
}

int ummunot_monitor_query_ext(const struct ummunot_monitor *monitor,
			      struct ummunot_monitor_info_ext *info, size_t size)
{
	if (!info || size < sizeof(std::uint64_t))
		return -EINVAL;
	if (int r = check(monitor, false))
		return r;
	const ummunot_hello &h = monitor->hello();
	ummunot_monitor_info_ext v{};
	v.abi_version = h.abi_version;
	v.ring_entries = h.ring_entries;
	v.features = h.features;
	v.supported_features = h.supported_features;
	v.max_regions = h.max_regions;
	v.entry_size = h.entry_size;
	v.header_size = h.header_size;
	v.ring_mmap_size = h.ring_mmap_size;
	return copy_ext(info, size, &v, sizeof(v));
}

} // extern "C"
