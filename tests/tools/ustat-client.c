// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ustat-client: a known ummunot workload for the ummunot-stat VM tests.
 *
 *   ustat-client --ready FILE [--ring N] [--regions N] [--mprotect K]
 *                [--munmap M] [--filter-all] [--user-area] [--no-hello]
 *
 * Opens /dev/ummunot, handshakes asking for a ring of N entries (0: the
 * module's default), maps N one-page anonymous regions, touches and
 * registers each (cookie = index), mprotect()s the first K pages read-only,
 * munmap()s the last M pages, never consumes the ring, and with --user-area
 * writes the user area in the format of include/ummunot/user_area.h with
 * the fixed values below.  It then checks with UMMUNOT_IOC_GET_STATS that
 * the kernel counted what this program predicts (so a wrong prediction is
 * reported here, not blamed on ummunot-stat), writes "ready" to FILE and
 * waits for SIGTERM or SIGINT.  Exit status 0 on a clean stop, 1 on any
 * failure (with a message on stderr).
 *
 * Predictions (regions are single pages, so every mprotect/munmap
 * invalidation touches each region exactly once):
 *   default filter: protection_vma is filtered: filtered_protection_vma = K;
 *   --filter-all:   the K protections are delivered events;
 *   the M unmaps are delivered events; events written = min(total, ring),
 *   the rest are dropped (overflow set once); armed = N - events generated.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <linux/ummunot.h>
#include <ummunot/user_area.h>

/* The user-area values written with --user-area (the tests expect these). */
#define UA_HITS			1234
#define UA_MISSES		56
#define UA_INVAL_RESYNC		2
#define UA_INVAL_UNMAP		64
#define UA_EVICTIONS		3
#define UA_PINNED_BYTES		40960
#define UA_ENTRIES		10
#define UA_REGISTRATIONS	80
#define UA_DEREGISTRATIONS	70

static void die(const char *fmt, const char *arg, int err)
{
	fprintf(stderr, "ustat-client: ");
	fprintf(stderr, fmt, arg);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
	exit(1);
}

static unsigned long parse_num(const char *opt, const char *s)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end)
		die("%s needs a number", opt, 0);
	return v;
}

