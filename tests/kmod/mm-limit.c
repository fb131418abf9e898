// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * max_regions_per_mm bounds the regions of all files of one address space
 * together (ENOSPC, error_index = count), so one invalidation makes a
 * bounded number of callbacks; another mm has its own budget; closing a
 * file gives its regions back.  Logs how long one madvise over the most
 * regions allowed takes here (not asserted: TCG).
 */
#include "helpers.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIMIT 100

static void fill(struct ummunot_region *r, int n, void *p)
{
	for (int i = 0; i < n; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
						.length = t_page, .cookie = i };
}

int main(int argc, char **argv)
{
	struct ummunot_region r[LIMIT + 1];
	struct t_file a, b;
	uint32_t idx;
	pid_t pid;
	int ret, st;
	char *p;

	t_init(argc, argv);
	T_EQ("default max_regions_per_mm", 131072, t_param_get("max_regions_per_mm"));
	t_param_set("max_regions_per_mm", LIMIT);	/* restored at exit */

	p = t_map_anon(1, true);
	fill(r, LIMIT + 1, p);
	t_file_open(&a, 0);
	t_file_open(&b, 0);

	ret = t_register_batch(a.fd, r, 60, &idx);
	T_EQ("REGISTER 60 in file A", 0, ret);
	ret = t_register_batch(b.fd, r, 50, &idx);
	T_EQ("REGISTER 50 more in file B of the same mm: -errno", -ENOSPC, ret);
	T_EQ("error_index for the mm limit", 50, idx);
	ret = t_register_batch(b.fd, r, 40, &idx);
	T_EQ("REGISTER 40 in file B (100 in the mm)", 0, ret);
	ret = t_register_batch(a.fd, r, 1, &idx);
	T_EQ("REGISTER one more in file A: -errno", -ENOSPC, ret);

	/* Another address space has its own budget. */
	pid = fork();
	if (pid == 0) {
		struct t_file c;

		t_file_open(&c, 0);
		ret = t_register_batch(c.fd, r, LIMIT, &idx);
		T_EQ("REGISTER max_regions_per_mm in a child mm", 0, ret);
		_exit(T_EXIT_PASS);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != T_EXIT_PASS)
		t_fail("child failed (status 0x%x)", st);

	/* Closing A gives its 60 back to the mm. */
	t_file_close(&a);
	ret = t_register_batch(b.fd, r, 60, &idx);
	T_EQ("REGISTER 60 in file B after A closed", 0, ret);
	t_file_close(&b);

	/* The worst case at the default bound: every region over one page. */
	{
		uint32_t max = 131072, chunk = 4096;
		struct ummunot_region *big = calloc(chunk, sizeof(*big));
		double t0, t1;

		t_param_set("max_regions_per_mm", max);
		t_param_set("max_regions", max);
		T_ASSERT(big, "calloc");
		fill(big, chunk, p);
		t_file_open(&a, 64);
		for (uint32_t i = 0; i < max; i += chunk) {
			ret = t_register_batch(a.fd, big, chunk, &idx);
			T_EQ("REGISTER up to max_regions_per_mm", 0, ret);
		}
		ret = t_register_batch(a.fd, big, 1, &idx);
		T_EQ("REGISTER past max_regions_per_mm: -errno", -ENOSPC, ret);
		t0 = t_now();
		T_OK("madvise(MADV_DONTNEED)", madvise(p, t_page, MADV_DONTNEED));
		t1 = t_now();
		t_log("one-page madvise over %u watched regions (armed, 64-entry ring): %.1f ms",
		      max, (t1 - t0) * 1e3);
		t0 = t_now();
		T_OK("madvise(MADV_DONTNEED)", madvise(p, t_page, MADV_DONTNEED));
		t1 = t_now();
		t_log("again, all disarmed: %.1f ms", (t1 - t0) * 1e3);
		t_file_close(&a);
		free(big);
	}
	return T_EXIT_PASS;
}
