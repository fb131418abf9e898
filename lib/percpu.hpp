// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// percpu_counter: a counter the hit path adds to without a lock-prefixed
// instruction.  One 64-byte slot per possible CPU; inc() adds 1 to the slot
// of the CPU it runs on inside a restartable sequence (rseq(2), the area
// glibc 2.35+ registers for every thread): the add is the critical
// section's single commit instruction, so if the thread is preempted,
// migrated or signalled before it, the kernel restarts the sequence at the
// abort handler, which tries again; no other CPU ever writes the slot.  So
// every increment counts exactly once, for the cost of a plain add.
//
// Without rseq (not registered, not x86-64, or a ThreadSanitizer build,
// which cannot see the sequence's exclusivity) and for a CPU number beyond
// the slots, inc() adds to one shared slot with an atomic fetch_add.
// Readers (sum()) take relaxed loads: a sum is exact once the adders are
// done, and never more than the increments that happened.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#endif

#include "tsan.hpp"

#if defined(__x86_64__) && defined(RSEQ_SIG) && !defined(UMMUNOT_TSAN)
#define UMMUNOT_PERCPU_RSEQ 1
#else
#define UMMUNOT_PERCPU_RSEQ 0
#endif

namespace ummunot::detail {

#if UMMUNOT_PERCPU_RSEQ
// Adds 1 to the 64-bit word at base + cpu * 64 for the CPU the calling
// thread runs on, inside a restartable sequence.  true: counted; false: the
// CPU has no slot (cpu >= nr: nothing changed).  The caller checks that
// rseq is registered (rseq_usable()).
[[gnu::always_inline]] inline bool rseq_slot_inc(void *base, unsigned int nr)
{
	auto *rs = reinterpret_cast<struct rseq *>(
		static_cast<char *>(__builtin_thread_pointer()) + __rseq_offset);
	// 3: the critical section's descriptor (version 0, flags 0, start 1,
	// length 2 - 1, abort 4).  1-2: load cpu_id (the kernel's, valid
	// inside the section), refuse a CPU beyond the slots, add to its
	// slot: the add is the commit.  4 (preceded by the signature glibc
	// registered): the kernel's restart, which tries again.  rseq_cs is
	// cleared after the commit, so that it never points into a library
	// that may be unloaded.
	__asm__ __volatile__ goto(
		".pushsection __rseq_cs, \"aw\"\n\t"
		".balign 32\n\t"
		"3:\n\t"
		".long 0x0, 0x0\n\t"
		".quad 1f, (2f - 1f), 4f\n\t"
		".popsection\n\t"
		"5:\n\t"
		"leaq 3b(%%rip), %%rax\n\t"
		"movq %%rax, %[rseq_cs]\n\t"
		"1:\n\t"
		"movl %[cpu_id], %%eax\n\t"
		"cmpl %[nr], %%eax\n\t"
		"jae %l[no_slot]\n\t"
		"shlq $6, %%rax\n\t"
		"addq $1, (%[base], %%rax)\n\t"
		"2:\n\t"
		"movq $0, %[rseq_cs]\n\t"
		".pushsection __rseq_failure, \"ax\"\n\t"
		".long %c[sig]\n\t"
		"4:\n\t"
		"jmp 5b\n\t"
		".popsection\n\t"
		:
		: [rseq_cs] "m"(rs->rseq_cs), [cpu_id] "m"(rs->cpu_id), [nr] "r"(nr),
		  [base] "r"(base), [sig] "i"(RSEQ_SIG)
		: "memory", "cc", "rax"
		: no_slot);
	return true;
no_slot:
	__atomic_store_n(&rs->rseq_cs, 0, __ATOMIC_RELAXED);
	return false;
}

// glibc registered an rseq area with the fields used above.
[[gnu::always_inline]] inline bool rseq_usable()
{
	return __rseq_size >= offsetof(struct rseq, rseq_cs) + sizeof(std::uint64_t);
}
#endif

class percpu_counter {
public:
	struct alignas(64) slot {
		std::atomic<std::uint64_t> n{0};
	};

	// nr_slots: the number of possible CPUs.  false: out of memory.
	bool init(unsigned int nr_slots)
	{
		slots_.reset(new (std::nothrow) slot[nr_slots]);
		if (!slots_)
			return false;
		nr_ = nr_slots;
		return true;
	}

	[[gnu::always_inline]] void inc()
	{
#if UMMUNOT_PERCPU_RSEQ
		if (rseq_usable() && rseq_slot_inc(slots_.get(), nr_))
			return;
#endif
		shared_.n.fetch_add(1, std::memory_order_relaxed);
	}

	std::uint64_t sum() const
	{
		std::uint64_t s = shared_.n.load(std::memory_order_relaxed);
		for (unsigned int i = 0; i < nr_; i++)
			s += slots_[i].n.load(std::memory_order_relaxed);
		return s;
	}

private:
	static_assert(sizeof(slot) == 64);
	std::unique_ptr<slot[]> slots_;
	unsigned int nr_ = 0;
	slot shared_;
};

} // namespace ummunot::detail
