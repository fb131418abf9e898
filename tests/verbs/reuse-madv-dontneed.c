// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* madvise(MADV_DONTNEED): the pinned pages leave the mapping; the cache re-registers. */
#include "verbs-helpers.h"

#include <sys/mman.h>

#define LEN	(256u * 1024)

static void *alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		vt_fail("mmap(%zu): %s", len, strerror(errno));
	return p;
}

static void *reuse(void *a, size_t len)
{
	/* Same mapping; the next touch faults in new zero pages. */
	if (madvise(a, len, MADV_DONTNEED))
		vt_fail("madvise(MADV_DONTNEED): %s", strerror(errno));
	return a;
}

static void release(void *b, size_t len)
{
	munmap(b, len);
}

int main(int argc, char **argv)
{
	const struct vt_reuse_ops ops = {
		.what = "madvise(MADV_DONTNEED)",
		.len = LEN,
		.alloc = alloc,
		.reuse = reuse,
		.release = release,
		.expect_event = UMMUNOT_EVENT_CLEAR,
	};

	vt_init(argc, argv);
	return vt_reuse_run(&ops);
}
