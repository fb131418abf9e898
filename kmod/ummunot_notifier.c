// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: the MMU notifier that turns invalidations into ring events.
 *
 * One notifier per file, registered on the owner's address space at the
 * file's first REGISTER, and the file's own interval tree of regions
 * (ctx->itree, under ctx->event_lock).  Watching a range is an insert into
 * that tree: the mm's notifier lock and an mm reference are taken once per
 * file, not once per region.
 *
 * invalidate_range_start runs inside the invalidating system call (munmap,
 * mremap, madvise, ...) before the page tables change, so the event is in
 * the ring before that system call returns.  It may run with mmap_lock held
 * and, for the OOM reaper, in a non-blockable section: it takes only
 * ctx->event_lock and allocates nothing; when the range is blockable it
 * lets go of the lock now and then during a long walk, and reschedules.
 *
 * In-flight invalidations.  A caller that registers or re-arms a range and
 * then pins its pages must not pin pages that an invalidation already under
 * way is still taking away: that invalidation's start has passed (for a new
 * region it produced no event, for a disarmed one its event was already
 * consumed) and nothing would report it.  So every invalidation of the mm is
 * recorded from its start to its end, by range in one of
 * UMMUNOT_INFLIGHT_SLOTS slots or, when all slots are busy, as "wide"
 * (taken to overlap everything), and REGISTER and REARM wait for the ones
 * that overlap their regions, and only for those.  A slot is claimed under
 * event_lock and given back without it, by the invalidation that holds it
 * (an odd ->seq means busy), so that the end of an invalidation takes no
 * lock at all; REGISTER and REARM wait under ctx->lock, one at a time, on
 * an rcuwait, which the end wakes without a lock too.  Registration of the
 * notifier runs under mmap_lock and every anon_vma and i_mmap lock
 * (mm_take_all_locks()), which every invalidation path holds one of from
 * start to end, so no invalidation is in flight when the notifier appears:
 * every end has its start.
 */
#include <linux/interval_tree.h>
#include <linux/minmax.h>
#include <linux/mmu_notifier.h>
#include <linux/poll.h>
#include <linux/rcuwait.h>
#include <linux/sched.h>

#include "ummunot_priv.h"

/* Regions walked between two moments event_lock is let go. */
#define UMMUNOT_WALK_BATCH	64

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

static struct ummunot_kregion *ummunot_it_region(struct interval_tree_node *it)
{
	return container_of(it, struct ummunot_kregion, it);
}

/*
 * Report an invalidation of [start, end) with reason @type to every armed
 * region it overlaps.  Called and returns with ctx->event_lock held.  When
 * @blockable, it lets go of the lock every UMMUNOT_WALK_BATCH regions and
 * reschedules if asked to, so that another CPU waiting for the lock
 * (another invalidation of the mm, which records itself here first, or an
 * ioctl) gets it: with the test-and-set spinlock a kernel uses as a guest
 * without paravirtual spinlocks, a waiter cannot be seen
 * (spin_is_contended() is false), so the walk does not ask.  Returns true
 * when pollers need waking.
 *
 * After the lock was let go, the walk goes on from the region it had
 * reached if the tree did not change meanwhile (ctx->tree_gen).  If it
 * did, the walk finds its place again by start address: regions inserted
 * below that point are new registrations and wait for this invalidation
 * to end before REGISTER returns, so they need no event; regions that
 * start below it and reach past it were seen, and are skipped; those that
 * start exactly there may be seen twice: disarmed by then, only their
 * filtered count can grow twice.  The lock is not let go again inside
 * that run of equal starts, so the walk always moves on.
 */
static bool ummunot_walk(struct ummunot_ctx *ctx, unsigned long start,
			 unsigned long end, u32 type, bool blockable)
{
	bool deliver = ctx->event_mask & UMMUNOT_EVENT_BIT(type);
	unsigned long last = end - 1, from = 0;
	struct interval_tree_node *it;
	u64 gen;
	unsigned int n = 0;
	bool wake = false;

	lockdep_assert_held(&ctx->event_lock);
	it = interval_tree_iter_first(&ctx->itree, start, last);
	while (it) {
		struct ummunot_kregion *r = ummunot_it_region(it);

		if (it->start < from) {		/* seen before the lock was let go */
			it = interval_tree_iter_next(it, start, last);
			continue;
		}
		if (!deliver) {
			ctx->filtered[type]++;
		} else if (r->armed) {
			/* Report once; REARM or UNREGISTER ends the quiet period. */
			r->armed = false;
			WRITE_ONCE(ctx->nr_armed, ctx->nr_armed - 1);
			/* Clip to the region; it.last is inclusive. */
			if (ummunot_ring_post(ctx, r, max(start, it->start),
					      min(last, it->last) + 1ULL, type))
				ctx->delivered[type]++;
			wake = true;
		}
		it = interval_tree_iter_next(it, start, last);
		/* Not inside a run of equal starts entered by a restart. */
		if (!it || !blockable || ++n < UMMUNOT_WALK_BATCH ||
		    it->start == from)
			continue;
		n = 0;
		from = it->start;
		gen = ctx->tree_gen;
		spin_unlock(&ctx->event_lock);
		cond_resched();
		spin_lock(&ctx->event_lock);
		deliver = ctx->event_mask & UMMUNOT_EVENT_BIT(type);
		if (ctx->tree_gen != gen)	/* it may be gone: find the place */
			it = interval_tree_iter_first(&ctx->itree,
						      max(from, start), last);
	}
	return wake;
}

