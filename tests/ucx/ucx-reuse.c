// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * UCX alone (ucp tag matching over rc_verbs on rxe0, one process, two
 * workers): a 1 MiB send buffer is reused at the same address after six
 * kinds of change, and every receive is checked against what the sender
 * wrote.  A registration UCX's cache did not invalidate makes the
 * receiver's RDMA read fetch the previous iteration's pages: "stale".
 *
 * A sixth row, syscall-munmap, unmaps and maps by syscall(2) instead
 * of libc: UCX's own hooks cannot see it.
 *
 * Usage: ucx-reuse [--external] [--adapter|--no-adapter]
 *                  --expect clean|stale [--pattern NAME] [--skip NAME]
 *                  [--iterations N]
 *   --external    call ucm_set_external_event(UCM_EVENT_VM_UNMAPPED) before
 *                 ucp_init: with UCX's hooks off this keeps UCX's rcache on
 *                 while nobody reports unmaps (the negative control)
 *   --adapter     require libummunot-ucx to be loaded, active and to have
 *                 watched regions and delivered events
 *   --no-adapter  require libummunot-ucx not to be loaded
 *   --pattern, --skip  run only / all but the named pattern (munmap+mmap,
 *                 mmap-fixed, mremap, madv-dontneed, heap-trim,
 *                 syscall-munmap); --skip may repeat
 *   --expect clean  every receive must match; stale: every pattern must
 *                 show at least one stale receive (the control can fail)
 * Exit: 0 as expected, 1 not as expected or an error.
 * UCX's transport defaults for the test guest (rc_verbs,ud_verbs over
 * rxe0:1, GID index 0, rendezvous above 8 KiB) are set unless the
 * environment already sets them.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>

#include "ummunot-ucx.h"

#define LEN (1u << 20)
#define TAG 0x5eed

static ucp_context_h ctx;
static ucp_worker_h w_send, w_recv;
static ucp_ep_h ep;
static unsigned char *rbuf;

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("ucx-reuse: error: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void check(ucs_status_t st, const char *what)
{
	if (st != UCS_OK)
		die("%s: %s", what, ucs_status_string(st));
}

static ucs_status_t wait_req(void *req)
{
	ucs_status_t st;

	if (req == NULL)
		return UCS_OK;
	if (UCS_PTR_IS_ERR(req))
		return UCS_PTR_STATUS(req);
	while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
		ucp_worker_progress(w_send);
		ucp_worker_progress(w_recv);
	}
	ucp_request_free(req);
	return st;
}

static void xfer(const void *sbuf)
{
	ucp_request_param_t rp, sp;
	void *rreq, *sreq;

	memset(&rp, 0, sizeof(rp));
	memset(&sp, 0, sizeof(sp));
	rreq = ucp_tag_recv_nbx(w_recv, rbuf, LEN, TAG, (ucp_tag_t)-1, &rp);
	sreq = ucp_tag_send_nbx(ep, sbuf, LEN, TAG, &sp);
	check(wait_req(sreq), "send");
	check(wait_req(rreq), "receive");
}

static void setup(void)
{
	ucp_params_t params;
	ucp_worker_params_t wp;
	ucp_ep_params_t epp;
	ucp_config_t *cfg;
	ucp_address_t *addr;
	size_t addr_len;

	check(ucp_config_read(NULL, NULL, &cfg), "ucp_config_read");
	memset(&params, 0, sizeof(params));
	params.field_mask = UCP_PARAM_FIELD_FEATURES;
	params.features = UCP_FEATURE_TAG;
	check(ucp_init(&params, cfg, &ctx), "ucp_init");
	ucp_config_release(cfg);
	memset(&wp, 0, sizeof(wp));
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SINGLE;
	check(ucp_worker_create(ctx, &wp, &w_send), "ucp_worker_create");
	check(ucp_worker_create(ctx, &wp, &w_recv), "ucp_worker_create");
	check(ucp_worker_get_address(w_recv, &addr, &addr_len), "ucp_worker_get_address");
	memset(&epp, 0, sizeof(epp));
	epp.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
	epp.address = addr;
	check(ucp_ep_create(w_send, &epp, &ep), "ucp_ep_create");
	ucp_worker_release_address(w_recv, addr);
	rbuf = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rbuf == MAP_FAILED)
		die("mmap: %s", strerror(errno));
}

static void teardown(void)
{
	ucp_request_param_t p;

	memset(&p, 0, sizeof(p));
	p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
	p.flags = UCP_EP_CLOSE_FLAG_FORCE;
	wait_req(ucp_ep_close_nbx(ep, &p));
	ucp_worker_destroy(w_send);
	ucp_worker_destroy(w_recv);
	ucp_cleanup(ctx);
	munmap(rbuf, LEN);
}

