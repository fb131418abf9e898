// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RCU for the hit path: the library's own, sleepable-RCU style, on per-CPU
// counters that readers add to in a restartable sequence (lib/percpu.hpp),
// with the writer's membarrier(2) in place of the readers' memory barriers.
//
//  * A reader adds 1 to lock[i] of its CPU's slot, where i is the index
//    new readers use, and on the way out to unlock[i] (of whatever CPU it
//    then runs on): two plain adds, no lock prefix, no fence, no call, no
//    thread-local storage, no registration.  rcu_read_lock() returns i for
//    rcu_read_unlock().
//  * A grace period (rcu_synchronize()) waits until, for each index, the
//    sum of the unlock counters equals the sum of the lock counters: first
//    for the index readers do not use (stragglers of earlier periods), then
//    it flips the index and waits for the old one.  Between the sums and
//    around the wait, MEMBARRIER_CMD_PRIVATE_EXPEDITED makes every running
//    thread of the process execute a full barrier: the ordering readers
//    would otherwise buy with a fence each (the argument is in rcu.cpp).
//  * Where membarrier is not available (kernels before 4.14, a seccomp
//    policy that refuses it), readers take a full fence after lock and
//    before unlock, and grace periods use fences too: slower, as correct.
//    Where rseq is not (no glibc registration, not x86-64, ThreadSanitizer
//    builds), readers add to one shared slot with an atomic add.
//  * Grace periods are serialised by one mutex per process; fork() holds
//    it across the fork, and the child starts with every counter zero (it
//    has only the forking thread, which is in no read-side section).
//  * Nothing here depends on any other RCU in the process: an application
//    using liburcu (any flavour) inside or around library calls does not
//    share our readers or grace periods.
//  * A read-side critical section may not call into the cache (a grace
//    period waited inside it would wait for itself); the library never
//    does.
//
// ThreadSanitizer cannot see the counters' synchronisation.  In TSan
// builds each read-side critical section ends with a release on
// rcu_tsan_token and rcu_synchronize() acquires it after the grace period:
// the happens-before edge RCU guarantees.
#pragma once

#include <atomic>
#include <cstdint>

#include "percpu.hpp"
#include "tsan.hpp"

namespace ummunot::detail {

#ifdef UMMUNOT_TSAN
inline char rcu_tsan_token;
#endif

// One per possible CPU (and one shared): w[i] counts the read locks taken
// with index i, w[2 + i] the unlocks.
struct alignas(64) rcu_slot {
	std::atomic<std::uint64_t> w[4];
};
static_assert(sizeof(rcu_slot) == 64);

struct rcu_state {
	// Written once by rcu_init(): slots before nr (release), so a
	// reader that loads nr (acquire) sees slots.  Until then nr is 0 and
	// readers use the shared slot.
	rcu_slot *slots = nullptr;
	std::atomic<unsigned int> nr{0};
	// membarrier(2) registered: readers need no fence.
	std::atomic<bool> fast{false};
	// The index new readers use (low bit).
	std::atomic<unsigned int> idx{0};
	rcu_slot shared;
};

extern rcu_state rcu;

// A full memory barrier.  ThreadSanitizer does not model fences (gcc's
// -Wtsan): there, a seq_cst read-modify-write of a private word, which is
// one on the architectures TSan runs on.
[[gnu::always_inline]] inline void rcu_full_fence()
{
#ifdef UMMUNOT_TSAN
	static std::atomic<unsigned int> word;
	word.fetch_add(0, std::memory_order_seq_cst);
#else
	std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

[[gnu::always_inline]] inline void rcu_reader_fence()
{
	if (rcu.fast.load(std::memory_order_relaxed))
		std::atomic_signal_fence(std::memory_order_seq_cst);
	else
		rcu_full_fence();
}

[[gnu::always_inline]] inline void rcu_count(unsigned int w)
{
#if UMMUNOT_PERCPU_RSEQ
	unsigned int nr = rcu.nr.load(std::memory_order_acquire);
	if (nr && rseq_usable() && rseq_slot_inc(&rcu.slots->w[w], nr))
		return;
#endif
	rcu.shared.w[w].fetch_add(1, std::memory_order_relaxed);
}

// Enters a read-side critical section; the result goes to rcu_read_unlock().
[[gnu::always_inline]] inline unsigned int rcu_read_lock()
{
	unsigned int i = rcu.idx.load(std::memory_order_relaxed) & 1;

	rcu_count(i);
	rcu_reader_fence();
	return i;
}

[[gnu::always_inline]] inline void rcu_read_unlock(unsigned int i)
{
	rcu_reader_fence();
#ifdef UMMUNOT_TSAN
	__tsan_release(&rcu_tsan_token);
#endif
	rcu_count(2 + i);
}

// Waits until every read-side critical section that began before the call
// has ended.  Never inside one.
void rcu_synchronize();

// Allocates the per-CPU slots and registers for membarrier (once; every
// cache's creation calls it, and rcu_synchronize()).
void rcu_init();

} // namespace ummunot::detail
