// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ummunot-demo: the stale-registration problem and its fix, over real verbs.
 *
 * An "MPI-like" loop allocates buffers of several sizes with malloc(), gets
 * their memory registrations from a libummunot cache, lets a peer QP RDMA
 * WRITE into them, frees them, and allocates again (glibc hands the same
 * addresses back).  It runs twice:
 *
 *   1. monitoring on (the default): every free() produces an invalidation
 *      event before free() returns, the cache drops the old registration,
 *      and every transfer lands in the live buffer;
 *   2. monitoring off (the cache's event filter set to 0, so the cache
 *      never hears about free()): the cache hands out registrations of
 *      freed memory, and transfers silently go to the old pages.
 *
 * The events shown are read by a second ummunot monitor that watches the
 * same buffers (the cache consumes its own ring internally).
 *
 * Usage: ummunot-demo [-d DEVICE] [-r ROUNDS] [-q]
 * Needs /dev/ummunot (the module) and an RDMA device with an IPv4-mapped
 * GID, e.g. Soft-RoCE: rdma link add rxe0 type rxe netdev eth0.
 * Exit status: 0 if monitoring on delivered every transfer to the live
 * buffer and monitoring off showed the problem (at least one stale
 * transfer), 1 otherwise, 2 on setup errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <ummunot/ummunot.h>

#define ACCESS		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)
#define XFER		4096	/* bytes per RDMA WRITE */
#define SENDS_PER_BUF	3	/* transfers into each buffer before free() */

static const size_t sizes[] = { 1 << 20, 256 << 10, 64 << 10 };
#define NR_SIZES	(sizeof(sizes) / sizeof(sizes[0]))

static bool quiet;

struct peer {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];	/* qp[0] writes into memory registered on qp[1]'s side */
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
	unsigned char *src;	/* the peer's source buffer */
	struct ibv_mr *src_mr;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "ummunot-demo: %s: %s\n", what, strerror(err));
	exit(2);
}

static const char *event_name(uint32_t type)
{
	static const char *const names[] = {
		[UMMUNOT_EVENT_UNMAP] = "UNMAP",
		[UMMUNOT_EVENT_CLEAR] = "CLEAR",
		[UMMUNOT_EVENT_PROTECTION_VMA] = "PROTECTION_VMA",
		[UMMUNOT_EVENT_PROTECTION_PAGE] = "PROTECTION_PAGE",
		[UMMUNOT_EVENT_SOFT_DIRTY] = "SOFT_DIRTY",
		[UMMUNOT_EVENT_RELEASE] = "RELEASE",
		[UMMUNOT_EVENT_MIGRATE] = "MIGRATE",
		[UMMUNOT_EVENT_EXCLUSIVE] = "EXCLUSIVE",
		[UMMUNOT_EVENT_OTHER] = "OTHER",
	};

	return type < sizeof(names) / sizeof(names[0]) && names[type] ? names[type] : "?";
}

/* ------------------------------------------------------------ verbs */

static void qp_to_rts(struct peer *p, struct ibv_qp *qp, uint32_t remote_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = p->port,
		.qp_access_flags = ACCESS,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		die("QP to INIT", errno);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->mtu;
	a.dest_qp_num = remote_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->gid;
	a.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = p->port;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			  IBV_QP_MIN_RNR_TIMER))
		die("QP to RTR", errno);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("QP to RTS", errno);
}

