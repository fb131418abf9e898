// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Host tests of ummunot-stat's parsers, collectors (against fixture trees)
// and renderers.  FIXTURES is the tests/tools/fixtures directory.
// Catch2 and its main() come from tests/unit (catch2_test_dep).
#include "catch.hpp"

#include <fstream>
#include <functional>
#include <sstream>

#include "stat.hpp"

using namespace ummunot_stat;

namespace {

std::string fixture(const std::string &name)
{
	std::ifstream in(std::string(FIXTURES) + "/" + name);
	REQUIRE(in.good());
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

client_stats parse_fixture(const std::string &name)
{
	client_stats c;
	parse_fdinfo(fixture(name), c);
	return c;
}

exit_code code_of(const std::function<void()> &f)
{
	try {
		f();
	} catch (const error &e) {
		return e.code();
	}
	FAIL("no error thrown");
	return EXIT_OK;
}

} // namespace

TEST_CASE("parse_u64 accepts sysfs values and rejects anything else")
{
	CHECK(parse_u64("0\n") == 0);
	CHECK(parse_u64(" 18446744073709551615\n") == 18446744073709551615ULL);
	CHECK(code_of([] { parse_u64(""); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_u64("12x"); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_u64("-1"); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_u64("18446744073709551616"); }) == EXIT_FAILURE_OTHER);
}

TEST_CASE("parse_type_list maps names to ABI slots and skips unknown types")
{
	auto c = parse_type_list(" unmap=5 clear=7 other=9 future_type=3");
	CHECK(c[UMMUNOT_EVENT_UNMAP] == 5);
	CHECK(c[UMMUNOT_EVENT_CLEAR] == 7);
	CHECK(c[UMMUNOT_EVENT_OTHER] == 9);
	CHECK(c[UMMUNOT_EVENT_RELEASE] == 0);
	CHECK(code_of([] { parse_type_list("unmap"); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_type_list("unmap=x"); }) == EXIT_FAILURE_OTHER);
}

TEST_CASE("event type names follow the ABI order")
{
	const auto &t = event_types();
	REQUIRE(t.size() == 9);
	CHECK(t.front() == UMMUNOT_EVENT_UNMAP);
	CHECK(t.back() == UMMUNOT_EVENT_OTHER);
	CHECK(std::string(event_type_name(UMMUNOT_EVENT_PROTECTION_VMA)) == "protection_vma");
	CHECK(event_type_name(0) == nullptr);
	CHECK(event_type_name(UMMUNOT_EVENT_TYPE_MAX) == nullptr);
}

TEST_CASE("fdinfo of an overflowed client with library counters")
{
	auto c = parse_fixture("fdinfo-overflow.txt");
	CHECK(c.readable);
	CHECK(c.abi == 1);
	CHECK(c.owner_pid == 4242);
	CHECK(c.owner_comm == "mpi rank 0");	// blanks inside comm kept
	CHECK(c.regions == 80);
	CHECK(c.regions_armed == 10);
	CHECK(c.regions_registered == 80);
	CHECK(c.ring_entries == 64);
	CHECK(c.ring_pending == 64);
	CHECK(c.ring_high_water == 64);
	CHECK(c.events == 64);
	CHECK(c.dropped == 6);
	CHECK(c.overflows == 1);
	CHECK(c.overflow);
	CHECK(c.event_mask == 0x2c6);
	CHECK(c.delivered[UMMUNOT_EVENT_UNMAP] == 64);
	CHECK(c.filtered[UMMUNOT_EVENT_PROTECTION_VMA] == 10);
	REQUIRE(c.user_area.size() == UMMUNOT_USER_AREA_WORDS_V1);
	REQUIRE(c.library);
	const auto &l = *c.library;
	CHECK(l.version == 1);
	CHECK(l.hits == 1234);
	CHECK(l.misses == 56);
	CHECK(l.invalidations[0] == 2);
	CHECK(l.invalidations[UMMUNOT_EVENT_UNMAP] == 64);
	CHECK(l.invalidations_total() == 66);
	CHECK(l.evictions == 3);
	CHECK(l.resyncs == 0);
	CHECK(l.pinned_bytes == 40960);
	CHECK(l.entries == 10);
	CHECK(l.registrations == 80);
	CHECK(l.deregistrations == 70);
}

TEST_CASE("a user area without the library's magic is not decoded")
{
	auto c = parse_fixture("fdinfo-nolib.txt");
	CHECK(c.owner_comm == "plain");
	CHECK(c.user_area.size() == 2);
	CHECK(c.user_area[1] == 0xdeadbeefULL);
	CHECK_FALSE(c.library);
	CHECK(c.delivered[UMMUNOT_EVENT_PROTECTION_VMA] == 1);
	CHECK_FALSE(c.overflow);
}

TEST_CASE("a file before its handshake has no user_area line")
{
	auto c = parse_fixture("fdinfo-nohello.txt");
	CHECK(c.readable);
	CHECK(c.ring_entries == 0);
	CHECK(c.user_area.empty());
	CHECK_FALSE(c.library);
}

TEST_CASE("decode_user_area: magic, version and omitted trailing words")
{
	std::vector<std::uint64_t> w{UMMUNOT_USER_AREA_MAGIC, 1, 7};
	auto l = decode_user_area(w);
	REQUIRE(l);
	CHECK(l->hits == 7);
	CHECK(l->misses == 0);		// omitted = zero
	CHECK(l->deregistrations == 0);
	CHECK_FALSE(decode_user_area({}));
	CHECK_FALSE(decode_user_area({UMMUNOT_USER_AREA_MAGIC}));	// version 0
	CHECK_FALSE(decode_user_area({UMMUNOT_USER_AREA_MAGIC + 1, 1, 7}));
	// The magic is the bytes "umnlib\0\0" in memory.
	std::uint64_t m = UMMUNOT_USER_AREA_MAGIC;
	CHECK(std::string(reinterpret_cast<const char *>(&m)) == "umnlib");
}

TEST_CASE("malformed fdinfo is an error, never a wrong number")
{
	CHECK(code_of([] { parse_fixture("fdinfo-notummunot.txt"); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_fixture("fdinfo-bad-number.txt"); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_fixture("fdinfo-bad-userarea.txt"); }) == EXIT_FAILURE_OTHER);
	std::string too_long = "ummunot_abi: 1\nuser_area:";
	for (unsigned i = 0; i <= UMMUNOT_USER_AREA_WORDS; i++)
		too_long += " 0000000000000001";
	client_stats c;
	CHECK(code_of([&] { parse_fdinfo(too_long, c); }) == EXIT_FAILURE_OTHER);
}

TEST_CASE("parse_devnum")
{
	auto [maj, min] = parse_devnum("10:123\n");
	CHECK(maj == 10);
	CHECK(min == 123);
	CHECK(code_of([] { parse_devnum("10"); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([] { parse_devnum("a:b"); }) == EXIT_FAILURE_OTHER);
}

TEST_CASE("parse_users: header, lines, truncation; malformed is an error")
{
	users_table t;
	parse_users("uid memory regions rings\n0 275280 100 1\n65534 1048568 7649 1\n", t);
	REQUIRE(t.users.size() == 2);
	CHECK(t.users[1].uid == 65534);
	CHECK(t.users[1].memory == 1048568);
	CHECK(t.users[1].regions == 7649);
	CHECK(t.users[1].rings == 1);
	CHECK_FALSE(t.truncated);
	parse_users("uid memory regions rings\n", t);
	CHECK(t.users.empty());
	parse_users("uid memory regions rings\n7 1 2 3\n...\n", t);
	CHECK(t.users.size() == 1);
	CHECK(t.truncated);
	CHECK(code_of([&] { parse_users("", t); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([&] { parse_users("uid memory\n", t); }) == EXIT_FAILURE_OTHER);
	CHECK(code_of([&] { parse_users("uid memory regions rings\n1 2 3\n", t); }) ==
	      EXIT_FAILURE_OTHER);
	CHECK(code_of([&] { parse_users("uid memory regions rings\n4294967296 1 2 3\n", t); }) ==
	      EXIT_FAILURE_OTHER);
	CHECK(code_of([&] { parse_users("uid memory regions rings\n...\n1 2 3 4\n", t); }) ==
	      EXIT_FAILURE_OTHER);
	// With the userns column: a container's budget by its namespace.
	parse_users("uid memory regions rings userns\n0 2048 5 1 0\n0 4096 9 1 4026532290\n", t);
	REQUIRE(t.users.size() == 2);
	CHECK(t.users[0].userns == 0);
	CHECK(t.users[1].userns == 4026532290u);
	CHECK(t.users[1].regions == 9);
	CHECK(code_of([&] { parse_users("uid memory regions rings userns\n0 1 2 3\n", t); }) ==
	      EXIT_FAILURE_OTHER);
	CHECK(code_of([&] { parse_users("uid memory regions rings\n0 1 2 3 4\n", t); }) ==
	      EXIT_FAILURE_OTHER);
}

TEST_CASE("collect_users reads the fixture tree's users file and limits")
{
	system_paths p{std::string(FIXTURES) + "/root-loaded"};
	auto t = collect_users(p);
	CHECK(t.max_user_memory == 82497536u);
	CHECK(t.max_regions_per_mm == 131072u);
	REQUIRE(t.users.size() == 3);
	CHECK(t.users[0].uid == 0);
	CHECK(t.users[0].memory == 275280);
	CHECK(t.users[2].userns == 4026532290u);
	std::string text = render_users_text(t);
	CHECK(text.find("max_user_memory=82497536 max_regions_per_mm=131072") !=
	      std::string::npos);
	CHECK(text.find("     65534        1048568    1.3       7649      1          -\n") !=
	      std::string::npos);
	CHECK(text.find("         0          41216    0.0         40      1 4026532290\n") !=
	      std::string::npos);
	system_paths u{std::string(FIXTURES) + "/root-unloaded"};
	CHECK(code_of([&] { collect_users(u); }) == EXIT_NOT_LOADED);
}

TEST_CASE("collect_global reads every sysfs value of the fixture tree")
{
	system_paths p{std::string(FIXTURES) + "/root-loaded"};
	auto g = collect_global(p);
	CHECK(g.version == "0.1.0");
	CHECK(g.max_regions == 131072u);
	CHECK(g.max_ring_entries == 262144u);
	CHECK(g.default_ring_entries == 4096u);
	CHECK(g.clients == 2);
	CHECK(g.regions == 85);
	CHECK(g.regions_registered == 87);
	CHECK(g.events == 67);
	CHECK(g.dropped == 6);
	CHECK(g.overflows == 1);
	CHECK(g.ring_high_water == 64);
	std::uint64_t i = 1;
	for (unsigned t : event_types()) {
		CHECK(g.delivered[t] == 11 * i);
		CHECK(g.filtered[t] == 100 * i);
		i++;
	}
}

TEST_CASE("collect_global and collect_clients without the module")
{
	system_paths p{std::string(FIXTURES) + "/root-unloaded"};
	CHECK(code_of([&] { collect_global(p); }) == EXIT_NOT_LOADED);
	CHECK(code_of([&] { collect_clients(p, 0); }) == EXIT_NOT_LOADED);
}

TEST_CASE("collect_clients: a pid that does not exist is not a client")
{
	system_paths p{std::string(FIXTURES) + "/root-loaded"};
	CHECK(code_of([&] { collect_clients(p, 1); }) == EXIT_NOT_CLIENT);
	auto scan = collect_clients(p, 0);
	CHECK(scan.clients.empty());
	CHECK(scan.denied_pids.empty());
}

TEST_CASE("json_string escapes quotes, controls and non-ASCII bytes")
{
	CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
	CHECK(json_string("x\n\t\x01") == "\"x\\n\\t\\u0001\"");
	CHECK(json_string("\xff") == "\"\\u00ff\"");
}

TEST_CASE("render_json carries clients, library counters and rates")
{
	sample s0, s1;
	s0.mono = 100.0;
	s1.mono = 102.0;
	s0.global.events = 10;
	s1.global.events = 30;
	s0.with_clients = s1.with_clients = true;
	client_stats c0 = parse_fixture("fdinfo-nolib.txt");
	c0.pid = 77;
	c0.fd = 3;
	client_stats c1 = parse_fixture("fdinfo-overflow.txt");
	c1.pid = 4242;
	c1.fd = 5;
	client_stats denied;
	denied.pid = 9;
	denied.fd = 4;
	denied.error = "Permission denied";
	s1.scan.clients = {c0, c1, denied};
	s0.scan.clients = {c0};
	s0.scan.clients[0].events = 1;
	std::string j = render_json(s1, &s0);
	CHECK(j.back() == '\n');
	CHECK(j.find('\n') == j.size() - 1);	// one line
	CHECK(j.find("\"interval\":2.000") != std::string::npos);
	CHECK(j.find("\"rates\":{\"regions_registered\":0.000,\"events\":10.000") != std::string::npos);
	// c0 had 1 event two seconds ago, 3 now.
	CHECK(j.find("\"rates\":{\"events\":1.000") != std::string::npos);
	CHECK(j.find("\"comm\":\"mpi rank 0\"") != std::string::npos);
	CHECK(j.find("\"hits\":1234") != std::string::npos);
	CHECK(j.find("\"library\":null") != std::string::npos);
	CHECK(j.find("{\"pid\":9,\"fd\":4,\"slurm_job\":null,\"error\":\"Permission denied\"}") !=
	      std::string::npos);
	std::string first = render_json(s0, nullptr);
	CHECK(first.find("\"interval\":null") != std::string::npos);
	CHECK(first.find("\"rates\":null") != std::string::npos);
}

TEST_CASE("the clients table shows '-' where counters are unknown")
{
	sample s;
	s.with_clients = true;
	client_stats c = parse_fixture("fdinfo-nolib.txt");
	c.pid = 77;
	c.fd = 3;
	client_stats d;
	d.pid = 9;
	d.fd = 4;
	d.error = "Permission denied";
	s.scan.clients = {c, d};
	s.scan.denied_pids = {1, 2};
	std::string t = render_clients_text(s, nullptr);
	CHECK(t.find("plain(77)") == std::string::npos);	// holder is the owner
	CHECK(t.find("(Permission denied)") != std::string::npos);
	CHECK(t.find("note: 2 processes of other users could not be inspected") != std::string::npos);
	std::istringstream lines(t);
	std::string header, row;
	std::getline(lines, header);
	std::getline(lines, row);
	std::istringstream cols(row);
	std::vector<std::string> v;
	for (std::string w; cols >> w;)
		v.push_back(w);
	REQUIRE(v.size() == 13);
	CHECK(v[0] == "77");
	CHECK(v[1] == "plain");
	CHECK(v[2] == "3");
	CHECK(v[3] == "5");
	CHECK(v[4] == "1/4096");
	CHECK(v[5] == "3");
	CHECK(v[6] == "0");
	CHECK(v[7] == "no");
	for (int i = 8; i < 13; i++)
		CHECK(v[i] == "-");	// HITS .. PINNED, and JOB outside Slurm
}

TEST_CASE("a Slurm task's job id, from its environment")
{
	using namespace std::string_literals;
	std::string env = "PATH=/usr/bin\0SLURM_JOB_ID_X=1\0SLURM_JOB_ID=4711\0HOME=/root\0"s;
	CHECK(environ_value(env, "SLURM_JOB_ID") == "4711");
	CHECK(environ_value(env, "HOME") == "/root");
	CHECK(environ_value(env, "SLURM_JOB") == "");
	CHECK(environ_value("A=1"s, "A") == "1");	// no final NUL
	CHECK(environ_value(""s, "A") == "");
	CHECK(slurm_job_of(env) == "4711");
	CHECK(slurm_job_of("SLURM_JOB_ID=\x1b[2J\0"s) == "");	// not a job id: never shown
	CHECK(slurm_job_of("SLURM_JOB_ID=12345678901\0"s) == "");
	CHECK(slurm_job_of("SLURM_JOB_ID=\0"s) == "");

	sample s;
	s.with_clients = true;
	client_stats c = parse_fixture("fdinfo-nolib.txt");
	c.pid = 77;
	c.fd = 3;
	c.slurm_job = "4711";
	s.scan.clients = {c};
	std::string t = render_clients_text(s, nullptr);
	CHECK(t.substr(0, t.find('\n')).ends_with(" JOB"));
	std::string row = t.substr(t.find('\n') + 1);
	CHECK(row.substr(0, row.find('\n')).ends_with(" 4711"));
	CHECK(render_json(s, nullptr).find("\"slurm_job\":\"4711\"") != std::string::npos);
}
