// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Out of memory at every allocation: this test binary replaces operator
// new; an armed countdown makes the Nth allocation of the calling thread
// fail.  For each operation (a miss that merges, event processing with an
// overflow and resync, flush, invalidate, an uncached get) the walk fails
// allocation 1, 2, ... until the operation runs without reaching the
// countdown.  After every failure: the call returned 0 or -ENOMEM (no
// exception), the cache's invariants hold, nothing stale is handed out, and
// at destroy every registration was deregistered exactly once (ASan's leak
// checker covers memory).
#include "catch.hpp"

#include <cstdlib>
#include <new>

#include "helpers.hpp"

// These are the replacement allocation functions themselves: gcc's
// new/delete pairing check cannot know that free() is their counterpart.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

namespace {

thread_local long countdown = 0;	// 0: off; else fail when it reaches 0
thread_local bool fired = false;

void *alloc(std::size_t n, std::size_t align)
{
	if (countdown > 0 && --countdown == 0) {
		fired = true;
		return nullptr;
	}
	if (n == 0)
		n = 1;
	if (align <= alignof(std::max_align_t))
		return std::malloc(n);
	return std::aligned_alloc(align, (n + align - 1) / align * align);
}

} // namespace

void *operator new(std::size_t n)
{
	if (void *p = alloc(n, 0))
		return p;
	throw std::bad_alloc();
}
void *operator new[](std::size_t n) { return operator new(n); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return alloc(n, 0); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return alloc(n, 0); }
void *operator new(std::size_t n, std::align_val_t a)
{
	if (void *p = alloc(n, static_cast<std::size_t>(a)))
		return p;
	throw std::bad_alloc();
}
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept
{
	return alloc(n, static_cast<std::size_t>(a));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace test;

namespace {

struct armed {
	explicit armed(long n)
	{
		fired = false;
		countdown = n;
	}
	~armed() { countdown = 0; }
};

// A cache with some history: entries next to each other (a miss merges),
// one held, and an invalidation queued in the ring but not yet processed.
struct scene {
	fixture f;
	const ummunot_reg *held = nullptr;
	std::uint64_t clock_at_unmap = 0;

	explicit scene(ummunot_cache_attr a = {}) : f(a)
	{
		for (int i = 0; i < 6; i++) {
			const ummunot_reg *r = f.get(BASE + 4 * PAGE * i, PAGE);
			REQUIRE(r);
			ummunot_cache_put(f.cache, r);
		}
		held = f.get(BASE + 100 * PAGE, PAGE);
		REQUIRE(held);
		clock_at_unmap = f.be.clock.load();
		f.fake->invalidate(BASE + 8 * PAGE, BASE + 9 * PAGE, UMMUNOT_EVENT_UNMAP);
	}

	// Nothing the invalidation hit is handed out again; the cache works.
	void check_after()
	{
		REQUIRE(ummunot::detail::cache_check(f.cache) == 0);
		const ummunot_reg *r = f.get(BASE + 8 * PAGE, PAGE);
		REQUIRE(r);
		CHECK(rec(r)->clock >= clock_at_unmap);
		CHECK(rec(r)->deregs == 0);
		ummunot_cache_put(f.cache, r);
		ummunot_cache_put(f.cache, held);
		REQUIRE(ummunot::detail::cache_check(f.cache) == 0);
		ummunot_cache_destroy(f.cache);
		f.cache = nullptr;
		CHECK(f.be.live() == 0);
		CHECK(f.be.all_deregistered_once());
	}
};

// Walks op over every allocation it makes; op returns the C API's result.
template <class Setup, class Op>
void walk(const char *what, Setup setup, Op op)
{
	long n = 1;
	for (; n < 10000; n++) {
		auto s = setup();
		int r;
		bool hit;
		{
			armed a(n);
			r = op(*s);
			hit = fired;
		}
		INFO(what << ": allocation " << n << " failed, call returned " << r);
		if (hit)
			CHECK((r >= 0 || r == -ENOMEM));
		else
			CHECK(r >= 0);
		s->check_after();
		if (!hit)
			break;
	}
	INFO(what);
	CHECK(n > 1);		// at least one allocation was failed
	CHECK(n < 10000);
}

} // namespace

TEST_CASE("out of memory at each allocation of a merging miss", "[oom]")
{
	walk("get (miss, merge)", [] { return std::make_unique<scene>(); }, [](scene &s) {
		const ummunot_reg *r = nullptr;
		// Adjacent to the entry at 4 PAGE: merges with it.
		int e = ummunot_cache_get(s.f.cache, at(BASE + 5 * PAGE), PAGE, 1, &r);
		if (!e)
			ummunot_cache_put(s.f.cache, r);
		return e;
	});
}

TEST_CASE("out of memory at each allocation of event processing with resync", "[oom]")
{
	auto setup = [] {
		ummunot_cache_attr a{};
		a.ring_entries = 64;
		auto s = std::make_unique<scene>(a);
		// Overflow the ring: the next poll resyncs and drops everything.
		for (int i = 0; i < 200; i++)
			s->f.fake->invalidate(BASE + 4 * PAGE * (i % 6), BASE + 4 * PAGE * (i % 6) + PAGE,
					      UMMUNOT_EVENT_CLEAR);
		return s;
	};
	walk("poll (overflow)", setup, [](scene &s) { return ummunot_cache_poll(s.f.cache); });
	walk("poll", [] { return std::make_unique<scene>(); },
	     [](scene &s) { return ummunot_cache_poll(s.f.cache); });
}

TEST_CASE("out of memory at each allocation of flush, invalidate and a final put", "[oom]")
{
	walk("flush", [] { return std::make_unique<scene>(); },
	     [](scene &s) { return ummunot_cache_flush(s.f.cache); });
	walk("invalidate", [] { return std::make_unique<scene>(); }, [](scene &s) {
		return ummunot_cache_invalidate(s.f.cache, at(BASE), 12 * PAGE);
	});
	walk("put (last user of a dead entry)", [] { return std::make_unique<scene>(); },
	     [](scene &s) {
		     const ummunot_reg *r = s.f.get(BASE + 20 * PAGE, PAGE);
		     if (!r)
			     return -ENOMEM;
		     s.f.fake->invalidate(BASE + 20 * PAGE, BASE + 21 * PAGE, UMMUNOT_EVENT_UNMAP);
		     ummunot_cache_poll(s.f.cache);
		     return ummunot_cache_put(s.f.cache, r);
	     });
}
