// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "rcu.hpp"

namespace ummunot::detail {
namespace {

struct rcu_thread {
	bool online = false;
	~rcu_thread()
	{
		if (online)
			urcu_memb_unregister_thread();
	}
};

thread_local rcu_thread this_thread;

} // namespace

void rcu_thread_online()
{
	if (!this_thread.online) {
		urcu_memb_register_thread();
		this_thread.online = true;
	}
}

} // namespace ummunot::detail
