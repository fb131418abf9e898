// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Cache hit cost (get + put) at 1..N threads: libummunot's registration
// cache vs UCX's ucs_rcache vs a mutex + std::map cache, over the same
// region set (1000 regions of 64 KiB, a guard page between neighbours so
// that nobody merges them), random hits, a registration backend that does
// nothing.  Google Benchmark; the variants are interleaved at random
// (--benchmark_enable_random_interleaving) and each is repeated, so the
// medians of one run can be compared as ratios.
//
// libummunot runs over the in-process fake device (lib/fake_device.hpp,
// linked into the benchmark only) when the host has no /dev/ummunot (this
// host kernel cannot load modules): the hit path never talks to the device,
// it only loads the ring's generation word.
//
// UCX must be told not to patch libc: scripts/bench exports
// UCX_MEM_EVENTS=no (checked below, the benchmark refuses to run without).
#include <benchmark/benchmark.h>

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <ummunot/ummunot.h>

#include "fake_device.hpp"
#include "internal.hpp"
#include "rcu.hpp"

extern "C" {
#include <ucm/api/ucm.h>
#include <ucs/memory/rcache.h>

#include "noop-rcache.h"
}

namespace {

constexpr std::size_t nr_regions = 1000;
constexpr std::size_t region_max = 64 * 1024;
constexpr std::size_t stride = region_max + 4096;	// guard page between
// 64 KiB, unless RLIMIT_MEMLOCK is too small for 1000 of them: the
// library never pins more than the soft limit, even for a backend that
// pins nothing, so the set would not fit and every get would evict.
// raise_memlock() picks the largest page multiple that fits (the hit path
// is the same: a search over 1000 entries); the JSON context says which.
std::size_t region_len = region_max;
constexpr std::size_t nr_picks = 1 << 14;		// per thread, power of two
constexpr int prot_rw = PROT_READ | PROT_WRITE;
constexpr int access_rw = 0x7;		// IBV_ACCESS_LOCAL|REMOTE_WRITE|REMOTE_READ

// One address space reservation shared by all variants.
struct arena {
	unsigned char *base = nullptr;
	std::size_t len = nr_regions * stride;

