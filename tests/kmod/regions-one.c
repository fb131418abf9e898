// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* One watched region among unwatched mappings: a wide munmap yields exactly its event. */
#include "helpers.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	struct ummunot_stats st;
	struct t_file f;
	uint64_t h;
	char *p;

	t_init(argc, argv);
	t_file_open(&f, 0);

	p = t_map_anon(64, true);
	h = t_register(&f, (uintptr_t)p + 31 * t_page, t_page, 0xfeedfacecafebeefULL);
	t_get_stats(&f, &st);
	T_EQ("stats.regions", 1, st.regions);
	T_EQ("stats.regions_armed", 1, st.regions_armed);
	T_EQ("stats.regions_registered", 1, st.regions_registered);

	T_OK("munmap", munmap(p, 64 * t_page));
	t_expect_event(&f, 0xfeedfacecafebeefULL, h, (uintptr_t)p + 31 * t_page,
		       (uintptr_t)p + 32 * t_page, UMMUNOT_EVENT_UNMAP);

	t_unregister(&f, h);
	t_get_stats(&f, &st);
	T_EQ("stats.regions after UNREGISTER", 0, st.regions);
	T_EQ("stats.regions_registered (cumulative)", 1, st.regions_registered);
	T_EQ("stats.events", 1, st.events);
	t_file_close(&f);
	return T_EXIT_PASS;
}
