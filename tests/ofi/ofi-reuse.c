// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ofi-reuse: libfabric alone (verbs;ofi_rxm over rxe0), buffers reused at
 * the same address, with libfabric's own MR cache under test.
 *
 * One process, two RDM endpoints of one domain.  Every iteration both the
 * send and the receive buffer are given back to the kernel and new memory
 * is mapped at the same address (--reuse), the sender fills its buffer and
 * fi_tsend()s --size bytes (a rendezvous: ofi_rxm registers both buffers
 * through the verbs provider's MR cache, the receiver RDMA-reads), and the
 * receiver checks what arrived.  A cache that was not told the old pages
 * are gone hands out the old registration: the receiver gets the previous
 * iteration's data (stale) or its buffer keeps its fill (lost: the data
 * went to the old pages).
 *
 * --reuse: munmap (then mmap() with the old address as hint), fixed
 * (mmap(MAP_FIXED) over the live buffer), mremap (moved away, new memory
 * mapped at the old address), dontneed (madvise(MADV_DONTNEED)), heap
 * (free() of a heap block, malloc_trim(0), malloc() again: the same
 * address, pages given back to the kernel in between), syscall
 * (syscall(SYS_munmap) and syscall(SYS_mmap): no libc function is called,
 * so no hook on munmap/mmap sees it).
 *
 * --fork 1: before every iteration but the first, a forked child unmaps
 * both buffers in its own address space and exits; the parent's transfers
 * must stay correct (its monitor keeps reporting its own unmaps, and the
 * child's do not disturb it).
 *
 * --burst N: before every transfer, N one-page buffers (two pages apart)
 * are registered through fi_mr_reg() (libfabric's cache keeps them after
 * fi_close()) and then unmapped together: N events at once, so that a ring
 * smaller than N (UMMUNOT_OFI_RING_ENTRIES) overflows.
 *
 * --max-regions N (root): sets the module's max_regions parameter to N for
 * this run (restored at exit), before the monitor opens, so that the
 * adapter's region table fills (ENOSPC) and it must collect.
 *
 * --require overflow|collection: the adapter must have handled at least one
 * ring overflow / region-table collection (else the case tested nothing).
 * --require notify: the adapter's evictor thread must have reported every
 * range that changed to libfabric (notify(), within 5 s of the last
 * transfer): at least --burst ranges, or one without --burst.
 *
 * --monitor chooses what feeds the cache:
 *   ummunot   ummunot_ofi_import() before fi_domain() (libummunot-ofi)
 *   preload   nothing here: libummunot-ofi-preload.so must be preloaded
 *             (LD_PRELOAD); checked through ummunot_ofi_stats()
 *   none      a monitor that is never told anything (subscribe succeeds,
 *             valid() always says yes): the cache with every source of
 *             invalidations off, the negative control
 *   default   libfabric's own (1.17: userfaultfd, else memhooks)
 *
 * Prints "ofi-reuse: reuse=... monitor=...: ok N, stale N, lost N,
 * corrupt N" and, for ummunot/preload, the adapter's counters.  Exit
 * status: --expect clean: 0 iff all ok; --expect stale: 0 iff not all ok
 * (and for "none": the test proves it can fail); --expect report: 0.
 * 1 when the expectation fails, 2 on bad usage, 77 (with the reason) when
 * there is no verbs;ofi_rxm provider or no /dev/ummunot.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>
#include <rdma/fi_tagged.h>

#include <ummunot/ofi.h>

static const char *const reuse_names[] = {
	"munmap", "fixed", "mremap", "dontneed", "heap", "syscall",
};
enum mon { MON_UMMUNOT, MON_PRELOAD, MON_NONE, MON_DEFAULT };
static const char *const mon_names[] = { "ummunot", "preload", "none", "default" };
enum expect { EX_CLEAN, EX_STALE, EX_REPORT };
static const char *const expect_names[] = { "clean", "stale", "report" };

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ofi-reuse: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(77);
}

#define CHECK(what, expr) do {						\
	int _r = (int)(expr);						\
	if (_r < 0)							\
		die("%s: %s (%d)", (what), fi_strerror(-_r), _r);	\
} while (0)

static int pick(const char *v, const char *const *names, int n, const char *opt)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(v, names[i]))
			return i;
	die("unknown %s '%s'", opt, v);
}

/* ------------------------------------------------------------------ */
/* The negative control's monitor: subscribes everything, never told. */
/* ------------------------------------------------------------------ */

