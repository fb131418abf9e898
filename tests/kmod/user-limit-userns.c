// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * max_user_memory is one budget per user, user namespaces included.  An
 * unprivileged user (nobody) creates a user namespace whose uids 0..8 map
 * to a range of nine outer uids, as newuidmap does for a user with an
 * /etc/subuid range (here the root parent writes the map itself: the rig's
 * root is read-only and has no /etc/subuid entry for nobody).  A process
 * per inner uid then fills what it can.  Together they must get no more
 * than nobody alone gets, nobody's own processes outside the namespace
 * must find the budget spent, /sys/class/misc/ummunot/users must show it
 * all on nobody, and everything comes back when they exit.  Then the
 * charge follows the file, not whoever holds it: a file opened in the
 * namespace and passed over SCM_RIGHTS to root stays on nobody until root
 * closes it, and a file root opens before dropping privileges to nobody
 * stays on root.
 *
 * The rig runs tests chrooted, and a chrooted process may not create a
 * user namespace (EPERM): the namespace's creator first moves to pid 1's
 * root, and its root in the namespace (which has CAP_SYS_CHROOT there)
 * moves back.
 */
#include "helpers.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY		65534
#define OUTER_BASE	200000	/* outer uid of inner uid 0 */
#define NR_INNER	9
#define LIMIT		(512 * 1024)	/* bytes */
#define USERS_FILE	"/sys/class/misc/ummunot/users"

/* The users file's line for user @uid: memory and regions; false if absent. */
static bool user_use(unsigned int uid, long *memory, long *regions)
{
	return t_users_budget(uid, 0, memory, regions);
}

/*
 * Open a file with a 64-entry ring (false if even that does not fit) and
 * register one-page regions until ENOSPC.  Returns the number registered.
 */
static bool fill(struct t_file *f, uint32_t *n)
{
	struct ummunot_region r[256];
	uint32_t idx, batch = 256;
	struct ummunot_hello h;
	char *p;
	int fd, ret;

	*n = 0;
	fd = t_dev_open();
	ret = t_hello(fd, &h, 64);
	close(fd);
	if (ret == -ENOSPC)
		return false;
	T_EQ("HELLO: -errno", 0, ret);
	t_file_open(f, 64);
	p = t_map_anon(1, false);
	for (uint32_t i = 0; i < batch; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
						.length = t_page, .cookie = i };
	while (batch) {
		ret = t_register_batch(f->fd, r, batch, &idx);
		if (ret == -ENOSPC) {
			batch /= 2;
			continue;
		}
		T_EQ("REGISTER: -errno", 0, ret);
		*n += batch;
	}
	return true;
}

/* Fill as the current uid, report the count on @wfd, hold until @rfd closes. */
static void __attribute__((noreturn)) fill_and_hold(int wfd, int rfd)
{
	struct t_file f;
	uint32_t n;
	int32_t rep;

	rep = fill(&f, &n) ? (int32_t)n : -1;
	if (write(wfd, &rep, sizeof(rep)) != sizeof(rep))
		t_fail("write: %s", t_errname(errno));
	(void)read(rfd, &n, sizeof(n));
	_exit(T_EXIT_PASS);
}

/* One process of nobody outside any namespace: regions it alone gets. */
static int32_t nobody_alone(void)
{
	int up[2], down[2];
	int32_t n;
	pid_t pid;

	if (pipe(up) || pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		t_become(NOBODY);
		fill_and_hold(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &n, sizeof(n)) != sizeof(n))
		t_fail("child failed (status %d)", t_wait_child(pid));
	close(down[1]);
	close(up[0]);
	T_EQ("nobody-alone child status", T_EXIT_PASS, t_wait_child(pid));
	return n;
}

/*
 * A child in a user namespace that nobody creates (uids and gids
 * 0..NR_INNER-1 mapped to OUTER_BASE.., as newuidmap would), root in it,
 * that calls @fn(@a, @b), which does not return.
 */
static int ns_parent_fds[2] = { -1, -1 };	/* closed in the child */

static pid_t spawn_in_ns(void (*fn)(int, int), int a, int b)
{
	pid_t pid = t_fork_userns(NOBODY, OUTER_BASE, NR_INNER, NULL);

	if (pid == 0) {
		for (int i = 0; i < 2; i++)
			if (ns_parent_fds[i] >= 0)
				close(ns_parent_fds[i]);
		fn(a, b);
		_exit(T_EXIT_FAIL);
	}
	return pid;
}

/* Register @n one-page regions on @f; fails the test on error. */
static void register_n(struct t_file *f, int n)
{
	char *p = t_map_anon(1, false);

	for (int i = 0; i < n; i++)
		t_register(f, (uintptr_t)p, t_page, i);
}

#define PASSED_REGIONS	10

/* In the namespace: as inner uid 3, open, register, pass the file on @sock. */
static void __attribute__((noreturn)) ns_pass(int sock, int unused)
{
	struct t_file f;

	(void)unused;
	t_become(3);
	t_file_open(&f, 64);
	register_n(&f, PASSED_REGIONS);
	t_send_fd(sock, f.fd);
	_exit(T_EXIT_PASS);
}

/*
 * In the namespace, as its root: one process per inner uid, each filling
 * and holding; report the counts to @wfd, hold until @rfd closes.
 */
