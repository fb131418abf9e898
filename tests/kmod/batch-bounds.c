// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Batch counts never size a kernel allocation: with max_regions at its
 * maximum (2^31-1), REGISTER, UNREGISTER and REARM with count 2^28 fail
 * cleanly (no WARNING from kvmalloc in the kernel log, which the runner
 * checks), and batches that span several of the module's copy chunks keep
 * exact error_index values and all-or-nothing behaviour, also when the
 * handles cannot be written back.
 */
#include "helpers.h"

#include <sys/mman.h>
#include <unistd.h>

#define HUGE_COUNT	(1U << 28)
#define N		300	/* several 2 KiB chunks of regions */

int main(int argc, char **argv)
{
	struct ummunot_region *r;
	struct ummunot_stats st;
	uint64_t h[N + 1];
	struct t_file f;
	uint32_t idx, k;
	char *p, *two;
	int ret;

	t_init(argc, argv);
	t_param_set("max_regions", 2147483647);		/* restored at exit */
	t_file_open(&f, 0);
	T_EQ("hello.max_regions", 2147483647, f.hello.max_regions);
	p = t_map_anon(1, true);

	/* Two pages, the second PROT_NONE: arrays that run into a fault. */
	two = mmap(NULL, 2 * t_page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(two != MAP_FAILED, "mmap");
	T_OK("mprotect", mprotect(two + t_page, t_page, PROT_NONE));

	/* count 2^28: refused by a limit or at the first fault, never kvmalloc'd. */
	r = (struct ummunot_region *)two;
	r[0] = (struct ummunot_region){ .start = (uintptr_t)p, .length = t_page };
	ret = t_register_batch(f.fd, r, HUGE_COUNT, &idx);
	T_ASSERT(ret == -ENOSPC || ret == -EFAULT,
		 "REGISTER count 2^28: expected ENOSPC or EFAULT, got %s",
		 ret ? t_errname(-ret) : "success");
	t_log("REGISTER count 2^28: %s, error_index %u", t_errname(-ret), idx);
	t_get_stats(&f, &st);
	T_EQ("regions after REGISTER count 2^28", 0, st.regions);

	h[0] = t_register(&f, (uintptr_t)p, t_page, 7);
	{
		uint64_t *hs = (uint64_t *)(two + t_page) - 2;

		hs[0] = h[0];
		hs[1] = h[0];
		ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, hs, HUGE_COUNT, &idx);
		T_EQ("UNREGISTER count 2^28 naming one region twice: -errno", -EINVAL, ret);
		T_EQ("UNREGISTER error_index", 1, idx);
		ret = t_handle_batch(f.fd, UMMUNOT_IOC_REARM, hs, HUGE_COUNT, &idx);
		T_EQ("REARM count 2^28 running into PROT_NONE: -errno", -EFAULT, ret);
		T_EQ("REARM error_index", 2, idx);
		hs[1] = 12345;
		ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, hs, HUGE_COUNT, &idx);
		T_EQ("UNREGISTER count 2^28 with an unknown handle: -errno", -ENOENT, ret);
		T_EQ("UNREGISTER error_index", 1, idx);
	}
	t_get_stats(&f, &st);
	T_EQ("regions after the failed handle batches", 1, st.regions);
	t_unregister(&f, h[0]);

	/* N regions, several chunks: an invalid element late in the batch. */
	r = calloc(N, sizeof(*r));
	T_ASSERT(r, "calloc");
	for (int i = 0; i < N; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p,
						.length = t_page, .cookie = i };
	r[257].length = 0;
	ret = t_register_batch(f.fd, r, N, &idx);
	T_EQ("REGISTER with element 257 invalid: -errno", -EINVAL, ret);
	T_EQ("error_index", 257, idx);
	t_get_stats(&f, &st);
	T_EQ("regions after the failed batch", 0, st.regions);
	r[257].length = t_page;
	ret = t_register_batch(f.fd, r, N, &idx);
	T_EQ("REGISTER of N regions", 0, ret);
	for (int i = 0; i < N; i++)
		h[i] = r[i].handle;

	/* Regions that run into the PROT_NONE page: EFAULT at the exact element. */
	k = t_page / sizeof(*r);		/* the element that straddles */
	{
		struct ummunot_region *rr = (struct ummunot_region *)two;

		for (uint32_t i = 0; i < k; i++)
			rr[i] = r[0];
		ret = t_register_batch(f.fd, rr, k + 5, &idx);
		T_EQ("REGISTER into PROT_NONE: -errno", -EFAULT, ret);
		T_EQ("error_index (first element not readable)", k, idx);
	}
	t_get_stats(&f, &st);
	T_EQ("regions after the faulting batch", N, st.regions);

	/*
	 * An array the caller can read but not write: the handles cannot be
	 * written back.  EFAULT, and nothing happened: no region, no event
	 * when the range then changes, regions_registered unchanged (it never
	 * goes back).
	 */
	{
		struct ummunot_region *ro;
		uint64_t registered = st.regions_registered;
		char *page = t_map_anon(1, true);

		ro = mmap(NULL, t_page, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		T_ASSERT(ro != MAP_FAILED, "mmap: %s", t_errname(errno));
		ro[0] = (struct ummunot_region){ .start = (uintptr_t)page,
						 .length = t_page, .cookie = 9 };
		ro[1] = ro[0];
		T_OK("mprotect(PROT_READ)", mprotect(ro, t_page, PROT_READ));
		ret = t_register_batch(f.fd, ro, 2, &idx);
		T_EQ("REGISTER from a read-only array: -errno", -EFAULT, ret);
		T_EQ("error_index (first handle not writable)", 0, idx);
		t_get_stats(&f, &st);
		T_EQ("regions after it", N, st.regions);
		T_EQ("regions_registered after it", registered,
		     st.regions_registered);
		T_OK("munmap of its range", munmap(page, t_page));
		t_expect_no_event(&f, "munmap of a range whose REGISTER failed");
		T_OK("munmap", munmap(ro, t_page));
	}

	/* Handles across chunks: a duplicate late in the batch changes nothing. */
	h[N] = h[3];
	ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, h, N + 1, &idx);
	T_EQ("UNREGISTER with a late duplicate: -errno", -EINVAL, ret);
	T_EQ("error_index", N, idx);
	t_get_stats(&f, &st);
	T_EQ("regions after the failed UNREGISTER", N, st.regions);
	ret = t_handle_batch(f.fd, UMMUNOT_IOC_REARM, h, N + 1, &idx);
	T_EQ("REARM naming one region twice", 0, ret);
	ret = t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, h, N, &idx);
	T_EQ("UNREGISTER of all N", 0, ret);
	t_get_stats(&f, &st);
	T_EQ("regions at the end", 0, st.regions);
	T_EQ("armed at the end", 0, st.regions_armed);

	free(r);
	t_file_close(&f);
	return T_EXIT_PASS;
}
