/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the drivers of the fake UCX (gate-driver.c, fork-driver.c) share: a
 * registration cache's ops that register nothing, and the parameters of a
 * cache that listens to the unmap event, in ucx-abi.h's terms (no UCX
 * header: the fake UCX has none).
 */
#ifndef UMMUNOT_TESTS_UCX_FAKE_DRIVER_H
#define UMMUNOT_TESTS_UCX_FAKE_DRIVER_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx-abi.h"

#define FAIL(...) do { printf("FAIL: " __VA_ARGS__); putchar('\n'); exit(1); } while (0)

static ucx_status_t fake_reg(void *ctx, struct ucx_rcache *rc, void *arg,
			     struct ucx_pgt_region *r, uint16_t flags)
{
	(void)ctx; (void)rc; (void)arg; (void)r; (void)flags;
	return UCX_OK;
}

static void fake_dereg(void *ctx, struct ucx_rcache *rc, struct ucx_pgt_region *r)
{
	(void)ctx; (void)rc; (void)r;
}

static void fake_merge(void *ctx, struct ucx_rcache *rc, void *arg, struct ucx_pgt_region *r)
{
	(void)ctx; (void)rc; (void)arg; (void)r;
}

static void fake_dump(void *ctx, struct ucx_rcache *rc, struct ucx_pgt_region *r, char *b,
		      size_t n)
{
	(void)ctx; (void)rc; (void)r;
	if (n)
		b[0] = '\0';
}

static const struct ucx_ops_118 fake_ops = { fake_reg, fake_dereg, fake_merge, fake_dump };

/* A cache like UCP's (unmap events), no limits, the ops above. */
static inline void fake_params(struct ucx_params_117 *p)
{
	memset(p, 0, sizeof(*p));
	p->region_struct_size = 64;
	p->ucm_events = UCX_EVENT_VM_UNMAPPED;
	p->ops = &fake_ops;
	p->max_regions = ULONG_MAX;
	p->max_size = SIZE_MAX;
	p->max_unreleased = SIZE_MAX;
}

#endif
