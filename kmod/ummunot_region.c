// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: watched regions - REGISTER, UNREGISTER, REARM and release.
 *
 * Batches are all-or-nothing.  No allocation is sized by the caller's
 * count: the array is copied through a fixed buffer (UMMUNOT_CHUNK_BYTES;
 * on the stack for batches of up to UMMUNOT_REGION_STACK regions), and the
 * regions of a batch are chained through ->next.
 *
 *   REGISTER:   1. without ctx->lock: charge the user and mm limits, copy
 *                  and validate every element, allocate every region;
 *               2. under ctx->lock: attach the file's notifier (the
 *                  first time), check max_regions, assign handles and
 *                  write them back (a fault fails the call with nothing
 *                  watched, no event posted, no counter moved);
 *               3. still under ctx->lock: count the regions (armed),
 *                  watch them and wait out the invalidations in flight
 *                  over them.  The wait ends early only for a dying
 *                  process; its regions are then removed again.  Either
 *                  way the handles the caller holds after a failed call
 *                  name no region, and regions_registered never goes
 *                  back.
 *   UNREGISTER: under ctx->lock, copy the handles chunk by chunk, look each
 *               up and chain it (->marked refuses duplicates), then remove.
 *   REARM:      the same, duplicates skipped, then arm and wait out
 *               in-flight invalidations, as REGISTER does.
 *
 * Notifier callbacks see regions only under ctx->event_lock, so a region
 * is out of their reach once unwatched under it; they never take ctx->lock,
 * so waiting for invalidations in flight is safe under it.  Observers
 * (fdinfo, sysfs, GET_STATS) never take ctx->lock either, so the user
 * memory access done under it cannot block them.
 */
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "ummunot_priv.h"

static struct kmem_cache *ummunot_kregion_cache;

int ummunot_region_cache_init(void)
{
	ummunot_kregion_cache = KMEM_CACHE(ummunot_kregion, SLAB_ACCOUNT);
	if (!ummunot_kregion_cache)
		return -ENOMEM;
	ummunot_limits_init(kmem_cache_size(ummunot_kregion_cache));
	return 0;
}

void ummunot_region_cache_exit(void)
{
	kmem_cache_destroy(ummunot_kregion_cache);
}

/* Read and check the batch descriptor common to all three ioctls. */
static int ummunot_batch_get(struct ummunot_ctx *ctx,
			     struct ummunot_batch __user *ubatch,
			     struct ummunot_batch *b)
{
	if (copy_from_user(b, ubatch, sizeof(*b)))
		return -EFAULT;
	b->error_index = b->count;
	if (b->flags || b->resv)
		return -EINVAL;
	if (b->count == 0 || b->count > ctx->max_regions)
		return -EINVAL;
	return 0;
}

/*
 * Tell the caller which element failed.  Best effort: the ioctl's errno
 * already says what happened, and a batch descriptor that cannot be written
 * was readable a moment ago.
 */
static void ummunot_batch_put_error(struct ummunot_batch __user *ubatch,
				    u32 index)
{
	if (put_user(index, &ubatch->error_index))
		pr_debug("ummunot: cannot report error_index\n");
}

static int ummunot_region_check(const struct ummunot_region *ur)
{
	u64 limit = TASK_SIZE;

	if (ur->flags || ur->resv)
		return -EINVAL;
	if (ur->length == 0)
		return -EINVAL;
	/* Rejects wrap-around as well as ranges past the end of user space. */
	if (ur->start >= limit || ur->length > limit - ur->start)
		return -EINVAL;
	return 0;
}

/* Free a chain of regions that were never inserted nor given a handle. */
static void ummunot_chain_free(struct ummunot_kregion *r)
{
	while (r) {
		struct ummunot_kregion *next = r->next;

		kmem_cache_free(ummunot_kregion_cache, r);
		r = next;
	}
}

/*
 * Walk the user array of batch @b in order, @chunk elements of @size bytes
 * at a time through @buf, and call @fn on each element.  Stops at the first
 * error of @fn (b->error_index names the element), at the first unreadable
 * element (-EFAULT; the readable ones before it still come first) or,
 * between chunks (a one-chunk batch has none), on a fatal signal (-EINTR,
 * error_index b->count: only a dying process sees it, and the batch is not
 * applied).  Inlined into its two callers, so @fn is a direct call there,
 * not one indirect call an element.
 */
