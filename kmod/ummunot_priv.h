/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ummunot: private definitions shared by the module's files.
 *
 * Objects and their locks:
 *
 *   struct ummunot_ctx      one per open file, bound to the opener's mm
 *     ->lock (mutex)        serialises HELLO, REGISTER, UNREGISTER, REARM,
 *                           RESYNC, GET_STATS and release; protects the
 *                           region xarray and ->nr_regions.  May be held
 *                           while taking mmap_lock (copy_from_user faults,
 *                           the first notifier insert); never taken under
 *                           mmap_lock or from a notifier callback.
 *     ->event_lock (spin)   protects the ring's producer state, each
 *                           region's ->armed, the filter and the counters.
 *                           Taken by notifier callbacks (possibly with
 *                           mmap_lock held, possibly non-blockable) and
 *                           held only for O(1) work: no allocation, no
 *                           sleeping, no user access under it.
 *   struct ummunot_ring     the shared ring; published once by HELLO with
 *                           a release store, read with an acquire load.
 *   struct ummunot_kregion   one MMU interval notifier and its cookie.
 */
#ifndef _UMMUNOT_PRIV_H
#define _UMMUNOT_PRIV_H

#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include <linux/ummunot.h>

#define UMMUNOT_HANDLE_ID_MASK	0xffffffffULL

/* Module parameters (ummunot_main.c). */
extern unsigned int ummunot_max_regions;
extern unsigned int ummunot_max_ring_entries;
extern unsigned int ummunot_default_ring_entries;

struct ummunot_ring {
	struct page **pages;
	unsigned int nr_pages;
	struct ummunot_ring_header *hdr;	/* vmap of pages[0..] */
	struct ummunot_event *entries;		/* hdr + PAGE_SIZE */
	u32 nr_entries;
	u32 mask;

	/* Kernel-private truth, under ctx->event_lock; hdr only mirrors it. */
	u64 prod;
	u64 gen;
	u64 seq;
	u64 dropped;			/* cumulative */
	u64 dropped_since_resync;
	u64 high_water;
	bool overflow;
};

struct ummunot_ctx {
	struct mm_struct *mm;		/* mmgrab()ed at open */
	struct mutex lock;
	spinlock_t event_lock;
	struct ummunot_ring *ring;	/* NULL until HELLO */
	wait_queue_head_t wq;

	/* Under ->lock. */
	struct xarray regions;		/* handle id -> struct ummunot_kregion */
	u32 next_id;
	u16 handle_gen;			/* wraps of next_id */
	u64 nr_regions;
	u64 regions_registered;
	u32 max_regions;		/* fixed at HELLO */

	/* Under ->event_lock. */
	u64 event_mask;
	u64 nr_armed;
	u64 events;
	u64 overflows;
	u64 delivered[UMMUNOT_EVENT_TYPE_MAX];
	u64 filtered[UMMUNOT_EVENT_TYPE_MAX];

	/* Identity, for the administrator's view. */
	struct list_head node;		/* on ummunot_clients */
	pid_t tgid;
	char comm[TASK_COMM_LEN];
};

/*
 * 112 bytes on x86-64 (the notifier is 88): the handle is stored as its two
 * halves so that the flags fit in the same word.
 */
struct ummunot_kregion {
	struct mmu_interval_notifier mni;
	struct ummunot_ctx *ctx;
	u64 cookie;
	u32 id;				/* xarray index, the handle's low half */
	u16 gen;			/* the handle's high half */
	bool armed;			/* under ctx->event_lock */
	bool marked;			/* under ctx->lock, batch duplicate check */
};

static inline u64 ummunot_kregion_handle(const struct ummunot_kregion *r)
{
	return ((u64)r->gen << 32) | r->id;
}

/* ummunot_stats.c */
struct seq_file;
extern const struct attribute_group *ummunot_attr_groups[];
void ummunot_client_add(struct ummunot_ctx *ctx);
void ummunot_client_del(struct ummunot_ctx *ctx);
void ummunot_show_fdinfo(struct seq_file *m, struct file *file);

/* ummunot_ring.c */
struct ummunot_ring *ummunot_ring_alloc(u32 nr_entries, u64 features);
void ummunot_ring_free(struct ummunot_ring *ring);
int ummunot_ring_mmap(struct ummunot_ring *ring, struct vm_area_struct *vma);
bool ummunot_ring_post(struct ummunot_ctx *ctx, const struct ummunot_kregion *r,
		       u64 start, u64 end, u32 type);
bool ummunot_ring_readable(struct ummunot_ring *ring);
u64 ummunot_ring_resync(struct ummunot_ring *ring);

/* ummunot_region.c */
int ummunot_region_cache_init(void);
void ummunot_region_cache_exit(void);
long ummunot_ioctl_register(struct ummunot_ctx *ctx,
			    struct ummunot_batch __user *ubatch);
long ummunot_ioctl_unregister(struct ummunot_ctx *ctx,
			      struct ummunot_batch __user *ubatch);
long ummunot_ioctl_rearm(struct ummunot_ctx *ctx,
			 struct ummunot_batch __user *ubatch);
void ummunot_regions_release(struct ummunot_ctx *ctx);

/* ummunot_notifier.c */
extern const struct mmu_interval_notifier_ops ummunot_mni_ops;
u32 ummunot_event_type(enum mmu_notifier_event event);

/* ummunot_file.c */
extern const struct file_operations ummunot_fops;

#endif /* _UMMUNOT_PRIV_H */
