// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The library's RCU (rcu.hpp): the per-CPU slots, grace periods, and fork
// handling for the whole library: the grace-period mutex is held across
// fork(), the child starts with zero counters, then the fork generation
// moves, which turns every object inherited from the parent into one that
// answers -ECHILD.
//
// Why a grace period is one.  Let the writer have made an object
// unreachable (a release store of a new root) before rcu_synchronize(),
// and let B be the membarrier at its start.  membarrier guarantees, for
// every thread T of the process, a point P in T's execution such that T's
// accesses before P happen before the writer's accesses after the call
// returns, and the writer's accesses before the call happen before T's
// accesses after P.
//  * A reader whose root load comes after its P(B) sees the new root: it
//    cannot reach the object.
//  * A reader whose root load comes before P(B) made its lock add (earlier
//    in program order) before P(B) as well, so every counter sum the
//    writer takes after B includes that add.  The writer returns only
//    after it saw, for both indexes, an unlock sum equal to the lock sum
//    taken after it (idx_quiet()): the unlocks are summed first, a
//    membarrier, then the locks, so an unlock it counts implies its lock
//    is counted too, and equal sums mean this reader's unlock add was
//    seen.  The final membarrier then orders the reader's loads, which
//    precede that add, before the writer's frees.
//  * Both indexes are waited for (the unused one first, then, after the
//    flip, the one readers used): a reader that loaded the index before an
//    earlier flip may add to either.  The flip only keeps new readers from
//    delaying the second wait for ever.
// Without membarrier, readers fence after their lock add and before their
// unlock add, and every membarrier() below is a fence: the classic SRCU
// argument.
#include "rcu.hpp"

#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <mutex>
#include <new>

#include "fork.hpp"

namespace ummunot::detail {

rcu_state rcu;
std::atomic<std::uint64_t> fork_generation{0};

namespace {

std::mutex gp_mu;
pthread_once_t rcu_once = PTHREAD_ONCE_INIT;
pthread_once_t fork_once = PTHREAD_ONCE_INIT;

bool membarrier_register()
{
	return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

void rcu_init_once()
{
	long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
	unsigned int n = cpus > 0 ? static_cast<unsigned int>(cpus) : 1;

	rcu.fast.store(membarrier_register(), std::memory_order_relaxed);
	rcu.slots = new (std::nothrow) rcu_slot[n]();
	// Without memory for the slots every reader uses the shared one.
	if (rcu.slots)
		rcu.nr.store(n, std::memory_order_release);
}

// A full barrier in every running thread of the process (membarrier), or
// in this one (a fence), as readers expect (rcu.fast).
void barrier_all()
{
	if (rcu.fast.load(std::memory_order_relaxed) &&
	    ::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
		return;
	rcu_full_fence();
}

std::uint64_t sum(unsigned int w)
{
	std::uint64_t s = rcu.shared.w[w].load(std::memory_order_relaxed);
	unsigned int nr = rcu.nr.load(std::memory_order_acquire);

	for (unsigned int c = 0; c < nr; c++)
		s += rcu.slots[c].w[w].load(std::memory_order_relaxed);
	return s;
}

// No reader is inside a section it entered with index i (as of the sums).
bool idx_quiet(unsigned int i)
{
	std::uint64_t unlocks = sum(2 + i);

	barrier_all();
	return sum(i) == unlocks;
}

// Until idx_quiet(i): a few yields, then sleeps growing to 1 ms.
void wait_idx(unsigned int i)
{
	for (unsigned int n = 0; !idx_quiet(i); n++) {
		if (n < 8) {
			::sched_yield();
			continue;
		}
		long ns = std::min(1000000L, 1000L << std::min(n - 8, 10u));
		struct timespec ts = {0, ns};
		::nanosleep(&ts, nullptr);
	}
}

void before_fork() { gp_mu.lock(); }
void after_fork_parent() { gp_mu.unlock(); }

void after_fork_child()
{
	// Only this thread runs, in no read-side section: what the others
	// counted does not exist here.  Registration is per process: again.
	unsigned int nr = rcu.nr.load(std::memory_order_relaxed);
	for (unsigned int c = 0; c < nr; c++)
		for (auto &w : rcu.slots[c].w)
			w.store(0, std::memory_order_relaxed);
	for (auto &w : rcu.shared.w)
		w.store(0, std::memory_order_relaxed);
	if (rcu.fast.load(std::memory_order_relaxed))
		rcu.fast.store(membarrier_register(), std::memory_order_relaxed);
	gp_mu.unlock();
	fork_generation.fetch_add(1, std::memory_order_relaxed);
}

void fork_install() { pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

} // namespace

void rcu_init()
{
	pthread_once(&rcu_once, rcu_init_once);
}

void rcu_synchronize()
{
	rcu_init();
	std::lock_guard<std::mutex> g(gp_mu);
	barrier_all();
	unsigned int i = rcu.idx.load(std::memory_order_relaxed) & 1;
	wait_idx(i ^ 1);
	rcu.idx.store(i ^ 1, std::memory_order_relaxed);
	wait_idx(i);
	barrier_all();
#ifdef UMMUNOT_TSAN
	__tsan_acquire(&rcu_tsan_token);
#endif
}

void fork_handlers_install()
{
	rcu_init();
	pthread_once(&fork_once, fork_install);
}

} // namespace ummunot::detail
