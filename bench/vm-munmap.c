// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Cost added to munmap() of a watched 64 KiB region, untouched and with
 * every page touched: no monitor vs ummunot (one registered region, the
 * event read after munmap returns) vs a userfaultfd monitor built the way
 * libfabric's is (UFFD_FEATURE_EVENT_UNMAP | EVENT_REMOVE, the range
 * registered with UFFDIO_REGISTER_MODE_MISSING, a reader thread consuming
 * events).  Only munmap() is timed.  Variants alternate munmap by munmap;
 * the median per round and the median of rounds give each variant's time,
 * reported with its ratio to "none" of the same run.  Runs in the VM.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#include "bench-util.h"

#define LEN	(64 * 1024)

enum variant { V_NONE, V_UMMUNOT, V_UFFD, NR_VARIANTS };
static const char *const vname[NR_VARIANTS] = {"none", "ummunot", "userfaultfd"};

static struct ummunot_monitor *mon;
static int uffd = -1;
static atomic_ulong uffd_events;
static atomic_int uffd_stop;

static void *uffd_reader(void *arg)
{
	struct uffd_msg msg[16];

	(void)arg;
	while (!atomic_load(&uffd_stop)) {
		struct pollfd p = {.fd = uffd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t n = read(uffd, msg, sizeof(msg));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			bu_die("read(userfaultfd): %s", strerror(errno));
		}
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
			/* libfabric invalidates its cache for these. */
			if (msg[i].event == UFFD_EVENT_UNMAP ||
			    msg[i].event == UFFD_EVENT_REMOVE)
				atomic_fetch_add(&uffd_events, 1);
		}
	}
	return NULL;
}

static void uffd_open(void)
{
	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		bu_die("userfaultfd: %s", strerror(errno));
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE,
	};
	BU_SYS("UFFDIO_API", ioctl(uffd, UFFDIO_API, &api));
}

/* One munmap of a fresh region under variant v; returns its time in ns. */
static double one(enum variant v, int touch)
{
	unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ummunot_region r = {0};
	struct ummunot_event ev[4];
	uint64_t t0, t1;

	if (p == MAP_FAILED)
		bu_die("mmap: %s", strerror(errno));
	if (touch)
		for (size_t i = 0; i < LEN; i += 4096)
			p[i] = 1;
	switch (v) {
	case V_NONE:
		break;
	case V_UMMUNOT:
		r.start = (uintptr_t)p;
		r.length = LEN;
		r.cookie = 1;
		BU_OK("ummunot_monitor_register", ummunot_monitor_register(mon, &r, 1, NULL));
		break;
	case V_UFFD: {
		struct uffdio_register reg = {
			.range = {.start = (uintptr_t)p, .len = LEN},
			.mode = UFFDIO_REGISTER_MODE_MISSING,
		};
		BU_SYS("UFFDIO_REGISTER", ioctl(uffd, UFFDIO_REGISTER, &reg));
		break;
	}
	default:
		break;
	}
	t0 = bu_now_ns();
	BU_SYS("munmap", munmap(p, LEN));
	t1 = bu_now_ns();
	if (v == V_UMMUNOT) {
		/* The event is in the ring before munmap returned. */
		int n = BU_OK("ummunot_monitor_read", ummunot_monitor_read(mon, ev, 4));
		if (n != 1 || ev[0].type != UMMUNOT_EVENT_UNMAP || ev[0].handle != r.handle)
			bu_die("ummunot: expected one UNMAP event, got %d", n);
		BU_OK("ummunot_monitor_unregister",
		      ummunot_monitor_unregister(mon, (const uint64_t *)&r.handle, 1, NULL));
	}
	return (double)(t1 - t0);
}

int main(int argc, char **argv)
{
	bu_init("vm-munmap", argc, argv);
	int rounds = bu_quick ? 5 : 15, per_round = bu_quick ? 100 : 300;
	double *round_med[2][NR_VARIANTS];
	double *tmp[NR_VARIANTS];
	pthread_t th;

	BU_OK("ummunot_monitor_open", ummunot_monitor_open(NULL, &mon));
	uffd_open();
	pthread_create(&th, NULL, uffd_reader, NULL);
	for (int v = 0; v < NR_VARIANTS; v++) {
		tmp[v] = calloc(per_round, sizeof(double));
		for (int t = 0; t < 2; t++)
			round_med[t][v] = calloc(rounds, sizeof(double));
	}

	/* Warm-up: page tables, the slab caches, the reader thread. */
	for (int v = 0; v < NR_VARIANTS; v++)
		for (int i = 0; i < 20; i++)
			one(v, 1);
	unsigned long uffd_before = atomic_load(&uffd_events);
	unsigned long uffd_expected = 0;

	/*
	 * Interleave at munmap granularity (rotating the order) so that the
	 * host's noise hits every variant alike; a round is per_round
	 * munmaps of each variant and yields one median per variant.
	 */
	for (int k = 0; k < rounds; k++) {
		for (int t = 0; t < 2; t++) {
			for (int i = 0; i < per_round; i++) {
				for (int j = 0; j < NR_VARIANTS; j++) {
					int v = (j + i) % NR_VARIANTS;
					tmp[v][i] = one(v, t);
				}
			}
			uffd_expected += per_round;
			for (int v = 0; v < NR_VARIANTS; v++)
				round_med[t][v][k] = bu_median(tmp[v], per_round);
		}
		bu_log("round %d/%d", k + 1, rounds);
	}
	/* Every userfaultfd munmap must have produced its UNMAP event. */
	for (int i = 0; i < 100 && atomic_load(&uffd_events) - uffd_before < uffd_expected; i++)
		usleep(10000);
	if (atomic_load(&uffd_events) - uffd_before != uffd_expected)
		bu_die("userfaultfd: %lu events for %lu munmaps",
		       atomic_load(&uffd_events) - uffd_before, uffd_expected);
	atomic_store(&uffd_stop, 1);
	pthread_join(th, NULL);

	bu_json_obj_begin(NULL);
	bu_json_str("bench", "munmap");
	bu_json_u64("region_bytes", LEN);
	bu_json_u64("rounds", rounds);
	bu_json_u64("per_round", per_round);
	bu_json_arr_begin("results");
	for (int t = 0; t < 2; t++) {
		double base = 0;
		for (int v = 0; v < NR_VARIANTS; v++) {
			double med = bu_median(round_med[t][v], rounds);
			if (v == V_NONE)
				base = med;
			bu_json_obj_begin(NULL);
			bu_json_str("pages", t ? "touched" : "untouched");
			bu_json_str("monitor", vname[v]);
			bu_json_num("munmap_ns", med);
			bu_json_num("ratio_to_none", med / base);
			bu_json_num("min_round_ns", round_med[t][v][0]);
			bu_json_num("max_round_ns", round_med[t][v][rounds - 1]);
			bu_json_obj_end();
		}
	}
	bu_json_arr_end();
	bu_json_obj_end();
	ummunot_monitor_close(mon);
	return 0;
}
