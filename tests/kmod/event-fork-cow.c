// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* fork write-protects a touched private page (PROTECTION_PAGE, filtered); the parent's write (COW break) yields CLEAR. */
#include "helpers.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	int go[2], ready[2];
	struct t_file f;
	uint64_t h;
	pid_t pid;
	int status;
	char c;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 13);
	T_OK("pipe", pipe(go));
	T_OK("pipe", pipe(ready));

	pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", t_errname(errno));
	if (pid == 0) {
		/* Keep our reference to the pages until the parent wrote. */
		close(go[1]);
		if (write(ready[1], "r", 1) != 1)
			_exit(2);
		if (read(go[0], &c, 1) < 0)
			_exit(2);
		_exit(p[t_page] == 1 ? 0 : 3);	/* child still sees the old data */
	}
	close(go[0]);
	close(ready[1]);
	T_EQ("child ready", 1, read(ready[0], &c, 1));

	t_expect_no_event(&f, "fork (PROTECTION_PAGE is filtered by default)");
	t_get_stats(&f, &st);
	T_ASSERT(st.filtered[UMMUNOT_EVENT_PROTECTION_PAGE] >= 1,
		 "stats.filtered[PROTECTION_PAGE]: expected >= 1, got %llu",
		 (unsigned long long)st.filtered[UMMUNOT_EVENT_PROTECTION_PAGE]);
	T_EQ("stats.regions_armed after fork", 1, st.regions_armed);

	/* COW break on one page while the child still shares it. */
	p[t_page] = 2;
	t_expect_event(&f, 13, h, (uintptr_t)p + t_page,
		       (uintptr_t)p + 2 * t_page, UMMUNOT_EVENT_CLEAR);

	T_EQ("release child", 1, write(go[1], "g", 1));
	T_EQ("waitpid", pid, waitpid(pid, &status, 0));
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "child saw wrong data or failed (status 0x%x)", status);
	t_expect_no_event(&f, "child exit (other mm)");

	munmap(p, 4 * t_page);
	t_file_close(&f);
	return T_EXIT_PASS;
}
