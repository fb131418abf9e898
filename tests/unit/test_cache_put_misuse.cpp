// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// put() misuse is refused without side effects: a put of a registration
// nobody holds returns -EINVAL with one failed CAS (no transient count that
// event processing could see), a put into another cache returns -EINVAL
// and changes neither cache.
#include "catch.hpp"

#include <memory>

#include <csignal>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "helpers.hpp"
#include "rcu.hpp"	// the library's read lock (with its TSan annotation)

using namespace test;

TEST_CASE("put of a registration not held: EINVAL, nothing changes", "[put]")
{
	fixture f;
	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	REQUIRE(ummunot_cache_put(f.cache, r) == 0);
	CHECK(ummunot_cache_put(f.cache, r) == -EINVAL);
	CHECK(ummunot_cache_put(f.cache, nullptr) == -EINVAL);
	CHECK(ummunot_cache_put(nullptr, r) == -EINVAL);
	CHECK(f.be.deregs == 0);
	CHECK(f.get(BASE, PAGE) == r);		// still cached, still usable
	ummunot_cache_put(f.cache, r);
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
}

TEST_CASE("put into the wrong cache: EINVAL, neither cache changes", "[put]")
{
	fixture f, g;
	const ummunot_reg *r = f.get(BASE, PAGE);
	REQUIRE(r);
	auto before = g.stats();
	CHECK(ummunot_cache_put(g.cache, r) == -EINVAL);
	auto after = g.stats();
	CHECK(after.pinned_bytes == before.pinned_bytes);
	CHECK(after.deregistrations == before.deregistrations);
	CHECK(f.be.deregs == 0);
	CHECK(ummunot_cache_put(f.cache, r) == 0);	// the real owner's put works
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
	CHECK(ummunot::detail::cache_check(g.cache) == 0);
}

TEST_CASE("bogus puts racing with invalidations never leave a stale entry published",
	  "[put]")
{
	fixture f;
	std::atomic<bool> stop{false};
	// Round n: target is the registration to put bogusly.  The bogus
	// thread puts it only inside an RCU read-side critical section (the
	// library's own flavour), so the entry's memory, retired by the
	// invalidation, cannot be freed under it: a put after reclaim would
	// be undefined (documented), not what this test is about.
	std::atomic<const ummunot_reg *> target{nullptr};
	std::atomic<long> round{0}, started{0};
	std::atomic<long> einval{0}, other{0};

	std::thread bogus([&] {
		long done = 0;
		while (!stop.load()) {
			long n = round.load();
			if (n == done) {
				std::this_thread::yield();
				continue;
			}
			unsigned int rt = ummunot::detail::rcu_read_lock();
			const ummunot_reg *t = target.load();
			started = n;
			for (int k = 0; k < 200 && t; k++) {
				int e = ummunot_cache_put(f.cache, t);
				if (e == -EINVAL)
					einval++;
				else
					other++;
			}
			ummunot::detail::rcu_read_unlock(rt);
			done = n;
		}
	});
	int stale = 0;
	for (long i = 1; i <= 2000; i++) {
		const ummunot_reg *r = f.get(BASE, PAGE);
		REQUIRE(r);
		void *old_mr = r->mr;
		REQUIRE(ummunot_cache_put(f.cache, r) == 0);
		target = r;		// held by nobody now
		round = i;
		while (started.load() != i)
			std::this_thread::yield();
		// "munmap returned" while the bogus puts run: the next get
		// must not hand out r.
		f.fake->invalidate(BASE, BASE + PAGE, UMMUNOT_EVENT_UNMAP);
		REQUIRE(ummunot_cache_poll(f.cache) >= 0);
		target = nullptr;
		const ummunot_reg *n = f.get(BASE, PAGE);
		REQUIRE(n);
		if (n->mr == old_mr)
			stale++;
		CHECK(static_cast<test::mr_record *>(old_mr)->deregs == 1);
		REQUIRE(ummunot_cache_put(f.cache, n) == 0);
	}
	stop = true;
	bogus.join();
	CHECK(stale == 0);
	CHECK(other == 0);
	CHECK(einval > 0);
	CHECK(ummunot::detail::cache_check(f.cache) == 0);
}

