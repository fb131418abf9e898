// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The issue 9 reproducer under the default limits: an unprivileged user
 * asking for 16 files with 262144-entry rings and 131072 regions each
 * (about 500 MiB of kernel memory before max_user_memory existed) gets
 * ENOSPC instead, and never holds more than max_user_memory.
 */
#include "helpers.h"

#include <grp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY	65534
#define FILES	16
#define CHUNK	4096

static long nobody_memory(void)
{
	char line[256];
	long memory = 0;
	FILE *f = fopen("/sys/class/misc/ummunot/users", "r");

	if (!f)
		t_fail("open users: %s", t_errname(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned int u;
		long m;

		if (sscanf(line, "%u %ld", &u, &m) == 2 && u == NOBODY)
			memory = m;
	}
	fclose(f);
	return memory;
}

int main(int argc, char **argv)
{
	int up[2], down[2], st;
	long limit, used;
	char c;
	pid_t pid;

	t_init(argc, argv);
	limit = t_param_get("max_user_memory");
	t_log("max_user_memory %ld bytes (%ld MiB)", limit, limit >> 20);
	if (pipe(up) || pipe(down))
		t_fail("pipe");
	pid = fork();
	if (pid == 0) {
		struct ummunot_region *r = calloc(CHUNK, sizeof(*r));
		int files = 0, enospc = 0;
		long regions = 0;
		char *p = t_map_anon(1, false);

		close(up[0]);
		close(down[1]);
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			t_fail("setuid: %s", t_errname(errno));
		T_ASSERT(r, "calloc");
		for (int i = 0; i < CHUNK; i++)
			r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
							.length = t_page };
		for (int i = 0; i < FILES; i++) {
			struct ummunot_hello h;
			int fd = t_dev_open();
			int ret = t_hello(fd, &h, 262144);

			if (ret) {
				T_EQ("HELLO past the user's memory: -errno", -ENOSPC, ret);
				enospc++;
			} else {
				files++;
			}
			for (int n = 0; !ret && n < 131072; n += CHUNK) {
				uint32_t idx;

				ret = t_register_batch(fd, r, CHUNK, &idx);
				if (ret == -ENOSPC)
					enospc++;
				else if (ret)
					t_fail("REGISTER: %s", t_errname(-ret));
				else
					regions += CHUNK;
			}
		}
		t_log("nobody got %d rings of 262144 entries and %ld regions; %d ENOSPC",
		      files, regions, enospc);
		T_ASSERT(enospc > 0, "16 x 16 MiB rings + 16 x 131072 regions all fit");
		if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 0)
			_exit(1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &c, 1) != 1) {
		waitpid(pid, &st, 0);
		t_fail("child failed (status 0x%x)", st);
	}
	used = nobody_memory();
	t_log("uid %d holds %ld bytes (%ld MiB)", NOBODY, used, used >> 20);
	T_ASSERT(used > 0 && used <= limit, "held %ld > max_user_memory %ld", used, limit);
	close(down[1]);
	T_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		 "child status 0x%x", st);
	return T_EXIT_PASS;
}
