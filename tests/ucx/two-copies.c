// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Two whole UCX stacks in one process (fake UCX, tests/ucx/fake-ucs.c and
 * fake-ucp.c), as a process has them when an MPI library uses the system's
 * UCX and a plugin or a Python wheel brings its own under another soname:
 * copy 1 is DIR1 (libucs.so.0, loaded RTLD_GLOBAL), copy 2 is DIR2 (its
 * libucs renamed, loaded RTLD_LOCAL; tests/ucx/two-copies.sh makes it).
 * Each libucp creates a cache and looks a buffer up through its own PLT,
 * as UCP does.  Every call a copy makes must reach that copy: its own
 * lookup counter moves, the other's does not.  (The adapter that looked
 * UCX up by the name libucs.so.0 sent copy 2's calls into copy 1.)
 *
 * With /dev/ummunot (--device): copy 1 is fed (active; after munmap + mmap
 * its cache registers again), copy 2 is passed through (passed-through 1),
 * and the adapter's line about it is checked by the script.
 *
 * Usage: two-copies DIR1 DIR2 host|device
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake-driver.h"
#include "ummunot-ucx.h"

struct copy {
	const char *dir;
	void *h;
	int (*create)(const void *, struct ucx_rcache **);
	int (*get)(struct ucx_rcache *, void *, size_t, struct ucx_pgt_region **);
	void (*destroy)(struct ucx_rcache *);
	unsigned long (*lookups)(void);	/* that libucs's own, dlsym'd from it */
	struct ucx_rcache *rc;
};

static unsigned int regs;

static ucx_status_t count_reg(void *ctx, struct ucx_rcache *rc, void *arg,
			      struct ucx_pgt_region *r, uint16_t flags)
{
	(void)ctx; (void)rc; (void)arg; (void)r; (void)flags;
	regs++;
	return UCX_OK;
}

static const struct ucx_ops_118 count_ops = { count_reg, fake_dereg, fake_merge, fake_dump };

static void open_copy(struct copy *c, const char *dir, int global)
{
	char path[PATH_MAX];

	c->dir = dir;
	snprintf(path, sizeof(path), "%s/libucp.so.0", dir);
	c->h = dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
	if (!c->h)
		FAIL("dlopen %s: %s", path, dlerror());
	*(void **)&c->create = dlsym(c->h, "ucp_fake_create");
	*(void **)&c->get = dlsym(c->h, "ucp_fake_get");
	*(void **)&c->destroy = dlsym(c->h, "ucp_fake_destroy");
	*(void **)&c->lookups = dlsym(c->h, "fake_ucs_lookups");
	if (!c->create || !c->get || !c->destroy || !c->lookups)
		FAIL("the fake UCX at %s is incomplete", dir);
}

/* Two gets of @buf in @c's cache: both must be looked up in @c's own
 * libucs, none in @other's. */
static void use(struct copy *c, const struct copy *other, char *buf, size_t len)
{
	unsigned long mine = c->lookups(), theirs = other->lookups();
	struct ucx_pgt_region *r1, *r2;
	struct ucx_params_117 p;

	fake_params(&p);
	p.ops = &count_ops;
	if (c->create(&p, &c->rc) != UCX_OK)
		FAIL("%s: ucs_rcache_create failed", c->dir);
	if (c->get(c->rc, buf, len, &r1) != UCX_OK || c->get(c->rc, buf, len, &r2) != UCX_OK)
		FAIL("%s: ucs_rcache_get failed", c->dir);
	printf("%s: lookups in its own libucs +%lu, in the other copy's +%lu\n", c->dir,
	       c->lookups() - mine, other->lookups() - theirs);
	if (c->lookups() - mine < 2)
		FAIL("%s: its lookups did not reach its own libucs", c->dir);
	if (other->lookups() != theirs)
		FAIL("%s: its calls reached the other UCX copy (%s)", c->dir, other->dir);
	if (r1 != r2)
		FAIL("%s: the second get of an unchanged buffer was not a hit", c->dir);
}

int main(int argc, char **argv)
{
	int (*stats_fn)(struct ummunot_ucx_stats *, size_t);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct ummunot_ucx_stats st;
	struct ucx_pgt_region *r;
	struct copy c1, c2;
	unsigned int before;
	int device;
	char *buf;

	if (argc != 4 || (strcmp(argv[3], "host") && strcmp(argv[3], "device")))
		FAIL("usage: two-copies DIR1 DIR2 host|device");
	device = !strcmp(argv[3], "device");
	*(void **)&stats_fn = dlsym(RTLD_DEFAULT, "ummunot_ucx_stats");
	if (!stats_fn)
		FAIL("libummunot-ucx is not preloaded");
	memset(&c1, 0, sizeof(c1));
	memset(&c2, 0, sizeof(c2));
	open_copy(&c1, argv[1], 1);
	open_copy(&c2, argv[2], 0);
	if (c1.lookups == c2.lookups)
		FAIL("%s and %s are one libucs, not two copies", argv[1], argv[2]);
	buf = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		FAIL("mmap: %s", strerror(errno));
	memset(buf, 1, page);
	use(&c1, &c2, buf, page);
	use(&c2, &c1, buf, page);
	if (stats_fn(&st, sizeof(st)) < 0)
		FAIL("ummunot_ucx_stats");
	printf("adapter: active %u, refused %u, passed-through %llu, rcaches %llu\n", st.active,
	       st.refused, (unsigned long long)st.passed_through,
	       (unsigned long long)st.rcaches);
	if (device) {
		if (!st.active || st.rcaches != 1 || st.passed_through != 1)
			FAIL("expected copy 1 fed (one cache wrapped) and copy 2 passed through");
		/* Copy 1 is fed: a new mapping at the address registers again. */
		if (munmap(buf, page) ||
		    mmap(buf, page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != buf)
			FAIL("munmap + mmap: %s", strerror(errno));
		before = regs;
		if (c1.get(c1.rc, buf, page, &r) != UCX_OK)
			FAIL("%s: ucs_rcache_get failed", c1.dir);
		if (regs == before)
			FAIL("stale: copy 1's cache handed out its old region after munmap + mmap");
		printf("%s: fed, registered again after munmap + mmap\n", c1.dir);
	} else if (st.active || st.rcaches) {
		FAIL("without /dev/ummunot the adapter must stay passive");
	}
	c1.destroy(c1.rc);
	c2.destroy(c2.rc);
	printf("PASS\n");
	return 0;
}