static __always_inline long
ummunot_batch_walk(struct ummunot_batch *b, void *buf, size_t size, u32 chunk,
		   long (*fn)(void *arg, const void *elem), void *arg)
{
	const char __user *uarray = u64_to_user_ptr(b->ptr);
	u32 i, j, n, full;
	long ret;

	for (i = 0; i < b->count; i += n) {
		unsigned long left;

		n = min_t(u32, b->count - i, chunk);
		/*
		 * One element (the common single-region call) is copied with
		 * a size known at compile time, which skips the hardened
		 * usercopy object check (__check_object_size()).
		 */
		if (n == 1)
			left = copy_from_user(buf, uarray + (size_t)i * size, size);
		else
			left = copy_from_user(buf, uarray + (size_t)i * size,
					      n * size);
		full = n - DIV_ROUND_UP(left, size);
		for (j = 0; j < full; j++) {
			b->error_index = i + j;
			ret = fn(arg, (const char *)buf + j * size);
			if (ret)
				return ret;
		}
		if (left) {
			b->error_index = i + full;
			return -EFAULT;
		}
		if (i + n == b->count)
			break;
		if (fatal_signal_pending(current)) {
			b->error_index = b->count;
			return -EINTR;
		}
		cond_resched();
	}
	return 0;
}

/* A chain of regions being built in batch order. */
struct ummunot_chain {
	struct ummunot_ctx *ctx;
	struct ummunot_kregion **tail;
	bool unique;		/* UNREGISTER: naming a region twice fails */
};

static void ummunot_chain_add(struct ummunot_chain *c,
			      struct ummunot_kregion *r)
{
	r->next = NULL;
	*c->tail = r;
	c->tail = &r->next;
}

/* REGISTER: check one element and allocate its region. */
static long ummunot_register_one(void *arg, const void *elem)
{
	const struct ummunot_region *ur = elem;
	struct ummunot_chain *c = arg;
	struct ummunot_kregion *r;
	int ret;

	ret = ummunot_region_check(ur);
	if (ret)
		return ret;
	r = kmem_cache_zalloc(ummunot_kregion_cache, GFP_KERNEL_ACCOUNT);
	if (!r)
		return -ENOMEM;
	r->cookie = ur->cookie;
	r->it.start = ur->start;
	r->it.last = ur->start + ur->length - 1;
	ummunot_chain_add(c, r);
	return 0;
}

/*
 * REGISTER phase 1, without ctx->lock: copy and validate the array through
 * @buf, allocate a region per element and chain them in order on *@headp.
 * On error *@headp holds what was allocated and b->error_index the element.
 */
static long ummunot_register_prepare(struct ummunot_ctx *ctx,
				     struct ummunot_batch *b,
				     struct ummunot_region *buf, u32 chunk,
				     struct ummunot_kregion **headp)
{
	struct ummunot_chain c = { .ctx = ctx, .tail = headp };

	return ummunot_batch_walk(b, buf, sizeof(*buf), chunk,
				  ummunot_register_one, &c);
}

/*
 * Count the @count regions of the chain at @head (new, armed) and watch
 * them, in short runs so that callbacks never wait long for event_lock; the
 * run that ends the chain also notes the invalidations in flight over it.
 * Counted first, in the first run: a callback may disarm (and uncount) a
 * region as soon as it is in the tree, so nr_armed never goes below zero
 * and never exceeds nr_regions.  A single-region REGISTER takes the lock
 * once.
 */
static void ummunot_chain_watch(struct ummunot_ctx *ctx,
				struct ummunot_kregion *head, u32 count,
				struct ummunot_inflight_snap *snap)
{
	struct ummunot_kregion *r = head;

