/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The parts of UCX's binary interface that libummunot-ucx calls, described
 * per layout so that one build serves every UCX release it knows, whatever
 * UCX headers (if any) it was compiled with.  These are interface facts
 * (argument and field order, types, constants) as UCX's public and
 * installed headers define them; no UCX code is used.  tests/ucx/abi-check.c
 * compares every description below with the UCX headers of the build, for
 * the layout those headers have.
 *
 * Layouts of ucs_rcache_params_t / ucs_rcache_ops_t / ucs_rcache_get():
 *   UCX_LAYOUT_113  1.13 - 1.16: params carry alignment and max_alignment;
 *                   ops: mem_reg, mem_dereg, dump_region; get() has no
 *                   alignment argument
 *   UCX_LAYOUT_117  1.17: params lost the alignments, get() gained one
 *   UCX_LAYOUT_118  1.18 and later (checked up to 1.22 and master 1.23):
 *                   ops gained merge (called without a NULL check)
 */
#ifndef UMMUNOT_UCX_ABI_H
#define UMMUNOT_UCX_ABI_H

#include <stddef.h>
#include <stdint.h>

enum ucx_layout {
	UCX_LAYOUT_NONE = 0,
	UCX_LAYOUT_113,
	UCX_LAYOUT_117,
	UCX_LAYOUT_118,
};

/* ucs_status_t values the adapter returns (ucs/type/status.h). */
enum {
	UCX_OK = 0,
	UCX_ERR_NO_MEMORY = -4,
	UCX_ERR_UNSUPPORTED = -22,
};

/* ucm_event_type_t (ucm/api/ucm.h). */
#define UCX_EVENT_VM_UNMAPPED (1 << 17)

/* ucs_rcache_params_t flags (ucs/memory/rcache.h). */
#define UCX_RCACHE_FLAG_NO_PFN_CHECK (1 << 0)

/* ucs_status_t is a packed enum: one byte (a return value in the low byte
 * of the register, the rest undefined). */
typedef int8_t ucx_status_t;
typedef uintptr_t ucx_pgt_addr_t;

/* ucs_pgt_region_t: the first member of ucs_rcache_region_t. */
struct ucx_pgt_region {
	ucx_pgt_addr_t start;
	ucx_pgt_addr_t end;
};

/* Opaque: ucs_rcache_t, ucs_pgtable_t. */
struct ucx_rcache;
struct ucx_pgtable;

typedef ucx_status_t (*ucx_mem_reg_fn)(void *context, struct ucx_rcache *rcache, void *arg,
				       struct ucx_pgt_region *region, uint16_t flags);
typedef void (*ucx_mem_dereg_fn)(void *context, struct ucx_rcache *rcache,
				 struct ucx_pgt_region *region);
typedef void (*ucx_merge_fn)(void *context, struct ucx_rcache *rcache, void *arg,
			     struct ucx_pgt_region *region);
typedef void (*ucx_dump_region_fn)(void *context, struct ucx_rcache *rcache,
				   struct ucx_pgt_region *region, char *buf, size_t max);

/* ucs_rcache_ops_t, 1.13 - 1.17. */
struct ucx_ops_113 {
	ucx_mem_reg_fn mem_reg;
	ucx_mem_dereg_fn mem_dereg;
	ucx_dump_region_fn dump_region;
};

/* ucs_rcache_ops_t, 1.18 and later. */
struct ucx_ops_118 {
	ucx_mem_reg_fn mem_reg;
	ucx_mem_dereg_fn mem_dereg;
	ucx_merge_fn merge;
	ucx_dump_region_fn dump_region;
};

/* ucs_rcache_params_t, 1.13 - 1.16. */
struct ucx_params_113 {
	size_t region_struct_size;
	size_t alignment;
	size_t max_alignment;
	int ucm_events;
	int ucm_event_priority;
	const void *ops;
	void *context;
	int flags;
	unsigned long max_regions;
	size_t max_size;
	size_t max_unreleased;
};

/* ucs_rcache_params_t, 1.17 and later. */
struct ucx_params_117 {
	size_t region_struct_size;
	int ucm_events;
	int ucm_event_priority;
	const void *ops;
	void *context;
	int flags;
	unsigned long max_regions;
	size_t max_size;
	size_t max_unreleased;
};

typedef ucx_status_t (*ucx_rcache_create_fn)(const void *params, const char *name,
					     void *stats_parent, struct ucx_rcache **rcache_p);
typedef void (*ucx_rcache_destroy_fn)(struct ucx_rcache *rcache);
/*
 * ucs_rcache_get(): (rcache, address, length, prot, arg, region_p) before
 * 1.17, (rcache, address, length, alignment, prot, arg, region_p) since.
 * Every argument is an integer or a pointer: on the 64-bit ABIs UCX runs on
 * (x86-64, aarch64, ppc64le) both travel in the same registers, so the
 * adapter calls and forwards it through this one type, the arguments after
 * length passed as they come.
 */
typedef ucx_status_t (*ucx_rcache_get_raw_fn)(struct ucx_rcache *rcache, void *address,
					      size_t length, uintptr_t a3, uintptr_t a4,
					      uintptr_t a5, uintptr_t a6);
typedef void (*ucx_region_put_fn)(struct ucx_rcache *rcache, struct ucx_pgt_region *region);
typedef struct ucx_pgt_region *(*ucx_pgtable_lookup_fn)(const struct ucx_pgtable *pgtable,
							 ucx_pgt_addr_t address);
typedef ucx_status_t (*ucx_pgtable_init_fn)(struct ucx_pgtable *pgtable, void *alloc_cb,
					    void *release_cb);
typedef void (*ucx_vm_munmap_fn)(void *address, size_t length);
typedef void (*ucx_external_event_fn)(int events);
typedef void (*ucx_get_version_fn)(unsigned int *major, unsigned int *minor,
				   unsigned int *release);

#endif /* UMMUNOT_UCX_ABI_H */
