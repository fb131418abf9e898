// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Test helpers: a fake device bound into a cache or monitor, and a
// counting registration backend that records every MR it hands out.
#pragma once

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <system_error>

#include <ummunot/ummunot.h>

#include "fake_device.hpp"
#include "internal.hpp"

namespace test {

using ummunot::detail::fake_device;

constexpr std::uint64_t PAGE = 4096;
// Fake addresses: the fake backend never touches memory.
constexpr std::uint64_t BASE = 0x10000000;

inline const void *at(std::uint64_t a) { return reinterpret_cast<const void *>(a); }

struct mr_record {
	std::uint64_t addr, length;
	int access;
	std::uint64_t clock;			// backend clock at registration
	std::atomic<int> holders{0};		// tests count their own uses
	std::atomic<int> deregs{0};
	std::atomic<int> dereg_while_held{0};
};

struct backend {
	std::mutex mu;
	std::deque<mr_record> mrs;		// stable addresses
	std::atomic<std::uint64_t> clock{1};
	std::atomic<int> regs{0}, deregs{0};
	std::atomic<int> fail_enomem{0};	// fail this many reg calls with -ENOMEM
	std::function<void(std::uint64_t addr, std::uint64_t len)> on_reg;	// test hook
	// Test hook, called after on_reg: a non-zero (negative errno) return
	// fails the registration with it, as ibv_reg_mr() fails for unmapped
	// memory.
	std::function<int(std::uint64_t addr, std::uint64_t len)> check_reg;

	static int reg(void *ctx, void *addr, size_t len, int access, void **mr,
		       uint32_t *lkey, uint32_t *rkey)
	{
		auto *b = static_cast<backend *>(ctx);
		auto a = reinterpret_cast<std::uintptr_t>(addr);

		if (b->on_reg)
			b->on_reg(a, len);
		if (b->check_reg) {
			int e = b->check_reg(a, len);
			if (e)
				return e;
		}
		if (b->fail_enomem.load() > 0) {
			b->fail_enomem--;
			return -ENOMEM;
		}
		std::lock_guard<std::mutex> g(b->mu);
		mr_record &r = b->mrs.emplace_back();
		r.addr = a;
		r.length = len;
		r.access = access;
		r.clock = b->clock.fetch_add(1);
		*mr = &r;
		*lkey = static_cast<uint32_t>(b->mrs.size());
		*rkey = *lkey | 0x80000000u;
		b->regs++;
		return 0;
	}

	// 0.2's ops: the same, plus the private area (the test records
	// its address in it, so that a test can check what reg saw).
	static int reg2(void *ctx, void *addr, size_t len, int access, void *priv, void **mr,
			uint32_t *lkey, uint32_t *rkey)
	{
		int r = reg(ctx, addr, len, access, mr, lkey, rkey);
		if (!r && priv)
			*static_cast<std::uint64_t *>(priv) = reinterpret_cast<std::uintptr_t>(addr);
		return r;
	}
	static int dereg2(void *ctx, void *mr, void *) { return dereg(ctx, mr); }

	static int dereg(void *ctx, void *mr)
	{
		auto *b = static_cast<backend *>(ctx);
		auto *r = static_cast<mr_record *>(mr);

		if (r->holders.load())
			r->dereg_while_held++;
		r->deregs++;
		b->deregs++;
		return 0;
	}

	ummunot_backend_ops ops() const { return {&backend::reg, &backend::dereg}; }
	ummunot_cache_ops ops2() const
	{
		return {sizeof(ummunot_cache_ops), &backend::reg2, &backend::dereg2};
	}
	int live()
	{
		return regs.load() - deregs.load();
	}
	bool all_deregistered_once()
	{
		std::lock_guard<std::mutex> g(mu);
		for (auto &r : mrs)
			if (r.deregs.load() != 1 || r.dereg_while_held.load())
				return false;
		return true;
	}
};

inline mr_record *rec(const ummunot_reg *r) { return static_cast<mr_record *>(r->mr); }

// A cache over a fresh fake device; the fake stays owned by the cache.
struct fixture {
	backend be;
	fake_device *fake = nullptr;
	ummunot_cache *cache = nullptr;
	ummunot_backend_ops ops = be.ops();

	explicit fixture(ummunot_cache_attr attr = {},
			 fake_device::config cfg = fake_device::config{})
	{
		auto dev = std::make_unique<fake_device>(cfg);
		fake = dev.get();
		int r = ummunot::detail::cache_create_device(std::move(dev), &ops, &be,
							     &attr, &cache);
		if (r)
			throw std::system_error(-r, std::generic_category(), "cache_create_device");
	}
	~fixture() { ummunot_cache_destroy(cache); }
	fixture(const fixture &) = delete;
	fixture &operator=(const fixture &) = delete;

	struct ummunot_cache_stats stats()
	{
		struct ummunot_cache_stats s{};
		ummunot_cache_stats(cache, &s);
		return s;
	}
	const ummunot_reg *get(std::uint64_t a, std::uint64_t len, int access = 1)
	{
		const ummunot_reg *r = nullptr;
		int e = ummunot_cache_get(cache, at(a), len, access, &r);
		return e ? nullptr : r;
	}
};

// A monitor over a fresh fake device (the ring tests, the inline check's).
struct monitor_fixture {
	fake_device *fake = nullptr;
	ummunot_monitor *mon = nullptr;

	explicit monitor_fixture(std::uint32_t entries = 64, fake_device::config cfg = {})
	{
		auto dev = std::make_unique<fake_device>(cfg);
		fake = dev.get();
		ummunot_monitor_attr a{};
		a.ring_entries = entries;
		if (int r = ummunot::detail::monitor_open_device(std::move(dev), &a, &mon))
			throw std::system_error(-r, std::generic_category(), "monitor_open_device");
	}
	~monitor_fixture() { ummunot_monitor_close(mon); }
	monitor_fixture(const monitor_fixture &) = delete;
	monitor_fixture &operator=(const monitor_fixture &) = delete;

	// Watch [start, start + len) under cookie; returns the handle.
	std::uint64_t watch(std::uint64_t start, std::uint64_t len, std::uint64_t cookie)
	{
		ummunot_region r{};
		r.start = start;
		r.length = len;
		r.cookie = cookie;
		if (int e = ummunot_monitor_register(mon, &r, 1, nullptr))
			throw std::system_error(-e, std::generic_category(), "ummunot_monitor_register");
		return r.handle;
	}
};

} // namespace test
