/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * ummunot: private definitions shared by the module's files.
 *
 * Objects and their locks:
 *
 *   struct ummunot_ctx      one per open file, bound to the opener's mm
 *     ->lock (mutex)        serialises HELLO, REGISTER, UNREGISTER, REARM,
 *                           SET_FILTER and release of one file; protects
 *                           the handle index and each region's ->marked
 *                           and ->next.  May be held across user memory
 *                           access and while taking mmap_lock; only the
 *                           owner's own threads can wait for it (every
 *                           other caller gets EPERM first), and ioctls
 *                           wait for it killably.  Never taken
 *                           by fdinfo, sysfs, GET_STATS, RESYNC, poll, the
 *                           ring's fault handler or a notifier callback,
 *                           so a caller stalled on its own memory
 *                           (userfaultfd) blocks no observer.
 *     ->event_lock (spin)   protects the ring's producer state, the
 *                           interval tree of watched regions, each
 *                           region's ->armed, the invalidations in flight,
 *                           the filter and the counters (nr_regions and
 *                           nr_armed are changed together, so readers
 *                           under it see armed <= regions).  Taken by
 *                           notifier callbacks (possibly with mmap_lock
 *                           held, possibly non-blockable): no allocation,
 *                           no sleeping, no user access under it; a walk
 *                           over many regions drops it to reschedule.
 *   struct ummunot_ring     the shared ring; published once by HELLO with
 *                           a release store, read with an acquire load.
 *   struct ummunot_kregion  a watched range and its cookie, in the file's
 *                           interval tree (ummunot_notifier.c).
 *   struct ummunot_user     per-user accounting (ummunot_limits.c).
 *   struct ummunot_mm_acct  per-address-space region count (same file).
 */
#ifndef _UMMUNOT_PRIV_H
#define _UMMUNOT_PRIV_H

#include <linux/interval_tree.h>
#include <linux/list.h>
#include <linux/mmu_notifier.h>
#include <linux/mutex.h>
#include <linux/rbtree.h>
#include <linux/rcuwait.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include <linux/ummunot.h>

#define UMMUNOT_HANDLE_ID_MASK	0xffffffffULL

/*
 * Batches are copied in and out through a fixed buffer of this size, never
 * through an allocation sized by the caller's count.
 */
#define UMMUNOT_CHUNK_BYTES	2048
#define UMMUNOT_REGION_CHUNK	(UMMUNOT_CHUNK_BYTES / sizeof(struct ummunot_region))
#define UMMUNOT_HANDLE_CHUNK	(UMMUNOT_CHUNK_BYTES / sizeof(u64))
/* REGISTER batches of at most this many are copied through the stack. */
#define UMMUNOT_REGION_STACK	4
/*
 * UNREGISTER and REARM copy handles through an on-stack buffer of this many,
 * so that they allocate nothing and cannot fail with ENOMEM.
 */
#define UMMUNOT_HANDLE_STACK	32

/* Module parameters (ummunot_main.c). */
extern unsigned int ummunot_max_regions;
extern unsigned int ummunot_max_regions_per_mm;
extern unsigned long ummunot_max_user_memory;
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

struct ummunot_user;
struct ummunot_mm_acct;

/*
 * Invalidations of the owner's mm in flight (between start and end), by
 * range; more at once than this are counted as "wide", overlapping all.
 */
#define UMMUNOT_INFLIGHT_SLOTS	8

struct ummunot_inflight {
	unsigned long seq;		/* odd: busy */
	const struct mmu_notifier_range *range;	/* the holder's, while busy */
	unsigned long start;
	unsigned long last;		/* inclusive */
};

/* What REGISTER and REARM wait for (ummunot_inflight_snap()). */
struct ummunot_inflight_snap {
	unsigned long seq[UMMUNOT_INFLIGHT_SLOTS];
	long wide_gen;
	unsigned long slots;		/* bitmap of inflight[] waited for */
	bool wide;
};

struct ummunot_ctx {
	struct mm_struct *mm;		/* mmgrab()ed at open */
	struct ummunot_user *user;	/* the opener's budget (ummunot_limits.c) */
	struct ummunot_mm_acct *mm_acct;
	unsigned long ring_charge;	/* bytes charged for the ring */
	struct mutex lock;
	/* The ring's producer side and the regions' armed state: the
	 * notifier's non-blockable section takes only this lock.
	 */
	spinlock_t event_lock;
	struct ummunot_ring *ring;	/* NULL until HELLO */
	wait_queue_head_t wq;

	/* The owner's mm's notifier, from the first REGISTER (->lock). */
	struct mmu_notifier mn;
	bool mn_attached;

