// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// libummunot-ofi's memory monitor (adapters/libfabric/ofi_monitor.cpp) over
// the fake device, driven as libfabric 1.17 to 2.0 drive it: subscribe on
// every cache insert, valid() on every hit, and no unsubscribe ever (an
// entry evicted from libfabric's LRU just goes).
#include "catch.hpp"

#include <atomic>
#include <chrono>
#include <thread>

#include <rdma/fi_ext.h>

#include <ummunot/ofi.h>

#include "helpers.hpp"

fid_mem_monitor *ummunot_ofi_test_monitor(ummunot_monitor *m);
int ummunot_ofi_test_stats(fid_mem_monitor *fm, struct ummunot_ofi_stats *stats);
void ummunot_ofi_test_free(fid_mem_monitor *fm);
void ummunot_ofi_test_drain(fid_mem_monitor *fm);
void ummunot_ofi_test_set_after_read(void (*fn)());

using namespace test;

namespace {

struct ofi {
	fake_device *fake = nullptr;
	fid_mem_monitor *fm = nullptr;

	ofi()
	{
		auto dev = std::make_unique<fake_device>();
		fake = dev.get();
		ummunot_monitor *m = nullptr;
		REQUIRE(ummunot::detail::monitor_open_device(std::move(dev), nullptr, &m) == 0);
		fm = ummunot_ofi_test_monitor(m);
		REQUIRE(fm);
	}
	~ofi() { ummunot_ofi_test_free(fm); }
	ofi(const ofi &) = delete;
	ofi &operator=(const ofi &) = delete;
	int subscribe(std::uint64_t a, std::size_t len)
	{
		return fm->export_ops->subscribe(fm, at(a), len);
	}
	bool valid(std::uint64_t a, std::size_t len)
	{
		return fm->export_ops->valid(fm, at(a), len);
	}
	struct ummunot_ofi_stats stats()
	{
		struct ummunot_ofi_stats s{};
		REQUIRE(ummunot_ofi_test_stats(fm, &s) == sizeof(s));
		return s;
	}
};

} // namespace

TEST_CASE("ofi: ranges evicted silently, then freed, leave a bounded number of records",
	  "[ofi]")
{
	ofi o;
	constexpr std::uint64_t n = 200000;
	// Each range: inserted (subscribe), evicted by libfabric's LRU with no
	// callback, its memory freed (an event).
	for (std::uint64_t i = 0; i < n; i++) {
		std::uint64_t a = BASE + 2 * PAGE * i;
		REQUIRE(o.subscribe(a, PAGE) == 0);
		o.fake->invalidate(a, a + PAGE, UMMUNOT_EVENT_UNMAP);
	}
	// One range still cached and unchanged.
	std::uint64_t keep = BASE + 2 * PAGE * (n + 1);
	REQUIRE(o.subscribe(keep, PAGE) == 0);
	auto st = o.stats();
	CHECK(st.regions == 1);
	CHECK(o.fake->nr_regions() == 1);
	// Bounded: 16384 invalidated records at most (about 1 MiB), not one
	// per range ever freed.
	CHECK(st.invalidated <= 16384);

	// Answers stay right: the unchanged range is valid, every freed one
	// (with or without a record left) is invalid.
	CHECK(o.valid(keep, PAGE));
	for (std::uint64_t i = 0; i < n; i += 997)
		CHECK_FALSE(o.valid(BASE + 2 * PAGE * i, PAGE));
	CHECK_FALSE(o.valid(BASE + 2 * PAGE * (n - 1), PAGE));
	CHECK(o.valid(keep, PAGE));
	// And a change to it is seen.
	o.fake->invalidate(keep, keep + PAGE, UMMUNOT_EVENT_UNMAP);
	CHECK_FALSE(o.valid(keep, PAGE));
}

