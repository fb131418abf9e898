// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * KSM merging two watched pages yields CLEAR for both: invalidations run
 * by another task (ksmd), not by the file's owner, are delivered.  kdreg2
 * drops them (Documentation/performance.md, bench/kdreg2).  Needs
 * CONFIG_KSM and a writable /sys/kernel/mm/ksm (root): skipped otherwise.
 * KSM's settings are restored at the end.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define KSM "/sys/kernel/mm/ksm/"

static int ksm_read(const char *name, char *buf, size_t len)
{
	int fd = open(name, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

static int ksm_write(const char *name, const char *v)
{
	int fd = open(name, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, v, strlen(v));
	close(fd);
	return n < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	char run[32], sleep_ms[32], scan[32];
	struct ummunot_event ev[2];
	struct t_file f;
	uint64_t h[2];
	struct timespec t0, t;
	char *p;

	t_init(argc, argv);
	if (ksm_read(KSM "run", run, sizeof(run)) || ksm_read(KSM "sleep_millisecs", sleep_ms, sizeof(sleep_ms)) ||
	    ksm_read(KSM "pages_to_scan", scan, sizeof(scan)))
		t_skip("no " KSM " (CONFIG_KSM)");
	if (ksm_write(KSM "sleep_millisecs", "10") || ksm_write(KSM "pages_to_scan", "1000"))
		t_skip(KSM " not writable: %s", t_errname(errno));

	t_file_open(&f, 0);
	p = t_map_anon(2, true);
	/* The same content in both pages, unlike anything else in the guest. */
	for (long i = 0; i < 2 * t_page; i++)
		p[i] = (char)((i % t_page) * 31 + getpid());
	h[0] = t_register(&f, (uintptr_t)p, t_page, 1);
	h[1] = t_register(&f, (uintptr_t)p + t_page, t_page, 2);
	if (madvise(p, 2 * t_page, MADV_MERGEABLE))
		t_skip("madvise(MADV_MERGEABLE): %s", t_errname(errno));
	T_OK("ksm run", ksm_write(KSM "run", "1"));

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		usleep(10000);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t_pending(&f) < 2 && t.tv_sec - t0.tv_sec < 30);
	ksm_write(KSM "run", run);
	ksm_write(KSM "sleep_millisecs", sleep_ms);
	ksm_write(KSM "pages_to_scan", scan);

	T_EQ("events after KSM merged the two watched pages", 2, t_pending(&f));
	t_take(&f, &ev[0]);
	t_take(&f, &ev[1]);
	for (int i = 0; i < 2; i++) {
		int k = ev[i].cookie == 2;
		T_ASSERT(ev[i].cookie == 1 || ev[i].cookie == 2, "cookie %llu",
			 (unsigned long long)ev[i].cookie);
		T_EQ("handle", h[k], ev[i].handle);
		T_EQ("start", (uintptr_t)p + k * t_page, ev[i].start);
		T_EQ("end", (uintptr_t)p + (k + 1) * t_page, ev[i].end);
		T_EQ("type (CLEAR)", UMMUNOT_EVENT_CLEAR, ev[i].type);
	}
	T_ASSERT(ev[0].cookie != ev[1].cookie, "two events for one page");
	t_file_close(&f);
	return T_EXIT_PASS;
}
