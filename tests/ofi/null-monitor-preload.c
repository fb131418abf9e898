// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libnull-monitor-preload.so (tests only, never installed): the negative
 * control for unmodified programs.  Preloaded, its constructor imports into
 * libfabric a memory monitor that is never told anything: every subscribe
 * succeeds and valid() always says yes.  libfabric's MR cache then runs
 * with every source of invalidations off (its own memhooks/userfaultfd
 * monitors are not used; Open MPI's must be kept out with
 * --mca memory ^patcher), which is what the tests must see fail.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include "null-monitor.h"

__attribute__((constructor)) static void null_monitor_preload(void)
{
	int r = fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0, &null_monitor.fid, NULL);

	if (r)
		fprintf(stderr, "null-monitor-preload[%d]: fi_import failed: %s\n",
			(int)getpid(), fi_strerror(-r));
	else if (getenv("NULL_MONITOR_VERBOSE"))
		fprintf(stderr, "null-monitor-preload[%d]: active\n", (int)getpid());
}
