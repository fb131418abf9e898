// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "fake_device.hpp"

#include <new>

#include <cerrno>
#include <cstring>
#include <set>
#include <sys/mman.h>
#include <unistd.h>

#include "ring.hpp"

namespace ummunot::detail {

namespace {
// x86-64 4-level paging TASK_SIZE; the fake's "end of user space".
constexpr std::uint64_t task_size = 0x00007ffffffff000ULL;
} // namespace

fake_device::fake_device(const config &cfg) : cfg_(cfg)
{
	st_.event_mask = UMMUNOT_EVENT_MASK_DEFAULT;
}

fake_device::~fake_device()
{
	if (ring_)
		::munmap(ring_, ring_size_);
}

void fake_device::fail_next(unsigned long cmd, int err)
{
	std::lock_guard<std::mutex> g(lock_);
	fail_cmd_ = cmd;
	fail_err_ = err;
}

std::uint64_t fake_device::nr_regions() const
{
	std::lock_guard<std::mutex> g(lock_);
	return regions_.size();
}

bool fake_device::is_armed(std::uint64_t handle) const
{
	std::lock_guard<std::mutex> g(lock_);
	auto it = regions_.find(handle);
	return it != regions_.end() && it->second.armed;
}

std::uint64_t fake_device::ioctl_count(unsigned long cmd) const
{
	std::lock_guard<std::mutex> g(lock_);
	auto it = calls_.find(cmd);
	return it == calls_.end() ? 0 : it->second;
}

int fake_device::ioctl(unsigned long cmd, void *arg)
{
	// The fake "kernel" allocates from the process heap; running out
	// there is the kernel's -ENOMEM (its state is unchanged: every
	// container insert below is strongly exception-safe).
	try {
		return ioctl_locked(cmd, arg);
	} catch (const std::bad_alloc &) {
		return -ENOMEM;
	}
}

int fake_device::ioctl_locked(unsigned long cmd, void *arg)
{
	std::lock_guard<std::mutex> g(lock_);

	calls_[cmd]++;
	if (fail_cmd_ == cmd && fail_err_) {
		int e = fail_err_;
		fail_cmd_ = 0;
		fail_err_ = 0;
		return e;
	}
	if (!arg)
		return -EFAULT;
	if (cmd == UMMUNOT_IOC_HELLO)
		return hello(static_cast<ummunot_hello *>(arg));
	switch (cmd) {
	case UMMUNOT_IOC_REGISTER: case UMMUNOT_IOC_UNREGISTER:
	case UMMUNOT_IOC_REARM: case UMMUNOT_IOC_SET_FILTER:
	case UMMUNOT_IOC_RESYNC: case UMMUNOT_IOC_GET_STATS:
		break;
	default:
		return -ENOTTY;
	}
	if (!hello_done_)
		return -EBADFD;
	switch (cmd) {
	case UMMUNOT_IOC_REGISTER:
		return do_register(static_cast<ummunot_batch *>(arg));
	case UMMUNOT_IOC_UNREGISTER:
	case UMMUNOT_IOC_REARM:
		return do_handles(cmd, static_cast<ummunot_batch *>(arg));
	case UMMUNOT_IOC_SET_FILTER: {
		auto *f = static_cast<ummunot_filter *>(arg);
		if (!(features_ & UMMUNOT_FEATURE_EVENT_FILTER))
			return -ENOTTY;
		if (f->flags || f->resv || (f->mask & ~UMMUNOT_EVENT_MASK_ALL))
			return -EINVAL;
		std::uint64_t old = st_.event_mask;
		st_.event_mask = f->mask;
		f->mask = old;
		return 0;
	}
	case UMMUNOT_IOC_RESYNC: {
		auto *rs = static_cast<ummunot_resync *>(arg);
		if (rs->flags || rs->resv)
			return -EINVAL;
		ring_store_relaxed(&hdr_->overflow, 0);
		rs->dropped = dropped_ - dropped_at_resync_;
		dropped_at_resync_ = dropped_;
		return 0;
	}
	case UMMUNOT_IOC_GET_STATS: {
		if (!(features_ & UMMUNOT_FEATURE_STATS))
			return -ENOTTY;
		auto *st = static_cast<ummunot_stats *>(arg);
		*st = st_;
		st->regions = regions_.size();
		std::uint64_t armed = 0;
		for (auto &kv : regions_)
			armed += kv.second.armed;
		st->regions_armed = armed;
		return 0;
	}
	}
	return -ENOTTY;
}

int fake_device::hello(ummunot_hello *h)
{
	if (h->flags || h->resv[0] || h->resv[1] || h->resv[2] || h->resv[3] ||
	    h->abi_version == 0)
		return -EINVAL;
	if (h->abi_version > UMMUNOT_ABI_VERSION) {
		h->abi_version = UMMUNOT_ABI_VERSION;
		return -EPROTONOSUPPORT;
	}
	if (hello_done_)
		return -EALREADY;
	std::uint32_t n = h->ring_entries ? h->ring_entries : cfg_.default_entries;
	if (n > cfg_.max_entries)
		return -E2BIG;
	std::uint32_t p = UMMUNOT_RING_MIN_ENTRIES;
	while (p < n)
		p <<= 1;
	std::uint64_t size = cfg_.header_size + std::uint64_t(p) * cfg_.entry_size;
	std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
	size = (size + page - 1) & ~(page - 1);
	void *ring = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED)
		return -ENOMEM;
	ring_ = ring;
	ring_size_ = size;
	hdr_ = static_cast<ummunot_ring_header *>(ring);
	entries_ = static_cast<unsigned char *>(ring) + cfg_.header_size;
	nr_ = p;
	features_ = h->features & cfg_.supported;
	features_ |= UMMUNOT_FEATURE_RING_GENERATION & cfg_.supported;
	hdr_->magic = UMMUNOT_RING_MAGIC;
	hdr_->version = UMMUNOT_RING_VERSION;
	hdr_->header_size = cfg_.header_size;
	hdr_->entry_size = cfg_.entry_size;
	hdr_->nr_entries = p;
	hdr_->entry_mask = p - 1;
	hdr_->features = features_;
	hello_done_ = true;

