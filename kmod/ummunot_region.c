// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: watched regions - REGISTER, UNREGISTER, REARM and release.
 *
 * Batches are all-or-nothing.  Each batch runs in phases so that every
 * step that can fail comes before the first step that is visible:
 *
 *   REGISTER:   copy + validate every element and allocate every region,
 *               allocate every handle, write every handle back to user
 *               memory, then insert the notifiers (only the very first
 *               insert in an mm can fail, before anything is watched) and
 *               wait out in-flight invalidations.
 *   UNREGISTER: copy every handle, look each up (and refuse duplicates),
 *               then remove.
 *   REARM:      copy every handle, look each up, then arm.
 *
 * All of it runs under ctx->lock.  Notifier callbacks never take ctx->lock,
 * so mmu_interval_notifier_remove() (which waits for running callbacks)
 * and mmu_interval_read_begin() (which waits for running invalidations)
 * are safe under it.
 */
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/xarray.h>

#include "ummunot_priv.h"

static struct kmem_cache *ummunot_kregion_cache;

int ummunot_region_cache_init(void)
{
	ummunot_kregion_cache = KMEM_CACHE(ummunot_kregion, SLAB_ACCOUNT);
	return ummunot_kregion_cache ? 0 : -ENOMEM;
}

void ummunot_region_cache_exit(void)
{
	kmem_cache_destroy(ummunot_kregion_cache);
}

static unsigned long ummunot_handle_id(u64 handle)
{
	return (unsigned long)(handle & UMMUNOT_HANDLE_ID_MASK);
}

