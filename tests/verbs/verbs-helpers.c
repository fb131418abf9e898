// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Shared helpers for the libummunot-over-verbs tests (see verbs-helpers.h). */
#include "verbs-helpers.h"

#include <arpa/inet.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

const char *vt_prog = "verbs-test";
size_t vt_page = 4096;

void vt_init(int argc, char **argv)
{
	const char *s;
	long pg;

	(void)argc;
	if (argv && argv[0]) {
		s = strrchr(argv[0], '/');
		vt_prog = s ? s + 1 : argv[0];
	}
	pg = sysconf(_SC_PAGESIZE);
	if (pg > 0)
		vt_page = (size_t)pg;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

void vt_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(VT_EXIT_FAIL);
}

void vt_skip(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "SKIP: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(VT_EXIT_SKIP);
}

void vt_log(const char *fmt, ...)
{
	va_list ap;

	printf("%s: ", vt_prog);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

double vt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */

static bool gid_is_ipv4_mapped(const union ibv_gid *g)
{
	static const unsigned char prefix[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
	};

	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

void vt_dev_open(struct vt_dev *d)
{
	const char *want = getenv("UMMUNOT_RDMA_DEV");
	struct ibv_device **list, *dev = NULL;
	struct ibv_port_attr pa;
	struct ibv_device_attr da;
	int n, i;

	memset(d, 0, sizeof(*d));
	d->gid_index = -1;
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		if (list)
			ibv_free_device_list(list);
		vt_skip("no RDMA device (needs Soft-RoCE rxe0: run under scripts/vm)");
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want ? want : "rxe0"))
			dev = list[i];
	if (!dev && want) {
		ibv_free_device_list(list);
		vt_skip("RDMA device %s (UMMUNOT_RDMA_DEV) not found", want);
	}
	if (!dev)
		dev = list[0];
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
	d->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!d->ctx)
		vt_fail("ibv_open_device(%s): %s", d->name, strerror(errno));
	if (ibv_query_device(d->ctx, &da))
		vt_fail("ibv_query_device(%s) failed", d->name);

	for (d->port = 1; d->port <= da.phys_port_cnt; d->port++) {
		if (ibv_query_port(d->ctx, d->port, &pa) || pa.state != IBV_PORT_ACTIVE)
			continue;
		for (i = 0; i < pa.gid_tbl_len; i++) {
			union ibv_gid g;

			if (ibv_query_gid(d->ctx, d->port, i, &g))
				continue;
			if (gid_is_ipv4_mapped(&g)) {
				d->gid_index = i;
				d->gid = g;
				break;
			}
		}
		if (d->gid_index >= 0)
			break;
	}
	if (d->gid_index < 0) {
		ibv_close_device(d->ctx);
		vt_skip("%s: no active port with an IPv4-mapped GID (is dummy0 up with 10.0.0.1?)",
			d->name);
	}
	d->mtu = pa.active_mtu;
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd)
		vt_fail("ibv_alloc_pd(%s) failed", d->name);
}

void vt_dev_close(struct vt_dev *d)
{
	if (d->pd && ibv_dealloc_pd(d->pd))
		vt_fail("ibv_dealloc_pd failed (something still uses the PD)");
	if (d->ctx)
		ibv_close_device(d->ctx);
	memset(d, 0, sizeof(*d));
}

static void qp_connect(struct vt_dev *d, struct ibv_qp *qp, uint32_t remote_qpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = d->port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		vt_fail("modify QP %u to INIT failed", qp->qp_num);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->mtu;
	a.dest_qp_num = remote_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = d->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = d->port;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		vt_fail("modify QP %u to RTR failed", qp->qp_num);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		vt_fail("modify QP %u to RTS failed", qp->qp_num);
}

void vt_pair_create(struct vt_dev *d, struct vt_pair *p, size_t stage_len)
{
	struct ibv_qp_init_attr ia;
	int i;

	memset(p, 0, sizeof(*p));
	p->d = d;
	p->cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	if (!p->cq)
		vt_fail("ibv_create_cq failed: %s", strerror(errno));
	for (i = 0; i < 2; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = p->cq;
		ia.recv_cq = p->cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = 4;
		ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = 1;
		p->qp[i] = ibv_create_qp(d->pd, &ia);
		if (!p->qp[i])
			vt_fail("ibv_create_qp failed: %s", strerror(errno));
	}
	qp_connect(d, p->qp[0], p->qp[1]->qp_num);
	qp_connect(d, p->qp[1], p->qp[0]->qp_num);

	p->stage_len = stage_len;
	p->stage = mmap(NULL, stage_len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->stage == MAP_FAILED)
		vt_fail("mmap stage: %s", strerror(errno));
	p->stage_mr = ibv_reg_mr(d->pd, p->stage, stage_len, VT_ACCESS);
	if (!p->stage_mr)
		vt_fail("ibv_reg_mr(stage): %s", strerror(errno));
}