static void expect(const char *what, unsigned long long want,
		   unsigned long long got)
{
	if (want != got) {
		fprintf(stderr, "ustat-client: kernel stats %s: predicted %llu, got %llu\n",
			what, want, got);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	unsigned long ring_req = 0, nregions = 16, nprot = 0, nunmap = 0;
	const char *ready = NULL;
	int filter_all = 0, user_area = 0, no_hello = 0;
	struct ummunot_hello hello;
	struct ummunot_region *regs;
	struct ummunot_batch batch;
	struct ummunot_stats st;
	long page = sysconf(_SC_PAGESIZE);
	unsigned long i;
	char *area;
	void *ring;
	sigset_t set;
	int fd, sig;

	for (i = 1; i < (unsigned long)argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < (unsigned long)argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--filter-all")) {
			filter_all = 1;
		} else if (!strcmp(a, "--user-area")) {
			user_area = 1;
		} else if (!strcmp(a, "--no-hello")) {
			no_hello = 1;
		} else if (!v) {
			die("unknown option or missing value: %s", a, 0);
		} else {
			if (!strcmp(a, "--ready"))
				ready = v;
			else if (!strcmp(a, "--ring"))
				ring_req = parse_num(a, v);
			else if (!strcmp(a, "--regions"))
				nregions = parse_num(a, v);
			else if (!strcmp(a, "--mprotect"))
				nprot = parse_num(a, v);
			else if (!strcmp(a, "--munmap"))
				nunmap = parse_num(a, v);
			else
				die("unknown option %s", a, 0);
			i++;
		}
	}
	if (!ready)
		die("%s", "--ready FILE is required", 0);
	if (nregions == 0 || nprot + nunmap > nregions)
		die("%s", "need 1 <= regions and mprotect + munmap <= regions", 0);

	/* Block the stop signals now: sigwait() collects them at the end. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);

	fd = open("/dev/ummunot", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open %s", "/dev/ummunot", errno);

	if (!no_hello) {
		memset(&hello, 0, sizeof(hello));
		hello.abi_version = UMMUNOT_ABI_VERSION;
		hello.features = UMMUNOT_FEATURES_V1;
		hello.ring_entries = (__u32)ring_req;
		if (ioctl(fd, UMMUNOT_IOC_HELLO, &hello))
			die("%s", "UMMUNOT_IOC_HELLO", errno);
		ring = mmap(NULL, hello.ring_mmap_size, PROT_READ | PROT_WRITE,
			    MAP_SHARED, fd, (off_t)hello.ring_mmap_offset);
		if (ring == MAP_FAILED)
			die("%s", "mmap of the ring", errno);

		if (filter_all) {
			struct ummunot_filter f = { .mask = UMMUNOT_EVENT_MASK_ALL };

			if (ioctl(fd, UMMUNOT_IOC_SET_FILTER, &f))
				die("%s", "UMMUNOT_IOC_SET_FILTER", errno);
		}

		area = mmap(NULL, nregions * page, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (area == MAP_FAILED)
			die("%s", "mmap of the regions", errno);
		regs = calloc(nregions, sizeof(*regs));
		if (!regs)
			die("%s", "calloc", errno);
		for (i = 0; i < nregions; i++) {
			/* Populate: protection changes only notify for mapped pages. */
			area[i * page] = 1;
			regs[i].start = (__u64)(uintptr_t)(area + i * page);
			regs[i].length = page;
			regs[i].cookie = i;
		}
		memset(&batch, 0, sizeof(batch));
		batch.ptr = (__u64)(uintptr_t)regs;
		batch.count = (__u32)nregions;
		if (ioctl(fd, UMMUNOT_IOC_REGISTER, &batch))
			die("%s", "UMMUNOT_IOC_REGISTER", errno);

		if (nprot && mprotect(area, nprot * page, PROT_READ))
			die("%s", "mprotect", errno);
		if (nunmap && munmap(area + (nregions - nunmap) * page, nunmap * page))
			die("%s", "munmap", errno);

		if (user_area) {
			volatile __u64 *w = (volatile __u64 *)((char *)ring +
						UMMUNOT_RING_USER_AREA_OFFSET);

			w[UMMUNOT_USER_AREA_WORD_VERSION] = UMMUNOT_USER_AREA_VERSION;
			w[UMMUNOT_USER_AREA_WORD_HITS] = UA_HITS;
			w[UMMUNOT_USER_AREA_WORD_MISSES] = UA_MISSES;
			w[UMMUNOT_USER_AREA_WORD_INVALIDATIONS] = UA_INVAL_RESYNC;
			w[UMMUNOT_USER_AREA_WORD_INVALIDATIONS + UMMUNOT_EVENT_UNMAP] = UA_INVAL_UNMAP;
			w[UMMUNOT_USER_AREA_WORD_EVICTIONS] = UA_EVICTIONS;
			w[UMMUNOT_USER_AREA_WORD_PINNED_BYTES] = UA_PINNED_BYTES;
			w[UMMUNOT_USER_AREA_WORD_ENTRIES] = UA_ENTRIES;
			w[UMMUNOT_USER_AREA_WORD_REGISTRATIONS] = UA_REGISTRATIONS;
			w[UMMUNOT_USER_AREA_WORD_DEREGISTRATIONS] = UA_DEREGISTRATIONS;
			/*
			 * Magic last, with a release store: a reader that
			 * loads magic with acquire sees the counters.  (The
			 * kernel's fdinfo reader takes no acquire; this test
			 * reads only after the ready file, so it sees all.)
			 */
			__atomic_store_n(&w[UMMUNOT_USER_AREA_WORD_MAGIC],
					 UMMUNOT_USER_AREA_MAGIC, __ATOMIC_RELEASE);
		}

		/* Check the kernel agrees with the prediction in the header. */
		{
			unsigned long long prot_ev = filter_all ? nprot : 0;
			unsigned long long gen = prot_ev + nunmap;
			unsigned long long ring_n = hello.ring_entries;
			unsigned long long written = gen < ring_n ? gen : ring_n;
			unsigned long long prot_w = prot_ev < ring_n ? prot_ev : ring_n;

			memset(&st, 0, sizeof(st));
			if (ioctl(fd, UMMUNOT_IOC_GET_STATS, &st))
				die("%s", "UMMUNOT_IOC_GET_STATS", errno);
			expect("regions", nregions, st.regions);
			expect("regions_armed", nregions - gen, st.regions_armed);
			expect("events", written, st.events);
			expect("dropped", gen - written, st.dropped);
			expect("overflows", gen > ring_n, st.overflows);
			expect("ring_high_water", written, st.ring_high_water);
			expect("delivered[protection_vma]", prot_w,
			       st.delivered[UMMUNOT_EVENT_PROTECTION_VMA]);
			expect("delivered[unmap]", written - prot_w,
			       st.delivered[UMMUNOT_EVENT_UNMAP]);
			expect("filtered[protection_vma]", filter_all ? 0 : nprot,
			       st.filtered[UMMUNOT_EVENT_PROTECTION_VMA]);
		}
	}

	{
		FILE *f = fopen(ready, "w");

		if (!f || fprintf(f, "ready %d\n", (int)getpid()) < 0 || fclose(f))
			die("write %s", ready, errno);
	}
	if (sigwait(&set, &sig))
		die("%s", "sigwait", errno);
	return 0;
}
