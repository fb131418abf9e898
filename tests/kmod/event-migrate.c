// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Migrating a watched page (move_pages to another node, else soft-offline) yields CLEAR for that page. */
#include "helpers.h"

#include <dirent.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif
#define MPOL_MF_MOVE (1 << 1)

static int online_nodes(int *nodes, int max)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *de;
	int n = 0, id;

	if (!d)
		return 1;	/* no NUMA support: one node, node 0 */
	while ((de = readdir(d)) && n < max)
		if (sscanf(de->d_name, "node%d", &id) == 1)
			nodes[n++] = id;
	closedir(d);
	return n ? n : 1;
}

static long sys_move_pages(void *page, int node, int *status)
{
	void *pages[1] = { page };
	int nodes[1] = { node };

	return syscall(SYS_move_pages, 0, 1UL, pages, nodes, status, MPOL_MF_MOVE);
}

int main(int argc, char **argv)
{
	int nodes[64], nr, status = -1, cur = -1;
	struct t_file f;
	uint64_t h;
	char *p;
	long ret;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 15);

	/* Where is page 1 now? (nodes == NULL: query only) */
	{
		void *pages[1] = { p + t_page };

		ret = syscall(SYS_move_pages, 0, 1UL, pages, NULL, &cur, 0);
		if (ret && errno == ENOSYS)
			cur = -1;
	}
	nr = online_nodes(nodes, 64);
	for (int i = 0; i < nr && cur >= 0; i++) {
		if (nodes[i] == cur)
			continue;
		ret = sys_move_pages(p + t_page, nodes[i], &status);
		if (ret == 0 && status == nodes[i]) {
			t_log("migrated with move_pages from node %d to node %d", cur, nodes[i]);
			t_expect_event(&f, 15, h, (uintptr_t)p + t_page,
				       (uintptr_t)p + 2 * t_page,
				       UMMUNOT_EVENT_CLEAR);
			goto out;
		}
		t_log("move_pages to node %d: ret %ld status %d (%s)", nodes[i],
		      ret, status, t_errname(errno));
		t_expect_no_event(&f, "failed move_pages");
	}

	/*
	 * One node: move_pages to the same node does not migrate (the kernel
	 * skips pages already there), and mbind(MPOL_MF_MOVE) only moves pages
	 * that violate the policy.  Soft-offline migrates the page to a new
	 * frame on the same node (and retires the old frame).
	 */
	if (cur >= 0) {
		ret = sys_move_pages(p + t_page, cur, &status);
		if (t_pending(&f)) {
			t_log("move_pages to the same node %d migrated the page", cur);
			t_expect_event(&f, 15, h, (uintptr_t)p + t_page,
				       (uintptr_t)p + 2 * t_page,
				       UMMUNOT_EVENT_CLEAR);
			goto out;
		}
	}
	if (madvise(p + t_page, t_page, MADV_SOFT_OFFLINE)) {
		int err = errno;

		t_expect_no_event(&f, "failed MADV_SOFT_OFFLINE");
		t_skip("cannot trigger page migration: %d NUMA node(s), move_pages to the "
		       "same node does not migrate, MADV_SOFT_OFFLINE failed with %s "
		       "(needs CONFIG_MEMORY_FAILURE)", nr, t_errname(err));
	}
	t_expect_event(&f, 15, h, (uintptr_t)p + t_page, (uintptr_t)p + 2 * t_page,
		       UMMUNOT_EVENT_CLEAR);
	t_log("%d NUMA node(s): migrated with MADV_SOFT_OFFLINE", nr);
	T_EQ("page content after soft-offline migration", 1, p[t_page]);
out:
	munmap(p, 4 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
