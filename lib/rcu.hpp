// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// RCU for the hit path: liburcu's "bulletproof" flavour (urcu-bp), the one
// liburcu makes for libraries.
//
//  * No registration: a thread is registered by its first read lock and
//    unregistered by liburcu-bp's own pthread key destructor.  A read lock
//    taken during thread exit (another key's destructor, a C++
//    thread_local destructor) registers the thread again and glibc runs the
//    destructor again, so nothing is left registered.
//  * Its symbols (urcu_bp_*) and registry are its own: an application or
//    another library using liburcu-memb, -mb, -signal or -qsbr is not
//    affected, in any order.  One using liburcu-bp shares the registry (and
//    grace periods) with us: its read-side critical sections delay our
//    reclamation, ours (a hit, a few loads) delay its synchronize_rcu(), and
//    a call into the cache inside its read-side critical section never waits
//    for a grace period (rcu_try_synchronize()).
//  * The library itself has no thread-local storage (no static TLS block
//    is needed when libummunot.so is dlopen()ed).
//
// We do not define _LGPL_SOURCE: read_lock/read_unlock are calls into
// liburcu-bp.so (with sys_membarrier, a reader only touches its own
// registry slot; the writer side uses membarrier()).
//
// ThreadSanitizer cannot see liburcu's synchronisation (the library is not
// instrumented).  In TSan builds each read-side critical section ends with
// a release on rcu_tsan_token and synchronize() acquires it after the
// grace period: exactly the happens-before edge RCU guarantees (every
// reader that was inside a section when synchronize started has finished
// it), so TSan sees frees after a grace period as ordered after the reads.
#pragma once

#include <urcu/urcu-bp.h>

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

inline void rcu_read_lock() { urcu_bp_read_lock(); }

inline void rcu_read_unlock()
{
#ifdef UMMUNOT_TSAN
	__tsan_release(&rcu_tsan_token);
#endif
	urcu_bp_read_unlock();
}

inline void rcu_synchronize()
{
	urcu_bp_synchronize_rcu();
#ifdef UMMUNOT_TSAN
	__tsan_acquire(&rcu_tsan_token);
#endif
}

// The library's grace period: false, without waiting, when the calling
// thread is itself inside a read-side critical section.  liburcu-bp has one
// registry per process, so that section is the application's (the library
// never calls this inside its own): waiting would wait for the caller,
// forever, with every signal blocked.  The caller keeps what it retired
// for a later call.
inline bool rcu_try_synchronize()
{
	if (urcu_bp_read_ongoing())
		return false;
	rcu_synchronize();
	return true;
}

} // namespace ummunot::detail
