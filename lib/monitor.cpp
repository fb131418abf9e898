// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "monitor.hpp"

#include <new>
#include <vector>

#include "internal.hpp"
#include "ext.hpp"

using namespace ummunot::detail;

namespace {

// Every C entry point on an existing monitor: NULL, a parent's monitor in
// a forked child, and (for calls that change state) a cache's monitor.
int check(const ummunot_monitor *m, bool mutating)
{
	if (!m)
		return -EINVAL;
	if (m->forked())
		return -ECHILD;
	if (mutating && m->owned())
		return -EBUSY;
	return 0;
}

bool is_pow2(std::uint32_t v) { return v && !(v & (v - 1)); }

bool zero(const std::uint64_t *p, std::size_t n)
{
	for (std::size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

} // namespace

int ummunot_monitor::open(std::unique_ptr<device> dev,
			  const ummunot_monitor_attr *attr, ummunot_monitor **out)
{
	std::unique_ptr<ummunot_monitor> m(new (std::nothrow) ummunot_monitor);

	if (!m)
		return -ENOMEM;
	fork_handlers_install();
	m->fork_gen_ = fork_gen_now();
	m->dev_ = std::move(dev);
	int r = m->handshake(attr);
	if (r)
		return r;
	*out = m.release();
	return 0;
}

int ummunot_monitor::handshake(const ummunot_monitor_attr *attr)
{
	ummunot_hello h{};

	h.abi_version = UMMUNOT_ABI_VERSION;
	h.features = attr && attr->features ? attr->features : UMMUNOT_FEATURES_V1;
	h.ring_entries = attr ? attr->ring_entries : 0;
	int r = dev_->ioctl(UMMUNOT_IOC_HELLO, &h);
	if (r)
		return r;
	// Check everything we rely on; never assume the layout.
	if (h.abi_version < 1 ||
	    !(h.features & UMMUNOT_FEATURE_RING_GENERATION) ||
	    h.entry_size < sizeof(ummunot_event) || h.entry_size % 8 ||
	    !is_pow2(h.ring_entries) || h.ring_entries < UMMUNOT_RING_MIN_ENTRIES ||
	    h.header_size < sizeof(ummunot_ring_header) || h.header_size % 8 ||
	    h.max_regions == 0 ||
	    h.ring_mmap_size < h.header_size +
			       static_cast<std::uint64_t>(h.ring_entries) * h.entry_size)
		return -EPROTO;
	void *p = dev_->map_ring(h.ring_mmap_offset, h.ring_mmap_size, &r);
	if (!p)
		return r;
	auto *hdr = static_cast<ummunot_ring_header *>(p);
	if (hdr->magic != UMMUNOT_RING_MAGIC || hdr->version < UMMUNOT_RING_VERSION ||
	    hdr->header_size != h.header_size || hdr->entry_size != h.entry_size ||
	    hdr->nr_entries != h.ring_entries || hdr->entry_mask != h.ring_entries - 1) {
		dev_->unmap_ring(p, h.ring_mmap_size);
		return -EPROTO;
	}
	hello_ = h;
	map_ = p;
	map_size_ = h.ring_mmap_size;
	hdr_ = hdr;
	entries_ = static_cast<const unsigned char *>(p) + h.header_size;
	if ((h.features & UMMUNOT_FEATURE_USER_AREA) &&
	    h.header_size >= UMMUNOT_RING_USER_AREA_OFFSET + UMMUNOT_RING_USER_AREA_SIZE)
		user_area_ = reinterpret_cast<ummunot_user_area *>(
			static_cast<unsigned char *>(p) + UMMUNOT_RING_USER_AREA_OFFSET);
	nr_ = h.ring_entries;
	mask_ = h.ring_entries - 1;
	entry_size_ = h.entry_size;
	// Start where the kernel says the consumer is (0 on a fresh file).
	cons_ = ring_load_relaxed(&hdr->consumer);
	seen_gen_.store(generation(), std::memory_order_relaxed);
	return 0;
}

ummunot_monitor::~ummunot_monitor()
{
	if (check_words_out)
		ummunot::detail::check_words_forget(this);
	// In a forked child the ring was not inherited (VM_DONTCOPY): whatever
	// is mapped at map_ now is not ours.  Only the fd is closed.
	if (map_ && !forked())
		dev_->unmap_ring(map_, map_size_);
}

int ummunot_monitor::discard()
{
	using namespace ummunot::detail;
	// (C): pairs with (B).
	std::uint64_t prod = ring_load_acquire(&hdr_->producer);

	if (prod - cons_ > nr_)
		return -EIO;
	cons_ = prod;
	// (D): pairs with (A).
	ring_store_release(&hdr_->consumer, cons_);
	return 0;
}

int ummunot_monitor::resync(std::uint64_t *dropped)
{
	ummunot_resync rs{};

	int r = dev_->ioctl(UMMUNOT_IOC_RESYNC, &rs);
	if (r)
		return r;
	// (F) before draining, as in consume(): everything published up to
	// this generation is discarded now.
	std::uint64_t g = generation();
	r = discard();
	if (r)
		return r;
	mark_seen(g);
	if (dropped)
		*dropped = rs.dropped;
	return 0;
}

int ummunot_monitor::batch_ioctl(unsigned long cmd, const void *array,
				 unsigned int count, unsigned int *error_index)
{
	ummunot_batch b{};

	b.ptr = reinterpret_cast<std::uintptr_t>(array);
	b.count = count;
	int r = dev_->ioctl(cmd, &b);
	if (r && error_index)
		*error_index = b.error_index;
	return r;
}

int ummunot_monitor::register_regions(ummunot_region *regions, unsigned int count,
				      unsigned int *error_index)
{
	if (!regions || count == 0)
		return -EINVAL;
	if (count == 1 || (hello_.features & UMMUNOT_FEATURE_BATCH))
		return batch_ioctl(UMMUNOT_IOC_REGISTER, regions, count, error_index);
	// No batching: one at a time, undone on failure (all-or-nothing).
	for (unsigned int i = 0; i < count; i++) {
		int r = register_regions(&regions[i], 1, nullptr);
		if (r) {
			for (unsigned int j = 0; j < i; j++) {
				std::uint64_t h = regions[j].handle;
				handles_op(UMMUNOT_IOC_UNREGISTER, &h, 1, nullptr);
			}
			if (error_index)
				*error_index = i;
			return r;
		}
	}
	return 0;
}

int ummunot_monitor::handles_op(unsigned long cmd, const std::uint64_t *handles,
				unsigned int count, unsigned int *error_index)
{
	if (!handles || count == 0)
		return -EINVAL;
	if (count == 1 || (hello_.features & UMMUNOT_FEATURE_BATCH))
		return batch_ioctl(cmd, handles, count, error_index);
	// Without batching the kernel cannot give all-or-nothing; UNREGISTER
	// and REARM are idempotent enough that we stop at the first failure.
	for (unsigned int i = 0; i < count; i++) {
		int r = handles_op(cmd, &handles[i], 1, nullptr);
		if (r) {
			if (error_index)
				*error_index = i;
			return r;
		}
	}
	return 0;
}

int ummunot_monitor::set_filter(std::uint64_t mask, std::uint64_t *old_mask)
{
	ummunot_filter f{};

	if (!(hello_.features & UMMUNOT_FEATURE_EVENT_FILTER))
		return -EOPNOTSUPP;
	f.mask = mask;
	int r = dev_->ioctl(UMMUNOT_IOC_SET_FILTER, &f);
	if (!r && old_mask)
		*old_mask = f.mask;
	return r;
}

int ummunot_monitor::stats(ummunot_stats *st)
{
	if (!(hello_.features & UMMUNOT_FEATURE_STATS))
		return -EOPNOTSUPP;
	*st = ummunot_stats{};
	return dev_->ioctl(UMMUNOT_IOC_GET_STATS, st);
}

namespace ummunot::detail {

int monitor_open_device(std::unique_ptr<device> dev,
			const ummunot_monitor_attr *attr, ummunot_monitor **out)
{
	if (!dev || !out)
		return -EINVAL;
	if (attr && (attr->flags || !zero(attr->resv, 4) ||
		     (attr->features & ~UMMUNOT_FEATURES_V1)))
		return -EINVAL;
	return ummunot_monitor::open(std::move(dev), attr, out);
}

} // namespace ummunot::detail

/* ---------------------------------------------------------------- C API */

extern "C" {

int ummunot_monitor_open(const struct ummunot_monitor_attr *attr,
			 struct ummunot_monitor **monitor)
{
	if (!monitor)
		return -EINVAL;
	if (attr && (attr->flags || !zero(attr->resv, 4) ||
		     (attr->features & ~UMMUNOT_FEATURES_V1)))
		return -EINVAL;
	try {
		int r = 0;
		const char *path = attr && attr->device_path ? attr->device_path
							     : UMMUNOT_DEFAULT_DEVICE_PATH;
		auto dev = device_open_real(path, &r);
		if (!dev)
			return r;
		return ummunot_monitor::open(std::move(dev), attr, monitor);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	} catch (...) {
		return -EIO;
	}
}

void ummunot_monitor_close(struct ummunot_monitor *monitor)
{
	delete monitor;
}

int ummunot_monitor_fd(const struct ummunot_monitor *monitor)
{
	if (!monitor)
		return -EINVAL;
	int fd = monitor->fd();
	return fd >= 0 ? fd : -ENODEV;
}

int ummunot_monitor_query(const struct ummunot_monitor *monitor,
			  struct ummunot_monitor_info *info)
{
	if (!info)
		return -EINVAL;
	if (int r = check(monitor, false))
		return r;
	const ummunot_hello &h = monitor->hello();
	*info = ummunot_monitor_info{};
	info->abi_version = h.abi_version;
	info->ring_entries = h.ring_entries;
	info->features = h.features;
	info->supported_features = h.supported_features;
	info->max_regions = h.max_regions;
	info->entry_size = h.entry_size;
	return 0;
}

int ummunot_monitor_register(struct ummunot_monitor *monitor,
			     struct ummunot_region *regions, unsigned int count,
			     unsigned int *error_index)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->register_regions(regions, count, error_index);
}

int ummunot_monitor_unregister(struct ummunot_monitor *monitor,
			       const uint64_t *handles, unsigned int count,
			       unsigned int *error_index)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->handles_op(UMMUNOT_IOC_UNREGISTER, handles, count, error_index);
}

int ummunot_monitor_rearm(struct ummunot_monitor *monitor,
			  const uint64_t *handles, unsigned int count,
			  unsigned int *error_index)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->handles_op(UMMUNOT_IOC_REARM, handles, count, error_index);
}

