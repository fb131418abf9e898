// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: the MMU interval notifier callback that turns invalidations into
 * ring events.
 *
 * The callback runs inside the invalidating system call (munmap, mremap,
 * madvise, ...) before the page tables change, so the event is in the ring
 * before that system call returns.  It may run with mmap_lock held and, for
 * the OOM reaper, in a non-blockable section: it takes only ctx->event_lock
 * for O(1) work and sleeps only in cond_resched() when the range is
 * blockable.
 */
#include <linux/minmax.h>
#include <linux/mmu_notifier.h>
#include <linux/poll.h>

#include "ummunot_priv.h"

/* Translate the kernel's reason into this ABI's stable event type. */
u32 ummunot_event_type(enum mmu_notifier_event event)
{
	switch (event) {
	case MMU_NOTIFY_UNMAP:
		return UMMUNOT_EVENT_UNMAP;
	case MMU_NOTIFY_CLEAR:
		return UMMUNOT_EVENT_CLEAR;
	case MMU_NOTIFY_PROTECTION_VMA:
		return UMMUNOT_EVENT_PROTECTION_VMA;
	case MMU_NOTIFY_PROTECTION_PAGE:
		return UMMUNOT_EVENT_PROTECTION_PAGE;
	case MMU_NOTIFY_SOFT_DIRTY:
		return UMMUNOT_EVENT_SOFT_DIRTY;
	case MMU_NOTIFY_RELEASE:
		return UMMUNOT_EVENT_RELEASE;
	case MMU_NOTIFY_MIGRATE:
		return UMMUNOT_EVENT_MIGRATE;
	case MMU_NOTIFY_EXCLUSIVE:
		return UMMUNOT_EVENT_EXCLUSIVE;
	}
	/* A reason newer than this module: it may change pages, deliver it. */
	return UMMUNOT_EVENT_OTHER;
}

static bool ummunot_invalidate(struct mmu_interval_notifier *mni,
			       const struct mmu_notifier_range *range,
			       unsigned long cur_seq)
{
	struct ummunot_kregion *r = container_of(mni, struct ummunot_kregion, mni);
	struct ummunot_ctx *ctx = r->ctx;
	u32 type = ummunot_event_type(range->event);
	bool wake = false;
	u64 start, end;

	/* Clip to the region; interval_tree.last is inclusive. */
	start = max_t(u64, range->start, mni->interval_tree.start);
	end = min_t(u64, range->end, (u64)mni->interval_tree.last + 1);

	spin_lock(&ctx->event_lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (!(ctx->event_mask & UMMUNOT_EVENT_BIT(type))) {
		ctx->filtered[type]++;
	} else if (r->armed) {
		/* Report once; REARM or UNREGISTER ends the quiet period. */
		r->armed = false;
		WRITE_ONCE(ctx->nr_armed, ctx->nr_armed - 1);
		if (ummunot_ring_post(ctx, r, start, end, type))
			ctx->delivered[type]++;
		wake = true;
	}
	spin_unlock(&ctx->event_lock);

	/*
	 * (G): wq_has_sleeper()'s full barrier orders the ring update above
	 * before the check for sleepers; pairs with the barrier in
	 * poll_wait()/add_wait_queue() in ummunot_poll(), which registers the
	 * waiter before re-reading the ring.
	 */
	if (wake && wq_has_sleeper(&ctx->wq))
		wake_up_interruptible_poll(&ctx->wq, EPOLLIN | EPOLLRDNORM);

	/*
	 * One invalidation calls every overlapping notifier of the mm in a
	 * row (at most max_regions_per_mm of ours).  When the caller may
	 * sleep (munmap, madvise, mprotect, ...: everything but the OOM
	 * reaper), give the scheduler a chance between them.  No lock is
	 * held by mn_itree_invalidate() around this call.
	 */
	if (mmu_notifier_range_blockable(range))
		cond_resched();
	return true;
}

const struct mmu_interval_notifier_ops ummunot_mni_ops = {
	.invalidate = ummunot_invalidate,
};
