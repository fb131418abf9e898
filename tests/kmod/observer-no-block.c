// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Observers never wait for a REGISTER stalled on the caller's own memory:
 * while a REGISTER's array sits on a userfaultfd page (missing, then
 * write-protected for the handle write-back), /proc/PID/fdinfo/FD,
 * GET_STATS and the sysfs totals still answer.  The REGISTER completes
 * once the fault is resolved, and its handle is the one now watched.
 */
#include "helpers.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static struct t_file f;
static char *arr;		/* the REGISTER array's page (userfaultfd) */
static char *watched;
static volatile int reg_ret = 1;
static volatile int obs_done;

static void *do_register(void *arg)
{
	struct ummunot_region *r = (struct ummunot_region *)arr;
	uint32_t idx;

	(void)arg;
	reg_ret = t_register_batch(f.fd, r, 1, &idx);
	return NULL;
}

static void read_all(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		t_fail("open %s: %s", path, t_errname(errno));
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
}

static void *observe(void *arg)
{
	struct ummunot_stats st;
	char path[64];

	(void)arg;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", f.fd);
	read_all(path);
	read_all("/sys/class/misc/ummunot/stats/regions");
	read_all("/sys/class/misc/ummunot/stats/regions_registered");
	t_get_stats(&f, &st);
	obs_done = 1;
	return NULL;
}

/* Wait for the userfaultfd message that says the REGISTER is stalled. */
static void wait_fault(int uffd, uint64_t flag)
{
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffd_msg msg;

	if (poll(&pfd, 1, 10000) != 1)
		t_fail("REGISTER did not fault on the userfaultfd page");
	if (read(uffd, &msg, sizeof(msg)) != sizeof(msg))
		t_fail("read uffd: %s", t_errname(errno));
	T_EQ("uffd event", UFFD_EVENT_PAGEFAULT, msg.event);
	T_EQ("uffd fault flags & mask", flag, msg.arg.pagefault.flags & flag);
}

/* Run the observer while the REGISTER is stalled; true if it finished. */
static bool observer_finishes(pthread_t *ot)
{
	obs_done = 0;
	if (pthread_create(ot, NULL, observe, NULL))
		t_fail("pthread_create");
	for (int i = 0; i < 50 && !obs_done; i++)
		usleep(100 * 1000);
	return obs_done;
}

int main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg;
	struct ummunot_region *src;
	struct ummunot_stats st;
	pthread_t rt, ot;
	bool ok, wp;
	int uffd;

	t_init(argc, argv);
	t_file_open(&f, 0);
	watched = t_map_anon(1, true);

	uffd = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		t_skip("userfaultfd: %s", t_errname(errno));
	api.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP;
	if (ioctl(uffd, UFFDIO_API, &api)) {
		api = (struct uffdio_api){ .api = UFFD_API };
		T_OK("UFFDIO_API", ioctl(uffd, UFFDIO_API, &api));
	}
	wp = api.features & UFFD_FEATURE_PAGEFAULT_FLAG_WP;

	/* 1: the array page is missing: REGISTER stalls copying it in. */
	arr = mmap(NULL, t_page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(arr != MAP_FAILED, "mmap");
	reg = (struct uffdio_register){
		.range = { .start = (uintptr_t)arr, .len = t_page },
		.mode = UFFDIO_REGISTER_MODE_MISSING |
			(wp ? UFFDIO_REGISTER_MODE_WP : 0),
	};
	T_OK("UFFDIO_REGISTER", ioctl(uffd, UFFDIO_REGISTER, &reg));

	if (pthread_create(&rt, NULL, do_register, NULL))
		t_fail("pthread_create");
	wait_fault(uffd, 0);
	ok = observer_finishes(&ot);

	/* Resolve: the page holds one valid region. */
	src = aligned_alloc(t_page, t_page);
	T_ASSERT(src, "aligned_alloc");
	memset(src, 0, t_page);
	src[0] = (struct ummunot_region){ .start = (uintptr_t)watched,
					  .length = t_page, .cookie = 42 };
	{
		struct uffdio_copy cp = {
			.dst = (uintptr_t)arr, .src = (uintptr_t)src,
			.len = t_page,
			.mode = wp ? UFFDIO_COPY_MODE_WP : 0,
		};

		T_OK("UFFDIO_COPY", ioctl(uffd, UFFDIO_COPY, &cp));
	}
	if (!ok) {
		if (wp) {	/* let the write-back through as well */
			struct uffdio_writeprotect w = {
				.range = { .start = (uintptr_t)arr, .len = t_page },
			};

			ioctl(uffd, UFFDIO_WRITEPROTECT, &w);
		}
		pthread_join(ot, NULL);
		pthread_join(rt, NULL);
		t_fail("fdinfo/GET_STATS/sysfs blocked for 5 s while REGISTER waited for its array page");
	}
	pthread_join(ot, NULL);

	if (wp) {
		/*
		 * 2: with UFFDIO_COPY_MODE_WP the page is now write-protected:
		 * the REGISTER read it and stalls writing the handle back.
		 */
		wait_fault(uffd, UFFD_PAGEFAULT_FLAG_WP);
		ok = observer_finishes(&ot);
		{
			struct uffdio_writeprotect w = {
				.range = { .start = (uintptr_t)arr, .len = t_page },
				.mode = 0,
			};

			T_OK("UFFDIO_WRITEPROTECT (clear)",
			     ioctl(uffd, UFFDIO_WRITEPROTECT, &w));
		}
		pthread_join(ot, NULL);
		if (!ok) {
			pthread_join(rt, NULL);
			t_fail("fdinfo/GET_STATS/sysfs blocked for 5 s while REGISTER wrote its handles back");
		}
	} else {
		t_log("no userfaultfd write-protect on this kernel: write-back stall not tested");
	}
	pthread_join(rt, NULL);
	T_EQ("REGISTER after the fault was resolved", 0, reg_ret);

	/* The handle written back names the watched region. */
	t_get_stats(&f, &st);
	T_EQ("regions", 1, st.regions);
	T_OK("munmap", munmap(watched, t_page));
	t_expect_event(&f, 42, ((struct ummunot_region *)arr)->handle,
		       (uintptr_t)watched, (uintptr_t)watched + t_page,
		       UMMUNOT_EVENT_UNMAP);
	close(uffd);
	t_file_close(&f);
	return T_EXIT_PASS;
}
