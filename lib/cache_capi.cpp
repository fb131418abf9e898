// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// struct ummunot_cache, the C API: argument checks, the 0.1 and 0.2 create
// paths, and the extern "C" entry points, which catch every exception.
#include "cache.hpp"

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <new>

#include "ext.hpp"
#include "internal.hpp"

using namespace ummunot::detail;

namespace {

constexpr std::uint32_t max_priv_size = 4096;

bool zero(const std::uint64_t *p, std::size_t n)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

// attr (0.1) -> config (0.2).
int config_from_attr(const ummunot_cache_attr *attr, ummunot_cache_config *cfg)
{
	*cfg = {};
	cfg->size = sizeof(*cfg);
	if (!attr)
		return 0;
	if (attr->flags || !zero(attr->resv, 4))
		return -EINVAL;
	cfg->device_path = attr->device_path;
	cfg->ring_entries = attr->ring_entries;
	cfg->max_entries = attr->max_entries;
	cfg->max_pinned_bytes = attr->max_pinned_bytes;
	return 0;
}

int read_config(const ummunot_cache_config *in, ummunot_cache_config *cfg)
{
	if (!in) {
		*cfg = {};
		cfg->size = sizeof(*cfg);
		return 0;
	}
	int r = read_ext(cfg, sizeof(*cfg), in, in->size, sizeof(*cfg));
	if (r)
		return r;
	if (cfg->flags || cfg->priv_size > max_priv_size)
		return -EINVAL;
	return 0;
}

int read_ops(const ummunot_cache_ops *in, backend *be, void *ctx)
{
	ummunot_cache_ops ops;

	if (!in)
		return -EINVAL;
	int r = read_ext(&ops, sizeof(ops), in, in->size, sizeof(ops));
	if (r)
		return r;
	if (!ops.reg || !ops.dereg)
		return -EINVAL;
	be->reg2 = ops.reg;
	be->dereg2 = ops.dereg;
	be->ctx = ctx;
	return 0;
}

int backend_from_ops1(const ummunot_backend_ops *ops, void *ctx, backend *be)
{
	if (!ops || !ops->reg || !ops->dereg)
		return -EINVAL;
	be->reg1 = ops->reg;
	be->dereg1 = ops->dereg;
	be->ctx = ctx;
	return 0;
}

int create_on_device(std::unique_ptr<device> dev, const backend &be,
		     const ummunot_cache_config &cfg, ummunot_cache **out)
{
	ummunot_monitor_attr ma{};
	ma.ring_entries = cfg.ring_entries;
	ummunot_monitor *m = nullptr;
	int r = monitor_open_device(std::move(dev), &ma, &m);
	if (r)
		return r;
	return ummunot_cache::create(std::unique_ptr<ummunot_monitor>(m), be, cfg, out);
}

int create_on_path(const backend &be, const ummunot_cache_config &cfg, ummunot_cache **out)
{
	try {
		ummunot_monitor_attr ma{};
		ma.device_path = cfg.device_path;
		ma.ring_entries = cfg.ring_entries;
		ummunot_monitor *m = nullptr;
		int r = ummunot_monitor_open(&ma, &m);
		if (r)
			return r;
		return ummunot_cache::create(std::unique_ptr<ummunot_monitor>(m), be, cfg, out);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
}

// The arguments of the 0.1 (ops + attr) and 0.2 (ops + config) creates,
// checked and converted once for both the device and the path variants.
int args_v1(const ummunot_backend_ops *ops, void *ctx, const ummunot_cache_attr *attr,
	    ummunot_cache **out, backend *be, ummunot_cache_config *cfg)
{
	if (!out)
		return -EINVAL;
	int r = backend_from_ops1(ops, ctx, be);
	return r ? r : config_from_attr(attr, cfg);
}

int args_v2(const ummunot_cache_ops *ops, void *ctx, const ummunot_cache_config *config,
	    ummunot_cache **out, backend *be, ummunot_cache_config *cfg)
{
	if (!out)
		return -EINVAL;
	int r = read_ops(ops, be, ctx);
	return r ? r : read_config(config, cfg);
}

} // namespace

namespace ummunot::detail {

int cache_create_device(std::unique_ptr<device> dev, const ummunot_backend_ops *ops,
			void *ctx, const ummunot_cache_attr *attr, ummunot_cache **out)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v1(ops, ctx, attr, out, &be, &cfg))
		return r;
	return create_on_device(std::move(dev), be, cfg, out);
}