#include "null-monitor.h"

/* ------------------------------------------------------------------ */
/* Buffers                                                             */
/* ------------------------------------------------------------------ */

#include "same-address.h"

#define RE_HEAP RE_ALLOC	/* free(), malloc_trim(0), malloc() again */

static void *moved[2];

/* Heap buffers: the two are allocated together, the top of the heap. */
static char *heap_block;

static void *first_alloc(enum reuse how, size_t len, int which)
{
	if (how != RE_HEAP)
		return map_at(NULL, len, 0);
	if (which == 0) {
		heap_block = malloc(2 * len);
		if (!heap_block)
			die("malloc(%zu) failed", 2 * len);
	}
	return heap_block + which * len;
}

/*
 * free() the block and trim the heap: glibc's malloc_trim() gives the free
 * chunk's whole pages back to the kernel (brk at the top, MADV_DONTNEED
 * inside: the provider allocates small things above the block, so it is
 * rarely the top).  Checked with mincore(): no page of the block may stay
 * resident, or nothing is tested.  malloc() then returns the same chunk.
 */
static void renew_heap(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t at = (uintptr_t)heap_block;
	uintptr_t lo = (at + 64 + pg - 1) & ~(pg - 1);	/* past the chunk header */
	uintptr_t hi = (at + 2 * len - pg) & ~(pg - 1);
	unsigned char vec[1024];
	char *p;

	free(heap_block);
	malloc_trim(0);
	if (hi > lo && (hi - lo) / pg <= sizeof(vec)) {
		if (mincore((void *)lo, hi - lo, vec) == 0) {
			for (size_t i = 0; i < (hi - lo) / pg; i++)
				if (vec[i] & 1)
					die("free() + malloc_trim(0) left page 0x%" PRIxPTR
					    " of the block resident: the heap was not trimmed",
					    lo + i * pg);
		} else if (errno != ENOMEM) {	/* ENOMEM: unmapped (brk): trimmed */
			die("mincore: %s", strerror(errno));
		}
	}
	p = malloc(2 * len);
	if ((uintptr_t)p != at)
		die("malloc() after the trim returned %p, not 0x%" PRIxPTR, (void *)p, at);
	heap_block = p;
}

static void *renew(enum reuse how, void *old, size_t len, int which)
{
	void *p;

	if (how == RE_HEAP) {
		if (which == 0)
			renew_heap(len);
		p = heap_block + which * len;
	} else {
		p = renew_mapping(how, old, len, &moved[which]);
	}
	if (p != old)
		die("--reuse %s: new memory at %p, not at the old address %p",
		    reuse_names[how], p, old);
	return p;
}

/* ------------------------------------------------------------------ */

#include "stale-pattern.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * Completions seen per endpoint.  Both CQs must be read for either side to
 * progress (the endpoints connect to each other, and the rendezvous needs
 * the receiver to act), so every wait drives both.
 */
static unsigned long completed[2];

static void progress(struct fid_cq *cq[2])
{
	for (int i = 0; i < 2; i++) {
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(cq[i], &e, 1);

		if (n == 1) {
			completed[i]++;
		} else if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = { 0 };

			fi_cq_readerr(cq[i], &err, 0);
			die("completion error on endpoint %d: %s (prov %d)", i,
			    fi_strerror(err.err), err.prov_errno);
		} else if (n != -FI_EAGAIN) {
			die("fi_cq_read: %s", fi_strerror((int)-n));
		}
	}
}

static double deadline;

static void check_deadline(const char *what)
{
	if (now() > deadline)
		die("%s: nothing happened for 30 s", what);
}

/* Wait until each endpoint has completed `want` operations. */
static void wait_both(struct fid_cq *cq[2], unsigned long want)
{
	while (completed[0] < want || completed[1] < want) {
		progress(cq);
		check_deadline("waiting for completions");
	}
}

/* --max-regions: a module parameter for this run, restored at exit. */
#define PARAM_DIR "/sys/module/ummunot/parameters/"
static char saved_name[64], saved_value[64];

/* 0, or -1 with errno set. */
static int param_write(const char *name, const char *value)
{
	char path[128];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), PARAM_DIR "%s", name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	r = fputs(value, f) < 0 ? -1 : 0;
	if (fclose(f))
		r = -1;
	return r;
}

