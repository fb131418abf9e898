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
 * all on nobody, and everything comes back when they exit.
 *
 * The rig runs tests chrooted, and a chrooted process may not create a
 * user namespace (EPERM): the namespace's creator first moves to pid 1's
 * root, and its root in the namespace (which has CAP_SYS_CHROOT there)
 * moves back.
 */
#include "helpers.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY		65534
#define OUTER_BASE	200000	/* outer uid of inner uid 0 */
#define NR_INNER	9
#define LIMIT		(512 * 1024)	/* bytes */
#define USERS_FILE	"/sys/class/misc/ummunot/users"

/* The users file's line for @uid: memory and regions; false if absent. */
static bool user_use(unsigned int uid, long *memory, long *regions)
{
	char line[256];
	bool found = false;
	FILE *f = fopen(USERS_FILE, "r");

	if (!f)
		t_fail("open %s: %s", USERS_FILE, t_errname(errno));
	if (!fgets(line, sizeof(line), f))
		t_fail("%s: empty", USERS_FILE);
	while (fgets(line, sizeof(line), f)) {
		unsigned int u;
		long m, r, n;

		if (sscanf(line, "%u %ld %ld %ld", &u, &m, &r, &n) != 4)
			continue;
		if (u == uid) {
			*memory = m;
			*regions = r;
			found = true;
		}
	}
	fclose(f);
	return found;
}

static void become(uid_t uid)
{
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		t_fail("cannot become uid %u: %s", uid, t_errname(errno));
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

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		t_fail("waitpid: %s", t_errname(errno));
	if (!WIFEXITED(st))
		t_fail("child killed by signal %d", WTERMSIG(st));
	return WEXITSTATUS(st);
}

static void write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		t_fail("write %s '%s': %s", path, s, t_errname(errno));
	close(fd);
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
		become(NOBODY);
		fill_and_hold(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &n, sizeof(n)) != sizeof(n))
		t_fail("child failed (status %d)", wait_child(pid));
	close(down[1]);
	close(up[0]);
	T_EQ("nobody-alone child status", T_EXIT_PASS, wait_child(pid));
	return n;
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
			become(i);
			fill_and_hold(up[1], down[0]);
		}
		close(up[1]);
		if (read(up[0], &counts[i], sizeof(counts[i])) !=
		    sizeof(counts[i]))
			t_fail("inner uid %d failed (status %d)", i,
			       wait_child(pids[i]));
		close(up[0]);
	}
	if (write(wfd, counts, sizeof(counts)) != sizeof(counts))
		t_fail("write: %s", t_errname(errno));
	(void)read(rfd, counts, sizeof(counts[0]));
	close(down[1]);
	for (int i = 0; i < NR_INNER; i++)
		T_EQ("inner child status", T_EXIT_PASS, wait_child(pids[i]));
	_exit(T_EXIT_PASS);
}

int main(int argc, char **argv)
{
	int up[2], down[2], go[2], ready[2];
	int32_t alone, counts[NR_INNER], outside;
	long memory = 0, regions = 0, total = 0;
	char path[64], map[64];
	int fails = 0, rootfd;
	pid_t pid;
	char c;

	t_init(argc, argv);
	t_param_set("max_user_memory", LIMIT);		/* restored at exit */

	alone = nobody_alone();
	T_ASSERT(alone > 0, "nobody alone got %d regions", alone);
	t_log("nobody alone: %d regions in %d bytes", alone, LIMIT);

	if (pipe(up) || pipe(down) || pipe(go) || pipe(ready))
		t_fail("pipe: %s", t_errname(errno));
	pid = fork();
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		close(go[1]);
		close(ready[0]);
		rootfd = open("/", O_DIRECTORY | O_CLOEXEC);
		if (rootfd < 0 || chroot("/proc/1/root") || chdir("/"))
			t_fail("leaving the chroot: %s", t_errname(errno));
		become(NOBODY);
		if (unshare(CLONE_NEWUSER)) {
			if (errno == EPERM || errno == ENOSPC)
				_exit(T_EXIT_SKIP);
			t_fail("unshare(CLONE_NEWUSER): %s", t_errname(errno));
		}
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(T_EXIT_FAIL);
		if (setresgid(0, 0, 0) || setresuid(0, 0, 0))
			t_fail("inner root: %s", t_errname(errno));
		if (fchdir(rootfd) || chroot(".") || chdir("/"))
			t_fail("back into the chroot: %s", t_errname(errno));
		close(rootfd);
		ns_root(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	close(go[0]);
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1) {
		int st = wait_child(pid);

		if (st == T_EXIT_SKIP)
			t_skip("unprivileged user namespaces are not available");
		t_fail("namespace child failed (status %d)", st);
	}
	snprintf(map, sizeof(map), "0 %d %d\n", OUTER_BASE, NR_INNER);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	write_file(path, map);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	write_file(path, map);
	if (write(go[1], "g", 1) != 1)
		t_fail("write: %s", t_errname(errno));
	if (read(up[0], counts, sizeof(counts)) != sizeof(counts))
		t_fail("namespace child failed (status %d)", wait_child(pid));

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
	T_EQ("namespace child status", T_EXIT_PASS, wait_child(pid));
	T_ASSERT(!user_use(NOBODY, &memory, &regions),
		 "uid %d still charged after exit: memory %ld regions %ld",
		 NOBODY, memory, regions);
	T_EQ("nobody after the namespace exited", alone, nobody_alone());
	return T_EXIT_PASS;
}