/*
 * (G): wq_has_sleeper()'s full barrier orders the ring update before the
 * check for sleepers; pairs with the barrier in poll_wait()/add_wait_queue()
 * in ummunot_poll(), which registers the waiter before re-reading the ring.
 */
static void ummunot_wake_pollers(struct ummunot_ctx *ctx)
{
	if (wq_has_sleeper(&ctx->wq))
		wake_up_interruptible_poll(&ctx->wq, EPOLLIN | EPOLLRDNORM);
}

/* Record an invalidation's start; ctx->event_lock held. */
static void ummunot_inflight_start(struct ummunot_ctx *ctx,
				   const struct mmu_notifier_range *range)
{
	unsigned int i;

	lockdep_assert_held(&ctx->event_lock);
	for (i = 0; i < UMMUNOT_INFLIGHT_SLOTS; i++) {
		struct ummunot_inflight *f = &ctx->inflight[i];
		/* Pairs with the release in ummunot_inflight_end(). */
		unsigned long seq = smp_load_acquire(&f->seq);

		if (seq & 1)
			continue;
		f->range = range;
		f->start = range->start;
		f->last = range->end - 1;
		/* Busy, with its range visible to ummunot_inflight_snap(). */
		smp_store_release(&f->seq, seq + 1);
		return;
	}
	atomic_inc(&ctx->nr_wide);
}

/*
 * Record an invalidation's end, without a lock: the slot holding @range is
 * this invalidation's own until it gives it back here (a range is on its
 * caller's stack, so its address names it until the end).
 */
static void ummunot_inflight_end(struct ummunot_ctx *ctx,
				 const struct mmu_notifier_range *range)
{
	unsigned int i;

	for (i = 0; i < UMMUNOT_INFLIGHT_SLOTS; i++) {
		struct ummunot_inflight *f = &ctx->inflight[i];

		if (READ_ONCE(f->range) == range) {
			WRITE_ONCE(f->range, NULL);
			/* Free: pairs with the acquires in start and snap. */
			smp_store_release(&f->seq, f->seq + 1);
			goto wake;
		}
	}
	if (WARN_ON_ONCE(atomic_read(&ctx->nr_wide) <= 0))
		return;
	/* Full barrier: the count before the generation (snap reads both). */
	if (atomic_dec_and_test(&ctx->nr_wide))
		atomic_long_inc(&ctx->wide_gen);
wake:
	/* Its smp_mb() pairs with set_current_state() in the waiter. */
	rcuwait_wake_up(&ctx->inflight_wait);
}

static int ummunot_invalidate_range_start(struct mmu_notifier *mn,
					  const struct mmu_notifier_range *range)
{
	struct ummunot_ctx *ctx = container_of(mn, struct ummunot_ctx, mn);
	bool wake;

	/*
	 * Never fails: the kernel calls every notifier's end when one start
	 * fails, so a start that can fail must have no end (mm/mmu_notifier.c).
	 * Non-blockable ranges (the OOM reaper, process_mrelease()) take the
	 * lock too, as KVM's notifier takes its own: design.rst, "Locking".
	 */
	spin_lock(&ctx->event_lock);
	ummunot_inflight_start(ctx, range);
	wake = ummunot_walk(ctx, range->start, range->end,
			    ummunot_event_type(range->event),
			    mmu_notifier_range_blockable(range));
	spin_unlock(&ctx->event_lock);
	if (wake)
		ummunot_wake_pollers(ctx);
	return 0;
}

static void ummunot_invalidate_range_end(struct mmu_notifier *mn,
					 const struct mmu_notifier_range *range)
{
	ummunot_inflight_end(container_of(mn, struct ummunot_ctx, mn), range);
}

/*
 * The address space is being torn down (exit_mmap), or the file let go of
 * its notifier (ummunot_notifier_detach(), with no region left).  After
 * this no callback comes, so this stands for the final unmap too: a region
 * whose filter drops RELEASE gets UNMAP, as the unmap would have given it.
 */
