// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot-stat: parsers for what the module prints in sysfs and fdinfo.
// They are strict: anything that does not look like the module's output is
// an error naming the offending text, never a silently wrong number.
#include <algorithm>
#include <charconv>
#include <cstring>

#include "stat.hpp"

namespace ummunot_stat {

namespace {

// Must match ummunot_type_names[] in kmod/ummunot_stats.c.
constexpr std::array<const char *, ntypes> type_names = [] {
	std::array<const char *, ntypes> n{};
	n[UMMUNOT_EVENT_UNMAP] = "unmap";
	n[UMMUNOT_EVENT_CLEAR] = "clear";
	n[UMMUNOT_EVENT_PROTECTION_VMA] = "protection_vma";
	n[UMMUNOT_EVENT_PROTECTION_PAGE] = "protection_page";
	n[UMMUNOT_EVENT_SOFT_DIRTY] = "soft_dirty";
	n[UMMUNOT_EVENT_RELEASE] = "release";
	n[UMMUNOT_EVENT_MIGRATE] = "migrate";
	n[UMMUNOT_EVENT_EXCLUSIVE] = "exclusive";
	n[UMMUNOT_EVENT_OTHER] = "other";
	return n;
}();

bool is_blank(char c) noexcept
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view trim(std::string_view s) noexcept
{
	while (!s.empty() && is_blank(s.front()))
		s.remove_prefix(1);
	while (!s.empty() && is_blank(s.back()))
		s.remove_suffix(1);
	return s;
}

[[noreturn]] void bad(std::string_view what, std::string_view text)
{
	throw error(EXIT_FAILURE_OTHER, std::string(what) + ": '" +
		    std::string(text.substr(0, 80)) + "'");
}

// Splits on blanks.
std::vector<std::string_view> words(std::string_view s)
{
	std::vector<std::string_view> out;
	std::size_t i = 0;
	while (i < s.size()) {
		while (i < s.size() && is_blank(s[i]))
			i++;
		std::size_t j = i;
		while (j < s.size() && !is_blank(s[j]))
			j++;
		if (j > i)
			out.push_back(s.substr(i, j - i));
		i = j;
	}
	return out;
}

// All of digits as one number in base; otherwise bad(what, s), s being the
// text as given.
std::uint64_t parse_digits(std::string_view digits, int base, const char *what,
			   std::string_view s)
{
	std::uint64_t v = 0;
	if (digits.empty())
		bad(what, s);
	auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(),
				       v, base);
	if (ec != std::errc() || p != digits.data() + digits.size())
		bad(what, s);
	return v;
}

std::uint64_t parse_hex(std::string_view s)
{
	std::string_view t = s;
	if (t.starts_with("0x") || t.starts_with("0X"))
		t.remove_prefix(2);
	return parse_digits(t, 16, "not a hexadecimal number", s);
}

int parse_int(std::string_view s)
{
	std::uint64_t v = parse_u64(s);
	if (v > 0x7fffffff)
		bad("number out of range", s);
	return static_cast<int>(v);
}

// The fdinfo lines that are one decimal counter, and where they go.
std::uint64_t client_stats::*fdinfo_counter(std::string_view key) noexcept
{
	for (const auto &k : client_counters)
		if (k.name == key)
			return k.member;
	return nullptr;
}

} // namespace

const char *event_type_name(unsigned int t) noexcept
{
	return t < ntypes ? type_names[t] : nullptr;
}

const std::vector<unsigned int> &event_types()
{
	static const std::vector<unsigned int> v = [] {
		std::vector<unsigned int> r;
		for (unsigned int t = 0; t < ntypes; t++)
			if (type_names[t])
				r.push_back(t);
		return r;
	}();
	return v;
}

std::uint64_t library_stats::invalidations_total() const noexcept
{
	std::uint64_t sum = 0;
	for (auto v : invalidations)
		sum += v;
	return sum;
}

