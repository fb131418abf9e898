// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Miss and invalidation cost against the number of cached entries n
// (10^3 .. 10^6), libummunot and UCX's ucs_rcache in the same process, no-op
// registration backend (issue 11).  Prints one JSON object.
//
// For each n, both caches are filled with n one-page entries (one page
// cached, one page gap: nothing merges; the fill's time per miss is
// recorded too), then rounds alternate between the two caches.  A round:
// M misses at fresh addresses (get, held: the cache grows from n to n + M),
// then M invalidations of those entries, one call each
// (ummunot_cache_put + ummunot_cache_invalidate;
// ucs_rcache_region_invalidate + ucs_rcache_region_put), back to n.
// Medians of the rounds; CPU time of the thread (wall time of the misses
// too).  libummunot runs over /dev/ummunot when it exists (the VM), else
// over the in-process fake device; UCX with UCX_MEM_EVENTS=no (no libc
// patching: the entries are never really unmapped here).
//
// libummunot never pins more than its budget, even with a no-op backend,
// and the process-wide budget follows RLIMIT_MEMLOCK: the caches here get a
// budget of their own, large enough for every entry, so that no
// capability is needed (this host's containers cannot raise the limit).
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <ummunot/ummunot.h>

#include "fake_device.hpp"
#include "internal.hpp"

#include "noop-rcache.h"