static void ummunot_mn_release(struct mmu_notifier *mn, struct mm_struct *mm)
{
	struct ummunot_ctx *ctx = container_of(mn, struct ummunot_ctx, mn);
	bool wake;

	spin_lock(&ctx->event_lock);
	wake = ummunot_walk(ctx, 0, TASK_SIZE, UMMUNOT_EVENT_RELEASE, true);
	wake |= ummunot_walk(ctx, 0, TASK_SIZE, UMMUNOT_EVENT_UNMAP, true);
	spin_unlock(&ctx->event_lock);
	if (wake)
		ummunot_wake_pollers(ctx);
}

static const struct mmu_notifier_ops ummunot_mn_ops = {
	.release = ummunot_mn_release,
	.invalidate_range_start = ummunot_invalidate_range_start,
	.invalidate_range_end = ummunot_invalidate_range_end,
};

/*
 * Watch the owner's address space; under ctx->lock, called by REGISTER in
 * the owner's context (current->mm == ctx->mm, so mm_users > 0) while
 * !ctx->mn_attached.  Takes
 * mmap_lock and every VMA's rmap lock once per file; -EINTR on a signal.
 */
int ummunot_notifier_attach(struct ummunot_ctx *ctx)
{
	int ret;

	lockdep_assert_held(&ctx->lock);
	ctx->mn.ops = &ummunot_mn_ops;
	ret = mmu_notifier_register(&ctx->mn, ctx->mm);
	if (!ret)
		ctx->mn_attached = true;
	return ret;
}

/* File release, no region left: waits for running callbacks to finish. */
void ummunot_notifier_detach(struct ummunot_ctx *ctx)
{
	if (ctx->mn_attached)
		mmu_notifier_unregister(&ctx->mn, ctx->mm);
	ctx->mn_attached = false;
}

/*
 * Take note of the invalidations in flight over the chain of regions at
 * @head (watched and armed by the caller, under ctx->lock); ctx->event_lock
 * held, so no slot is claimed meanwhile, though one may be given back.
 * ummunot_inflight_wait() then waits for them to end.
 */
void ummunot_inflight_snap(struct ummunot_ctx *ctx,
			   const struct ummunot_kregion *head,
			   struct ummunot_inflight_snap *snap)
{
	const struct ummunot_kregion *r;
	unsigned int i;

	lockdep_assert_held(&ctx->event_lock);
	snap->slots = 0;
	snap->wide_gen = atomic_long_read(&ctx->wide_gen);
	/*
	 * The generation before the count: pairs with the full barrier of
	 * atomic_dec_and_test() in ummunot_inflight_end(), so a count seen
	 * above zero drops to zero, and bumps the generation, after the
	 * generation read here.
	 */
	smp_rmb();
	snap->wide = atomic_read(&ctx->nr_wide) > 0;
	for (i = 0; i < UMMUNOT_INFLIGHT_SLOTS; i++) {
		const struct ummunot_inflight *f = &ctx->inflight[i];
		unsigned long seq;

		/*
		 * Pairs with the release in ummunot_inflight_start(): a busy
		 * seq comes with its range.  Given back since, seq has moved
		 * and the wait below ends at once.
		 */
		seq = smp_load_acquire(&f->seq);
		if (!(seq & 1))
			continue;
		for (r = head; r; r = r->next) {
			if (r->it.start <= f->last && f->start <= r->it.last) {
				snap->slots |= BIT(i);
				snap->seq[i] = seq;
				break;
			}
		}
	}
}

static bool ummunot_inflight_ended(struct ummunot_ctx *ctx,
				   const struct ummunot_inflight_snap *snap)
{
	unsigned int i;

	if (snap->wide && atomic_long_read(&ctx->wide_gen) == snap->wide_gen)
		return false;
	for (i = 0; i < UMMUNOT_INFLIGHT_SLOTS; i++)
		if ((snap->slots & BIT(i)) &&
		    READ_ONCE(ctx->inflight[i].seq) == snap->seq[i])
			return false;
	return true;
}

/*
 * Wait, under ctx->lock (so one waiter at a time), for the invalidations
 * noted in @snap to end.  Each one's end is a step of a system call or of
 * reclaim already under way, so the wait is short; it is killable all the
 * same.  -EINTR only reaches a dying process.
 */
int ummunot_inflight_wait(struct ummunot_ctx *ctx,
			  const struct ummunot_inflight_snap *snap)
{
	lockdep_assert_held(&ctx->lock);
	return rcuwait_wait_event(&ctx->inflight_wait,
				  ummunot_inflight_ended(ctx, snap),
				  TASK_KILLABLE);
}
