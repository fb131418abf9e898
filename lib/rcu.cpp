// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// fork handling for the whole library: liburcu-bp's registry and grace
// period lock are held across fork() (its documented before/after hooks),
// so a child that creates its own cache has a consistent registry that
// lists only its one thread; then the fork generation moves, which turns
// every object inherited from the parent into one that answers -ECHILD.
#include "fork.hpp"

#include <pthread.h>

#include "rcu.hpp"

namespace ummunot::detail {

std::atomic<std::uint64_t> fork_generation{0};

namespace {

void before_fork() { urcu_bp_before_fork(); }
void after_fork_parent() { urcu_bp_after_fork_parent(); }

void after_fork_child()
{
	urcu_bp_after_fork_child();
	fork_generation.fetch_add(1, std::memory_order_relaxed);
}

pthread_once_t once = PTHREAD_ONCE_INIT;

void install() { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

} // namespace

void fork_handlers_install()
{
	pthread_once(&once, install);
}

} // namespace ummunot::detail
