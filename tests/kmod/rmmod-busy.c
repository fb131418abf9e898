// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* rmmod fails while a file (or its ring mapping) is alive and succeeds after release; insmod brings the device back. */
#include "helpers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

static void expect_busy(const char *what)
{
	int ret = t_module_remove();

	if (ret == 0)
		t_fail("%s: rmmod succeeded while the module is in use", what);
	if (ret != -EAGAIN && ret != -EBUSY)
		t_fail("%s: rmmod: expected EAGAIN/EBUSY (in use), got %s", what,
		       t_errname(-ret));
	T_ASSERT(t_module_loaded(), "%s: module gone after a failed rmmod", what);
}

static void remove_and_insert(const char *what)
{
	int ret = t_module_remove();

	if (ret)
		t_fail("%s: rmmod after release: %s (refcnt %ld)", what,
		       t_errname(-ret), t_module_refcnt());
	T_ASSERT(!t_module_loaded(), "%s: /sys/module/ummunot still there after rmmod", what);
	ret = t_module_insert();
	if (ret)
		t_fail("%s: insmod %s: %s", what, getenv("UMMUNOT_KO"), t_errname(-ret));
}

int main(int argc, char **argv)
{
	struct t_file f;
	char *p;
	int fd;

	t_init(argc, argv);
	t_module_ensure_loaded_at_exit();	/* insmod again on every exit path */
	close(t_dev_open());
	if (t_module_refcnt() != 0)
		t_skip("module in use by someone else (refcnt %ld): cannot test rmmod",
		       t_module_refcnt());

	/* 1: an open file without handshake. */
	fd = t_dev_open();
	expect_busy("open file");
	close(fd);
	remove_and_insert("after close");

	/* 2: a file with regions, events and a mapped ring. */
	t_file_open(&f, 0);
	p = t_map_anon(8, true);
	t_register(&f, (uintptr_t)p, 8 * t_page, 1);
	t_register(&f, (uintptr_t)p + t_page, t_page, 2);
	T_OK("munmap", munmap(p, 4 * t_page));
	T_EQ("events", 2, t_pending(&f));
	expect_busy("file with regions");
	/* fd closed, ring still mapped: still in use */
	close(f.fd);
	f.fd = -1;
	expect_busy("ring mapped after close(fd)");
	munmap(f.map, f.map_size);
	f.map = NULL;
	/* the watched ranges die after the file: nothing must fire into freed memory */
	munmap(p, 8 * t_page);
	remove_and_insert("after munmap of the ring");

	/* 3: the reloaded module works. */
	t_file_open(&f, 0);
	p = t_map_anon(2, true);
	{
		uint64_t h = t_register(&f, (uintptr_t)p, 2 * t_page, 3);

		T_OK("munmap", munmap(p, 2 * t_page));
		t_expect_event(&f, 3, h, (uintptr_t)p, (uintptr_t)p + 2 * t_page,
			       UMMUNOT_EVENT_UNMAP);
	}
	t_file_close(&f);

	/* 4: rmmod right after a file with armed regions is closed. */
	t_file_open(&f, 0);
	p = t_map_anon(64, true);
	for (int i = 0; i < 64; i++)
		t_register(&f, (uintptr_t)p + i * t_page, t_page, i);
	t_file_close(&f);
	remove_and_insert("right after closing a file with armed regions");
	munmap(p, 64 * t_page);

	T_ASSERT(access(UMMUNOT_DEV, F_OK) == 0, "%s missing after insmod", UMMUNOT_DEV);
	return T_EXIT_PASS;
}
