// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The monitor's ring consumer against the fake producer: handshake,
// events, clipping, wraparound, overflow and resync, changed().
#include "catch.hpp"

#include <vector>

#include "helpers.hpp"

using namespace test;

TEST_CASE("handshake reports the negotiated ring", "[ring]")
{
	monitor_fixture f(100);
	ummunot_monitor_info info{};

	REQUIRE(ummunot_monitor_query(f.mon, &info) == 0);
	CHECK(info.ring_entries == 128);	// rounded up to a power of two
	CHECK(info.entry_size == sizeof(ummunot_event));
	CHECK(info.features == UMMUNOT_FEATURES_V1);
	CHECK(ummunot_monitor_fd(f.mon) == -ENODEV);	// the fake has no fd
	CHECK(ummunot_monitor_changed(f.mon) == 0);
}

TEST_CASE("handshake rejects a layout it cannot use", "[ring]")
{
	fake_device::config cfg;
	cfg.entry_size = 32;		// smaller than struct ummunot_event
	ummunot_monitor *m = nullptr;
	CHECK(ummunot::detail::monitor_open_device(std::make_unique<fake_device>(cfg),
						   nullptr, &m) == -EPROTO);
	cfg = {};
	cfg.header_size = 128;		// smaller than the header structure
	CHECK(ummunot::detail::monitor_open_device(std::make_unique<fake_device>(cfg),
						   nullptr, &m) == -EPROTO);
	cfg = {};
	cfg.max_entries = 64;
	ummunot_monitor_attr a{};
	a.ring_entries = 1024;
	CHECK(ummunot::detail::monitor_open_device(std::make_unique<fake_device>(cfg),
						   &a, &m) == -E2BIG);
	a = {};
	a.flags = 1;
	CHECK(ummunot::detail::monitor_open_device(std::make_unique<fake_device>(),
						   &a, &m) == -EINVAL);
}

TEST_CASE("open of a missing device fails with the errno", "[ring]")
{
	ummunot_monitor_attr a{};
	a.device_path = "/nonexistent/ummunot";
	ummunot_monitor *m = nullptr;
	CHECK(ummunot_monitor_open(&a, &m) == -ENOENT);
	CHECK(ummunot_monitor_open(nullptr, nullptr) == -EINVAL);
}

TEST_CASE("an invalidation yields one clipped event, then the region is quiet", "[ring]")
{
	monitor_fixture f;
	std::uint64_t h = f.watch(BASE, 4 * PAGE, 42);

	REQUIRE(f.fake->invalidate(BASE + PAGE, BASE + 10 * PAGE, UMMUNOT_EVENT_UNMAP) == 1);
	CHECK(ummunot_monitor_changed(f.mon) == 1);
	ummunot_event ev[4];
	REQUIRE(ummunot_monitor_read(f.mon, ev, 4) == 1);
	CHECK(ev[0].cookie == 42);
	CHECK(ev[0].handle == h);
	CHECK(ev[0].start == BASE + PAGE);
	CHECK(ev[0].end == BASE + 4 * PAGE);
	CHECK(ev[0].type == UMMUNOT_EVENT_UNMAP);
	CHECK(ev[0].seq == 1);
	CHECK(ummunot_monitor_changed(f.mon) == 0);

	// Disarmed: no second event until re-armed.
	CHECK(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_CLEAR) == 0);
	REQUIRE(ummunot_monitor_rearm(f.mon, &h, 1, nullptr) == 0);
	CHECK(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_CLEAR) == 1);
	REQUIRE(ummunot_monitor_read(f.mon, ev, 4) == 1);
	CHECK(ev[0].seq == 2);
	CHECK(ev[0].type == UMMUNOT_EVENT_CLEAR);
}

TEST_CASE("filtered types do not reach the ring", "[ring]")
{
	monitor_fixture f;
	f.watch(BASE, PAGE, 1);
	CHECK(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_PROTECTION_VMA) == 0);
	CHECK(ummunot_monitor_changed(f.mon) == 0);
	std::uint64_t old = 0;
	REQUIRE(ummunot_monitor_set_filter(f.mon, UMMUNOT_EVENT_MASK_ALL, &old) == 0);
	CHECK(old == UMMUNOT_EVENT_MASK_DEFAULT);
	CHECK(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_PROTECTION_VMA) == 1);
	CHECK(ummunot_monitor_set_filter(f.mon, 1ULL << 40, nullptr) == -EINVAL);
	ummunot_stats st{};
	REQUIRE(ummunot_monitor_stats(f.mon, &st) == 0);
	CHECK(st.filtered[UMMUNOT_EVENT_PROTECTION_VMA] == 1);
	CHECK(st.delivered[UMMUNOT_EVENT_PROTECTION_VMA] == 1);
}

