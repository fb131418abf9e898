// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * REARM returns only once the invalidation that produced the region's event
 * has finished changing its pages.
 *
 * A second thread zaps a 64 MiB region (MADV_DONTNEED: one invalidation over
 * the whole range, the page walk after the notifier callback).  The main
 * thread waits for the event, REARMs, writes a marker into the last page,
 * waits for the zap to end, then checks: the marker must still be there, or
 * a new event must say that the page changed.  A REARM that returned while
 * the zap was still walking let the marker land in an old page that the
 * zap then dropped, with no event: a re-pin in that window would hold stale
 * pages (40 of 40 rounds before the fix, on 6.1 and 6.12-rt).
 *
 * Usage: rearm-inflight [--rounds N] [--mib M]
 */
#include "helpers.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
	unsigned int rounds = 10, mib = 64, lost = 0, reported = 0, kept = 0;
	struct t_file f;
	uint64_t h;
	size_t len;
	char *p;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
			mib = (unsigned int)strtoul(argv[++i], NULL, 0);
	}
	t_init(argc, argv);
	len = (size_t)mib << 20;
	t_file_open(&f, 0);
	p = t_map_anon(len / t_page, false);
	/* Small pages only: khugepaged collapsing the range would be a real
	 * change of the region's pages, and an event the checks below do not
	 * expect (seen once on 6.1: CLEAR up to a 2 MiB boundary).  EINVAL:
	 * a kernel without transparent huge pages (PREEMPT_RT). */
	if (madvise(p, len, MADV_NOHUGEPAGE) && errno != EINVAL)
		t_fail("madvise(MADV_NOHUGEPAGE): %s", t_errname(errno));
	t_touch(p, len);
	h = t_register(&f, (uintptr_t)p, len, 7);

	for (unsigned int r = 0; r < rounds; r++) {
		volatile char *marker = p + len - t_page;
		struct ummunot_event ev;
		struct t_zap z;

		t_touch(p, len);
		/* Only after a lost round: reading the dropped marker mapped
		 * the zero page, and touching it again replaced that page. */
		while (t_pending(&f)) {
			t_take(&f, &ev);
			f.next_seq = ev.seq + 1;
		}
		t_rearm(&f, h);
		t_zap_start(&z, p, len);
		/* The callback posts the event before the page walk starts. */
		while (!t_pending(&f))
			sched_yield();
		t_take(&f, &ev);
		/* The zap's event, or (rarely) another change that came first:
		 * either way the region is disarmed, and a zap that has not
		 * started by the REARM below is reported again. */
		T_EQ("event cookie", 7u, ev.cookie);
		T_EQ("event handle", h, ev.handle);
		if (ev.type != UMMUNOT_EVENT_CLEAR || ev.start != (uintptr_t)p ||
		    ev.end != (uintptr_t)p + len)
			t_log("round %u: an event other than the zap's came first: type %u [%#llx, %#llx)",
			      r, ev.type, (unsigned long long)ev.start, (unsigned long long)ev.end);
		f.next_seq = ev.seq + 1;
		t_rearm(&f, h);
		*marker = (char)(0x5a + r);
		T_EQ("madvise(MADV_DONTNEED) in the zap thread", 0, t_zap_join(&z));
		if (*marker == (char)(0x5a + r)) {
			/* (Any event since REARM, e.g. a page migrated by
			 * compaction, is drained at the top of the next round.) */
			kept++;
		} else if (t_pending(&f)) {
			reported++;	/* changed after REARM, and said so */
			t_take(&f, &ev);
			f.next_seq = ev.seq + 1;
			t_rearm(&f, h);
		} else {
			lost++;
			t_log("round %u: the marker written after REARM was dropped by the zap that produced the event, and no event came",
			      r);
		}
	}
	t_log("%u rounds over %u MiB: marker kept %u, changed and reported %u, lost silently %u",
	      rounds, mib, kept, reported, lost);
	T_EQ("rounds where a change after REARM went unreported", 0u, lost);
	t_unregister(&f, h);
	T_OK("munmap", munmap(p, len));
	t_file_close(&f);
	return T_EXIT_PASS;
}
