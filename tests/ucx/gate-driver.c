// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx's gate against a fake UCX (tests/ucx/fake-ucs.c) loaded
 * from DIR: the program creates a registration cache through the global
 * ucs_rcache_create (the preloaded adapter's), as UCT does, and checks what
 * the adapter made of that UCX.
 *
 * Usage: gate-driver DIR accepted|refused
 *   accepted  the gate passed the copy (not refused, nothing passed through)
 *   refused   the gate passed it through: refused 1, passed-through 1
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-driver.h"
#include "ummunot-ucx.h"


int main(int argc, char **argv)
{
	ucx_status_t (*create)(const struct ucx_params_117 *, const char *, void *,
			       struct ucx_rcache **);
	void (*destroy)(struct ucx_rcache *);
	int (*stats_fn)(struct ummunot_ucx_stats *, size_t);
	struct ummunot_ucx_stats st;
	struct ucx_params_117 p;
	struct ucx_rcache *rc;
	char path[PATH_MAX];
	int want_refused;

	if (argc != 3)
		FAIL("usage: gate-driver DIR accepted|refused");
	want_refused = !strcmp(argv[2], "refused");
	snprintf(path, sizeof(path), "%s/libucp.so.0", argv[1]);
	if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL))
		FAIL("dlopen %s: %s", path, dlerror());
	*(void **)&create = dlsym(RTLD_DEFAULT, "ucs_rcache_create");
	*(void **)&destroy = dlsym(RTLD_DEFAULT, "ucs_rcache_destroy");
	*(void **)&stats_fn = dlsym(RTLD_DEFAULT, "ummunot_ucx_stats");
	if (!create || !destroy || !stats_fn)
		FAIL("libummunot-ucx is not preloaded, or the fake UCX is incomplete");
	fake_params(&p);
	if (create(&p, "gate", NULL, &rc) != UCX_OK)
		FAIL("ucs_rcache_create failed");
	destroy(rc);
	stats_fn(&st, sizeof(st));
	printf("adapter: active %u, refused %u, passed-through %llu, ucx %u.%u\n", st.active,
	       st.refused, (unsigned long long)st.passed_through, st.ucx_version >> 16,
	       st.ucx_version & 0xffff);
	if (st.ucx_version != (1u << 16 | 18))
		FAIL("the adapter did not see the fake UCX 1.18");
	if (want_refused && (!st.refused || st.passed_through != 1 || st.active))
		FAIL("expected the gate to refuse this UCX (its calls bind to itself)");
	if (!want_refused && (st.refused || st.passed_through))
		FAIL("expected the gate to accept this UCX");
	printf("PASS\n");
	return 0;
}
