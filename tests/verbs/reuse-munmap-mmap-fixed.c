// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* munmap() + mmap(MAP_FIXED) at the same address: the cache registers the new pages. */
#include "verbs-helpers.h"

#include <sys/mman.h>

#define LEN	(256u * 1024)

static void *map(void *at, size_t len)
{
	void *p = mmap(at, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);

	if (p == MAP_FAILED)
		vt_fail("mmap(%p, %zu): %s", at, len, strerror(errno));
	return p;
}

static void *alloc(size_t len)
{
	return map(NULL, len);
}

static void *reuse(void *a, size_t len)
{
	if (munmap(a, len))
		vt_fail("munmap: %s", strerror(errno));
	return map(a, len);
}

static void release(void *b, size_t len)
{
	munmap(b, len);
}

int main(int argc, char **argv)
{
	const struct vt_reuse_ops ops = {
		.what = "munmap + mmap(MAP_FIXED)",
		.len = LEN,
		.alloc = alloc,
		.reuse = reuse,
		.release = release,
		.expect_event = UMMUNOT_EVENT_UNMAP,
	};

	vt_init(argc, argv);
	return vt_reuse_run(&ops);
}
