// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot-stat: data model, parsers, collectors and renderers.
//
// Sources (kmod/ummunot_stats.c writes them):
//   /sys/class/misc/ummunot/stats/*     system-wide counters, one per file
//   /sys/class/misc/ummunot/dev         MAJOR:MINOR of the device
//   /sys/class/misc/ummunot/users       per-user use (root only)
//   /sys/module/ummunot/version, parameters/*
//   /proc/PID/fd/FD, /proc/PID/fdinfo/FD    one open /dev/ummunot file
#ifndef UMMUNOT_STAT_HPP
#define UMMUNOT_STAT_HPP

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <linux/ummunot.h>
#include <ummunot/user_area.h>

namespace ummunot_stat {

// Exit statuses (documented in ummunot-stat(1)).
enum exit_code : int {
	EXIT_OK = 0,
	EXIT_FAILURE_OTHER = 1,	// unexpected error (malformed kernel output, I/O)
	EXIT_USAGE = 2,		// bad command line
	EXIT_NOT_LOADED = 3,	// no /sys/class/misc/ummunot
	EXIT_PERMISSION = 4,	// EACCES reading a process's fd or fdinfo
	EXIT_NOT_CLIENT = 5,	// -p PID: no such process or no ummunot fd
};

// An error with the exit status it maps to.
class error : public std::runtime_error {
public:
	error(exit_code code, const std::string &what)
		: std::runtime_error(what), code_(code) {}
	exit_code code() const noexcept { return code_; }

private:
	exit_code code_;
};

constexpr std::size_t ntypes = UMMUNOT_EVENT_TYPE_MAX;
using type_counts = std::array<std::uint64_t, ntypes>;

// Name of event type t as the kernel prints it, or nullptr for an unused slot.
const char *event_type_name(unsigned int t) noexcept;
// The event types that have names, in ABI order.
const std::vector<unsigned int> &event_types();

// Module version, parameters and the system-wide counters.
struct global_stats {
	std::string version;		// /sys/module/ummunot/version ("" if absent)
	std::optional<std::uint64_t> max_regions, max_ring_entries,
		default_ring_entries;
	std::uint64_t clients = 0, regions = 0, regions_registered = 0;
	std::uint64_t events = 0, dropped = 0, overflows = 0,
		ring_high_water = 0;
	type_counts delivered{}, filtered{};
};

// The library's counters from the user area (include/ummunot/user_area.h).
struct library_stats {
	std::uint64_t version = 0, hits = 0, misses = 0;
	type_counts invalidations{};
	std::uint64_t evictions = 0, resyncs = 0, pinned_bytes = 0,
		entries = 0, registrations = 0, deregistrations = 0;
	std::uint64_t invalidations_total() const noexcept;
};

// One open /dev/ummunot file, from /proc/PID/fdinfo/FD.
struct client_stats {
	int pid = 0;			// the process holding the fd
	int fd = -1;
	// From fdinfo; nullopt when the fdinfo could not be read.
	bool readable = false;
	std::string error;		// why not readable
	unsigned abi = 0;
	int owner_pid = 0;		// the mm owner (the opener)
	std::string owner_comm;
	// SLURM_JOB_ID of the holder's environment (/proc/PID/environ: the
	// job a Slurm task belongs to); empty when unset or unreadable.
	std::string slurm_job;
	std::uint64_t regions = 0, regions_armed = 0, regions_registered = 0;
	std::uint64_t ring_entries = 0, ring_pending = 0, ring_high_water = 0;
	std::uint64_t events = 0, dropped = 0, overflows = 0;
	bool overflow = false;
	std::uint64_t event_mask = 0;
	type_counts delivered{}, filtered{};
	std::vector<std::uint64_t> user_area;	// raw words (may be empty)
	std::optional<library_stats> library;	// when the magic matches
};

// A plain counter of S and its name.
template <typename S>
struct counter {
	std::string_view name;
	std::uint64_t S::*member;
};

// The client's counters that are one decimal number in fdinfo.  The fdinfo
// key is also the --json name (ummunot-stat(1) documents both).
inline constexpr counter<client_stats> client_counters[] = {
	{"regions", &client_stats::regions},
	{"regions_armed", &client_stats::regions_armed},
	{"regions_registered", &client_stats::regions_registered},
	{"ring_entries", &client_stats::ring_entries},
	{"ring_pending", &client_stats::ring_pending},
	{"ring_high_water", &client_stats::ring_high_water},
	{"events", &client_stats::events},
	{"dropped", &client_stats::dropped},
	{"overflows", &client_stats::overflows},
};

// One line of /sys/class/misc/ummunot/users: a user's budget (userns 0) or
// that of a user namespace global root created (its inode number; uid 0).
struct user_use {
	std::uint32_t uid = 0;
	std::uint32_t userns = 0;
	std::uint64_t memory = 0, regions = 0, rings = 0;
};

// The users file and the limits it is measured against.
struct users_table {
	std::optional<std::uint64_t> max_user_memory, max_regions_per_mm;
	std::vector<user_use> users;
	bool truncated = false;		// the kernel left users out ("...")
};

// --- parsers (pure: text in, structures out; throw error on bad input) ---

// Parses a decimal u64 ("123\n" accepted, surrounding blanks allowed).
std::uint64_t parse_u64(std::string_view s);
// Parses "unmap=1 clear=2 ..." (the part after "delivered:").
type_counts parse_type_list(std::string_view s);
// Parses the user_area line's value: blank-separated 16-digit hex words.
std::vector<std::uint64_t> parse_user_area_words(std::string_view s);
// Decodes words per user_area.h; nullopt unless the magic matches.
std::optional<library_stats> decode_user_area(const std::vector<std::uint64_t> &w);
// Parses the whole text of a /proc/PID/fdinfo/FD of a /dev/ummunot file
// into c (pid and fd are left alone).
void parse_fdinfo(std::string_view text, client_stats &c);
// Parses "MAJOR:MINOR".
std::pair<unsigned, unsigned> parse_devnum(std::string_view s);
// Parses the users file into t.users and t.truncated.
void parse_users(std::string_view text, users_table &t);
// The value of NAME in the text of a /proc/PID/environ (NUL-separated
// NAME=VALUE); empty when NAME is not there.
std::string environ_value(std::string_view text, std::string_view name);
// SLURM_JOB_ID from the text of a /proc/PID/environ: empty unless it is a
// job id (1 to 10 digits; the environment is the process's to write, and
// its bytes never reach the terminal).
std::string slurm_job_of(std::string_view environ);

// --- collectors (read the system under root, "" = the real /) ---

struct system_paths {
	std::string root;	// prefix for /sys and /proc (tests use fixtures)
	std::string misc() const { return root + "/sys/class/misc/ummunot"; }
	std::string module() const { return root + "/sys/module/ummunot"; }
	std::string proc() const { return root + "/proc"; }
};

// Throws error(EXIT_NOT_LOADED) when the module is not loaded.
global_stats collect_global(const system_paths &p);

struct client_scan {
	std::vector<client_stats> clients;
	// Processes whose fd directory could not be read (EACCES): their
	// clients, if any, are not in the list.
	std::vector<int> denied_pids;
};

// Every open /dev/ummunot file of every process (pid == 0) or of one
// process.  Files are matched by the device number in sysfs, not by name.
// For one pid: throws error(EXIT_PERMISSION) if its fds cannot be read and
// error(EXIT_NOT_CLIENT) if it does not exist or holds no ummunot fd.
client_scan collect_clients(const system_paths &p, int pid);

// The users file and the two limits.  Throws error(EXIT_PERMISSION) when
// the file cannot be read (root only), error(EXIT_FAILURE_OTHER) when the
// module has none (older than per-user accounting).
users_table collect_users(const system_paths &p);

// --- renderers ---

struct sample {
	double time = 0;		// seconds since the epoch (reported)
	double mono = 0;		// CLOCK_MONOTONIC seconds (for rates)
	global_stats global;
	bool with_clients = false;
	client_scan scan;
};

std::string render_global_text(const sample &s);
std::string render_users_text(const users_table &t);
std::string render_clients_text(const sample &s, const sample *prev);
// One vmstat-like line per sample in --watch mode (header separately).
std::string render_watch_header();
std::string render_watch_line(const sample &s, const sample *prev);
// One JSON object (one line, newline-terminated) per sample.
std::string render_json(const sample &s, const sample *prev);

// JSON string escaping (RFC 8259).
std::string json_string(std::string_view s);

} // namespace ummunot_stat

#endif