	arena()
	{
		void *p = ::mmap(nullptr, len, prot_rw,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			throw std::runtime_error(std::string("mmap: ") + std::strerror(errno));
		base = static_cast<unsigned char *>(p);
	}
	~arena() { ::munmap(base, len); }
	void *region(std::size_t i) const { return base + i * stride; }
};

arena &the_arena()
{
	static arena a;
	return a;
}

// Per-thread random region indices, the same sequence for every variant.
const std::vector<std::uint32_t> &picks(int thread)
{
	static std::vector<std::uint32_t> p[64];
	static std::once_flag once[64];
	std::call_once(once[thread], [thread] {
		std::mt19937 rng(1234 + thread);
		std::uniform_int_distribution<std::uint32_t> d(0, nr_regions - 1);
		p[thread].resize(nr_picks);
		for (auto &x : p[thread])
			x = d(rng);
	});
	return p[thread];
}

// Addresses within a region: the hit asks for 4 KiB at a random page.
inline void *target(std::uint32_t pick)
{
	auto *r = static_cast<unsigned char *>(the_arena().region(pick));
	return r + (pick % (region_len / 4096)) * 4096;
}

std::atomic<std::uint64_t> failures{0};

/* ---------------------------------------------------------------- */
/* libummunot                                                       */
/* ---------------------------------------------------------------- */

int noop_reg(void *, void *addr, size_t, int, void **mr, uint32_t *lkey,
	     uint32_t *rkey)
{
	*mr = addr;
	*lkey = *rkey = 1;
	return 0;
}

int noop_dereg(void *, void *) { return 0; }

const ummunot_backend_ops noop_ops = {noop_reg, noop_dereg};

ummunot_cache *umn_cache;

int umn_create(ummunot_cache **out, std::uint64_t max_entries)
{
	ummunot_cache_attr attr{};
	attr.max_entries = max_entries;
	if (::access(UMMUNOT_DEFAULT_DEVICE_PATH, R_OK | W_OK) == 0)
		return ummunot_cache_create_backend(&noop_ops, nullptr, &attr, out);
	ummunot::detail::fake_device::config cfg;
	cfg.max_regions = static_cast<std::uint32_t>(max_entries + 16);
	return ummunot::detail::cache_create_device(
		std::make_unique<ummunot::detail::fake_device>(cfg), &noop_ops,
		nullptr, &attr, out);
}

void umn_setup(const benchmark::State &)
{
	int r = umn_create(&umn_cache, 4 * nr_regions);
	if (r < 0) {
		std::fprintf(stderr, "cache-hit: ummunot cache: %s\n", std::strerror(-r));
		std::exit(1);
	}
	for (std::size_t i = 0; i < nr_regions; i++) {
		const ummunot_reg *reg;
		r = ummunot_cache_get(umn_cache, the_arena().region(i), region_len,
				      access_rw, &reg);
		if (r == 0)
			r = ummunot_cache_put(umn_cache, reg);
		if (r < 0) {
			std::fprintf(stderr, "cache-hit: ummunot populate: %s\n",
				     std::strerror(-r));
			std::exit(1);
		}
	}
}

void umn_teardown(const benchmark::State &)
{
	struct ummunot_cache_stats st{};
	ummunot_cache_stats(umn_cache, &st);
	// Every timed get must have been a hit: only the populate missed.
	if (st.misses != nr_regions || st.evictions != 0 || st.merges != 0) {
		std::fprintf(stderr, "cache-hit: ummunot: %llu misses, %llu evictions, "
			     "%llu merges (expected %zu, 0, 0)\n",
			     (unsigned long long)st.misses,
			     (unsigned long long)st.evictions,
			     (unsigned long long)st.merges, nr_regions);
		failures++;
	}
	ummunot_cache_destroy(umn_cache);
	umn_cache = nullptr;
}

void BM_ummunot(benchmark::State &state)
{
	const auto &p = picks(state.thread_index());
	std::size_t i = 0;
	std::uint64_t bad = 0;

	for (auto _ : state) {
		std::uint32_t k = p[i++ & (nr_picks - 1)];
		void *a = target(k);
		const ummunot_reg *reg;
		if (ummunot_cache_get(umn_cache, a, 4096, access_rw, &reg) < 0 ||
		    reg->addr > (std::uintptr_t)a) {
			bad++;
			continue;
		}
		ummunot_cache_put(umn_cache, reg);
	}
	state.SetItemsProcessed(state.iterations());
	if (bad)
		state.SkipWithError("ummunot_cache_get failed");
}

/* ---------------------------------------------------------------- */
/* UCX ucs_rcache                                                   */
/* ---------------------------------------------------------------- */

ucs_rcache_t *ucx_cache;

ucs_status_t ucx_create(ucs_rcache_t **out)
{
	const char *ev = std::getenv("UCX_MEM_EVENTS");
	if (!ev || std::strcmp(ev, "no") != 0) {
		std::fprintf(stderr, "cache-hit: set UCX_MEM_EVENTS=no (UCX must not "
			     "patch libc in this process)\n");
		std::exit(2);
	}
	ucs_status_t s = noop_rcache_create("bench", UCM_EVENT_VM_UNMAPPED, out);
	if (s != UCS_OK) {
		// UCX 1.13 refuses an event handler when events are off; the
		// cache itself (what a hit exercises) is the same without it.
		s = noop_rcache_create("bench", 0, out);
	}
	return s;
}

void ucx_setup(const benchmark::State &)
{
	ucs_status_t s = ucx_create(&ucx_cache);
	if (s != UCS_OK) {
		std::fprintf(stderr, "cache-hit: ucs_rcache_create: %d\n", (int)s);
		std::exit(1);
	}
	noop_rcache_regs = 0;
	for (std::size_t i = 0; i < nr_regions; i++) {
		ucs_rcache_region_t *r;
		s = ucs_rcache_get(ucx_cache, the_arena().region(i), region_len,
				   prot_rw, nullptr, &r);
		if (s != UCS_OK) {
			std::fprintf(stderr, "cache-hit: ucs_rcache_get: %d\n", (int)s);
			std::exit(1);
		}
		ucs_rcache_region_put(ucx_cache, r);
	}
}

void ucx_teardown(const benchmark::State &)
{
	if (noop_rcache_regs != nr_regions) {
		std::fprintf(stderr, "cache-hit: ucx: %llu registrations (expected %zu)\n",
			     (unsigned long long)noop_rcache_regs, nr_regions);
		failures++;
	}
	ucs_rcache_destroy(ucx_cache);
	ucx_cache = nullptr;
}

void BM_ucx_rcache(benchmark::State &state)
{
	const auto &p = picks(state.thread_index());
	std::size_t i = 0;
	std::uint64_t bad = 0;

	for (auto _ : state) {
		std::uint32_t k = p[i++ & (nr_picks - 1)];
		ucs_rcache_region_t *r;
		if (ucs_rcache_get(ucx_cache, target(k), 4096, prot_rw, nullptr, &r) != UCS_OK) {
			bad++;
			continue;
		}
		ucs_rcache_region_put(ucx_cache, r);
	}
	state.SetItemsProcessed(state.iterations());
	if (bad)
		state.SkipWithError("ucs_rcache_get failed");
}

/* ---------------------------------------------------------------- */
/* mutex + std::map                                                 */
/* ---------------------------------------------------------------- */

struct map_cache {
	struct ent {
		std::uintptr_t end;
		std::uint32_t refs;
		std::uint32_t lkey;
	};
	std::mutex mu;
	std::map<std::uintptr_t, ent> m;
	std::uint64_t regs = 0;