namespace {

// The thread's CPU time: on a shared 2-core host (load 5-15 from other
// builds and VMs) wall time is mostly time spent preempted.  Nothing timed
// here sleeps, except a grace period's wait, which is counted at its CPU
// cost (wall times are printed too).
double now_ns()
{
	struct timespec ts;
	::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

double wall_ns()
{
	return std::chrono::duration<double, std::nano>(
		std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr std::size_t stride = 8192;	// one page cached, one page gap

[[noreturn]] void die(const char *what, int err)
{
	std::fprintf(stderr, "cache-scale: %s: %s\n", what, std::strerror(err));
	std::exit(1);
}

int noop_reg(void *, void *addr, size_t, int, void *, void **mr, uint32_t *lkey,
	     uint32_t *rkey)
{
	*mr = addr;
	*lkey = *rkey = 1;
	return 0;
}

int noop_dereg(void *, void *, void *) { return 0; }

const ummunot_cache_ops noop_ops = {sizeof(ummunot_cache_ops), noop_reg, noop_dereg};

void ucx_inv_done(void *) {}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

struct point {
	std::size_t n;
	double u_fill, u_miss, u_inval, x_fill, x_miss, x_inval;
	double u_miss_wall, x_miss_wall;
};

} // namespace

int main(int argc, char **argv)
{
	std::size_t minn = 1000, maxn = 1000000, m = 1000;
	unsigned int rounds = 5;
	for (int i = 1; i < argc; i++) {
		if (std::strncmp(argv[i], "--max=", 6) == 0)
			maxn = std::strtoul(argv[i] + 6, nullptr, 10);
		else if (std::strncmp(argv[i], "--min=", 6) == 0)
			minn = std::strtoul(argv[i] + 6, nullptr, 10);
		else if (std::strcmp(argv[i], "--quick") == 0) {
			maxn = std::min<std::size_t>(maxn, 100000);
			rounds = 3;
		} else {
			std::fprintf(stderr, "usage: cache-scale [--quick] [--min=N] [--max=N]\n");
			return 2;
		}
	}
	const bool real = ::access(UMMUNOT_DEFAULT_DEVICE_PATH, R_OK | W_OK) == 0;

	// As much as it can (UCX does not look at it; nothing is pinned).
	struct rlimit rl = {RLIM_INFINITY, RLIM_INFINITY};
	(void)::setrlimit(RLIMIT_MEMLOCK, &rl);
	double load[3] = {0, 0, 0};
	if (::getloadavg(load, 3) < 0)
		load[0] = load[1] = load[2] = -1;

	const std::size_t span = maxn + m;
	void *p = ::mmap(nullptr, span * stride, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		die("mmap", errno);
	auto *base = static_cast<unsigned char *>(p);
	auto addr = [base](std::size_t i) { return base + i * stride; };

	std::vector<point> pts;
	std::vector<const ummunot_reg *> held(m);
	std::vector<ucs_rcache_region_t *> uheld(m);
	for (std::size_t n = minn; n <= maxn; n *= 10) {
		point pt{};
		pt.n = n;

		// libummunot
		ummunot_budget *bud;
		int r = ummunot_budget_create(std::uint64_t(n + m + 16) * 4096, &bud);
		if (r < 0)
			die("ummunot_budget_create", -r);
		ummunot_cache_config cc{};
		cc.size = sizeof(cc);
		cc.max_entries = n + m + 16;
		cc.budget = bud;
		ummunot_cache *c;
		if (real) {
			r = ummunot_cache_create_ops(&noop_ops, nullptr, &cc, &c);
		} else {
			ummunot::detail::fake_device::config cfg;
			cfg.max_regions = static_cast<std::uint32_t>(n + m + 32);
			r = ummunot::detail::cache_create_device_ops(
				std::make_unique<ummunot::detail::fake_device>(cfg), &noop_ops,
				nullptr, &cc, &c);
		}
		if (r < 0)
			die("cache create", -r);
		double t = now_ns();
		for (std::size_t i = 0; i < n; i++) {
			const ummunot_reg *reg;
			if ((r = ummunot_cache_get(c, addr(i), 4096, 1, &reg)) < 0)
				die("ummunot_cache_get (fill)", -r);
			ummunot_cache_put(c, reg);
		}
		pt.u_fill = (now_ns() - t) / n;

		// UCX
		ucs_rcache_t *uc;
		if (noop_rcache_create("bench", 0, &uc) != UCS_OK)
			die("ucs_rcache_create", EINVAL);
		t = now_ns();
		for (std::size_t i = 0; i < n; i++) {
			ucs_rcache_region_t *reg;
			if (ucs_rcache_get(uc, addr(i), 4096, PROT_READ | PROT_WRITE, nullptr,
					   &reg) != UCS_OK)
				die("ucs_rcache_get (fill)", EINVAL);
			ucs_rcache_region_put(uc, reg);
		}
		pt.x_fill = (now_ns() - t) / n;

		std::vector<double> um, ui, xm, xi, umw, xmw;
		for (unsigned int rd = 0; rd < rounds; rd++) {
			// The order alternates: neither always runs first.
			for (int which = 0; which < 2; which++) {
				if ((which + rd) % 2 == 0) {
					double w = wall_ns();
					t = now_ns();
					for (std::size_t i = 0; i < m; i++)
						if ((r = ummunot_cache_get(c, addr(n + i), 4096, 1,
									   &held[i])) < 0)
							die("ummunot_cache_get", -r);
					double t2 = now_ns();
					umw.push_back((wall_ns() - w) / m);
					um.push_back((t2 - t) / m);
					for (std::size_t i = 0; i < m; i++) {
						ummunot_cache_put(c, held[i]);
						if (ummunot_cache_invalidate(c, addr(n + i), 4096) != 1)
							die("ummunot_cache_invalidate", EINVAL);
					}
					ui.push_back((now_ns() - t2) / m);
				} else {
					double w = wall_ns();
					t = now_ns();
					for (std::size_t i = 0; i < m; i++)
						if (ucs_rcache_get(uc, addr(n + i), 4096,
								   PROT_READ | PROT_WRITE, nullptr,
								   &uheld[i]) != UCS_OK)
							die("ucs_rcache_get", EINVAL);
					double t2 = now_ns();
					xmw.push_back((wall_ns() - w) / m);
					xm.push_back((t2 - t) / m);
					for (std::size_t i = 0; i < m; i++) {
						ucs_rcache_region_invalidate(uc, uheld[i], ucx_inv_done,
									     nullptr);
						ucs_rcache_region_put(uc, uheld[i]);
					}
					xi.push_back((now_ns() - t2) / m);
				}
			}
		}
		pt.u_miss = median(um);
		pt.u_inval = median(ui);
		pt.x_miss = median(xm);
		pt.x_inval = median(xi);
		pt.u_miss_wall = median(umw);
		pt.x_miss_wall = median(xmw);

		struct ummunot_cache_stats st{};
		ummunot_cache_stats(c, &st);
		if (st.entries != n || st.misses != n + std::uint64_t(rounds) * m)
			die("ummunot: entries/misses do not add up", EINVAL);
		ummunot_cache_destroy(c);
		ummunot_budget_destroy(bud);
		ucs_rcache_destroy(uc);
		pts.push_back(pt);
		std::fprintf(stderr,
			     "cache-scale: n=%zu miss %.0f ns (UCX %.0f), invalidate %.0f ns "
			     "(UCX %.0f), fill %.0f ns/miss (UCX %.0f)\n",
			     n, pt.u_miss, pt.x_miss, pt.u_inval, pt.x_inval, pt.u_fill, pt.x_fill);
	}

	std::printf("{\"bench\":\"cache-scale\",\"device\":\"%s\",\"misses_per_round\":%zu,"
		    "\"rounds\":%u,\"load\":\"%.2f %.2f %.2f\",\"points\":[",
		    real ? "/dev/ummunot" : "fake", m, rounds, load[0], load[1], load[2]);
	for (std::size_t i = 0; i < pts.size(); i++)
		std::printf("%s{\"n\":%zu,\"ummunot_miss_ns\":%.1f,\"ucx_miss_ns\":%.1f,"
			    "\"ummunot_inval_ns\":%.1f,\"ucx_inval_ns\":%.1f,"
			    "\"ummunot_fill_ns\":%.1f,\"ucx_fill_ns\":%.1f,"
			    "\"ummunot_miss_wall_ns\":%.1f,\"ucx_miss_wall_ns\":%.1f}",
			    i ? "," : "", pts[i].n, pts[i].u_miss, pts[i].x_miss, pts[i].u_inval,
			    pts[i].x_inval, pts[i].u_fill, pts[i].x_fill, pts[i].u_miss_wall,
			    pts[i].x_miss_wall);
	std::printf("]}\n");
	::munmap(p, span * stride);
	return 0;
}