static void peer_open(struct peer *p, const char *want)
{
	struct ibv_device **list;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr ia;
	int n, i, k;

	memset(p, 0, sizeof(*p));
	list = ibv_get_device_list(&n);
	if (!list || !n) {
		fprintf(stderr, "ummunot-demo: no RDMA device (try Soft-RoCE: "
			"rdma link add rxe0 type rxe netdev IFACE)\n");
		exit(2);
	}
	for (i = 0; i < n; i++)
		if (!want || !strcmp(ibv_get_device_name(list[i]), want))
			break;
	if (i == n) {
		fprintf(stderr, "ummunot-demo: RDMA device %s not found\n", want);
		exit(2);
	}
	p->ctx = ibv_open_device(list[i]);
	if (!p->ctx)
		die("ibv_open_device", errno);
	printf("RDMA device %s", ibv_get_device_name(list[i]));
	ibv_free_device_list(list);
	if (ibv_query_device(p->ctx, &da))
		die("ibv_query_device", EIO);

	/* The GID that is an IPv4-mapped address (RoCE v2 over IPv4). */
	p->gid_index = -1;
	for (p->port = 1; p->port <= da.phys_port_cnt && p->gid_index < 0; p->port++) {
		if (ibv_query_port(p->ctx, p->port, &pa) || pa.state != IBV_PORT_ACTIVE)
			continue;
		for (k = 0; k < pa.gid_tbl_len; k++) {
			static const unsigned char v4[12] = { [10] = 0xff, [11] = 0xff };

			if (!ibv_query_gid(p->ctx, p->port, k, &p->gid) &&
			    !memcmp(p->gid.raw, v4, sizeof(v4))) {
				p->gid_index = k;
				p->mtu = pa.active_mtu;
				break;
			}
		}
		if (p->gid_index >= 0)
			break;
	}
	if (p->gid_index < 0) {
		fprintf(stderr, "\nummunot-demo: no active port with an IPv4-mapped GID\n");
		exit(2);
	}
	printf(", port %u, GID index %d (::ffff:%u.%u.%u.%u)\n", p->port, p->gid_index,
	       p->gid.raw[12], p->gid.raw[13], p->gid.raw[14], p->gid.raw[15]);

	p->pd = ibv_alloc_pd(p->ctx);
	p->cq = p->pd ? ibv_create_cq(p->ctx, 8, NULL, NULL, 0) : NULL;
	if (!p->cq)
		die("ibv_alloc_pd/ibv_create_cq", errno);
	for (i = 0; i < 2; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = p->cq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		p->qp[i] = ibv_create_qp(p->pd, &ia);
		if (!p->qp[i])
			die("ibv_create_qp", errno);
	}
	qp_to_rts(p, p->qp[0], p->qp[1]->qp_num);
	qp_to_rts(p, p->qp[1], p->qp[0]->qp_num);
	p->src = aligned_alloc(4096, XFER);
	p->src_mr = p->src ? ibv_reg_mr(p->pd, p->src, XFER, ACCESS) : NULL;
	if (!p->src_mr)
		die("ibv_reg_mr(source)", errno);
}

static void peer_close(struct peer *p)
{
	ibv_dereg_mr(p->src_mr);
	free(p->src);
	ibv_destroy_qp(p->qp[0]);
	ibv_destroy_qp(p->qp[1]);
	ibv_destroy_cq(p->cq);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
}

/* The peer RDMA WRITEs its source buffer to (addr, rkey); returns the status. */
static int peer_write(struct peer *p, uint64_t addr, uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)p->src, .length = XFER, .lkey = p->src_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int n;

	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(p->qp[0], &wr, &bad))
		die("ibv_post_send", EIO);
	while ((n = ibv_poll_cq(p->cq, 1, &wc)) == 0)
		sched_yield();
	if (n < 0)
		die("ibv_poll_cq", EIO);
	return wc.status;
}

/* ------------------------------------------------------------ the loop */

struct tally {
	unsigned int transfers, landed, stale, get_errors;
};

/* Show the events the watcher saw since the last call. */
static void show_events(struct ummunot_monitor *watch)
{
	struct ummunot_event ev[16];
	int n, i;

	while ((n = ummunot_monitor_read(watch, ev, 16)) > 0)
		for (i = 0; i < n; i++)
			if (!quiet)
				printf("      event %-5s [%#llx, %#llx) %4llu KiB  buf#%llu  seq %llu\n",
				       event_name(ev[i].type), (unsigned long long)ev[i].start,
				       (unsigned long long)ev[i].end,
				       (unsigned long long)(ev[i].end - ev[i].start) >> 10,
				       (unsigned long long)ev[i].cookie,
				       (unsigned long long)ev[i].seq);
	if (n == -EOVERFLOW) {
		printf("      (watcher ring overflowed; resyncing)\n");
		ummunot_monitor_resync(watch, NULL);
	}
}

static void run_loop(struct peer *p, struct ummunot_cache *cache,
		     struct ummunot_monitor *watch, unsigned int rounds, struct tally *t)
{
	uintptr_t last_addr[64] = { 0 };
	unsigned int bufno = 0, r, s, k;

