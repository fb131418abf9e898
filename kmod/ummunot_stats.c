// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: what the administrator sees.
 *
 *   /sys/class/misc/ummunot/stats/    one value per file, whole system:
 *                                     live clients plus everything closed
 *                                     files contributed before closing
 *   /proc/PID/fdinfo/FD               one open file: its counters and the
 *                                     consumer's user area (the library's
 *                                     own counters), readable by whoever
 *                                     may read that process's fdinfo
 *
 * Module version and parameters are in /sys/module/ummunot/ as usual.
 * Nothing here is on a hot path: sums are taken when a file is read.
 */
#include <linux/device.h>
#include <linux/kernel.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/sysfs.h>

#include "ummunot_priv.h"

static const char *const ummunot_type_names[UMMUNOT_EVENT_TYPE_MAX] = {
	[UMMUNOT_EVENT_UNMAP]		= "unmap",
	[UMMUNOT_EVENT_CLEAR]		= "clear",
	[UMMUNOT_EVENT_PROTECTION_VMA]	= "protection_vma",
	[UMMUNOT_EVENT_PROTECTION_PAGE]	= "protection_page",
	[UMMUNOT_EVENT_SOFT_DIRTY]	= "soft_dirty",
	[UMMUNOT_EVENT_RELEASE]		= "release",
	[UMMUNOT_EVENT_MIGRATE]		= "migrate",
	[UMMUNOT_EVENT_EXCLUSIVE]	= "exclusive",
	[UMMUNOT_EVENT_OTHER]		= "other",
};

struct ummunot_totals {
	u64 clients;
	u64 regions;
	u64 regions_registered;
	u64 events;
	u64 dropped;
	u64 overflows;
	u64 ring_high_water;
	u64 delivered[UMMUNOT_EVENT_TYPE_MAX];
	u64 filtered[UMMUNOT_EVENT_TYPE_MAX];
};

/* Every open file, and what closed files left behind. */
static LIST_HEAD(ummunot_clients);
static DEFINE_MUTEX(ummunot_clients_lock);
static struct ummunot_totals ummunot_retired;

/* Add ctx's cumulative counters into @t.  Caller holds ummunot_clients_lock. */
static void ummunot_totals_add(struct ummunot_totals *t, struct ummunot_ctx *ctx)
{
	/* pairs with HELLO's release of ctx->ring */
	struct ummunot_ring *ring = smp_load_acquire(&ctx->ring);
	unsigned int i;

	spin_lock(&ctx->event_lock);
	t->regions_registered += ctx->regions_registered;
	t->events += ctx->events;
	t->overflows += ctx->overflows;
	if (ring) {
		t->dropped += ring->dropped;
		t->ring_high_water = max(t->ring_high_water, ring->high_water);
	}
	for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++) {
		t->delivered[i] += ctx->delivered[i];
		t->filtered[i] += ctx->filtered[i];
	}
	spin_unlock(&ctx->event_lock);
}

void ummunot_client_add(struct ummunot_ctx *ctx)
{
	mutex_lock(&ummunot_clients_lock);
	list_add_tail(&ctx->node, &ummunot_clients);
	mutex_unlock(&ummunot_clients_lock);
}

/* Called from release once no ioctl or callback can run on ctx any more. */
void ummunot_client_del(struct ummunot_ctx *ctx)
{
	mutex_lock(&ummunot_clients_lock);
	list_del(&ctx->node);
	ummunot_totals_add(&ummunot_retired, ctx);
	mutex_unlock(&ummunot_clients_lock);
}

static void ummunot_totals_get(struct ummunot_totals *t)
{
	struct ummunot_ctx *ctx;

	mutex_lock(&ummunot_clients_lock);
	*t = ummunot_retired;
	t->clients = 0;
	t->regions = 0;
	list_for_each_entry(ctx, &ummunot_clients, node) {
		t->clients++;
		t->regions += READ_ONCE(ctx->nr_regions);
		ummunot_totals_add(t, ctx);
	}
	mutex_unlock(&ummunot_clients_lock);
}

#define UMMUNOT_TOTAL_ATTR(field)						\
static ssize_t field##_show(struct device *dev,					\
			    struct device_attribute *attr, char *buf)		\
{										\
	struct ummunot_totals t;						\
										\
	ummunot_totals_get(&t);							\
	return sysfs_emit(buf, "%llu\n", t.field);				\
}										\
static DEVICE_ATTR_RO(field)

