// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// UMMUNOT_TSAN: defined in ThreadSanitizer builds, which get the
// annotations of synchronisation TSan cannot see (lib/rcu.hpp) and no
// restartable sequences (lib/percpu.hpp).
#pragma once

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
