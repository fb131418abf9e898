// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ucx across fork(), against the fake UCX (tests/ucx/fake-ucs.c)
 * in DIR: THREADS threads create a registration cache, cache one buffer and
 * destroy the cache, over and over, through the preloaded adapter (its
 * locks: the gate, the caller bindings, the list of caches, the ring),
 * while the main thread forks FORKS times.  Each child does the same once
 * and exits.  A child that inherited an adapter lock held by one of the
 * parent's other threads never gets it: it is killed after 3 s and counted
 * as hung.
 *
 * Usage: fork-driver DIR FORKS guarded|unguarded
 *   guarded    (libummunot-ucx) no child may hang
 *   unguarded  (the negative control: the same adapter built without its
 *              fork handlers) some child must hang; stops at the third
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake-driver.h"

#define THREADS 2
#define HANG_MS 3000


static ucx_status_t (*create_fn)(const struct ucx_params_117 *, const char *, void *,
				 struct ucx_rcache **);
static void (*destroy_fn)(struct ucx_rcache *);
static ucx_status_t (*get_fn)(struct ucx_rcache *, void *, size_t, size_t, int, void *,
			      struct ucx_pgt_region **);
static atomic_int stop;

/* One cache's life: create, cache @buf, destroy.  0 on success. */
static int one_cache(void *buf, size_t len)
{
	struct ucx_pgt_region *r;
	struct ucx_params_117 p;
	struct ucx_rcache *rc;

	fake_params(&p);
	if (create_fn(&p, "fork", NULL, &rc) != UCX_OK)
		return -1;
	if (get_fn(rc, buf, len, 4096, 3, NULL, &r) != UCX_OK) {
		destroy_fn(rc);
		return -1;
	}
	destroy_fn(rc);
	return 0;
}

static void *churn(void *arg)
{
	size_t len = 64 * 1024;
	char *buf = aligned_alloc(4096, len);

	(void)arg;
	if (!buf)
		FAIL("out of memory");
	memset(buf, 1, len);
	while (!atomic_load(&stop))
		if (one_cache(buf, len))
			FAIL("a cache in a thread failed");
	free(buf);
	return NULL;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* 1: the child hung (killed), 0: it exited 0; anything else fails. */
static int wait_child(pid_t pid)
{
	long deadline = now_ms() + HANG_MS;
	int st;

	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);

		if (w == pid)
			break;
		if (w < 0)
			FAIL("waitpid: %m");
		if (now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 1;
		}
		usleep(1000);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("a child ended with status 0x%x", st);
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t th[THREADS];
	char path[PATH_MAX];
	int forks, i, hung = 0, done = 0, guarded;
	static char child_buf[64 * 1024] __attribute__((aligned(4096)));

	if (argc != 4 || (strcmp(argv[3], "guarded") && strcmp(argv[3], "unguarded")))
		FAIL("usage: fork-driver DIR FORKS guarded|unguarded");
	forks = atoi(argv[2]);
	guarded = !strcmp(argv[3], "guarded");
	snprintf(path, sizeof(path), "%s/libucp.so.0", argv[1]);
	if (!dlopen(path, RTLD_NOW | RTLD_GLOBAL))
		FAIL("dlopen %s: %s", path, dlerror());
	*(void **)&create_fn = dlsym(RTLD_DEFAULT, "ucs_rcache_create");
	*(void **)&destroy_fn = dlsym(RTLD_DEFAULT, "ucs_rcache_destroy");
	*(void **)&get_fn = dlsym(RTLD_DEFAULT, "ucs_rcache_get");
	if (!create_fn || !destroy_fn || !get_fn || !dlsym(RTLD_DEFAULT, "ummunot_ucx_stats"))
		FAIL("libummunot-ucx is not preloaded, or the fake UCX is incomplete");
	/* The first cache starts the adapter (and its fork handlers). */
	if (one_cache(child_buf, sizeof(child_buf)))
		FAIL("the first cache failed");
	for (i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, churn, NULL))
			FAIL("pthread_create");
	for (i = 0; i < forks && !(!guarded && hung >= 3); i++) {
		pid_t pid = fork();

		if (pid < 0)
			FAIL("fork: %m");
		if (pid == 0)
			_exit(one_cache(child_buf, sizeof(child_buf)) ? 1 : 0);
		hung += wait_child(pid);
		done++;
	}
	atomic_store(&stop, 1);
	for (i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	printf("fork-driver: %s: forks %d, children hung %d\n", argv[3], done, hung);
	if (guarded && hung)
		FAIL("%d of %d children hung on a lock the adapter held at fork()", hung, done);
	if (!guarded && !hung)
		FAIL("the control (no fork handlers) hung no child in %d forks", done);
	printf("PASS\n");
	return 0;
}
