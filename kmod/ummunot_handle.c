// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: the handle index of a file - handle -> region.
 *
 * A red-black tree whose nodes are embedded in the regions, so the index
 * holds no memory of its own: what a file holds is exactly its regions,
 * whatever order they were registered and unregistered in.  (An xarray
 * indexed by a cyclic id held one 576-byte node per live region once the
 * live ids were spread out, five times what a region was charged.)
 *
 * Handles count registrations: the low 32 bits are a cyclic id that is
 * never 0, bits 32..47 count its wrap-arounds, so a file does not reuse a
 * handle until 2^48 registrations later (abi.rst).  Each new handle is
 * larger than every live one until the 48-bit space wraps, so it is linked
 * as the right child of the largest node (->last) without a search.  After
 * a wrap the search runs, and a handle still in use is skipped.
 *
 * Everything here runs under ctx->lock.
 */
#include <linux/rbtree.h>

#include "ummunot_priv.h"

#define UMMUNOT_HANDLE_MASK	((1ULL << 48) - 1)

static struct ummunot_kregion *ummunot_node_region(struct rb_node *n)
{
	return n ? rb_entry(n, struct ummunot_kregion, node) : NULL;
}

/* Link @r under its handle; false if the handle is in use. */
static bool ummunot_handle_link(struct ummunot_ctx *ctx,
				struct ummunot_kregion *r)
{
	struct ummunot_kregion *last = ctx->last;
	struct rb_node **link = &ctx->regions.rb_node, *parent = NULL;

	if (last && r->handle > last->handle) {
		/* The largest node has no right child. */
		parent = &last->node;
		link = &parent->rb_right;
	} else {
		while (*link) {
			struct ummunot_kregion *p = ummunot_node_region(*link);

			parent = *link;
			if (r->handle < p->handle)
				link = &parent->rb_left;
			else if (r->handle > p->handle)
				link = &parent->rb_right;
			else
				return false;
		}
	}
	rb_link_node(&r->node, parent, link);
	rb_insert_color(&r->node, &ctx->regions);
	if (!last || r->handle > last->handle)
		ctx->last = r;
	return true;
}

/* Give @r the file's next free handle and index it. */
void ummunot_handle_add(struct ummunot_ctx *ctx, struct ummunot_kregion *r)
{
	lockdep_assert_held(&ctx->lock);
	/* Terminates: live regions (<= max_regions < 2^31) leave ids free. */
	do {
		r->handle = ctx->next_handle;
		ctx->next_handle = (ctx->next_handle + 1) & UMMUNOT_HANDLE_MASK;
		if (!(ctx->next_handle & UMMUNOT_HANDLE_ID_MASK))
			ctx->next_handle++;	/* id 0 is never used */
	} while (!ummunot_handle_link(ctx, r));
}

void ummunot_handle_del(struct ummunot_ctx *ctx, struct ummunot_kregion *r)
{
	lockdep_assert_held(&ctx->lock);
	if (ctx->last == r)
		ctx->last = ummunot_node_region(rb_prev(&r->node));
	rb_erase(&r->node, &ctx->regions);
}

/* The region named by @handle, or NULL.  Any value is safe to look up. */
struct ummunot_kregion *ummunot_handle_lookup(struct ummunot_ctx *ctx,
					      u64 handle)
{
	struct rb_node *n = ctx->regions.rb_node;

	lockdep_assert_held(&ctx->lock);
	while (n) {
		struct ummunot_kregion *r = ummunot_node_region(n);

		if (handle < r->handle)
			n = n->rb_left;
		else if (handle > r->handle)
			n = n->rb_right;
		else
			return r;
	}
	return NULL;
}
