// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Every path into the module survives a failure at each of its fault points.
 *
 * For each operation (open, HELLO, mmap of the ring, the first REGISTER of
 * an address space, REGISTER/UNREGISTER/REARM batches of 3 and 60 (the
 * module copies 51 regions or 32 handles at a time), SET_FILTER,
 * GET_STATS, RESYNC, reading fdinfo and the sysfs files, the munmap that
 * delivers an event, close), the test walks n = 1, 2, ...: it writes n to
 * /proc/thread-self/fail-nth, so that the n-th fault point the next system
 * call reaches fails (a slab or page allocation, failslab/fail_page_alloc,
 * or a user copy, fail_usercopy), makes that one call, and checks:
 *
 *  - it succeeded, or failed with an errno the ABI documents for it:
 *    EFAULT for an injected user-copy failure, ENOMEM only where the path
 *    allocates (UNREGISTER, REARM, SET_FILTER, GET_STATS and RESYNC
 *    allocate nothing and must never fail with ENOMEM), never EINTR;
 *  - it did all or nothing: after a failure the file's regions, armed
 *    regions and filter are as before, a retried HELLO or mmap works, and
 *    the user's charge in /sys/class/misc/ummunot/users is back where it
 *    was; after a success, the effect is there (and, for munmap, its event);
 *  - once the walk passes the operation's last fault point, the module's
 *    client and region counts are back to where they were.
 *
 * The runner checks the kernel log after the program (no KASAN report, no
 * lockdep splat, no WARNING) and scans kmemleak at the end of the suites.
 * Needs CONFIG_FAULT_INJECTION with failslab, fail_page_alloc,
 * fail_usercopy and debugfs: the 6.1-debug kernel (vm-suite.txt runs it
 * there only).  Its log has the figures.
 */
#include "helpers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define DBG		"/sys/kernel/debug"
#define USERS_FILE	"/sys/class/misc/ummunot/users"
#define STATS_DIR	"/sys/class/misc/ummunot/stats"
#define MAX_POINTS	4000
#define BIG		60	/* more than one chunk: 51 regions, 32 handles */

static int nth_fd = -1;

/* ------------------------------------------------------ fault injection */

static const char *const knobs[][2] = {
	/* file, value: fail GFP_KERNEL allocations too, and quietly */
	{ DBG "/failslab/ignore-gfp-wait", "N" },
	{ DBG "/failslab/verbose", "0" },
	{ DBG "/fail_page_alloc/ignore-gfp-wait", "N" },
	{ DBG "/fail_page_alloc/ignore-gfp-highmem", "N" },
	{ DBG "/fail_page_alloc/min-order", "0" },
	{ DBG "/fail_page_alloc/verbose", "0" },
	{ DBG "/fail_usercopy/verbose", "0" },
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))
static char saved[NKNOBS][32];

static void knob_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t len = strlen(val);

	if (fd < 0 || write(fd, val, len) != len)
		t_fail("%s = %s: %s", path, val, t_errname(errno));
	close(fd);
}

static void knobs_restore(void)
{
	for (size_t i = 0; i < NKNOBS; i++)
		if (saved[i][0]) {
			int fd = open(knobs[i][0], O_WRONLY | O_CLOEXEC);

			if (fd >= 0) {
				if (write(fd, saved[i], strlen(saved[i])) < 0)
					perror(knobs[i][0]);
				close(fd);
			}
		}
}

static void knobs_set(void)
{
	for (size_t i = 0; i < NKNOBS; i++) {
		int fd = open(knobs[i][0], O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			t_fail("%s: %s (this kernel lacks fault injection; the "
			       "suite runs this test on 6.1-debug only)",
			       knobs[i][0], t_errname(errno));
		n = read(fd, saved[i], sizeof(saved[i]) - 1);
		close(fd);
		if (n <= 0)
			t_fail("read %s", knobs[i][0]);
		saved[i][n] = 0;
		saved[i][strcspn(saved[i], "\n")] = 0;
	}
	atexit(knobs_restore);
	for (size_t i = 0; i < NKNOBS; i++)
		knob_write(knobs[i][0], knobs[i][1]);
}

static void nth_open(void)
{
	if (nth_fd >= 0)
		close(nth_fd);
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR | O_CLOEXEC);
	if (nth_fd < 0)
		t_fail("/proc/thread-self/fail-nth: %s (no CONFIG_FAULT_INJECTION?)",
		       t_errname(errno));
}

