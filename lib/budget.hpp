// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_budget: pinned bytes that several caches share.
//
// A budget has a limit and a charge.  Caches charge it before they pin and
// uncharge it when they deregister; a charge that would pass the limit
// fails and the cache evicts its own unused entries.  A budget created with
// max_bytes 0 (and the process-wide default budget) follows what the
// kernel allows the process: RLIMIT_MEMLOCK, re-read by refresh() whenever
// a charge fails or a registration fails with -ENOMEM, and no limit with
// CAP_IPC_LOCK or RLIM_INFINITY (ib_umem_get() does not count then).
#pragma once

#include <atomic>
#include <cstdint>

struct ummunot_budget {
public:
	explicit ummunot_budget(std::uint64_t max_bytes);
	ummunot_budget(const ummunot_budget &) = delete;
	ummunot_budget &operator=(const ummunot_budget &) = delete;

	// The process-wide budget of caches created without one.
	static ummunot_budget &process_default();

	// Charge bytes if they fit under the limit: true, else false (nothing
	// charged).  Lock-free; any thread.
	bool try_charge(std::uint64_t bytes);
	void uncharge(std::uint64_t bytes);
	// Re-read the limit (rlimit-following budgets only).
	void refresh();

	std::uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
	std::uint64_t used() const { return used_.load(std::memory_order_relaxed); }

	void attach() { users_.fetch_add(1, std::memory_order_relaxed); }
	void detach() { users_.fetch_sub(1, std::memory_order_release); }
	bool in_use() const { return users_.load(std::memory_order_acquire) != 0; }

private:
	void forked_reset();

	const std::uint64_t fixed_;		// 0: follow RLIMIT_MEMLOCK
	std::atomic<std::uint64_t> limit_;
	std::atomic<std::uint64_t> used_{0};
	std::atomic<std::uint64_t> users_{0};
	// A forked child starts with nothing pinned (the kernel does not
	// inherit pinned_vm); the parent's caches are dead there and never
	// uncharge, so the first charge in the child starts the count anew.
	std::atomic<std::uint64_t> fork_gen_;
};

namespace ummunot::detail {

// A cache's hold on its budget: attached for exactly as long as the hold
// lives, so that ummunot_budget_destroy() says -EBUSY while a cache uses
// the budget, and a cache that failed half-way through its creation
// leaves the count as it found it.
class budget_ref {
public:
	budget_ref() = default;
	explicit budget_ref(ummunot_budget &b) : b_(&b) { b_->attach(); }
	~budget_ref()
	{
		if (b_)
			b_->detach();
	}
	budget_ref(const budget_ref &) = delete;
	budget_ref &operator=(const budget_ref &) = delete;
	budget_ref &operator=(budget_ref &&o) noexcept
	{
		if (this != &o) {
			if (b_)
				b_->detach();
			b_ = o.b_;
			o.b_ = nullptr;
		}
		return *this;
	}
	budget_ref(budget_ref &&o) noexcept : b_(o.b_) { o.b_ = nullptr; }

	ummunot_budget *operator->() const { return b_; }
	ummunot_budget &operator*() const { return *b_; }

private:
	ummunot_budget *b_ = nullptr;
};

} // namespace ummunot::detail