std::uint64_t parse_u64(std::string_view s)
{
	return parse_digits(trim(s), 10, "not a number", s);
}

type_counts parse_type_list(std::string_view s)
{
	type_counts out{};
	for (auto w : words(s)) {
		auto eq = w.find('=');
		if (eq == std::string_view::npos)
			bad("expected TYPE=COUNT", w);
		auto name = w.substr(0, eq);
		bool known = false;
		for (unsigned int t = 0; t < ntypes; t++) {
			if (type_names[t] && name == type_names[t]) {
				out[t] = parse_u64(w.substr(eq + 1));
				known = true;
				break;
			}
		}
		// A newer module may know more types: ignore those we cannot name.
		if (!known)
			(void)parse_u64(w.substr(eq + 1));
	}
	return out;
}

std::vector<std::uint64_t> parse_user_area_words(std::string_view s)
{
	std::vector<std::uint64_t> out;
	for (auto w : words(s)) {
		if (w.size() != 16)
			bad("user_area word is not 16 hex digits", w);
		out.push_back(parse_hex(w));
	}
	if (out.size() > UMMUNOT_USER_AREA_WORDS)
		bad("user_area longer than the user area", s);
	return out;
}

std::optional<library_stats> decode_user_area(const std::vector<std::uint64_t> &w)
{
	auto word = [&w](std::size_t i) -> std::uint64_t {
		return i < w.size() ? w[i] : 0;	// trailing zeros are omitted
	};
	if (word(UMMUNOT_USER_AREA_WORD_MAGIC) != UMMUNOT_USER_AREA_MAGIC)
		return std::nullopt;
	library_stats l;
	l.version = word(UMMUNOT_USER_AREA_WORD_VERSION);
	if (l.version < 1)
		return std::nullopt;	// a writer that never finished initialising
	l.hits = word(UMMUNOT_USER_AREA_WORD_HITS);
	l.misses = word(UMMUNOT_USER_AREA_WORD_MISSES);
	for (std::size_t t = 0; t < ntypes; t++)
		l.invalidations[t] = word(UMMUNOT_USER_AREA_WORD_INVALIDATIONS + t);
	l.evictions = word(UMMUNOT_USER_AREA_WORD_EVICTIONS);
	l.resyncs = word(UMMUNOT_USER_AREA_WORD_RESYNCS);
	l.pinned_bytes = word(UMMUNOT_USER_AREA_WORD_PINNED_BYTES);
	l.entries = word(UMMUNOT_USER_AREA_WORD_ENTRIES);
	l.registrations = word(UMMUNOT_USER_AREA_WORD_REGISTRATIONS);
	l.deregistrations = word(UMMUNOT_USER_AREA_WORD_DEREGISTRATIONS);
	return l;
}

void parse_fdinfo(std::string_view text, client_stats &c)
{
	bool seen_abi = false;
	std::size_t pos = 0;
	while (pos < text.size()) {
		std::size_t nl = text.find('\n', pos);
		if (nl == std::string_view::npos)
			nl = text.size();
		std::string_view line = text.substr(pos, nl - pos);
		pos = nl + 1;
		auto colon = line.find(':');
		if (colon == std::string_view::npos) {
			if (trim(line).empty())
				continue;
			bad("fdinfo line without ':'", line);
		}
		std::string_view key = line.substr(0, colon);
		std::string_view val = line.substr(colon + 1);
		// The generic lines (pos, flags, mnt_id, ino) come first; the
		// ones below are the module's (kmod/ummunot_stats.c).
		if (key == "ummunot_abi") {
			c.abi = static_cast<unsigned>(parse_u64(val));
			seen_abi = true;
		} else if (key == "owner_pid") {
			c.owner_pid = parse_int(val);
		} else if (key == "owner_comm") {
			// comm may hold blanks; drop only the separator after ':'.
			if (!val.empty() && (val.front() == ' ' || val.front() == '\t'))
				val.remove_prefix(1);
			c.owner_comm = std::string(val);
		} else if (auto m = fdinfo_counter(key)) {
			c.*m = parse_u64(val);
		} else if (key == "overflow") {
			c.overflow = parse_u64(val) != 0;
		} else if (key == "event_mask") {
			c.event_mask = parse_hex(trim(val));
		} else if (key == "delivered") {
			c.delivered = parse_type_list(val);
		} else if (key == "filtered") {
			c.filtered = parse_type_list(val);
		} else if (key == "user_area") {
			c.user_area = parse_user_area_words(val);
		}
		// Other keys: generic fdinfo lines, or a newer module's additions.
	}
	if (!seen_abi)
		throw error(EXIT_FAILURE_OTHER,
			    "fdinfo has no ummunot_abi line: not a /dev/ummunot file, or a module this tool does not know");
	c.library = decode_user_area(c.user_area);
	c.readable = true;
}

