// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "rcu.hpp"

#include <atomic>

namespace ummunot::detail {

__thread rcu_thread_state rcu_tls __attribute__((tls_model("initial-exec")));

namespace {

std::atomic<unsigned int> next_shard{0};

// Only its destructor matters: touched once per thread, on registration.
struct rcu_thread_guard {
	bool armed = false;
	~rcu_thread_guard()
	{
		if (armed) {
			urcu_memb_unregister_thread();
			rcu_tls.online = 0;
		}
	}
};

thread_local rcu_thread_guard guard;

} // namespace

void rcu_thread_register()
{
	urcu_memb_register_thread();
	guard.armed = true;
	rcu_tls.shard = next_shard.fetch_add(1, std::memory_order_relaxed);
	rcu_tls.online = 1;
}

} // namespace ummunot::detail
