// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: per-user and per-address-space limits.
 *
 * Two bounds, both checked when memory is about to be allocated:
 *
 *   max_user_memory      bytes of kernel memory (rings and regions) that the
 *                        files charged to one budget may hold together: a
 *                        user's (real uid of the opener), across all its
 *                        files and processes and the user namespaces it
 *                        created, or a namespace's that global root created
 *                        (a container's).  Like inotify's max_user_watches.
 *   max_regions_per_mm   regions that all files of one address space may
 *                        watch together.  It bounds the work one
 *                        invalidation does in the unmapping thread: at most
 *                        this many notifier callbacks.
 *
 * Each open file holds a reference on its budget's and its mm's accounting
 * structure (small, refcounted, in a hash keyed by kuid, user namespace or
 * mm pointer); the
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
	/*
	 * The budget: a user (ns NULL, uid the user) or a user namespace
	 * that global root created (ns, identity only: every file charged
	 * to it pins it through its f_cred; uid its owner, root).
	 */
	kuid_t uid;
	const struct user_namespace *ns;
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
 * its share of the slab page's tail that no object fits in (104 bytes, 39
 * to a 4 KiB page: 106 bytes on x86-64).
 */
static unsigned long ummunot_region_bytes;

unsigned long ummunot_region_charge(void)
{
	return ummunot_region_bytes;
}

/*
 * The budget a file is charged to, from its opener's credentials.
 *
 * In the initial user namespace: the opener's real uid.
 *
 * In a user namespace: decided by the outermost namespace of the opener's
 * chain (the child of init_user_ns).  If an unprivileged user created it,
 * that user (its owner): such a user typically maps a range of subordinate
 * uids to the namespace's users (newuidmap, /etc/subuid), and charging the
 * real uid there would give the user the limit once per uid of the range.
 * This is what the kernel's ucounts do for inotify (kernel/ucount.c,
 * inc_ucount()): a charge in namespace ns for uid is also made, level by
 * level, in ns->parent for ns->owner, up to init_user_ns, each level
 * against that level's limit; with one limit for every level, the
 * outermost level is the only one that can refuse.
 *
 * If global root created it (a container runtime: rootful podman or LXD
 * with a user namespace, Kubernetes pods with hostUsers: false), that
 * namespace has a budget of its own, shared by everything in it and in the
 * namespaces nested in it: one container cannot use up another's, or host
 * root's.  Only root creates such budgets; a setuid-root program that
 * creates user namespaces for unprivileged users gives each of them one
 * (the memory is still charged to the opener's memory cgroup).
 *
 * A namespace's parent and owner never change, and the opener's cred pins
 * its namespace and, through it, every ancestor.
 */
static void ummunot_budget_of(const struct cred *cred, kuid_t *uid,
			      const struct user_namespace **ns)
{
	const struct user_namespace *n = cred->user_ns;

	*ns = NULL;
	if (n == &init_user_ns) {
		*uid = cred->uid;
		return;
	}
	while (n->parent != &init_user_ns)
		n = n->parent;
	*uid = n->owner;
	if (uid_eq(n->owner, GLOBAL_ROOT_UID))
		*ns = n;
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
	const struct user_namespace *ns;
	struct ummunot_user *u, *nu;
	kuid_t uid;
	u32 key;

	ummunot_budget_of(current_cred(), &uid, &ns);
	key = ns ? hash_ptr(ns, 32) : from_kuid_munged(&init_user_ns, uid);

	nu = kzalloc(sizeof(*nu), GFP_KERNEL_ACCOUNT);
	if (!nu)
		return NULL;

	spin_lock(&ummunot_limits_lock);
	hash_for_each_possible(ummunot_users, u, node, key) {
		if (u->ns == ns && uid_eq(u->uid, uid)) {
			refcount_inc(&u->ref);
			spin_unlock(&ummunot_limits_lock);
			kfree(nu);
			return u;
		}
	}
	nu->uid = uid;
	nu->ns = ns;
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
static __always_inline bool ummunot_charge(atomic_long_t *v, unsigned long n,
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

	/* count * 106 exceeds any limit long before it wraps, but not on 32 bits. */
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
 * /sys/class/misc/ummunot/users (root only): one line per budget holding
 * anything, "uid memory_bytes regions rings userns", after a header line:
 * userns is 0 for a user's budget, the inode number of the namespace (as in
 * /proc/PID/ns/user) for a namespace's, whose uid is its owner's (0).  One
 * page at most; a last line "..." says that budgets were left out.
 */
static ssize_t users_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	struct ummunot_user *u;
	unsigned int bkt;
	int len;

	len = sysfs_emit(buf, "uid memory regions rings userns\n");
	spin_lock(&ummunot_limits_lock);
	hash_for_each(ummunot_users, bkt, u, node) {
		char line[80];
		int n;

		n = scnprintf(line, sizeof(line), "%u %ld %ld %ld %u\n",
			      from_kuid_munged(&init_user_ns, u->uid),
			      atomic_long_read(&u->memory),
			      atomic_long_read(&u->regions),
			      atomic_long_read(&u->rings),
			      u->ns ? u->ns->ns.inum : 0);
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