/* The n-th fault point this task reaches from now on fails. */
static void nth_arm(unsigned int n)
{
	char b[16];
	int len = snprintf(b, sizeof(b), "%u", n);

	if (pwrite(nth_fd, b, len, 0) != len)
		t_fail("arming fail-nth %u: %s", n, t_errname(errno));
}

/*
 * Whether the armed failure was injected; disarms.  Reading the file is a
 * user copy itself: when one point was left, the read consumes it and fails
 * with EFAULT (so the operation had not reached it).  Writing "0" may be
 * failed the same way once.
 */
static bool nth_injected(void)
{
	char b[16] = "";
	ssize_t r = pread(nth_fd, b, sizeof(b) - 1, 0);
	bool injected = r > 0 && atoi(b) == 0;

	for (int i = 0; pwrite(nth_fd, "0", 1, 0) != 1; i++)
		if (i == 3)
			t_fail("disarming fail-nth: %s", t_errname(errno));
	return injected;
}

/* ------------------------------------------------------------- the state */

static struct t_file F;		/* the file most operations act on */
static char *buf;		/* BIG pages the regions watch */
static uint64_t handles[BIG];

static void read_text(const char *path, char *out, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		t_fail("open %s: %s", path, t_errname(errno));
	n = read(fd, out, size - 1);
	close(fd);
	if (n < 0)
		t_fail("read %s: %s", path, t_errname(errno));
	out[n] = 0;
}

static long long stat_file(const char *name)
{
	char p[128], b[64];

	snprintf(p, sizeof(p), STATS_DIR "/%s", name);
	read_text(p, b, sizeof(b));
	return strtoll(b, NULL, 0);
}

/*
 * The users file must read `want` again: charges are dropped when regions
 * are freed, which may trail an unregister by an RCU grace period.
 */
static void expect_users(const char *what, const char *want)
{
	char now[4096];
	double end = t_now() + 10;

	for (;;) {
		read_text(USERS_FILE, now, sizeof(now));
		if (!strcmp(now, want))
			return;
		if (t_now() > end)
			t_fail("%s: %s is\n%swas\n%s", what, USERS_FILE, now, want);
		usleep(10000);
	}
}

static void regions_watch(uint32_t count)
{
	struct ummunot_region r[BIG];
	uint32_t ei = 0;
	int ret;

	memset(r, 0, sizeof(r));
	for (uint32_t i = 0; i < count; i++) {
		r[i].start = (uintptr_t)buf + i * t_page;
		r[i].length = t_page;
		r[i].cookie = 1000 + i;
	}
	ret = t_register_batch(F.fd, r, count, &ei);
	if (ret)
		t_fail("REGISTER %u (no fault armed): %s", count, t_errname(-ret));
	for (uint32_t i = 0; i < count; i++)
		handles[i] = r[i].handle;
}

static void regions_drop(uint32_t count)
{
	uint32_t ei = 0;
	int ret = t_handle_batch(F.fd, UMMUNOT_IOC_UNREGISTER, handles, count, &ei);

	if (ret)
		t_fail("UNREGISTER %u (no fault armed): %s", count, t_errname(-ret));
}

/* Consume every pending event; the next one expected follows the last. */
static void ring_drain(void)
{
	struct ummunot_event ev;

	if (t_overflow(&F))
		t_fail("the ring overflowed");
	while (t_pending(&F)) {
		t_take(&F, &ev);
		F.next_seq = ev.seq + 1;
	}
}

/* ------------------------------------------------------------ operations */

struct op {
	const char *name;
	bool enomem_ok;			/* the path allocates */
	bool efault_ok;			/* an injected user copy may fail it */
	void (*setup)(struct op *o);
	long (*run)(struct op *o);	/* exactly one system call */
	void (*after)(struct op *o, long ret, int err);
	uint32_t count;
	int fd;
	void *map;
	struct ummunot_stats st;
	char users[4096];
	char path[64];
	char rbuf[4096];
};

static void users_snapshot(struct op *o)
{
	read_text(USERS_FILE, o->users, sizeof(o->users));
}

/* open */
static long open_run(struct op *o)
{
	return o->fd = open(UMMUNOT_DEV, O_RDWR | O_CLOEXEC);
}

