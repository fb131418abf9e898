// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * max_user_memory bounds the kernel memory a user really holds, whatever
 * the order of registrations and unregistrations.  "Register 64, unregister
 * 63, repeat" leaves the live regions spread thinly over the handle space;
 * an index whose memory follows the handles rather than the live regions
 * (a 576-byte xarray node per live region) then holds several times what
 * is charged.  The parent measures the slab memory the kernel holds (the
 * Slab line of /proc/meminfo, and radix_tree_node objects in
 * /proc/slabinfo) before and after an unprivileged child fills its budget
 * that way, and compares it with the limit.
 */
#include "helpers.h"

#include <grp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY		65534
#define LIMIT		(2L * 1024 * 1024)	/* bytes */
#define BATCH		64
/* Slab pages are shared and partly used: allow half the limit of slack. */
#define SLACK		(LIMIT / 2)

/* The Slab line of /proc/meminfo, in bytes. */
static long slab_bytes(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		t_fail("open /proc/meminfo: %s", t_errname(errno));
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Slab: %ld kB", &kb) == 1)
			break;
	fclose(f);
	T_ASSERT(kb >= 0, "no Slab line in /proc/meminfo");
	return kb * 1024;
}

/* Active radix_tree_node objects (xarray nodes) and their size. */
static long xa_nodes(long *objsize)
{
	char line[512], name[64];
	long active = -1, total, size;
	FILE *f = fopen("/proc/slabinfo", "r");

	if (!f)
		t_fail("open /proc/slabinfo: %s", t_errname(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %ld %ld %ld", name, &active, &total,
			   &size) == 4 && !strcmp(name, "radix_tree_node")) {
			*objsize = size;
			fclose(f);
			return active;
		}
	}
	fclose(f);
	t_fail("no radix_tree_node line in /proc/slabinfo");
}

/*
 * As nobody: a 64-entry ring, then batches of 64 regions of which all but
 * the last are unregistered again, until the budget is spent.  Reports the
 * number of live regions on @wfd and holds them until @rfd closes.
 */
static void child(int wfd, int rfd)
{
	struct ummunot_region r[BATCH];
	uint64_t h[BATCH - 1];
	uint32_t idx, live = 0;
	struct t_file f;
	char *p;
	int ret;

	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		t_fail("cannot become uid %d: %s", NOBODY, t_errname(errno));
	t_file_open(&f, 64);
	p = t_map_anon(1, false);
	for (;;) {
		for (int i = 0; i < BATCH; i++)
			r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
							.length = t_page,
							.cookie = i };
		ret = t_register_batch(f.fd, r, BATCH, &idx);
		if (ret)
			break;
		for (int i = 0; i < BATCH - 1; i++)
			h[i] = r[i].handle;
		T_EQ("UNREGISTER 63 of 64", 0,
		     t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, h, BATCH - 1,
				    &idx));
		live++;
	}
	T_EQ("REGISTER beyond the user's memory: -errno", -ENOSPC, ret);
	T_ASSERT(live > 100, "only %u live regions fit in %ld bytes", live,
		 LIMIT);
	if (write(wfd, &live, sizeof(live)) != sizeof(live))
		t_fail("write: %s", t_errname(errno));
	(void)read(rfd, &live, sizeof(live));
	_exit(T_EXIT_PASS);
}

int main(int argc, char **argv)
{
	long slab0, slab1, nodes0, nodes1, node_size = 0, real;
	int up[2], down[2], st;
	uint32_t live;
	pid_t pid;

	t_init(argc, argv);
	/*
	 * KASAN's redzones and its quarantine of freed objects (63 of every
	 * 64 regions here) make slab growth no measure of what a region
	 * holds, and the 850,000 calls take minutes there.
	 */
	if (t_debug_kernel())
		t_skip("slab growth is not measurable under KASAN's quarantine");
	t_param_set("max_user_memory", LIMIT);		/* restored at exit */
	if (pipe(up) || pipe(down))
		t_fail("pipe: %s", t_errname(errno));

	nodes0 = xa_nodes(&node_size);
	slab0 = slab_bytes();
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		child(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &live, sizeof(live)) != sizeof(live)) {
		waitpid(pid, &st, 0);
		t_fail("child failed (status 0x%x)", st);
	}
	slab1 = slab_bytes();
	nodes1 = xa_nodes(&node_size);
	real = slab1 - slab0;
	t_log("limit %ld bytes; %u live regions; slab grew by %ld bytes (%ld per region); xarray nodes %+ld (%ld bytes each)",
	      LIMIT, live, real, real / live, nodes1 - nodes0, node_size);
	/* The ring (pages, not slab) is part of the charge: slab must fit. */
	T_ASSERT(real <= LIMIT + SLACK,
		 "the user holds %ld bytes of slab against a limit of %ld (%.1fx)",
		 real, LIMIT, (double)real / LIMIT);

	close(down[1]);
	if (waitpid(pid, &st, 0) != pid)
		t_fail("waitpid: %s", t_errname(errno));
	T_EQ("child status", 0, st);
	return T_EXIT_PASS;
}
