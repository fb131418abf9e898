// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: the character device's file operations - open, release, ioctl
 * dispatch, the handshake, filter, resync, statistics, mmap and poll.
 *
 * A file belongs to the address space that opened it.  Every ioctl and mmap
 * checks current->mm against it first and fails with -EPERM otherwise, and
 * poll reports EPOLLERR, so a forked child or a process that received the
 * descriptor can neither read nor change the owner's state.  It can learn
 * when the owner's watched memory changed, though not what: an epoll
 * instance it shares with the owner (inherited over fork, or received) is
 * woken by the owner's events like any waiter on the file, and then polls
 * the file from the other address space, which reports EPOLLERR at that
 * moment.
 */
#include <linux/fs.h>
#include <linux/poll.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "ummunot_compat.h"
#include "ummunot_priv.h"

/* The ring, once HELLO has published it; pairs with the release in HELLO. */
static struct ummunot_ring *ummunot_ctx_ring(struct ummunot_ctx *ctx)
{
	return smp_load_acquire(&ctx->ring);	/* pairs with HELLO's release */
}

static int ummunot_open(struct inode *inode, struct file *file)
{
	struct ummunot_ctx *ctx;

	if (!current->mm)
		return -EPERM;

	ctx = kzalloc(sizeof(*ctx), GFP_KERNEL_ACCOUNT);
	if (!ctx)
		return -ENOMEM;

	ctx->user = ummunot_user_get();
	ctx->mm_acct = ummunot_mm_acct_get(current->mm);
	if (!ctx->user || !ctx->mm_acct) {
		if (ctx->user)
			ummunot_user_put(ctx->user);
		if (ctx->mm_acct)
			ummunot_mm_acct_put(ctx->mm_acct);
		kfree(ctx);
		return -ENOMEM;
	}
	ctx->mm = current->mm;
	mmgrab(ctx->mm);
	mutex_init(&ctx->lock);
	spin_lock_init(&ctx->event_lock);
	init_waitqueue_head(&ctx->wq);
	rcuwait_init(&ctx->inflight_wait);
	ctx->itree = RB_ROOT_CACHED;
	ctx->regions = RB_ROOT;
	ctx->next_handle = 1;
	ctx->event_mask = UMMUNOT_EVENT_MASK_DEFAULT;
	ctx->tgid = current->tgid;
	get_task_comm(ctx->comm, current);
	ummunot_client_add(ctx);

	file->private_data = ctx;
	return nonseekable_open(inode, file);
}

static int ummunot_release(struct inode *inode, struct file *file)
{
	struct ummunot_ctx *ctx = file->private_data;

	ummunot_regions_release(ctx);
	ummunot_client_del(ctx);
	if (ctx->ring) {
		ummunot_ring_free(ctx->ring);
		ummunot_user_uncharge_ring(ctx->user, ctx->ring_charge);
	}
	ummunot_mm_acct_put(ctx->mm_acct);
	ummunot_user_put(ctx->user);
	mmdrop(ctx->mm);
	mutex_destroy(&ctx->lock);
	kfree(ctx);
	return 0;
}

static long ummunot_ioctl_hello(struct ummunot_ctx *ctx,
				struct ummunot_hello __user *uhello)
{
	u32 max_entries = READ_ONCE(ummunot_max_ring_entries);
	struct ummunot_ring *ring;
	struct ummunot_hello h;
	u64 entries, granted;
	unsigned long charge;
	long ret;

	if (copy_from_user(&h, uhello, sizeof(h)))
		return -EFAULT;
	if (h.flags || memchr_inv(h.resv, 0, sizeof(h.resv)))
		return -EINVAL;
	if (h.abi_version == 0)
		return -EINVAL;
	if (h.abi_version > UMMUNOT_ABI_VERSION) {
		/* Tell the caller what we speak; the errno is the answer. */
		if (put_user(UMMUNOT_ABI_VERSION, &uhello->abi_version))
			return -EFAULT;
		return -EPROTONOSUPPORT;
	}

