// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The first REGISTER in an address space sets up the mm's notifier
 * tracking, which gives up when a signal arrives (mm_take_all_locks).
 * That must never reach the caller as EINTR (undocumented), nor leave a
 * handle written back for a region that does not exist: under a storm of
 * caught signals, the first REGISTER of each of many fresh processes
 * succeeds and its handle names a live region.
 */
#include "helpers.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * 25 fresh processes; 8 on the debug kernel, where lockdep makes each
 * mm_take_all_locks() over VMAS mappings (and each exit) many times slower
 * (25 took over 120 s there under load).
 */
#define PROCS		25
#define PROCS_DEBUG	8
#define VMAS	4000	/* a long VMA walk in mm_take_all_locks() */

static volatile int stop;
static pid_t main_tid;

static void on_usr1(int sig)
{
	(void)sig;
}

/*
 * The storm lasts at most STORM_SECONDS: a REGISTER interrupted by a
 * signal restarts (documented), so an endless storm against a slow
 * mm_take_all_locks() (PREEMPT_RT, the debug kernel) would keep it
 * restarting, as it would fork().  What is checked is the outcome under
 * signals (no EINTR, live handles), not progress under an endless storm.
 */
#define STORM_SECONDS	2

static void *storm(void *arg)
{
	time_t end = time(NULL) + STORM_SECONDS;

	(void)arg;
	while (!stop && time(NULL) < end)
		syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
	return NULL;
}

static int one_process(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	struct ummunot_region r;
	struct ummunot_stats st;
	struct t_file f;
	pthread_t t;
	uint32_t idx;
	char *p;
	int ret;

	for (int i = 0; i < VMAS; i++) {
		/* Alternate protections so that nothing merges. */
		if (mmap(NULL, t_page, (i & 1) ? PROT_READ : PROT_NONE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
			t_fail("mmap: %s", t_errname(errno));
	}
	p = t_map_anon(1, true);
	t_file_open(&f, 0);
	sigaction(SIGUSR1, &sa, NULL);
	main_tid = syscall(SYS_gettid);
	if (pthread_create(&t, NULL, storm, NULL))
		t_fail("pthread_create");
	usleep(1000);

	r = (struct ummunot_region){ .start = (uintptr_t)p, .length = t_page,
				     .cookie = 1 };
	ret = t_register_batch(f.fd, &r, 1, &idx);
	stop = 1;
	pthread_join(t, NULL);

	t_get_stats(&f, &st);
	if (ret) {
		t_log("first REGISTER under signals: %s (handle written back: 0x%llx, regions now %llu)",
		      t_errname(-ret), (unsigned long long)r.handle,
		      (unsigned long long)st.regions);
		return 1;
	}
	T_EQ("regions", 1, st.regions);
	t_unregister(&f, r.handle);	/* the handle names the region */
	return 0;
}

int main(int argc, char **argv)
{
	int bad = 0, procs;

	t_init(argc, argv);
	procs = t_debug_kernel() ? PROCS_DEBUG : PROCS;
	for (int i = 0; i < procs; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0)
			_exit(one_process());
		if (waitpid(pid, &st, 0) != pid)
			t_fail("waitpid: %s", t_errname(errno));
		if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
			t_fail("child %d failed (status 0x%x)", i, st);
		bad += WEXITSTATUS(st);
	}
	if (bad)
		t_fail("%d of %d first REGISTERs failed under signals", bad, procs);
	return T_EXIT_PASS;
}
