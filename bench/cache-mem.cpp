// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Library bytes per cached registration: the malloc heap's growth
// (mallinfo2: in-use arena bytes + mmap'd chunks) while a cache holds N
// registrations (N = 10^4 by default), for libummunot, UCX's
// ucs_rcache and a mutex + std::map cache.  Prints one JSON object.
//
// libummunot is measured twice: right after the N misses ("transient":
// retired index nodes and entries still wait for their grace period) and after
// ummunot_cache_flush() with every entry held, which evicts nothing and
// frees what was retired ("steady").  Over /dev/ummunot (the VM) the
// device costs the process nothing; over the in-process fake device
// (host) the fake's own per-region bytes are measured alone and
// subtracted.  RLIMIT_MEMLOCK must allow N pages: run as root in the VM.
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <ummunot/ummunot.h>

#include "fake_device.hpp"
#include "internal.hpp"

#include "noop-rcache.h"

namespace {

double now_ns()
{
	return std::chrono::duration<double, std::nano>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr std::size_t stride = 8192;	// one page cached, one page gap

std::int64_t heap_bytes()
{
	struct mallinfo2 m = mallinfo2();
	return static_cast<std::int64_t>(m.uordblks + m.hblkhd);
}

[[noreturn]] void die(const char *what, int err)
{
	std::fprintf(stderr, "cache-mem: %s: %s\n", what, std::strerror(err));
	std::exit(1);
}

int noop_reg(void *, void *addr, size_t, int, void **mr, uint32_t *lkey, uint32_t *rkey)
{
	*mr = addr;
	*lkey = *rkey = 1;
	return 0;
}

int noop_dereg(void *, void *) { return 0; }

const ummunot_backend_ops noop_ops = {noop_reg, noop_dereg};

} // namespace

int main(int argc, char **argv)
{
	// cache-mem [--quick] [--entries=N]; --quick changes nothing here (the
	// default, 10^4 entries, already takes about half a minute under TCG).
	std::size_t n = 10000;
	for (int i = 1; i < argc; i++) {
		if (std::strncmp(argv[i], "--entries=", 10) == 0)
			n = std::strtoul(argv[i] + 10, nullptr, 10);
		else if (std::strcmp(argv[i], "--quick") != 0) {
			std::fprintf(stderr, "usage: cache-mem [--quick] [--entries=N]\n");
			return 2;
		}
	}
	if (n == 0)
		n = 1;
	const bool real = ::access(UMMUNOT_DEFAULT_DEVICE_PATH, R_OK | W_OK) == 0;

	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	if (::setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
		::getrlimit(RLIMIT_MEMLOCK, &rl);
		if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (n + 16) * 4096) {
			std::fprintf(stderr, "cache-mem: RLIMIT_MEMLOCK is %llu bytes, %zu "
				     "entries need %zu (run as root, e.g. in the VM)\n",
				     (unsigned long long)rl.rlim_cur, n, (n + 16) * 4096);
			return 77;
		}
	}
	// Disable the heap's own trimming so that deltas are allocations only.
	mallopt(M_TRIM_THRESHOLD, -1);
	mallopt(M_MMAP_THRESHOLD, 1 << 30);

