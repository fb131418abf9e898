// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Test-only preload for the negative controls: declares UCX's
 * UCM_EVENT_VM_UNMAPPED external, as libummunot-ucx does, and never reports
 * one.  With UCX's hooks and Open MPI's off, this keeps UCX's registration
 * cache on (without it UCX disables the cache: nothing would go stale)
 * while nothing tells it about unmapped memory.  Never install it.
 */
#include <ucm/api/ucm.h>

__attribute__((constructor)) static void declare_external(void)
{
	ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
}
