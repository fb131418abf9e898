// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot_monitor_check_init(): the two words of ummunot_monitor_changed(),
// for the inline ummunot_monitor_check_changed() of <ummunot/ummunot.h>.
//
// fork(): the ring is not mapped in a child (VM_DONTCOPY), so the inline
// check must not load the generation there.  Every monitor whose words
// were handed out is listed here; the child's fork handler sets each one's
// seen word to UMMUNOT_CHECK_FORKED, which the check tests first.  The
// list's mutex is held across fork() (prepare/parent/child handlers), so
// the child finds it consistent and unlocks it from the forking thread.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <new>
#include <pthread.h>
#include <vector>

#include <ummunot/ummunot.h>

#include "monitor.hpp"

namespace {

std::mutex mu;
std::vector<const ummunot_monitor *> *handed_out;	// under mu; never freed
pthread_once_t once = PTHREAD_ONCE_INIT;

void prepare() { mu.lock(); }
void parent() { mu.unlock(); }

void child()
{
	// Single-threaded: the forking thread, which holds mu.
	if (handed_out)
		for (const ummunot_monitor *m : *handed_out)
			const_cast<ummunot_monitor *>(m)->poison_seen();
	mu.unlock();
}

void install() { pthread_atfork(prepare, parent, child); }

} // namespace

void ummunot::detail::check_words_forget(const ummunot_monitor *m)
{
	std::lock_guard<std::mutex> g(mu);
	auto &v = *handed_out;
	v.erase(std::remove(v.begin(), v.end(), m), v.end());
}

int ummunot_monitor_check_init(const struct ummunot_monitor *monitor,
			       struct ummunot_monitor_check *check)
{
	if (!monitor || !check || check->size < UMMUNOT_MONITOR_CHECK_SIZE_V1 ||
	    check->flags)
		return -EINVAL;
	if (monitor->forked())
		return -ECHILD;
	pthread_once(&once, install);
	{
		std::lock_guard<std::mutex> g(mu);
		if (!monitor->check_words_out) {
			if (!handed_out)
				handed_out = new (std::nothrow) std::vector<const ummunot_monitor *>;
			if (!handed_out)
				return -ENOMEM;
			try {
				handed_out->push_back(monitor);
			} catch (...) {
				return -ENOMEM;
			}
			monitor->check_words_out = true;
		}
	}
	// The caller's struct may be larger (a newer header): what this
	// library does not know reads as zero, and size says what it filled.
	const std::size_t n = std::min<std::size_t>(check->size, sizeof(*check));
	std::memset(reinterpret_cast<unsigned char *>(check) + n, 0, check->size - n);
	ummunot_monitor_check c{};
	c.size = static_cast<std::uint32_t>(n);
	c.generation = monitor->generation_word();
	c.seen = monitor->seen_word();
	std::memcpy(check, &c, n);
	return 0;
}