	/* Under ->event_lock. */
	struct rb_root_cached itree;	/* watched regions, by range */
	u64 tree_gen;			/* bumped by every insert and removal */
	/*
	 * Invalidations in flight: claimed under ->event_lock, given back
	 * without it (ummunot_notifier.c).
	 */
	struct ummunot_inflight inflight[UMMUNOT_INFLIGHT_SLOTS];
	atomic_t nr_wide;		/* in flight beyond the slots */
	atomic_long_t wide_gen;		/* bumped when nr_wide drops to 0 */
	struct rcuwait inflight_wait;	/* REGISTER or REARM, under ->lock */

	/* Under ->lock. */
	struct rb_root regions;		/* by handle (ummunot_handle.c) */
	struct ummunot_kregion *last;	/* the largest handle, or NULL */
	u64 next_handle;
	u32 max_regions;		/* fixed at HELLO */

	/*
	 * Written under ->lock and ->event_lock (WRITE_ONCE); read under
	 * either, or with READ_ONCE for a single value.
	 */
	u64 nr_regions;
	u64 nr_armed;
	u64 regions_registered;

	/* Under ->event_lock. */
	u64 event_mask;
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
 * 104 bytes on x86-64 (the interval tree node is 48, the handle index node
 * 24): the region is all the memory a watched range holds.
 */
struct ummunot_kregion {
	struct interval_tree_node it;	/* under ctx->event_lock, ctx->itree */
	u64 cookie;
	u64 handle;			/* under ctx->lock */
	struct rb_node node;		/* under ctx->lock, ctx->regions */
	bool armed;			/* under ctx->event_lock */
	bool marked;			/* under ctx->lock, on a batch's chain */
	struct ummunot_kregion *next;	/* under ctx->lock, a batch's chain */
};

static inline u64 ummunot_kregion_handle(const struct ummunot_kregion *r)
{
	return r->handle;
}

/* ummunot_handle.c */
void ummunot_handle_add(struct ummunot_ctx *ctx, struct ummunot_kregion *r);
void ummunot_handle_del(struct ummunot_ctx *ctx, struct ummunot_kregion *r);
struct ummunot_kregion *ummunot_handle_lookup(struct ummunot_ctx *ctx,
					      u64 handle);

/* ummunot_stats.c */
struct seq_file;
extern const struct attribute_group *ummunot_attr_groups[];
void ummunot_client_add(struct ummunot_ctx *ctx);
void ummunot_client_del(struct ummunot_ctx *ctx);
void ummunot_show_fdinfo(struct seq_file *m, struct file *file);

/* ummunot_limits.c */
extern const struct attribute_group ummunot_limits_group;
void ummunot_limits_init(unsigned int region_object_size);
unsigned long ummunot_max_user_memory_default(void);
unsigned long ummunot_region_charge(void);
struct ummunot_user *ummunot_user_get(void);
void ummunot_user_put(struct ummunot_user *u);
struct ummunot_mm_acct *ummunot_mm_acct_get(const struct mm_struct *mm);
void ummunot_mm_acct_put(struct ummunot_mm_acct *a);
int ummunot_user_charge_ring(struct ummunot_user *u, unsigned long bytes);
void ummunot_user_uncharge_ring(struct ummunot_user *u, unsigned long bytes);
int ummunot_regions_charge(struct ummunot_user *u, struct ummunot_mm_acct *a,
			   u32 count);
void ummunot_regions_uncharge(struct ummunot_user *u, struct ummunot_mm_acct *a,
			      u32 count);

/* ummunot_ring.c */
unsigned long ummunot_ring_bytes(u32 nr_entries);
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
u32 ummunot_event_type(enum mmu_notifier_event event);
int ummunot_notifier_attach(struct ummunot_ctx *ctx);
void ummunot_notifier_detach(struct ummunot_ctx *ctx);
void ummunot_inflight_snap(struct ummunot_ctx *ctx,
			   const struct ummunot_kregion *head,
			   struct ummunot_inflight_snap *snap);
int ummunot_inflight_wait(struct ummunot_ctx *ctx,
			  const struct ummunot_inflight_snap *snap);

/* Nothing in flight over the regions: no need to wait. */
static inline bool ummunot_inflight_none(const struct ummunot_inflight_snap *snap)
{
	return !snap->wide && !snap->slots;
}

/* Watch @r: notifier callbacks see it from now on; ctx->event_lock held. */
static inline void ummunot_region_watch(struct ummunot_ctx *ctx,
					struct ummunot_kregion *r)
{
	lockdep_assert_held(&ctx->event_lock);
	interval_tree_insert(&r->it, &ctx->itree);
	ctx->tree_gen++;
}

/* Stop watching @r; ctx->event_lock held.  No callback sees it afterwards. */
static inline void ummunot_region_unwatch(struct ummunot_ctx *ctx,
					  struct ummunot_kregion *r)
{
	lockdep_assert_held(&ctx->event_lock);
	interval_tree_remove(&r->it, &ctx->itree);
	ctx->tree_gen++;
}

/* ummunot_file.c */
extern const struct file_operations ummunot_fops;

#endif /* _UMMUNOT_PRIV_H */
