// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// fork(): every object remembers the fork generation it was created in; in
// a child the generation has moved and the object refuses to work
// (-ECHILD), because its ring is not mapped there and its registrations
// belong to the parent.  See Documentation/library.rst, "fork".
#pragma once

#include <atomic>
#include <cstdint>

namespace ummunot::detail {

// Incremented in the child by a pthread_atfork() handler.  Relaxed loads
// suffice: the child is single-threaded when the handler runs, and threads
// it creates later are ordered after it by pthread_create().
extern std::atomic<std::uint64_t> fork_generation;

// Installs the handlers (once per process; cheap after the first call).
void fork_handlers_install();

inline std::uint64_t fork_gen_now()
{
	return fork_generation.load(std::memory_order_relaxed);
}

} // namespace ummunot::detail
