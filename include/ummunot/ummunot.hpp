// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// C++20 RAII wrappers over the C API in <ummunot/ummunot.h>.  Header only:
// libummunot.so exports nothing but the C API.  Failures throw
// std::system_error with the errno the C call returned.
#pragma once

#include <cstdint>
#include <span>
#include <system_error>
#include <utility>

#include <ummunot/ummunot.h>

namespace ummunot {

inline int check(int r, const char *what)
{
	if (r < 0)
		throw std::system_error(-r, std::generic_category(), what);
	return r;
}

class monitor {
public:
	explicit monitor(const ummunot_monitor_attr *attr = nullptr)
	{
		check(ummunot_monitor_open(attr, &m_), "ummunot_monitor_open");
	}
	explicit monitor(const char *device_path)
	{
		ummunot_monitor_attr a{};
		a.device_path = device_path;
		check(ummunot_monitor_open(&a, &m_), "ummunot_monitor_open");
	}
	~monitor() { ummunot_monitor_close(m_); }
	monitor(monitor &&o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
	monitor &operator=(monitor &&o) noexcept
	{
		std::swap(m_, o.m_);
		return *this;
	}
	monitor(const monitor &) = delete;
	monitor &operator=(const monitor &) = delete;

	int fd() const { return check(ummunot_monitor_fd(m_), "ummunot_monitor_fd"); }
	bool changed() const { return ummunot_monitor_changed(m_) > 0; }

	// Watch [start, start + length); returns the handle.
	std::uint64_t watch(std::uint64_t start, std::uint64_t length, std::uint64_t cookie)
	{
		ummunot_region r{};
		r.start = start;
		r.length = length;
		r.cookie = cookie;
		check(ummunot_monitor_register(m_, &r, 1, nullptr), "ummunot_monitor_register");
		return r.handle;
	}
	void unwatch(std::uint64_t handle)
	{
		check(ummunot_monitor_unregister(m_, &handle, 1, nullptr),
		      "ummunot_monitor_unregister");
	}
	void rearm(std::uint64_t handle)
	{
		check(ummunot_monitor_rearm(m_, &handle, 1, nullptr), "ummunot_monitor_rearm");
	}
	// Returns the number of events read; -EOVERFLOW is returned, not
	// thrown: the caller must resync() and drop its state.
	int read(std::span<ummunot_event> out)
	{
		int r = ummunot_monitor_read(m_, out.data(), static_cast<unsigned int>(out.size()));
		return r == -EOVERFLOW ? r : check(r, "ummunot_monitor_read");
	}
	std::uint64_t resync()
	{
		std::uint64_t dropped = 0;
		check(ummunot_monitor_resync(m_, &dropped), "ummunot_monitor_resync");
		return dropped;
	}
	ummunot_monitor *get() const { return m_; }

private:
	ummunot_monitor *m_ = nullptr;
};

class cache;

// A registration held from a cache; put back on destruction.
class registration {
public:
	registration() = default;
	registration(ummunot_cache *c, const ummunot_reg *r) : c_(c), r_(r) {}
	~registration() { reset(); }
	registration(registration &&o) noexcept
		: c_(std::exchange(o.c_, nullptr)), r_(std::exchange(o.r_, nullptr)) {}
	registration &operator=(registration &&o) noexcept
	{
		if (this != &o) {
			reset();
			c_ = std::exchange(o.c_, nullptr);
			r_ = std::exchange(o.r_, nullptr);
		}
		return *this;
	}
	registration(const registration &) = delete;
	registration &operator=(const registration &) = delete;

	void reset()
	{
		if (r_)
			ummunot_cache_put(c_, r_);
		r_ = nullptr;
	}
	explicit operator bool() const { return r_ != nullptr; }
	const ummunot_reg *get() const { return r_; }
	std::uint32_t lkey() const { return r_->lkey; }
	std::uint32_t rkey() const { return r_->rkey; }
	std::uint64_t addr() const { return r_->addr; }
	std::uint64_t length() const { return r_->length; }
	// The private area (struct ummunot_cache_config.priv_size bytes).
	void *priv() const { return ummunot_reg_priv(r_); }

private:
	ummunot_cache *c_ = nullptr;
	const ummunot_reg *r_ = nullptr;
};

class cache {
public:
	cache(ibv_pd *pd, const ummunot_cache_attr *attr = nullptr)
	{
		check(ummunot_cache_create(pd, attr, &c_), "ummunot_cache_create");
	}
	cache(const ummunot_backend_ops &ops, void *ctx,
	      const ummunot_cache_attr *attr = nullptr)
	{
		check(ummunot_cache_create_backend(&ops, ctx, attr, &c_),
		      "ummunot_cache_create_backend");
	}
	cache(const ummunot_cache_ops &ops, void *ctx, const ummunot_cache_config &config)
	{
		check(ummunot_cache_create_ops(&ops, ctx, &config, &c_),
		      "ummunot_cache_create_ops");
	}
	// Adopt a cache created through the C API.
	explicit cache(ummunot_cache *c) : c_(c) {}
	~cache() { ummunot_cache_destroy(c_); }
	cache(cache &&o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
	cache &operator=(cache &&o) noexcept
	{
		std::swap(c_, o.c_);
		return *this;
	}
	cache(const cache &) = delete;
	cache &operator=(const cache &) = delete;

	registration get(const void *addr, std::size_t length, int access)
	{
		const ummunot_reg *r = nullptr;
		check(ummunot_cache_get(c_, addr, length, access, &r), "ummunot_cache_get");
		return registration(c_, r);
	}
	int poll() { return check(ummunot_cache_poll(c_), "ummunot_cache_poll"); }
	int flush() { return check(ummunot_cache_flush(c_), "ummunot_cache_flush"); }
	struct ummunot_cache_stats stats() const
	{
		struct ummunot_cache_stats s{};
		check(ummunot_cache_stats(c_, &s), "ummunot_cache_stats");
		return s;
	}
	struct ummunot_cache_stats_ext stats_ext() const
	{
		struct ummunot_cache_stats_ext s{};
		check(ummunot_cache_stats_ext(c_, &s, sizeof(s)), "ummunot_cache_stats_ext");
		return s;
	}
	int invalidate(const void *addr, std::size_t length)
	{
		return check(ummunot_cache_invalidate(c_, addr, length), "ummunot_cache_invalidate");
	}
	int fd() const { return check(ummunot_cache_fd(c_), "ummunot_cache_fd"); }
	ummunot_cache *get() const { return c_; }

private:
	ummunot_cache *c_ = nullptr;
};

} // namespace ummunot