static void __attribute__((noreturn)) ns_root(int wfd, int rfd)
{
	int32_t counts[NR_INNER];
	int down[2];
	pid_t pids[NR_INNER];

	if (pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	for (int i = 0; i < NR_INNER; i++) {
		int up[2];

		if (pipe(up))
			t_fail("pipe: %s", t_errname(errno));
		pids[i] = fork();
		if (pids[i] == 0) {
			close(up[0]);
			close(down[1]);
			t_become(i);
			fill_and_hold(up[1], down[0]);
		}
		close(up[1]);
		if (read(up[0], &counts[i], sizeof(counts[i])) !=
		    sizeof(counts[i]))
			t_fail("inner uid %d failed (status %d)", i,
			       t_wait_child(pids[i]));
		close(up[0]);
	}
	if (write(wfd, counts, sizeof(counts)) != sizeof(counts))
		t_fail("write: %s", t_errname(errno));
	(void)read(rfd, counts, sizeof(counts[0]));
	close(down[1]);
	for (int i = 0; i < NR_INNER; i++)
		T_EQ("inner child status", T_EXIT_PASS, t_wait_child(pids[i]));
	_exit(T_EXIT_PASS);
}

/* uid 0's line: regions charged to root, 0 if absent. */
static long root_regions(void)
{
	long memory, regions;

	return user_use(0, &memory, &regions) ? regions : 0;
}

/* SCM_RIGHTS: a file opened in the namespace stays charged to nobody. */
static void check_fd_passing(void)
{
	long memory, regions;
	int sv[2], fd;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		t_fail("socketpair: %s", t_errname(errno));
	ns_parent_fds[0] = sv[0];
	pid = spawn_in_ns(ns_pass, sv[1], 0);
	ns_parent_fds[0] = -1;
	close(sv[1]);
	fd = t_recv_fd(sv[0]);
	close(sv[0]);
	T_EQ("namespace child status", T_EXIT_PASS, t_wait_child(pid));
	/* Its opener has exited; root holds the only reference. */
	T_ASSERT(user_use(NOBODY, &memory, &regions),
		 "a passed file is no longer charged to nobody");
	T_EQ("regions of the passed file, on nobody", PASSED_REGIONS, regions);
	T_ASSERT(!user_use(OUTER_BASE + 3, &memory, &regions),
		 "the passed file is charged to its opener's outer uid");
	close(fd);
	T_ASSERT(!user_use(NOBODY, &memory, &regions),
		 "nobody still charged after the passed file was closed");
}

/* Dropping privileges: a file root opened stays charged to root. */
static void check_drop_privileges(void)
{
	int up[2], down[2];
	long memory, regions, before = root_regions();
	struct t_file f;
	pid_t pid;
	char c;

	if (pipe(up) || pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		t_file_open(&f, 64);
		t_become(NOBODY);
		register_n(&f, PASSED_REGIONS);
		if (write(up[1], "d", 1) != 1)
			_exit(T_EXIT_FAIL);
		(void)read(down[0], &c, 1);
		_exit(T_EXIT_PASS);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &c, 1) != 1)
		t_fail("drop-privileges child failed (status %d)",
		       t_wait_child(pid));
	T_EQ("regions root's file gained after setuid(nobody)",
	     PASSED_REGIONS, root_regions() - before);
	T_ASSERT(!user_use(NOBODY, &memory, &regions),
		 "nobody charged for a file root opened");
	close(down[1]);
	T_EQ("drop-privileges child status", T_EXIT_PASS, t_wait_child(pid));
}

int main(int argc, char **argv)
{
	int up[2], down[2];
	int32_t alone, counts[NR_INNER], outside;
	long memory = 0, regions = 0, total = 0;
	int fails = 0;
	pid_t pid;

	t_init(argc, argv);
	t_param_set("max_user_memory", LIMIT);		/* restored at exit */

	alone = nobody_alone();
	T_ASSERT(alone > 0, "nobody alone got %d regions", alone);
	t_log("nobody alone: %d regions in %d bytes", alone, LIMIT);

	if (pipe(up) || pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	ns_parent_fds[0] = up[0];
	ns_parent_fds[1] = down[1];
	pid = spawn_in_ns(ns_root, up[1], down[0]);
	ns_parent_fds[0] = ns_parent_fds[1] = -1;
	close(up[1]);
	close(down[0]);
	if (read(up[0], counts, sizeof(counts)) != sizeof(counts))
		t_fail("namespace child failed (status %d)", t_wait_child(pid));

	for (int i = 0; i < NR_INNER; i++) {
		t_log("inner uid %d (outer %d): %d regions", i,
		      OUTER_BASE + i, counts[i]);
		if (counts[i] < 0)
			fails++;
		else
			total += counts[i];
	}
	t_log("namespace total: %ld regions, %d processes refused a ring; nobody alone: %d",
	      total, fails, alone);
	T_ASSERT(total <= alone,
		 "nobody's namespace holds %ld regions, nobody alone %d (%.1fx)",
		 total, alone, (double)total / alone);
	T_ASSERT(user_use(NOBODY, &memory, &regions),
		 "uid %d not listed in %s", NOBODY, USERS_FILE);
	T_EQ("users: regions charged to nobody", total, regions);
	T_ASSERT(memory <= LIMIT, "users: memory %ld of %d", memory, LIMIT);
	for (int i = 0; i < NR_INNER; i++)
		T_ASSERT(!user_use(OUTER_BASE + i, &memory, &regions),
			 "outer uid %d charged separately", OUTER_BASE + i);

	/* nobody's own processes outside the namespace share the budget. */
	outside = nobody_alone();
	T_ASSERT(outside <= 0,
		 "nobody outside the namespace still got %d regions", outside);

	close(down[1]);
	T_EQ("namespace child status", T_EXIT_PASS, t_wait_child(pid));
	T_ASSERT(!user_use(NOBODY, &memory, &regions),
		 "uid %d still charged after exit: memory %ld regions %ld",
		 NOBODY, memory, regions);
	T_EQ("nobody after the namespace exited", alone, nobody_alone());

	check_fd_passing();
	check_drop_privileges();
	return T_EXIT_PASS;
}