	entries = h.ring_entries ? h.ring_entries :
		  READ_ONCE(ummunot_default_ring_entries);
	entries = max_t(u64, entries, UMMUNOT_RING_MIN_ENTRIES);
	entries = roundup_pow_of_two(entries);
	if (entries > max_entries) {
		if (!h.ring_entries)	/* an admin's inconsistent defaults */
			entries = rounddown_pow_of_two(max_entries);
		if (entries > max_entries || entries < UMMUNOT_RING_MIN_ENTRIES)
			return -E2BIG;
	}

	/* Killable: another thread of this process may hold it on a fault. */
	if (mutex_lock_killable(&ctx->lock))
		return -EINTR;		/* seen only by a dying process */
	if (ctx->ring) {
		ret = -EALREADY;
		goto out_unlock;
	}

	granted = (h.features & UMMUNOT_FEATURES_V1) |
		  UMMUNOT_FEATURE_RING_GENERATION;
	charge = ummunot_ring_bytes(entries);
	ret = ummunot_user_charge_ring(ctx->user, charge);
	if (ret)
		goto out_unlock;
	ring = ummunot_ring_alloc(entries, granted);
	if (!ring) {
		ret = -ENOMEM;
		goto out_uncharge;
	}

	h.abi_version = UMMUNOT_ABI_VERSION;
	h.features = granted;
	h.supported_features = UMMUNOT_FEATURES_V1;
	h.ring_entries = entries;
	h.entry_size = sizeof(struct ummunot_event);
	h.header_size = PAGE_SIZE;
	h.max_regions = READ_ONCE(ummunot_max_regions);
	h.ring_mmap_offset = 0;
	h.ring_mmap_size = (u64)ring->nr_pages << PAGE_SHIFT;
	if (copy_to_user(uhello, &h, sizeof(h))) {
		ummunot_ring_free(ring);
		ret = -EFAULT;
		goto out_uncharge;
	}

	ctx->max_regions = h.max_regions;
	ctx->ring_charge = charge;
	/* Pairs with the acquire in ummunot_ctx_ring(). */
	smp_store_release(&ctx->ring, ring);
	ret = 0;
	goto out_unlock;
out_uncharge:
	ummunot_user_uncharge_ring(ctx->user, charge);
out_unlock:
	mutex_unlock(&ctx->lock);
	return ret;
}

static long ummunot_ioctl_set_filter(struct ummunot_ctx *ctx,
				     struct ummunot_filter __user *ufilter)
{
	struct ummunot_filter f;
	u64 old;

	if (copy_from_user(&f, ufilter, sizeof(f)))
		return -EFAULT;
	if (f.flags || f.resv || (f.mask & ~UMMUNOT_EVENT_MASK_ALL))
		return -EINVAL;

	/*
	 * ctx->lock orders concurrent SET_FILTERs: the previous mask is
	 * written back before the new one is set, so a failed call changes
	 * nothing and never undoes another call's change.
	 */
	if (mutex_lock_killable(&ctx->lock))
		return -EINTR;		/* seen only by a dying process */
	spin_lock(&ctx->event_lock);
	old = ctx->event_mask;
	spin_unlock(&ctx->event_lock);
	if (put_user(old, &ufilter->mask)) {
		mutex_unlock(&ctx->lock);
		return -EFAULT;
	}
	spin_lock(&ctx->event_lock);
	ctx->event_mask = f.mask;
	spin_unlock(&ctx->event_lock);
	mutex_unlock(&ctx->lock);
	return 0;
}

static long ummunot_ioctl_resync(struct ummunot_ctx *ctx,
				 struct ummunot_ring *ring,
				 struct ummunot_resync __user *uresync)
{
	struct ummunot_resync rs;

	if (copy_from_user(&rs, uresync, sizeof(rs)))
		return -EFAULT;
	if (rs.flags || rs.resv)
		return -EINVAL;

	spin_lock(&ctx->event_lock);
	rs.dropped = ummunot_ring_resync(ring);
	spin_unlock(&ctx->event_lock);

	/* The resync happened; losing the count is the caller's problem. */
	if (put_user(rs.dropped, &uresync->dropped))
		return -EFAULT;
	return 0;
}

static long ummunot_ioctl_get_stats(struct ummunot_ctx *ctx,
				    struct ummunot_ring *ring,
				    struct ummunot_stats __user *ustats)
{
	struct ummunot_stats stats = {}, *st = &stats;	/* never ENOMEM */

