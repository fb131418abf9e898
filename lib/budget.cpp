// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "budget.hpp"

#include <cerrno>
#include <climits>
#include <linux/capability.h>
#include <new>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#include "fork.hpp"

using namespace ummunot::detail;

namespace {

// CAP_IPC_LOCK in the effective set: ib_umem_get() then skips the
// RLIMIT_MEMLOCK check.  capget(2) directly: no libcap dependency.
bool has_ipc_lock()
{
	__user_cap_header_struct h{};
	__user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

	h.version = _LINUX_CAPABILITY_VERSION_3;
	h.pid = 0;
	if (::syscall(SYS_capget, &h, d) != 0)
		return false;
	return d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

std::uint64_t kernel_limit()
{
	struct rlimit rl;

	if (has_ipc_lock())
		return UINT64_MAX;
	if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return rl.rlim_cur;
}

} // namespace

ummunot_budget::ummunot_budget(std::uint64_t max_bytes)
	: fixed_(max_bytes), limit_(max_bytes ? max_bytes : kernel_limit()),
	  fork_gen_(fork_gen_now())
{
}

ummunot_budget &ummunot_budget::process_default()
{
	// Never destroyed: caches may outlive static destructors.
	static ummunot_budget *b = new ummunot_budget(0);
	return *b;
}

void ummunot_budget::forked_reset()
{
	std::uint64_t g = fork_gen_now();
	std::uint64_t seen = fork_gen_.load(std::memory_order_relaxed);

	if (seen != g && fork_gen_.compare_exchange_strong(seen, g, std::memory_order_relaxed))
		used_.store(0, std::memory_order_relaxed);
}

bool ummunot_budget::try_charge(std::uint64_t bytes)
{
	forked_reset();
	std::uint64_t u = used_.load(std::memory_order_relaxed);
	do {
		std::uint64_t lim = limit();
		if (bytes > lim || u > lim - bytes)
			return false;
	} while (!used_.compare_exchange_weak(u, u + bytes, std::memory_order_relaxed));
	return true;
}

void ummunot_budget::uncharge(std::uint64_t bytes)
{
	used_.fetch_sub(bytes, std::memory_order_relaxed);
}

void ummunot_budget::refresh()
{
	if (!fixed_)
		limit_.store(kernel_limit(), std::memory_order_relaxed);
}

extern "C" {

int ummunot_budget_create(uint64_t max_bytes, struct ummunot_budget **budget)
{
	if (!budget)
		return -EINVAL;
	fork_handlers_install();
	auto *b = new (std::nothrow) ummunot_budget(max_bytes);
	if (!b)
		return -ENOMEM;
	*budget = b;
	return 0;
}

int ummunot_budget_destroy(struct ummunot_budget *budget)
{
	if (!budget)
		return -EINVAL;
	if (budget == &ummunot_budget::process_default() || budget->in_use())
		return -EBUSY;
	delete budget;
	return 0;
}

} // extern "C"
