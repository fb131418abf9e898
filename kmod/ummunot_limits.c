// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: per-user and per-address-space limits.
 *
 * Two bounds, both checked when memory is about to be allocated:
 *
 *   max_user_memory      bytes of kernel memory (rings and regions) that the
 *                        files opened by one user (real uid of the opener)
 *                        may hold together, across all its files and
 *                        processes and its user namespaces.  Like
 *                        inotify's max_user_watches.
 *   max_regions_per_mm   regions that all files of one address space may
 *                        watch together.  It bounds the work one
 *                        invalidation does in the unmapping thread: at most
 *                        this many notifier callbacks.
 *
 * Each open file holds a reference on its user's and its mm's accounting
 * structure (small, refcounted, in a hash keyed by kuid or mm pointer); the
 * structure goes away with the last file.  Charges are reservations made
 * with atomic add-and-check before allocating, so a user can never hold
 * more than the limit; two concurrent charges near the limit may both fail
 * where one of them alone would have fit (no error is possible beyond the
 * limit).  A lowered limit applies to the next charge; what is held stays.
 */
#include <linux/atomic.h>
#include <linux/cred.h>
#include <linux/device.h>
#include <linux/hash.h>
#include <linux/hashtable.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/refcount.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>
#include <linux/uidgid.h>
#include <linux/user_namespace.h>

#include "ummunot_priv.h"

struct ummunot_user {
	struct hlist_node node;
	kuid_t uid;
	refcount_t ref;			/* open files of this user */
	atomic_long_t memory;		/* bytes charged */
	atomic_long_t regions;
	atomic_long_t rings;
};

struct ummunot_mm_acct {
	struct hlist_node node;
	const struct mm_struct *mm;	/* identity only, never dereferenced */
	refcount_t ref;			/* open files bound to this mm */
	atomic_long_t regions;
};

#define UMMUNOT_LIMITS_HASH_BITS	6

static DEFINE_HASHTABLE(ummunot_users, UMMUNOT_LIMITS_HASH_BITS);
static DEFINE_HASHTABLE(ummunot_mms, UMMUNOT_LIMITS_HASH_BITS);
static DEFINE_SPINLOCK(ummunot_limits_lock);	/* both tables, refcounts to 0 */

/*
 * Bytes one region costs: its slab object, which also holds its node in the
 * handle index, so nothing else grows with the regions a file holds; plus
 * its share of the slab page's tail that no object fits in (152 bytes, 26
 * to a 4 KiB page: 158 bytes on x86-64).
 */
static unsigned long ummunot_region_bytes;

unsigned long ummunot_region_charge(void)
{
	return ummunot_region_bytes;
}

/*
 * The user a file is charged to.  In the initial user namespace, the
 * opener's real uid.  In a user namespace, the owner of the outermost
 * namespace of the opener's chain (the child of init_user_ns): whoever
 * created it, typically an unprivileged user mapping a range of subordinate
 * uids to the namespace's users.  Charging the real uid there would give
 * that user the limit once per uid of the range.
 *
 * This is what the kernel's ucounts do for inotify (kernel/ucount.c,
 * inc_ucount()): a charge in namespace ns for uid is also made, level by
 * level, in ns->parent for ns->owner, up to init_user_ns, each level
 * against that level's limit.  ucount types cannot be added outside the
 * kernel, and this module has one limit for every level, so the outermost
 * level is the only one that can refuse: a charge that fits there fits at
 * every level below (each holds a subset of it).  A namespace's parent and
 * owner never change, and the opener's cred pins its namespace.
 */
static kuid_t ummunot_charged_uid(const struct cred *cred)
{
	const struct user_namespace *ns = cred->user_ns;

	if (ns == &init_user_ns)
		return cred->uid;
	while (ns->parent != &init_user_ns)
		ns = ns->parent;
	return ns->owner;
}

/* Like epoll's max_user_watches: 4% of memory. */
unsigned long ummunot_max_user_memory_default(void)
{
	return (totalram_pages() / 25) << PAGE_SHIFT;
}

void ummunot_limits_init(unsigned int region_object_size)
{
	unsigned int per_page = max_t(unsigned int,
				      PAGE_SIZE / region_object_size, 1);

	ummunot_region_bytes = max_t(unsigned long, region_object_size,
				     DIV_ROUND_UP(PAGE_SIZE, per_page));
	if (!ummunot_max_user_memory)	/* not set at load time */
		ummunot_max_user_memory = ummunot_max_user_memory_default();
}

struct ummunot_user *ummunot_user_get(void)
{
	kuid_t uid = ummunot_charged_uid(current_cred());
	u32 key = from_kuid_munged(&init_user_ns, uid);
	struct ummunot_user *u, *nu;

	nu = kzalloc(sizeof(*nu), GFP_KERNEL_ACCOUNT);
	if (!nu)
		return NULL;

