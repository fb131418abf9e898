// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Bad ioctl arguments get the documented errno, batches are all-or-nothing with error_index, state is untouched. */
#include "helpers.h"

#include <sys/mman.h>
#include <unistd.h>

#define BAD_PTR ((void *)8)

static struct t_file f;

static void expect_regions(uint64_t regions, uint64_t armed, const char *what)
{
	struct ummunot_stats st;

	t_get_stats(&f, &st);
	if (st.regions != regions || st.regions_armed != armed)
		t_fail("%s: stats regions/armed expected %llu/%llu, got %llu/%llu", what,
		       (unsigned long long)regions, (unsigned long long)armed,
		       (unsigned long long)st.regions, (unsigned long long)st.regions_armed);
}

static void reg_fail(const char *what, struct ummunot_region *r, uint32_t n,
		     int err, uint32_t want_idx)
{
	uint32_t idx;
	int ret = t_register_batch(f.fd, r, n, &idx);

	if (ret != -err)
		t_fail("REGISTER %s: expected %s, got %s", what, t_errname(err),
		       ret ? t_errname(-ret) : "success");
	if (want_idx != UINT32_MAX && idx != want_idx)
		t_fail("REGISTER %s: error_index expected %u, got %u", what, want_idx, idx);
}

static void handles_fail(unsigned long cmd, const char *what, uint64_t *h,
			 uint32_t n, int err, uint32_t want_idx)
{
	uint32_t idx;
	int ret = t_handle_batch(f.fd, cmd, h, n, &idx);

	if (ret != -err)
		t_fail("%s %s: expected %s, got %s",
		       cmd == UMMUNOT_IOC_REARM ? "REARM" : "UNREGISTER", what,
		       t_errname(err), ret ? t_errname(-ret) : "success");
	if (want_idx != UINT32_MAX && idx != want_idx)
		t_fail("%s %s: error_index expected %u, got %u",
		       cmd == UMMUNOT_IOC_REARM ? "REARM" : "UNREGISTER", what,
		       want_idx, idx);
}

static void before_hello(void)
{
	struct ummunot_region r = { .start = 0x100000, .length = 4096 };
	struct ummunot_batch b = { .ptr = (uintptr_t)&r, .count = 1 };
	struct ummunot_filter flt = { .mask = UMMUNOT_EVENT_MASK_DEFAULT };
	struct ummunot_resync rs = { 0 };
	struct ummunot_stats st;
	int fd = t_dev_open();

	T_ERRNO("REGISTER before HELLO", EBADFD, ioctl(fd, UMMUNOT_IOC_REGISTER, &b));
	T_ERRNO("UNREGISTER before HELLO", EBADFD, ioctl(fd, UMMUNOT_IOC_UNREGISTER, &b));
	T_ERRNO("REARM before HELLO", EBADFD, ioctl(fd, UMMUNOT_IOC_REARM, &b));
	T_ERRNO("SET_FILTER before HELLO", EBADFD, ioctl(fd, UMMUNOT_IOC_SET_FILTER, &flt));
	T_ERRNO("RESYNC before HELLO", EBADFD, ioctl(fd, UMMUNOT_IOC_RESYNC, &rs));
	T_ERRNO("GET_STATS before HELLO", EBADFD, ioctl(fd, UMMUNOT_IOC_GET_STATS, &st));
	T_ERRNO("unknown command before HELLO", ENOTTY,
		ioctl(fd, _IOWR(UMMUNOT_IOC_MAGIC, 0x7f, struct ummunot_batch), &b));
	close(fd);
}