	for (r = 0; r < rounds; r++) {
		for (k = 0; k < NR_SIZES; k++) {
			size_t len = sizes[k];
			size_t off = (len / 2) & ~(size_t)4095;
			unsigned char *buf = malloc(len);
			struct ummunot_region rg = { 0 };
			unsigned int reused_from = 0, j;

			if (!buf)
				die("malloc", ENOMEM);
			bufno++;
			for (j = 1; j < bufno && j < 64; j++)
				if (last_addr[j] == (uintptr_t)buf)
					reused_from = j;
			if (bufno < 64)
				last_addr[bufno] = (uintptr_t)buf;
			if (!quiet)
				printf("  buf#%-2u %4zu KiB at %p", bufno, len >> 10, (void *)buf);
			if (!quiet && reused_from)
				printf("  (same address as buf#%u, freed)", reused_from);
			if (!quiet)
				printf("\n    ");

			for (s = 0; s < SENDS_PER_BUF; s++) {
				struct ummunot_cache_stats before, after;
				const struct ummunot_reg *reg;
				uint64_t seed = ((uint64_t)bufno << 8) | s;
				int rc, status;

				/* What the application puts in the message. */
				for (j = 0; j < XFER; j++)
					p->src[j] = (unsigned char)(seed * 131 + j * 7 + 1);
				memset(buf + off, 0, XFER);
				ummunot_cache_stats(cache, &before);
				rc = ummunot_cache_get(cache, buf + off, XFER, ACCESS, &reg);
				if (rc < 0) {
					t->get_errors++;
					if (!quiet)
						printf("get: %s  ", strerror(-rc));
					continue;
				}
				ummunot_cache_stats(cache, &after);
				/* The peer got (address, rkey) in a message. */
				status = peer_write(p, (uintptr_t)(buf + off), reg->rkey);
				t->transfers++;
				if (status != IBV_WC_SUCCESS) {
					fprintf(stderr, "ummunot-demo: WRITE failed: %s\n",
						ibv_wc_status_str(status));
					exit(1);
				}
				if (!memcmp(buf + off, p->src, XFER)) {
					t->landed++;
					if (!quiet)
						printf("%s rkey %#x -> landed   ",
						       after.hits > before.hits ? "hit " : "miss",
						       reg->rkey);
				} else {
					t->stale++;
					if (!quiet)
						printf("%s rkey %#x -> STALE: went to freed pages   ",
						       after.hits > before.hits ? "hit " : "miss",
						       reg->rkey);
				}
				ummunot_cache_put(cache, reg);
			}
			if (!quiet)
				printf("\n");

			/* The watcher sees the same invalidations the cache sees. */
			rg.start = (uintptr_t)buf;
			rg.length = len;
			rg.cookie = bufno;
			if (ummunot_monitor_register(watch, &rg, 1, NULL) == 0) {
				uint64_t handle = rg.handle;

				free(buf);
				show_events(watch);
				ummunot_monitor_unregister(watch, &handle, 1, NULL);
			} else {
				free(buf);
			}
		}
	}
}

static void print_cache_stats(struct ummunot_cache *cache)
{
	struct ummunot_cache_stats st;
	struct ummunot_stats ks;
	unsigned int i;

	ummunot_cache_stats(cache, &st);
	printf("  cache:  %llu hits, %llu misses, %llu registrations, %llu deregistrations, "
	       "%llu merges, %llu evictions, %llu entries, %llu KiB pinned\n",
	       (unsigned long long)st.hits, (unsigned long long)st.misses,
	       (unsigned long long)st.registrations, (unsigned long long)st.deregistrations,
	       (unsigned long long)st.merges, (unsigned long long)st.evictions,
	       (unsigned long long)st.entries, (unsigned long long)st.pinned_bytes >> 10);
	printf("          invalidations:");
	for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
		if (st.invalidations[i])
			printf(" %s %llu", event_name(i), (unsigned long long)st.invalidations[i]);
	for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX && !st.invalidations[i]; i++)
		;
	printf("%s\n", i == UMMUNOT_EVENT_TYPE_MAX ? " none" : "");
	if (ummunot_monitor_stats(ummunot_cache_monitor(cache), &ks) == 0) {
		printf("  module: %llu regions watched now (%llu registered in all), "
		       "%llu events written, %llu dropped, ring high water %llu, filter %#llx\n",
		       (unsigned long long)ks.regions, (unsigned long long)ks.regions_registered,
		       (unsigned long long)ks.events, (unsigned long long)ks.dropped,
		       (unsigned long long)ks.ring_high_water, (unsigned long long)ks.event_mask);
		printf("          delivered:");
		for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
			if (ks.delivered[i])
				printf(" %s %llu", event_name(i), (unsigned long long)ks.delivered[i]);
		printf("; filtered:");
		for (i = 0; i < UMMUNOT_EVENT_TYPE_MAX; i++)
			if (ks.filtered[i])
				printf(" %s %llu", event_name(i), (unsigned long long)ks.filtered[i]);
		printf("\n");
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: ummunot-demo [-d DEVICE] [-r ROUNDS] [-q]\n");
	exit(2);
}

