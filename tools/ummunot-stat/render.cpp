// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot-stat: text and JSON output.  The JSON schema is documented in
// man/man1/ummunot-stat.1; fields are only ever added.
#include <cinttypes>
#include <cstdio>
#include <span>
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

// --- JSON: one writer for every object of the schema -----------------------
//
// Objects are written compactly (no blanks) with their keys in the order
// man/man1/ummunot-stat.1 lists them; add() puts the commas in.

class json_object {
public:
	// value is JSON text already (a number, null, an object, ...).
	json_object &add(std::string_view key, std::string_view value)
	{
		// Appended piece by piece: "lit" + std::string temporaries trip
		// gcc 12's -Wrestrict false positive at -O3 (GCC PR 105651).
		if (!first_)
			s_ += ',';
		first_ = false;
		s_ += json_string(key);
		s_ += ':';
		s_ += value;
		return *this;
	}
	std::string str() const { return s_ + "}"; }

private:
	std::string s_ = "{";
	bool first_ = true;
};

// [a,b,...] with each element written by json(element).
template <typename T, typename F>
std::string json_array(const std::vector<T> &v, F json)
{
	std::string s = "[";
	for (std::size_t i = 0; i < v.size(); i++) {
		if (i)
			s += ',';
		s += json(v[i]);
	}
	return s + "]";
}

// One key per named event type, in ABI order: {"unmap":...,...}.
template <typename F>
void add_per_type(json_object &o, F value)
{
	for (unsigned int t : event_types())
		o.add(event_type_name(t), value(t));
}

std::string json_types(const type_counts &c)
{
	json_object o;
	add_per_type(o, [&](unsigned int t) { return u64s(c[t]); });
	return o.str();
}

std::string json_type_rates(const type_counts &now, const type_counts &before,
			    double dt)
{
	json_object o;
	add_per_type(o, [&](unsigned int t) {
		return json_rate(rate(now[t], before[t], dt));
	});
	return o.str();
}

template <typename S>
void add_counters(json_object &o, const S &v, std::span<const counter<S>> f)
{
	for (const auto &c : f)
		o.add(c.name, u64s(v.*c.member));
}

template <typename S>
void add_rates(json_object &o, const S &now, const S &before, double dt,
	       std::span<const counter<S>> f)
{
	for (const auto &c : f)
		o.add(c.name, json_rate(rate(now.*c.member, before.*c.member, dt)));
}

constexpr counter<global_stats> global_counters[] = {
	{"clients", &global_stats::clients},
	{"regions", &global_stats::regions},
	{"regions_registered", &global_stats::regions_registered},
	{"events", &global_stats::events},
	{"dropped", &global_stats::dropped},
	{"overflows", &global_stats::overflows},
	{"ring_high_water", &global_stats::ring_high_water},
};
constexpr counter<global_stats> global_rated[] = {
	{"regions_registered", &global_stats::regions_registered},
	{"events", &global_stats::events},
	{"dropped", &global_stats::dropped},
	{"overflows", &global_stats::overflows},
};

constexpr counter<client_stats> client_rated[] = {
	{"events", &client_stats::events},
	{"dropped", &client_stats::dropped},
};

// The library counters before and after "invalidations".
constexpr counter<library_stats> library_head[] = {
	{"version", &library_stats::version},
	{"hits", &library_stats::hits},
	{"misses", &library_stats::misses},
};
constexpr counter<library_stats> library_tail[] = {
	{"evictions", &library_stats::evictions},
	{"resyncs", &library_stats::resyncs},
	{"pinned_bytes", &library_stats::pinned_bytes},
	{"entries", &library_stats::entries},
	{"registrations", &library_stats::registrations},
	{"deregistrations", &library_stats::deregistrations},
};
constexpr counter<library_stats> library_rated[] = {
	{"hits", &library_stats::hits},
	{"misses", &library_stats::misses},
};

std::string library_json(const library_stats &l)
{
	json_object o;
	add_counters<library_stats>(o, l, library_head);
	// Index 0 (no event: resync and other library reasons) is "resync".
	json_object inv;
	inv.add("resync", u64s(l.invalidations[0]));
	add_per_type(inv, [&](unsigned int t) { return u64s(l.invalidations[t]); });
	o.add("invalidations", inv.str());
	o.add("invalidations_total", u64s(l.invalidations_total()));
	add_counters<library_stats>(o, l, library_tail);
	return o.str();
}

