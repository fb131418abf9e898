// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * How ummunot scales with the number of watched regions, and what they
 * cost in kernel memory.  Runs in the VM with max_regions >= 10^6 and
 * max_ring_entries >= 2^18 (scripts/bench passes both as --param).
 *
 *  1. Register/unregister one region while n others are watched,
 *     n = 10^2 .. 10^6 (median of single-region ioctls at each n).
 *  2. One munmap() that invalidates k registered regions, k = 1, 10^3, 10^5
 *     (the ring holds them all, so none is lost), and the per-region cost.
 *  3. Kernel bytes per watched region at the largest n: the Slab and
 *     MemAvailable deltas of /proc/meminfo (the region objects and the
 *     xarray and interval-tree nodes are all slab) and the ummunot_kregion
 *     line of /proc/slabinfo when the cache is not merged; and ring bytes
 *     per entry from the handshake's mmap size.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#include "bench-util.h"

#define STRIDE		8192ul		/* one page watched, one page gap */
#define BATCH		8192u

static struct ummunot_monitor *mon;
static struct ummunot_region *regs;
static uint64_t *handles;
static size_t nr;
static uintptr_t base;

/* Watch regions [nr, n) of the (unmapped) address range at base. */
static void grow(size_t n)
{
	while (nr < n) {
		unsigned int c = n - nr < BATCH ? (unsigned int)(n - nr) : BATCH;
		for (unsigned int i = 0; i < c; i++) {
			regs[nr + i] = (struct ummunot_region){
				.start = base + (nr + i) * STRIDE,
				.length = 4096, .cookie = nr + i,
			};
		}
		BU_OK("register", ummunot_monitor_register(mon, regs + nr, c, NULL));
		for (unsigned int i = 0; i < c; i++)
			handles[nr + i] = regs[nr + i].handle;
		nr += c;
	}
}

/* Slab objects of one cache, from /proc/slabinfo: active_objs objsize. */
static int slab_line(const char *name, long *objs, long *objsize)
{
	FILE *f = fopen("/proc/slabinfo", "r");
	char line[512], n[128];
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		long a, b, c;
		if (sscanf(line, "%127s %ld %ld %ld", n, &a, &b, &c) == 4 &&
		    strcmp(n, name) == 0) {
			*objs = a;
			*objsize = c;
			found = 1;
			break;
		}
	}
	fclose(f);
	return found;
}