UMMUNOT_TOTAL_ATTR(clients);
UMMUNOT_TOTAL_ATTR(regions);
UMMUNOT_TOTAL_ATTR(regions_registered);
UMMUNOT_TOTAL_ATTR(events);
UMMUNOT_TOTAL_ATTR(dropped);
UMMUNOT_TOTAL_ATTR(overflows);
UMMUNOT_TOTAL_ATTR(ring_high_water);

/* Per event type: delivered_<type> and filtered_<type>. */
struct ummunot_type_attr {
	struct device_attribute attr;
	u32 type;
	bool filtered;
};

static ssize_t ummunot_type_show(struct device *dev,
				 struct device_attribute *attr, char *buf)
{
	struct ummunot_type_attr *ta =
		container_of(attr, struct ummunot_type_attr, attr);
	struct ummunot_totals t;

	ummunot_totals_get(&t);
	return sysfs_emit(buf, "%llu\n", ta->filtered ? t.filtered[ta->type] :
						       t.delivered[ta->type]);
}

#define UMMUNOT_TYPE_ATTR(kind, name, t, f)					\
static struct ummunot_type_attr ummunot_attr_##kind##_##name = {		\
	.attr = __ATTR(kind##_##name, 0444, ummunot_type_show, NULL),		\
	.type = t,								\
	.filtered = f,								\
}
UMMUNOT_TYPE_ATTR(delivered, unmap, UMMUNOT_EVENT_UNMAP, false);
UMMUNOT_TYPE_ATTR(filtered, unmap, UMMUNOT_EVENT_UNMAP, true);
UMMUNOT_TYPE_ATTR(delivered, clear, UMMUNOT_EVENT_CLEAR, false);
UMMUNOT_TYPE_ATTR(filtered, clear, UMMUNOT_EVENT_CLEAR, true);
UMMUNOT_TYPE_ATTR(delivered, protection_vma, UMMUNOT_EVENT_PROTECTION_VMA, false);
UMMUNOT_TYPE_ATTR(filtered, protection_vma, UMMUNOT_EVENT_PROTECTION_VMA, true);
UMMUNOT_TYPE_ATTR(delivered, protection_page, UMMUNOT_EVENT_PROTECTION_PAGE, false);
UMMUNOT_TYPE_ATTR(filtered, protection_page, UMMUNOT_EVENT_PROTECTION_PAGE, true);
UMMUNOT_TYPE_ATTR(delivered, soft_dirty, UMMUNOT_EVENT_SOFT_DIRTY, false);
UMMUNOT_TYPE_ATTR(filtered, soft_dirty, UMMUNOT_EVENT_SOFT_DIRTY, true);
UMMUNOT_TYPE_ATTR(delivered, release, UMMUNOT_EVENT_RELEASE, false);
UMMUNOT_TYPE_ATTR(filtered, release, UMMUNOT_EVENT_RELEASE, true);
UMMUNOT_TYPE_ATTR(delivered, migrate, UMMUNOT_EVENT_MIGRATE, false);
UMMUNOT_TYPE_ATTR(filtered, migrate, UMMUNOT_EVENT_MIGRATE, true);
UMMUNOT_TYPE_ATTR(delivered, exclusive, UMMUNOT_EVENT_EXCLUSIVE, false);
UMMUNOT_TYPE_ATTR(filtered, exclusive, UMMUNOT_EVENT_EXCLUSIVE, true);
UMMUNOT_TYPE_ATTR(delivered, other, UMMUNOT_EVENT_OTHER, false);
UMMUNOT_TYPE_ATTR(filtered, other, UMMUNOT_EVENT_OTHER, true);

static struct attribute *ummunot_stats_attrs[] = {
	&dev_attr_clients.attr,
	&dev_attr_regions.attr,
	&dev_attr_regions_registered.attr,
	&dev_attr_events.attr,
	&dev_attr_dropped.attr,
	&dev_attr_overflows.attr,
	&dev_attr_ring_high_water.attr,
	&ummunot_attr_delivered_unmap.attr.attr,
	&ummunot_attr_filtered_unmap.attr.attr,
	&ummunot_attr_delivered_clear.attr.attr,
	&ummunot_attr_filtered_clear.attr.attr,
	&ummunot_attr_delivered_protection_vma.attr.attr,
	&ummunot_attr_filtered_protection_vma.attr.attr,
	&ummunot_attr_delivered_protection_page.attr.attr,
	&ummunot_attr_filtered_protection_page.attr.attr,
	&ummunot_attr_delivered_soft_dirty.attr.attr,
	&ummunot_attr_filtered_soft_dirty.attr.attr,
	&ummunot_attr_delivered_release.attr.attr,
	&ummunot_attr_filtered_release.attr.attr,
	&ummunot_attr_delivered_migrate.attr.attr,
	&ummunot_attr_filtered_migrate.attr.attr,
	&ummunot_attr_delivered_exclusive.attr.attr,
	&ummunot_attr_filtered_exclusive.attr.attr,
	&ummunot_attr_delivered_other.attr.attr,
	&ummunot_attr_filtered_other.attr.attr,
	NULL,
};

