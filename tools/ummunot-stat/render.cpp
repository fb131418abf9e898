// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot-stat: text and JSON output.  The JSON schema is documented in
// man/man1/ummunot-stat.1; fields are only ever added.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <utility>

#include "stat.hpp"

namespace ummunot_stat {

namespace {

// printf into a std::string.
template <typename... Args>
std::string fmt(const char *f, Args... args)
{
	int n = std::snprintf(nullptr, 0, f, args...);
	std::string s(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
	if (n > 0)
		std::snprintf(s.data(), s.size() + 1, f, args...);
	return s;
}

std::string u64s(std::uint64_t v)
{
	return std::to_string(v);
}

std::string opt_u64(const std::optional<std::uint64_t> &v)
{
	return v ? std::to_string(*v) : std::string("-");
}

std::string json_opt_u64(const std::optional<std::uint64_t> &v)
{
	return v ? std::to_string(*v) : std::string("null");
}

std::string json_rate(double r)
{
	return fmt("%.3f", r);
}

double rate(std::uint64_t now, std::uint64_t before, double dt)
{
	// Counters only grow, except when the module was reloaded in between.
	return now >= before ? static_cast<double>(now - before) / dt : 0.0;
}

// {"unmap":N,...} over the named types.
std::string json_types(const type_counts &c)
{
	std::string s = "{";
	bool first = true;
	for (unsigned int t : event_types()) {
		if (!first)
			s += ",";
		first = false;
		s += json_string(event_type_name(t)) + ":" + u64s(c[t]);
	}
	return s + "}";
}

std::string json_type_rates(const type_counts &now, const type_counts &before,
			    double dt)
{
	std::string s = "{";
	bool first = true;
	for (unsigned int t : event_types()) {
		if (!first)
			s += ",";
		first = false;
		s += json_string(event_type_name(t)) + ":" +
		     json_rate(rate(now[t], before[t], dt));
	}
	return s + "}";
}

// The previous sample's entry for the same (pid, fd), if any.
const client_stats *find_prev(const sample *prev, const client_stats &c)
{
	if (!prev)
		return nullptr;
	for (const auto &p : prev->scan.clients)
		if (p.pid == c.pid && p.fd == c.fd && p.readable &&
		    p.owner_pid == c.owner_pid)
			return &p;
	return nullptr;
}

std::string library_json(const library_stats &l)
{
	std::string s = "{";
	s += "\"version\":" + u64s(l.version);
	s += ",\"hits\":" + u64s(l.hits);
	s += ",\"misses\":" + u64s(l.misses);
	// Index 0 (no event: resync and other library reasons) is "resync".
	s += ",\"invalidations\":{\"resync\":" + u64s(l.invalidations[0]);
	for (unsigned int t : event_types()) {
		// Appended piece by piece: "lit" + std::string temporaries trip
		// gcc 12's -Wrestrict false positive at -O3 (GCC PR 105651).
		s += ',';
		s += json_string(event_type_name(t));
		s += ':';
		s += u64s(l.invalidations[t]);
	}
	s += "}";
	s += ",\"invalidations_total\":" + u64s(l.invalidations_total());
	s += ",\"evictions\":" + u64s(l.evictions);
	s += ",\"resyncs\":" + u64s(l.resyncs);
	s += ",\"pinned_bytes\":" + u64s(l.pinned_bytes);
	s += ",\"entries\":" + u64s(l.entries);
	s += ",\"registrations\":" + u64s(l.registrations);
	s += ",\"deregistrations\":" + u64s(l.deregistrations);
	return s + "}";
}

std::string client_json(const client_stats &c, const client_stats *p, double dt)
{
	std::string s = "{";
	s += "\"pid\":" + std::to_string(c.pid);
	s += ",\"fd\":" + std::to_string(c.fd);
	if (!c.readable) {
		s += ",\"error\":" + json_string(c.error);
		return s + "}";
	}
	s += ",\"owner_pid\":" + std::to_string(c.owner_pid);
	s += ",\"comm\":" + json_string(c.owner_comm);
	s += ",\"abi\":" + std::to_string(c.abi);
	s += ",\"regions\":" + u64s(c.regions);
	s += ",\"regions_armed\":" + u64s(c.regions_armed);
	s += ",\"regions_registered\":" + u64s(c.regions_registered);
	s += ",\"ring_entries\":" + u64s(c.ring_entries);
	s += ",\"ring_pending\":" + u64s(c.ring_pending);
	s += ",\"ring_high_water\":" + u64s(c.ring_high_water);
	s += ",\"events\":" + u64s(c.events);
	s += ",\"dropped\":" + u64s(c.dropped);
	s += ",\"overflows\":" + u64s(c.overflows);
	s += std::string(",\"overflow\":") + (c.overflow ? "true" : "false");
	s += ",\"event_mask\":" + u64s(c.event_mask);
	s += ",\"delivered\":" + json_types(c.delivered);
	s += ",\"filtered\":" + json_types(c.filtered);
	s += ",\"library\":" + (c.library ? library_json(*c.library) : std::string("null"));
	if (p) {
		s += ",\"rates\":{\"events\":" + json_rate(rate(c.events, p->events, dt));
		s += ",\"dropped\":" + json_rate(rate(c.dropped, p->dropped, dt));
		if (c.library && p->library) {
			s += ",\"hits\":" + json_rate(rate(c.library->hits, p->library->hits, dt));
			s += ",\"misses\":" + json_rate(rate(c.library->misses, p->library->misses, dt));
		}
		s += "}";
	} else {
		s += ",\"rates\":null";
	}
	return s + "}";
}

} // namespace

std::string json_string(std::string_view in)
{
	std::string s = "\"";
	for (unsigned char ch : in) {
		switch (ch) {
		case '"': s += "\\\""; break;
		case '\\': s += "\\\\"; break;
		case '\n': s += "\\n"; break;
		case '\t': s += "\\t"; break;
		case '\r': s += "\\r"; break;
		default:
			if (ch < 0x20 || ch >= 0x7f)
				// comm is bytes, not UTF-8: escape anything
				// outside printable ASCII as its byte value.
				s += fmt("\\u%04x", static_cast<unsigned>(ch));
			else
				s += static_cast<char>(ch);
		}
	}
	return s + "\"";
}

std::string render_global_text(const sample &s)
{
	const global_stats &g = s.global;
	std::string o;
	o += "ummunot module " + (g.version.empty() ? std::string("-") : g.version) + "\n";
	o += "parameters:      max_regions=" + opt_u64(g.max_regions) +
	     " max_ring_entries=" + opt_u64(g.max_ring_entries) +
	     " default_ring_entries=" + opt_u64(g.default_ring_entries) + "\n";
	o += fmt("clients:         %" PRIu64 "\n", g.clients);
	o += fmt("regions:         %" PRIu64 " watched, %" PRIu64 " registered since load\n",
		 g.regions, g.regions_registered);
	o += fmt("events:          %" PRIu64 " delivered to rings\n", g.events);
	o += fmt("overflows:       %" PRIu64 " (%" PRIu64 " events dropped)\n",
		 g.overflows, g.dropped);
	o += fmt("ring high-water: %" PRIu64 " entries\n", g.ring_high_water);
	o += "\n";
	o += fmt("%-16s %14s %14s\n", "event type", "delivered", "filtered");
	for (unsigned int t : event_types())
		o += fmt("%-16s %14" PRIu64 " %14" PRIu64 "\n", event_type_name(t),
			 g.delivered[t], g.filtered[t]);
	return o;
}

std::string render_users_text(const users_table &t)
{
	std::string o;
	o += "limits:          max_user_memory=" + opt_u64(t.max_user_memory) +
	     " max_regions_per_mm=" + opt_u64(t.max_regions_per_mm) + "\n";
	o += fmt("%10s %14s %6s %10s %6s\n", "UID", "MEMORY", "USE%", "REGIONS",
		 "RINGS");
	for (const user_use &u : t.users) {
		std::string use = "-";
		if (t.max_user_memory && *t.max_user_memory)
			use = fmt("%.1f", 100.0 * static_cast<double>(u.memory) /
					  static_cast<double>(*t.max_user_memory));
		o += fmt("%10" PRIu32 " %14" PRIu64 " %6s %10" PRIu64 " %6" PRIu64 "\n",
			 u.uid, u.memory, use.c_str(), u.regions, u.rings);
	}
	if (t.truncated)
		o += "(the kernel listed only these users)\n";
	return o;
}

std::string render_clients_text(const sample &s, const sample *prev)
{
	double dt = prev ? s.mono - prev->mono : 0;
	std::string o;
	o += fmt("%7s %-16s %4s %8s %17s %10s %8s %4s", "PID", "COMMAND", "FD",
		 "REGIONS", "RING(pend/size)", "EVENTS", "DROPPED", "OVF");
	if (prev)
		o += fmt(" %9s", "EVENTS/s");
	o += fmt(" %10s %10s %8s %14s\n", "HITS", "MISSES", "INVAL", "PINNED");
	for (const auto &c : s.scan.clients) {
		if (!c.readable) {
			o += fmt("%7d %-16s %4d %8s %17s %10s %8s %4s", c.pid, "-", c.fd,
				 "-", "-", "-", "-", "-");
			if (prev)
				o += fmt(" %9s", "-");
			o += fmt(" %10s %10s %8s %14s", "-", "-", "-", "-");
			o += "  (" + c.error + ")\n";
			continue;
		}
		std::string comm = c.owner_comm;
		if (c.owner_pid != c.pid)
			comm += "(" + std::to_string(c.owner_pid) + ")";
		std::string ring = fmt("%" PRIu64 "/%" PRIu64, c.ring_pending, c.ring_entries);
		o += fmt("%7d %-16s %4d %8" PRIu64 " %17s %10" PRIu64 " %8" PRIu64 " %4s",
			 c.pid, comm.c_str(), c.fd, c.regions, ring.c_str(), c.events,
			 c.dropped, c.overflow ? "yes" : "no");
		if (prev) {
			const client_stats *p = find_prev(prev, c);
			o += p ? fmt(" %9.1f", rate(c.events, p->events, dt))
			       : fmt(" %9s", "-");
		}
		if (c.library) {
			const auto &l = *c.library;
			o += fmt(" %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %14" PRIu64,
				 l.hits, l.misses, l.invalidations_total(), l.pinned_bytes);
		} else {
			o += fmt(" %10s %10s %8s %14s", "-", "-", "-", "-");
		}
		o += "\n";
	}
	if (s.scan.clients.empty())
		o += "(no process has /dev/ummunot open)\n";
	if (!s.scan.denied_pids.empty())
		o += fmt("note: %zu processes of other users could not be inspected "
			 "(permission denied); their clients, if any, are not shown\n",
			 s.scan.denied_pids.size());
	return o;
}

std::string render_watch_header()
{
	std::string o = fmt("%8s %7s %9s %10s %9s %9s %9s %9s %9s %9s %9s\n",
			    "clients", "regions", "regs/s", "events/s", "unmap/s",
			    "clear/s", "release/s", "other/s", "filtd/s",
			    "dropped/s", "ovf/s");
	return o;
}

std::string render_watch_line(const sample &s, const sample *prev)
{
	const global_stats &g = s.global;
	std::string o = fmt("%8" PRIu64 " %7" PRIu64, g.clients, g.regions);
	if (!prev) {
		// Like vmstat's first line there is no interval yet; unlike
		// vmstat we print no since-load average (the load time is
		// unknown), only dashes.
		for (int i = 0; i < 9; i++)
			o += fmt(" %*s", i == 1 ? 10 : 9, "-");
		return o + "\n";
	}
	const global_stats &p = prev->global;
	double dt = s.mono - prev->mono;
	std::uint64_t other = 0, pother = 0, filt = 0, pfilt = 0;
	for (unsigned int t : event_types()) {
		if (t != UMMUNOT_EVENT_UNMAP && t != UMMUNOT_EVENT_CLEAR &&
		    t != UMMUNOT_EVENT_RELEASE) {
			other += g.delivered[t];
			pother += p.delivered[t];
		}
		filt += g.filtered[t];
		pfilt += p.filtered[t];
	}
	o += fmt(" %9.1f %10.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f",
		 rate(g.regions_registered, p.regions_registered, dt),
		 rate(g.events, p.events, dt),
		 rate(g.delivered[UMMUNOT_EVENT_UNMAP], p.delivered[UMMUNOT_EVENT_UNMAP], dt),
		 rate(g.delivered[UMMUNOT_EVENT_CLEAR], p.delivered[UMMUNOT_EVENT_CLEAR], dt),
		 rate(g.delivered[UMMUNOT_EVENT_RELEASE], p.delivered[UMMUNOT_EVENT_RELEASE], dt),
		 rate(other, pother, dt), rate(filt, pfilt, dt),
		 rate(g.dropped, p.dropped, dt), rate(g.overflows, p.overflows, dt));
	return o + "\n";
}

std::string render_json(const sample &s, const sample *prev)
{
	const global_stats &g = s.global;
	double dt = prev ? s.mono - prev->mono : 0;
	std::string o = "{\"schema\":1";
	o += ",\"time\":" + fmt("%.3f", s.time);
	o += ",\"interval\":" + (prev ? fmt("%.3f", dt) : std::string("null"));
	o += ",\"module\":{\"version\":" +
	     (g.version.empty() ? std::string("null") : json_string(g.version));
	o += ",\"parameters\":{\"max_regions\":" + json_opt_u64(g.max_regions);
	o += ",\"max_ring_entries\":" + json_opt_u64(g.max_ring_entries);
	o += ",\"default_ring_entries\":" + json_opt_u64(g.default_ring_entries) + "}}";
	o += ",\"global\":{\"clients\":" + u64s(g.clients);
	o += ",\"regions\":" + u64s(g.regions);
	o += ",\"regions_registered\":" + u64s(g.regions_registered);
	o += ",\"events\":" + u64s(g.events);
	o += ",\"dropped\":" + u64s(g.dropped);
	o += ",\"overflows\":" + u64s(g.overflows);
	o += ",\"ring_high_water\":" + u64s(g.ring_high_water);
	o += ",\"delivered\":" + json_types(g.delivered);
	o += ",\"filtered\":" + json_types(g.filtered) + "}";
	if (prev) {
		const global_stats &p = prev->global;
		o += ",\"rates\":{\"regions_registered\":" +
		     json_rate(rate(g.regions_registered, p.regions_registered, dt));
		o += ",\"events\":" + json_rate(rate(g.events, p.events, dt));
		o += ",\"dropped\":" + json_rate(rate(g.dropped, p.dropped, dt));
		o += ",\"overflows\":" + json_rate(rate(g.overflows, p.overflows, dt));
		o += ",\"delivered\":" + json_type_rates(g.delivered, p.delivered, dt);
		o += ",\"filtered\":" + json_type_rates(g.filtered, p.filtered, dt) + "}";
	} else {
		o += ",\"rates\":null";
	}
	if (s.with_clients) {
		o += ",\"clients\":[";
		bool first = true;
		for (const auto &c : s.scan.clients) {
			if (!first)
				o += ",";
			first = false;
			o += client_json(c, find_prev(prev, c), dt);
		}
		o += "],\"denied_pids\":[";
		first = true;
		for (int pid : s.scan.denied_pids) {
			if (!first)
				o += ",";
			first = false;
			o += std::to_string(pid);
		}
		o += "]";
	}
	return o + "}\n";
}

} // namespace ummunot_stat
