// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot-stat: show what the ummunot module and its clients are doing.
// man/man1/ummunot-stat.1 documents the options, output and exit statuses.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <getopt.h>
#include <time.h>

#include "stat.hpp"

using namespace ummunot_stat;

namespace {

const char usage_text[] =
	"Usage: ummunot-stat [OPTIONS]\n"
	"\n"
	"Show the state of the ummunot kernel module (/dev/ummunot) and of the\n"
	"processes using it.\n"
	"\n"
	"  (no option)          module version and parameters, clients, regions,\n"
	"                       events delivered and filtered per type, overflows\n"
	"  -c, --clients        one row per open /dev/ummunot file: pid, command,\n"
	"                       fd, regions, ring fill, events, dropped/overflow,\n"
	"                       and the library's cache counters when published\n"
	"  -p, --pid PID        the same table for one process only\n"
	"  -u, --users          per-user kernel memory, regions and rings against\n"
	"                       max_user_memory (root only; one sample, text)\n"
	"  -w, --watch SECONDS  sample every SECONDS (may be fractional) and show\n"
	"                       rates per second between samples, like vmstat\n"
	"  -n, --count N        stop after N samples (implies --watch 1 if no\n"
	"                       --watch is given)\n"
	"  -j, --json           one JSON object per sample (schema: ummunot-stat(1))\n"
	"      --root DIR       read DIR/sys and DIR/proc instead of /sys and /proc\n"
	"                       (for tests)\n"
	"  -V, --version        print the tool's version\n"
	"  -h, --help           this text\n"
	"\n"
	"Exit status: 0 ok, 1 other error, 2 usage, 3 module not loaded,\n"
	"4 permission denied, 5 the process given to -p is not a client.\n";

struct options {
	bool clients = false;
	bool users = false;
	int pid = 0;
	double interval = 0;	// 0: one sample
	long count = -1;	// -1: unbounded (with --watch)
	bool json = false;
	std::string root;
};

[[noreturn]] void usage_error(const std::string &msg)
{
	std::fprintf(stderr, "ummunot-stat: %s\nTry 'ummunot-stat --help'.\n", msg.c_str());
	std::exit(EXIT_USAGE);
}

long parse_positive(const char *opt, const char *arg, long max)
{
	char *end = nullptr;
	errno = 0;
	long v = std::strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > max)
		usage_error(std::string(opt) + " needs a whole number from 1 to " +
			    std::to_string(max) + ", not '" + arg + "'");
	return v;
}

options parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"clients", no_argument, nullptr, 'c'},
		{"pid", required_argument, nullptr, 'p'},
		{"users", no_argument, nullptr, 'u'},
		{"watch", required_argument, nullptr, 'w'},
		{"count", required_argument, nullptr, 'n'},
		{"json", no_argument, nullptr, 'j'},
		{"root", required_argument, nullptr, 'R'},
		{"version", no_argument, nullptr, 'V'},
		{"help", no_argument, nullptr, 'h'},
		{nullptr, 0, nullptr, 0},
	};
	options o;
	int ch;
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":cp:uw:n:jVh", longopts, nullptr)) != -1) {
		switch (ch) {
		case 'c':
			o.clients = true;
			break;
		case 'u':
			o.users = true;
			break;
		case 'p':
			o.pid = static_cast<int>(parse_positive("--pid", optarg, 0x3fffffff));
			break;
		case 'w': {
			char *end = nullptr;
			errno = 0;
			double v = std::strtod(optarg, &end);
			if (errno || end == optarg || *end || !std::isfinite(v) ||
			    v < 0.01 || v > 86400)
				usage_error(std::string("--watch needs seconds from 0.01 to 86400, not '") +
					    optarg + "'");
			o.interval = v;
			break;
		}
		case 'n':
			o.count = parse_positive("--count", optarg, 1000000000L);
			break;
		case 'j':
			o.json = true;
			break;
		case 'R':
			o.root = optarg;
			break;
		case 'V':
			std::printf("ummunot-stat %s\n", UMMUNOT_STAT_VERSION);
			std::exit(EXIT_OK);
		case 'h':
			std::fputs(usage_text, stdout);
			std::exit(EXIT_OK);
		case ':':
			usage_error(std::string("option '") + argv[optind - 1] + "' needs a value");
		default:
			usage_error(std::string("unknown option '") + argv[optind - 1] + "'");
		}
	}
	if (optind < argc)
		usage_error(std::string("unexpected argument '") + argv[optind] + "'");
	if (o.users && (o.clients || o.pid || o.json || o.interval > 0 || o.count > 0))
		usage_error("--users takes no other option but --root");
	if (o.count > 0 && o.interval == 0)
		o.interval = 1;
	return o;
}

double clock_seconds(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

sample take_sample(const options &o, const system_paths &paths)
{
	sample s;
	s.time = clock_seconds(CLOCK_REALTIME);
	s.mono = clock_seconds(CLOCK_MONOTONIC);
	s.global = collect_global(paths);
	if (o.clients || o.pid) {
		s.with_clients = true;
		s.scan = collect_clients(paths, o.pid);
	}
	return s;
}

void emit(const std::string &text)
{
	if (std::fputs(text.c_str(), stdout) == EOF || std::fflush(stdout) == EOF)
		throw error(EXIT_FAILURE_OTHER, std::string("writing the output: ") +
			    std::strerror(errno));
}

// Sleeps until the monotonic time `deadline` (seconds), absorbing EINTR.
void sleep_until(double deadline)
{
	struct timespec ts;
	ts.tv_sec = static_cast<time_t>(deadline);
	ts.tv_nsec = static_cast<long>((deadline - static_cast<double>(ts.tv_sec)) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR)
		;
}

int run(const options &o)
{
	system_paths paths{o.root};
	bool table = o.clients || o.pid;

	if (o.users) {
		emit(render_users_text(collect_users(paths)));
		return EXIT_OK;
	}

	if (o.interval == 0) {
		sample s = take_sample(o, paths);
		if (o.json)
			emit(render_json(s, nullptr));
		else if (table)
			emit(render_clients_text(s, nullptr));
		else
			emit(render_global_text(s));
		return EXIT_OK;
	}

	std::optional<sample> prev;
	double next = clock_seconds(CLOCK_MONOTONIC);
	for (long i = 0; o.count < 0 || i < o.count; i++) {
		if (i > 0) {
			next += o.interval;
			sleep_until(next);
		}
		sample s = take_sample(o, paths);
		const sample *p = prev ? &*prev : nullptr;
		if (o.json) {
			emit(render_json(s, p));
		} else if (table) {
			char when[32];
			time_t t = static_cast<time_t>(s.time);
			struct tm tm;
			localtime_r(&t, &tm);
			strftime(when, sizeof(when), "%H:%M:%S", &tm);
			emit(std::string(i ? "\n" : "") + when + "\n" +
			     render_clients_text(s, p));
		} else {
			// The header again every 20 lines, like vmstat.
			emit((i % 20 == 0 ? render_watch_header() : std::string()) +
			     render_watch_line(s, p));
		}
		prev = std::move(s);
	}
	return EXIT_OK;
}

} // namespace

int main(int argc, char **argv)
{
	options o = parse_args(argc, argv);
	try {
		return run(o);
	} catch (const error &e) {
		std::fprintf(stderr, "ummunot-stat: %s\n", e.what());
		return e.code();
	} catch (const std::exception &e) {
		std::fprintf(stderr, "ummunot-stat: %s\n", e.what());
		return EXIT_FAILURE_OTHER;
	}
}