/* At exit: exit() must not be called again from here, so only report. */
static void param_restore(void)
{
	if (saved_name[0] && param_write(saved_name, saved_value))
		fprintf(stderr, "ofi-reuse: could not restore %s=%s: %s\n", saved_name,
			saved_value, strerror(errno));
}

static void param_set(const char *name, unsigned long value)
{
	char path[128], v[32];
	FILE *f;

	snprintf(path, sizeof(path), PARAM_DIR "%s", name);
	f = fopen(path, "r");
	if (!f || !fgets(saved_value, sizeof(saved_value), f))
		die("read %s: %s (--max-regions needs the module)", path, strerror(errno));
	fclose(f);
	saved_value[strcspn(saved_value, "\n")] = 0;
	snprintf(saved_name, sizeof(saved_name), "%s", name);
	atexit(param_restore);
	snprintf(v, sizeof(v), "%lu", value);
	if (param_write(name, v))
		die("write %s=%s: %s (--max-regions needs root)", path, v, strerror(errno));
}

/*
 * --burst: N cached registrations whose memory goes away at once.  fi_close()
 * of a cached MR leaves the entry (and its subscription) in the cache.
 */
static void burst_events(struct fid_domain *domain, unsigned long n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	char *area = map_at(NULL, 2 * n * pg, 0);

	for (unsigned long j = 0; j < n; j++) {
		struct fid_mr *mr;

		area[2 * j * pg] = 1;
		CHECK("fi_mr_reg (burst)", fi_mr_reg(domain, area + 2 * j * pg, pg,
						      FI_SEND | FI_RECV, 0, 0, 0, &mr, NULL));
		CHECK("fi_close (burst MR)", fi_close(&mr->fid));
	}
	if (munmap(area, 2 * n * pg))
		die("munmap (burst): %s", strerror(errno));
}

