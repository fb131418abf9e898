// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vm-ofi-valid: what libummunot-ofi adds to a libfabric MR cache hit.
 *
 * fi_mr_reg() + fi_close() of the same buffer on a verbs domain (rxe0 in
 * the VM) is a cache search that hits, valid() of the monitor, and a
 * release.  Timed with three monitors, each in a child process (libfabric
 * has one import slot per process):
 *   none     a monitor whose valid() returns true at once (the floor)
 *   ummunot  libummunot-ofi (nothing changed: one generation load)
 *   default  libfabric's own (1.17's default monitor)
 * Prints JSON: ns per hit for each, and ummunot - none, the adapter's cost
 * per hit.  Usage: vm-ofi-valid [--quick]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include <ummunot/ofi.h>

#include "null-monitor.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* In a child: returns ns per hit, or a negative value on error. */
static double measure(const char *mode, long iters)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_mr *mr;
	size_t len = 64 << 10;
	void *buf;
	int r;

	if (!strcmp(mode, "none"))
		r = fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0, &null_monitor.fid, NULL);
	else if (!strcmp(mode, "ummunot"))
		r = ummunot_ofi_import(0);
	else
		r = 0;
	if (r) {
		fprintf(stderr, "vm-ofi-valid: %s: import failed: %d\n", mode, r);
		return -1;
	}
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("verbs");
	if ((r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info)) ||
	    (r = fi_fabric(info->fabric_attr, &fabric, NULL)) ||
	    (r = fi_domain(fabric, info, &domain, NULL))) {
		fprintf(stderr, "vm-ofi-valid: %s: %s\n", mode, fi_strerror(-r));
		return -1;
	}
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return -1;
	memset(buf, 1, len);

	double best = 1e30;

	for (int round = 0; round < 5; round++) {
		double t0 = now();

		for (long i = 0; i < iters; i++) {
			r = fi_mr_reg(domain, buf, len, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL);
			if (r) {
				fprintf(stderr, "vm-ofi-valid: fi_mr_reg: %s\n", fi_strerror(-r));
				return -1;
			}
			fi_close(&mr->fid);
		}
		double ns = (now() - t0) * 1e9 / iters;

		if (ns < best)
			best = ns;
	}
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	return best;
}

int main(int argc, char **argv)
{
	static const char *const modes[] = { "none", "ummunot", "default" };
	long iters = argc > 1 && !strcmp(argv[1], "--quick") ? 20000 : 200000;
	double ns[3];

	for (int m = 0; m < 3; m++) {
		int fd[2];

		if (pipe(fd))
			return 1;
		pid_t pid = fork();

		if (pid == 0) {
			double v = measure(modes[m], iters);

			if (write(fd[1], &v, sizeof(v)) != sizeof(v))
				_exit(1);
			_exit(v < 0);
		}
		close(fd[1]);
		if (read(fd[0], &ns[m], sizeof(ns[m])) != sizeof(ns[m]))
			ns[m] = -1;
		close(fd[0]);
		waitpid(pid, NULL, 0);
		if (ns[m] < 0) {
			fprintf(stderr, "vm-ofi-valid: %s failed\n", modes[m]);
			return 1;
		}
		fprintf(stderr, "vm-ofi-valid: %s: %.1f ns per hit (best of 5 x %ld)\n",
			modes[m], ns[m], iters);
	}
	printf("{\"benchmark\": \"ofi-valid\", \"iters\": %ld, \"ns_per_hit\": "
	       "{\"none\": %.2f, \"ummunot\": %.2f, \"default\": %.2f}, "
	       "\"ummunot_added_ns\": %.2f}\n",
	       iters, ns[0], ns[1], ns[2], ns[1] - ns[0]);
	return 0;
}
