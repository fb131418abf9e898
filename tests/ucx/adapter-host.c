// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host test of libummunot-ucx (run preloaded by meson test): the adapter
 * resolves UCX's functions, wraps a UCX registration cache, and its
 * statistics agree with whether /dev/ummunot can be opened here.  Without
 * the device (the usual host) it must stay passive: UCX's own cache (with
 * UCX's hooks, the defaults) works unchanged, the adapter says why on
 * stderr once, and nothing aborts.  With the device, it must be active
 * and watch the cached region.
 *
 * --expect-refused: the adapter's version gate must have refused (run with
 * tests/ucx/fake-ucp-version.c preloaded after it, which makes
 * ucp_get_version() say 1.99): active 0, refused 1, version 1.99 seen, no
 * cache wrapped, with or without the device; UCX's own hooks keep the
 * cache correct.
 *
 * --fork (needs the device): after that, fork(); the child (libummunot's
 * -ECHILD contract: the parent's monitor is dead there) must get a monitor
 * of its own and have everything UCX cached invalidated, and then see its
 * own unmaps; the parent must carry on as before.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "noop-rcache.h"
#include "ummunot-ucx.h"

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); putchar('\n'); exit(1); } while (0)

/* munmap + mmap at the same address, then one get: returns the registrations after. */
static char *renew(ucs_rcache_t *rc, char *buf, size_t len, int fill)
{
	ucs_rcache_region_t *r;

	if (munmap(buf, len))
		FAIL("munmap: %s", strerror(errno));
	buf = mmap(buf, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap at the same address: %s", strerror(errno));
	memset(buf, fill, len);
	if (noop_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
		FAIL("ucs_rcache_get after munmap failed");
	ucs_rcache_region_put(rc, r);
	return buf;
}

static void fork_check(int (*stats_fn)(struct ummunot_ucx_stats *, size_t),
		       ucs_rcache_t *rc, char *buf, size_t len)
{
	struct ummunot_ucx_stats before, st;
	ucs_rcache_region_t *r;
	unsigned int r0 = noop_rcache_regs;
	int status;
	pid_t pid;

	stats_fn(&before, sizeof(before));
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		/* The child's first get: everything was invalidated. */
		if (noop_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
			FAIL("child: ucs_rcache_get failed");
		ucs_rcache_region_put(rc, r);
		if (noop_rcache_regs != r0 + 1)
			FAIL("child: the parent's cached range was not invalidated (%u registrations, expected %u)",
			     noop_rcache_regs, r0 + 1);
		buf = renew(rc, buf, len, 3);
		if (noop_rcache_regs != r0 + 2)
			FAIL("child: its own munmap was not seen (%u registrations, expected %u)", noop_rcache_regs, r0 + 2);
		stats_fn(&st, sizeof(st));
		printf("child: forks %llu, blind %u, invalidate-all %llu, events %llu (parent had %llu)\n",
		       (unsigned long long)st.forks, st.blind, (unsigned long long)st.invalidate_all,
		       (unsigned long long)st.events, (unsigned long long)before.events);
		if (st.forks != 1 || st.blind || st.invalidate_all < 1 || st.events <= before.events)
			FAIL("child: expected 1 fork, a monitor of its own, one invalidate-all and new events");
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		FAIL("the child failed (status %#x)", status);
	renew(rc, buf, len, 4);
	stats_fn(&st, sizeof(st));
	if (noop_rcache_regs != r0 + 1 || st.forks || st.events <= before.events)
		FAIL("parent after fork: %u registrations (expected %u), forks %llu, events %llu -> %llu",
		     noop_rcache_regs, r0 + 1, (unsigned long long)st.forks, (unsigned long long)before.events,
		     (unsigned long long)st.events);
	printf("fork: child and parent both correct\n");
}

int main(int argc, char **argv)
{
	int want_fork = argc > 1 && !strcmp(argv[1], "--fork");
	int want_refused = argc > 1 && !strcmp(argv[1], "--expect-refused");
	int (*stats_fn)(struct ummunot_ucx_stats *, size_t);
	struct ummunot_ucx_stats st;
	const size_t len = 1 << 20;
	ucs_rcache_region_t *r;
	ucs_rcache_t *rc;
	unsigned int i;
	int fd, device;
	char *buf;

	stats_fn = (int (*)(struct ummunot_ucx_stats *, size_t))dlsym(RTLD_DEFAULT, "ummunot_ucx_stats");
	if (!stats_fn)
		FAIL("libummunot-ucx is not preloaded");
	if (stats_fn(NULL, 0) != -EINVAL)
		FAIL("ummunot_ucx_stats(NULL) did not return -EINVAL");
	fd = open("/dev/ummunot", O_RDWR | O_CLOEXEC);
	device = fd >= 0;
	if (fd >= 0)
		close(fd);
	if (want_refused)
		printf("/dev/ummunot %s; expecting the adapter to refuse UCX 1.99\n",
		       device ? "opens" : "does not open");
	else
		printf("/dev/ummunot %s\n", device ? "opens: expecting the adapter active" :
		       "does not open: expecting the adapter passive");

	buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memset(buf, 1, len);
	if (noop_rcache_create("adapter-host", UCM_EVENT_VM_UNMAPPED, &rc) != UCS_OK)
		FAIL("ucs_rcache_create failed");
	for (i = 0; i < 3; i++) {
		if (noop_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
			FAIL("ucs_rcache_get failed");
		ucs_rcache_region_put(rc, r);
	}
	if (noop_rcache_regs != 1)
		FAIL("3 gets of one range registered %u times (expected 1: the cache works)", noop_rcache_regs);
	/* The range changes: whoever feeds UCX (its hooks, or the adapter)
	 * makes the next get register again. */
	if (munmap(buf, len))
		FAIL("munmap: %s", strerror(errno));
	buf = mmap(buf, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap at the same address: %s", strerror(errno));
	memset(buf, 2, len);
	if (noop_rcache_get(rc, buf, len, PROT_READ | PROT_WRITE, NULL, &r) != UCS_OK)
		FAIL("ucs_rcache_get after munmap failed");
	ucs_rcache_region_put(rc, r);
	if (noop_rcache_regs != 2)
		FAIL("the get after munmap+mmap registered %u times in all (expected 2)", noop_rcache_regs);
	if (want_fork) {
		if (!device)
			FAIL("--fork needs /dev/ummunot");
		fork_check(stats_fn, rc, buf, len);
	}
	ucs_rcache_destroy(rc);
	munmap(buf, len);

	if (stats_fn(&st, sizeof(st)) != (int)sizeof(st))
		FAIL("ummunot_ucx_stats returned the wrong size");
	printf("active %u, rcaches %llu, watched %llu, unwatched %llu, events %llu\n",
	       st.active, (unsigned long long)st.rcaches, (unsigned long long)st.watched,
	       (unsigned long long)st.unwatched, (unsigned long long)st.events);
	printf("refused %u, ucx %u.%u\n", st.refused, st.ucx_version >> 16, st.ucx_version & 0xffff);
	if (want_refused) {
		if (st.active || !st.refused || st.ucx_version != (1u << 16 | 99) || st.rcaches ||
		    st.watched)
			FAIL("the adapter should have refused UCX 1.99 (active 0, refused 1, nothing wrapped)");
		printf("PASS\n");
		return 0;
	}
	if (want_fork && (st.active != 1 || st.watched != st.unwatched))
		FAIL("parent: watched and unwatched differ after destroy");
	if (st.refused)
		FAIL("the adapter refused this UCX (see its line on stderr)");
	if (device && !want_fork && (st.active != 1 || st.rcaches != 1 || st.watched != 2 ||
				     st.unwatched != 2 || st.events < 1))
		FAIL("the adapter should have been active (1 rcache, 2 watched and unwatched, events)");
	if (!device && (st.active || st.rcaches || st.watched))
		FAIL("the adapter should have stayed passive without /dev/ummunot");
	printf("PASS\n");
	return 0;
}
