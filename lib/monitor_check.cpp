// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot_monitor_check_init(): the words of ummunot_monitor_changed(), for
// the inline ummunot_monitor_check_changed() of <ummunot/ummunot.h>.
#include <atomic>
#include <cerrno>
#include <cstdint>

#include <ummunot/ummunot.h>

#include "fork.hpp"
#include "monitor.hpp"

int ummunot_monitor_check_init(const struct ummunot_monitor *monitor,
			       struct ummunot_monitor_check *check)
{
	using ummunot::detail::fork_generation;

	if (!monitor || !check)
		return -EINVAL;
	if (monitor->forked())
		return -ECHILD;
	static_assert(sizeof(fork_generation) == sizeof(std::uint64_t) &&
		      alignof(decltype(fork_generation)) == alignof(std::uint64_t) &&
		      std::atomic<std::uint64_t>::is_always_lock_free);
	check->generation = monitor->generation_word();
	check->seen = monitor->seen_word();
	check->fork_generation = reinterpret_cast<const std::uint64_t *>(&fork_generation);
	check->fork_seen = monitor->fork_gen();
	return 0;
}