void vt_pair_destroy(struct vt_pair *p)
{
	int i;

	if (p->stage_mr && ibv_dereg_mr(p->stage_mr))
		vt_fail("ibv_dereg_mr(stage) failed");
	if (p->stage)
		munmap(p->stage, p->stage_len);
	for (i = 0; i < 2; i++)
		if (p->qp[i] && ibv_destroy_qp(p->qp[i]))
			vt_fail("ibv_destroy_qp failed");
	if (p->cq && ibv_destroy_cq(p->cq))
		vt_fail("ibv_destroy_cq failed");
	memset(p, 0, sizeof(*p));
}

int vt_rdma(struct vt_pair *p, enum ibv_wr_opcode op, size_t stage_off,
	    uint64_t remote_addr, uint32_t rkey, size_t len)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	struct ibv_wc wc;
	double deadline;
	int n, r;

	if (stage_off > p->stage_len || len > p->stage_len - stage_off)
		return -EINVAL;
	sge.addr = (uintptr_t)p->stage + stage_off;
	sge.length = (uint32_t)len;
	sge.lkey = p->stage_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = remote_addr;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;
	r = ibv_post_send(p->qp[0], &wr, &bad);
	if (r)
		return -r;
	deadline = vt_now() + 30;
	for (;;) {
		n = ibv_poll_cq(p->cq, 1, &wc);
		if (n < 0)
			return -EIO;
		if (n == 1)
			return (int)wc.status;
		if (vt_now() > deadline)
			return -ETIMEDOUT;
		sched_yield();
	}
}

/* ------------------------------------------------------------------ */

struct ummunot_cache *vt_cache_create(struct vt_dev *d, bool monitored)
{
	struct ummunot_cache *c = NULL;
	uint64_t old = 0;
	int r;

	r = ummunot_cache_create(d->pd, NULL, &c);
	if (r == -ENOENT)
		vt_skip("/dev/ummunot does not exist (module not loaded)");
	if (r < 0)
		vt_fail("ummunot_cache_create: %s", strerror(-r));
	if (!monitored) {
		/* The negative control: no event type reaches the cache. */
		VT_OK("ummunot_monitor_set_filter(0)",
		      ummunot_monitor_set_filter(ummunot_cache_monitor(c), 0, &old));
		VT_EQ("filter before switching it off", UMMUNOT_EVENT_MASK_DEFAULT, old);
	}
	return c;
}

void vt_cache_stats(struct ummunot_cache *c, struct ummunot_cache_stats *st)
{
	VT_OK("ummunot_cache_stats", ummunot_cache_stats(c, st));
}

uint64_t vt_invalidations(const struct ummunot_cache_stats *st)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		n += st->invalidations[i];
	return n;
}

void vt_cache_destroy_clean(struct ummunot_cache *c)
{
	struct ummunot_cache_stats st;
	struct ummunot_stats ks;
	int r;

	r = ummunot_cache_flush(c);
	if (r < 0)
		vt_fail("ummunot_cache_flush: %s", strerror(-r));
	vt_cache_stats(c, &st);
	VT_EQ("deregistrations after flush (== registrations)", st.registrations,
	      st.deregistrations);
	VT_EQ("pinned bytes after flush", 0, st.pinned_bytes);
	VT_EQ("entries after flush", 0, st.entries);
	VT_OK("ummunot_monitor_stats",
	      ummunot_monitor_stats(ummunot_cache_monitor(c), &ks));
	VT_EQ("regions the module still watches after flush", 0, ks.regions);
	ummunot_cache_destroy(c);
}

void vt_pattern(unsigned char *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i;

	for (i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)(x | 1);	/* never 0: fresh pages are */
	}
}

/* ------------------------------------------------------------------ */

static const char *event_name(uint32_t t)
{
	switch (t) {
	case UMMUNOT_EVENT_UNMAP: return "UNMAP";
	case UMMUNOT_EVENT_CLEAR: return "CLEAR";
	case UMMUNOT_EVENT_RELEASE: return "RELEASE";
	case UMMUNOT_EVENT_MIGRATE: return "MIGRATE";
	case UMMUNOT_EVENT_OTHER: return "OTHER";
	default: return "?";
	}
}

