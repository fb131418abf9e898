// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* 10^5 regions in one batch; one munmap over all of them yields exactly 10^5 events, each once, seq 1..10^5. */
#include "helpers.h"

#include <sys/mman.h>

#define NR 100000
#define RING (1u << 17)	/* 131072 >= NR */

int main(int argc, char **argv)
{
	struct ummunot_region *regs;
	struct ummunot_stats st;
	struct ummunot_event ev;
	uint64_t *handles, prod;
	uint32_t idx;
	struct t_file f;
	uintptr_t base;
	uint8_t *seen;
	double t0, t1, t2;
	char *p;
	int ret;

	t_init(argc, argv);
	if (t_param_get("max_ring_entries") < RING)
		t_skip("max_ring_entries=%lld < %u", t_param_get("max_ring_entries"), RING);
	if (t_param_get("max_regions") < NR)
		t_skip("max_regions=%lld < %d", t_param_get("max_regions"), NR);
	t_file_open(&f, RING);
	T_EQ("ring entries", RING, f.hello.ring_entries);

	regs = calloc(NR, sizeof(*regs));
	handles = calloc(NR, sizeof(*handles));
	seen = calloc(NR, 1);
	T_ASSERT(regs && handles && seen, "out of memory");

	p = mmap(NULL, (size_t)NR * t_page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	T_ASSERT(p != MAP_FAILED, "mmap %d pages: %s", NR, t_errname(errno));
	base = (uintptr_t)p;
	for (int i = 0; i < NR; i++)
		regs[i] = (struct ummunot_region){ .start = base + (uint64_t)i * t_page,
						   .length = t_page, .cookie = i };
	t0 = t_now();
	ret = t_register_batch(f.fd, regs, NR, &idx);
	T_ASSERT(ret == 0, "REGISTER %d: %s (index %u)", NR, t_errname(-ret), idx);
	t1 = t_now();
	t_get_stats(&f, &st);
	T_EQ("stats.regions", NR, st.regions);

	T_OK("munmap", munmap(p, (size_t)NR * t_page));
	t2 = t_now();
	prod = t_producer(&f);	/* (C) */
	T_EQ("events after one munmap", NR, prod - f.cons);
	T_EQ("overflow", 0, t_overflow(&f));
	for (uint64_t k = 0; k < NR; k++) {
		uint64_t i;

		t_take(&f, &ev);
		T_EQ("seq", k + 1, ev.seq);
		i = ev.cookie;
		T_ASSERT(i < NR, "event with cookie %llu", (unsigned long long)i);
		T_ASSERT(!seen[i], "second event for region %llu", (unsigned long long)i);
		seen[i] = 1;
		t_check_event("munmap over 10^5 regions", &ev, i, regs[i].handle,
			      regs[i].start, regs[i].start + t_page,
			      UMMUNOT_EVENT_UNMAP);
	}
	t_expect_no_event(&f, "after draining");

	for (int i = 0; i < NR; i++)
		handles[i] = regs[i].handle;
	ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, handles, NR, &idx);
	T_ASSERT(ret == 0, "UNREGISTER %d: %s (index %u)", NR, t_errname(-ret), idx);
	t_get_stats(&f, &st);
	T_EQ("stats.regions after UNREGISTER", 0, st.regions);
	T_EQ("stats.events", NR, st.events);
	t_log("register %d: %.3fs, munmap: %.3fs (informational)", NR, t1 - t0, t2 - t1);

	free(regs);
	free(handles);
	free(seen);
	t_file_close(&f);
	return T_EXIT_PASS;
}