	while (r) {
		unsigned int n;

		spin_lock(&ctx->event_lock);
		if (count) {
			WRITE_ONCE(ctx->nr_regions, ctx->nr_regions + count);
			WRITE_ONCE(ctx->nr_armed, ctx->nr_armed + count);
			WRITE_ONCE(ctx->regions_registered,
				   ctx->regions_registered + count);
			count = 0;
		}
		for (n = 0; r && n < UMMUNOT_HANDLE_CHUNK; r = r->next, n++)
			ummunot_region_watch(ctx, r);
		if (!r)
			ummunot_inflight_snap(ctx, head, snap);
		spin_unlock(&ctx->event_lock);
		if (r)
			cond_resched();
	}
}

/*
 * Undo REGISTER phase 3 for the chain at @head of @count regions: every
 * region has a handle, is counted and is watched.  regions_registered
 * keeps them: it only grows (they were registered, then removed).
 */
static void ummunot_register_undo(struct ummunot_ctx *ctx,
				  struct ummunot_kregion *head, u32 count)
{
	struct ummunot_kregion *r = head;
	u32 armed = 0;

	while (r) {
		unsigned int n;

		spin_lock(&ctx->event_lock);
		for (n = 0; r && n < UMMUNOT_HANDLE_CHUNK; r = r->next, n++) {
			ummunot_region_unwatch(ctx, r);
			if (r->armed)
				armed++;
		}
		if (!r) {
			WRITE_ONCE(ctx->nr_armed, ctx->nr_armed - armed);
			WRITE_ONCE(ctx->nr_regions, ctx->nr_regions - count);
		}
		spin_unlock(&ctx->event_lock);
		if (r)
			cond_resched();
	}
	for (r = head; r; r = r->next)
		ummunot_handle_del(ctx, r);
}

/* REGISTER phases 2 and 3, under ctx->lock. */
static long ummunot_register_commit(struct ummunot_ctx *ctx,
				    struct ummunot_batch *b,
				    struct ummunot_kregion *head)
{
	struct ummunot_region __user *uregs = u64_to_user_ptr(b->ptr);
	struct ummunot_inflight_snap snap;
	struct ummunot_kregion *r;
	long ret;
	u32 i;

	lockdep_assert_held(&ctx->lock);
	if (ctx->nr_regions + b->count > ctx->max_regions) {
		b->error_index = ctx->max_regions - ctx->nr_regions;
		return -ENOSPC;
	}

	/*
	 * The file's first REGISTER registers its notifier: ENOMEM, or EINTR
	 * on a signal while it takes every VMA's lock.  Nothing is watched
	 * then, so the call is restarted transparently instead of failing.
	 */
	ret = ctx->mn_attached ? 0 : ummunot_notifier_attach(ctx);
	if (ret) {
		b->error_index = b->count;
		return ret == -EINTR ? -ERESTARTNOINTR : ret;
	}

	/* Handles: allocate nothing, cannot fail. */
	for (r = head; r; r = r->next) {
		ummunot_handle_add(ctx, r);
		r->armed = true;
	}

	/* Tell the caller before anything is watched. */
	for (r = head, i = 0; r; r = r->next, i++) {
		if (put_user(ummunot_kregion_handle(r), &uregs[i].handle)) {
			b->error_index = i;
			for (r = head; r; r = r->next)
				ummunot_handle_del(ctx, r);
			return -EFAULT;
		}
	}

	/*
	 * Watch, then wait out the invalidations that were already under way
	 * over the regions (they started before the regions were in the tree
	 * and produced no event): when this ioctl returns, pages pinned over
	 * the regions are the ones those invalidations left, and every later
	 * invalidation of them produces an event.
	 */
	ummunot_chain_watch(ctx, head, b->count, &snap);
	ret = ummunot_inflight_none(&snap) ? 0 :
	      ummunot_inflight_wait(ctx, &snap);
	if (ret) {
		b->error_index = b->count;
		ummunot_register_undo(ctx, head, b->count);
	}
	return ret;
}

long ummunot_ioctl_register(struct ummunot_ctx *ctx,
			    struct ummunot_batch __user *ubatch)
{
	struct ummunot_region sbuf[UMMUNOT_REGION_STACK];
	struct ummunot_kregion *head = NULL;
	struct ummunot_region *buf = sbuf;
	struct ummunot_batch b = {};
	u32 chunk = UMMUNOT_REGION_STACK;
	u64 nr;
	long ret;