	void *p = ::mmap(nullptr, n * stride, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		die("mmap", errno);
	auto *base = static_cast<unsigned char *>(p);
	std::vector<const ummunot_reg *> held(n);
	std::vector<ucs_rcache_region_t *> uheld(n);
	std::vector<ummunot_region> fregs(n);

	// 1. The fake device alone (host only), to subtract.
	double fake_per = 0;
	if (!real) {
		ummunot::detail::fake_device::config cfg;
		cfg.max_regions = static_cast<std::uint32_t>(n + 16);
		std::int64_t h0 = heap_bytes();
		ummunot_monitor *mon;
		int r = ummunot::detail::monitor_open_device(
			std::make_unique<ummunot::detail::fake_device>(cfg), nullptr, &mon);
		if (r < 0)
			die("monitor_open_device", -r);
		std::int64_t h1 = heap_bytes();
		for (std::size_t i = 0; i < n; i++)
			fregs[i] = ummunot_region{(std::uintptr_t)(base + i * stride), 4096, i, 0, 0, 0};
		for (std::size_t i = 0; i < n; i += 4096) {
			unsigned int c = static_cast<unsigned int>(std::min<std::size_t>(4096, n - i));
			r = ummunot_monitor_register(mon, fregs.data() + i, c, nullptr);
			if (r < 0)
				die("ummunot_monitor_register", -r);
		}
		fake_per = double(heap_bytes() - h1) / n;
		ummunot_monitor_close(mon);
		(void)h0;
	}

	// 2. libummunot.
	ummunot_cache_attr attr{};
	attr.max_entries = n + 1;
	ummunot_cache *c;
	int r;
	if (real) {
		r = ummunot_cache_create_backend(&noop_ops, nullptr, &attr, &c);
	} else {
		ummunot::detail::fake_device::config cfg;
		cfg.max_regions = static_cast<std::uint32_t>(n + 16);
		r = ummunot::detail::cache_create_device(
			std::make_unique<ummunot::detail::fake_device>(cfg), &noop_ops,
			nullptr, &attr, &c);
	}
	if (r < 0)
		die("cache create", -r);
	std::int64_t u0 = heap_bytes();
	double tu = now_ns();
	for (std::size_t i = 0; i < n; i++) {
		r = ummunot_cache_get(c, base + i * stride, 4096, 1, &held[i]);
		if (r < 0)
			die("ummunot_cache_get", -r);
	}
	tu = (now_ns() - tu) / n;
	double umn_transient = double(heap_bytes() - u0) / n - fake_per;
	r = ummunot_cache_flush(c);
	if (r != 0)
		die("ummunot_cache_flush evicted held entries", EINVAL);
	double umn_steady = double(heap_bytes() - u0) / n - fake_per;
	struct ummunot_cache_stats st{};
	ummunot_cache_stats(c, &st);
	if (st.entries != n || st.misses != n)
		die("ummunot: entries/misses != N", EINVAL);
	for (auto *reg : held)
		ummunot_cache_put(c, reg);
	ummunot_cache_destroy(c);

	// 3. UCX.
	ucs_rcache_t *uc;
	if (noop_rcache_create("bench", 0, &uc) != UCS_OK)
		die("ucs_rcache_create", EINVAL);
	std::int64_t x0 = heap_bytes();
	double tx = now_ns();
	for (std::size_t i = 0; i < n; i++)
		if (ucs_rcache_get(uc, base + i * stride, 4096, PROT_READ | PROT_WRITE,
				   nullptr, &uheld[i]) != UCS_OK)
			die("ucs_rcache_get", EINVAL);
	tx = (now_ns() - tx) / n;
	double ucx_per = double(heap_bytes() - x0) / n;
	for (auto *reg : uheld)
		ucs_rcache_region_put(uc, reg);
	ucs_rcache_destroy(uc);

	// 4. mutex + std::map (node: key + {end, refs, lkey}).
	struct ent {
		std::uintptr_t end;
		std::uint32_t refs, lkey;
	};
	std::int64_t m0 = heap_bytes();
	double map_per;
	{
		std::map<std::uintptr_t, ent> m;
		for (std::size_t i = 0; i < n; i++)
			m.emplace((std::uintptr_t)(base + i * stride),
				  ent{(std::uintptr_t)(base + i * stride + 4096), 1, 1});
		map_per = double(heap_bytes() - m0) / n;
	}

	std::printf("{\"bench\":\"cache-mem\",\"entries\":%zu,\"device\":\"%s\","
		    "\"fake_device_bytes_per_region\":%.1f,"
		    "\"ummunot_bytes_per_entry\":%.1f,"
		    "\"ummunot_transient_bytes_per_entry\":%.1f,"
		    "\"ucx_rcache_bytes_per_entry\":%.1f,"
		    "\"mutex_map_bytes_per_entry\":%.1f,"
		    "\"ummunot_miss_ns\":%.0f,\"ucx_miss_ns\":%.0f}\n",
		    n, real ? "/dev/ummunot" : "fake", fake_per, umn_steady,
		    umn_transient, ucx_per, map_per, tu, tx);
	::munmap(p, n * stride);
	return 0;
}