static void open_after(struct op *o, long ret, int err)
{
	(void)err;
	if (ret >= 0)
		close(o->fd);
}

/* HELLO on a fresh file */
static void hello_setup(struct op *o)
{
	o->fd = t_dev_open();
	users_snapshot(o);
}

static long hello_run(struct op *o)
{
	struct ummunot_hello h = { .abi_version = UMMUNOT_ABI_VERSION,
				   .features = UMMUNOT_FEATURES_V1 };

	return ioctl(o->fd, UMMUNOT_IOC_HELLO, &h);
}

static void hello_after(struct op *o, long ret, int err)
{
	struct ummunot_hello h;
	int r;

	(void)err;
	if (ret == -1) {
		expect_users("HELLO failed", o->users);
		r = t_hello(o->fd, &h, 0);
		if (r)
			t_fail("HELLO after a failed HELLO: %s", t_errname(-r));
	}
	close(o->fd);
	expect_users("HELLO, then close", o->users);
}

/* mmap of the ring */
static void mmap_setup(struct op *o)
{
	struct ummunot_hello h;
	int r;

	o->fd = t_dev_open();
	r = t_hello(o->fd, &h, 0);
	if (r)
		t_fail("HELLO: %s", t_errname(-r));
	o->count = h.ring_mmap_size;
}

static long mmap_run(struct op *o)
{
	o->map = mmap(NULL, o->count, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
	return o->map == MAP_FAILED ? -1 : 0;
}

static void mmap_after(struct op *o, long ret, int err)
{
	(void)err;
	if (ret == -1) {
		o->map = mmap(NULL, o->count, PROT_READ | PROT_WRITE, MAP_SHARED,
			      o->fd, 0);
		if (o->map == MAP_FAILED)
			t_fail("mmap after a failed mmap: %s", t_errname(errno));
	}
	T_EQ("ring magic", UMMUNOT_RING_MAGIC,
	     ((struct ummunot_ring_header *)o->map)->magic);
	munmap(o->map, o->count);
	close(o->fd);
}

/* REGISTER a batch on F (the array is written before arming: no user fault) */
static struct ummunot_region reg_array[BIG];

static void reg_setup(struct op *o)
{
	memset(reg_array, 0, sizeof(reg_array));
	for (uint32_t i = 0; i < o->count; i++) {
		reg_array[i].start = (uintptr_t)buf + i * t_page;
		reg_array[i].length = t_page;
		reg_array[i].cookie = 2000 + i;
	}
	t_get_stats(&F, &o->st);
	users_snapshot(o);
}

static long reg_run(struct op *o)
{
	struct ummunot_batch b = { .ptr = (uintptr_t)reg_array, .count = o->count };

	return ioctl(F.fd, UMMUNOT_IOC_REGISTER, &b);
}

static void reg_after(struct op *o, long ret, int err)
{
	struct ummunot_stats st;

	(void)err;
	t_get_stats(&F, &st);
	if (ret == -1) {
		T_EQ("regions after a failed REGISTER", o->st.regions, st.regions);
		T_EQ("armed after a failed REGISTER", o->st.regions_armed,
		     st.regions_armed);
		expect_users("REGISTER failed", o->users);
		return;
	}
	T_EQ("regions after REGISTER", o->st.regions + o->count, st.regions);
	T_EQ("armed after REGISTER", o->st.regions_armed + o->count,
	     st.regions_armed);
	for (uint32_t i = 0; i < o->count; i++)
		handles[i] = reg_array[i].handle;
	regions_drop(o->count);
	expect_users("REGISTER, then UNREGISTER", o->users);
}

/* UNREGISTER a batch of F's regions */
static void unreg_setup(struct op *o)
{
	users_snapshot(o);
	regions_watch(o->count);
	t_get_stats(&F, &o->st);
}

static long unreg_run(struct op *o)
{
	struct ummunot_batch b = { .ptr = (uintptr_t)handles, .count = o->count };

	return ioctl(F.fd, UMMUNOT_IOC_UNREGISTER, &b);
}

static void unreg_after(struct op *o, long ret, int err)
{
	struct ummunot_stats st;

	(void)err;
	t_get_stats(&F, &st);
	if (ret == -1) {
		T_EQ("regions after a failed UNREGISTER", o->st.regions, st.regions);
		regions_drop(o->count);
	} else {
		T_EQ("regions after UNREGISTER", o->st.regions - o->count, st.regions);
	}
	expect_users("UNREGISTER", o->users);
}

/* REARM a batch of F's regions after an invalidation disarmed them */
static void rearm_setup(struct op *o)
{
	users_snapshot(o);
	regions_watch(o->count);
	if (madvise(buf, o->count * t_page, MADV_DONTNEED))
		t_fail("madvise: %s", t_errname(errno));
	ring_drain();
	t_get_stats(&F, &o->st);
}

static long rearm_run(struct op *o)
{
	struct ummunot_batch b = { .ptr = (uintptr_t)handles, .count = o->count };

	return ioctl(F.fd, UMMUNOT_IOC_REARM, &b);
}

static void rearm_after(struct op *o, long ret, int err)
{
	struct ummunot_stats st;

	(void)err;
	t_get_stats(&F, &st);
	T_EQ("armed after REARM", o->st.regions_armed + (ret == -1 ? 0 : o->count),
	     st.regions_armed);
	regions_drop(o->count);
	expect_users("REARM", o->users);
}

/* SET_FILTER */
static void filter_setup(struct op *o)
{
	t_get_stats(&F, &o->st);
}

static long filter_run(struct op *o)
{
	struct ummunot_filter f = { .mask = UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_UNMAP) };

	(void)o;
	return ioctl(F.fd, UMMUNOT_IOC_SET_FILTER, &f);
}