	ret = ummunot_batch_get(ctx, ubatch, &b);
	if (ret == -EFAULT)	/* the descriptor itself is unreadable */
		return ret;
	if (ret)
		goto out;

	/* Early answer without the lock; ummunot_register_commit() decides. */
	nr = min_t(u64, READ_ONCE(ctx->nr_regions), ctx->max_regions);
	if (nr + b.count > ctx->max_regions) {
		b.error_index = ctx->max_regions - nr;
		ret = -ENOSPC;
		goto out;
	}
	ret = ummunot_regions_charge(ctx->user, ctx->mm_acct, b.count);
	if (ret)
		goto out;	/* error_index: count */

	/*
	 * Small batches go through the stack: a kmalloc()ed chunk cost a
	 * third of a single-region REGISTER (allocation, zeroing under
	 * init_on_alloc, the usercopy heap check, kfree()).
	 */
	if (b.count > UMMUNOT_REGION_STACK) {
		buf = kmalloc(UMMUNOT_CHUNK_BYTES, GFP_KERNEL);
		if (!buf) {
			ret = -ENOMEM;
			goto out_uncharge;
		}
		chunk = UMMUNOT_REGION_CHUNK;
	}
	ret = ummunot_register_prepare(ctx, &b, buf, chunk, &head);
	if (buf != sbuf)
		kfree(buf);
	if (ret)
		goto out_free;

	/*
	 * Killable: another thread of this process may hold ctx->lock while
	 * its own memory is faulted in.  -EINTR only reaches a dying process.
	 */
	if (mutex_lock_killable(&ctx->lock)) {
		ret = -EINTR;
		b.error_index = b.count;
		goto out_free;
	}
	ret = ummunot_register_commit(ctx, &b, head);
	mutex_unlock(&ctx->lock);
	if (!ret)
		return 0;

out_free:
	ummunot_chain_free(head);
out_uncharge:
	ummunot_regions_uncharge(ctx->user, ctx->mm_acct, b.count);
out:
	if (ret != -ERESTARTNOINTR)
		ummunot_batch_put_error(ubatch, b.error_index);
	return ret;
}

static void ummunot_region_destroy(struct ummunot_ctx *ctx,
				   struct ummunot_kregion *r)
{
	ummunot_handle_del(ctx, r);

	spin_lock(&ctx->event_lock);
	ummunot_region_unwatch(ctx, r);
	if (r->armed)
		WRITE_ONCE(ctx->nr_armed, ctx->nr_armed - 1);
	WRITE_ONCE(ctx->nr_regions, ctx->nr_regions - 1);
	spin_unlock(&ctx->event_lock);
	ummunot_regions_uncharge(ctx->user, ctx->mm_acct, 1);
	kmem_cache_free(ummunot_kregion_cache, r);
}

/* UNREGISTER and REARM: look one handle up and chain its region. */
static long ummunot_handle_one(void *arg, const void *elem)
{
	struct ummunot_chain *c = arg;
	struct ummunot_kregion *r;

	r = ummunot_handle_lookup(c->ctx, *(const u64 *)elem);
	if (!r)
		return -ENOENT;
	if (r->marked)
		return c->unique ? -EINVAL : 0;
	r->marked = true;
	ummunot_chain_add(c, r);
	return 0;
}

/*
 * Copy the handles of an UNREGISTER or REARM batch through @buf
 * (UMMUNOT_HANDLE_STACK handles) and chain the regions they name on
 * *@headp (->marked set).  With @unique, naming a region twice is an error;
 * otherwise the repeat is skipped.  On error b->error_index says which
 * element; the chain holds what was resolved.
 */
static long ummunot_handles_resolve(struct ummunot_ctx *ctx,
				    struct ummunot_batch *b, bool unique,
				    u64 *buf, struct ummunot_kregion **headp)
{
	struct ummunot_chain c = { .ctx = ctx, .tail = headp, .unique = unique };

	lockdep_assert_held(&ctx->lock);
	return ummunot_batch_walk(b, buf, sizeof(*buf), UMMUNOT_HANDLE_STACK,
				  ummunot_handle_one, &c);
}

