// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The production backend: ibv_reg_mr()/ibv_dereg_mr() on the caller's pd.
#include <cerrno>

#include <ummunot/ummunot.h>

#if UMMUNOT_HAVE_VERBS
#include <infiniband/verbs.h>

namespace {

int verbs_reg(void *ctx, void *addr, size_t length, int access, void **mr,
	      uint32_t *lkey, uint32_t *rkey)
{
	errno = 0;
	ibv_mr *m = ibv_reg_mr(static_cast<ibv_pd *>(ctx), addr, length, access);
	if (!m)
		return errno ? -errno : -ENOMEM;
	*mr = m;
	*lkey = m->lkey;
	*rkey = m->rkey;
	return 0;
}

int verbs_dereg(void *, void *mr)
{
	int r = ibv_dereg_mr(static_cast<ibv_mr *>(mr));	// an errno value
	return r ? -r : 0;
}

const ummunot_backend_ops verbs_ops = {verbs_reg, verbs_dereg};

int verbs_reg2(void *ctx, void *addr, size_t length, int access, void *, void **mr,
	       uint32_t *lkey, uint32_t *rkey)
{
	return verbs_reg(ctx, addr, length, access, mr, lkey, rkey);
}

int verbs_dereg2(void *ctx, void *mr, void *)
{
	return verbs_dereg(ctx, mr);
}

const ummunot_cache_ops verbs_ops2 = {sizeof(ummunot_cache_ops), verbs_reg2, verbs_dereg2};

} // namespace
#endif

extern "C" int ummunot_cache_create(struct ibv_pd *pd, const struct ummunot_cache_attr *attr,
				    struct ummunot_cache **cache)
{
#if UMMUNOT_HAVE_VERBS
	if (!pd)
		return -EINVAL;
	return ummunot_cache_create_backend(&verbs_ops, pd, attr, cache);
#else
	(void)pd;
	(void)attr;
	(void)cache;
	return -EOPNOTSUPP;	// built without rdma-core
#endif
}

extern "C" int ummunot_cache_create_verbs(struct ibv_pd *pd,
					  const struct ummunot_cache_config *config,
					  struct ummunot_cache **cache)
{
#if UMMUNOT_HAVE_VERBS
	if (!pd)
		return -EINVAL;
	return ummunot_cache_create_ops(&verbs_ops2, pd, config, cache);
#else
	(void)pd;
	(void)config;
	(void)cache;
	return -EOPNOTSUPP;	// built without rdma-core
#endif
}