/* ---- the six ways to get new pages at the same address ------------ */

static void *map_anon(void *at, int extra)
{
	void *p = mmap(at, LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);

	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	return p;
}

static void *mmap_alloc(void) { return map_anon(NULL, 0); }
static void mmap_release(void *a) { munmap(a, LEN); }

/* munmap, then a new mapping at the same address. */
static void *reuse_munmap(void *a)
{
	if (munmap(a, LEN))
		die("munmap: %s", strerror(errno));
	return map_anon(a, MAP_FIXED_NOREPLACE);
}

/* MAP_FIXED over the live mapping (no munmap call). */
static void *reuse_map_fixed(void *a) { return map_anon(a, MAP_FIXED); }

/* Another mapping's pages moved onto the buffer by mremap. */
static void *reuse_mremap(void *a)
{
	void *src = map_anon(NULL, 0);
	void *p;

	memset(src, 0x11, LEN);		/* populated pages, then moved */
	p = mremap(src, LEN, LEN, MREMAP_MAYMOVE | MREMAP_FIXED, a);
	if (p == MAP_FAILED)
		die("mremap: %s", strerror(errno));
	return p;
}

/* MADV_DONTNEED: the next write faults in fresh pages. */
static void *reuse_dontneed(void *a)
{
	if (madvise(a, LEN, MADV_DONTNEED))
		die("madvise: %s", strerror(errno));
	return a;
}

