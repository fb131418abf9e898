// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* libummunot's cache counters reach ummunot-stat through the ring's user area and fdinfo, with no help from the process. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#define PAGES	8

static int noop_reg(void *ctx, void *addr, size_t length, int access,
		    void **mr, uint32_t *lkey, uint32_t *rkey)
{
	(void)ctx; (void)length; (void)access;
	*mr = addr;
	*lkey = 1;
	*rkey = 2;
	return 0;
}

static int noop_dereg(void *ctx, void *mr)
{
	(void)ctx; (void)mr;
	return 0;
}

static void fail(const char *what, const char *out)
{
	fprintf(stderr, "FAIL stat-library: %s\n%s%s", what, out ? "ummunot-stat said:\n" : "",
		out ? out : "");
	exit(1);
}

/* The JSON must contain "key":value exactly (the tool prints no spaces). */
static void expect(const char *json, const char *key, unsigned long long want)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "\"%s\":%llu", key, want);
	if (!strstr(json, needle)) {
		char msg[128];

		snprintf(msg, sizeof(msg), "expected %s in the library counters", needle);
		fail(msg, json);
	}
}

int main(void)
{
	static const struct ummunot_backend_ops ops = { noop_reg, noop_dereg };
	struct ummunot_cache_stats st;
	const struct ummunot_reg *reg;
	struct ummunot_cache *cache;
	static char out[65536];
	char cmd[512];
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n;
	char *p;
	FILE *f;
	int r;

	r = ummunot_cache_create_backend(&ops, NULL, NULL, &cache);
	if (r)
		fail(strerror(-r), NULL);
	/* Guard pages between the watched pages, so nothing merges. */
	p = mmap(NULL, 2 * PAGES * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap", NULL);
	for (int round = 0; round < 2; round++)		/* 8 misses, then 8 hits */
		for (int i = 0; i < PAGES; i++) {
			r = ummunot_cache_get(cache, p + 2 * i * page, page, 0, &reg);
			if (r)
				fail(strerror(-r), NULL);
			ummunot_cache_put(cache, reg);
		}
	munmap(p, page);			/* one UNMAP invalidation */
	if (ummunot_cache_poll(cache) < 0 || ummunot_cache_stats(cache, &st))
		fail("poll/stats", NULL);
	if (st.hits != PAGES || st.misses != PAGES || st.invalidations[UMMUNOT_EVENT_UNMAP] != 1)
		fail("the library's own counters are not 8 hits, 8 misses, 1 unmap", NULL);

	snprintf(cmd, sizeof(cmd), "%s -p %d --json 2>&1", UMMUNOT_STAT_PATH, (int)getpid());
	f = popen(cmd, "r");
	if (!f)
		fail("popen", NULL);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	r = pclose(f);
	if (r != 0)
		fail("ummunot-stat -p self --json did not exit 0", out);
	expect(out, "hits", PAGES);
	expect(out, "misses", PAGES);
	expect(out, "unmap", 1);
	expect(out, "entries", PAGES - 1);
	printf("stat-library: ummunot-stat read 8 hits, 8 misses, 1 unmap, 7 entries from the user area\n");
	ummunot_cache_destroy(cache);
	return 0;
}
