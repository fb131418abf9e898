// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Thin wrappers over liburcu's memb flavour.
//
// We do not define _LGPL_SOURCE, so read_lock/read_unlock are calls into
// liburcu-memb (no lock, no syscall: memb readers only touch a thread-local
// counter; the writer side uses membarrier()).
//
// ThreadSanitizer cannot see liburcu's synchronisation (the library is not
// instrumented).  In TSan builds each read-side critical section ends with
// a release on rcu_tsan_token and synchronize() acquires it after the
// grace period: exactly the happens-before edge RCU guarantees (every
// reader that was inside a section when synchronize started has finished
// it), so TSan sees frees after a grace period as ordered after the reads.
#pragma once

#include <urcu/urcu-memb.h>

#if defined(__SANITIZE_THREAD__)
#define UMMUNOT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UMMUNOT_TSAN 1
#endif
#endif

#ifdef UMMUNOT_TSAN
extern "C" void __tsan_acquire(void *addr);
extern "C" void __tsan_release(void *addr);
#endif

namespace ummunot::detail {

#ifdef UMMUNOT_TSAN
inline char rcu_tsan_token;
#endif

// Per-thread state of the hit path, in one initial-exec TLS word so that
// the hit path costs one %fs-relative access even in libummunot.so (no
// __tls_get_addr call; the few bytes come out of glibc's static TLS
// surplus when the library is dlopen()ed).  A plain __thread POD: no TLS
// wrapper or init guard.
struct rcu_thread_state {
	unsigned int online;		// registered with liburcu
	unsigned int shard;		// stats shard index (any value; used mod n)
};

extern __thread rcu_thread_state rcu_tls __attribute__((tls_model("initial-exec")));

// Slow path of rcu_thread_online(): register with liburcu, pick a stats
// shard, arrange for unregistration at thread exit.
void rcu_thread_register();

// Registers the calling thread with liburcu on first use (unregistered
// when the thread exits); returns its state.
inline rcu_thread_state &rcu_thread_online()
{
	rcu_thread_state &t = rcu_tls;

	if (__builtin_expect(!t.online, 0))
		rcu_thread_register();
	return t;
}

inline void rcu_read_lock() { urcu_memb_read_lock(); }

inline void rcu_read_unlock()
{
#ifdef UMMUNOT_TSAN
	__tsan_release(&rcu_tsan_token);
#endif
	urcu_memb_read_unlock();
}

inline void rcu_synchronize()
{
	urcu_memb_synchronize_rcu();
#ifdef UMMUNOT_TSAN
	__tsan_acquire(&rcu_tsan_token);
#endif
}

} // namespace ummunot::detail
