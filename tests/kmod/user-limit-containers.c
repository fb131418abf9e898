// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * max_user_memory gives a user namespace that global root created (a
 * container: rootful podman or LXD with a user namespace, Kubernetes pods
 * with hostUsers: false) a budget of its own.  Root creates three such
 * namespaces, each mapping uids 0..8 to a range of its own, as a runtime
 * does.  With the limit set to a few rings' worth, container 1 fills its
 * budget and holds it; host root then still gets everything it gets alone,
 * and so do container 2 and container 3, whose two processes (inner uids 0
 * and 5) share one budget: together no more than one alone.
 * /sys/class/misc/ummunot/users lists each container's budget by its
 * namespace's inode number, host root's as uid 0, and nothing is left
 * once they exit.  (A namespace an unprivileged user created stays on that
 * user's budget: user-limit-userns.)
 */
#include "helpers.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR_INNER	9
#define LIMIT		(512 * 1024)	/* bytes */

/* The users file's line for (@uid, @userns): its regions; -1 if absent. */
static long budget_regions(unsigned int uid, unsigned long userns)
{
	long memory, regions;

	if (!t_users_budget(uid, userns, &memory, &regions))
		return -1;
	T_ASSERT(memory <= LIMIT, "budget (%u, %lu): memory %ld of %d",
		 uid, userns, memory, LIMIT);
	return regions;
}

/*
 * Open a file with a 64-entry ring (-1 if even that does not fit) and
 * register one-page regions until ENOSPC; the number registered.  The
 * file stays open (the process holds it until it exits).
 */
static int32_t fill(void)
{
	struct ummunot_region r[256];
	uint32_t idx, batch = 256;
	struct ummunot_hello h;
	struct t_file f;
	int32_t n = 0;
	char *p;
	int fd, ret;

	fd = t_dev_open();
	ret = t_hello(fd, &h, 64);
	close(fd);
	if (ret == -ENOSPC)
		return -1;
	T_EQ("HELLO: -errno", 0, ret);
	t_file_open(&f, 64);
	p = t_map_anon(1, false);
	for (uint32_t i = 0; i < batch; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
						.length = t_page, .cookie = i };
	while (batch) {
		ret = t_register_batch(f.fd, r, batch, &idx);
		if (ret == -ENOSPC) {
			batch /= 2;
			continue;
		}
		T_EQ("REGISTER: -errno", 0, ret);
		n += batch;
	}
	return n;
}

/*
 * A holder: fork a child that runs @setup(@arg) and then, for each of
 * @nuids uids in @uids, a process that becomes it, fills and holds.  The
 * counts come back on a pipe; everything is held until hold_release().
 */
struct holder {
	pid_t pid;
	int down;		/* closing it releases the holder */
	int32_t counts[2];
	unsigned long userns;	/* inode of the holder's user namespace */
};

static void __attribute__((noreturn)) fill_all(int wfd, int rfd, const uid_t *uids, int nuids)
{
	int32_t counts[2] = { 0, 0 };
	pid_t pids[2];
	int down[2];
	char c;

	if (pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	for (int i = 0; i < nuids; i++) {
		int up[2];

		if (pipe(up))
			t_fail("pipe: %s", t_errname(errno));
		pids[i] = fork();
		if (pids[i] == 0) {
			close(up[0]);
			close(down[1]);
			t_become(uids[i]);
			counts[i] = fill();
			if (write(up[1], &counts[i], sizeof(counts[i])) != sizeof(counts[i]))
				_exit(T_EXIT_FAIL);
			(void)read(down[0], &c, 1);
			_exit(T_EXIT_PASS);
		}
		close(up[1]);
		if (read(up[0], &counts[i], sizeof(counts[i])) != sizeof(counts[i]))
			t_fail("filler %d failed (status %d)", i, t_wait_child(pids[i]));
		close(up[0]);
	}
	if (write(wfd, counts, sizeof(counts)) != sizeof(counts))
		t_fail("write: %s", t_errname(errno));
	(void)read(rfd, &c, 1);
	close(down[1]);
	for (int i = 0; i < nuids; i++)
		T_EQ("filler status", T_EXIT_PASS, t_wait_child(pids[i]));
	_exit(T_EXIT_PASS);
}

/*
 * Start a holder: on the host as root (@outer_base 0), or in a user
 * namespace that root creates, uids 0..NR_INNER-1 mapped to @outer_base..
 * (written here as a runtime would).
 */
static void hold(struct holder *h, unsigned int outer_base, const uid_t *uids, int nuids)
{
	int up[2], down[2];

	if (pipe(up) || pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	h->userns = 0;
	if (outer_base) {
		h->pid = t_fork_userns(0, outer_base, NR_INNER, &h->userns);
	} else {
		h->pid = fork();
		if (h->pid < 0)
			t_fail("fork: %s", t_errname(errno));
	}
	if (h->pid == 0) {
		close(up[0]);
		close(down[1]);
		fill_all(up[1], down[0], uids, nuids);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], h->counts, sizeof(h->counts)) != sizeof(h->counts))
		t_fail("holder failed (status %d)", t_wait_child(h->pid));
	close(up[0]);
	h->down = down[1];
}

static void release(struct holder *h)
{
	close(h->down);
	T_EQ("holder status", T_EXIT_PASS, t_wait_child(h->pid));
}

int main(int argc, char **argv)
{
	static const uid_t root[] = { 0 }, two[] = { 0, 5 };
	struct holder host, c1, c2, c3, again;
	int32_t alone;

	t_init(argc, argv);
	t_param_set("max_user_memory", LIMIT);		/* restored at exit */

	hold(&host, 0, root, 1);
	alone = host.counts[0];
	T_ASSERT(alone > 0, "host root alone got %d regions", alone);
	T_EQ("users: host root's regions", alone, budget_regions(0, 0));
	release(&host);
	t_log("host root alone: %d regions in %d bytes", alone, LIMIT);

	hold(&c1, 300000, root, 1);
	t_log("container 1 (userns %lu): %d regions", c1.userns, c1.counts[0]);
	T_EQ("container 1's root, alone in its namespace", alone, c1.counts[0]);
	T_EQ("users: container 1's budget", alone, budget_regions(0, c1.userns));
	T_EQ("users: nothing on host root while container 1 holds", -1,
	     budget_regions(0, 0));

	hold(&host, 0, root, 1);
	t_log("host root, container 1 full: %d regions", host.counts[0]);
	T_EQ("host root while container 1 holds its budget", alone, host.counts[0]);

	hold(&c2, 400000, root, 1);
	t_log("container 2 (userns %lu): %d regions", c2.userns, c2.counts[0]);
	T_EQ("container 2 while container 1 and host root hold", alone, c2.counts[0]);

	hold(&c3, 500000, two, 2);
	t_log("container 3 (userns %lu): inner uid 0 %d, inner uid 5 %d regions",
	      c3.userns, c3.counts[0], c3.counts[1]);
	T_ASSERT(c3.counts[0] > 0, "container 3's root got %d regions", c3.counts[0]);
	T_ASSERT((c3.counts[1] < 0 ? 0 : c3.counts[1]) + c3.counts[0] <= alone,
		 "container 3's two users got %d + %d regions, one budget is %d",
		 c3.counts[0], c3.counts[1], alone);
	T_EQ("users: container 3's budget", c3.counts[0] + (c3.counts[1] < 0 ? 0 : c3.counts[1]),
	     budget_regions(0, c3.userns));
	for (int i = 0; i < NR_INNER; i++)
		T_EQ("users: container 3's outer uid charged separately", -1,
		     budget_regions(500000 + i, 0));

	release(&c3);
	release(&c2);
	release(&host);
	release(&c1);
	T_EQ("users: container 1's budget after exit", -1, budget_regions(0, c1.userns));
	T_EQ("users: host root after exit", -1, budget_regions(0, 0));

	/* Everything came back: a new container gets the whole budget. */
	hold(&again, 300000, root, 1);
	T_EQ("a container after the others exited", alone, again.counts[0]);
	release(&again);
	return T_EXIT_PASS;
}