/* munmap and mmap by syscall(): no libc function, so no hook, sees it. */
static void *reuse_syscall(void *a)
{
	void *p;

	if (syscall(SYS_munmap, a, LEN))
		die("syscall(SYS_munmap): %s", strerror(errno));
	p = (void *)syscall(SYS_mmap, a, LEN, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		die("syscall(SYS_mmap): %s", strerror(errno));
	return p;
}

/* free, malloc_trim(0) (gives the free chunk's pages back with
 * MADV_DONTNEED), malloc: the same heap chunk with new pages. */
static void *guard;

static void *heap_alloc(void)
{
	void *a = malloc(LEN);

	guard = malloc(64 * 1024);	/* keeps a away from the heap's top */
	if (!a || !guard)
		die("malloc failed");
	return a;
}

static void *reuse_heap(void *a)
{
	free(a);
	malloc_trim(0);
	return malloc(LEN);
}

static void heap_release(void *a)
{
	free(a);
	free(guard);
	guard = NULL;
}

struct pattern {
	const char *name;
	void *(*alloc)(void);
	void *(*reuse)(void *a);
	void (*release)(void *a);
};

static const struct pattern patterns[] = {
	{ "munmap+mmap", mmap_alloc, reuse_munmap, mmap_release },
	{ "mmap-fixed", mmap_alloc, reuse_map_fixed, mmap_release },
	{ "mremap", mmap_alloc, reuse_mremap, mmap_release },
	{ "madv-dontneed", mmap_alloc, reuse_dontneed, mmap_release },
	{ "heap-trim", heap_alloc, reuse_heap, heap_release },
	{ "syscall-munmap", mmap_alloc, reuse_syscall, mmap_release },
};
#define NPATTERNS (sizeof(patterns) / sizeof(patterns[0]))

/* Iterations whose receive did not match what was sent. */
static unsigned int run_pattern(const struct pattern *p, unsigned int iters, unsigned int seed)
{
	unsigned char *a = p->alloc(), *b;
	unsigned int i, stale = 0;

	for (i = 0; i < iters; i++) {
		unsigned char want = (unsigned char)(seed + i), prev = (unsigned char)(want - 1);
		size_t j, bad = 0;

		if (i) {
			b = p->reuse(a);
			if (b != a)
				die("%s: the buffer moved (%p -> %p): cannot test reuse",
				    p->name, (void *)a, (void *)b);
		}
		memset(a, want, LEN);
		memset(rbuf, 0, LEN);
		xfer(a);
		for (j = 0; j < LEN; j++)
			bad += rbuf[j] != want;
		if (bad) {
			stale++;
			printf("  %s iteration %u: %zu of %u bytes wrong (byte 0 = %#x, sent %#x, previous %#x)\n",
			       p->name, i, bad, LEN, rbuf[0], want, prev);
		}
	}
	p->release(a);
	return stale;
}

static void default_env(const char *name, const char *value)
{
	if (setenv(name, value, 0))
		die("setenv %s: %s", name, strerror(errno));
}

int main(int argc, char **argv)
{
	int (*stats_fn)(struct ummunot_ucx_stats *, size_t);
	struct ummunot_ucx_stats st;
	const char *expect = NULL, *only = NULL, *skip[8];
	unsigned int nskip = 0, q;
	bool skipped;
	bool external = false, want_adapter = false, want_none = false;
	unsigned int iters = 6, total = 0, i, ran = 0, stale_patterns = 0;
	unsigned int stale[NPATTERNS];
	int k;

	for (k = 1; k < argc; k++) {
		if (!strcmp(argv[k], "--external"))
			external = true;
		else if (!strcmp(argv[k], "--adapter"))
			want_adapter = true;
		else if (!strcmp(argv[k], "--no-adapter"))
			want_none = true;
		else if (!strcmp(argv[k], "--expect") && k + 1 < argc)
			expect = argv[++k];
		else if (!strcmp(argv[k], "--pattern") && k + 1 < argc)
			only = argv[++k];
		else if (!strcmp(argv[k], "--skip") && k + 1 < argc && nskip < 8)
			skip[nskip++] = argv[++k];
		else if (!strcmp(argv[k], "--iterations") && k + 1 < argc)
			iters = (unsigned int)strtoul(argv[++k], NULL, 0);
		else
			die("unknown or incomplete argument '%s' (see the comment at the top of ucx-reuse.c)", argv[k]);
	}
	if (!expect || (strcmp(expect, "clean") && strcmp(expect, "stale")))
		die("--expect clean|stale is required");
	if (iters < 2)
		die("--iterations must be at least 2");
	if (want_adapter && want_none)
		die("--adapter and --no-adapter contradict each other");

	default_env("UCX_TLS", "rc_verbs,ud_verbs");
	default_env("UCX_NET_DEVICES", "rxe0:1");
	default_env("UCX_IB_GID_INDEX", "0");
	default_env("UCX_RNDV_THRESH", "8k");
	/* The buffer comes from the heap (threshold above its size); free()
	 * never trims by itself, only malloc_trim(0). */
	if (!mallopt(M_MMAP_THRESHOLD, 32 << 20) || !mallopt(M_TRIM_THRESHOLD, 1 << 30) ||
	    !mallopt(M_TOP_PAD, 0))
		die("mallopt failed");

	stats_fn = (int (*)(struct ummunot_ucx_stats *, size_t))dlsym(RTLD_DEFAULT, "ummunot_ucx_stats");
	if (want_none && stats_fn)
		die("libummunot-ucx is loaded, but --no-adapter was asked for");
	if (want_adapter && !stats_fn)
		die("libummunot-ucx is not loaded (LD_PRELOAD=libummunot-ucx.so.0)");
	if (external)
		ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);

	setup();
	for (i = 0; i < NPATTERNS; i++) {
		if (only && strcmp(only, patterns[i].name))
			continue;
		skipped = false;
		for (q = 0; q < nskip; q++)
			skipped |= !strcmp(skip[q], patterns[i].name);
		if (skipped) {
			printf("%-14s skipped (--skip)\n", patterns[i].name);
			continue;
		}
		stale[i] = run_pattern(&patterns[i], iters, 0x20 * (i + 1));
		printf("%-14s %u of %u receives stale\n", patterns[i].name, stale[i], iters);
		total += stale[i];
		stale_patterns += stale[i] != 0;
		ran++;
	}
	teardown();
	if (!ran)
		die("no pattern to run (--pattern '%s', %u --skip)", only ? only : "", nskip);

	if (stats_fn) {
		stats_fn(&st, sizeof(st));
		printf("libummunot-ucx: active %u, rcaches %" PRIu64 ", watched %" PRIu64
		       ", unwatched %" PRIu64 ", events %" PRIu64 ", syncs %" PRIu64
		       ", overflows %" PRIu64 ", invalidate-all %" PRIu64 ", watch errors %" PRIu64
		       ", dead-misses %" PRIu64 ", ucx %u.%u\n",
		       st.active, st.rcaches, st.watched, st.unwatched, st.events, st.syncs,
		       st.overflows, st.invalidate_all, st.watch_errors, st.dead_misses,
		       st.ucx_version >> 16, st.ucx_version & 0xffff);
		if (want_adapter && (!st.active || !st.rcaches || !st.watched || !st.events)) {
			printf("FAIL: the adapter did not feed UCX's registration cache\n");
			return 1;
		}
	}
	printf("total: %u stale in %u patterns (expected %s)\n", total, ran, expect);
	if (!strcmp(expect, "clean"))
		return total ? 1 : 0;
	if (stale_patterns != ran) {
		printf("FAIL: %u of %u patterns showed no stale receive: the negative control "
		       "did not reproduce the bug\n", ran - stale_patterns, ran);
		return 1;
	}
	return 0;
}
