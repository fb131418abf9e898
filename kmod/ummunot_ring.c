// SPDX-License-Identifier: GPL-2.0-only
/*
 * ummunot: the event ring shared with userspace.
 *
 * Layout: page 0 holds struct ummunot_ring_header, the entries start at
 * PAGE_SIZE.  The pages are allocated one by one (charged to the caller's
 * memory cgroup), vmap()ed for the kernel and inserted into the user's VMA.
 *
 * Memory ordering (labels match include/uapi/linux/ummunot.h and
 * Documentation/ring.rst):
 *
 *   producer (here, under ctx->event_lock)      consumer (userspace)
 *
 *   (A) cons = smp_load_acquire(consumer)
 *       write entry[prod & mask]                 (C) prod = load_acquire(producer)
 *   (B) smp_store_release(producer, prod + 1)        read entries [cons, prod)
 *   (E) smp_store_release(generation, gen + 1)   (D) store_release(consumer, prod)
 *                                                (F) load_acquire(generation)
 *
 *   (A) pairs with (D): the consumer's reads of a slot complete before we
 *       can observe the consumer index that frees it, so we never overwrite
 *       a slot that is still being read.
 *   (B) pairs with (C): the entry is written before the index covering it.
 *   (E) pairs with (F): entries, producer and overflow are visible to a
 *       consumer that observes the new generation.
 *
 * The consumer index lives in memory userspace writes: it is read once per
 * event and only used in "prod - cons", so a bogus value can only make the
 * ring look full (events then count as dropped).  It is never used to
 * index memory.
 */
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "ummunot_compat.h"
#include "ummunot_priv.h"

static unsigned int ummunot_ring_nr_pages(u32 nr_entries)
{
	size_t bytes = PAGE_SIZE + (size_t)nr_entries * sizeof(struct ummunot_event);

	return DIV_ROUND_UP(bytes, PAGE_SIZE);
}

/* What a ring costs the user's max_user_memory: pages, page array, struct. */
unsigned long ummunot_ring_bytes(u32 nr_entries)
{
	unsigned long nr = ummunot_ring_nr_pages(nr_entries);

	return nr * PAGE_SIZE + nr * sizeof(struct page *) +
	       sizeof(struct ummunot_ring);
}

struct ummunot_ring *ummunot_ring_alloc(u32 nr_entries, u64 features)
{
	struct ummunot_ring *ring;
	unsigned int i;

	ring = kzalloc(sizeof(*ring), GFP_KERNEL_ACCOUNT);
	if (!ring)
		return NULL;

	ring->nr_pages = ummunot_ring_nr_pages(nr_entries);
	ring->pages = kvcalloc(ring->nr_pages, sizeof(*ring->pages),
			       GFP_KERNEL_ACCOUNT);
	if (!ring->pages)
		goto err_ring;

	for (i = 0; i < ring->nr_pages; i++) {
		ring->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO |
					    __GFP_NOWARN);
		if (!ring->pages[i])
			goto err_pages;
	}

	ring->hdr = vmap(ring->pages, ring->nr_pages, VM_MAP, PAGE_KERNEL);
	if (!ring->hdr)
		goto err_pages;
	ring->entries = (struct ummunot_event *)((char *)ring->hdr + PAGE_SIZE);
	ring->nr_entries = nr_entries;
	ring->mask = nr_entries - 1;

	ring->hdr->magic = UMMUNOT_RING_MAGIC;
	ring->hdr->version = UMMUNOT_RING_VERSION;
	ring->hdr->header_size = PAGE_SIZE;
	ring->hdr->entry_size = sizeof(struct ummunot_event);
	ring->hdr->nr_entries = nr_entries;
	ring->hdr->entry_mask = ring->mask;
	ring->hdr->features = features;
	return ring;

err_pages:
	while (i--)
		__free_page(ring->pages[i]);
	kvfree(ring->pages);
err_ring:
	kfree(ring);
	return NULL;
}

void ummunot_ring_free(struct ummunot_ring *ring)
{
	unsigned int i;

	if (!ring)
		return;
	vunmap(ring->hdr);
	/* User mappings hold their own page references (vm_insert_pages). */
	for (i = 0; i < ring->nr_pages; i++)
		__free_page(ring->pages[i]);
	kvfree(ring->pages);
	kfree(ring);
}

/*
 * A page of the mapping was zapped (madvise(MADV_DONTNEED), or the kernel
 * dropped it): map the same ring page again.  The mapping holds a
 * reference on the file, so the ring outlives it.
 */
static vm_fault_t ummunot_ring_fault(struct vm_fault *vmf)
{
	struct ummunot_ring *ring = vmf->vma->vm_private_data;

	if (vmf->pgoff >= ring->nr_pages)
		return VM_FAULT_SIGBUS;
	vmf->page = ring->pages[vmf->pgoff];
	get_page(vmf->page);
	return 0;
}

