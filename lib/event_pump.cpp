// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// The event pump.  See event_pump.hpp.
#include "event_pump.hpp"

#include <cerrno>

#include "monitor.hpp"

namespace ummunot::detail {

namespace {

constexpr unsigned int drain_batch = 256;

} // namespace

event_pump::event_pump(ummunot_monitor &mon)
	: mon_(mon), gen_word_(mon.generation_word()), seen_gen_(mon.generation())
{
}

int event_pump::drain(entries &es)
{
	int total = 0;

	for (;;) {
		// (F) before (C) inside consume(): if we empty the ring, every
		// event published up to generation g has been processed.
		std::uint64_t g = mon_.generation();
		bool complete = false;
		int n = mon_.consume(drain_batch, &complete, [&](const ummunot_event &ev) {
			if (es.kill_event(ev.handle, ev.cookie) && ev.type < UMMUNOT_EVENT_TYPE_MAX)
				invalidations_[ev.type]++;
		});
		if (n == -EOVERFLOW) {
			// RESYNC first, then drop everything.  A failed RESYNC
			// changes nothing: the next call tries again.
			int r = mon_.resync(nullptr);
			if (r)
				return r;
			// Index 0: invalidated by the library itself (the
			// entry being added is not counted, it is retried).
			invalidations_[0] += es.nr_live();
			es.kill_all();
			resyncs_++;
			continue;
		}
		if (n < 0)
			return n;
		total += n;
		if (complete) {
			// Out of memory here is harmless: the DEAD entries stay
			// in the index, unusable, until a later settle.
			es.settle();
			// Pairs with the acquire in current().
			seen_gen_.store(g, std::memory_order_release);
			mon_.mark_seen(g);
			return total;
		}
	}
}

} // namespace ummunot::detail
