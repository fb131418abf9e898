// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* mremap() moves the buffer away, new memory is mapped at the old address: no stale MR. */
#include "verbs-helpers.h"

#include <sys/mman.h>

#define LEN	(256u * 1024)

static void *moved_to;

static void *map(void *at, size_t len, int prot)
{
	void *p = mmap(at, len, prot,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);

	if (p == MAP_FAILED)
		vt_fail("mmap(%p, %zu): %s", at, len, strerror(errno));
	return p;
}

static void *alloc(size_t len)
{
	return map(NULL, len, PROT_READ | PROT_WRITE);
}

static void *reuse(void *a, size_t len)
{
	/* A reserved hole to move into, so the move cannot land on a. */
	void *hole = map(NULL, len, PROT_NONE);
	void *r = mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, hole);

	if (r != hole)
		vt_fail("mremap(%p -> %p): %s", a, hole, strerror(errno));
	moved_to = r;
	return map(a, len, PROT_READ | PROT_WRITE);
}

static void *moved(void)
{
	return moved_to;
}

static void release(void *b, size_t len)
{
	munmap(b, len);
	munmap(moved_to, len);
	moved_to = NULL;
}

int main(int argc, char **argv)
{
	const struct vt_reuse_ops ops = {
		.what = "mremap away + mmap at the old address",
		.len = LEN,
		.alloc = alloc,
		.reuse = reuse,
		.moved = moved,
		.release = release,
		.expect_event = UMMUNOT_EVENT_UNMAP,
	};

	vt_init(argc, argv);
	return vt_reuse_run(&ops);
}