std::string client_json(const client_stats &c, const client_stats *p, double dt)
{
	json_object o;
	o.add("pid", std::to_string(c.pid));
	o.add("fd", std::to_string(c.fd));
	o.add("slurm_job", c.slurm_job.empty() ? "null" : json_string(c.slurm_job));
	if (!c.readable)
		return o.add("error", json_string(c.error)).str();
	o.add("owner_pid", std::to_string(c.owner_pid));
	o.add("comm", json_string(c.owner_comm));
	o.add("abi", std::to_string(c.abi));
	add_counters<client_stats>(o, c, client_counters);
	o.add("overflow", c.overflow ? "true" : "false");
	o.add("event_mask", u64s(c.event_mask));
	o.add("delivered", json_types(c.delivered));
	o.add("filtered", json_types(c.filtered));
	o.add("library", c.library ? library_json(*c.library) : "null");
	if (!p)
		return o.add("rates", "null").str();
	json_object r;
	add_rates<client_stats>(r, c, *p, dt, client_rated);
	if (c.library && p->library)
		add_rates<library_stats>(r, *c.library, *p->library, dt, library_rated);
	return o.add("rates", r.str()).str();
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
	o += fmt("%10s %14s %6s %10s %6s %10s\n", "UID", "MEMORY", "USE%", "REGIONS",
		 "RINGS", "USERNS");
	for (const user_use &u : t.users) {
		std::string use = "-";
		if (t.max_user_memory && *t.max_user_memory)
			use = fmt("%.1f", 100.0 * static_cast<double>(u.memory) /
					  static_cast<double>(*t.max_user_memory));
		// USERNS: the budget of a user namespace global root created
		// (a container's), "-" for a user's.
		std::string ns = u.userns ? fmt("%" PRIu32, u.userns) : "-";
		o += fmt("%10" PRIu32 " %14" PRIu64 " %6s %10" PRIu64 " %6" PRIu64 " %10s\n",
			 u.uid, u.memory, use.c_str(), u.regions, u.rings, ns.c_str());
	}
	if (t.truncated)
		o += "(the kernel listed only these budgets)\n";
	return o;
}

// The JOB column: the Slurm job id, "-" outside a Slurm job.
static std::string job_of(const client_stats &c)
{
	return c.slurm_job.empty() ? "-" : c.slurm_job;
}

std::string render_clients_text(const sample &s, const sample *prev)
{
	double dt = prev ? s.mono - prev->mono : 0;
	std::string o;
	o += fmt("%7s %-16s %4s %8s %17s %10s %8s %4s", "PID", "COMMAND", "FD",
		 "REGIONS", "RING(pend/size)", "EVENTS", "DROPPED", "OVF");
	if (prev)
		o += fmt(" %9s", "EVENTS/s");
	o += fmt(" %10s %10s %8s %14s %s\n", "HITS", "MISSES", "INVAL", "PINNED", "JOB");
	for (const auto &c : s.scan.clients) {
		if (!c.readable) {
			o += fmt("%7d %-16s %4d %8s %17s %10s %8s %4s", c.pid, "-", c.fd,
				 "-", "-", "-", "-", "-");
			if (prev)
				o += fmt(" %9s", "-");
			o += fmt(" %10s %10s %8s %14s %s", "-", "-", "-", "-", job_of(c).c_str());
			o += "  (";	// piecewise: see json_object::add()
			o += c.error;
			o += ")\n";
			continue;
		}
		std::string comm = c.owner_comm;
		if (c.owner_pid != c.pid) {
			comm += '(';
			comm += std::to_string(c.owner_pid);
			comm += ')';
		}
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
		o += ' ';	// piecewise: the job id is the environment's bytes
		o += job_of(c);
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
	json_object o;
	o.add("schema", "1");
	o.add("time", fmt("%.3f", s.time));
	o.add("interval", prev ? fmt("%.3f", dt) : "null");

	json_object params;
	params.add("max_regions", json_opt_u64(g.max_regions));
	params.add("max_ring_entries", json_opt_u64(g.max_ring_entries));
	params.add("default_ring_entries", json_opt_u64(g.default_ring_entries));
	json_object module;
	module.add("version", g.version.empty() ? "null" : json_string(g.version));
	module.add("parameters", params.str());
	o.add("module", module.str());

	json_object global;
	add_counters<global_stats>(global, g, global_counters);
	global.add("delivered", json_types(g.delivered));
	global.add("filtered", json_types(g.filtered));
	o.add("global", global.str());

	if (prev) {
		const global_stats &p = prev->global;
		json_object r;
		add_rates<global_stats>(r, g, p, dt, global_rated);
		r.add("delivered", json_type_rates(g.delivered, p.delivered, dt));
		r.add("filtered", json_type_rates(g.filtered, p.filtered, dt));
		o.add("rates", r.str());
	} else {
		o.add("rates", "null");
	}
	if (s.with_clients) {
		o.add("clients", json_array(s.scan.clients, [&](const client_stats &c) {
			return client_json(c, find_prev(prev, c), dt);
		}));
		o.add("denied_pids", json_array(s.scan.denied_pids, [](int pid) {
			return std::to_string(pid);
		}));
	}
	return o.str() + "\n";
}

} // namespace ummunot_stat
