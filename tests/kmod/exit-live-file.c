// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Processes that exit with a live file (regions, pending events, overflow, a poller, an fd held elsewhere) release everything; exit reports RELEASE. */
#include "helpers.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NR 1000

static int sv[2];
static struct t_file cf;

/* Child body: watch NR pages, unmap half (overflowing a 64-entry ring). */
static void child_setup(void)
{
	static struct ummunot_region r[NR];
	uint32_t idx;
	char *p;
	int ret;

	t_file_open(&cf, 1);
	p = t_map_anon(NR, true);
	for (int i = 0; i < NR; i++)
		r[i] = (struct ummunot_region){ .start = (uintptr_t)p + i * t_page,
						.length = t_page, .cookie = i };
	ret = t_register_batch(cf.fd, r, NR, &idx);
	if (ret)
		t_fail("child REGISTER: %s", t_errname(-ret));
	munmap(p, NR / 2 * t_page);
	if (!t_overflow(&cf))
		t_fail("child: expected an overflow with %d events into %u entries",
		       NR / 2, cf.hello.ring_entries);
}

static void *poller(void *arg)
{
	struct pollfd pfd = { .fd = cf.fd, .events = POLLIN };

	(void)arg;
	t_resync(&cf);
	cf.cons = t_producer(&cf);
	__atomic_store_n(&cf.hdr->consumer, cf.cons, __ATOMIC_RELEASE); /* (D) */
	poll(&pfd, 1, 10000);	/* the process exits under us */
	return NULL;
}

/* Pass an fd to the other end of the socket pair (child side). */
static int send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char c = 'f';
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

/* Receive the fd a child passed (parent side); fails the test if none. */
static int recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char c;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf,
			      .msg_controllen = sizeof(cbuf) };
	int fd;

	T_EQ("recvmsg", 1, recvmsg(sock, &msg, 0));
	T_ASSERT(CMSG_FIRSTHDR(&msg), "no fd received");
	memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(int));
	return fd;
}

static void wait_child(pid_t pid, const char *what)
{
	int status;

	T_EQ("waitpid", pid, waitpid(pid, &status, 0));
	T_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "%s: child failed (status 0x%x)", what, status);
}

static void wait_refcnt(long want, const char *what)
{
	long rc = -1;

	for (int i = 0; i < 200; i++) {
		rc = t_module_refcnt();
		if (rc == want)
			return;
		usleep(10000);
	}
	t_fail("%s: module refcnt expected %ld (baseline), got %ld: a file leaked",
	       what, want, rc);
}

int main(int argc, char **argv)
{
	struct ummunot_hello h, ref;
	struct ummunot_stats st;
	long base;
	pid_t pid;
	int fd;

	t_init(argc, argv);
	/* Same ring size as the children: their mmap arguments. */
	t_file_open(&cf, 1);
	ref = cf.hello;
	t_file_close(&cf);
	base = t_module_refcnt();
	T_ASSERT(base >= 0, "cannot read /sys/module/ummunot/refcnt");

	/* 1: plain exit with a mapped ring, regions and an overflow. */
	pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", t_errname(errno));
	if (pid == 0) {
		child_setup();
		_exit(0);
	}
	wait_child(pid, "exit with live file");
	wait_refcnt(base, "after exit with a live file");

	/* 2: exit while another thread sleeps in poll() on the file. */
	pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", t_errname(errno));
	if (pid == 0) {
		pthread_t th;

		child_setup();
		if (pthread_create(&th, NULL, poller, NULL))
			_exit(3);
		usleep(100000);
		_exit(0);	/* exit_group with the poller asleep */
	}
	wait_child(pid, "exit with a poller");
	wait_refcnt(base, "after exit with a poller");

	/* 3: the fd outlives its mm in another process. */
	T_OK("socketpair", socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", t_errname(errno));
	if (pid == 0) {
		child_setup();
		if (send_fd(sv[1], cf.fd))
			_exit(4);
		_exit(0);
	}
	wait_child(pid, "exit after passing its fd");
	fd = recv_fd(sv[0]);
	T_ASSERT(t_module_refcnt() > base, "refcnt %ld with a file held by us (baseline %ld)",
		 t_module_refcnt(), base);
	memset(&st, 0, sizeof(st));
	T_ERRNO("GET_STATS on a file whose mm has exited", EPERM,
		ioctl(fd, UMMUNOT_IOC_GET_STATS, &st));
	memset(&h, 0, sizeof(h));
	h.abi_version = UMMUNOT_ABI_VERSION;
	T_ERRNO("HELLO on a file whose mm has exited", EPERM,
		ioctl(fd, UMMUNOT_IOC_HELLO, &h));
	T_ERRNO("mmap of a file whose mm has exited", EPERM,
		(long)mmap(NULL, ref.ring_mmap_size, PROT_READ | PROT_WRITE,
			   MAP_SHARED, fd, ref.ring_mmap_offset));
	close(fd);
	wait_refcnt(base, "after closing a file whose mm had exited");

	/*
	 * 4: exit itself is an event.  The exiting process cannot read its
	 * ring any more, but a file that outlives the mm shows, in fdinfo,
	 * exactly one RELEASE per armed region and nothing else (the final
	 * unmap of exit_mmap finds the regions disarmed).
	 */
	pid = fork();
	T_ASSERT(pid >= 0, "fork: %s", t_errname(errno));
	if (pid == 0) {
		static struct ummunot_region r[10];
		uint32_t idx;
		char *p;

		t_file_open(&cf, 1);
		p = t_map_anon(10, true);
		for (int i = 0; i < 10; i++)
			r[i] = (struct ummunot_region){ .start = (uintptr_t)p + i * t_page,
							.length = t_page, .cookie = i };
		if (t_register_batch(cf.fd, r, 10, &idx))
			_exit(5);
		if (send_fd(sv[1], cf.fd))
			_exit(4);
		_exit(0);
	}
	wait_child(pid, "exit with 10 armed regions");
	{
		char path[64], info[4096], *line;
		unsigned long long unmap = ~0ULL, release = ~0ULL;
		ssize_t n;
		int ifd;

		fd = recv_fd(sv[0]);
		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
		ifd = open(path, O_RDONLY | O_CLOEXEC);
		T_ASSERT(ifd >= 0, "open %s: %s", path, t_errname(errno));
		n = read(ifd, info, sizeof(info) - 1);
		T_ASSERT(n > 0, "read %s: %s", path, t_errname(errno));
		info[n] = 0;
		close(ifd);
		line = strstr(info, "\ndelivered:");
		T_ASSERT(line, "no 'delivered:' line in fdinfo:\n%s", info);
		T_ASSERT(sscanf(strstr(line, "unmap="), "unmap=%llu", &unmap) == 1 &&
			 sscanf(strstr(line, "release="), "release=%llu", &release) == 1,
			 "cannot parse fdinfo:\n%s", info);
		T_EQ("RELEASE events delivered at exit", 10, release);
		T_EQ("UNMAP events after RELEASE (regions are disarmed)", 0, unmap);
		close(fd);
	}
	wait_refcnt(base, "after closing the file of an exited process");
	return T_EXIT_PASS;
}
