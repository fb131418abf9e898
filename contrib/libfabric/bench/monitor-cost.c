// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * monitor-cost: what each of libfabric's memory monitors costs the program,
 * measured on one verbs domain (rxe0 in the guest), one child process per
 * monitor (FI_MR_CACHE_MONITOR=NAME, set before libfabric is first used).
 *
 *   hit        fi_mr_reg() + fi_close() of the same 64 KiB buffer: a cache
 *              search that hits and the monitor's valid(); best of 5 runs
 *              of --iters, ns per hit
 *   munmap     with N one-page registrations cached (N = 100, 1000,
 *              10000), the time of one munmap() of a page the cache does
 *              not hold ("other") and of one page it holds ("cached"), as
 *              the unmapping thread sees it; median of 200 of each
 *
 * Built against a libfabric with the ummunot monitor (scripts/ofi-matrix
 * builds it into each prefix); run by contrib/libfabric/bench/monitors.
 * Prints one JSON object per monitor.
 * Usage: monitor-cost [--iters N] MONITOR...
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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

#define PG 4096UL
#define SAMPLES 200

static const unsigned long sizes[] = { 100, 1000, 10000 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	return v[n / 2];
}

static void die(const char *what, int r)
{
	fprintf(stderr, "monitor-cost: %s: %s\n", what, fi_strerror(-r));
	exit(1);
}

static struct fid_domain *open_domain(struct fid_fabric **fabric, struct fi_info **info)
{
	struct fi_info *hints = fi_allocinfo();
	struct fid_domain *domain;
	int r;

	if (!hints)
		die("fi_allocinfo", -FI_ENOMEM);
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("verbs");
	r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, info);
	if (r)
		die("fi_getinfo(verbs)", r);
	r = fi_fabric((*info)->fabric_attr, fabric, NULL);
	if (r)
		die("fi_fabric", r);
	r = fi_domain(*fabric, *info, &domain, NULL);
	if (r)
		die("fi_domain", r);
	fi_freeinfo(hints);
	return domain;
}

static void reg_close(struct fid_domain *domain, void *buf, size_t len)
{
	struct fid_mr *mr;
	int r = fi_mr_reg(domain, buf, len, FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL);

	if (r)
		die("fi_mr_reg", r);
	fi_close(&mr->fid);
}

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("monitor-cost: mmap");
		exit(1);
	}
	memset(p, 1, len);
	return p;
}

static double hit_ns(struct fid_domain *domain, long iters)
{
	size_t len = 64 << 10;
	void *buf = map(len);
	double best = 1e30;

	reg_close(domain, buf, len);
	for (int round = 0; round < 5; round++) {
		double t0 = now();

		for (long i = 0; i < iters; i++)
			reg_close(domain, buf, len);
		double ns = (now() - t0) * 1e9 / iters;

		if (ns < best)
			best = ns;
	}
	munmap(buf, len);
	return best;
}

/* With n pages cached: median munmap() of an uncached and of a cached page. */
static void munmap_ns(struct fid_domain *domain, unsigned long n, double *other, double *cached)
{
	/* Cached pages two apart, so that no two entries merge. */
	char *area = map(2 * n * PG);
	double t[SAMPLES];
	int k = n < SAMPLES ? (int)n : SAMPLES;

	for (unsigned long i = 0; i < n; i++)
		reg_close(domain, area + 2 * i * PG, PG);
	for (int s = 0; s < SAMPLES; s++) {
		void *p = map(PG);
		double t0 = now();

		munmap(p, PG);
		t[s] = now() - t0;
	}
	*other = median(t, SAMPLES) * 1e9;
	/* Spread over the cached range, last first. */
	for (int s = 0; s < k; s++) {
		char *p = area + 2 * ((n - 1 - (unsigned long)s * (n / k)) * PG);
		double t0 = now();

		munmap(p, PG);
		t[s] = now() - t0;
	}
	*cached = median(t, k) * 1e9;
	munmap(area, 2 * n * PG);
}

static void measure(const char *mon, long iters)
{
	struct fid_fabric *fabric;
	struct fi_info *info;
	struct fid_domain *domain;
	double other[NSIZES], cached[NSIZES];

	setenv("FI_MR_CACHE_MONITOR", mon, 1);
	/* Room for every page of the largest N. */
	setenv("FI_MR_CACHE_MAX_COUNT", "100000", 1);
	setenv("FI_MR_CACHE_MAX_SIZE", "4294967296", 1);
	domain = open_domain(&fabric, &info);

	double hit = hit_ns(domain, iters);

	for (unsigned int i = 0; i < NSIZES; i++) {
		/* A fresh domain (and cache) per N. */
		fi_close(&domain->fid);
		domain = open_domain(&fabric, &info);
		munmap_ns(domain, sizes[i], &other[i], &cached[i]);
	}
	printf("{\"monitor\": \"%s\", \"hit_ns\": %.1f, \"munmap_ns\": {", mon, hit);
	for (unsigned int i = 0; i < NSIZES; i++)
		printf("%s\"%lu\": {\"other\": %.0f, \"cached\": %.0f}", i ? ", " : "", sizes[i],
		       other[i], cached[i]);
	printf("}}\n");
	fflush(stdout);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	long iters = 100000;
	int i = 1, rc = 0;

	if (i + 1 < argc && !strcmp(argv[i], "--iters")) {
		iters = strtol(argv[i + 1], NULL, 0);
		i += 2;
	}
	if (i >= argc || iters <= 0) {
		fprintf(stderr, "usage: monitor-cost [--iters N] MONITOR...\n");
		return 2;
	}
	for (; i < argc; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			measure(argv[i], iters);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "monitor-cost: %s failed\n", argv[i]);
			rc = 1;
		}
	}
	return rc;
}