// put() of something that is not a registration: the caller's own struct
// ummunot_reg (zeroed, or filled with the caller's unaligned buffer), or a
// misaligned pointer.  Each is refused from the fields of struct
// ummunot_reg alone: put reads nothing beyond them.  The structs sit at the
// end of a page followed by an inaccessible one, so that a read past them
// faults (in a child, with a cache of its own, so that the fault is a
// failure and not the end).
TEST_CASE("put of a pointer that is not a registration reads nothing past struct ummunot_reg",
	  "[put]")
{
	const long pg = ::sysconf(_SC_PAGESIZE);
	auto *mem = static_cast<unsigned char *>(::mmap(nullptr, 2 * pg, PROT_READ | PROT_WRITE,
							 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	REQUIRE(mem != MAP_FAILED);
	REQUIRE(::mprotect(mem + pg, pg, PROT_NONE) == 0);

	// 16-byte aligned, like a registration, and 8-byte aligned.
	for (std::size_t tail : {std::size_t(48), sizeof(ummunot_reg)}) {
		auto *r = reinterpret_cast<ummunot_reg *>(mem + pg - tail);
		for (int kind = 0; kind < 3; kind++) {
			*r = ummunot_reg{};
			if (kind == 1) {		// the caller's buffer, as is
				r->addr = BASE + 100;
				r->length = 1000;
			} else if (kind == 2) {		// page aligned, zero length
				r->addr = BASE;
			}
			pid_t pid = ::fork();
			REQUIRE(pid >= 0);
			if (pid == 0) {
				std::signal(SIGSEGV, SIG_DFL);
				fixture f;
				const ummunot_reg *held = f.get(BASE, PAGE);
				int ok = held && ummunot_cache_put(f.cache, r) == -EINVAL &&
					 ummunot_cache_put(f.cache, held) == 0 &&
					 ummunot::detail::cache_check(f.cache) == 0;
				::_exit(ok ? 0 : 1);
			}
			int st = 0;
			REQUIRE(::waitpid(pid, &st, 0) == pid);
			INFO("tail " << tail << ", kind " << kind);
			CHECK((WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) == 0);
		}
	}
	::munmap(mem, 2 * pg);
}

// A caller that keeps struct ummunot_reg by value (an MPI library's request
// object) and puts the copy: -EINVAL, with nothing read past the copy.  The
// copy sits at the end of a page followed by an inaccessible one (a read
// past it faults) and on the heap (ASan: a read past it is a
// heap-buffer-overflow); the registration itself is then put normally.
TEST_CASE("put of a by-value copy of a registration: EINVAL, nothing read past the copy",
	  "[put]")
{
	const long pg = ::sysconf(_SC_PAGESIZE);
	auto *mem = static_cast<unsigned char *>(::mmap(nullptr, 2 * pg, PROT_READ | PROT_WRITE,
							 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	REQUIRE(mem != MAP_FAILED);
	REQUIRE(::mprotect(mem + pg, pg, PROT_NONE) == 0);

	for (std::size_t tail : {std::size_t(48), sizeof(ummunot_reg)}) {
		auto *r = reinterpret_cast<ummunot_reg *>(mem + pg - tail);
		pid_t pid = ::fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			std::signal(SIGSEGV, SIG_DFL);
			fixture f;
			const ummunot_reg *held = f.get(BASE, 4 * PAGE);
			if (!held)
				::_exit(2);
			*r = *held;
			auto heap = std::make_unique<ummunot_reg>(*held);
			int ok = ummunot_cache_put(f.cache, r) == -EINVAL &&
				 ummunot_cache_put(f.cache, heap.get()) == -EINVAL &&
				 ummunot_cache_put(f.cache, held) == 0 &&
				 ummunot_cache_put(f.cache, held) == -EINVAL &&
				 ummunot::detail::cache_check(f.cache) == 0;
			::_exit(ok ? 0 : 1);
		}
		int st = 0;
		REQUIRE(::waitpid(pid, &st, 0) == pid);
		INFO("tail " << tail);
		CHECK((WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) == 0);
	}
	::munmap(mem, 2 * pg);
}
