// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* free() + malloc() at the same address: a get after the reuse never hands out the old MR. */
#include "verbs-helpers.h"

#include <malloc.h>

#define LEN	(1u << 20)

static void *alloc(size_t len)
{
	return malloc(len);
}

static void *reuse(void *a, size_t len)
{
	/* The chunk is mmap'd (fixed threshold): free() returns it to the kernel. */
	free(a);
	return malloc(len);
}

static void release(void *b, size_t len)
{
	(void)len;
	free(b);
}

int main(int argc, char **argv)
{
	const struct vt_reuse_ops ops = {
		.what = "free + malloc",
		.len = LEN,
		.alloc = alloc,
		.reuse = reuse,
		.release = release,
		.expect_event = UMMUNOT_EVENT_UNMAP,
	};

	vt_init(argc, argv);
	/*
	 * Setting the threshold switches glibc's dynamic threshold off: every
	 * request of 128 KiB and more is its own mmap'd chunk, munmap'd by free(),
	 * and the next same-sized malloc() gets the same hole back.
	 */
	if (!mallopt(M_MMAP_THRESHOLD, 128 * 1024))
		vt_fail("mallopt(M_MMAP_THRESHOLD) failed");
	return vt_reuse_run(&ops);
}
