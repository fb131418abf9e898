// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Event drain throughput and visibility latency, in the VM.
 *
 *  drain: register N one-page regions over one mapping, munmap it (N
 *         events land in the ring before munmap returns), then time how
 *         long ummunot_monitor_read() takes to consume them all, in
 *         batches of 256: events per second.
 *  latency: a second thread spins on ummunot_monitor_changed() (one
 *         acquire load of the ring's generation word, (F) pairing with the
 *         kernel's (E)); the main thread munmaps a watched region and
 *         takes the time right after munmap returns.  Reported: the
 *         spinner's time of seeing the change minus munmap's return
 *         (negative: seen before munmap returned, as the ABI promises the
 *         event exists by then) and minus munmap's start.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#include "bench-util.h"

static struct ummunot_monitor *mon;
static atomic_int phase;		/* 0 idle, 1 armed: spin, 2 seen, 3 quit */
static _Atomic uint64_t seen_ns;

static void *spinner(void *arg)
{
	(void)arg;
	for (;;) {
		int ph;
		while ((ph = atomic_load(&phase)) == 0 || ph == 2)
			sched_yield();
		if (ph == 3)
			return NULL;
		while (!ummunot_monitor_changed(mon))
			;
		atomic_store(&seen_ns, bu_now_ns());
		atomic_store(&phase, 2);
	}
}

int main(int argc, char **argv)
{
	bu_init("vm-events", argc, argv);
	const unsigned int N = 65536;
	const int drain_reps = bu_quick ? 5 : 15, lat_reps = bu_quick ? 300 : 1000;
	struct ummunot_monitor_attr attr = {.ring_entries = 2 * N};
	static struct ummunot_region regs[65536];
	static struct ummunot_event ev[256];
	double *rate = calloc(drain_reps, sizeof(double));
	double *lat_ret = calloc(lat_reps, sizeof(double));
	double *lat_start = calloc(lat_reps, sizeof(double));

	BU_OK("ummunot_monitor_open", ummunot_monitor_open(&attr, &mon));
	for (int rep = 0; rep < drain_reps; rep++) {
		unsigned char *m = mmap(NULL, (size_t)N * 4096, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			bu_die("mmap: %s", strerror(errno));
		for (unsigned int i = 0; i < N; i++)
			regs[i] = (struct ummunot_region){
				.start = (uintptr_t)m + (size_t)i * 4096,
				.length = 4096, .cookie = i};
		for (unsigned int i = 0; i < N; i += 4096)
			BU_OK("register", ummunot_monitor_register(mon, regs + i, 4096, NULL));
		BU_SYS("munmap", munmap(m, (size_t)N * 4096));
		uint64_t t0 = bu_now_ns(), got = 0;
		for (;;) {
			int n = BU_OK("read", ummunot_monitor_read(mon, ev, 256));
			if (n == 0)
				break;
			got += n;
		}
		uint64_t t1 = bu_now_ns();
		if (got != N)
			bu_die("drain: %llu events for %u regions", (unsigned long long)got, N);
		rate[rep] = N / ((t1 - t0) / 1e9);
		for (unsigned int i = 0; i < N; i += 4096) {
			uint64_t h[4096];
			for (unsigned int j = 0; j < 4096; j++)
				h[j] = regs[i + j].handle;
			BU_OK("unregister", ummunot_monitor_unregister(mon, h, 4096, NULL));
		}
	}
	bu_log("drain done");

	pthread_t th;
	pthread_create(&th, NULL, spinner, NULL);
	for (int rep = 0; rep < lat_reps; rep++) {
		unsigned char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			bu_die("mmap: %s", strerror(errno));
		m[0] = 1;
		struct ummunot_region r = {.start = (uintptr_t)m, .length = 4096};
		BU_OK("register", ummunot_monitor_register(mon, &r, 1, NULL));
		atomic_store(&phase, 1);
		usleep(200);		/* let the spinner reach its loop */
		uint64_t t0 = bu_now_ns();
		BU_SYS("munmap", munmap(m, 4096));
		uint64_t t1 = bu_now_ns();
		while (atomic_load(&phase) != 2)
			;
		uint64_t ts = atomic_load(&seen_ns);
		lat_ret[rep] = (double)ts - (double)t1;
		lat_start[rep] = (double)ts - (double)t0;
		int n = BU_OK("read", ummunot_monitor_read(mon, ev, 4));
		if (n != 1 || ev[0].handle != r.handle)
			bu_die("latency: expected the region's event, got %d", n);
		BU_OK("unregister", ummunot_monitor_unregister(mon, (const uint64_t *)&r.handle, 1, NULL));
		atomic_store(&phase, 0);
	}
	atomic_store(&phase, 3);
	pthread_join(th, NULL);

	bu_json_obj_begin(NULL);
	bu_json_str("bench", "events");
	bu_json_u64("drain_events", N);
	bu_json_num("drain_events_per_s", bu_median(rate, drain_reps));
	bu_json_u64("latency_samples", lat_reps);
	bu_json_num("seen_minus_return_ns_median", bu_median(lat_ret, lat_reps));
	bu_json_num("seen_minus_return_ns_p90", lat_ret[lat_reps * 9 / 10]);
	bu_json_num("seen_minus_start_ns_median", bu_median(lat_start, lat_reps));
	bu_json_obj_end();
	ummunot_monitor_close(mon);
	return 0;
}