int main(int argc, char **argv)
{
	enum reuse how = RE_MUNMAP;
	enum mon mon = MON_UMMUNOT;
	enum expect expect = EX_CLEAN;
	unsigned long size = 1 << 20, iters = 20;
	bool fork_each = false;
	unsigned long burst = 0, max_regions = 0;
	const char *require = NULL;
	const char *prov = "verbs;ofi_rxm";
	long count[4] = { 0 };

	for (int a = 1; a < argc; a++) {
		const char *o = argv[a];

		if (a + 1 >= argc)
			die("option '%s' needs a value (--reuse WAY --monitor M --expect E --size N --iters N --fork 0|1 --burst N --max-regions N --require WHAT)", o);
		const char *v = argv[++a];
		char *end;

		if (!strcmp(o, "--reuse"))
			how = pick(v, reuse_names, 6, o);
		else if (!strcmp(o, "--monitor"))
			mon = pick(v, mon_names, 4, o);
		else if (!strcmp(o, "--expect"))
			expect = pick(v, expect_names, 3, o);
		else if (!strcmp(o, "--fork")) {
			if (strcmp(v, "0") && strcmp(v, "1"))
				die("--fork takes 0 or 1, got '%s'", v);
			fork_each = v[0] == '1';
		} else if (!strcmp(o, "--require")) {
			if (strcmp(v, "overflow") && strcmp(v, "collection") && strcmp(v, "notify"))
				die("--require takes overflow, collection or notify, got '%s'", v);
			require = v;
		} else if (!strcmp(o, "--size") || !strcmp(o, "--iters") ||
			   !strcmp(o, "--burst") || !strcmp(o, "--max-regions")) {
			errno = 0;
			unsigned long n = strtoul(v, &end, 0);

			if (errno || *end || end == v || !n || v[0] == '-' || n > (1ul << 30))
				die("%s needs a positive number, got '%s'", o, v);
			if (!strcmp(o, "--size"))
				size = n;
			else if (!strcmp(o, "--iters"))
				iters = n;
			else if (!strcmp(o, "--burst"))
				burst = n;
			else
				max_regions = n;
		} else
			die("unknown option '%s'", o);
	}
	if (size % (size_t)sysconf(_SC_PAGESIZE))
		die("--size must be a multiple of the page size");

	if (how == RE_HEAP) {
		/* The buffers come from the heap (brk), not from mmap(). */
		if (!mallopt(M_MMAP_THRESHOLD, 256 << 20) || !mallopt(M_TOP_PAD, 0))
			die("mallopt failed");
	}

	if (max_regions)
		param_set("max_regions", max_regions);

	/* What feeds the cache: before any domain exists. */
	const char *env_mon = getenv("FI_MR_CACHE_MONITOR");

	if (env_mon && *env_mon)
		die("FI_MR_CACHE_MONITOR=%s is set: it would override --monitor", env_mon);
	switch (mon) {
	case MON_UMMUNOT: {
		int r = ummunot_ofi_import(0);

		if (r == -ENOENT && access("/dev/ummunot", F_OK))
			skip("no /dev/ummunot (run under scripts/vm)");
		if (r < 0)
			die("ummunot_ofi_import: %s", strerror(-r));
		break;
	}
	case MON_PRELOAD: {
		struct ummunot_ofi_stats st;

		if (ummunot_ofi_stats(&st, sizeof(st)) < 0)
			die("--monitor preload: libummunot-ofi is not active (preload libummunot-ofi-preload.so)");
		break;
	}
	case MON_NONE:
		CHECK("fi_import(null monitor)",
		      fi_import(FI_VERSION(1, 13), "mr_cache", NULL, 0, 0, &null_monitor.fid, NULL));
		break;
	case MON_DEFAULT:
		break;
	}

	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	if (!hints)
		die("fi_allocinfo failed");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->mode = FI_CONTEXT;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov);
	int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);

	if (r == -FI_ENODATA)
		skip("no libfabric provider %s (no RDMA device? run under scripts/vm)", prov);
	CHECK("fi_getinfo", r);

	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq[2];
	struct fid_ep *ep[2];
	fi_addr_t addr[2];
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .size = 64 };

	CHECK("fi_fabric", fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK("fi_domain", fi_domain(fabric, info, &domain, NULL));
	CHECK("fi_av_open", fi_av_open(domain, &av_attr, &av, NULL));
	for (int i = 0; i < 2; i++) {
		char name[256];
		size_t nlen = sizeof(name);

		CHECK("fi_cq_open", fi_cq_open(domain, &cq_attr, &cq[i], NULL));
		CHECK("fi_endpoint", fi_endpoint(domain, info, &ep[i], NULL));
		CHECK("fi_ep_bind(cq)", fi_ep_bind(ep[i], &cq[i]->fid, FI_TRANSMIT | FI_RECV));
		CHECK("fi_ep_bind(av)", fi_ep_bind(ep[i], &av->fid, 0));
		CHECK("fi_enable", fi_enable(ep[i]));
		CHECK("fi_getname", fi_getname(&ep[i]->fid, name, &nlen));
		if (fi_av_insert(av, name, 1, &addr[i], 0, NULL) != 1)
			die("fi_av_insert failed");
	}
	printf("ofi-reuse: provider %s, domain %s, %s, monitor %s\n", info->fabric_attr->prov_name,
	       info->domain_attr->name, reuse_names[how], mon_names[mon]);

	void *buf[2] = { NULL, NULL };
	struct fi_context ctx[2];

	/*
	 * Warm-up: one transfer from other memory connects the endpoints and
	 * fills the provider's pools, so that nothing it allocates later
	 * lands above the heap buffers (--reuse heap needs them at the top).
	 */
	{
		size_t wl = size;
		char *w = map_at(NULL, 2 * wl, 0);

		deadline = now() + 30;
		while ((r = (int)fi_trecv(ep[1], w + wl, wl, NULL, addr[0], 6, 0, &ctx[1])) == -FI_EAGAIN) {
			progress(cq);
			check_deadline("fi_trecv (warm-up)");
		}
		CHECK("fi_trecv (warm-up)", r);
		while ((r = (int)fi_tsend(ep[0], w, wl, NULL, addr[1], 6, &ctx[0])) == -FI_EAGAIN) {
			progress(cq);
			check_deadline("fi_tsend (warm-up)");
		}
		CHECK("fi_tsend (warm-up)", r);
		wait_both(cq, 1);
		completed[0] = completed[1] = 0;
		/* (stays mapped: its registration stays in the cache) */
	}

	for (unsigned long i = 0; i < iters; i++) {
		if (fork_each && i > 0) {
			/* A child that unmaps the buffers in its own address
			 * space and exits: the parent's registrations stay
			 * good, and its monitor must go on reporting. */
			pid_t pid = fork();
			int ws;

			if (pid < 0)
				die("fork: %s", strerror(errno));
			if (pid == 0) {
				munmap(buf[0], size);
				munmap(buf[1], size);
				_exit(0);
			}
			if (waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws))
				die("the forked child failed (status 0x%x)", ws);
		}
		for (int b = 0; b < 2; b++) {
			if (i == 0)
				buf[b] = first_alloc(how, size, b);
			else
				buf[b] = renew(how, buf[b], size, b);
		}
		if (burst)
			burst_events(domain, burst);
		fill(buf[0], size, DATA(i));
		fill(buf[1], size, BEFORE(i));
		/* ep[1] receives from ep[0]; retry while the provider is busy
		 * (the first send also connects the two) */
		deadline = now() + 30;
		while ((r = (int)fi_trecv(ep[1], buf[1], size, NULL, addr[0], 7, 0, &ctx[1])) == -FI_EAGAIN) {
			progress(cq);
			check_deadline("fi_trecv");
		}
		CHECK("fi_trecv", r);
		while ((r = (int)fi_tsend(ep[0], buf[0], size, NULL, addr[1], 7, &ctx[0])) == -FI_EAGAIN) {
			progress(cq);
			check_deadline("fi_tsend");
		}
		CHECK("fi_tsend", r);
		wait_both(cq, i + 1);

		if (matches(buf[1], size, DATA(i)))
			count[0]++;
		else if (i > 0 && matches(buf[1], size, DATA(i - 1)))
			count[1]++;
		else if (matches(buf[1], size, BEFORE(i)))
			count[2]++;
		else
			count[3]++;
	}
	long bad = count[1] + count[2] + count[3];

	printf("ofi-reuse: reuse=%s monitor=%s size=%lu iters=%lu: ok %ld, stale %ld, lost %ld, corrupt %ld\n",
	       reuse_names[how], mon_names[mon], size, iters, count[0], count[1], count[2], count[3]);

	int status = 0;
	struct ummunot_ofi_stats st;

	if (mon == MON_UMMUNOT || mon == MON_PRELOAD) {
		uint64_t want_notified = burst ? burst : 1;

		if (ummunot_ofi_stats(&st, sizeof(st)) < 0)
			die("ummunot_ofi_stats failed");
		/* The evictor works on its own: give it time to catch up. */
		for (int t = 0; require && !strcmp(require, "notify") &&
				st.notified < want_notified && t < 500; t++) {
			usleep(10000);
			if (ummunot_ofi_stats(&st, sizeof(st)) < 0)
				die("ummunot_ofi_stats failed");
		}
		printf("ofi-reuse: adapter: subscribes %" PRIu64 " (refused %" PRIu64 "), valid() slow %"
		       PRIu64 ", invalid %" PRIu64 ", events %" PRIu64 ", overflows %" PRIu64
		       ", collections %" PRIu64 ", regions %" PRIu64 ", notified %" PRIu64 "\n",
		       st.subscribes, st.subscribe_errors, st.valid_slow, st.invalid, st.events,
		       st.overflows, st.collections, st.regions, st.notified);
		/* The adapter must have been asked: otherwise "clean" would
		 * prove nothing (e.g. a cache that is off). */
		if (st.subscribes == 0) {
			printf("ofi-reuse: FAIL: libfabric never subscribed a range: its MR cache is not in use\n");
			status = 1;
		}
		if (require && !strcmp(require, "notify") && st.notified < want_notified) {
			printf("ofi-reuse: FAIL: --require notify: %" PRIu64 " ranges reported to libfabric, "
			       "expected at least %" PRIu64 "\n", st.notified, want_notified);
			status = 1;
		}
		if (require && !strcmp(require, "overflow") && !st.overflows) {
			printf("ofi-reuse: FAIL: --require overflow: the ring never overflowed "
			       "(UMMUNOT_OFI_RING_ENTRIES below --burst?)\n");
			status = 1;
		}
		if (require && !strcmp(require, "collection") && !st.collections) {
			printf("ofi-reuse: FAIL: --require collection: the region table never filled "
			       "(--max-regions below --burst?)\n");
			status = 1;
		}
	} else if (require) {
		die("--require needs --monitor ummunot or preload");
	}

	for (int i = 0; i < 2; i++) {
		fi_close(&ep[i]->fid);
		fi_close(&cq[i]->fid);
	}
	fi_close(&av->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	if (expect == EX_CLEAN && bad) {
		printf("ofi-reuse: FAIL: expected every transfer to be correct\n");
		status = 1;
	} else if (expect == EX_STALE && !bad) {
		printf("ofi-reuse: FAIL: expected stale data (negative control), every transfer was correct\n");
		status = 1;
	}
	return status;
}
