// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Writing 4 to /proc/self/clear_refs yields SOFT_DIRTY: filtered and counted by default, delivered with MASK_ALL. */
#include "helpers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static int clear_refs_fd = -1;

/* The write itself is the trigger: nothing else between it and the check. */
static int clear_soft_dirty(void)
{
	if (clear_refs_fd < 0) {
		clear_refs_fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
		if (clear_refs_fd < 0)
			return -errno;
	}
	return write(clear_refs_fd, "4", 1) == 1 ? 0 : -errno;
}

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h;
	char *p;
	int ret;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(4, true);
	clear_refs_fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
	if (clear_refs_fd < 0 && errno == ENOENT)
		t_skip("/proc/self/clear_refs missing (CONFIG_PROC_PAGE_MONITOR=n)");
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 14);
	ret = clear_soft_dirty();
	if (ret)
		t_fail("write 4 > /proc/self/clear_refs: %s", t_errname(-ret));
	t_expect_no_event(&f, "clear_refs 4 with the default filter");
	t_get_stats(&f, &st);
	T_ASSERT(st.filtered[UMMUNOT_EVENT_SOFT_DIRTY] >= 1,
		 "stats.filtered[SOFT_DIRTY]: expected >= 1, got %llu",
		 (unsigned long long)st.filtered[UMMUNOT_EVENT_SOFT_DIRTY]);
	T_EQ("stats.regions_armed", 1, st.regions_armed);

	t_set_filter(&f, UMMUNOT_EVENT_MASK_ALL);
	t_touch(p, 4 * t_page);
	ret = clear_soft_dirty();
	T_ASSERT(ret == 0, "clear_refs: %s", t_errname(-ret));
	/* The kernel invalidates the whole address space: clipped to the region. */
	t_expect_event(&f, 14, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_SOFT_DIRTY);

	munmap(p, 4 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