static void filter_after(struct op *o, long ret, int err)
{
	struct ummunot_stats st;

	(void)err;
	t_get_stats(&F, &st);
	if (ret == -1)
		T_EQ("filter after a failed SET_FILTER", o->st.event_mask, st.event_mask);
	else
		T_EQ("filter after SET_FILTER",
		     UMMUNOT_EVENT_BIT(UMMUNOT_EVENT_UNMAP), st.event_mask);
	t_set_filter(&F, o->st.event_mask);
}

/* GET_STATS, RESYNC */
static long stats_run(struct op *o)
{
	return ioctl(F.fd, UMMUNOT_IOC_GET_STATS, &o->st);
}

static long resync_run(struct op *o)
{
	struct ummunot_resync r;

	(void)o;
	memset(&r, 0, sizeof(r));
	return ioctl(F.fd, UMMUNOT_IOC_RESYNC, &r);
}

/* read() of fdinfo or a sysfs file, opened beforehand */
static void read_setup(struct op *o)
{
	o->fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (o->fd < 0)
		t_fail("open %s: %s", o->path, t_errname(errno));
}

static long read_run(struct op *o)
{
	return read(o->fd, o->rbuf, sizeof(o->rbuf));
}

static void read_after(struct op *o, long ret, int err)
{
	(void)ret; (void)err;
	close(o->fd);
}

/* munmap of a watched range: when it succeeds, its event is in the ring */
static void munmap_setup(struct op *o)
{
	users_snapshot(o);
	o->map = t_map_anon(2, true);
	o->count = 0;
	ring_drain();
	handles[0] = t_register(&F, (uintptr_t)o->map + t_page, t_page, 77);
}

static long munmap_run(struct op *o)
{
	/* The second page only: a split, which allocates. */
	return munmap((char *)o->map + t_page, t_page);
}

static void munmap_after(struct op *o, long ret, int err)
{
	uintptr_t p = (uintptr_t)o->map + t_page;

	(void)err;
	if (ret == -1) {
		/* Nothing was unmapped, so nothing was reported. */
		t_expect_no_event(&F, "after a failed munmap");
		*(volatile char *)p = 1;
		if (munmap((void *)p, t_page))
			t_fail("munmap: %s", t_errname(errno));
	}
	T_ASSERT(t_pending(&F) >= 1, "munmap returned, its event is not in the ring");
	t_expect_event(&F, 77, handles[0], p, p + t_page, UMMUNOT_EVENT_UNMAP);
	t_unregister(&F, handles[0]);
	munmap(o->map, t_page);
	expect_users("munmap", o->users);
}