	h->abi_version = UMMUNOT_ABI_VERSION;
	h->features = features_;
	h->supported_features = cfg_.supported;
	h->ring_entries = p;
	h->entry_size = cfg_.entry_size;
	h->header_size = cfg_.header_size;
	h->max_regions = cfg_.max_regions;
	h->ring_mmap_offset = 0;
	h->ring_mmap_size = size;
	return 0;
}

void *fake_device::map_ring(std::uint64_t offset, std::uint64_t size, int *err)
{
	std::lock_guard<std::mutex> g(lock_);

	if (!hello_done_) {
		*err = -EBADFD;
		return nullptr;
	}
	if (offset != 0 || size > ring_size_) {
		*err = -EINVAL;
		return nullptr;
	}
	return ring_;
}

void fake_device::unmap_ring(void *, std::uint64_t) {}

int fake_device::do_register(ummunot_batch *b)
{
	if (b->flags || b->resv || b->count == 0 || b->count > cfg_.max_regions ||
	    (b->count > 1 && !(features_ & UMMUNOT_FEATURE_BATCH))) {
		b->error_index = b->count;
		return -EINVAL;
	}
	auto *r = reinterpret_cast<ummunot_region *>(static_cast<std::uintptr_t>(b->ptr));
	for (std::uint32_t i = 0; i < b->count; i++) {
		const ummunot_region &x = r[i];
		if (x.flags || x.resv || x.length == 0 || x.start + x.length < x.start ||
		    x.start + x.length > task_size) {
			b->error_index = i;
			return -EINVAL;
		}
		if (regions_.size() + i + 1 > cfg_.max_regions) {
			b->error_index = i;
			return -ENOSPC;
		}
	}
	for (std::uint32_t i = 0; i < b->count; i++) {
		std::uint64_t h = next_handle_++;
		regions_[h] = region{r[i].start, r[i].start + r[i].length, r[i].cookie, true};
		r[i].handle = h;
	}
	st_.regions_registered += b->count;
	return 0;
}

int fake_device::do_handles(unsigned long cmd, ummunot_batch *b)
{
	if (b->flags || b->resv || b->count == 0 || b->count > cfg_.max_regions ||
	    (b->count > 1 && !(features_ & UMMUNOT_FEATURE_BATCH))) {
		b->error_index = b->count;
		return -EINVAL;
	}
	auto *h = reinterpret_cast<const std::uint64_t *>(static_cast<std::uintptr_t>(b->ptr));
	std::set<std::uint64_t> seen;
	for (std::uint32_t i = 0; i < b->count; i++) {
		if (!seen.insert(h[i]).second) {
			b->error_index = i;
			return -EINVAL;
		}
		if (!regions_.count(h[i])) {
			b->error_index = i;
			return -ENOENT;
		}
	}
	for (std::uint32_t i = 0; i < b->count; i++) {
		if (cmd == UMMUNOT_IOC_UNREGISTER)
			regions_.erase(h[i]);
		else
			regions_[h[i]].armed = true;
	}
	return 0;
}

unsigned int fake_device::invalidate(std::uint64_t start, std::uint64_t end,
				     std::uint32_t type)
{
	std::lock_guard<std::mutex> g(lock_);
	unsigned int n = 0;

	if (!hello_done_ || type >= UMMUNOT_EVENT_TYPE_MAX)
		return 0;
	for (auto &kv : regions_) {
		region &r = kv.second;
		if (r.end <= start || r.start >= end)
			continue;
		if (!(st_.event_mask & UMMUNOT_EVENT_BIT(type))) {
			st_.filtered[type]++;	// region stays armed
			continue;
		}
		if (!r.armed)
			continue;
		r.armed = false;
		st_.delivered[type]++;
		emit(kv.first, r, start > r.start ? start : r.start,
		     end < r.end ? end : r.end, type);
		n++;
	}
	return n;
}

void fake_device::emit(std::uint64_t handle, const region &r, std::uint64_t start,
		       std::uint64_t end, std::uint32_t type)
{
	std::uint64_t seq = ++seq_;
	// (A): pairs with the consumer's (D); slots below cons are free.
	std::uint64_t cons = ring_load_acquire(&hdr_->consumer);

	if (prod_ - cons >= nr_) {
		// Full (or a bogus consumer index): drop, flag, count.
		if (!ring_load_relaxed(&hdr_->overflow))
			st_.overflows++;
		ring_store_relaxed(&hdr_->overflow, 1);
		dropped_++;
		st_.dropped++;
		ring_store_relaxed(&hdr_->dropped, dropped_);
	} else {
		ummunot_event ev{};
		ev.cookie = r.cookie;
		ev.handle = handle;
		ev.start = start;
		ev.end = end;
		ev.seq = seq;
		ev.type = type;
		std::memcpy(entries_ + (prod_ & (nr_ - 1)) * cfg_.entry_size, &ev, sizeof(ev));
		prod_++;
		st_.events++;
		if (prod_ - cons > st_.ring_high_water)
			st_.ring_high_water = prod_ - cons;
		// (B): pairs with (C); the entry is written before prod covers it.
		ring_store_release(&hdr_->producer, prod_);
	}
	// (E): pairs with (F); entry, producer and overflow are visible to
	// whoever sees the new generation.
	ring_store_release(&hdr_->generation, ++gen_);
}

} // namespace ummunot::detail
