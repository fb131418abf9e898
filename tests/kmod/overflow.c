// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Ring overflow: events beyond capacity are dropped and counted, overflow is sticky until RESYNC, seq shows the gap. */
#include "helpers.h"

#include <poll.h>
#include <sys/mman.h>

#define NR 100

static int readable(struct t_file *f)
{
	struct pollfd pfd = { .fd = f->fd, .events = POLLIN };
	int n = poll(&pfd, 1, 0);

	T_ASSERT(n >= 0, "poll: %s", t_errname(errno));
	return n == 1 && (pfd.revents & POLLIN);
}

int main(int argc, char **argv)
{
	static struct ummunot_region regs[NR];
	static bool seen[NR];
	struct ummunot_stats st;
	struct ummunot_event ev;
	uint64_t gen, prod, h;
	uint32_t idx;
	struct t_file f;
	uintptr_t base;
	char *p, *q;
	int ret;

	t_init(argc, argv);
	t_file_open(&f, 1);	/* rounded up to the minimum */
	T_EQ("ring entries", UMMUNOT_RING_MIN_ENTRIES, f.hello.ring_entries);

	p = t_map_anon(NR, false);
	base = (uintptr_t)p;
	for (int i = 0; i < NR; i++)
		regs[i] = (struct ummunot_region){ .start = base + i * t_page,
						   .length = t_page,
						   .cookie = 1000 + i };
	ret = t_register_batch(f.fd, regs, NR, &idx);
	T_ASSERT(ret == 0, "REGISTER %d regions: %s (index %u)", NR,
		 t_errname(-ret), idx);

	T_OK("munmap", munmap(p, NR * t_page));
	prod = t_producer(&f);	/* (C) */
	T_EQ("events in the ring", UMMUNOT_RING_MIN_ENTRIES, prod - f.cons);
	T_ASSERT(t_overflow(&f) != 0, "overflow word not set after %d events into %d entries",
		 NR, UMMUNOT_RING_MIN_ENTRIES);
	T_EQ("hdr->dropped", NR - UMMUNOT_RING_MIN_ENTRIES, t_dropped(&f));
	T_ASSERT(readable(&f), "not readable with events pending");

	for (int k = 0; k < UMMUNOT_RING_MIN_ENTRIES; k++) {
		int i;

		t_take(&f, &ev);
		T_EQ("seq of delivered event", (uint64_t)k + 1, ev.seq);
		i = (int)(ev.cookie - 1000);
		T_ASSERT(i >= 0 && i < NR && !seen[i], "event with bad or repeated cookie %llu",
			 (unsigned long long)ev.cookie);
		seen[i] = true;
		t_check_event("overflowing munmap", &ev, regs[i].cookie,
			      regs[i].handle, regs[i].start,
			      regs[i].start + t_page, UMMUNOT_EVENT_UNMAP);
	}
	f.next_seq = NR + 1;	/* 65..100 were lost */

	/* Sticky: drained ring, overflow still set and still readable. */
	T_ASSERT(t_overflow(&f) != 0, "overflow cleared without RESYNC");
	T_ASSERT(readable(&f), "empty ring with overflow set is not readable");
	t_get_stats(&f, &st);
	T_EQ("stats.dropped", NR - UMMUNOT_RING_MIN_ENTRIES, st.dropped);
	T_EQ("stats.events", UMMUNOT_RING_MIN_ENTRIES, st.events);
	T_EQ("stats.overflows", 1, st.overflows);
	T_EQ("stats.regions_armed (dropped ones are disarmed too)", 0, st.regions_armed);
	T_EQ("stats.ring_high_water", UMMUNOT_RING_MIN_ENTRIES, st.ring_high_water);

	/* A new event after the gap: seq 101, overflow still set. */
	q = t_map_anon(1, true);
	h = t_register(&f, (uintptr_t)q, t_page, 7);
	T_OK("munmap", munmap(q, t_page));
	{
		uint64_t pr = t_producer(&f);

		T_EQ("pending after post-overflow event", 1, pr - f.cons);
		t_take(&f, &ev);
		t_check_event("post-overflow", &ev, 7, h, (uintptr_t)q,
			      (uintptr_t)q + t_page, UMMUNOT_EVENT_UNMAP);
		T_EQ("seq after the gap", NR + 1, ev.seq);
		f.next_seq = NR + 2;
	}
	T_ASSERT(t_overflow(&f) != 0, "overflow cleared by a later event");

	T_EQ("RESYNC dropped", NR - UMMUNOT_RING_MIN_ENTRIES, t_resync(&f));
	T_EQ("overflow after RESYNC", 0, t_overflow(&f));
	T_EQ("hdr->dropped is cumulative", NR - UMMUNOT_RING_MIN_ENTRIES, t_dropped(&f));
	T_ASSERT(!readable(&f), "readable after RESYNC with an empty ring");
	T_EQ("second RESYNC dropped", 0, t_resync(&f));

	/* Fill exactly, then one more: dropped, generation moves, producer does not. */
	p = t_map_anon(UMMUNOT_RING_MIN_ENTRIES + 1, false);
	base = (uintptr_t)p;
	for (int i = 0; i <= UMMUNOT_RING_MIN_ENTRIES; i++)
		regs[i] = (struct ummunot_region){ .start = base + i * t_page,
						   .length = t_page,
						   .cookie = 5000 + i };
	ret = t_register_batch(f.fd, regs, UMMUNOT_RING_MIN_ENTRIES + 1, &idx);
	T_ASSERT(ret == 0, "REGISTER: %s", t_errname(-ret));
	T_OK("munmap", munmap(p, UMMUNOT_RING_MIN_ENTRIES * t_page));
	T_EQ("full ring", UMMUNOT_RING_MIN_ENTRIES, t_producer(&f) - f.cons);
	T_EQ("no overflow yet", 0, t_overflow(&f));
	gen = t_generation(&f);
	prod = t_producer(&f);
	T_OK("munmap", munmap(p + UMMUNOT_RING_MIN_ENTRIES * t_page, t_page));
	T_ASSERT(t_generation(&f) != gen, "generation did not move on overflow");
	T_EQ("producer on overflow", prod, t_producer(&f));
	T_ASSERT(t_overflow(&f) != 0, "overflow not set");
	t_get_stats(&f, &st);
	T_EQ("stats.overflows", 2, st.overflows);
	T_EQ("stats.dropped", NR - UMMUNOT_RING_MIN_ENTRIES + 1, st.dropped);
	for (int k = 0; k < UMMUNOT_RING_MIN_ENTRIES; k++) {
		t_take(&f, &ev);
		T_EQ("seq", f.next_seq + k, ev.seq);
	}
	f.next_seq += UMMUNOT_RING_MIN_ENTRIES + 1;
	T_EQ("RESYNC dropped", 1, t_resync(&f));

	/* A bogus consumer index only makes the ring look full. */
	__atomic_store_n(&f.hdr->consumer, f.cons + 12345, __ATOMIC_RELEASE); /* (D) */
	q = t_map_anon(1, true);
	h = t_register(&f, (uintptr_t)q, t_page, 8);
	prod = t_producer(&f);
	T_OK("munmap", munmap(q, t_page));
	T_EQ("producer with bogus consumer", prod, t_producer(&f));
	T_ASSERT(t_overflow(&f) != 0, "bogus consumer: overflow not set");
	__atomic_store_n(&f.hdr->consumer, f.cons, __ATOMIC_RELEASE); /* (D) */
	T_EQ("RESYNC dropped", 1, t_resync(&f));
	f.next_seq++;
	q = t_map_anon(1, true);
	h = t_register(&f, (uintptr_t)q, t_page, 9);
	T_OK("munmap", munmap(q, t_page));
	t_expect_event(&f, 9, h, (uintptr_t)q, (uintptr_t)q + t_page,
		       UMMUNOT_EVENT_UNMAP);

	t_file_close(&f);
	return T_EXIT_PASS;
}