	ent *get(const void *addr, std::size_t len)
	{
		auto a = reinterpret_cast<std::uintptr_t>(addr);
		std::lock_guard<std::mutex> g(mu);
		auto it = m.upper_bound(a);
		if (it != m.begin()) {
			--it;
			if (it->second.end >= a + len) {
				it->second.refs++;
				return &it->second;
			}
		}
		// Miss: "register" page-aligned [a, a + len).
		std::uintptr_t s = a & ~std::uintptr_t(4095);
		std::uintptr_t e = (a + len + 4095) & ~std::uintptr_t(4095);
		regs++;
		auto r = m.emplace(s, ent{e, 1, 1});
		return &r.first->second;
	}
	void put(ent *e)
	{
		std::lock_guard<std::mutex> g(mu);
		e->refs--;
	}
};

std::unique_ptr<map_cache> mcache;

void map_setup(const benchmark::State &)
{
	mcache = std::make_unique<map_cache>();
	for (std::size_t i = 0; i < nr_regions; i++)
		mcache->put(mcache->get(the_arena().region(i), region_len));
}

void map_teardown(const benchmark::State &)
{
	if (mcache->regs != nr_regions) {
		std::fprintf(stderr, "cache-hit: map: %llu registrations (expected %zu)\n",
			     (unsigned long long)mcache->regs, nr_regions);
		failures++;
	}
	mcache.reset();
}

void BM_mutex_map(benchmark::State &state)
{
	const auto &p = picks(state.thread_index());
	std::size_t i = 0;

	for (auto _ : state) {
		std::uint32_t k = p[i++ & (nr_picks - 1)];
		mcache->put(mcache->get(target(k), 4096));
	}
	state.SetItemsProcessed(state.iterations());
}

void raise_memlock()
{
	struct rlimit rl;
	if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	// Root with CAP_SYS_RESOURCE may lift the hard limit too.
	struct rlimit want = {RLIM_INFINITY, RLIM_INFINITY};
	if (::setrlimit(RLIMIT_MEMLOCK, &want) == 0)
		return;
	rl.rlim_cur = rl.rlim_max;
	::setrlimit(RLIMIT_MEMLOCK, &rl);
	::getrlimit(RLIMIT_MEMLOCK, &rl);
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= nr_regions * region_max)
		return;
	// Leave half of the limit as headroom (put-back entries still count).
	region_len = (rl.rlim_cur / 2 / nr_regions) & ~std::size_t(4095);
	if (region_len < 4096) {
		std::fprintf(stderr, "cache-hit: RLIMIT_MEMLOCK is %llu bytes, too small "
			     "for %zu one-page regions\n",
			     (unsigned long long)rl.rlim_cur, nr_regions);
		std::exit(1);
	}
	std::fprintf(stderr, "cache-hit: RLIMIT_MEMLOCK is %llu bytes and cannot be "
		     "raised: regions of %zu bytes instead of %zu\n",
		     (unsigned long long)rl.rlim_cur, region_len, region_max);
}

/* ---------------------------------------------------------------- */
/* Parts of a hit, single thread, to explain the totals above       */
/* ---------------------------------------------------------------- */

// The library's read-side critical section (lib/rcu.hpp), as a hit takes
// it, after a cache exists (which registers for membarrier and allocates
// the per-CPU slots).
void BM_part_rcu_read_lock_unlock(benchmark::State &state)
{
	ummunot_cache *c;
	if (umn_create(&c, 16) < 0) {
		state.SkipWithError("ummunot cache");
		return;
	}
	for (auto _ : state) {
		unsigned int t = ummunot::detail::rcu_read_lock();
		benchmark::ClobberMemory();
		ummunot::detail::rcu_read_unlock(t);
	}
	ummunot_cache_destroy(c);
}

// The reference count: acquire CAS on get, acq_rel fetch_sub on put.
void BM_part_refcount_cas_sub(benchmark::State &state)
{
	static std::atomic<std::uint64_t> refs{0};
	for (auto _ : state) {
		std::uint64_t v = refs.load(std::memory_order_relaxed);
		while (!refs.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
						   std::memory_order_relaxed))
			;
		refs.fetch_sub(1, std::memory_order_acq_rel);
	}
}