TEST_CASE("the consumer follows the producer across many wraparounds", "[ring]")
{
	monitor_fixture f(64);
	std::uint64_t h = f.watch(BASE, PAGE, 7);
	std::uint64_t expect_seq = 1;
	ummunot_event ev[5];

	for (int round = 0; round < 100; round++) {
		// 5 events per round: 500 events through a 64-entry ring.
		for (int i = 0; i < 5; i++) {
			REQUIRE(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_UNMAP) == 1);
			REQUIRE(ummunot_monitor_rearm(f.mon, &h, 1, nullptr) == 0);
		}
		int n = ummunot_monitor_read(f.mon, ev, 3);	// partial read first
		REQUIRE(n == 3);
		CHECK(ummunot_monitor_changed(f.mon) == 1);	// not all consumed
		n += ummunot_monitor_read(f.mon, ev + 3, 5);
		REQUIRE(n == 5);
		for (int i = 0; i < 5; i++)
			REQUIRE(ev[i].seq == expect_seq++);
		CHECK(ummunot_monitor_changed(f.mon) == 0);
	}
	CHECK(f.fake->header()->consumer == 500);
	CHECK(f.fake->header()->producer == 500);
}

TEST_CASE("overflow is reported until resync, which discards the ring", "[ring]")
{
	monitor_fixture f(64);
	std::vector<std::uint64_t> h;
	for (int i = 0; i < 70; i++)
		h.push_back(f.watch(BASE + i * PAGE, PAGE, i));

	REQUIRE(f.fake->invalidate(BASE, BASE + 70 * PAGE, UMMUNOT_EVENT_UNMAP) == 70);
	ummunot_event ev[8];
	CHECK(ummunot_monitor_read(f.mon, ev, 8) == -EOVERFLOW);
	CHECK(ummunot_monitor_read(f.mon, ev, 8) == -EOVERFLOW);	// sticky
	std::uint64_t dropped = 0;
	REQUIRE(ummunot_monitor_resync(f.mon, &dropped) == 0);
	CHECK(dropped == 6);
	CHECK(ummunot_monitor_read(f.mon, ev, 8) == 0);
	CHECK(ummunot_monitor_changed(f.mon) == 0);

	// The ring works again; seq shows the gap.
	REQUIRE(ummunot_monitor_rearm(f.mon, h.data(), 1, nullptr) == 0);
	REQUIRE(f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_CLEAR) == 1);
	REQUIRE(ummunot_monitor_read(f.mon, ev, 8) == 1);
	CHECK(ev[0].seq == 71);
	ummunot_stats st{};
	REQUIRE(ummunot_monitor_stats(f.mon, &st) == 0);
	CHECK(st.overflows == 1);
	CHECK(st.dropped == 6);
}

TEST_CASE("batches are all-or-nothing and name the bad element", "[ring]")
{
	monitor_fixture f;
	ummunot_region r[3] = {};
	for (int i = 0; i < 3; i++) {
		r[i].start = BASE + i * PAGE;
		r[i].length = PAGE;
	}
	r[2].length = 0;
	unsigned int idx = 99;
	CHECK(ummunot_monitor_register(f.mon, r, 3, &idx) == -EINVAL);
	CHECK(idx == 2);
	CHECK(f.fake->nr_regions() == 0);
	r[2].length = PAGE;
	REQUIRE(ummunot_monitor_register(f.mon, r, 3, &idx) == 0);
	CHECK(f.fake->nr_regions() == 3);
	std::uint64_t hs[3] = {r[0].handle, 12345, r[2].handle};
	CHECK(ummunot_monitor_unregister(f.mon, hs, 3, &idx) == -ENOENT);
	CHECK(idx == 1);
	CHECK(f.fake->nr_regions() == 3);
	std::uint64_t dup[2] = {r[0].handle, r[0].handle};
	CHECK(ummunot_monitor_unregister(f.mon, dup, 2, &idx) == -EINVAL);
	hs[1] = r[1].handle;
	CHECK(ummunot_monitor_unregister(f.mon, hs, 3, nullptr) == 0);
	CHECK(f.fake->nr_regions() == 0);
	CHECK(ummunot_monitor_register(f.mon, r, 0, nullptr) == -EINVAL);
}

TEST_CASE("without the batch feature the library loops and stays all-or-nothing", "[ring]")
{
	fake_device::config cfg;
	cfg.supported = UMMUNOT_FEATURE_RING_GENERATION;
	monitor_fixture f(64, cfg);
	ummunot_region r[3] = {};
	for (int i = 0; i < 3; i++) {
		r[i].start = BASE + i * PAGE;
		r[i].length = PAGE;
	}
	r[1].flags = 1;
	unsigned int idx = 99;
	CHECK(ummunot_monitor_register(f.mon, r, 3, &idx) == -EINVAL);
	CHECK(idx == 1);
	CHECK(f.fake->nr_regions() == 0);	// the first one was rolled back
	r[1].flags = 0;
	REQUIRE(ummunot_monitor_register(f.mon, r, 3, nullptr) == 0);
	CHECK(f.fake->nr_regions() == 3);
	CHECK(ummunot_monitor_set_filter(f.mon, 0, nullptr) == -EOPNOTSUPP);
	ummunot_stats st;
	CHECK(ummunot_monitor_stats(f.mon, &st) == -EOPNOTSUPP);
}
