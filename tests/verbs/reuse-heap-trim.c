// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* malloc_trim(0) gives a freed heap chunk's pages back; malloc reuses the chunk: no stale MR. */
#include "verbs-helpers.h"

#include <malloc.h>

#define LEN	(1u << 20)

static void *guard;

static void *alloc(size_t len)
{
	void *a = malloc(len);

	/* From the top chunk (nothing free is that big yet): keeps a away
	 * from the top, so free(a) puts a in a bin instead of shrinking the heap. */
	guard = malloc(64 * 1024);
	return a;
}

static void *reuse(void *a, size_t len)
{
	free(a);
	/* Returns the free chunk's whole pages with MADV_DONTNEED. */
	malloc_trim(0);
	return malloc(len);
}

static void release(void *b, size_t len)
{
	(void)len;
	free(b);
	free(guard);
	guard = NULL;
}

int main(int argc, char **argv)
{
	const struct vt_reuse_ops ops = {
		.what = "free + malloc_trim(0) + malloc (heap)",
		.len = LEN,
		.alloc = alloc,
		.reuse = reuse,
		.release = release,
		.expect_event = UMMUNOT_EVENT_CLEAR,
	};

	vt_init(argc, argv);
	/*
	 * The buffer comes from the heap (threshold above its size), and free()
	 * never trims by itself: only malloc_trim(0) gives pages back.
	 */
	if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 1 << 30) ||
	    !mallopt(M_TOP_PAD, 0))
		vt_fail("mallopt failed");
	return vt_reuse_run(&ops);
}
