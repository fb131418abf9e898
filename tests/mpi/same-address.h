/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * New memory at the address of old memory, the ways the stale-buffer checks
 * (tests/mpi/stale-buffer and tests/ofi/ofi-reuse) give pages back to the
 * kernel through the mmap family.  The allocator's way (free/malloc) differs
 * between the two and stays in each.  The includer defines
 * die(const char *fmt, ...), which does not return.
 */
#ifndef UMMUNOT_TESTS_SAME_ADDRESS_H
#define UMMUNOT_TESTS_SAME_ADDRESS_H

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The order is the checks' option order; RE_ALLOC is the includer's. */
enum reuse { RE_MUNMAP, RE_FIXED, RE_MREMAP, RE_DONTNEED, RE_ALLOC, RE_SYSCALL,
	     RE_SYSCALL_MREMAP };

static inline void *map_at(void *at, size_t len, int flags)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);

	if (p == MAP_FAILED)
		die("mmap(%p, %zu): %s", at, len, strerror(errno));
	return p;
}

/*
 * Give the pages of [old, old + len) back and map new ones there by @how
 * (any but RE_ALLOC).  mremap moves the old pages to *@moved (unmapped on
 * the next call: the caller unmaps the last one).  Returns where the new
 * memory is; the caller checks that it is @old.
 */
static inline void *renew_mapping(enum reuse how, void *old, size_t len,
				  void **moved)
{
	void *hole;
	long r;

	switch (how) {
	case RE_MUNMAP:
		if (munmap(old, len))
			die("munmap: %s", strerror(errno));
		return map_at(old, len, 0);
	case RE_FIXED:
		return map_at(old, len, MAP_FIXED);
	case RE_MREMAP:
		if (*moved && munmap(*moved, len))
			die("munmap: %s", strerror(errno));
		/* A reserved hole to move into, so the move cannot land on old. */
		hole = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (hole == MAP_FAILED)
			die("mmap(PROT_NONE): %s", strerror(errno));
		*moved = mremap(old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
		if (*moved != hole)
			die("mremap(%p -> %p): %s", old, hole, strerror(errno));
		return map_at(old, len, MAP_FIXED);
	case RE_DONTNEED:
		if (madvise(old, len, MADV_DONTNEED))
			die("madvise(MADV_DONTNEED): %s", strerror(errno));
		return old;
	case RE_SYSCALL:
		/* No libc function: no hook on munmap/mmap sees these. */
		r = syscall(SYS_munmap, old, len);
		if (r)
			die("syscall(SYS_munmap): %s", strerror(errno));
		r = syscall(SYS_mmap, old, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r == -1)
			die("syscall(SYS_mmap): %s", strerror(errno));
		return (void *)r;
	case RE_SYSCALL_MREMAP:
		/* mremap(MREMAP_FIXED) and mmap(MAP_FIXED) by raw syscalls. */
		if (*moved && syscall(SYS_munmap, *moved, len))
			die("syscall(SYS_munmap): %s", strerror(errno));
		r = syscall(SYS_mmap, NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (r == -1)
			die("syscall(SYS_mmap, PROT_NONE): %s", strerror(errno));
		hole = (void *)r;
		r = syscall(SYS_mremap, old, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
		if ((void *)r != hole)
			die("syscall(SYS_mremap, %p -> %p): %s", old, hole, strerror(errno));
		*moved = hole;
		r = syscall(SYS_mmap, old, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (r == -1)
			die("syscall(SYS_mmap, MAP_FIXED): %s", strerror(errno));
		return (void *)r;
	case RE_ALLOC:
		break;
	}
	die("renew_mapping: way %d is not an mmap-family one", (int)how);
}

#endif