static const struct vm_operations_struct ummunot_ring_vm_ops = {
	.fault = ummunot_ring_fault,
};

int ummunot_ring_mmap(struct ummunot_ring *ring, struct vm_area_struct *vma)
{
	unsigned long nr = ring->nr_pages;

	if (vma->vm_pgoff != 0 || vma_pages(vma) != ring->nr_pages)
		return -EINVAL;
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;

	/*
	 * Never inherited by fork (the child has another mm and must open
	 * its own file): VM_IO makes madvise(MADV_DOFORK) fail with EINVAL,
	 * so VM_DONTCOPY cannot be cleared.  Never grown by mremap, not in
	 * core dumps, never executable.  VM_IO also keeps get_user_pages()
	 * (and so RDMA registration, O_DIRECT, process_vm_readv) away from
	 * the ring.
	 */
	ummunot_vm_flags_set(vma, VM_IO | VM_DONTCOPY | VM_DONTEXPAND |
			     VM_DONTDUMP);
	ummunot_vm_flags_clear(vma, VM_MAYEXEC);
	vma->vm_ops = &ummunot_ring_vm_ops;
	vma->vm_private_data = ring;

	return vm_insert_pages(vma, vma->vm_start, ring->pages, &nr);
}

/*
 * Write one event for region @r.  Called with ctx->event_lock held, from a
 * notifier callback: no sleeping, no allocation.  Returns true when the
 * event was written, false when it was dropped (ring full: overflow set).
 * Pollers need waking either way.
 */
bool ummunot_ring_post(struct ummunot_ctx *ctx, const struct ummunot_kregion *r,
		       u64 start, u64 end, u32 type)
{
	struct ummunot_ring *ring = ctx->ring;
	struct ummunot_ring_header *hdr = ring->hdr;
	struct ummunot_event *e;
	u64 prod = ring->prod;
	u64 seq = ++ring->seq;
	u64 cons, pending;

	lockdep_assert_held(&ctx->event_lock);

	/* (A): pairs with the consumer's store-release of consumer (D). */
	cons = smp_load_acquire(&hdr->consumer);
	pending = prod - cons;

	if (pending >= ring->nr_entries) {
		/* Full, or a consumer index from the future: drop, say so. */
		if (!ring->overflow) {
			WRITE_ONCE(ring->overflow, true);
			ctx->overflows++;
		}
		ring->dropped++;
		ring->dropped_since_resync++;
		WRITE_ONCE(hdr->overflow, 1);
		WRITE_ONCE(hdr->dropped, ring->dropped);
		/* (E): pairs with the consumer's load-acquire of generation (F). */
		smp_store_release(&hdr->generation, ++ring->gen);
		return false;
	}

	e = &ring->entries[prod & ring->mask];
	WRITE_ONCE(e->cookie, r->cookie);
	WRITE_ONCE(e->handle, ummunot_kregion_handle(r));
	WRITE_ONCE(e->start, start);
	WRITE_ONCE(e->end, end);
	WRITE_ONCE(e->seq, seq);
	WRITE_ONCE(e->type, type);
	WRITE_ONCE(e->flags, 0);
	WRITE_ONCE(e->resv[0], 0);
	WRITE_ONCE(e->resv[1], 0);

	WRITE_ONCE(ring->prod, prod + 1);
	/* (B): pairs with the consumer's load-acquire of producer (C). */
	smp_store_release(&hdr->producer, ring->prod);
	/* (E): pairs with the consumer's load-acquire of generation (F). */
	smp_store_release(&hdr->generation, ++ring->gen);

	ctx->events++;
	if (pending + 1 > ring->high_water)
		ring->high_water = pending + 1;
	return true;
}

/*
 * Poll helper: events pending or overflow set.  Lockless: a stale answer is
 * corrected by the wakeup that follows every post.
 */
bool ummunot_ring_readable(struct ummunot_ring *ring)
{
	return READ_ONCE(ring->prod) != READ_ONCE(ring->hdr->consumer) ||
	       READ_ONCE(ring->overflow);
}

/* Clear the overflow state; returns the events lost since the last resync. */
u64 ummunot_ring_resync(struct ummunot_ring *ring)
{
	u64 dropped = ring->dropped_since_resync;

	ring->dropped_since_resync = 0;
	WRITE_ONCE(ring->overflow, false);
	WRITE_ONCE(ring->hdr->overflow, 0);
	/* (E): the overflow clear before the new generation (ring.rst) */
	smp_store_release(&ring->hdr->generation, ++ring->gen);
	return dropped;
}
