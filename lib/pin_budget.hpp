// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// A cache's pinned bytes: what it has charged (registered or being
// registered), its own cap (max_pinned_bytes) and its hold on the shared
// budget (lib/budget.hpp), which it charges too.  Which entry to evict when
// a charge fails is the entries' CLOCK (entries::clock_victim()); the miss
// (lib/cache_miss.cpp) loops between the two.  Under the cache's mutex.
#pragma once

#include <algorithm>
#include <cstdint>

#include "budget.hpp"

namespace ummunot::detail {

class pin_budget {
public:
	pin_budget(ummunot_budget &shared, std::uint64_t max_pinned)
		: shared_(shared), max_(max_pinned)
	{
	}

	// bytes more, if they fit under our cap and the shared budget.
	bool charge(std::uint64_t bytes)
	{
		if (bytes > max_ || pinned_ > max_ - bytes)
			return false;
		if (!shared_->try_charge(bytes))
			return false;
		pinned_ += bytes;
		return true;
	}
	void uncharge(std::uint64_t bytes)
	{
		pinned_ -= bytes;
		shared_->uncharge(bytes);
	}
	// Re-read the shared budget's limit (setrlimit may have raised it).
	void refresh() { shared_->refresh(); }

	// The most a single registration may pin.
	std::uint64_t cap() const { return std::min(max_, shared_->limit()); }
	std::uint64_t pinned() const { return pinned_; }
	std::uint64_t max() const { return max_; }
	const ummunot_budget &shared() const { return *shared_; }

private:
	budget_ref shared_;
	const std::uint64_t max_;
	std::uint64_t pinned_ = 0;
};

} // namespace ummunot::detail
