// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* madvise(MADV_REMOVE) on a shared memfd mapping yields CLEAR. */
#include "helpers.h"

#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct t_file f;
	uint64_t h;
	char *p;
	int mfd;

	t_init(argc, argv);
	t_file_open(&f, 0);

	mfd = memfd_create("ummunot-test", MFD_CLOEXEC);
	if (mfd < 0)
		t_skip("memfd_create: %s", t_errname(errno));
	T_OK("ftruncate", ftruncate(mfd, 4 * t_page));
	p = mmap(NULL, 4 * t_page, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	T_ASSERT(p != MAP_FAILED, "mmap memfd: %s", t_errname(errno));
	t_touch(p, 4 * t_page);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 11);
	T_OK("madvise REMOVE", madvise(p + 2 * t_page, 2 * t_page, MADV_REMOVE));
	t_expect_event(&f, 11, h, (uintptr_t)p + 2 * t_page,
		       (uintptr_t)p + 4 * t_page, UMMUNOT_EVENT_CLEAR);
	munmap(p, 4 * t_page);
	close(mfd);
	t_file_close(&f);
	return T_EXIT_PASS;
}
