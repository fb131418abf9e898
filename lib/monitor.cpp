// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "monitor.hpp"

#include <new>
#include <vector>

#include "internal.hpp"
#include "ext.hpp"

using namespace ummunot::detail;

namespace {

bool is_pow2(std::uint32_t v) { return v && !(v & (v - 1)); }

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