/* One pass of the loop with a fresh cache; returns its tally. */
static struct tally run_pass(struct peer *p, struct ummunot_monitor *watch, bool monitored,
			     unsigned int rounds)
{
	struct ummunot_cache *cache;
	struct tally t = { 0 };
	int rc;

	rc = ummunot_cache_create(p->pd, NULL, &cache);
	if (rc < 0)
		die("ummunot_cache_create (is the ummunot module loaded?)", -rc);
	if (!monitored) {
		/* Nothing reaches the cache: it keeps every registration. */
		rc = ummunot_monitor_set_filter(ummunot_cache_monitor(cache), 0, NULL);
		if (rc < 0)
			die("ummunot_monitor_set_filter", -rc);
	}
	run_loop(p, cache, watch, rounds, &t);
	/* Let the cache process the last free()'s event before the counters. */
	rc = ummunot_cache_poll(cache);
	if (rc < 0)
		die("ummunot_cache_poll", -rc);
	printf("\n");
	print_cache_stats(cache);
	rc = ummunot_cache_flush(cache);
	if (rc < 0)
		die("ummunot_cache_flush", -rc);
	ummunot_cache_destroy(cache);
	return t;
}

int main(int argc, char **argv)
{
	struct ummunot_monitor *watch;
	const char *dev = NULL;
	unsigned int rounds = 3;
	struct tally on, off;
	struct timespec t0, t1;
	struct peer p;
	int c, rc;

	while ((c = getopt(argc, argv, "d:r:q")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'r': rounds = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'q': quiet = true; break;
		default: usage();
		}
	}
	if (optind != argc || rounds == 0 || rounds > 20)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	/*
	 * Like an MPI library: buffers from 64 KiB up are their own mmap'd
	 * chunks, so free() unmaps them and the next malloc() of that size
	 * gets the same address back with new pages.
	 */
	mallopt(M_MMAP_THRESHOLD, 64 << 10);
	peer_open(&p, dev);
	rc = ummunot_monitor_open(NULL, &watch);
	if (rc < 0)
		die("ummunot_monitor_open (is the ummunot module loaded?)", -rc);

	printf("\n=== 1. monitoring ON: the cache hears about every free() ===\n"
	       "    (%u rounds of malloc, %d RDMA WRITEs by the peer, free; events shown "
	       "by a second monitor)\n\n", rounds, SENDS_PER_BUF);
	on = run_pass(&p, watch, true, rounds);
	printf("  => %s: all %u transfers landed in the live buffer; %u stale%s\n",
	       on.landed == on.transfers && !on.stale && !on.get_errors ? "OK" : "WRONG",
	       on.transfers, on.stale,
	       on.get_errors ? " (some gets failed)" : "");

	printf("\n=== 2. monitoring OFF (event filter 0): what happens without ummunot ===\n\n");
	off = run_pass(&p, watch, false, rounds);
	printf("  => without invalidations %u of %u transfers went to freed memory "
	       "(stale registrations, completed with success); %u landed%s\n",
	       off.stale, off.transfers, off.landed,
	       off.get_errors ? ", some gets failed" : "");

	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("\nSummary: monitoring on: %u/%u landed, %u stale; monitoring off: %u stale "
	       "(%.2f s)\n", on.landed, on.transfers, on.stale, off.stale,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	ummunot_monitor_close(watch);
	peer_close(&p);
	if (!off.stale)
		printf("(no address was reused, so nothing went stale: the problem "
		       "was not demonstrated)\n");
	return on.landed == on.transfers && !on.stale && !on.get_errors && on.transfers &&
	       off.stale ? 0 : 1;
}
