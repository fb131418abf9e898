// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* poll/epoll: readable exactly when events are pending (or overflow is set); a sleeping epoll_wait is woken by an event. */
#include "helpers.h"

#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <unistd.h>

static int poll_in(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int n = poll(&pfd, 1, 0);

	T_ASSERT(n >= 0, "poll: %s", t_errname(errno));
	T_ASSERT(!(pfd.revents & (POLLERR | POLLNVAL)), "poll revents 0x%x", pfd.revents);
	return n == 1 && (pfd.revents & POLLIN);
}

static int epoll_in(int ep, int timeout_ms)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, timeout_ms);

	T_ASSERT(n >= 0, "epoll_wait: %s", t_errname(errno));
	return n == 1 && (ev.events & EPOLLIN);
}

struct waiter {
	int ep;
	int got;
	double waited;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	double t0 = t_now();

	w->got = epoll_in(w->ep, 20000);
	w->waited = t_now() - t0;
	return NULL;
}

int main(int argc, char **argv)
{
	struct epoll_event ee = { .events = EPOLLIN };
	struct ummunot_event ev;
	struct waiter w = { 0 };
	struct t_file f;
	pthread_t th;
	uint64_t h;
	char *p;
	int ep;

	t_init(argc, argv);
	t_file_open(&f, 0);
	ep = epoll_create1(EPOLL_CLOEXEC);
	T_ASSERT(ep >= 0, "epoll_create1: %s", t_errname(errno));
	T_OK("epoll_ctl", epoll_ctl(ep, EPOLL_CTL_ADD, f.fd, &ee));

	T_ASSERT(!poll_in(f.fd), "empty ring is readable (poll)");
	T_ASSERT(!epoll_in(ep, 0), "empty ring is readable (epoll)");

	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 51);
	T_ASSERT(!poll_in(f.fd), "readable after REGISTER");
	T_OK("madvise", madvise(p, t_page, MADV_DONTNEED));
	T_ASSERT(poll_in(f.fd), "not readable (poll) with one event pending");
	T_ASSERT(epoll_in(ep, 0), "not readable (epoll) with one event pending");
	t_expect_event(&f, 51, h, (uintptr_t)p, (uintptr_t)p + t_page,
		       UMMUNOT_EVENT_CLEAR);
	T_ASSERT(!poll_in(f.fd), "readable (poll) after consuming the only event");
	T_ASSERT(!epoll_in(ep, 0), "readable (epoll) after consuming the only event");

	/* A sleeper is woken by the event. */
	t_rearm(&f, h);
	w.ep = ep;
	T_ASSERT(!pthread_create(&th, NULL, wait_thread, &w), "pthread_create");
	usleep(200000);
	T_OK("munmap", munmap(p, 4 * t_page));
	pthread_join(th, NULL);
	T_ASSERT(w.got, "epoll_wait sleeper not woken by the event (waited %.2fs)", w.waited);
	T_ASSERT(w.waited < 15, "epoll_wait sleeper woken only after %.2fs", w.waited);
	t_take(&f, &ev);
	t_check_event("woken", &ev, 51, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		      UMMUNOT_EVENT_UNMAP);
	T_ASSERT(!poll_in(f.fd), "readable after draining");

	/* Overflow alone (empty ring) is readable until RESYNC. */
	{
		char *q = t_map_anon(UMMUNOT_RING_MIN_ENTRIES, false);
		struct t_file g;

		t_file_open(&g, UMMUNOT_RING_MIN_ENTRIES);
		for (int i = 0; i < UMMUNOT_RING_MIN_ENTRIES / 2; i++)
			t_register(&g, (uintptr_t)q + i * t_page, t_page, i);
		/* bogus consumer: the ring looks full, the event is dropped */
		__atomic_store_n(&g.hdr->consumer, g.cons + 1000, __ATOMIC_RELEASE); /* (D) */
		T_OK("munmap", munmap(q, t_page));
		__atomic_store_n(&g.hdr->consumer, g.cons, __ATOMIC_RELEASE); /* (D) */
		T_ASSERT(t_overflow(&g), "overflow not set with a full-looking ring");
		T_EQ("events in ring", 0, t_producer(&g) - g.cons);
		T_ASSERT(poll_in(g.fd), "overflow set, empty ring: not readable");
		t_resync(&g);
		T_ASSERT(!poll_in(g.fd), "readable after RESYNC with an empty ring");
		t_file_close(&g);
		munmap(q, UMMUNOT_RING_MIN_ENTRIES * t_page);
	}

	close(ep);
	t_file_close(&f);
	return T_EXIT_PASS;
}
