// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A peer that kept the rkey of a freed, invalidated buffer gets a remote access error. */
#include "verbs-helpers.h"

#include <sys/mman.h>

#define LEN	(64u * 1024)

static unsigned char *map(void)
{
	void *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		vt_fail("mmap: %s", strerror(errno));
	return p;
}

/*
 * held: the buffer is freed while the registration is still held (the
 * cache sees the invalidation, the MR lives until the put); otherwise the
 * registration is put back first and the invalidation itself ends it.
 * Returns the status of the peer's WRITE through the old rkey.
 */
static int scenario(struct vt_dev *d, bool monitored, bool held)
{
	struct ummunot_cache_stats st;
	const struct ummunot_reg *r;
	struct ummunot_cache *c;
	struct vt_pair p;
	unsigned char *a;
	uint32_t rkey;
	uint64_t addr;
	int s, n;

	vt_pair_create(d, &p, vt_page);
	c = vt_cache_create(d, monitored);
	a = map();
	VT_OK("get", ummunot_cache_get(c, a, LEN, VT_ACCESS, &r));
	rkey = r->rkey;
	addr = (uintptr_t)a;
	vt_pattern(p.stage, vt_page, 3);
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, 0, addr, rkey, vt_page);
	VT_EQ("first WRITE (buffer alive)", IBV_WC_SUCCESS, s);
	VT_ASSERT(!memcmp(a, p.stage, vt_page), "first WRITE did not land");

	if (!held)
		VT_OK("put", ummunot_cache_put(c, r));
	if (munmap(a, LEN))
		vt_fail("munmap: %s", strerror(errno));
	/* What an MPI progress loop does: let the cache see the event. */
	n = ummunot_cache_poll(c);
	VT_ASSERT(n >= 0, "ummunot_cache_poll: %s", strerror(-n));
	VT_EQ("events processed by poll", monitored ? 1 : 0, n);
	vt_cache_stats(c, &st);
	if (held) {
		/* Invalidated but in use: it must stay registered until the put. */
		VT_EQ("deregistrations while held", 0, st.deregistrations);
		VT_OK("put", ummunot_cache_put(c, r));
	}
	vt_cache_stats(c, &st);
	VT_EQ("registrations", 1, st.registrations);
	VT_EQ("deregistrations after the last put", monitored ? 1 : 0, st.deregistrations);

	/* The peer still has (addr, rkey) and writes again. */
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, 0, addr, rkey, vt_page);
	vt_log("monitoring %s, freed while %s: WRITE through the old rkey %#x -> %s (%d)",
	       monitored ? "on" : "off", held ? "held" : "not held", rkey,
	       s >= 0 ? ibv_wc_status_str((enum ibv_wc_status)s) : strerror(-s), s);
	vt_cache_destroy_clean(c);
	vt_pair_destroy(&p);	/* after an error both QPs are unusable */
	return s;
}

int main(int argc, char **argv)
{
	struct vt_dev d;
	int held, s;

	vt_init(argc, argv);
	vt_dev_open(&d);
	for (held = 0; held < 2; held++) {
		s = scenario(&d, true, held);
		VT_EQ("status of a WRITE through an invalidated rkey (IBV_WC_REM_ACCESS_ERR)",
		      IBV_WC_REM_ACCESS_ERR, s);
		/* Negative control: without the event the old MR lives on. */
		s = scenario(&d, false, held);
		VT_EQ("status with monitoring off (silent success into freed pages)",
		      IBV_WC_SUCCESS, s);
	}
	vt_dev_close(&d);
	return VT_EXIT_PASS;
}