static void ummunot_chain_unmark(struct ummunot_kregion *r)
{
	for (; r; r = r->next)
		r->marked = false;
}

static long ummunot_apply_unregister(struct ummunot_ctx *ctx,
				     struct ummunot_kregion *r)
{
	while (r) {
		struct ummunot_kregion *next = r->next;

		ummunot_region_destroy(ctx, r);
		if (next)
			cond_resched();
		r = next;
	}
	return 0;
}

/*
 * Arm in short runs, so callbacks never wait long for event_lock; then wait
 * out the invalidations in flight over the regions, and only those.  A
 * region's event is posted when an invalidation starts, before the kernel
 * changes the pages; a caller that re-pins after REARM must get the pages
 * that invalidation left, not the ones it is still taking away (a re-pin of
 * a page the zap has not reached yet would hold it with no further event).
 * Armed first, then waited for: an invalidation that starts in between is
 * reported.  -EINTR (the regions stay armed) only reaches a dying process.
 */
static long ummunot_apply_rearm(struct ummunot_ctx *ctx,
				struct ummunot_kregion *head)
{
	struct ummunot_inflight_snap snap;
	struct ummunot_kregion *r = head;

	while (r) {
		unsigned int n;

		spin_lock(&ctx->event_lock);
		for (n = 0; r && n < UMMUNOT_HANDLE_CHUNK; r = r->next, n++) {
			r->marked = false;
			if (!r->armed) {
				r->armed = true;
				WRITE_ONCE(ctx->nr_armed, ctx->nr_armed + 1);
			}
		}
		if (!r)
			ummunot_inflight_snap(ctx, head, &snap);
		spin_unlock(&ctx->event_lock);
		if (r)
			cond_resched();
	}
	return ummunot_inflight_none(&snap) ? 0 :
	       ummunot_inflight_wait(ctx, &snap);
}

/*
 * UNREGISTER and REARM: resolve every handle first (all-or-nothing), then
 * apply the operation to all of them under ctx->lock.
 */
static __always_inline long
ummunot_ioctl_handles(struct ummunot_ctx *ctx,
		      struct ummunot_batch __user *ubatch, bool unique,
		      long (*apply)(struct ummunot_ctx *ctx,
				    struct ummunot_kregion *head))
{
	u64 buf[UMMUNOT_HANDLE_STACK];	/* no allocation: never ENOMEM */
	struct ummunot_kregion *head = NULL;
	struct ummunot_batch b = {};
	long ret;

	ret = ummunot_batch_get(ctx, ubatch, &b);
	if (ret == -EFAULT)	/* the descriptor itself is unreadable */
		return ret;
	if (ret)
		goto out;

	if (mutex_lock_killable(&ctx->lock)) {
		ret = -EINTR;		/* seen only by a dying process */
		b.error_index = b.count;
		goto out;
	}
	ret = ummunot_handles_resolve(ctx, &b, unique, buf, &head);
	if (ret) {
		ummunot_chain_unmark(head);
	} else {
		ret = apply(ctx, head);
		if (ret)
			b.error_index = b.count;
	}
	mutex_unlock(&ctx->lock);
out:
	if (ret)
		ummunot_batch_put_error(ubatch, b.error_index);
	return ret;
}

long ummunot_ioctl_unregister(struct ummunot_ctx *ctx,
			      struct ummunot_batch __user *ubatch)
{
	return ummunot_ioctl_handles(ctx, ubatch, true, ummunot_apply_unregister);
}

long ummunot_ioctl_rearm(struct ummunot_ctx *ctx,
			 struct ummunot_batch __user *ubatch)
{
	return ummunot_ioctl_handles(ctx, ubatch, false, ummunot_apply_rearm);
}

/*
 * File release: stop watching everything, then let go of the notifier
 * (which waits for running callbacks).  No ioctl can run any more.
 */
void ummunot_regions_release(struct ummunot_ctx *ctx)
{
	mutex_lock(&ctx->lock);
	while (ctx->last) {
		ummunot_region_destroy(ctx, ctx->last);
		cond_resched();
	}
	ummunot_notifier_detach(ctx);
	mutex_unlock(&ctx->lock);
}
