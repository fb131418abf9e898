// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A file used from another address space (fork child, fd passed over a unix socket): EPERM everywhere, POLLERR, owner unaffected. */
#include "helpers.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every ioctl and mmap from this (foreign) mm must fail with EPERM. */
static void check_foreign(const char *who, int fd, const struct ummunot_hello *h,
			  uint64_t handle, void *addr)
{
	struct ummunot_region r = { .start = (uintptr_t)addr, .length = t_page, .cookie = 1 };
	struct ummunot_batch b = { .ptr = (uintptr_t)&r, .count = 1 };
	struct ummunot_batch hb = { .ptr = (uintptr_t)&handle, .count = 1 };
	struct ummunot_filter flt = { .mask = UMMUNOT_EVENT_MASK_ALL };
	struct ummunot_resync rs = { 0 };
	struct ummunot_stats st;
	struct ummunot_hello hello = { .abi_version = UMMUNOT_ABI_VERSION,
				       .features = UMMUNOT_FEATURES_V1 };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char what[64];

	/* The owner has an event pending: none of this mm's business. */
	snprintf(what, sizeof(what), "%s: poll", who);
	T_EQ(what, 1, poll(&pfd, 1, 0));
	T_EQ("revents: POLLERR, not the owner's POLLIN", POLLERR, pfd.revents);
	snprintf(what, sizeof(what), "%s: HELLO", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_HELLO, &hello));
	snprintf(what, sizeof(what), "%s: REGISTER", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_REGISTER, &b));
	snprintf(what, sizeof(what), "%s: REARM", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_REARM, &hb));
	snprintf(what, sizeof(what), "%s: SET_FILTER", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_SET_FILTER, &flt));
	snprintf(what, sizeof(what), "%s: RESYNC", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_RESYNC, &rs));
	snprintf(what, sizeof(what), "%s: GET_STATS", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_GET_STATS, &st));
	snprintf(what, sizeof(what), "%s: UNREGISTER", who);
	T_ERRNO(what, EPERM, ioctl(fd, UMMUNOT_IOC_UNREGISTER, &hb));
	snprintf(what, sizeof(what), "%s: mmap", who);
	T_ERRNO(what, EPERM, (long)mmap(NULL, h->ring_mmap_size, PROT_READ | PROT_WRITE,
					MAP_SHARED, fd, h->ring_mmap_offset));
}

static void same_stats(const char *what, const struct ummunot_stats *a,
		       const struct ummunot_stats *b)
{
	const uint64_t *x = (const uint64_t *)a, *y = (const uint64_t *)b;

	for (size_t i = 0; i < sizeof(*a) / sizeof(uint64_t); i++)
		if (x[i] != y[i])
			t_fail("%s: stats word %zu (byte offset %zu) changed by the child: %llu -> %llu",
			       what, i, i * 8, (unsigned long long)x[i],
			       (unsigned long long)y[i]);
}

int main(int argc, char **argv)
{
	struct ummunot_stats s0, s1, s2a, s2b;
	struct t_file f, g;
	int sv[2], status;
	uint64_t h, hg, hq;
	pid_t pid;
	char *p, *q;

	t_init(argc, argv);
	t_file_open(&f, 0);
	p = t_map_anon(4, true);
	h = t_register(&f, (uintptr_t)p, 4 * t_page, 41);
	/* An event the owner has not read yet while the child looks. */
	q = t_map_anon(1, true);
	hq = t_register(&f, (uintptr_t)q, t_page, 43);
	T_OK("munmap", munmap(q, t_page));
	{
		struct pollfd pfd = { .fd = f.fd, .events = POLLIN };

		T_EQ("owner's poll", 1, poll(&pfd, 1, 0));
		T_EQ("owner's revents", POLLIN, pfd.revents);
	}
	T_OK("socketpair", socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));

	/* fork itself counts a filtered PROTECTION_PAGE: snapshot after it. */
	pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", t_errname(errno));
	if (pid == 0) {
		char c;
		int fd2;

		close(sv[0]);
		if (read(sv[1], &c, 1) != 1)	/* parent took its snapshot */
			_exit(5);
		check_foreign("fork child, inherited fd", f.fd, &f.hello, h, p);
		/* Unmapping the child's copy of the range is another mm: no event. */
		if (munmap(p, 4 * t_page))
			t_fail("child munmap: %s", t_errname(errno));
		fd2 = t_recv_fd(sv[1]);
		check_foreign("fd received over a unix socket", fd2, &f.hello, h, p);
		_exit(0);
	}
	close(sv[1]);
	t_get_stats(&f, &s0);
	T_EQ("go", 1, write(sv[0], "g", 1));
	t_file_open(&g, 0);	/* opened after fork: never shared by fork */
	hg = t_register(&g, (uintptr_t)p, 4 * t_page, 42);
	t_get_stats(&g, &s2a);
	t_send_fd(sv[0], g.fd);
	T_EQ("waitpid", pid, waitpid(pid, &status, 0));
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "child checks failed (status 0x%x), see above", status);
	t_expect_event(&f, 43, hq, (uintptr_t)q, (uintptr_t)q + t_page,
		       UMMUNOT_EVENT_UNMAP);

	t_expect_no_event(&f, "child's munmap of its copy");
	t_expect_no_event(&g, "child's munmap of its copy");
	t_get_stats(&f, &s1);
	same_stats("owner's file", &s0, &s1);
	t_get_stats(&g, &s2b);
	same_stats("second file", &s2a, &s2b);
	T_EQ("event_mask after child's SET_FILTER", UMMUNOT_EVENT_MASK_DEFAULT, s1.event_mask);

	/* Owner's regions still fire. */
	T_OK("munmap", munmap(p, 4 * t_page));
	t_expect_event(&f, 41, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	t_expect_event(&g, 42, hg, (uintptr_t)p, (uintptr_t)p + 4 * t_page,
		       UMMUNOT_EVENT_UNMAP);
	t_file_close(&g);
	t_file_close(&f);
	return T_EXIT_PASS;
}