static const struct attribute_group ummunot_stats_group = {
	.name = "stats",
	.attrs = ummunot_stats_attrs,
};

const struct attribute_group *ummunot_attr_groups[] = {
	&ummunot_stats_group,
	&ummunot_limits_group,
	NULL,
};

static void ummunot_fdinfo_types(struct seq_file *m, const char *label,
				 const u64 *counts)
{
	unsigned int i;

	seq_printf(m, "%s:", label);
	for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		if (ummunot_type_names[i])
			seq_printf(m, " %s=%llu", ummunot_type_names[i], counts[i]);
	seq_putc(m, '\n');
}

/*
 * The user area is consumer-written memory: the length is decided once, so
 * a concurrent writer can change what is shown but not how much.
 */
static void ummunot_fdinfo_user_area(struct seq_file *m,
				     struct ummunot_ring *ring)
{
	const u64 *words = (const u64 *)((const char *)ring->hdr +
					 UMMUNOT_RING_USER_AREA_OFFSET);
	unsigned int i, used = 0;

	for (i = 0; i < UMMUNOT_RING_USER_AREA_SIZE / sizeof(u64); i++)
		if (READ_ONCE(words[i]))
			used = i + 1;

	seq_puts(m, "user_area:");
	for (i = 0; i < used; i++)
		seq_printf(m, " %016llx", READ_ONCE(words[i]));
	seq_putc(m, '\n');
}

void ummunot_show_fdinfo(struct seq_file *m, struct file *file)
{
	struct ummunot_ctx *ctx = file->private_data;
	/* pairs with HELLO's release of ctx->ring */
	struct ummunot_ring *ring = smp_load_acquire(&ctx->ring);
	u64 delivered[UMMUNOT_EVENT_TYPE_MAX], filtered[UMMUNOT_EVENT_TYPE_MAX];
	u64 regions, registered, armed, events, overflows, mask;
	u64 prod = 0, cons = 0, dropped = 0, high = 0;
	bool overflow = false;

	/*
	 * Never ctx->lock: a REGISTER may hold it across user memory access
	 * (a stalled userfaultfd page).  One event_lock section gives a
	 * consistent view: regions_armed <= regions.
	 */
	spin_lock(&ctx->event_lock);
	regions = ctx->nr_regions;
	registered = ctx->regions_registered;
	armed = ctx->nr_armed;
	events = ctx->events;
	overflows = ctx->overflows;
	mask = ctx->event_mask;
	memcpy(delivered, ctx->delivered, sizeof(delivered));
	memcpy(filtered, ctx->filtered, sizeof(filtered));
	if (ring) {
		prod = ring->prod;
		cons = READ_ONCE(ring->hdr->consumer);
		dropped = ring->dropped;
		high = ring->high_water;
		overflow = ring->overflow;
	}
	spin_unlock(&ctx->event_lock);

	seq_printf(m, "ummunot_abi: %d\n", UMMUNOT_ABI_VERSION);
	seq_printf(m, "owner_pid: %d\n", ctx->tgid);
	seq_printf(m, "owner_comm: %s\n", ctx->comm);
	seq_printf(m, "regions: %llu\n", regions);
	seq_printf(m, "regions_armed: %llu\n", armed);
	seq_printf(m, "regions_registered: %llu\n", registered);
	seq_printf(m, "ring_entries: %u\n", ring ? ring->nr_entries : 0);
	/* cons is the consumer's word: clamp what it can make us print. */
	seq_printf(m, "ring_pending: %llu\n",
		   ring ? min_t(u64, prod - cons, ring->nr_entries) : 0);
	seq_printf(m, "ring_high_water: %llu\n", high);
	seq_printf(m, "events: %llu\n", events);
	seq_printf(m, "dropped: %llu\n", dropped);
	seq_printf(m, "overflows: %llu\n", overflows);
	seq_printf(m, "overflow: %d\n", overflow);
	seq_printf(m, "event_mask: 0x%llx\n", mask);
	ummunot_fdinfo_types(m, "delivered", delivered);
	ummunot_fdinfo_types(m, "filtered", filtered);
	if (ring)
		ummunot_fdinfo_user_area(m, ring);
}
