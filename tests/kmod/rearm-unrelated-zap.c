// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * REARM (and REGISTER) wait only for invalidations over their own regions,
 * not for one elsewhere in the address space.
 *
 * A second thread zaps a range U that the main thread's file does not
 * watch (MADV_DONTNEED, one invalidation over all of U).  A second file
 * watches U as NR one-page regions: its callback posts their events one by
 * one at the start of that invalidation, so the count of its events tells
 * the main thread, with no clock, that the invalidation has started and
 * that it has not ended yet (the end comes after the last event).  While it
 * is under way, the main thread changes its own watched page (a small
 * MADV_DONTNEED, over at once), takes that event, REARMs the page and
 * registers a new one, and reads the count after each: a REARM or REGISTER
 * that waited for the unrelated invalidation returns only after its last
 * event.
 *
 * Rounds alternate REARM first and REGISTER first.  A call counts when the
 * invalidation was still posting when it started; other calls are no
 * evidence either way.  With
 * MMU interval notifiers (ummunot 0.3.0 and earlier) REARM waited for the
 * address space's whole invalidation sequence, and REGISTER's insert was
 * deferred until it ended: every counted round returned after the last
 * event.
 *
 * Usage: rearm-unrelated-zap [--rounds N] [--regions NR]
 */
#include "helpers.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Events the watcher's ring has received so far. */
static uint64_t posted(const struct t_file *g)
{
	return t_producer(g) + t_dropped(g);
}

int main(int argc, char **argv)
{
	unsigned int rounds = 5, nr = 50000, tries = 0, i;
	unsigned int rearm_counted = 0, rearm_early = 0;
	unsigned int reg_counted = 0, reg_early = 0;
	struct ummunot_region *regs;
	struct t_file f, g;
	uint64_t hw, *hu;
	size_t len;
	char *u, *w;

	for (i = 1; i < (unsigned int)argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < (unsigned int)argc)
			rounds = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--regions") && i + 1 < (unsigned int)argc)
			nr = (unsigned int)strtoul(argv[++i], NULL, 0);
	}
	t_init(argc, argv);
	len = (size_t)nr * t_page;
	t_file_open(&f, 0);
	t_file_open(&g, nr + nr / 4);
	u = t_map_anon(nr, false);
	w = t_map_anon(2, true);
	hw = t_register(&f, (uintptr_t)w, t_page, 1);

	regs = calloc(nr, sizeof(*regs));
	hu = calloc(nr, sizeof(*hu));
	if (!regs || !hu)
		t_fail("calloc: out of memory");
	for (i = 0; i < nr; i++) {
		regs[i].start = (uintptr_t)u + (size_t)i * t_page;
		regs[i].length = t_page;
		regs[i].cookie = 2;
	}
	T_OK("REGISTER the watcher's regions",
	     t_register_batch(g.fd, regs, nr, NULL));
	for (i = 0; i < nr; i++)
		hu[i] = regs[i].handle;

	while ((rearm_counted < rounds || reg_counted < rounds) &&
	       tries < 40 * rounds) {
		struct t_zap z;
		uint64_t base, at_rearm, after_rearm, at_reg, after_reg;
		struct ummunot_event ev;
		uint64_t hn;

		tries++;
		while (t_pending(&g)) {
			t_take(&g, &ev);
			g.next_seq = ev.seq + 1;
		}
		T_OK("REARM the watcher's regions",
		     t_handle_batch(g.fd, UMMUNOT_IOC_REARM, hu, nr, NULL));
		base = posted(&g);
		t_zap_start(&z, u, len);
		/* The first of the zap's events: it has started. */
		while (posted(&g) == base)
			sched_yield();

		/* The watched page changes (over at once) and is re-armed. */
		T_OK("madvise(MADV_DONTNEED) of the watched page",
		     madvise(w, t_page, MADV_DONTNEED));
		t_expect_event(&f, 1, hw, (uintptr_t)w, (uintptr_t)w + t_page,
			       UMMUNOT_EVENT_CLEAR);
		/* Alternately REARM first and REGISTER first. */
		if (tries % 2) {
			at_rearm = posted(&g) - base;
			t_rearm(&f, hw);
			after_rearm = posted(&g) - base;
			at_reg = after_rearm;
			hn = t_register(&f, (uintptr_t)w + t_page, t_page, 3);
			after_reg = posted(&g) - base;
		} else {
			at_reg = posted(&g) - base;
			hn = t_register(&f, (uintptr_t)w + t_page, t_page, 3);
			after_reg = posted(&g) - base;
			at_rearm = after_reg;
			t_rearm(&f, hw);
			after_rearm = posted(&g) - base;
		}

		T_EQ("madvise(MADV_DONTNEED) in the zap thread", 0, t_zap_join(&z));
		T_EQ("events of the zap", (uint64_t)nr, posted(&g) - base);
		t_unregister(&f, hn);
		t_log("try %u: zap events at REARM %llu -> %llu, at REGISTER %llu -> %llu, of %u",
		      tries, (unsigned long long)at_rearm,
		      (unsigned long long)after_rearm,
		      (unsigned long long)at_reg, (unsigned long long)after_reg,
		      nr);
		if (at_rearm < nr) {
			rearm_counted++;
			rearm_early += after_rearm < nr;
		}
		if (at_reg < nr) {
			reg_counted++;
			reg_early += after_reg < nr;
		}
	}
	t_log("%u tries, %u regions zapped elsewhere: REARM returned during the zap in %u of %u counted rounds, REGISTER in %u of %u",
	      tries, nr, rearm_early, rearm_counted, reg_early, reg_counted);
	/*
	 * The zap may end during the REARM or REGISTER by chance; waiting for
	 * it makes every counted round end after it.
	 */
	if (rearm_early * 2 < rearm_counted)
		t_fail("REARM returned during the unrelated zap in only %u of %u rounds: it waited for it",
		       rearm_early, rearm_counted);
	if (reg_early * 2 < reg_counted)
		t_fail("REGISTER returned during the unrelated zap in only %u of %u rounds: it waited for it",
		       reg_early, reg_counted);
	if (rearm_counted < rounds || reg_counted < rounds)
		t_fail("too few rounds caught the zap under way (REARM %u, REGISTER %u of %u): make --regions larger",
		       rearm_counted, reg_counted, rounds);
	T_OK("UNREGISTER the watcher's regions",
	     t_handle_batch(g.fd, UMMUNOT_IOC_UNREGISTER, hu, nr, NULL));
	t_unregister(&f, hw);
	free(hu);
	free(regs);
	T_OK("munmap", munmap(u, len));
	t_file_close(&g);
	t_file_close(&f);
	return T_EXIT_PASS;
}
