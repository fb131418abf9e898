/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Shared helpers for the tests of libummunot over real verbs (rxe in the VM):
 * open the RDMA device, connect two RC QPs of one process to each other,
 * post one RDMA WRITE/READ and wait for its completion, and the
 * "allocate, register, free, reuse the address, register again" scenario
 * that the reuse tests run twice: with the cache's monitoring on (the data
 * must land in the new buffer) and off (the negative control: the cache
 * hands out the stale registration and the data goes to the old pages).
 */
#ifndef UMMUNOT_TESTS_VERBS_HELPERS_H
#define UMMUNOT_TESTS_VERBS_HELPERS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <ummunot/ummunot.h>

#define VT_EXIT_PASS	0
#define VT_EXIT_FAIL	1
#define VT_EXIT_SKIP	77

/* What the cache registers in these tests: the peer writes and reads. */
#define VT_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)

extern const char *vt_prog;
extern size_t vt_page;

void vt_init(int argc, char **argv);
/* "FAIL file:line: ..." on stderr, exit 1. */
void vt_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
/* "SKIP: ..." on stderr, exit 77. */
void vt_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void vt_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define vt_fail(...)	vt_fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define VT_ASSERT(cond, fmt, ...) do {					\
	if (!(cond))							\
		vt_fail_at(__FILE__, __LINE__, "assertion '%s' failed: " fmt, \
			   #cond, ##__VA_ARGS__);			\
} while (0)
#define VT_EQ(what, expected, got) do {					\
	unsigned long long _e = (unsigned long long)(expected);		\
	unsigned long long _g = (unsigned long long)(got);		\
	if (_e != _g)							\
		vt_fail_at(__FILE__, __LINE__, "%s: expected %llu, got %llu", \
			   (what), _e, _g);				\
} while (0)
/* A C API call that returns 0 or -errno. */
#define VT_OK(what, expr) do {						\
	int _r = (expr);						\
	if (_r < 0)							\
		vt_fail_at(__FILE__, __LINE__, "%s: %s", (what), strerror(-_r)); \
} while (0)

double vt_now(void);

/* ------------------------------------------------------------------ */
/* Device and QP pairs                                                 */
/* ------------------------------------------------------------------ */

struct vt_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	int gid_index;		/* the IPv4-mapped GID (RoCE v2 over IPv4) */
	union ibv_gid gid;
	enum ibv_mtu mtu;
	char name[64];
};

/*
 * Open the RDMA device named by $UMMUNOT_RDMA_DEV (default: rxe0, else
 * the first device) and find its IPv4-mapped GID.  Skips (exit 77, with
 * the reason) when there is no RDMA device or no usable port/GID.
 */
void vt_dev_open(struct vt_dev *d);
void vt_dev_close(struct vt_dev *d);

/*
 * Two RC QPs of this process connected to each other through the device:
 * qp[0] is the initiator ("the peer" that writes into or reads from the
 * memory under test), qp[1] the target.  Both share one CQ.  stage is an
 * ordinary registration (ibv_reg_mr, not the cache) of stage_len bytes
 * that serves as the initiator's local buffer.
 */
struct vt_pair {
	struct vt_dev *d;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	unsigned char *stage;
	size_t stage_len;
	struct ibv_mr *stage_mr;
};

/* Fails the test on any error (these are not the behaviours under test). */
void vt_pair_create(struct vt_dev *d, struct vt_pair *p, size_t stage_len);
void vt_pair_destroy(struct vt_pair *p);

/*
 * Post one signaled RDMA WRITE (stage[stage_off..+len) -> remote) or READ
 * (remote -> stage[stage_off..+len)) on qp[0] and wait (up to 30 s) for
 * its completion.  Returns the completion status (IBV_WC_SUCCESS == 0,
 * IBV_WC_REM_ACCESS_ERR, ...), or -errno if posting or polling failed.
 * After a non-success status both QPs are in the error state: use a fresh
 * pair.
 */
int vt_rdma(struct vt_pair *p, enum ibv_wr_opcode op, size_t stage_off,
	    uint64_t remote_addr, uint32_t rkey, size_t len);

/* ------------------------------------------------------------------ */
/* Caches                                                              */
/* ------------------------------------------------------------------ */

/*
 * A verbs cache on d's PD.  monitored false switches the cache's
 * monitoring off through the public API: the cache's monitor gets an event
 * filter of 0, so no invalidation ever reaches the cache (the negative
 * control).
 */
struct ummunot_cache *vt_cache_create(struct vt_dev *d, bool monitored);
/*
 * Flush, check that nothing is left (every registration deregistered,
 * pinned bytes 0, no entries, no region watched in the module), destroy.
 */
void vt_cache_destroy_clean(struct ummunot_cache *c);
void vt_cache_stats(struct ummunot_cache *c, struct ummunot_cache_stats *st);
uint64_t vt_invalidations(const struct ummunot_cache_stats *st);

/* Fill buf with a pattern derived from seed (never all zero). */
void vt_pattern(unsigned char *buf, size_t len, uint64_t seed);

/* ------------------------------------------------------------------ */
/* The reuse scenario                                                  */
/* ------------------------------------------------------------------ */

/*
 * How one test allocates the first buffer and then "frees it and gets new
 * memory at the same address".  reuse() must return the new buffer's
 * address; the harness fails the test if it is not the old one (each test
 * forces same-address reuse).  moved(), if set, returns where the old
 * pages are mapped now (mremap), or NULL.
 */
struct vt_reuse_ops {
	const char *what;	/* "free + malloc", "munmap + mmap(MAP_FIXED)", ... */
	size_t len;		/* buffer size */
	void *(*alloc)(size_t len);
	void *(*reuse)(void *a, size_t len);
	void *(*moved)(void);
	void (*release)(void *b, size_t len);
	/* The event type the monitored cache must have seen (UNMAP, CLEAR). */
	uint32_t expect_event;
};

/*
 * Run the scenario with monitoring on, then off, each with a fresh cache
 * and QP pair, and check:
 *   on:  the second get is a miss after an expect_event invalidation, and
 *        the RDMA WRITE through it lands in the new buffer;
 *   off: the second get is a hit on the old registration, the WRITE
 *        completes successfully, the new buffer does not see it, and an
 *        RDMA READ through the same key returns it (it went to the old
 *        pages).
 * Returns VT_EXIT_PASS or fails the test.
 */
int vt_reuse_run(const struct vt_reuse_ops *ops);

#endif /* UMMUNOT_TESTS_VERBS_HELPERS_H */
