// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Bad ring mmaps fail: before HELLO (EBADFD), wrong size or offset, MAP_PRIVATE (EINVAL), PROT_EXEC (EPERM). */
#include "helpers.h"

#include <sys/mman.h>
#include <unistd.h>

#define RW (PROT_READ | PROT_WRITE)

int main(int argc, char **argv)
{
	struct ummunot_hello h;
	uint64_t size, off;
	void *m;
	int fd, ret;

	t_init(argc, argv);
	fd = t_dev_open();
	T_ERRNO("mmap before HELLO", EBADFD,
		(long)mmap(NULL, 2 * t_page, RW, MAP_SHARED, fd, 0));
	ret = t_hello(fd, &h, 0);
	T_ASSERT(ret == 0, "HELLO: %s", t_errname(-ret));
	size = h.ring_mmap_size;
	off = h.ring_mmap_offset;

	T_ERRNO("mmap one page short", EINVAL,
		(long)mmap(NULL, size - t_page, RW, MAP_SHARED, fd, off));
	T_ERRNO("mmap one page long", EINVAL,
		(long)mmap(NULL, size + t_page, RW, MAP_SHARED, fd, off));
	T_ERRNO("mmap one page", EINVAL,
		(long)mmap(NULL, t_page, RW, MAP_SHARED, fd, off));
	T_ERRNO("mmap offset + 1 page", EINVAL,
		(long)mmap(NULL, size, RW, MAP_SHARED, fd, off + t_page));
	T_ERRNO("mmap offset + 1 MiB", EINVAL,
		(long)mmap(NULL, size, RW, MAP_SHARED, fd, off + (1 << 20)));
	if (off != 0)
		T_ERRNO("mmap offset 0", EINVAL,
			(long)mmap(NULL, size, RW, MAP_SHARED, fd, 0));
	T_ERRNO("mmap MAP_PRIVATE", EINVAL,
		(long)mmap(NULL, size, RW, MAP_PRIVATE, fd, off));
	T_ERRNO("mmap PROT_EXEC", EPERM,
		(long)mmap(NULL, size, RW | PROT_EXEC, MAP_SHARED, fd, off));

	/* The right one works after all the wrong ones. */
	m = mmap(NULL, size, RW, MAP_SHARED, fd, off);
	T_ASSERT(m != MAP_FAILED, "mmap with the HELLO arguments: %s", t_errname(errno));
	T_EQ("magic", UMMUNOT_RING_MAGIC, ((struct ummunot_ring_header *)m)->magic);
	/* Making it executable later must not work either (informational if it does). */
	if (mprotect(m, size, PROT_READ | PROT_EXEC) == 0)
		t_fail("mprotect(PROT_EXEC) of the ring succeeded: VM_MAYEXEC not cleared");
	/* Growing it must not work. */
	{
		void *g = mremap(m, size, size + t_page, MREMAP_MAYMOVE);

		if (g != MAP_FAILED)
			t_fail("mremap grew the ring mapping to %llu bytes",
			       (unsigned long long)(size + t_page));
	}
	munmap(m, size);
	close(fd);
	return T_EXIT_PASS;
}