int main(int argc, char **argv)
{
	struct ummunot_region r[4], good;
	struct ummunot_batch b;
	uint64_t h[4], ha, hb;
	char *p, *page2;
	int ret;

	t_init(argc, argv);
	before_hello();
	t_file_open(&f, 0);
	p = t_map_anon(16, true);

	/* Unknown commands. */
	T_ERRNO("unknown nr", ENOTTY,
		ioctl(f.fd, _IOWR(UMMUNOT_IOC_MAGIC, 0x7f, struct ummunot_batch), &good));
	T_ERRNO("other magic", ENOTTY, ioctl(f.fd, _IOWR('X', 0x01, struct ummunot_batch), &good));
	T_ERRNO("HELLO number, wrong size", ENOTTY,
		ioctl(f.fd, _IOWR(UMMUNOT_IOC_MAGIC, 0x00, __u32), &good));
	T_ERRNO("REGISTER number, wrong direction", ENOTTY,
		ioctl(f.fd, _IOW(UMMUNOT_IOC_MAGIC, 0x01, struct ummunot_batch), &good));
	T_ERRNO("FIONREAD", ENOTTY, ioctl(f.fd, 0x541B, &ret));

	/* Bad pointers. */
	T_ERRNO("REGISTER arg bad pointer", EFAULT, ioctl(f.fd, UMMUNOT_IOC_REGISTER, BAD_PTR));
	T_ERRNO("UNREGISTER arg bad pointer", EFAULT, ioctl(f.fd, UMMUNOT_IOC_UNREGISTER, BAD_PTR));
	T_ERRNO("REARM arg bad pointer", EFAULT, ioctl(f.fd, UMMUNOT_IOC_REARM, BAD_PTR));
	T_ERRNO("SET_FILTER arg bad pointer", EFAULT, ioctl(f.fd, UMMUNOT_IOC_SET_FILTER, BAD_PTR));
	T_ERRNO("RESYNC arg bad pointer", EFAULT, ioctl(f.fd, UMMUNOT_IOC_RESYNC, BAD_PTR));
	T_ERRNO("GET_STATS arg bad pointer", EFAULT, ioctl(f.fd, UMMUNOT_IOC_GET_STATS, BAD_PTR));
	memset(&b, 0, sizeof(b));
	b.ptr = (uintptr_t)BAD_PTR;
	b.count = 1;
	T_ERRNO("REGISTER batch ptr bad", EFAULT, ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b));
	T_ERRNO("UNREGISTER batch ptr bad", EFAULT, ioctl(f.fd, UMMUNOT_IOC_UNREGISTER, &b));
	T_ERRNO("REARM batch ptr bad", EFAULT, ioctl(f.fd, UMMUNOT_IOC_REARM, &b));
	b.ptr = (uintptr_t)0xffff888000000000ULL;	/* kernel address */
	T_ERRNO("REGISTER batch ptr in kernel space", EFAULT, ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b));
	expect_regions(0, 0, "after EFAULTs");

	/* An array whose tail runs into an inaccessible page: nothing registered. */
	page2 = t_map_anon(2, true);
	T_OK("mprotect", mprotect(page2 + t_page, t_page, PROT_NONE));
	{
		struct ummunot_region *tail = (struct ummunot_region *)(page2 + t_page) - 2;

		for (int i = 0; i < 2; i++)
			tail[i] = (struct ummunot_region){ .start = (uintptr_t)p + i * t_page,
							   .length = t_page };
		memset(&b, 0, sizeof(b));
		b.ptr = (uintptr_t)tail;
		b.count = 3;	/* third element is in the PROT_NONE page */
		T_ERRNO("REGISTER array crossing into PROT_NONE", EFAULT,
			ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b));
		expect_regions(0, 0, "after a REGISTER batch that faulted");
	}

	/* Argument checks, each element position reported. */
	good = (struct ummunot_region){ .start = (uintptr_t)p, .length = t_page, .cookie = 1 };
	for (int i = 0; i < 4; i++)
		r[i] = good;
	r[2].length = 0;
	reg_fail("length 0 at [2]", r, 3, EINVAL, 2);
	r[2] = good;
	r[1].start = UINT64_MAX - 100;
	r[1].length = 4096;
	reg_fail("wrap-around at [1]", r, 3, EINVAL, 1);
	r[1] = good;
	r[0].start = 0xffff800000000000ULL;
	reg_fail("start beyond user space at [0]", r, 3, EINVAL, 0);
	r[0].start = (uintptr_t)p;
	r[0].length = 0x8000000000000000ULL;
	reg_fail("end beyond user space at [0]", r, 3, EINVAL, 0);
	r[0] = good;
	r[3].flags = 1;
	reg_fail("unknown region flag at [3]", r, 4, EINVAL, 3);
	r[3].flags = 0x80000000u;
	reg_fail("high region flag at [3]", r, 4, EINVAL, 3);
	r[3] = good;
	r[2].resv = 1;
	reg_fail("non-zero region resv at [2]", r, 4, EINVAL, 2);
	r[2] = good;
	expect_regions(0, 0, "after failed REGISTER batches");

	memset(&b, 0, sizeof(b));
	b.ptr = (uintptr_t)r;
	b.count = 0;
	T_ERRNO("REGISTER count 0", EINVAL, ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b));
	b.count = 1;
	b.flags = 1;
	T_ERRNO("REGISTER batch flags", EINVAL, ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b));
	b.flags = 0;
	b.resv = 1;
	T_ERRNO("REGISTER batch resv", EINVAL, ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b));
	expect_regions(0, 0, "after bad batch headers");

	/* Two good regions for UNREGISTER/REARM checks. */
	ha = t_register(&f, (uintptr_t)p, 2 * t_page, 0xa);
	hb = t_register(&f, (uintptr_t)p + 4 * t_page, 2 * t_page, 0xb);
	T_OK("madvise", madvise(p + 4 * t_page, t_page, MADV_DONTNEED));
	t_expect_event(&f, 0xb, hb, (uintptr_t)p + 4 * t_page,
		       (uintptr_t)p + 5 * t_page, UMMUNOT_EVENT_CLEAR);
	expect_regions(2, 1, "setup");
	{
		uint64_t unknown = ha ^ hb ^ 0x5a5a5a5a5a5a5a5aULL;

		if (unknown == ha || unknown == hb)
			unknown = ~ha & ~hb;
		h[0] = ha;
		h[1] = unknown;
		handles_fail(UMMUNOT_IOC_UNREGISTER, "unknown handle at [1]", h, 2, ENOENT, 1);
		expect_regions(2, 1, "after failed UNREGISTER");
		h[0] = hb;
		handles_fail(UMMUNOT_IOC_REARM, "unknown handle at [1]", h, 2, ENOENT, 1);
		expect_regions(2, 1, "after failed REARM (hb must still be disarmed)");
	}
	h[0] = ha;
	h[1] = hb;
	h[2] = ha;
	handles_fail(UMMUNOT_IOC_UNREGISTER, "duplicate handle at [2]", h, 3, EINVAL, 2);
	expect_regions(2, 1, "after a duplicate-handle UNREGISTER batch");
	/*
	 * REARM with a duplicate handle is accepted (uapi: "naming an armed
	 * region, or one region twice, is not an error"): hb is armed exactly
	 * once and fires exactly once.
	 */
	{
		uint32_t idx;
		int ret2 = t_handle_batch(f.fd, UMMUNOT_IOC_REARM, h, 3, &idx);

		T_ASSERT(ret2 == 0, "REARM with a duplicate handle: expected success, got %s",
			 t_errname(-ret2));
		expect_regions(2, 2, "after a duplicate-handle REARM");
		T_OK("madvise", madvise(p + 4 * t_page, t_page, MADV_DONTNEED));
		t_expect_event(&f, 0xb, hb, (uintptr_t)p + 4 * t_page,
			       (uintptr_t)p + 5 * t_page, UMMUNOT_EVENT_CLEAR);
		expect_regions(2, 1, "after hb fired again");
	}
	handles_fail(UMMUNOT_IOC_UNREGISTER, "count 0", h, 0, EINVAL, UINT32_MAX);
	handles_fail(UMMUNOT_IOC_REARM, "count 0", h, 0, EINVAL, UINT32_MAX);
	handles_fail(UMMUNOT_IOC_UNREGISTER, "count > max_regions", h,
		     f.hello.max_regions + 1, EINVAL, UINT32_MAX);
	memset(&b, 0, sizeof(b));
	b.ptr = (uintptr_t)h;
	b.count = 1;
	b.flags = 2;
	T_ERRNO("UNREGISTER batch flags", EINVAL, ioctl(f.fd, UMMUNOT_IOC_UNREGISTER, &b));
	T_ERRNO("REARM batch flags", EINVAL, ioctl(f.fd, UMMUNOT_IOC_REARM, &b));
	b.flags = 0;
	b.resv = 3;
	T_ERRNO("UNREGISTER batch resv", EINVAL, ioctl(f.fd, UMMUNOT_IOC_UNREGISTER, &b));
	T_ERRNO("REARM batch resv", EINVAL, ioctl(f.fd, UMMUNOT_IOC_REARM, &b));
	expect_regions(2, 1, "after bad UNREGISTER/REARM");

	/* SET_FILTER. */
	{
		struct ummunot_filter flt;
		struct ummunot_stats st;
		static const uint64_t bad[] = { 1ULL << 0, 1ULL << 10, 1ULL << 15,
						1ULL << 16, 1ULL << 63 };

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			memset(&flt, 0, sizeof(flt));
			flt.mask = UMMUNOT_EVENT_MASK_DEFAULT | bad[i];
			T_ERRNO("SET_FILTER bit outside MASK_ALL", EINVAL,
				ioctl(f.fd, UMMUNOT_IOC_SET_FILTER, &flt));
		}
		memset(&flt, 0, sizeof(flt));
		flt.mask = UMMUNOT_EVENT_MASK_ALL;
		flt.flags = 1;
		T_ERRNO("SET_FILTER flags", EINVAL, ioctl(f.fd, UMMUNOT_IOC_SET_FILTER, &flt));
		flt.flags = 0;
		flt.resv = 1;
		T_ERRNO("SET_FILTER resv", EINVAL, ioctl(f.fd, UMMUNOT_IOC_SET_FILTER, &flt));
		t_get_stats(&f, &st);
		T_EQ("event_mask after failed SET_FILTERs", UMMUNOT_EVENT_MASK_DEFAULT, st.event_mask);
	}

	/* RESYNC. */
	{
		struct ummunot_resync rs = { .flags = 1 };

		T_ERRNO("RESYNC flags", EINVAL, ioctl(f.fd, UMMUNOT_IOC_RESYNC, &rs));
		rs.flags = 0;
		rs.resv = 1;
		T_ERRNO("RESYNC resv", EINVAL, ioctl(f.fd, UMMUNOT_IOC_RESYNC, &rs));
	}

	/* Everything still works: ha fires, hb is disarmed. */
	T_OK("munmap", munmap(p, 8 * t_page));
	t_expect_event(&f, 0xa, ha, (uintptr_t)p, (uintptr_t)p + 2 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	t_file_close(&f);
	return T_EXIT_PASS;
}
