// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * End to end over Soft-RoCE (rxe0 in the VM): a loop that allocates a
 * buffer, stamps it, RDMA WRITEs it to a peer QP of the same process and
 * frees it, for sizes 4 KiB .. 4 MiB, in two series:
 *
 *   "results"  malloc/free: glibc reuses the memory (its mmap threshold
 *              rises after the first free of a large chunk), so the cache
 *              mostly hits;
 *   "churn"    mmap/munmap: every buffer is really unmapped after its
 *              message, so every ummunot_cache_get() is a miss that first
 *              processes the previous buffer's invalidation;
 *
 * and three ways in each:
 *
 *   per-message  ibv_reg_mr + WRITE + ibv_dereg_mr for every message
 *   ummunot      ummunot_cache_get/put on the same PD (libummunot's cache)
 *   preregistered  one buffer registered up front, no malloc (the limit)
 *
 * Every message carries its sequence number in its first and last 8
 * bytes; the target checks both after each completion, so a stale
 * registration (the WRITE taking the old pages) is counted, not assumed.
 * Variants are interleaved message by message and the median per-message
 * time of each is reported with the ratios of the same run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <ummunot/ummunot.h>

#include "bench-util.h"

#define ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ)
#define MAX_SIZE (4u << 20)

enum variant { V_PER_MSG, V_CACHE, V_PREREG, NR_VARIANTS };
static const char *const vname[NR_VARIANTS] = {"per-message", "ummunot", "preregistered"};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp[2];
static uint8_t port = 1;
static int gid_index = -1;
static union ibv_gid gid;
static enum ibv_mtu mtu;
static unsigned char *target, *prereg;
static struct ibv_mr *target_mr, *prereg_mr;
static struct ummunot_cache *cache;
static uint64_t seq, stale;

enum series { S_MALLOC, S_CHURN, NR_SERIES };
static const char *const sname[NR_SERIES] = {"results", "churn"};

static unsigned char *buf_alloc(enum series s, size_t len)
{
	void *b;

	if (s == S_MALLOC) {
		b = malloc(len);
		if (!b)
			bu_die("malloc(%zu) failed", len);
		return b;
	}
	b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		bu_die("mmap(%zu): %s", len, strerror(errno));
	return b;
}

static void buf_free(enum series s, unsigned char *b, size_t len)
{
	if (s == S_MALLOC)
		free(b);
	else if (munmap(b, len))
		bu_die("munmap: %s", strerror(errno));
}

static void dev_open(void)
{
	const char *want = getenv("UMMUNOT_RDMA_DEV") ? getenv("UMMUNOT_RDMA_DEV") : "rxe0";
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_port_attr pa;

	if (!list || n == 0)
		bu_die("no RDMA device (is rdma_rxe loaded?)");
	for (int i = 0; i < n && !ctx; i++)
		if (strcmp(ibv_get_device_name(list[i]), want) == 0)
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		bu_die("cannot open RDMA device %s", want);
	ibv_free_device_list(list);
	if (ibv_query_port(ctx, port, &pa))
		bu_die("ibv_query_port: %s", strerror(errno));
	mtu = pa.active_mtu;
	/* The IPv4-mapped GID (::ffff:a.b.c.d): RoCE v2 over IPv4. */
	for (int i = 0; i < pa.gid_tbl_len && gid_index < 0; i++) {
		union ibv_gid g;
		static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		if (ibv_query_gid(ctx, port, i, &g) == 0 && memcmp(g.raw, v4, 12) == 0) {
			gid = g;
			gid_index = i;
		}
	}
	if (gid_index < 0)
		bu_die("%s has no IPv4-mapped GID", want);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		bu_die("PD/CQ: %s", strerror(errno));
}

static void qp_connect(struct ibv_qp *q, uint32_t remote)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = port,
		.qp_access_flags = ACCESS};

	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		bu_die("QP to INIT failed");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = remote;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = port;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		bu_die("QP to RTR failed");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		bu_die("QP to RTS failed");
}

static void pair_create(void)
{
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq,
			.qp_type = IBV_QPT_RC,
			.cap = {.max_send_wr = 4, .max_recv_wr = 4,
				.max_send_sge = 1, .max_recv_sge = 1}};
		qp[i] = ibv_create_qp(pd, &ia);
		if (!qp[i])
			bu_die("ibv_create_qp: %s", strerror(errno));
	}
	qp_connect(qp[0], qp[1]->qp_num);
	qp_connect(qp[1], qp[0]->qp_num);
}

/* One signaled WRITE of [buf, buf + len) with lkey; waits for it. */
static void rdma_write(void *buf, size_t len, uint32_t lkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = (uint32_t)len, .lkey = lkey};
	struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = (uintptr_t)target, .rkey = target_mr->rkey}};
	struct ibv_send_wr *bad;
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(qp[0], &wr, &bad))
		bu_die("ibv_post_send: %s", strerror(errno));
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		bu_die("WRITE completion: %s", n < 0 ? "poll failed" : ibv_wc_status_str(wc.status));
}

static void stamp(unsigned char *b, size_t len)
{
	seq++;
	for (size_t i = 0; i < len; i += 4096)
		b[i] = (unsigned char)seq;	/* touch every page */
	memcpy(b, &seq, 8);
	memcpy(b + len - 8, &seq, 8);
}

static void check(size_t len)
{
	uint64_t a, z;

	memcpy(&a, target, 8);
	memcpy(&z, target + len - 8, 8);
	if (a != seq || z != seq)
		stale++;
}