// One relaxed atomic add (a statistics counter).
void BM_part_relaxed_fetch_add(benchmark::State &state)
{
	static std::atomic<std::uint64_t> c{0};
	for (auto _ : state)
		c.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

BENCHMARK(BM_part_rcu_read_lock_unlock);
BENCHMARK(BM_part_refcount_cas_sub);
BENCHMARK(BM_part_relaxed_fetch_add);
BENCHMARK(BM_ummunot)->Setup(umn_setup)->Teardown(umn_teardown)
	->ThreadRange(1, 4)->UseRealTime();
BENCHMARK(BM_ucx_rcache)->Setup(ucx_setup)->Teardown(ucx_teardown)
	->ThreadRange(1, 4)->UseRealTime();
BENCHMARK(BM_mutex_map)->Setup(map_setup)->Teardown(map_teardown)
	->ThreadRange(1, 4)->UseRealTime();

int main(int argc, char **argv)
{
	raise_memlock();
	benchmark::AddCustomContext("regions", std::to_string(nr_regions));
	benchmark::AddCustomContext("region_len", std::to_string(region_len));
	benchmark::AddCustomContext("ummunot_device",
		::access(UMMUNOT_DEFAULT_DEVICE_PATH, R_OK | W_OK) == 0 ?
		"/dev/ummunot" : "in-process fake device");
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	if (failures) {
		std::fprintf(stderr, "cache-hit: %llu consistency check(s) failed\n",
			     (unsigned long long)failures.load());
		return 1;
	}
	return 0;
}