static void drop_caches(void)
{
	FILE *f = fopen("/proc/sys/vm/drop_caches", "w");

	if (f) {
		fputs("3\n", f);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	bu_init("vm-scale", argc, argv);
	const size_t max_n = bu_quick ? 100000 : 1000000;
	const size_t kmax = 100000;
	struct ummunot_monitor_attr attr = {.ring_entries = 262144};
	struct ummunot_monitor_info info;
	const int samples = bu_quick ? 200 : 1000;
	double *t_reg = calloc(samples, sizeof(double));
	double *t_unreg = calloc(samples, sizeof(double));

	/* User memory first (touched), so that the deltas are the kernel's. */
	regs = calloc(max_n + 1, sizeof(*regs));
	handles = calloc(max_n + 1, sizeof(*handles));
	if (!regs || !handles || !t_reg || !t_unreg)
		bu_die("out of memory");
	memset(regs, 1, (max_n + 1) * sizeof(*regs));
	memset(handles, 1, (max_n + 1) * sizeof(*handles));
	BU_OK("ummunot_monitor_open", ummunot_monitor_open(&attr, &mon));
	BU_OK("ummunot_monitor_query", ummunot_monitor_query(mon, &info));
	if (info.max_regions < max_n + 1)
		bu_die("max_regions is %u, need %zu (insmod ... max_regions=2000000)",
		       info.max_regions, max_n + 1);
	drop_caches();
	long slab0 = bu_meminfo_kb("Slab"), avail0 = bu_meminfo_kb("MemAvailable");
	/* Address space only: regions need not be mapped. */
	void *p = mmap(NULL, (max_n + 1) * STRIDE, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		bu_die("mmap: %s", strerror(errno));
	base = (uintptr_t)p;

	bu_json_obj_begin(NULL);
	bu_json_str("bench", "scale");
	bu_json_u64("ring_entries", info.ring_entries);
	bu_json_u64("max_regions", info.max_regions);
	bu_json_arr_begin("register");
	for (size_t n = 100; n <= max_n; n *= 10) {
		grow(n);
		/* One more region, registered and unregistered alone. */
		struct ummunot_region r = {.start = base + max_n * STRIDE, .length = 4096};
		for (int s = 0; s < samples; s++) {
			uint64_t t0 = bu_now_ns();
			BU_OK("register", ummunot_monitor_register(mon, &r, 1, NULL));
			uint64_t t1 = bu_now_ns();
			BU_OK("unregister", ummunot_monitor_unregister(mon, (const uint64_t *)&r.handle, 1, NULL));
			uint64_t t2 = bu_now_ns();
			t_reg[s] = (double)(t1 - t0);
			t_unreg[s] = (double)(t2 - t1);
		}
		bu_json_obj_begin(NULL);
		bu_json_u64("regions", n);
		bu_json_num("register_ns", bu_median(t_reg, samples));
		bu_json_num("unregister_ns", bu_median(t_unreg, samples));
		bu_json_obj_end();
		bu_log("register/unregister at %zu regions", n);
	}
	bu_json_arr_end();

	/* Memory at max_n regions. */
	drop_caches();
	long slab1 = bu_meminfo_kb("Slab"), avail1 = bu_meminfo_kb("MemAvailable");
	long objs = 0, objsize = 0;
	int have_slab = slab_line("ummunot_kregion", &objs, &objsize);
	bu_json_obj_begin("memory");
	bu_json_u64("regions", nr);
	bu_json_num("slab_bytes_per_region", (slab1 - slab0) * 1024.0 / nr);
	bu_json_num("memavailable_bytes_per_region", (avail0 - avail1) * 1024.0 / nr);
	if (have_slab) {
		bu_json_u64("kregion_objects", objs);
		bu_json_u64("kregion_objsize", objsize);
	}
	bu_json_u64("ring_entries", info.ring_entries);
	bu_json_u64("ring_entry_size", info.entry_size);
	/* The mapping is one header page plus the entries. */
	bu_json_num("ring_bytes_per_entry",
		    (4096.0 + (double)info.ring_entries * info.entry_size) / info.ring_entries);
	bu_json_obj_end();
	bu_log("memory: %.1f slab bytes per region", (slab1 - slab0) * 1024.0 / nr);

	/* Unwatch everything, then the munmap fan-out. */
	for (size_t i = 0; i < nr; i += BATCH) {
		unsigned int c = nr - i < BATCH ? (unsigned int)(nr - i) : BATCH;
		BU_OK("unregister", ummunot_monitor_unregister(mon, handles + i, c, NULL));
	}
	nr = 0;
	munmap(p, (max_n + 1) * STRIDE);

	static struct ummunot_event ev[4096];
	bu_json_arr_begin("munmap_fanout");
	for (size_t k = 1; k <= kmax; k *= (k < 1000 ? 1000 : 100)) {
		const int reps = k >= 100000 ? (bu_quick ? 3 : 7) : (bu_quick ? 20 : 50);
		double *t = calloc(reps, sizeof(double));
		for (int rep = 0; rep < reps; rep++) {
			unsigned char *m = mmap(NULL, k * 4096, PROT_READ | PROT_WRITE,
						MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (m == MAP_FAILED)
				bu_die("mmap: %s", strerror(errno));
			base = (uintptr_t)m;
			for (size_t i = 0; i < k; i += BATCH) {
				unsigned int c = k - i < BATCH ? (unsigned int)(k - i) : BATCH;
				for (unsigned int j = 0; j < c; j++)
					regs[i + j] = (struct ummunot_region){
						.start = base + (i + j) * 4096,
						.length = 4096, .cookie = i + j};
				BU_OK("register", ummunot_monitor_register(mon, regs + i, c, NULL));
				for (unsigned int j = 0; j < c; j++)
					handles[i + j] = regs[i + j].handle;
			}
			uint64_t t0 = bu_now_ns();
			BU_SYS("munmap", munmap(m, k * 4096));
			t[rep] = (double)(bu_now_ns() - t0);
			size_t got = 0;
			for (;;) {
				int n = BU_OK("read", ummunot_monitor_read(mon, ev, 4096));
				if (n == 0)
					break;
				got += n;
			}
			if (got != k)
				bu_die("munmap of %zu regions: %zu events", k, got);
			for (size_t i = 0; i < k; i += BATCH) {
				unsigned int c = k - i < BATCH ? (unsigned int)(k - i) : BATCH;
				BU_OK("unregister", ummunot_monitor_unregister(mon, handles + i, c, NULL));
			}
		}
		double med = bu_median(t, reps);
		bu_json_obj_begin(NULL);
		bu_json_u64("regions", k);
		bu_json_num("munmap_ns", med);
		bu_json_num("ns_per_region", med / k);
		bu_json_obj_end();
		bu_log("munmap invalidating %zu regions: %.0f ns", k, med);
		free(t);
	}
	bu_json_arr_end();
	bu_json_obj_end();
	ummunot_monitor_close(mon);
	return 0;
}