/* One pass; returns through the checks, fails the test otherwise. */
static void reuse_once(struct vt_dev *d, const struct vt_reuse_ops *ops, bool monitored)
{
	const size_t xfer = 2 * vt_page;
	const char *mode = monitored ? "monitoring on" : "monitoring off";
	struct ummunot_cache_stats st;
	const struct ummunot_reg *r1, *r2;
	struct vt_pair p;
	struct ummunot_cache *c;
	unsigned char *a, *b, *moved;
	size_t off;
	uint32_t rkey1;
	int s;

	/* Well inside the buffer, in pages no allocator header shares. */
	off = (ops->len / 2) & ~(vt_page - 1);
	VT_ASSERT(ops->len >= off + xfer + vt_page, "buffer too small (%zu)", ops->len);
	vt_pair_create(d, &p, 2 * xfer);
	c = vt_cache_create(d, monitored);

	a = ops->alloc(ops->len);
	VT_ASSERT(a, "allocating %zu bytes failed", ops->len);
	VT_OK("get(a)", ummunot_cache_get(c, a + off, xfer, VT_ACCESS, &r1));
	VT_ASSERT(r1->addr <= (uintptr_t)(a + off) &&
		  r1->addr + r1->length >= (uintptr_t)(a + off + xfer),
		  "registration [%#llx, +%llu) does not cover the request",
		  (unsigned long long)r1->addr, (unsigned long long)r1->length);
	rkey1 = r1->rkey;

	/* First transfer: sanity of the rig, must land in a. */
	vt_pattern(p.stage, xfer, 1);
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, 0, (uintptr_t)(a + off), r1->rkey, xfer);
	VT_EQ("status of the WRITE into a", IBV_WC_SUCCESS, s);
	VT_ASSERT(!memcmp(a + off, p.stage, xfer), "%s: first WRITE did not land in a", mode);
	VT_OK("put(a)", ummunot_cache_put(c, r1));

	/* Free it and get new memory at the same address. */
	b = ops->reuse(a, ops->len);
	VT_ASSERT(b == a, "%s: new buffer at %p, not at the old address %p: the test "
		  "must force same-address reuse", ops->what, (void *)b, (void *)a);
	VT_ASSERT(memcmp(b + off, p.stage, xfer) != 0,
		  "%s: new memory still holds the old data: not new pages", ops->what);

	VT_OK("get(b)", ummunot_cache_get(c, b + off, xfer, VT_ACCESS, &r2));
	vt_pattern(p.stage + xfer, xfer, 2);
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, xfer, (uintptr_t)(b + off), r2->rkey, xfer);
	VT_EQ("status of the WRITE into b", IBV_WC_SUCCESS, s);
	vt_cache_stats(c, &st);

	if (monitored) {
		VT_ASSERT(!memcmp(b + off, p.stage + xfer, xfer),
			  "%s, %s: the WRITE through the cache's registration did not "
			  "land in the new buffer (stale registration handed out)",
			  ops->what, mode);
		VT_EQ("misses (the second get must miss)", 2, st.misses);
		VT_EQ("hits", 0, st.hits);
		VT_ASSERT(st.invalidations[ops->expect_event] >= 1,
			  "%s: no %s invalidation counted (total %llu)", ops->what,
			  event_name(ops->expect_event),
			  (unsigned long long)vt_invalidations(&st));
		vt_log("%s, %s: second get missed after %llu %s invalidation(s) "
		       "(%llu race retries), rkey %#x -> %#x, data landed in the new buffer",
		       ops->what, mode,
		       (unsigned long long)st.invalidations[ops->expect_event],
		       event_name(ops->expect_event), (unsigned long long)st.race_retries,
		       rkey1, r2->rkey);
	} else {
		VT_EQ("hits (the stale registration is handed out)", 1, st.hits);
		VT_EQ("invalidations with monitoring off", 0, vt_invalidations(&st));
		VT_EQ("rkey of the stale hit", rkey1, r2->rkey);
		VT_ASSERT(memcmp(b + off, p.stage + xfer, xfer) != 0,
			  "%s, %s: the WRITE landed in the new buffer although the cache "
			  "had no way to know: the test cannot tell stale from fresh",
			  ops->what, mode);
		/* Where did it go?  Into the old, still pinned pages. */
		memset(p.stage, 0, xfer);
		s = vt_rdma(&p, IBV_WR_RDMA_READ, 0, (uintptr_t)(b + off), r2->rkey, xfer);
		VT_EQ("status of the READ back through the stale key", IBV_WC_SUCCESS, s);
		VT_ASSERT(!memcmp(p.stage, p.stage + xfer, xfer),
			  "%s: READ through the stale key does not return the data", mode);
		moved = ops->moved ? ops->moved() : NULL;
		if (moved)
			VT_ASSERT(!memcmp(moved + off, p.stage + xfer, xfer),
				  "%s: the data is not in the moved pages either", mode);
		vt_log("%s, %s: second get hit the stale rkey %#x, WRITE completed "
		       "successfully, data went to the old pages%s (negative control)",
		       ops->what, mode, rkey1, moved ? " (now mapped elsewhere by mremap)" : "");
	}
	VT_OK("put(b)", ummunot_cache_put(c, r2));
	ops->release(b, ops->len);
	vt_cache_destroy_clean(c);
	vt_pair_destroy(&p);
}

int vt_reuse_run(const struct vt_reuse_ops *ops)
{
	struct vt_dev d;
	double t0 = vt_now();

	vt_dev_open(&d);
	reuse_once(&d, ops, true);
	reuse_once(&d, ops, false);
	vt_dev_close(&d);
	vt_log("%s: both outcomes as expected (%.2f s)", ops->what, vt_now() - t0);
	return VT_EXIT_PASS;
}
