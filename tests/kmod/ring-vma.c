// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ring mapping can be neither inherited nor lost: madvise(MADV_DOFORK)
 * fails with EINVAL, a forked child does not have it, and after
 * madvise(MADV_DONTNEED) the same ring is mapped again on the next access
 * (it used to SIGBUS) and keeps receiving events.  A same-size mremap
 * (move) and a read-only mprotect are allowed; growing, MREMAP_DONTUNMAP,
 * PROT_EXEC, reading it through /proc/self/mem and userfaultfd are refused.
 */
#include "helpers.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned char vec;
	struct t_file f;
	uint64_t h;
	pid_t pid;
	char *p;
	int st;

	t_init(argc, argv);
	t_file_open(&f, 0);
	p = t_map_anon(1, true);

	T_ERRNO("madvise(ring, MADV_DOFORK)", EINVAL,
		madvise(f.map, f.map_size, MADV_DOFORK));
	T_ERRNO("madvise(ring, MADV_WIPEONFORK)", EINVAL,
		madvise(f.map, f.map_size, MADV_WIPEONFORK));

	pid = fork();
	if (pid == 0) {
		/* Not mapped in the child: mincore says ENOMEM. */
		if (mincore(f.map, t_page, &vec) == 0 || errno != ENOMEM)
			_exit(1);
		_exit(0);
	}
	T_ASSERT(waitpid(pid, &st, 0) == pid, "waitpid");
	T_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "the forked child has the ring mapped (status 0x%x)", st);

	/* Something in the ring, then zap every page of the mapping. */
	h = t_register(&f, (uintptr_t)p, t_page, 5);
	T_OK("madvise(MADV_DONTNEED) of the region", madvise(p, t_page, MADV_DONTNEED));
	T_OK("madvise(ring, MADV_DONTNEED)",
	     madvise(f.map, f.map_size, MADV_DONTNEED));
	/* The same pages come back (a SIGBUS here fails the test). */
	T_EQ("magic after MADV_DONTNEED", UMMUNOT_RING_MAGIC, f.hdr->magic);
	t_expect_event(&f, 5, h, (uintptr_t)p, (uintptr_t)p + t_page,
		       UMMUNOT_EVENT_CLEAR);
	t_rearm(&f, h);
	T_OK("madvise(MADV_DONTNEED) of the region", madvise(p, t_page, MADV_DONTNEED));
	t_expect_event(&f, 5, h, (uintptr_t)p, (uintptr_t)p + t_page,
		       UMMUNOT_EVENT_CLEAR);

	/* Moving it (same size) is allowed; it is the same ring. */
	{
		void *m = mremap(f.map, f.map_size, f.map_size, MREMAP_MAYMOVE);
		void *n;

		T_ASSERT(m != MAP_FAILED, "mremap same size: %s", t_errname(errno));
		n = mmap(NULL, f.map_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		T_ASSERT(n != MAP_FAILED, "mmap");
		m = mremap(m, f.map_size, f.map_size, MREMAP_MAYMOVE | MREMAP_FIXED, n);
		T_ASSERT(m == n, "mremap to a fixed address: %s", t_errname(errno));
		f.map = m;
		f.hdr = m;
		f.ring = (struct ummunot_event *)((char *)m + f.hello.header_size);
		t_rearm(&f, h);
		T_OK("madvise(MADV_DONTNEED) of the region", madvise(p, t_page, MADV_DONTNEED));
		t_expect_event(&f, 5, h, (uintptr_t)p, (uintptr_t)p + t_page,
			       UMMUNOT_EVENT_CLEAR);
	}

	T_ERRNO("mremap grow", EFAULT,
		(long)mremap(f.map, f.map_size, f.map_size + t_page, MREMAP_MAYMOVE));
	T_ERRNO("mremap MREMAP_DONTUNMAP", EINVAL,
		(long)mremap(f.map, f.map_size, f.map_size,
			     MREMAP_MAYMOVE | MREMAP_DONTUNMAP));
	T_ERRNO("mprotect PROT_EXEC", EACCES,
		mprotect(f.map, f.map_size, PROT_READ | PROT_EXEC));
	{
		uint32_t magic;
		int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);

		T_ASSERT(fd >= 0, "open /proc/self/mem: %s", t_errname(errno));
		T_ERRNO("pread /proc/self/mem at the ring", EIO,
			pread(fd, &magic, sizeof(magic), (off_t)(uintptr_t)f.map));
		close(fd);
	}

	{
		struct uffdio_api api = { .api = UFFD_API };
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)f.map, .len = f.map_size },
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};
		int uffd = syscall(SYS_userfaultfd, O_CLOEXEC);

		if (uffd >= 0 && ioctl(uffd, UFFDIO_API, &api) == 0)
			T_ERRNO("UFFDIO_REGISTER of the ring", EINVAL,
				ioctl(uffd, UFFDIO_REGISTER, &reg));
		if (uffd >= 0)
			close(uffd);
	}

	/* Read-only is the caller's business (it can no longer consume). */
	T_OK("mprotect(ring, PROT_READ)", mprotect(f.map, f.map_size, PROT_READ));
	T_EQ("magic, read-only", UMMUNOT_RING_MAGIC, f.hdr->magic);

	t_file_close(&f);
	return T_EXIT_PASS;
}
