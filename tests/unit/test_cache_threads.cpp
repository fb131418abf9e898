// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Any thread, any time: gets and puts from pthread key destructors and C++
// thread_local destructors (MPI per-thread cleanup), in a process whose
// application also uses liburcu itself, in either order.  Afterwards grace
// periods still end: misses that reclaim memory (synchronize_rcu under the
// cache's lock) complete.  A wedge shows as the test's timeout.
#include "catch.hpp"

#include <pthread.h>
#include <thread>
#include <urcu/urcu-memb.h>
#include <vector>

#include "helpers.hpp"

using namespace test;

namespace {

fixture *the_fixture;
std::atomic<int> destructor_gets{0}, destructor_errors{0};

void get_put(std::uint64_t a)
{
	const ummunot_reg *r = nullptr;
	int e = ummunot_cache_get(the_fixture->cache, at(a), PAGE, 1, &r);
	if (e || ummunot_cache_put(the_fixture->cache, r))
		destructor_errors++;
	else
		destructor_gets++;
}

void key_destructor(void *arg)
{
	get_put(reinterpret_cast<std::uintptr_t>(arg));
}

struct tls_user {
	std::uint64_t addr = 0;
	~tls_user()
	{
		if (addr)
			get_put(addr);
	}
};
thread_local tls_user tls;

// Misses and invalidations enough to run many grace periods.
void churn(fixture &f, int n)
{
	for (int i = 0; i < n; i++) {
		std::uint64_t a = BASE + 2 * PAGE * (1000 + i % 200);
		const ummunot_reg *r = f.get(a, PAGE);
		REQUIRE(r);
		ummunot_cache_put(f.cache, r);
		f.fake->invalidate(a, a + PAGE, UMMUNOT_EVENT_UNMAP);
	}
	REQUIRE(ummunot_cache_flush(f.cache) >= 0);
}

} // namespace

TEST_CASE("get/put from pthread key and thread_local destructors", "[threads]")
{
	fixture f;
	the_fixture = &f;
	pthread_key_t key;
	REQUIRE(pthread_key_create(&key, key_destructor) == 0);
	destructor_gets = 0;
	destructor_errors = 0;

	std::vector<std::thread> th;
	for (int t = 0; t < 16; t++)
		th.emplace_back([&, t] {
			std::uint64_t a = BASE + 2 * PAGE * t;
			get_put(a);	// the thread uses the cache first...
			pthread_setspecific(key, reinterpret_cast<void *>(a));
			tls.addr = a + PAGE * 64;	// ...and again while exiting
		});
	for (auto &t : th)
		t.join();
	// Threads that first touch the cache in their exit path.
	th.clear();
	for (int t = 0; t < 16; t++)
		th.emplace_back([&, t] {
			pthread_setspecific(key, reinterpret_cast<void *>(BASE + 2 * PAGE * t));
		});
	for (auto &t : th)
		t.join();
	CHECK(destructor_errors == 0);
	CHECK(destructor_gets == 16 * 3 + 16);	// body, key, thread_local; key only
	churn(f, 2000);
	pthread_key_delete(key);
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
	the_fixture = nullptr;
}

TEST_CASE("an application using liburcu-memb itself, registered before or after", "[threads]")
{
	fixture f;
	std::atomic<int> bad{0};
	auto use = [&](int t) {
		for (int i = 0; i < 200; i++) {
			const ummunot_reg *r = f.get(BASE + 2 * PAGE * ((t * 7 + i) % 64), PAGE);
			if (!r) {
				bad++;
				continue;
			}
			ummunot_cache_put(f.cache, r);
		}
	};
	std::vector<std::thread> th;
	for (int t = 0; t < 4; t++)
		th.emplace_back([&, t] {
			if (t % 2) {
				urcu_memb_register_thread();	// the application's own use
				use(t);
			} else {
				use(t);				// ours first
				urcu_memb_register_thread();
			}
			urcu_memb_read_lock();
			urcu_memb_read_unlock();
			urcu_memb_unregister_thread();
			use(t);
		});
	for (auto &t : th)
		t.join();
	urcu_memb_synchronize_rcu();
	CHECK(bad == 0);
	churn(f, 500);
}
