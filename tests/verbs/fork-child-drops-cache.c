// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fork: a child that uses and destroys its copy of the parent's cache
 * deregisters nothing.  The parent's cached registration, its rkey and the
 * cache's events keep working after the child is gone.
 *
 * Negative control: a child that calls ibv_dereg_mr() on the inherited MR
 * (what libummunot 0.1's destroy did in a child) makes the parent's next
 * WRITE through that rkey fail with a remote access error, so the check
 * on the parent's WRITE can fail.
 */
#include "verbs-helpers.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN	(64u * 1024)

enum child_does { CHILD_USES_LIBRARY, CHILD_DEREGISTERS };

/* The child's checks; its exit status says which one failed. */
static int child(struct ummunot_cache *c, const struct ummunot_reg *r, unsigned char *a,
		 enum child_does what)
{
	const struct ummunot_reg *x = NULL;
	struct ummunot_cache_stats st;

	if (what == CHILD_DEREGISTERS)
		return ibv_dereg_mr((struct ibv_mr *)r->mr) ? 10 : 0;
	if (ummunot_cache_get(c, a, LEN, VT_ACCESS, &x) != -ECHILD)
		return 1;
	if (ummunot_cache_stats(c, &st) != -ECHILD)
		return 2;
	if (ummunot_cache_poll(c) != -ECHILD || ummunot_cache_flush(c) != -ECHILD)
		return 3;
	if (ummunot_cache_put(c, r) != -ECHILD)
		return 4;
	if (ummunot_cache_fd(c) < 0)
		return 5;
	/* The child may also unmap the buffer: its own address space. */
	if (munmap(a, LEN))
		return 6;
	ummunot_cache_destroy(c);
	return 0;
}

/* Returns the status of the parent's WRITE through the cached rkey. */
static int scenario(struct vt_dev *d, enum child_does what)
{
	const struct ummunot_reg *r, *again;
	struct ummunot_cache_stats st;
	struct ummunot_cache *c;
	struct vt_pair p;
	unsigned char *a;
	int s, n, status;
	pid_t pid;

	vt_pair_create(d, &p, vt_page);
	c = vt_cache_create(d, true);
	a = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		vt_fail("mmap: %s", strerror(errno));
	VT_OK("get", ummunot_cache_get(c, a, LEN, VT_ACCESS, &r));
	vt_pattern(p.stage, vt_page, 5);
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, 0, (uintptr_t)a, r->rkey, vt_page);
	VT_EQ("WRITE before fork", IBV_WC_SUCCESS, s);

	pid = fork();
	if (pid < 0)
		vt_fail("fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child(c, r, a, what));
	if (waitpid(pid, &status, 0) != pid)
		vt_fail("waitpid: %s", strerror(errno));
	VT_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "child failed its checks (status %#x)", status);

	/* The parent: same registration, still cached, still writable. */
	VT_OK("put", ummunot_cache_put(c, r));
	VT_OK("get after the child", ummunot_cache_get(c, a, LEN, VT_ACCESS, &again));
	VT_ASSERT(again == r, "the parent's entry was lost (%p, was %p)", (void *)again,
		  (void *)r);
	vt_pattern(p.stage, vt_page, 6);
	memset(a, 0, vt_page);
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, 0, (uintptr_t)a, again->rkey, vt_page);
	vt_log("child %s: parent's WRITE through rkey %#x -> %s (%d)",
	       what == CHILD_USES_LIBRARY ? "used and destroyed its cache" : "called ibv_dereg_mr",
	       again->rkey, s >= 0 ? ibv_wc_status_str((enum ibv_wc_status)s) : strerror(-s), s);
	if (s == IBV_WC_SUCCESS)
		VT_ASSERT(!memcmp(a, p.stage, vt_page), "the WRITE did not land");
	VT_OK("put", ummunot_cache_put(c, again));

	if (what == CHILD_USES_LIBRARY) {
		/* Events still reach the parent's cache through its file. */
		if (munmap(a, LEN))
			vt_fail("munmap: %s", strerror(errno));
		n = ummunot_cache_poll(c);
		VT_EQ("events after the parent's munmap", 1, n);
		vt_cache_stats(c, &st);
		VT_EQ("registrations", 1, st.registrations);
		VT_EQ("deregistrations", 1, st.deregistrations);
		vt_cache_destroy_clean(c);
	} else {
		/* The MR is gone behind the cache's back; nothing to check. */
		ummunot_cache_destroy(c);
		munmap(a, LEN);
	}
	vt_pair_destroy(&p);
	return s;
}

int main(int argc, char **argv)
{
	struct vt_dev d;
	int s;

	vt_init(argc, argv);
	vt_dev_open(&d);
	s = scenario(&d, CHILD_USES_LIBRARY);
	VT_EQ("parent's WRITE after the child destroyed its copy", IBV_WC_SUCCESS, s);
	s = scenario(&d, CHILD_DEREGISTERS);
	VT_EQ("parent's WRITE after a child deregistered the MR (IBV_WC_REM_ACCESS_ERR)",
	      IBV_WC_REM_ACCESS_ERR, s);
	vt_dev_close(&d);
	return VT_EXIT_PASS;
}
