// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A get must not fail because a cached neighbour it merges with is freed meanwhile.
 *
 * The cache merges a new registration with adjacent cached entries.  If
 * another thread frees such a neighbour after the get has processed the
 * ring but before the backend pins the merged range, ibv_reg_mr() of the
 * merged range fails with EFAULT although the caller's own range is mapped
 * and valid.  The backend here is the verbs one with a hook that frees the
 * neighbour just before pinning, so that window is hit every time.  The
 * get must still succeed and its registration must reach the caller's
 * pages (an RDMA WRITE through it lands).
 */
#include "verbs-helpers.h"

#include <sys/mman.h>

struct hooked {
	struct ibv_pd *pd;
	void *unmap_first;	/* munmap this before the next reg, once */
	size_t unmap_len;
	unsigned int regs;
};

static int hooked_reg(void *ctx, void *addr, size_t length, int access, void **mr,
		      uint32_t *lkey, uint32_t *rkey)
{
	struct hooked *h = ctx;
	struct ibv_mr *m;

	h->regs++;
	if (h->unmap_first) {
		/* "Another thread" frees the neighbour now. */
		if (munmap(h->unmap_first, h->unmap_len))
			vt_fail("munmap neighbour: %s", strerror(errno));
		h->unmap_first = NULL;
	}
	errno = 0;
	m = ibv_reg_mr(h->pd, addr, length, access);
	if (!m)
		return errno ? -errno : -ENOMEM;
	*mr = m;
	*lkey = m->lkey;
	*rkey = m->rkey;
	return 0;
}

static int hooked_dereg(void *ctx, void *mr)
{
	(void)ctx;
	return -ibv_dereg_mr(mr);
}

int main(int argc, char **argv)
{
	static const struct ummunot_backend_ops ops = { hooked_reg, hooked_dereg };
	const size_t len = 4 * 4096;
	const struct ummunot_reg *ra, *rb;
	struct ummunot_cache *c;
	struct hooked h = { 0 };
	struct vt_pair p;
	struct vt_dev d;
	unsigned char *x;
	int r, s;

	vt_init(argc, argv);
	vt_dev_open(&d);
	vt_pair_create(&d, &p, vt_page);
	h.pd = d.pd;
	r = ummunot_cache_create_backend(&ops, &h, NULL, &c);
	if (r == -ENOENT)
		vt_skip("/dev/ummunot does not exist (module not loaded)");
	VT_OK("ummunot_cache_create_backend", r);

	/* A = [x, x + len), B = [x + len, x + 2 len): adjacent, both mapped. */
	x = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	VT_ASSERT(x != MAP_FAILED, "mmap: %s", strerror(errno));
	VT_OK("get(B)", ummunot_cache_get(c, x + len, len, VT_ACCESS, &rb));
	VT_OK("put(B)", ummunot_cache_put(c, rb));

	/* get(A) merges with B; B is freed just before the pin. */
	h.unmap_first = x + len;
	h.unmap_len = len;
	r = ummunot_cache_get(c, x, len, VT_ACCESS, &ra);
	vt_log("get(A) with its cached neighbour B freed before the pin: %s (%u backend regs)",
	       r < 0 ? strerror(-r) : "ok", h.regs);
	VT_ASSERT(r == 0, "get(A) failed with %s although A is mapped: the cache did not "
		  "fall back to registering A alone when the merged range could not be "
		  "pinned", strerror(-r));
	VT_ASSERT(ra->addr <= (uintptr_t)x && ra->addr + ra->length >= (uintptr_t)x + len,
		  "registration does not cover A");
	vt_pattern(p.stage, vt_page, 5);
	s = vt_rdma(&p, IBV_WR_RDMA_WRITE, 0, (uintptr_t)x, ra->rkey, vt_page);
	VT_EQ("WRITE into A", IBV_WC_SUCCESS, s);
	VT_ASSERT(!memcmp(x, p.stage, vt_page), "WRITE did not land in A");
	VT_OK("put(A)", ummunot_cache_put(c, ra));
	vt_cache_destroy_clean(c);
	munmap(x, len);
	vt_pair_destroy(&p);
	vt_dev_close(&d);
	return VT_EXIT_PASS;
}