/* close of a file with its ring mapped elsewhere and 60 regions */
static void close_setup(struct op *o)
{
	struct ummunot_region r[BIG];
	struct ummunot_hello h;
	uint32_t ei;
	int ret;

	users_snapshot(o);
	o->fd = t_dev_open();
	ret = t_hello(o->fd, &h, 0);
	if (ret)
		t_fail("HELLO: %s", t_errname(-ret));
	memset(r, 0, sizeof(r));
	for (int i = 0; i < BIG; i++) {
		r[i].start = (uintptr_t)buf + i * t_page;
		r[i].length = t_page;
	}
	ret = t_register_batch(o->fd, r, BIG, &ei);
	if (ret)
		t_fail("REGISTER: %s", t_errname(-ret));
}

static long close_run(struct op *o)
{
	return close(o->fd);
}

static void close_after(struct op *o, long ret, int err)
{
	(void)ret; (void)err;
	expect_users("close", o->users);
}

/* ------------------------------------------------------------ the walker */

struct tally {
	unsigned int points;	/* fault points the operation reached */
	unsigned int enomem, efault, survived;
};

static void walk(struct op *o)
{
	long long clients0 = stat_file("clients"), regions0 = stat_file("regions");
	struct tally t = { 0 };
	unsigned int n;

	for (n = 1; n <= MAX_POINTS; n++) {
		bool injected;
		long ret;
		int err;

		if (o->setup)
			o->setup(o);
		nth_arm(n);
		errno = 0;
		ret = o->run(o);
		err = errno;
		injected = nth_injected();
		if (ret == -1 && !injected)
			t_fail("%s: failed with %s with no fault injected", o->name,
			       t_errname(err));
		if (ret == -1 && !((err == ENOMEM && o->enomem_ok) ||
				   (err == EFAULT && o->efault_ok)))
			t_fail("%s: fault point %u: %s, not a documented errno (%s%s)",
			       o->name, n, t_errname(err), o->enomem_ok ? "ENOMEM " : "",
			       o->efault_ok ? "EFAULT" : "");
		if (o->after)
			o->after(o, ret, err);
		if (!injected)
			break;
		t.points++;
		if (ret != -1)
			t.survived++;
		else if (err == ENOMEM)
			t.enomem++;
		else
			t.efault++;
	}
	if (n > MAX_POINTS)
		t_fail("%s: more than %u fault points?", o->name, MAX_POINTS);
	T_EQ("clients after the walk", clients0, stat_file("clients"));
	T_EQ("regions after the walk", regions0, stat_file("regions"));
	printf("%-26s %4u fault points: %4u ENOMEM, %4u EFAULT, %4u succeeded anyway\n",
	       o->name, t.points, t.enomem, t.efault, t.survived);
}

/*
 * The first REGISTER of an address space also sets up the kernel's
 * notifier tracking for it (mmu_notifier_subscriptions): walk it in a fresh
 * child for every n.
 */
struct first_result {
	long ret;
	int err;
	bool injected;
};