static struct ummunot_kregion *ummunot_region_lookup(struct ummunot_ctx *ctx,
						     u64 handle)
{
	struct ummunot_kregion *r;

	lockdep_assert_held(&ctx->lock);
	r = xa_load(&ctx->regions, ummunot_handle_id(handle));
	if (!r || ummunot_kregion_handle(r) != handle)
		return NULL;
	return r;
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

/* Undo phases 1-3 of REGISTER for regs[0..count): nothing was inserted. */
static void ummunot_register_unwind(struct ummunot_ctx *ctx,
				    struct ummunot_kregion **regs,
				    u32 count, u32 nr_ids)
{
	u32 i;

	for (i = 0; i < count; i++) {
		if (i < nr_ids)
			xa_erase(&ctx->regions, regs[i]->id);
		kmem_cache_free(ummunot_kregion_cache, regs[i]);
	}
}

long ummunot_ioctl_register(struct ummunot_ctx *ctx,
			    struct ummunot_batch __user *ubatch)
{
	struct ummunot_region __user *uregs;
	struct ummunot_kregion **regs = NULL;
	struct ummunot_batch b = {};
	u32 i, nr_alloc = 0, nr_ids = 0;
	long ret;

	ret = ummunot_batch_get(ctx, ubatch, &b);
	if (ret == -EFAULT)	/* the descriptor itself is unreadable */
		return ret;
	if (ret)
		goto out;
	uregs = u64_to_user_ptr(b.ptr);

	mutex_lock(&ctx->lock);
	if (ctx->nr_regions + b.count > ctx->max_regions) {
		b.error_index = ctx->max_regions - ctx->nr_regions;
		ret = -ENOSPC;
		goto out_unlock;
	}

	regs = kvmalloc_array(b.count, sizeof(*regs), GFP_KERNEL_ACCOUNT);
	if (!regs) {
		ret = -ENOMEM;
		goto out_unlock;
	}

	/* Phase 1: copy, validate, allocate. */
	for (i = 0; i < b.count; i++) {
		struct ummunot_region ur;
		struct ummunot_kregion *r;

		b.error_index = i;
		if (copy_from_user(&ur, &uregs[i], sizeof(ur))) {
			ret = -EFAULT;
			goto out_unwind;
		}
		ret = ummunot_region_check(&ur);
		if (ret)
			goto out_unwind;
		r = kmem_cache_zalloc(ummunot_kregion_cache, GFP_KERNEL_ACCOUNT);
		if (!r) {
			ret = -ENOMEM;
			goto out_unwind;
		}
		r->ctx = ctx;
		r->cookie = ur.cookie;
		/* Stashed in the notifier's fields until phase 4 inserts it. */
		r->mni.interval_tree.start = ur.start;
		r->mni.interval_tree.last = ur.start + ur.length - 1;
		regs[nr_alloc++] = r;
		cond_resched();
	}

	/* Phase 2: handles. */
	for (i = 0; i < b.count; i++) {
		struct ummunot_kregion *r = regs[i];
		u32 id;
		int err;

		b.error_index = i;
		err = xa_alloc_cyclic(&ctx->regions, &id, r, xa_limit_32b,
				      &ctx->next_id, GFP_KERNEL_ACCOUNT);
		if (err < 0) {
			ret = err == -EBUSY ? -ENOSPC : err;
			goto out_unwind;
		}
		if (err == 1)		/* ids wrapped: new handles differ from old */
			ctx->handle_gen++;
		r->id = id;
		r->gen = ctx->handle_gen;
		nr_ids++;
	}

	/* Phase 3: tell the caller. */
	for (i = 0; i < b.count; i++) {
		b.error_index = i;
		if (put_user(ummunot_kregion_handle(regs[i]), &uregs[i].handle)) {
			ret = -EFAULT;
			goto out_unwind;
		}
	}

	/* Phase 4: watch. */
	for (i = 0; i < b.count; i++) {
		struct ummunot_kregion *r = regs[i];
		unsigned long start = r->mni.interval_tree.start;
		unsigned long length = r->mni.interval_tree.last - start + 1;
		int err;

		r->armed = true;
		err = mmu_interval_notifier_insert(&r->mni, ctx->mm, start,
						   length, &ummunot_mni_ops);
		if (err) {
			/*
			 * Only the first insert in an mm can fail (it sets up
			 * the mm's notifier subscriptions), so nothing of this
			 * batch is being watched yet.
			 */
			while (i--)
				mmu_interval_notifier_remove(&regs[i]->mni);
			b.error_index = b.count;
			ret = err;
			goto out_unwind;
		}
	}

	/*
	 * An insert that raced with a running invalidation is deferred until
	 * that invalidation ends; read_begin() waits for that, so when this
	 * ioctl returns every region is in the tree and every later
	 * invalidation of it produces an event.
	 */
	for (i = 0; i < b.count; i++) {
		mmu_interval_read_begin(&regs[i]->mni);
		cond_resched();
	}

	spin_lock(&ctx->event_lock);
	ctx->nr_armed += b.count;
	spin_unlock(&ctx->event_lock);
	ctx->nr_regions += b.count;
	ctx->regions_registered += b.count;
	ret = 0;
	goto out_free;

out_unwind:
	ummunot_register_unwind(ctx, regs, nr_alloc, nr_ids);
out_free:
	kvfree(regs);
out_unlock:
	mutex_unlock(&ctx->lock);
out:
	if (ret)
		ummunot_batch_put_error(ubatch, b.error_index);
	return ret;
}

/*
 * Copy the handle array of an UNREGISTER or REARM batch and resolve it.
 * With @unique, naming a region twice is an error.  On success regs[] holds
 * the regions in order; on error b->error_index says which element.
 */
static long ummunot_handles_resolve(struct ummunot_ctx *ctx,
				    struct ummunot_batch *b, bool unique,
				    struct ummunot_kregion ***regsp)
{
	u64 __user *uhandles = u64_to_user_ptr(b->ptr);
	struct ummunot_kregion **regs;
	long ret = 0;
	u32 i;

	lockdep_assert_held(&ctx->lock);
	regs = kvmalloc_array(b->count, sizeof(*regs), GFP_KERNEL_ACCOUNT);
	if (!regs)
		return -ENOMEM;

	for (i = 0; i < b->count; i++) {
		u64 handle;

		b->error_index = i;
		if (get_user(handle, &uhandles[i])) {
			ret = -EFAULT;
			break;
		}
		regs[i] = ummunot_region_lookup(ctx, handle);
		if (!regs[i]) {
			ret = -ENOENT;
			break;
		}
		if (unique) {
			if (regs[i]->marked) {
				ret = -EINVAL;
				break;
			}
			regs[i]->marked = true;
		}
	}

	if (unique) {
		u32 nr = ret ? i : b->count;

		while (nr--)
			regs[nr]->marked = false;
	}
	if (ret) {
		kvfree(regs);
		return ret;
	}
	*regsp = regs;
	return 0;
}

static void ummunot_region_destroy(struct ummunot_ctx *ctx,
				   struct ummunot_kregion *r)
{
	/* Waits for a callback running on this region to finish. */
	mmu_interval_notifier_remove(&r->mni);
	xa_erase(&ctx->regions, r->id);

	spin_lock(&ctx->event_lock);
	if (r->armed)
		ctx->nr_armed--;
	spin_unlock(&ctx->event_lock);
	ctx->nr_regions--;
	kmem_cache_free(ummunot_kregion_cache, r);
}

static void ummunot_apply_unregister(struct ummunot_ctx *ctx,
				     struct ummunot_kregion **regs, u32 count)
{
	u32 i;

	for (i = 0; i < count; i++) {
		ummunot_region_destroy(ctx, regs[i]);
		cond_resched();
	}
}

static void ummunot_apply_rearm(struct ummunot_ctx *ctx,
				struct ummunot_kregion **regs, u32 count)
{
	u32 i;

	spin_lock(&ctx->event_lock);
	for (i = 0; i < count; i++) {
		if (!regs[i]->armed) {
			regs[i]->armed = true;
			ctx->nr_armed++;
		}
	}
	spin_unlock(&ctx->event_lock);
}

/*
 * UNREGISTER and REARM: resolve every handle first (all-or-nothing), then
 * apply the operation to all of them under ctx->lock.
 */
static long ummunot_ioctl_handles(struct ummunot_ctx *ctx,
				  struct ummunot_batch __user *ubatch, bool unique,
				  void (*apply)(struct ummunot_ctx *ctx,
						struct ummunot_kregion **regs,
						u32 count))
{
	struct ummunot_kregion **regs;
	struct ummunot_batch b = {};
	long ret;

	ret = ummunot_batch_get(ctx, ubatch, &b);
	if (ret == -EFAULT)	/* the descriptor itself is unreadable */
		return ret;
	if (ret)
		goto out;

	mutex_lock(&ctx->lock);
	ret = ummunot_handles_resolve(ctx, &b, unique, &regs);
	if (!ret) {
		apply(ctx, regs, b.count);
		kvfree(regs);
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

/* File release: stop watching everything.  No ioctl can run any more. */
void ummunot_regions_release(struct ummunot_ctx *ctx)
{
	struct ummunot_kregion *r;
	unsigned long id;

	mutex_lock(&ctx->lock);
	xa_for_each(&ctx->regions, id, r) {
		ummunot_region_destroy(ctx, r);
		cond_resched();
	}
	mutex_unlock(&ctx->lock);
	xa_destroy(&ctx->regions);
}
