/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The negative controls' libfabric memory monitor (tests and benchmarks
 * only): every subscribe succeeds and valid() always says yes, so a cache
 * that imports it is never told of any change.  Import it with
 * fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0, &null_monitor.fid,
 * NULL) before the first fi_domain().
 */
#ifndef UMMUNOT_TESTS_OFI_NULL_MONITOR_H
#define UMMUNOT_TESTS_OFI_NULL_MONITOR_H

#include <stdbool.h>
#include <stddef.h>

#include <rdma/fabric.h>
#include <rdma/fi_ext.h>

static int null_start(struct fid_mem_monitor *m) { (void)m; return 0; }
static void null_stop(struct fid_mem_monitor *m) { (void)m; }
static int null_subscribe(struct fid_mem_monitor *m, const void *a, size_t l)
{
	(void)m; (void)a; (void)l;
	return 0;
}
static void null_unsubscribe(struct fid_mem_monitor *m, const void *a, size_t l)
{
	(void)m; (void)a; (void)l;
}
static bool null_valid(struct fid_mem_monitor *m, const void *a, size_t l)
{
	(void)m; (void)a; (void)l;
	return true;
}
static int null_close(struct fid *f) { (void)f; return 0; }

static struct fi_ops_mem_monitor null_ops = {
	.size = sizeof(struct fi_ops_mem_monitor),
	.start = null_start,
	.stop = null_stop,
	.subscribe = null_subscribe,
	.unsubscribe = null_unsubscribe,
	.valid = null_valid,
};
static struct fi_ops null_fid_ops = { .size = sizeof(struct fi_ops), .close = null_close };
static struct fid_mem_monitor null_monitor = {
	.fid = { .fclass = FI_CLASS_MEM_MONITOR, .ops = &null_fid_ops },
	.export_ops = &null_ops,
};

#endif