	/* Never ctx->lock: a REGISTER may hold it across user memory access. */
	spin_lock(&ctx->event_lock);
	st->regions = ctx->nr_regions;
	st->regions_registered = ctx->regions_registered;
	st->regions_armed = ctx->nr_armed;
	st->events = ctx->events;
	st->dropped = ring->dropped;
	st->overflows = ctx->overflows;
	st->ring_high_water = ring->high_water;
	st->event_mask = ctx->event_mask;
	memcpy(st->delivered, ctx->delivered, sizeof(st->delivered));
	memcpy(st->filtered, ctx->filtered, sizeof(st->filtered));
	spin_unlock(&ctx->event_lock);

	if (copy_to_user(ustats, st, sizeof(*st)))
		return -EFAULT;
	return 0;
}

static long ummunot_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	struct ummunot_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;
	struct ummunot_ring *ring;

	switch (cmd) {
	case UMMUNOT_IOC_HELLO:
	case UMMUNOT_IOC_REGISTER:
	case UMMUNOT_IOC_UNREGISTER:
	case UMMUNOT_IOC_REARM:
	case UMMUNOT_IOC_SET_FILTER:
	case UMMUNOT_IOC_RESYNC:
	case UMMUNOT_IOC_GET_STATS:
		break;
	default:
		return -ENOTTY;
	}

	if (current->mm != ctx->mm)
		return -EPERM;
	if (cmd == UMMUNOT_IOC_HELLO)
		return ummunot_ioctl_hello(ctx, uarg);

	ring = ummunot_ctx_ring(ctx);
	if (!ring)
		return -EBADFD;

	switch (cmd) {
	case UMMUNOT_IOC_REGISTER:
		return ummunot_ioctl_register(ctx, uarg);
	case UMMUNOT_IOC_UNREGISTER:
		return ummunot_ioctl_unregister(ctx, uarg);
	case UMMUNOT_IOC_REARM:
		return ummunot_ioctl_rearm(ctx, uarg);
	case UMMUNOT_IOC_SET_FILTER:
		return ummunot_ioctl_set_filter(ctx, uarg);
	case UMMUNOT_IOC_RESYNC:
		return ummunot_ioctl_resync(ctx, ring, uarg);
	case UMMUNOT_IOC_GET_STATS:
		return ummunot_ioctl_get_stats(ctx, ring, uarg);
	}
	return -ENOTTY;
}

/* Called with mmap_lock held for writing: must not take ctx->lock. */
static int ummunot_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct ummunot_ctx *ctx = file->private_data;
	struct ummunot_ring *ring;

	if (current->mm != ctx->mm || vma->vm_mm != ctx->mm)
		return -EPERM;
	ring = ummunot_ctx_ring(ctx);
	if (!ring)
		return -EBADFD;
	return ummunot_ring_mmap(ring, vma);
}

static __poll_t ummunot_poll(struct file *file, poll_table *wait)
{
	struct ummunot_ctx *ctx = file->private_data;
	struct ummunot_ring *ring = ummunot_ctx_ring(ctx);

	/*
	 * Another address space (a forked child, a received descriptor) has
	 * nothing to wait for here.  A kernel thread without an mm (aio's
	 * poll completion work) polls on the owner's behalf.
	 */
	if (!ring || (current->mm && current->mm != ctx->mm))
		return EPOLLERR;
	poll_wait(file, &ctx->wq, wait);
	/*
	 * (H): the waiter is on the queue before the ring is read; pairs with
	 * (G) in ummunot_wake_pollers(), so either we see the event or the
	 * producer sees us and wakes us.
	 */
	smp_mb();
	return ummunot_ring_readable(ring) ? EPOLLIN | EPOLLRDNORM : 0;
}

const struct file_operations ummunot_fops = {
	.owner		= THIS_MODULE,
	.open		= ummunot_open,
	.release	= ummunot_release,
	.unlocked_ioctl	= ummunot_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= ummunot_mmap,
	.poll		= ummunot_poll,
	.show_fdinfo	= ummunot_show_fdinfo,
};