std::pair<unsigned, unsigned> parse_devnum(std::string_view s)
{
	std::string_view t = trim(s);
	auto colon = t.find(':');
	if (colon == std::string_view::npos)
		bad("expected MAJOR:MINOR", s);
	std::uint64_t maj = parse_u64(t.substr(0, colon));
	std::uint64_t min = parse_u64(t.substr(colon + 1));
	if (maj > 0xfff || min > 0xfffff)
		bad("device number out of range", s);
	return {static_cast<unsigned>(maj), static_cast<unsigned>(min)};
}

void parse_users(std::string_view text, users_table &t)
{
	std::size_t pos = 0, cols = 4;
	bool header = true;

	t.users.clear();
	t.truncated = false;
	while (pos < text.size()) {
		std::size_t nl = text.find('\n', pos);
		std::string_view line = text.substr(pos, nl == std::string_view::npos ?
						    std::string_view::npos : nl - pos);
		pos = nl == std::string_view::npos ? text.size() : nl + 1;
		line = trim(line);
		if (header) {
			// Modules of ummunot 0.3 and earlier print no userns
			// column.
			if (line == "uid memory regions rings userns")
				cols = 5;
			else if (line != "uid memory regions rings")
				bad("users: unexpected header", line);
			header = false;
			continue;
		}
		if (line.empty())
			continue;
		if (t.truncated)
			bad("users: line after '...'", line);
		if (line == "...") {
			t.truncated = true;
			continue;
		}
		std::vector<std::string_view> w = words(line);
		if (w.size() != cols)
			bad(cols == 4 ? "users: expected 'uid memory regions rings'"
				      : "users: expected 'uid memory regions rings userns'",
			    line);
		std::uint64_t uid = parse_u64(w[0]);
		if (uid > 0xffffffffULL)
			bad("users: uid out of range", line);
		user_use u;
		u.uid = static_cast<std::uint32_t>(uid);
		u.memory = parse_u64(w[1]);
		u.regions = parse_u64(w[2]);
		u.rings = parse_u64(w[3]);
		if (cols == 5) {
			std::uint64_t ns = parse_u64(w[4]);
			if (ns > 0xffffffffULL)
				bad("users: userns out of range", line);
			u.userns = static_cast<std::uint32_t>(ns);
		}
		t.users.push_back(u);
	}
	if (header)
		bad("users: empty", text);
}

std::string environ_value(std::string_view text, std::string_view name)
{
	while (!text.empty()) {
		std::size_t end = text.find('\0');
		std::string_view var = text.substr(0, end);
		if (var.size() > name.size() && var.substr(0, name.size()) == name &&
		    var[name.size()] == '=')
			return std::string(var.substr(name.size() + 1));
		if (end == std::string_view::npos)
			break;
		text.remove_prefix(end + 1);
	}
	return {};
}

std::string slurm_job_of(std::string_view environ)
{
	std::string v = environ_value(environ, "SLURM_JOB_ID");
	if (v.empty() || v.size() > 10 ||
	    !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
		return {};
	return v;
}

} // namespace ummunot_stat
