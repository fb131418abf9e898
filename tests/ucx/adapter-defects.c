// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx under what a process may do to it (run preloaded, UCX's
 * hooks off, in the guest with /dev/ummunot unless a mode says otherwise).
 * Each mode is a defect an earlier adapter had; each fails against it.
 *
 *   caches N      N registration caches (default 300), each caching its own
 *                 buffer; every buffer munmap()ed and mapped again at the
 *                 same address; each cache's next get must register again.
 *                 (The adapter tracked 256 caches in a fixed table: cache
 *                 257 on was created unfed and handed out the old
 *                 registration.)
 *   watch-limit   the module's per-file limit set to 8 regions
 *                 (/sys/module/ummunot/parameters/max_regions, restored);
 *                 16 buffers cached: every get must succeed (the adapter
 *                 failed UCX's registration past the limit), and after
 *                 munmap + mmap every buffer must register again (0 stale),
 *                 watched or not.
 *
 * --expect-stale: a negative control, without the adapter, UCX's hooks off
 * and its unmap event declared external (ucm_set_external_event(), so the
 * caches exist, fed by nobody): the check that passes with the adapter must
 * find stale registrations.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "noop-rcache.h"
#include "ummunot-ucx.h"

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); putchar('\n'); exit(1); } while (0)

#include "remap.h"

static int expect_stale;

static int (*stats_fn)(struct ummunot_ucx_stats *, size_t);

static void get_put(ucs_rcache_t *rc, char *p)
{
	ucs_rcache_region_t *r;
	ucs_status_t st = noop_rcache_get(rc, p, page, PROT_READ | PROT_WRITE, NULL, &r);

	if (st != UCS_OK)
		FAIL("ucs_rcache_get(%p) failed: %s", (void *)p, ucs_status_string(st));
	ucs_rcache_region_put(rc, r);
}

/* 0 when every get after the remap registered again; else how many did not. */
static unsigned int verdict(unsigned int before, unsigned int expected, const char *what)
{
	unsigned int got = __atomic_load_n(&noop_rcache_regs, __ATOMIC_RELAXED) - before;
	unsigned int stale = expected > got ? expected - got : 0;

	printf("%s: %u of %u gets after munmap+mmap registered again (%u stale)\n", what, got,
	       expected, stale);
	return stale;
}

static int finish(unsigned int stale)
{
	if (expect_stale) {
		if (!stale)
			FAIL("negative control: no stale registration (the check cannot fail?)");
		printf("PASS (negative control: stale, as expected)\n");
		return 0;
	}
	if (stale)
		FAIL("%u stale registrations", stale);
	printf("PASS\n");
	return 0;
}

static int many_caches(unsigned int n)
{
	ucs_rcache_t **rc = calloc(n, sizeof(*rc));
	char **buf = calloc(n, sizeof(*buf));
	unsigned int i, r0;

	if (!rc || !buf)
		FAIL("out of memory");
	for (i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "cache-%u", i);
		if (noop_rcache_create(name, UCM_EVENT_VM_UNMAPPED, &rc[i]) != UCS_OK)
			FAIL("ucs_rcache_create #%u failed", i);
		buf[i] = map_page(NULL);
		get_put(rc[i], buf[i]);
		get_put(rc[i], buf[i]);		/* a hit */
	}
	if (noop_rcache_regs != n)
		FAIL("%u caches registered %u times (expected %u: each caches)", n,
		     noop_rcache_regs, n);
	for (i = 0; i < n; i++)
		renew(buf[i]);
	r0 = noop_rcache_regs;
	for (i = 0; i < n; i++)
		get_put(rc[i], buf[i]);
	i = verdict(r0, n, "caches");
	if (stats_fn) {
		struct ummunot_ucx_stats st;

		stats_fn(&st, sizeof(st));
		printf("adapter: active %u, rcaches %llu, watched %llu\n", st.active,
		       (unsigned long long)st.rcaches, (unsigned long long)st.watched);
	}
	for (r0 = 0; r0 < n; r0++)
		ucs_rcache_destroy(rc[r0]);
	return finish(i);
}

static const char param[] = "/sys/module/ummunot/parameters/max_regions";
static char saved[32];

static void restore_param(void)
{
	int fd = open(param, O_WRONLY);

	if (fd >= 0) {
		(void)!write(fd, saved, strlen(saved));
		close(fd);
	}
}

static int watch_limit(void)
{
	enum { N = 16 };
	ucs_rcache_t *rc;
	char *buf[N];
	unsigned int i, r0;
	ssize_t len;
	int fd = open(param, O_RDWR);

	if (fd < 0)
		FAIL("%s: %s (needs the module, as root)", param, strerror(errno));
	len = read(fd, saved, sizeof(saved) - 1);
	if (len <= 0)
		FAIL("reading %s", param);
	saved[len] = '\0';
	atexit(restore_param);
	if (pwrite(fd, "8", 1, 0) != 1)
		FAIL("writing 8 to %s: %s", param, strerror(errno));
	close(fd);
	if (noop_rcache_create("limit", UCM_EVENT_VM_UNMAPPED, &rc) != UCS_OK)
		FAIL("ucs_rcache_create failed");
	for (i = 0; i < N; i++) {
		buf[i] = map_page(NULL);
		get_put(rc, buf[i]);
	}
	for (i = 0; i < N; i++)
		renew(buf[i]);
	r0 = noop_rcache_regs;
	for (i = 0; i < N; i++)
		get_put(rc, buf[i]);
	i = verdict(r0, N, "watch-limit");
	if (stats_fn) {
		struct ummunot_ucx_stats st;

		stats_fn(&st, sizeof(st));
		printf("adapter: watched %llu, watch-errors %llu\n",
		       (unsigned long long)st.watched, (unsigned long long)st.watch_errors);
		if (!expect_stale && !st.watch_errors)
			FAIL("the limit was never reached (watch-errors 0): the test tests nothing");
	}
	ucs_rcache_destroy(rc);
	return finish(i);
}

int main(int argc, char **argv)
{
	int i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	page = (size_t)sysconf(_SC_PAGESIZE);
	stats_fn = (int (*)(struct ummunot_ucx_stats *, size_t))dlsym(RTLD_DEFAULT,
								       "ummunot_ucx_stats");
	for (i = 2; i < argc; i++)
		if (!strcmp(argv[i], "--expect-stale"))
			expect_stale = 1;
	if (argc < 2)
		FAIL("usage: adapter-defects caches [N] | watch-limit [--expect-stale]");
	if (!expect_stale && !stats_fn)
		FAIL("libummunot-ucx is not preloaded");
	if (expect_stale) {
		if (stats_fn)
			FAIL("--expect-stale runs without libummunot-ucx");
		ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
	}
	if (!strcmp(argv[1], "caches"))
		return many_caches(argc > 2 && argv[2][0] != '-' ? (unsigned int)atoi(argv[2]) : 300);
	if (!strcmp(argv[1], "watch-limit"))
		return watch_limit();
	FAIL("unknown mode %s", argv[1]);
}
