// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The event is in the ring when the system call returns even while other
 * threads use the file: munmap, mmap(MAP_FIXED), mremap and
 * MADV_DONTNEED of a watched range with a second thread looping
 * GET_STATS/REGISTER/UNREGISTER on the same file, then munmap with a
 * thread parked by a page fault (userfaultfd) inside REGISTER.  kdreg2
 * returns late in both cases (Documentation/performance.md, bench/kdreg2);
 * this is the permanent test of ummunot's side.
 */
#include "helpers.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ITERS	100
#define PARKED	25

static struct t_file f;
static atomic_int stop;
static unsigned long user_calls;

static void *user_fn(void *arg)
{
	char *dummy = arg;	/* never touched, never unmapped meanwhile */

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		struct ummunot_stats st;
		struct ummunot_region r = {.start = (uintptr_t)dummy, .length = t_page,
					   .cookie = 0xd00d};

		T_EQ("GET_STATS", 0, t_ioctl(f.fd, UMMUNOT_IOC_GET_STATS, &st));
		uint64_t h;

		T_EQ("REGISTER", 0, t_register_batch(f.fd, &r, 1, NULL));
		h = r.handle;
		T_EQ("UNREGISTER", 0, t_handle_batch(f.fd, UMMUNOT_IOC_UNREGISTER, &h, 1, NULL));
		user_calls++;
	}
	return NULL;
}

/* Watch a fresh touched range, change it, expect the event at once. */
static void once(int op, uint64_t cookie)
{
	char *p = t_map_anon(4, true), *q = NULL;
	uint64_t h = t_register(&f, (uintptr_t)p, 4 * t_page, cookie);
	uint32_t type = UMMUNOT_EVENT_UNMAP;

	switch (op) {
	case 0:
		T_OK("munmap", munmap(p, 4 * t_page));
		break;
	case 1:
		T_ASSERT(mmap(p, 4 * t_page, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p,
			 "mmap MAP_FIXED: %s", t_errname(errno));
		break;
	case 2:
		q = t_map_anon(4, false);
		T_ASSERT(mremap(p, 4 * t_page, 4 * t_page, MREMAP_MAYMOVE | MREMAP_FIXED, q) == q,
			 "mremap: %s", t_errname(errno));
		break;
	default:
		T_OK("madvise", madvise(p, 4 * t_page, MADV_DONTNEED));
		type = UMMUNOT_EVENT_CLEAR;
		break;
	}
	t_expect_event(&f, cookie, h, (uintptr_t)p, (uintptr_t)p + 4 * t_page, type);
	t_unregister(&f, h);
	if (op == 2)
		munmap(q, 4 * t_page);
	else if (op != 0)
		munmap(p, 4 * t_page);
}

struct parked {
	void *array;
	long ret;
	int err;
};

static void *parked_fn(void *arg)
{
	struct parked *pk = arg;
	struct ummunot_batch b = {.ptr = (uintptr_t)pk->array, .count = 1};

	pk->ret = ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b);
	pk->err = errno;
	return NULL;
}

static void parked_phase(void)
{
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = {.api = UFFD_API};
	char *pages[PARKED];
	uint64_t h[PARKED];
	struct parked pk;
	struct uffd_msg msg;
	pthread_t tid;

	if (uffd < 0) {
		t_log("userfaultfd: %s: parked phase not run", t_errname(errno));
		return;
	}
	T_OK("UFFDIO_API", ioctl(uffd, UFFDIO_API, &api));
	pk.array = t_map_anon(1, false);
	struct uffdio_register ur = {
		.range = {.start = (uintptr_t)pk.array, .len = t_page},
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};
	T_OK("UFFDIO_REGISTER", ioctl(uffd, UFFDIO_REGISTER, &ur));
	for (int i = 0; i < PARKED; i++) {
		pages[i] = t_map_anon(1, true);
		h[i] = t_register(&f, (uintptr_t)pages[i], t_page, 1000 + i);
	}
	T_ASSERT(pthread_create(&tid, NULL, parked_fn, &pk) == 0, "pthread_create");
	/* Parked: its fault is waiting on the userfaultfd. */
	T_EQ("uffd message size", sizeof(msg), read(uffd, &msg, sizeof(msg)));
	T_EQ("uffd event", UFFD_EVENT_PAGEFAULT, msg.event);
	for (int i = 0; i < PARKED; i++) {
		T_OK("munmap", munmap(pages[i], t_page));
		t_expect_event(&f, 1000 + i, h[i], (uintptr_t)pages[i],
			       (uintptr_t)pages[i] + t_page, UMMUNOT_EVENT_UNMAP);
	}
	/* Unpark with a zero page: a zero-length region, EINVAL. */
	struct uffdio_zeropage zp = {.range = {.start = (uintptr_t)pk.array, .len = t_page}};
	T_OK("UFFDIO_ZEROPAGE", ioctl(uffd, UFFDIO_ZEROPAGE, &zp));
	pthread_join(tid, NULL);
	T_ASSERT(pk.ret == -1 && pk.err == EINVAL, "parked REGISTER: %ld/%s", pk.ret,
		 t_errname(pk.err));
	for (int i = 0; i < PARKED; i++)
		t_unregister(&f, h[i]);
	close(uffd);
}

int main(int argc, char **argv)
{
	pthread_t tid;
	char *dummy;

	t_init(argc, argv);
	t_file_open(&f, 0);
	dummy = t_map_anon(1, false);
	T_ASSERT(pthread_create(&tid, NULL, user_fn, dummy) == 0, "pthread_create");
	for (int op = 0; op < 4; op++)
		for (int i = 0; i < ITERS; i++)
			once(op, (uint64_t)op << 32 | (uint64_t)i);
	atomic_store(&stop, 1);
	pthread_join(tid, NULL);
	T_ASSERT(user_calls > 0, "the second thread never ran");
	t_log("%d changes with %lu GET_STATS/REGISTER/UNREGISTER rounds alongside",
	      4 * ITERS, user_calls);
	parked_phase();
	t_expect_no_event(&f, "at the end");
	t_file_close(&f);
	return T_EXIT_PASS;
}
