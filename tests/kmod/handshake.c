// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* HELLO: argument checks, feature negotiation, ring size rounding and limits, ring header contents, once only. */
#include "helpers.h"

#include <sys/mman.h>
#include <unistd.h>

static void check_ring_size(uint32_t asked, uint32_t want)
{
	struct t_file f;

	t_file_open(&f, asked);
	if (f.hello.ring_entries != want)
		t_fail("ring_entries %u: expected %u, got %u", asked, want,
		       f.hello.ring_entries);
	T_EQ("hdr->entry_mask", want - 1, f.hdr->entry_mask);
	T_ASSERT(f.hello.ring_mmap_size >= f.hello.header_size + (uint64_t)want * 64,
		 "ring_mmap_size %llu < header %u + %u entries",
		 (unsigned long long)f.hello.ring_mmap_size, f.hello.header_size, want);
	t_file_close(&f);
}

int main(int argc, char **argv)
{
	struct ummunot_hello h;
	long long def, max, maxreg;
	struct t_file f;
	void *map;
	int fd, ret;

	t_init(argc, argv);
	def = t_param_get("default_ring_entries");
	max = t_param_get("max_ring_entries");
	maxreg = t_param_get("max_regions");

	fd = t_dev_open();

	/* Bad handshakes change nothing. */
	memset(&h, 0, sizeof(h));
	T_ERRNO("HELLO abi_version 0", EINVAL, ioctl(fd, UMMUNOT_IOC_HELLO, &h));
	memset(&h, 0, sizeof(h));
	h.abi_version = 1;
	h.flags = 1;
	T_ERRNO("HELLO flags 1", EINVAL, ioctl(fd, UMMUNOT_IOC_HELLO, &h));
	for (int i = 0; i < 4; i++) {
		memset(&h, 0, sizeof(h));
		h.abi_version = 1;
		h.resv[i] = 1ULL << 40;
		T_ERRNO("HELLO resv[i] != 0", EINVAL, ioctl(fd, UMMUNOT_IOC_HELLO, &h));
	}
	memset(&h, 0, sizeof(h));
	h.abi_version = UMMUNOT_ABI_VERSION + 1;
	T_ERRNO("HELLO newer abi_version", EPROTONOSUPPORT, ioctl(fd, UMMUNOT_IOC_HELLO, &h));
	T_EQ("abi_version written back on EPROTONOSUPPORT", UMMUNOT_ABI_VERSION, h.abi_version);
	memset(&h, 0, sizeof(h));
	h.abi_version = 1;
	h.ring_entries = (uint32_t)max + 1;
	T_ERRNO("HELLO ring_entries > max_ring_entries", E2BIG, ioctl(fd, UMMUNOT_IOC_HELLO, &h));
	T_ERRNO("HELLO bad pointer", EFAULT, ioctl(fd, UMMUNOT_IOC_HELLO, (void *)16));
	T_ERRNO("mmap before HELLO", EBADFD,
		(long)mmap(NULL, 2 * t_page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));

	/* Now a good one, asking for an unknown feature bit too. */
	memset(&h, 0, sizeof(h));
	h.abi_version = 1;
	h.features = UMMUNOT_FEATURES_V1 | (1ULL << 40);
	ret = t_ioctl(fd, UMMUNOT_IOC_HELLO, &h);
	T_ASSERT(ret == 0, "HELLO after failed ones: %s", t_errname(-ret));
	T_EQ("abi_version", UMMUNOT_ABI_VERSION, h.abi_version);
	T_EQ("supported_features has all of V1", UMMUNOT_FEATURES_V1,
	     h.supported_features & UMMUNOT_FEATURES_V1);
	/* REARM waits (tests/kmod/rearm-inflight): a module that does says so. */
	T_ASSERT(h.supported_features & UMMUNOT_FEATURE_REARM_WAIT,
		 "supported_features 0x%llx without REARM_WAIT",
		 (unsigned long long)h.supported_features);
	T_EQ("granted = requested & supported",
	     (UMMUNOT_FEATURES_V1 | (1ULL << 40)) & h.supported_features, h.features);
	T_EQ("ring_entries (0 -> default_ring_entries)", def, h.ring_entries);
	T_EQ("entry_size", sizeof(struct ummunot_event), h.entry_size);
	T_ASSERT(h.header_size >= sizeof(struct ummunot_ring_header) && h.header_size % 64 == 0,
		 "header_size %u", h.header_size);
	T_EQ("max_regions", maxreg, h.max_regions);
	T_ASSERT(h.ring_mmap_size >= h.header_size + (uint64_t)h.ring_entries * h.entry_size,
		 "ring_mmap_size %llu too small", (unsigned long long)h.ring_mmap_size);
	T_EQ("ring_mmap_offset is page aligned", 0, h.ring_mmap_offset % t_page);
	for (int i = 0; i < 4; i++)
		T_EQ("resv out", 0, h.resv[i]);
	{
		struct ummunot_hello h2 = h;

		T_ERRNO("second HELLO", EALREADY, ioctl(fd, UMMUNOT_IOC_HELLO, &h2));
	}
	map = mmap(NULL, h.ring_mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		   h.ring_mmap_offset);
	T_ASSERT(map != MAP_FAILED, "mmap: %s", t_errname(errno));
	{
		struct ummunot_ring_header *hdr = map;

		T_EQ("hdr magic", UMMUNOT_RING_MAGIC, hdr->magic);
		T_EQ("hdr version", UMMUNOT_RING_VERSION, hdr->version);
		T_EQ("hdr header_size", h.header_size, hdr->header_size);
		T_EQ("hdr entry_size", h.entry_size, hdr->entry_size);
		T_EQ("hdr nr_entries", h.ring_entries, hdr->nr_entries);
		T_EQ("hdr entry_mask", h.ring_entries - 1, hdr->entry_mask);
		T_EQ("hdr features", h.features, hdr->features);
		T_EQ("hdr producer", 0, hdr->producer);
		T_EQ("hdr consumer", 0, hdr->consumer);
		T_EQ("hdr overflow", 0, hdr->overflow);
		T_EQ("hdr dropped", 0, hdr->dropped);
	}
	munmap(map, h.ring_mmap_size);
	close(fd);

	/* Feature 0 asked: nothing granted beyond what is always granted. */
	fd = t_dev_open();
	memset(&h, 0, sizeof(h));
	h.abi_version = 1;
	ret = t_ioctl(fd, UMMUNOT_IOC_HELLO, &h);
	T_ASSERT(ret == 0, "HELLO features 0: %s", t_errname(-ret));
	T_EQ("granted with features 0 (RING_GENERATION is always granted)",
	     UMMUNOT_FEATURE_RING_GENERATION, h.features);
	t_log("features 0 requested -> granted 0x%llx", (unsigned long long)h.features);
	close(fd);

	/* Ring sizes: powers of two, at least the minimum, at most the maximum. */
	check_ring_size(1, UMMUNOT_RING_MIN_ENTRIES);
	check_ring_size(UMMUNOT_RING_MIN_ENTRIES - 1, UMMUNOT_RING_MIN_ENTRIES);
	check_ring_size(UMMUNOT_RING_MIN_ENTRIES, UMMUNOT_RING_MIN_ENTRIES);
	check_ring_size(UMMUNOT_RING_MIN_ENTRIES + 1, 2 * UMMUNOT_RING_MIN_ENTRIES);
	check_ring_size(1000, 1024);
	check_ring_size(4096, 4096);
	if ((max & (max - 1)) == 0)
		check_ring_size((uint32_t)max, (uint32_t)max);
	check_ring_size((uint32_t)(max / 2 + 1) , (uint32_t)max);	/* rounds up to max */

	/* The module's parameters drive the defaults and limits. */
	t_param_set("default_ring_entries", 256);	/* restored at exit */
	check_ring_size(0, 256);
	t_param_set("max_ring_entries", 1024);
	fd = t_dev_open();
	ret = t_hello(fd, &h, 2048);
	T_EQ("HELLO ring_entries above lowered max_ring_entries: -errno", -E2BIG, ret);
	close(fd);
	check_ring_size(1024, 1024);
	t_param_set("max_regions", 100);
	t_file_open(&f, 0);
	T_EQ("hello.max_regions follows the parameter", 100, f.hello.max_regions);
	t_file_close(&f);
	t_param_restore_all();
	T_EQ("default_ring_entries restored", def, t_param_get("default_ring_entries"));
	return T_EXIT_PASS;
}
