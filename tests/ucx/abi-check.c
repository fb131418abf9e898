// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * adapters/ucx/ucx-abi.h describes UCX's interface per layout, so that
 * libummunot-ucx builds without UCX headers and serves every release.
 * This program checks, at compile time, the description of the layout that
 * the UCX headers of this build have against those headers; it runs only
 * to say which layout it checked.  scripts/ucx-matrix compiles it against
 * each release it builds.
 */
#include <stddef.h>
#include <stdio.h>

#include <ucm/api/ucm.h>
#include <ucp/api/ucp_version.h>
#include <ucs/datastruct/pgtable.h>
#include <ucs/memory/rcache.h>
#include <ucs/type/status.h>

#include "ucx-abi.h"

#define SAME_FIELD(ours, theirs, f)                                                   \
	_Static_assert(offsetof(ours, f) == offsetof(theirs, f) &&                      \
		       sizeof(((ours *)0)->f) == sizeof(((theirs *)0)->f),              \
		       #f " of " #ours " differs from UCX's")

_Static_assert((int)UCX_OK == (int)UCS_OK, "UCS_OK");
_Static_assert((int)UCX_ERR_NO_MEMORY == (int)UCS_ERR_NO_MEMORY, "UCS_ERR_NO_MEMORY");
_Static_assert((int)UCX_ERR_UNSUPPORTED == (int)UCS_ERR_UNSUPPORTED, "UCS_ERR_UNSUPPORTED");
_Static_assert((int)UCX_EVENT_VM_UNMAPPED == (int)UCM_EVENT_VM_UNMAPPED, "UCM_EVENT_VM_UNMAPPED");
_Static_assert(UCX_RCACHE_FLAG_NO_PFN_CHECK == UCS_RCACHE_FLAG_NO_PFN_CHECK, "NO_PFN_CHECK");
_Static_assert(sizeof(ucx_status_t) == sizeof(ucs_status_t), "ucs_status_t");
_Static_assert(sizeof(ucx_pgt_addr_t) == sizeof(ucs_pgt_addr_t), "ucs_pgt_addr_t");
SAME_FIELD(struct ucx_pgt_region, ucs_pgt_region_t, start);
SAME_FIELD(struct ucx_pgt_region, ucs_pgt_region_t, end);
_Static_assert(offsetof(ucs_rcache_region_t, super) == 0, "ucs_rcache_region_t.super");

#if UCP_API_VERSION >= UCP_VERSION(1, 18)
#define LAYOUT "1.18"
#define OPS struct ucx_ops_118
SAME_FIELD(OPS, ucs_rcache_ops_t, merge);
#elif UCP_API_VERSION >= UCP_VERSION(1, 17)
#define LAYOUT "1.17"
#define OPS struct ucx_ops_113
#else
#define LAYOUT "1.13"
#define OPS struct ucx_ops_113
#endif

#if UCP_API_VERSION >= UCP_VERSION(1, 17)
#define PARAMS struct ucx_params_117
#else
#define PARAMS struct ucx_params_113
SAME_FIELD(PARAMS, ucs_rcache_params_t, alignment);
SAME_FIELD(PARAMS, ucs_rcache_params_t, max_alignment);
#endif

_Static_assert(sizeof(OPS) == sizeof(ucs_rcache_ops_t), "ucs_rcache_ops_t has other callbacks");
SAME_FIELD(OPS, ucs_rcache_ops_t, mem_reg);
SAME_FIELD(OPS, ucs_rcache_ops_t, mem_dereg);
SAME_FIELD(OPS, ucs_rcache_ops_t, dump_region);
_Static_assert(sizeof(PARAMS) == sizeof(ucs_rcache_params_t), "ucs_rcache_params_t size");
SAME_FIELD(PARAMS, ucs_rcache_params_t, region_struct_size);
SAME_FIELD(PARAMS, ucs_rcache_params_t, ucm_events);
SAME_FIELD(PARAMS, ucs_rcache_params_t, ucm_event_priority);
SAME_FIELD(PARAMS, ucs_rcache_params_t, ops);
SAME_FIELD(PARAMS, ucs_rcache_params_t, context);
SAME_FIELD(PARAMS, ucs_rcache_params_t, flags);
SAME_FIELD(PARAMS, ucs_rcache_params_t, max_regions);
SAME_FIELD(PARAMS, ucs_rcache_params_t, max_size);
SAME_FIELD(PARAMS, ucs_rcache_params_t, max_unreleased);

int main(void)
{
	printf("ucx-abi.h matches UCX %d.%d's headers (layout %s)\n", UCP_API_MAJOR,
	       UCP_API_MINOR, LAYOUT);
	return 0;
}