	spin_lock(&ummunot_limits_lock);
	hash_for_each_possible(ummunot_users, u, node, key) {
		if (uid_eq(u->uid, uid)) {
			refcount_inc(&u->ref);
			spin_unlock(&ummunot_limits_lock);
			kfree(nu);
			return u;
		}
	}
	nu->uid = uid;
	refcount_set(&nu->ref, 1);
	hash_add(ummunot_users, &nu->node, key);
	spin_unlock(&ummunot_limits_lock);
	return nu;
}

void ummunot_user_put(struct ummunot_user *u)
{
	if (!refcount_dec_and_lock(&u->ref, &ummunot_limits_lock))
		return;
	hash_del(&u->node);
	spin_unlock(&ummunot_limits_lock);
	WARN_ON_ONCE(atomic_long_read(&u->memory));
	kfree(u);
}

struct ummunot_mm_acct *ummunot_mm_acct_get(const struct mm_struct *mm)
{
	u32 key = hash_ptr(mm, 32);
	struct ummunot_mm_acct *a, *na;

	na = kzalloc(sizeof(*na), GFP_KERNEL_ACCOUNT);
	if (!na)
		return NULL;

	spin_lock(&ummunot_limits_lock);
	hash_for_each_possible(ummunot_mms, a, node, key) {
		if (a->mm == mm) {
			refcount_inc(&a->ref);
			spin_unlock(&ummunot_limits_lock);
			kfree(na);
			return a;
		}
	}
	na->mm = mm;
	refcount_set(&na->ref, 1);
	hash_add(ummunot_mms, &na->node, key);
	spin_unlock(&ummunot_limits_lock);
	return na;
}

void ummunot_mm_acct_put(struct ummunot_mm_acct *a)
{
	if (!refcount_dec_and_lock(&a->ref, &ummunot_limits_lock))
		return;
	hash_del(&a->node);
	spin_unlock(&ummunot_limits_lock);
	kfree(a);
}

/* Add @n to @v unless the result would exceed @limit. */
static bool ummunot_charge(atomic_long_t *v, unsigned long n,
			   unsigned long limit)
{
	unsigned long now = atomic_long_add_return(n, v);

	if (now > limit || now < n) {
		atomic_long_sub(n, v);
		return false;
	}
	return true;
}

int ummunot_user_charge_ring(struct ummunot_user *u, unsigned long bytes)
{
	if (!ummunot_charge(&u->memory, bytes, READ_ONCE(ummunot_max_user_memory)))
		return -ENOSPC;
	atomic_long_inc(&u->rings);
	return 0;
}

void ummunot_user_uncharge_ring(struct ummunot_user *u, unsigned long bytes)
{
	atomic_long_dec(&u->rings);
	atomic_long_sub(bytes, &u->memory);
}

/* Charge @count regions to the user and to the address space, or neither. */
int ummunot_regions_charge(struct ummunot_user *u, struct ummunot_mm_acct *a,
			   u32 count)
{
	unsigned long bytes;

	/* count * 158 exceeds any limit long before it wraps, but not on 32 bits. */
	if (count > ULONG_MAX / ummunot_region_bytes)
		return -ENOSPC;
	bytes = (unsigned long)count * ummunot_region_bytes;
	if (!ummunot_charge(&a->regions, count,
			    READ_ONCE(ummunot_max_regions_per_mm)))
		return -ENOSPC;
	if (!ummunot_charge(&u->memory, bytes,
			    READ_ONCE(ummunot_max_user_memory))) {
		atomic_long_sub(count, &a->regions);
		return -ENOSPC;
	}
	atomic_long_add(count, &u->regions);
	return 0;
}

void ummunot_regions_uncharge(struct ummunot_user *u, struct ummunot_mm_acct *a,
			      u32 count)
{
	atomic_long_sub(count, &u->regions);
	atomic_long_sub((unsigned long)count * ummunot_region_bytes, &u->memory);
	atomic_long_sub(count, &a->regions);
}

/*
 * /sys/class/misc/ummunot/users (root only): one line per user holding
 * anything, "uid memory_bytes regions rings", after a header line.  One
 * page at most; a last line "..." says that users were left out.
 */
static ssize_t users_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct ummunot_user *u;
	unsigned int bkt;
	int len;

	len = sysfs_emit(buf, "uid memory regions rings\n");
	spin_lock(&ummunot_limits_lock);
	hash_for_each(ummunot_users, bkt, u, node) {
		char line[80];
		int n;

		n = scnprintf(line, sizeof(line), "%u %ld %ld %ld\n",
			      from_kuid_munged(&init_user_ns, u->uid),
			      atomic_long_read(&u->memory),
			      atomic_long_read(&u->regions),
			      atomic_long_read(&u->rings));
		if (len + n > PAGE_SIZE - 5) {
			len += sysfs_emit_at(buf, len, "...\n");
			break;
		}
		len += sysfs_emit_at(buf, len, "%s", line);
	}
	spin_unlock(&ummunot_limits_lock);
	return len;
}
static DEVICE_ATTR_ADMIN_RO(users);

static struct attribute *ummunot_limits_attrs[] = {
	&dev_attr_users.attr,
	NULL,
};

const struct attribute_group ummunot_limits_group = {
	.attrs = ummunot_limits_attrs,
};
