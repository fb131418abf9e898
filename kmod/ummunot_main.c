// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: module entry points, parameters and the misc device.
 *
 * /dev/ummunot lets a process watch ranges of its own address space and
 * learn, through a ring it has mmap()ed, of every invalidation that may
 * change the pages behind them, before the invalidating system call returns.
 * Documentation/design.rst explains why; include/uapi/linux/ummunot.h is the
 * ABI.
 */
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "ummunot_priv.h"

#define UMMUNOT_MODULE_VERSION	"0.3.0"	/* the package's (dkms.conf) */

/* Largest ring a file may ask for: 2^22 entries, 256 MiB. */
#define UMMUNOT_RING_MAX_LIMIT	BIT(22)

unsigned int ummunot_max_regions = 131072;
unsigned int ummunot_max_regions_per_mm = 131072;
unsigned long ummunot_max_user_memory;	/* 0: 4% of RAM, set at load */
unsigned int ummunot_max_ring_entries = 262144;
unsigned int ummunot_default_ring_entries = 4096;

/*
 * The setters parse and range-check themselves rather than calling
 * param_set_uint_minmax(): that one returns kstrtouint()'s ERANGE for a
 * value that overflows the type, and the documented contract
 * (admin-guide.rst) is EINVAL for every out-of-range write.  A refused
 * write leaves the value unchanged.  Readers load the values with
 * READ_ONCE() without any lock, hence WRITE_ONCE() here.
 */
static int ummunot_param_set_uint(const char *val,
				  const struct kernel_param *kp,
				  unsigned int min, unsigned int max)
{
	unsigned int v;

	if (kstrtouint(val, 0, &v) || v < min || v > max)
		return -EINVAL;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static int ummunot_param_set_regions(const char *val,
				     const struct kernel_param *kp)
{
	return ummunot_param_set_uint(val, kp, 1, U32_MAX >> 1);
}

static int ummunot_param_set_ring(const char *val,
				  const struct kernel_param *kp)
{
	return ummunot_param_set_uint(val, kp, UMMUNOT_RING_MIN_ENTRIES,
				      UMMUNOT_RING_MAX_LIMIT);
}

/* 0 selects the default (4% of RAM); at most LONG_MAX (atomic_long_t). */
static int ummunot_param_set_memory(const char *val,
				    const struct kernel_param *kp)
{
	unsigned long v;

	if (kstrtoul(val, 0, &v) || v > LONG_MAX)
		return -EINVAL;
	if (!v)
		v = ummunot_max_user_memory_default();
	WRITE_ONCE(*(unsigned long *)kp->arg, v);
	return 0;
}

static const struct kernel_param_ops ummunot_memory_ops = {
	.set = ummunot_param_set_memory,
	.get = param_get_ulong,
};

static const struct kernel_param_ops ummunot_regions_ops = {
	.set = ummunot_param_set_regions,
	.get = param_get_uint,
};

static const struct kernel_param_ops ummunot_ring_ops = {
	.set = ummunot_param_set_ring,
	.get = param_get_uint,
};

module_param_cb(max_regions, &ummunot_regions_ops, &ummunot_max_regions, 0644);
MODULE_PARM_DESC(max_regions,
		 "Most regions one open file may watch, fixed at its handshake (default 131072)");
module_param_cb(max_regions_per_mm, &ummunot_regions_ops,
		&ummunot_max_regions_per_mm, 0644);
MODULE_PARM_DESC(max_regions_per_mm,
		 "Most regions all files of one address space may watch together; bounds the callbacks one invalidation makes (default 131072)");
module_param_cb(max_user_memory, &ummunot_memory_ops,
		&ummunot_max_user_memory, 0644);
MODULE_PARM_DESC(max_user_memory,
		 "Bytes of kernel memory (rings and regions) the files of one user may hold together; 0 selects 4% of RAM (the default)");
module_param_cb(max_ring_entries, &ummunot_ring_ops, &ummunot_max_ring_entries, 0644);
MODULE_PARM_DESC(max_ring_entries,
		 "Largest ring, in 64-byte entries, a handshake may ask for (default 262144, at most 4194304)");
module_param_cb(default_ring_entries, &ummunot_ring_ops,
		&ummunot_default_ring_entries, 0644);
MODULE_PARM_DESC(default_ring_entries,
		 "Ring size, in entries, when the handshake asks for 0 (default 4096)");

static struct miscdevice ummunot_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= UMMUNOT_DEVICE_NAME,
	.fops	= &ummunot_fops,
	.mode	= 0666,
	.groups	= ummunot_attr_groups,
};

static int __init ummunot_init(void)
{
	int ret;

	ret = ummunot_region_cache_init();
	if (ret)
		return ret;
	ret = misc_register(&ummunot_misc);
	if (ret) {
		ummunot_region_cache_exit();
		return ret;
	}
	pr_info("ummunot: version %s, ABI %d\n", UMMUNOT_MODULE_VERSION,
		UMMUNOT_ABI_VERSION);
	return 0;
}

static void __exit ummunot_exit(void)
{
	misc_deregister(&ummunot_misc);
	/* Every file is closed (each held a module reference). */
	mmu_notifier_synchronize();
	ummunot_region_cache_exit();
}

module_init(ummunot_init);
module_exit(ummunot_exit);

MODULE_LICENSE("GPL");
MODULE_VERSION(UMMUNOT_MODULE_VERSION);
MODULE_DESCRIPTION("Notify userspace of invalidations of watched virtual ranges");
MODULE_AUTHOR("The ummunot authors");