// The evictor drains the ring on its own thread, outside libfabric's lock,
// while valid() runs on another: a valid() that comes between the drain's
// read (which moves the library's "seen" word) and its marking the range
// invalidated must still not answer "valid".
//
// "[window]": deterministic.  The drain stops right after its read (a test
// hook) and lets this thread call valid() there; it waits up to 50 ms for
// the answer (with the drain's count, valid() takes the slow path and waits
// for the drain's lock: no answer until the drain goes on).  Every answer
// must be "invalid".  The negative control (test_ofi_monitor_unguarded: a
// drain does not count itself) answers "valid" in that window every round.
namespace {

std::atomic<int> window_step{0};

void wait_in_window()
{
	window_step.store(1, std::memory_order_release);
	auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
	while (window_step.load(std::memory_order_acquire) != 2 &&
	       std::chrono::steady_clock::now() < until) {
	}
}

} // namespace

TEST_CASE("ofi: valid() between a drain's read and its marking says invalid", "[ofi][window]")
{
	ofi o;
#ifdef UMMUNOT_OFI_TEST_NO_DRAIN_COUNT
	constexpr bool control = true;
#else
	constexpr bool control = false;
#endif
	constexpr int rounds = 20;
	int wrong = 0;

	ummunot_ofi_test_set_after_read(wait_in_window);
	for (int i = 0; i < rounds; i++) {
		std::uint64_t a = BASE + 2 * PAGE * i;
		REQUIRE(o.subscribe(a, PAGE) == 0);
		o.fake->invalidate(a, a + PAGE, UMMUNOT_EVENT_UNMAP);
		window_step = 0;
		std::thread drainer([&] { ummunot_ofi_test_drain(o.fm); });
		while (window_step.load(std::memory_order_acquire) != 1) {
		}
		bool v = o.valid(a, PAGE);
		window_step.store(2, std::memory_order_release);
		drainer.join();
		wrong += v;
		// libfabric would have kept the entry: its next look is
		// answered from the marked record, and drops it.
		if (v)
			CHECK_FALSE(o.valid(a, PAGE));
	}
	ummunot_ofi_test_set_after_read(nullptr);
	INFO("valid() answered \"valid\" in the window in " << wrong << " of " << rounds << " rounds");
	if (control)
		CHECK(wrong == rounds);
	else
		CHECK(wrong == 0);
}

// "[race]": the same without the hook, the drain and valid() free-running
// (TSan sees the real interleavings): each round a range is subscribed and
// changed, one thread drains while this one calls valid() after a varying
// delay until the first "invalid" (libfabric then drops the entry and never
// asks again); every earlier answer must be "invalid" too.
TEST_CASE("ofi: valid() during a drain on another thread never says valid", "[ofi][race]")
{
	ofi o;
	constexpr int rounds = 20000;
	int wrong = 0, raced = 0;

	for (int i = 0; i < rounds; i++) {
		std::uint64_t a = BASE + 2 * PAGE * (i % 64);
		REQUIRE(o.subscribe(a, PAGE) == 0);
		o.fake->invalidate(a, a + PAGE, UMMUNOT_EVENT_UNMAP);

		std::atomic<bool> go{false}, done{false};
		std::thread drainer([&] {
			while (!go.load(std::memory_order_acquire)) {
			}
			ummunot_ofi_test_drain(o.fm);
			done.store(true, std::memory_order_release);
		});
		go.store(true, std::memory_order_release);
		// Land anywhere in the drain: from before it to after it.
		std::atomic<int> spin{0};
		while (spin.fetch_add(1, std::memory_order_relaxed) < (i * 37) % 1500) {
		}
		bool during = false, answered = false;
		do {
			during |= !done.load(std::memory_order_acquire);
			if (!o.valid(a, PAGE))
				answered = true;
			else
				wrong++;
		} while (!answered && !done.load(std::memory_order_acquire));
		drainer.join();
		if (!answered && o.valid(a, PAGE))
			wrong++;
		raced += during;
	}
	INFO("rounds with valid() during the drain: " << raced << ", answered valid: " << wrong);
	CHECK(wrong == 0);
}