int ummunot_monitor_set_filter(struct ummunot_monitor *monitor, uint64_t mask,
			       uint64_t *old_mask)
{
	// Allowed on a cache's monitor: it changes which events are produced,
	// not the cache's state (0.1 programs use it for a negative control).
	if (int r = check(monitor, false))
		return r;
	return monitor->set_filter(mask, old_mask);
}

int ummunot_monitor_changed(const struct ummunot_monitor *monitor)
{
	if (int r = check(monitor, false))
		return r;
	return monitor->changed() ? 1 : 0;
}

int ummunot_monitor_read(struct ummunot_monitor *monitor,
			 struct ummunot_event *events, unsigned int max)
{
	if (!events && max)
		return -EINVAL;
	if (int r = check(monitor, true))
		return r;
	if (max > INT32_MAX)
		max = INT32_MAX;
	// (F) first: if we empty the ring, everything up to g was consumed.
	std::uint64_t g = monitor->generation();
	bool complete;
	unsigned int i = 0;
	int n = monitor->consume(max, &complete, [&](const ummunot_event &ev) {
		events[i++] = ev;
	});
	if (n >= 0 && complete)
		monitor->mark_seen(g);
	return n;
}

int ummunot_monitor_resync(struct ummunot_monitor *monitor, uint64_t *dropped)
{
	if (int r = check(monitor, true))
		return r;
	return monitor->resync(dropped);
}

int ummunot_monitor_stats(struct ummunot_monitor *monitor,
			  struct ummunot_stats *stats)
{
	if (!stats)
		return -EINVAL;
	if (int r = check(monitor, false))
		return r;
	return monitor->stats(stats);
}

int ummunot_monitor_query_ext(const struct ummunot_monitor *monitor,
			      struct ummunot_monitor_info_ext *info, size_t size)
{
	if (!info || size < sizeof(std::uint64_t))
		return -EINVAL;
	if (int r = check(monitor, false))
		return r;
	const ummunot_hello &h = monitor->hello();
	ummunot_monitor_info_ext v{};
	v.abi_version = h.abi_version;
	v.ring_entries = h.ring_entries;
	v.features = h.features;
	v.supported_features = h.supported_features;
	v.max_regions = h.max_regions;
	v.entry_size = h.entry_size;
	v.header_size = h.header_size;
	v.ring_mmap_size = h.ring_mmap_size;
	return copy_ext(info, size, &v, sizeof(v));
}

} // extern "C"