static void one(enum series s, enum variant v, size_t len)
{
	unsigned char *b;

	switch (v) {
	case V_PER_MSG: {
		b = buf_alloc(s, len);
		stamp(b, len);
		struct ibv_mr *mr = ibv_reg_mr(pd, b, len, ACCESS);
		if (!mr)
			bu_die("ibv_reg_mr: %s", strerror(errno));
		rdma_write(b, len, mr->lkey);
		if (ibv_dereg_mr(mr))
			bu_die("ibv_dereg_mr failed");
		buf_free(s, b, len);
		break;
	}
	case V_CACHE: {
		const struct ummunot_reg *reg;
		b = buf_alloc(s, len);
		stamp(b, len);
		BU_OK("ummunot_cache_get", ummunot_cache_get(cache, b, len, ACCESS, &reg));
		rdma_write(b, len, reg->lkey);
		BU_OK("ummunot_cache_put", ummunot_cache_put(cache, reg));
		buf_free(s, b, len);
		break;
	}
	default:
		stamp(prereg, len);
		rdma_write(prereg, len, prereg_mr->lkey);
		break;
	}
	check(len);
}

/* One series: every size, the three variants interleaved. */
static void run_series(enum series series, int min_msgs, uint64_t budget_ns)
{
	static const size_t sizes[] = {4096, 16384, 65536, 262144, 1u << 20, 4u << 20};
	const int nsizes = 6, max_msgs = 20000;
	struct ummunot_cache_stats st0, st1;

	bu_json_arr_begin(sname[series]);
	for (int i = 0; i < nsizes; i++) {
		size_t len = sizes[i];
		double med[NR_VARIANTS], *r[NR_VARIANTS];
		uint64_t msgs = 0, stale0 = stale;
		int samples = 0;

		BU_OK("stats", ummunot_cache_stats(cache, &st0));
		for (int v = 0; v < NR_VARIANTS; v++) {
			r[v] = calloc(max_msgs, sizeof(double));
			one(series, v, len);			/* warm-up */
		}
		/*
		 * Interleave at message granularity (A B C, B C A, ...) so
		 * that the host's noise hits all three alike; per-variant
		 * median over every message.  Stop after the time budget.
		 */
		uint64_t t_start = bu_now_ns();
		int k = 0;
		do {
			for (int j = 0; j < NR_VARIANTS; j++) {
				int v = (j + k) % NR_VARIANTS;
				uint64_t t0 = bu_now_ns();
				one(series, v, len);
				r[v][k] = (double)(bu_now_ns() - t0);
			}
			k++;
			msgs += NR_VARIANTS;
		} while (k < max_msgs && (k < min_msgs ||
			 bu_now_ns() - t_start < budget_ns));
		samples = k;
		BU_OK("stats", ummunot_cache_stats(cache, &st1));
		for (int v = 0; v < NR_VARIANTS; v++)
			med[v] = bu_median(r[v], samples);
		bu_json_obj_begin(NULL);
		bu_json_u64("bytes", len);
		for (int v = 0; v < NR_VARIANTS; v++) {
			char k[64];
			snprintf(k, sizeof(k), "%s_ns", vname[v]);
			bu_json_num(k, med[v]);
		}
		bu_json_num("ummunot_over_preregistered", med[V_CACHE] / med[V_PREREG]);
		bu_json_num("per_message_over_ummunot", med[V_PER_MSG] / med[V_CACHE]);
		bu_json_num("per_message_over_preregistered", med[V_PER_MSG] / med[V_PREREG]);
		bu_json_u64("messages", msgs);
		bu_json_u64("samples_per_variant", samples);
		bu_json_u64("stale", stale - stale0);
		bu_json_u64("cache_hits", st1.hits - st0.hits);
		bu_json_u64("cache_misses", st1.misses - st0.misses);
		bu_json_obj_end();
		bu_log("%s, %zu bytes: per-message %.0f ns, ummunot %.0f ns, preregistered %.0f ns",
		       sname[series], len, med[V_PER_MSG], med[V_CACHE], med[V_PREREG]);
		for (int v = 0; v < NR_VARIANTS; v++)
			free(r[v]);
	}
	bu_json_arr_end();
}

int main(int argc, char **argv)
{
	bu_init("vm-rdma", argc, argv);
	const int min_msgs = bu_quick ? 5 : 15;
	/* Per size, all three variants together. */
	const uint64_t budget_ns = bu_quick ? 4000000000ull : 12000000000ull;
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};

	setrlimit(RLIMIT_MEMLOCK, &rl);
	dev_open();
	pair_create();
	target = aligned_alloc(4096, MAX_SIZE);
	prereg = aligned_alloc(4096, MAX_SIZE);
	memset(target, 0, MAX_SIZE);
	memset(prereg, 0, MAX_SIZE);
	target_mr = ibv_reg_mr(pd, target, MAX_SIZE, ACCESS);
	prereg_mr = ibv_reg_mr(pd, prereg, MAX_SIZE, ACCESS);
	if (!target_mr || !prereg_mr)
		bu_die("ibv_reg_mr: %s", strerror(errno));
	BU_OK("ummunot_cache_create", ummunot_cache_create(pd, NULL, &cache));

	bu_json_obj_begin(NULL);
	bu_json_str("bench", "rdma");
	bu_json_u64("min_messages", min_msgs);
	bu_json_u64("budget_ns_per_size", budget_ns);
	for (int s = 0; s < NR_SERIES; s++)
		run_series(s, min_msgs, budget_ns);
	bu_json_u64("stale_total", stale);
	bu_json_obj_end();
	ummunot_cache_destroy(cache);
	ibv_destroy_qp(qp[0]);
	ibv_destroy_qp(qp[1]);
	ibv_dereg_mr(target_mr);
	ibv_dereg_mr(prereg_mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return stale ? 1 : 0;
}