static void walk_first_register(void)
{
	long long clients0 = stat_file("clients"), regions0 = stat_file("regions");
	struct tally t = { 0 };
	unsigned int n;

	for (n = 1; n <= MAX_POINTS; n++) {
		struct first_result res;
		int pfd[2], status;
		pid_t pid;

		if (pipe(pfd))
			t_fail("pipe: %s", t_errname(errno));
		pid = fork();
		if (pid < 0)
			t_fail("fork: %s", t_errname(errno));
		if (pid == 0) {
			struct ummunot_region r = { .length = t_page, .cookie = 5 };
			struct ummunot_batch b = { .ptr = (uintptr_t)&r, .count = 1 };
			struct ummunot_stats st;
			struct t_file f;
			char *p;

			close(pfd[0]);
			t_file_open(&f, 0);
			p = t_map_anon(1, true);
			r.start = (uintptr_t)p;
			nth_open();
			nth_arm(n);
			errno = 0;
			res.ret = ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b);
			res.err = errno;
			res.injected = nth_injected();
			if (write(pfd[1], &res, sizeof(res)) != sizeof(res))
				_exit(3);
			t_get_stats(&f, &st);
			if (res.ret == -1) {
				T_EQ("regions after a failed first REGISTER", 0, st.regions);
				r.handle = 0;
				if (ioctl(f.fd, UMMUNOT_IOC_REGISTER, &b))
					t_fail("REGISTER after a failed first REGISTER: %s",
					       t_errname(errno));
			} else {
				T_EQ("regions after the first REGISTER", 1, st.regions);
			}
			/* The notifier works: the unmap is reported. */
			munmap(p, t_page);
			t_expect_event(&f, 5, r.handle, r.start, r.start + t_page,
				       UMMUNOT_EVENT_UNMAP);
			t_file_close(&f);
			_exit(0);
		}
		close(pfd[1]);
		if (read(pfd[0], &res, sizeof(res)) != sizeof(res))
			res.injected = false, res.ret = -2;
		close(pfd[0]);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			t_fail("first REGISTER, fault point %u: the child failed "
			       "(status 0x%x)", n, status);
		if (res.ret == -2)
			t_fail("first REGISTER: no result from the child");
		if (res.ret == -1 && !res.injected)
			t_fail("first REGISTER: failed with %s with no fault injected",
			       t_errname(res.err));
		if (res.ret == -1 && res.err != ENOMEM && res.err != EFAULT)
			t_fail("first REGISTER: fault point %u: %s, not a documented "
			       "errno (ENOMEM, EFAULT)", n, t_errname(res.err));
		if (!res.injected)
			break;
		t.points++;
		if (res.ret != -1)
			t.survived++;
		else if (res.err == ENOMEM)
			t.enomem++;
		else
			t.efault++;
	}
	if (n > MAX_POINTS)
		t_fail("first REGISTER: more than %u fault points?", MAX_POINTS);
	T_EQ("clients after the walk", clients0, stat_file("clients"));
	T_EQ("regions after the walk", regions0, stat_file("regions"));
	printf("%-26s %4u fault points: %4u ENOMEM, %4u EFAULT, %4u succeeded anyway\n",
	       "REGISTER (first of an mm)", t.points, t.enomem, t.efault, t.survived);
}

int main(int argc, char **argv)
{
	/* name, may fail with ENOMEM, with EFAULT, setup, run, after, count */
#define OP(n, m, f, s, r, a, c) { .name = n, .enomem_ok = m, .efault_ok = f, \
				  .setup = s, .run = r, .after = a, .count = c }
	struct op ops[] = {
		OP("open", true, true, NULL, open_run, open_after, 0),
		OP("HELLO", true, true, hello_setup, hello_run, hello_after, 0),
		OP("mmap", true, false, mmap_setup, mmap_run, mmap_after, 0),
		OP("REGISTER x3", true, true, reg_setup, reg_run, reg_after, 3),
		OP("REGISTER x60", true, true, reg_setup, reg_run, reg_after, BIG),
		OP("UNREGISTER x3", false, true, unreg_setup, unreg_run, unreg_after, 3),
		OP("UNREGISTER x60", false, true, unreg_setup, unreg_run, unreg_after, BIG),
		OP("REARM x3", false, true, rearm_setup, rearm_run, rearm_after, 3),
		OP("REARM x60", false, true, rearm_setup, rearm_run, rearm_after, BIG),
		OP("SET_FILTER", false, true, filter_setup, filter_run, filter_after, 0),
		OP("GET_STATS", false, true, NULL, stats_run, NULL, 0),
		OP("RESYNC", false, true, NULL, resync_run, NULL, 0),
		OP("read fdinfo", true, true, read_setup, read_run, read_after, 0),
		OP("read users", true, true, read_setup, read_run, read_after, 0),
		OP("read stats/regions", true, true, read_setup, read_run, read_after, 0),
		OP("munmap (event)", true, false, munmap_setup, munmap_run, munmap_after, 0),
		OP("close", true, false, close_setup, close_run, close_after, 0),
	};
#undef OP

	uint64_t h0;

	t_init(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	knobs_set();
	nth_open();
	t_file_open(&F, 0);
	buf = t_map_anon(BIG, true);
	/* One region of F's own, so that the mm's notifier tracking exists. */
	h0 = t_register(&F, (uintptr_t)buf, BIG * t_page, 1);
	snprintf(ops[12].path, sizeof(ops[12].path), "/proc/self/fdinfo/%d", F.fd);
	snprintf(ops[13].path, sizeof(ops[13].path), "%s", USERS_FILE);
	snprintf(ops[14].path, sizeof(ops[14].path), STATS_DIR "/regions");

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		walk(&ops[i]);
		if (i == 2)
			walk_first_register();
	}
	t_unregister(&F, h0);
	t_file_close(&F);
	t_log("every fault point of every path failed cleanly");
	return T_EXIT_PASS;
}
