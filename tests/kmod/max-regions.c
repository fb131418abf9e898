// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* max_regions: HELLO reports it, REGISTER fails with ENOSPC at the limit and is all-or-nothing. */
#include "helpers.h"

#include <sys/mman.h>

#define LIMIT 8

int main(int argc, char **argv)
{
	struct ummunot_region r[LIMIT + 2];
	struct ummunot_stats st;
	uint32_t idx;
	struct t_file f;
	uint64_t h;
	char *p;
	int ret;

	t_init(argc, argv);
	t_param_set("max_regions", LIMIT);	/* restored at exit */
	t_file_open(&f, 0);
	T_EQ("hello.max_regions", LIMIT, f.hello.max_regions);

	p = t_map_anon(LIMIT + 2, false);
	for (int i = 0; i < LIMIT + 2; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p + i * t_page,
						.length = t_page, .cookie = i };

	ret = t_register_batch(f.fd, r, LIMIT - 1, &idx);
	T_ASSERT(ret == 0, "REGISTER %d: %s", LIMIT - 1, t_errname(-ret));

	/* 7 + 2 > 8: nothing registered. */
	ret = t_register_batch(f.fd, &r[LIMIT - 1], 2, &idx);
	T_EQ("REGISTER past max_regions: -errno", -ENOSPC, ret);
	t_get_stats(&f, &st);
	T_EQ("stats.regions after failed batch", LIMIT - 1, st.regions);

	ret = t_register_batch(f.fd, &r[LIMIT - 1], 1, &idx);
	T_ASSERT(ret == 0, "REGISTER up to the limit: %s", t_errname(-ret));
	ret = t_register_batch(f.fd, &r[LIMIT], 1, &idx);
	T_EQ("REGISTER at max_regions: -errno", -ENOSPC, ret);

	/* Room again after UNREGISTER. */
	t_unregister(&f, r[0].handle);
	h = t_register(&f, (uintptr_t)p + LIMIT * t_page, t_page, 99);
	t_get_stats(&f, &st);
	T_EQ("stats.regions", LIMIT, st.regions);

	/* A batch longer than max_regions is refused as a whole. */
	t_unregister(&f, h);
	{
		uint64_t hs[LIMIT - 1];

		for (int i = 1; i < LIMIT; i++)
			hs[i - 1] = r[i].handle;
		ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, hs, LIMIT - 1, &idx);
		T_ASSERT(ret == 0, "UNREGISTER: %s", t_errname(-ret));
	}
	ret = t_register_batch(f.fd, r, LIMIT + 1, &idx);
	T_ASSERT(ret == -EINVAL || ret == -ENOSPC,
		 "REGISTER count %d > max_regions %d: expected EINVAL or ENOSPC, got %s",
		 LIMIT + 1, LIMIT, ret ? t_errname(-ret) : "success");
	t_get_stats(&f, &st);
	T_EQ("stats.regions after oversized batch", 0, st.regions);

	t_file_close(&f);
	munmap(p, (LIMIT + 2) * t_page);
	return T_EXIT_PASS;
}
