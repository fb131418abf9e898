// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ummunot-stat: reading sysfs and /proc.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "stat.hpp"

namespace ummunot_stat {

namespace {

// An fd that closes itself.
class unique_fd {
public:
	explicit unique_fd(int fd) noexcept : fd_(fd) {}
	unique_fd(const unique_fd &) = delete;
	unique_fd &operator=(const unique_fd &) = delete;
	~unique_fd() { if (fd_ >= 0) ::close(fd_); }
	int get() const noexcept { return fd_; }

private:
	int fd_;
};

struct dir_closer {
	void operator()(DIR *d) const noexcept { ::closedir(d); }
};
using unique_dir = std::unique_ptr<DIR, dir_closer>;

// Reads a whole (small, pseudo-) file.  Returns the errno on failure.
int read_file(const std::string &path, std::string &out)
{
	unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
	if (fd.get() < 0)
		return errno;
	out.clear();
	char buf[4096];
	for (;;) {
		ssize_t n = ::read(fd.get(), buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		if (n == 0)
			return 0;
		out.append(buf, static_cast<std::size_t>(n));
	}
}

std::string errno_text(int e)
{
	return std::strerror(e);
}

std::uint64_t read_u64(const std::string &path)
{
	std::string s;
	int e = read_file(path, s);
	if (e)
		throw error(e == EACCES ? EXIT_PERMISSION : EXIT_FAILURE_OTHER,
			    path + ": " + errno_text(e));
	try {
		return parse_u64(s);
	} catch (const error &x) {
		throw error(EXIT_FAILURE_OTHER, path + ": " + x.what());
	}
}

std::optional<std::uint64_t> read_u64_opt(const std::string &path)
{
	std::string s;
	if (read_file(path, s))
		return std::nullopt;
	return parse_u64(s);
}

bool is_dir(const std::string &path)
{
	struct stat st;
	return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Parses a decimal directory name, or -1.
int name_to_int(const char *s)
{
	if (!*s)
		return -1;
	long v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 0x7fffffff / 10)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return static_cast<int>(v);
}

// The ummunot fds of process pid.  Returns 0, or the errno of opening its
// fd directory.
int scan_process(const system_paths &p, int pid, dev_t rdev,
		 std::vector<client_stats> &out)
{
	std::string fddir = p.proc() + "/" + std::to_string(pid) + "/fd";
	unique_dir d(::opendir(fddir.c_str()));
	if (!d)
		return errno;
	std::vector<int> fds;
	while (struct dirent *de = ::readdir(d.get())) {
		int fd = name_to_int(de->d_name);
		if (fd < 0)
			continue;
		struct stat st;
		// stat() follows the magic link to the open file itself.
		if (::stat((fddir + "/" + de->d_name).c_str(), &st) != 0)
			continue;	// closed meanwhile, or not ours to see
		if (S_ISCHR(st.st_mode) && st.st_rdev == rdev)
			fds.push_back(fd);
	}
	std::sort(fds.begin(), fds.end());
	// The Slurm job of a task: readable by the process's owner and root,
	// like its fds (a failure leaves the column empty).
	std::string job;
	if (!fds.empty()) {
		std::string env;
		if (read_file(p.proc() + "/" + std::to_string(pid) + "/environ", env) == 0)
			job = slurm_job_of(env);
	}
	for (int fd : fds) {
		client_stats c;
		c.pid = pid;
		c.fd = fd;
		c.slurm_job = job;
		std::string path = p.proc() + "/" + std::to_string(pid) +
				   "/fdinfo/" + std::to_string(fd);
		std::string text;
		int e = read_file(path, text);
		if (e == ENOENT)
			continue;	// closed since the stat
		if (e) {
			c.error = errno_text(e);
			c.readable = false;
		} else {
			try {
				parse_fdinfo(text, c);
			} catch (const error &x) {
				throw error(x.code(), path + ": " + x.what());
			}
		}
		out.push_back(std::move(c));
	}
	return 0;
}

} // namespace

global_stats collect_global(const system_paths &p)
{
	if (!is_dir(p.misc()))
		throw error(EXIT_NOT_LOADED,
			    "the ummunot module is not loaded (no " + p.misc() +
			    "); load it with 'modprobe ummunot'");
	global_stats g;
	std::string s;
	if (read_file(p.module() + "/version", s) == 0)
		g.version = std::string(s.substr(0, s.find('\n')));
	std::string par = p.module() + "/parameters/";
	g.max_regions = read_u64_opt(par + "max_regions");
	g.max_ring_entries = read_u64_opt(par + "max_ring_entries");
	g.default_ring_entries = read_u64_opt(par + "default_ring_entries");

	std::string st = p.misc() + "/stats/";
	g.clients = read_u64(st + "clients");
	g.regions = read_u64(st + "regions");
	g.regions_registered = read_u64(st + "regions_registered");
	g.events = read_u64(st + "events");
	g.dropped = read_u64(st + "dropped");
	g.overflows = read_u64(st + "overflows");
	g.ring_high_water = read_u64(st + "ring_high_water");
	for (unsigned int t : event_types()) {
		g.delivered[t] = read_u64(st + "delivered_" + event_type_name(t));
		g.filtered[t] = read_u64(st + "filtered_" + event_type_name(t));
	}
	return g;
}

users_table collect_users(const system_paths &p)
{
	if (!is_dir(p.misc()))
		throw error(EXIT_NOT_LOADED,
			    "the ummunot module is not loaded (no " + p.misc() +
			    "); load it with 'modprobe ummunot'");
	users_table t;
	std::string par = p.module() + "/parameters/";
	t.max_user_memory = read_u64_opt(par + "max_user_memory");
	t.max_regions_per_mm = read_u64_opt(par + "max_regions_per_mm");

	std::string path = p.misc() + "/users", text;
	int e = read_file(path, text);
	if (e == EACCES || e == EPERM)
		throw error(EXIT_PERMISSION, path + ": " + errno_text(e) +
			    " (per-user use is shown to root only)");
	if (e == ENOENT)
		throw error(EXIT_FAILURE_OTHER, "this ummunot module has no per-user accounting (no " +
			    path + ")");
	if (e)
		throw error(EXIT_FAILURE_OTHER, path + ": " + errno_text(e));
	try {
		parse_users(text, t);
	} catch (const error &x) {
		throw error(EXIT_FAILURE_OTHER, path + ": " + x.what());
	}
	return t;
}

client_scan collect_clients(const system_paths &p, int pid)
{
	std::string devtext;
	int e = read_file(p.misc() + "/dev", devtext);
	if (e == ENOENT && !is_dir(p.misc()))
		throw error(EXIT_NOT_LOADED, "the ummunot module is not loaded (no " +
			    p.misc() + ")");
	if (e)
		throw error(EXIT_FAILURE_OTHER, p.misc() + "/dev: " + errno_text(e));
	auto [maj, min] = parse_devnum(devtext);
	dev_t rdev = makedev(maj, min);

	client_scan scan;
	if (pid > 0) {
		std::string pdir = p.proc() + "/" + std::to_string(pid);
		if (!is_dir(pdir))
			throw error(EXIT_NOT_CLIENT, "process " + std::to_string(pid) +
				    " does not exist");
		e = scan_process(p, pid, rdev, scan.clients);
		if (e == EACCES || e == EPERM)
			throw error(EXIT_PERMISSION, "permission denied reading the open files of process " +
				    std::to_string(pid) + " (" + pdir + "/fd): only its owner and root may");
		if (e == ENOENT)
			throw error(EXIT_NOT_CLIENT, "process " + std::to_string(pid) +
				    " does not exist");
		if (e)
			throw error(EXIT_FAILURE_OTHER, pdir + "/fd: " + errno_text(e));
		if (scan.clients.empty())
			throw error(EXIT_NOT_CLIENT, "process " + std::to_string(pid) +
				    " has no /dev/ummunot file open");
		for (const auto &c : scan.clients)
			if (!c.readable)
				throw error(EXIT_PERMISSION, "cannot read " + p.proc() + "/" +
					    std::to_string(pid) + "/fdinfo/" +
					    std::to_string(c.fd) + ": " + c.error);
		return scan;
	}

	unique_dir d(::opendir(p.proc().c_str()));
	if (!d)
		throw error(EXIT_FAILURE_OTHER, p.proc() + ": " + errno_text(errno));
	std::vector<int> pids;
	while (struct dirent *de = ::readdir(d.get())) {
		int n = name_to_int(de->d_name);
		if (n > 0)
			pids.push_back(n);
	}
	std::sort(pids.begin(), pids.end());
	for (int n : pids) {
		e = scan_process(p, n, rdev, scan.clients);
		if (e == EACCES || e == EPERM)
			scan.denied_pids.push_back(n);
		// ENOENT: the process exited meanwhile.
	}
	return scan;
}

} // namespace ummunot_stat
