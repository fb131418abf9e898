// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * max_user_memory bounds the rings and regions of one user across all its
 * files and processes: HELLO and REGISTER fail with ENOSPC beyond it, the
 * root-only /sys/class/misc/ummunot/users shows the use, other users are
 * not affected, and closing gives everything back.
 */
#include "helpers.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY		65534
#define LIMIT		(1024 * 1024)	/* bytes */

static void become_nobody(void)
{
	if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
		t_fail("cannot become uid %d: %s", NOBODY, t_errname(errno));
}

/* The users file's line for user @uid: memory and regions; false if absent. */
static bool user_use(unsigned int uid, long *memory, long *regions)
{
	return t_users_budget(uid, 0, memory, regions);
}

static int hello_errno(uint32_t entries)
{
	struct ummunot_hello h;
	int fd = t_dev_open();
	int ret = t_hello(fd, &h, entries);

	close(fd);
	return ret;
}

/*
 * Child A, as nobody: a 64-entry ring and as many regions as fit; reports
 * the number of regions on @wfd, then waits for the parent to close @rfd.
 */
static void child_fill(int wfd, int rfd)
{
	struct ummunot_region r[1000];
	uint32_t idx, n = 0;
	struct t_file f;
	char *p;
	int ret;

	become_nobody();
	/* A ring bigger than the whole budget is refused up front. */
	T_EQ("HELLO 16 MiB ring over a 1 MiB budget: -errno", -ENOSPC,
	     hello_errno(262144));
	t_file_open(&f, 64);
	p = t_map_anon(1, false);
	for (int i = 0; i < 1000; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
						.length = t_page, .cookie = i };
	for (;;) {
		ret = t_register_batch(f.fd, r, 1000, &idx);
		if (ret)
			break;
		n += 1000;
	}
	T_EQ("REGISTER beyond the user's memory: -errno", -ENOSPC, ret);
	T_EQ("error_index for the user limit", 1000, idx);
	for (;;) {
		ret = t_register_batch(f.fd, r, 1, &idx);
		if (ret)
			break;
		n++;
	}
	T_EQ("single REGISTER beyond the user's memory: -errno", -ENOSPC, ret);
	T_ASSERT(n > 1000 && n < LIMIT / 100, "%u regions in 1 MiB", n);
	if (write(wfd, &n, sizeof(n)) != sizeof(n))
		t_fail("write: %s", t_errname(errno));
	/* Hold everything until the parent is done looking. */
	(void)read(rfd, &n, sizeof(n));
	_exit(T_EXIT_PASS);
}

/* Child B, as nobody, another process: the same user's budget is spent. */
static void child_second(void)
{
	become_nobody();
	T_EQ("HELLO of another process of the same user: -errno", -ENOSPC,
	     hello_errno(64));
	_exit(T_EXIT_PASS);
}

int main(int argc, char **argv)
{
	int up[2], down[2];
	long memory = 0, regions = 0;
	struct t_file root;
	pid_t a, b;
	uint32_t n;

	t_init(argc, argv);
	T_ASSERT(t_param_get("max_user_memory") > 0, "default max_user_memory");
	t_param_set("max_user_memory", LIMIT);		/* restored at exit */

	if (pipe(up) || pipe(down))
		t_fail("pipe: %s", t_errname(errno));
	a = fork();
	if (a == 0) {
		close(up[0]);
		close(down[1]);
		child_fill(up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &n, sizeof(n)) != sizeof(n))
		t_fail("child A failed (status %d)", t_wait_child(a));

	T_ASSERT(user_use(NOBODY, &memory, &regions), "uid %d not listed", NOBODY);
	T_EQ("users: regions of uid 65534", n, regions);
	T_ASSERT(memory > 0 && memory <= LIMIT, "users: memory %ld of %d",
		 memory, LIMIT);
	t_log("uid %d holds %u regions and a 64-entry ring: %ld bytes (%ld per region)",
	      NOBODY, n, memory, regions ? (memory - 3 * t_page) / regions : 0);

	b = fork();
	if (b == 0)
		child_second();
	T_EQ("child B status", T_EXIT_PASS, t_wait_child(b));

	/* Another user (root) has its own budget. */
	t_file_open(&root, 64);
	t_register(&root, (uintptr_t)root.map, t_page, 1);
	t_file_close(&root);

	close(down[1]);		/* child A may exit now */
	T_EQ("child A status", T_EXIT_PASS, t_wait_child(a));
	if (user_use(NOBODY, &memory, &regions))
		t_fail("uid %d still listed after its files closed: memory %ld regions %ld",
		       NOBODY, memory, regions);

	/* And the budget is back. */
	b = fork();
	if (b == 0) {
		become_nobody();
		T_EQ("HELLO after the first process exited", 0, hello_errno(64));
		_exit(T_EXIT_PASS);
	}
	T_EQ("child C status", T_EXIT_PASS, t_wait_child(b));
	return T_EXIT_PASS;
}
