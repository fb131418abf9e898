/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel-version differences, in one place.  Supported: 6.1 .. 6.12
 * (Debian bookworm's 6.1 and 6.12 kernels, generic and PREEMPT_RT).
 */
#ifndef _UMMUNOT_COMPAT_H
#define _UMMUNOT_COMPAT_H

#include <linux/version.h>
#include <linux/mm.h>

/* vm_flags became read-only behind accessors in 6.3. */
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 3, 0)
static inline void ummunot_vm_flags_set(struct vm_area_struct *vma,
					vm_flags_t flags)
{
	vma->vm_flags |= flags;
}

static inline void ummunot_vm_flags_clear(struct vm_area_struct *vma,
					  vm_flags_t flags)
{
	vma->vm_flags &= ~flags;
}
#else
#define ummunot_vm_flags_set(vma, flags)	vm_flags_set(vma, flags)
#define ummunot_vm_flags_clear(vma, flags)	vm_flags_clear(vma, flags)
#endif

#endif /* _UMMUNOT_COMPAT_H */