int cache_create_device_ops(std::unique_ptr<device> dev, const ummunot_cache_ops *ops,
			    void *ctx, const ummunot_cache_config *config, ummunot_cache **out)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v2(ops, ctx, config, out, &be, &cfg))
		return r;
	return create_on_device(std::move(dev), be, cfg, out);
}

int cache_check(ummunot_cache *cache)
{
	return cache->check_invariants();
}

} // namespace ummunot::detail

/* ---------------------------------------------------------------- C API */

extern "C" {

int ummunot_cache_create_backend(const struct ummunot_backend_ops *ops, void *ctx,
				 const struct ummunot_cache_attr *attr,
				 struct ummunot_cache **cache)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v1(ops, ctx, attr, cache, &be, &cfg))
		return r;
	return create_on_path(be, cfg, cache);
}

int ummunot_cache_create_ops(const struct ummunot_cache_ops *ops, void *ctx,
			     const struct ummunot_cache_config *config,
			     struct ummunot_cache **cache)
{
	backend be;
	ummunot_cache_config cfg;

	if (int r = args_v2(ops, ctx, config, cache, &be, &cfg))
		return r;
	return create_on_path(be, cfg, cache);
}

void ummunot_cache_destroy(struct ummunot_cache *cache)
{
	ummunot_cache::destroy(cache);
}

int ummunot_cache_get(struct ummunot_cache *cache, const void *addr, size_t length,
		      int access, const struct ummunot_reg **reg)
{
	if (!cache)
		return -EINVAL;
	// Nothing in get throws (allocations are nothrow or caught where they
	// happen); this is the last line of defence of the C contract.
	try {
		return cache->get(reinterpret_cast<std::uintptr_t>(addr), length, access, reg);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_put(struct ummunot_cache *cache, const struct ummunot_reg *reg)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->put(reg);
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_poll(struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->poll();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_flush(struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->flush();
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_invalidate(struct ummunot_cache *cache, const void *addr, size_t length)
{
	if (!cache)
		return -EINVAL;
	try {
		return cache->invalidate(reinterpret_cast<std::uintptr_t>(addr), length);
	} catch (...) {
		return -EIO;
	}
}

int ummunot_cache_stats(struct ummunot_cache *cache, struct ummunot_cache_stats *stats)
{
	if (!cache || !stats)
		return -EINVAL;
	struct ummunot_cache_stats_ext st;
	int r = cache->stats(&st);
	if (r)
		return r;
	// 0.1's struct is a prefix of the extensible one.
	static_assert(offsetof(struct ummunot_cache_stats_ext, max_entries) ==
			      offsetof(struct ummunot_cache_stats, max_entries) &&
		      sizeof(struct ummunot_cache_stats) <= sizeof(struct ummunot_cache_stats_ext));
	std::memcpy(stats, &st, sizeof(*stats));
	return 0;
}

int ummunot_cache_stats_ext(struct ummunot_cache *cache,
			    struct ummunot_cache_stats_ext *stats, size_t size)
{
	if (!cache || !stats || size < sizeof(std::uint64_t))
		return -EINVAL;
	struct ummunot_cache_stats_ext st;
	int r = cache->stats(&st);
	if (r)
		return r;
	return copy_ext(stats, size, &st, sizeof(st));
}

struct ummunot_monitor *ummunot_cache_monitor(struct ummunot_cache *cache)
{
	return cache ? cache->monitor() : nullptr;
}

int ummunot_cache_fd(const struct ummunot_cache *cache)
{
	if (!cache)
		return -EINVAL;
	int fd = cache->fd();
	return fd >= 0 ? fd : -ENODEV;
}

void *ummunot_reg_priv(const struct ummunot_reg *reg)
{
	return reg ? ummunot_cache::priv(reg) : nullptr;
}

} // extern "C"
