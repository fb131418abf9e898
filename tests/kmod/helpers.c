// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Shared helpers for the ummunot module tests: ring access, ioctls, checks. */
#include "helpers.h"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *t_prog = "test";
long t_page = 4096;

static pid_t t_owner_pid;

/* ---------------------------------------------------------------- output */

const char *t_errname(int err)
{
	static __thread char buf[32];

	switch (err) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case EINTR: return "EINTR";
	case EBADF: return "EBADF";
	case ENOMEM: return "ENOMEM";
	case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENODEV: return "ENODEV";
	case EINVAL: return "EINVAL";
	case ENOTTY: return "ENOTTY";
	case ENOSPC: return "ENOSPC";
	case E2BIG: return "E2BIG";
	case EAGAIN: return "EAGAIN";
	case EACCES: return "EACCES";
	case ENOSYS: return "ENOSYS";
	case EBADFD: return "EBADFD";
	case EALREADY: return "EALREADY";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case ENXIO: return "ENXIO";
	case EIO: return "EIO";
	default:
		snprintf(buf, sizeof(buf), "errno %d", err);
		return buf;
	}
}

const char *t_event_name(uint32_t type)
{
	static __thread char buf[32];

	switch (type) {
	case UMMUNOT_EVENT_UNMAP: return "UNMAP";
	case UMMUNOT_EVENT_CLEAR: return "CLEAR";
	case UMMUNOT_EVENT_PROTECTION_VMA: return "PROTECTION_VMA";
	case UMMUNOT_EVENT_PROTECTION_PAGE: return "PROTECTION_PAGE";
	case UMMUNOT_EVENT_SOFT_DIRTY: return "SOFT_DIRTY";
	case UMMUNOT_EVENT_RELEASE: return "RELEASE";
	case UMMUNOT_EVENT_MIGRATE: return "MIGRATE";
	case UMMUNOT_EVENT_EXCLUSIVE: return "EXCLUSIVE";
	case UMMUNOT_EVENT_OTHER: return "OTHER";
	default:
		snprintf(buf, sizeof(buf), "type %u", type);
		return buf;
	}
}

void t_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL %s (%s:%d): ", t_prog, file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	if (getpid() != t_owner_pid)
		_exit(T_EXIT_FAIL);	/* a child: the parent restores */
	exit(T_EXIT_FAIL);
}

void t_skip(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "SKIP %s: ", t_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	if (getpid() != t_owner_pid)
		_exit(T_EXIT_SKIP);
	exit(T_EXIT_SKIP);
}

void t_log(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", t_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------- restore on every path */

#define T_MAX_PARAMS 8

struct t_saved_param {
	char path[128];
	char value[32];		/* formatted at save time: no stdio in handlers */
	size_t len;
	bool used;
};

static struct t_saved_param t_params[T_MAX_PARAMS];
static volatile sig_atomic_t t_want_module;
static char t_ko_path[512];

static void t_write_file_raw(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, buf, len) < 0) {
		/* nothing more we can do on the restore path */
	}
	close(fd);
}

static bool t_module_loaded_raw(void)
{
	return access("/sys/module/ummunot", F_OK) == 0;
}

static int t_module_insert_raw(void)
{
	int fd, ret;

	if (!t_ko_path[0])
		return -ENOENT;
	fd = open(t_ko_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0);
	ret = ret ? -errno : 0;
	close(fd);
	return ret;
}

/* Async-signal-safe: open/write/close/finit_module only. */
static void t_restore_raw(void)
{
	if (getpid() != t_owner_pid)
		return;
	if (t_want_module && !t_module_loaded_raw())
		t_module_insert_raw();
	for (int i = 0; i < T_MAX_PARAMS; i++) {
		if (!t_params[i].used)
			continue;
		if (t_module_loaded_raw())
			t_write_file_raw(t_params[i].path, t_params[i].value,
					 t_params[i].len);
	}
}

static void t_atexit(void)
{
	t_restore_raw();
}

static void t_fatal_signal(int sig)
{
	t_restore_raw();
	signal(sig, SIG_DFL);
	raise(sig);
}

void t_init(int argc, char **argv)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL,
				    SIGTERM, SIGINT, SIGHUP, SIGALRM };
	const char *ko = getenv("UMMUNOT_KO");
	struct sigaction sa = { .sa_handler = t_fatal_signal };

	(void)argc;
	if (argv && argv[0]) {
		const char *s = strrchr(argv[0], '/');

		t_prog = s ? s + 1 : argv[0];
	}
	t_owner_pid = getpid();
	t_page = sysconf(_SC_PAGESIZE);
	if (ko)
		snprintf(t_ko_path, sizeof(t_ko_path), "%s", ko);
	setvbuf(stdout, NULL, _IOLBF, 0);
	atexit(t_atexit);
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

void t_param_restore_all(void)
{
	t_restore_raw();
}

long long t_param_get(const char *name)
{
	char path[128], buf[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), UMMUNOT_PARAM_DIR "/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		t_fail("open %s: %s", path, t_errname(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		t_fail("read %s: %s", path, n ? t_errname(errno) : "empty");
	buf[n] = 0;
	return strtoll(buf, NULL, 0);
}

void t_param_set(const char *name, long long value)
{
	char path[128], buf[32];
	struct t_saved_param *slot = NULL;
	int fd, len;

	snprintf(path, sizeof(path), UMMUNOT_PARAM_DIR "/%s", name);
	for (int i = 0; i < T_MAX_PARAMS; i++) {
		if (t_params[i].used && !strcmp(t_params[i].path, path)) {
			slot = &t_params[i];
			break;
		}
	}
	if (!slot) {
		for (int i = 0; i < T_MAX_PARAMS && !slot; i++)
			if (!t_params[i].used)
				slot = &t_params[i];
		if (!slot)
			t_fail("too many saved parameters");
		snprintf(slot->path, sizeof(slot->path), "%s", path);
		slot->len = snprintf(slot->value, sizeof(slot->value), "%lld",
				     t_param_get(name));
		slot->used = true;
	}
	len = snprintf(buf, sizeof(buf), "%lld", value);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		t_fail("open %s for writing: %s", path, t_errname(errno));
	if (write(fd, buf, len) != len) {
		int err = errno;

		close(fd);
		t_fail("write %s=%s: %s", path, buf, t_errname(err));
	}
	close(fd);
	T_EQ(path, value, t_param_get(name));
}

bool t_debug_kernel(void)
{
	const char *k = getenv("UMMUNOT_KERNEL");
	size_t n = k ? strlen(k) : 0;

	return n >= 6 && !strcmp(k + n - 6, "-debug");
}

/* ------------------------------------------------------------- the module */

bool t_module_loaded(void)
{
	return t_module_loaded_raw();
}

long t_module_refcnt(void)
{
	char buf[32];
	ssize_t n;
	int fd = open("/sys/module/ummunot/refcnt", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtol(buf, NULL, 10);
}

int t_module_remove(void)
{
	if (syscall(SYS_delete_module, "ummunot", O_NONBLOCK))
		return -errno;
	return 0;
}

int t_module_insert(void)
{
	int ret = t_module_insert_raw();

	if (ret)
		return ret;
	/* devtmpfs creates the node; give it a moment. */
	for (int i = 0; i < 500; i++) {
		if (access(UMMUNOT_DEV, F_OK) == 0)
			return 0;
		usleep(10000);
	}
	return -ENODEV;
}

void t_module_ensure_loaded_at_exit(void)
{
	if (!t_ko_path[0])
		t_skip("UMMUNOT_KO is not set: cannot insmod the module again after rmmod");
	if (access(t_ko_path, R_OK))
		t_skip("UMMUNOT_KO=%s is not readable: %s", t_ko_path,
		       t_errname(errno));
	t_want_module = 1;
}

/* ------------------------------------------------------------- the file */

int t_dev_open(void)
{
	int fd = open(UMMUNOT_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		/* The rig loads the module before the suite: its absence is a failure. */
		if (errno == ENOENT)
			t_fail("open %s: ENOENT (module %s)", UMMUNOT_DEV,
			       t_module_loaded() ? "loaded but no device node" :
			       "not loaded");
		t_fail("open %s: %s", UMMUNOT_DEV, t_errname(errno));
	}
	return fd;
}

int t_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

int t_hello(int fd, struct ummunot_hello *h, uint32_t ring_entries)
{
	memset(h, 0, sizeof(*h));
	h->abi_version = UMMUNOT_ABI_VERSION;
	h->features = UMMUNOT_FEATURES_V1;
	h->ring_entries = ring_entries;
	return t_ioctl(fd, UMMUNOT_IOC_HELLO, h);
}

int t_register_batch(int fd, struct ummunot_region *r, uint32_t count,
		     uint32_t *error_index)
{
	struct ummunot_batch b = { .ptr = (uintptr_t)r, .count = count,
				   .error_index = 0xdeadbeef };
	int ret = t_ioctl(fd, UMMUNOT_IOC_REGISTER, &b);

	if (error_index)
		*error_index = b.error_index;
	return ret;
}

int t_handle_batch(int fd, unsigned long cmd, const uint64_t *h, uint32_t count,
		   uint32_t *error_index)
{
	struct ummunot_batch b = { .ptr = (uintptr_t)h, .count = count,
				   .error_index = 0xdeadbeef };
	int ret = t_ioctl(fd, cmd, &b);

	if (error_index)
		*error_index = b.error_index;
	return ret;
}

void t_file_open(struct t_file *f, uint32_t ring_entries)
{
	void *map;
	int ret;

	memset(f, 0, sizeof(*f));
	f->fd = t_dev_open();
	ret = t_hello(f->fd, &f->hello, ring_entries);
	if (ret)
		t_fail("HELLO(ring_entries=%u): %s", ring_entries, t_errname(-ret));
	f->map_size = f->hello.ring_mmap_size;
	map = mmap(NULL, f->map_size, PROT_READ | PROT_WRITE, MAP_SHARED,
		   f->fd, f->hello.ring_mmap_offset);
	if (map == MAP_FAILED)
		t_fail("mmap ring (size %llu offset 0x%llx): %s",
		       (unsigned long long)f->hello.ring_mmap_size,
		       (unsigned long long)f->hello.ring_mmap_offset,
		       t_errname(errno));
	f->map = map;
	f->hdr = map;
	f->ring = (struct ummunot_event *)((char *)map + f->hello.header_size);
	T_EQ("ring magic", UMMUNOT_RING_MAGIC, f->hdr->magic);
	T_EQ("ring nr_entries", f->hello.ring_entries, f->hdr->nr_entries);
	T_EQ("ring entry_size", sizeof(struct ummunot_event), f->hdr->entry_size);
	f->cons = __atomic_load_n(&f->hdr->consumer, __ATOMIC_RELAXED);
	f->next_seq = 1;
}

void t_file_close(struct t_file *f)
{
	if (f->map)
		munmap(f->map, f->map_size);
	if (f->fd >= 0)
		close(f->fd);
	f->map = NULL;
	f->hdr = NULL;
	f->ring = NULL;
	f->fd = -1;
}

uint64_t t_register(struct t_file *f, uintptr_t start, uint64_t length,
		    uint64_t cookie)
{
	struct ummunot_region r = { .start = start, .length = length,
				    .cookie = cookie };
	uint32_t idx;
	int ret = t_register_batch(f->fd, &r, 1, &idx);

	if (ret)
		t_fail("REGISTER [0x%llx, +0x%llx) cookie %llu: %s",
		       (unsigned long long)start, (unsigned long long)length,
		       (unsigned long long)cookie, t_errname(-ret));
	return r.handle;
}

void t_unregister(struct t_file *f, uint64_t handle)
{
	int ret = t_handle_batch(f->fd, UMMUNOT_IOC_UNREGISTER, &handle, 1, NULL);

	if (ret)
		t_fail("UNREGISTER handle 0x%llx: %s", (unsigned long long)handle,
		       t_errname(-ret));
}

void t_rearm(struct t_file *f, uint64_t handle)
{
	int ret = t_handle_batch(f->fd, UMMUNOT_IOC_REARM, &handle, 1, NULL);

	if (ret)
		t_fail("REARM handle 0x%llx: %s", (unsigned long long)handle,
		       t_errname(-ret));
}

uint64_t t_set_filter(struct t_file *f, uint64_t mask)
{
	struct ummunot_filter flt = { .mask = mask };
	int ret = t_ioctl(f->fd, UMMUNOT_IOC_SET_FILTER, &flt);

	if (ret)
		t_fail("SET_FILTER 0x%llx: %s", (unsigned long long)mask,
		       t_errname(-ret));
	return flt.mask;
}

void t_get_stats(struct t_file *f, struct ummunot_stats *st)
{
	int ret;

	memset(st, 0, sizeof(*st));
	ret = t_ioctl(f->fd, UMMUNOT_IOC_GET_STATS, st);
	if (ret)
		t_fail("GET_STATS: %s", t_errname(-ret));
}

uint64_t t_resync(struct t_file *f)
{
	struct ummunot_resync rs = { 0 };
	int ret = t_ioctl(f->fd, UMMUNOT_IOC_RESYNC, &rs);

	if (ret)
		t_fail("RESYNC: %s", t_errname(-ret));
	return rs.dropped;
}

/* ------------------------------------------------------------- events */

void t_take(struct t_file *f, struct ummunot_event *ev)
{
	/* (C): pairs with the kernel's (B) store_release of producer. */
	uint64_t prod = t_producer(f);

	if (prod == f->cons)
		t_fail("expected an event in the ring, found none (producer %llu)",
		       (unsigned long long)prod);
	if (prod - f->cons > f->hello.ring_entries)
		t_fail("producer %llu is more than %u ahead of consumer %llu",
		       (unsigned long long)prod, f->hello.ring_entries,
		       (unsigned long long)f->cons);
	*ev = f->ring[f->cons & (f->hello.ring_entries - 1)];
	f->cons++;
	/* (D): pairs with the kernel's (A) load_acquire of consumer. */
	__atomic_store_n(&f->hdr->consumer, f->cons, __ATOMIC_RELEASE);
}

void t_check_event_at(const char *file, int line, const char *what,
		      const struct ummunot_event *ev, uint64_t cookie,
		      uint64_t handle, uint64_t start, uint64_t end,
		      uint32_t type)
{
	if (ev->type != type || ev->cookie != cookie || ev->handle != handle ||
	    ev->start != start || ev->end != end || ev->flags != 0 ||
	    ev->resv[0] || ev->resv[1])
		t_fail_at(file, line,
			  "%s: expected event %s cookie %llu handle 0x%llx [0x%llx, 0x%llx), "
			  "got %s cookie %llu handle 0x%llx [0x%llx, 0x%llx) flags %u seq %llu",
			  what, t_event_name(type), (unsigned long long)cookie,
			  (unsigned long long)handle, (unsigned long long)start,
			  (unsigned long long)end, t_event_name(ev->type),
			  (unsigned long long)ev->cookie,
			  (unsigned long long)ev->handle,
			  (unsigned long long)ev->start,
			  (unsigned long long)ev->end, ev->flags,
			  (unsigned long long)ev->seq);
}

void t_expect_event_at(const char *file, int line, struct t_file *f,
		       uint64_t cookie, uint64_t handle, uint64_t start,
		       uint64_t end, uint32_t type)
{
	/* (C): pairs with (B); no syscall between the caller's trigger and here. */
	uint64_t prod = t_producer(f);
	struct ummunot_event ev;

	if (prod == f->cons)
		t_fail_at(file, line,
			  "expected event %s cookie %llu [0x%llx, 0x%llx) in the ring when the "
			  "syscall returned, got none (producer %llu, overflow %llu)",
			  t_event_name(type), (unsigned long long)cookie,
			  (unsigned long long)start, (unsigned long long)end,
			  (unsigned long long)prod,
			  (unsigned long long)t_overflow(f));
	if (prod - f->cons != 1) {
		fprintf(stderr, "FAIL %s (%s:%d): expected exactly 1 new event, got %llu:\n",
			t_prog, file, line, (unsigned long long)(prod - f->cons));
		while (f->cons != prod && prod - f->cons <= f->hello.ring_entries) {
			t_take(f, &ev);
			fprintf(stderr, "  %s cookie %llu handle 0x%llx [0x%llx, 0x%llx) seq %llu\n",
				t_event_name(ev.type), (unsigned long long)ev.cookie,
				(unsigned long long)ev.handle,
				(unsigned long long)ev.start,
				(unsigned long long)ev.end,
				(unsigned long long)ev.seq);
		}
		t_fail_at(file, line, "wrong number of events (expected 1 %s)",
			  t_event_name(type));
	}
	t_take(f, &ev);
	t_check_event_at(file, line, "event", &ev, cookie, handle, start, end, type);
	if (ev.seq != f->next_seq)
		t_fail_at(file, line, "event seq: expected %llu, got %llu",
			  (unsigned long long)f->next_seq,
			  (unsigned long long)ev.seq);
	f->next_seq++;
}

void t_expect_no_event_at(const char *file, int line, struct t_file *f,
			  const char *what)
{
	uint64_t prod = t_producer(f);	/* (C) */
	struct ummunot_event ev;

	if (prod != f->cons) {
		t_take(f, &ev);
		t_fail_at(file, line,
			  "%s: expected no event, got %llu; first: %s cookie %llu handle 0x%llx "
			  "[0x%llx, 0x%llx) seq %llu", what,
			  (unsigned long long)(prod - f->cons + 1),
			  t_event_name(ev.type), (unsigned long long)ev.cookie,
			  (unsigned long long)ev.handle,
			  (unsigned long long)ev.start,
			  (unsigned long long)ev.end,
			  (unsigned long long)ev.seq);
	}
	if (t_overflow(f))
		t_fail_at(file, line, "%s: expected no overflow, overflow=%llu dropped=%llu",
			  what, (unsigned long long)t_overflow(f),
			  (unsigned long long)t_dropped(f));
}

/* ------------------------------------------------------------- memory */

void t_touch(void *p, size_t len)
{
	volatile char *c = p;

	for (size_t off = 0; off < len; off += t_page)
		c[off] = 1;
}

void *t_map_anon(size_t npages, bool touch)
{
	void *p = mmap(NULL, npages * t_page, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		t_fail("mmap %zu anonymous pages: %s", npages, t_errname(errno));
	if (touch)
		t_touch(p, npages * t_page);
	return p;
}

void *t_map_anon_aligned(size_t npages, size_t align, bool touch)
{
	size_t len = npages * t_page;
	char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *a;

	if (p == MAP_FAILED)
		t_fail("mmap %zu anonymous pages: %s", npages, t_errname(errno));
	a = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
	if (a > p)
		munmap(p, a - p);
	if (p + len + align > a + len)
		munmap(a + len, p + len + align - (a + len));
	if (touch)
		t_touch(a, len);
	return a;
}

void t_expect_events_at(const char *file, int line, struct t_file *f,
			struct t_expect *e, size_t n)
{
	uint64_t prod = t_producer(f);	/* (C): pairs with (B) */
	struct ummunot_event ev;

	if (prod - f->cons != n)
		t_fail_at(file, line, "expected %zu new events, got %llu", n,
			  (unsigned long long)(prod - f->cons));
	for (size_t i = 0; i < n; i++)
		e[i].seen = false;
	for (size_t k = 0; k < n; k++) {
		size_t i;

		t_take(f, &ev);
		for (i = 0; i < n; i++)
			if (!e[i].seen && e[i].handle == ev.handle)
				break;
		if (i == n)
			t_fail_at(file, line,
				  "unexpected event %s cookie %llu handle 0x%llx [0x%llx, 0x%llx) seq %llu",
				  t_event_name(ev.type),
				  (unsigned long long)ev.cookie,
				  (unsigned long long)ev.handle,
				  (unsigned long long)ev.start,
				  (unsigned long long)ev.end,
				  (unsigned long long)ev.seq);
		t_check_event_at(file, line, "event", &ev, e[i].cookie,
				 e[i].handle, e[i].start, e[i].end, e[i].type);
		e[i].seen = true;
		if (ev.seq != f->next_seq)
			t_fail_at(file, line, "event seq: expected %llu, got %llu",
				  (unsigned long long)f->next_seq,
				  (unsigned long long)ev.seq);
		f->next_seq++;
	}
}

/* ------------------------------------------------------ fd passing */

void t_send_fd(int sock, int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char c = 'f';
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	T_EQ("sendmsg", 1, sendmsg(sock, &msg, 0));
}

int t_recv_fd(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	char c;
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	int fd;

	T_EQ("recvmsg", 1, recvmsg(sock, &msg, 0));
	cm = CMSG_FIRSTHDR(&msg);
	T_ASSERT(cm && cm->cmsg_type == SCM_RIGHTS, "no fd received");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

int t_wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		t_fail("waitpid: %s", t_errname(errno));
	if (!WIFEXITED(st))
		t_fail("child killed by signal %d", WTERMSIG(st));
	return WEXITSTATUS(st);
}

void t_become(uid_t uid)
{
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		t_fail("cannot become uid %u: %s", uid, t_errname(errno));
}

void t_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		t_fail("write %s '%s': %s", path, s, t_errname(errno));
	close(fd);
}

bool t_users_budget(unsigned int uid, unsigned long userns, long *memory, long *regions)
{
	static const char path[] = "/sys/class/misc/ummunot/users";
	char line[256];
	bool found = false;
	FILE *f = fopen(path, "r");

	if (!f)
		t_fail("open %s: %s", path, t_errname(errno));
	if (!fgets(line, sizeof(line), f) ||
	    strcmp(line, "uid memory regions rings userns\n"))
		t_fail("%s: unexpected header '%s'", path, line);
	while (fgets(line, sizeof(line), f)) {
		unsigned long ns;
		unsigned int u;
		long m, r, n;

		if (!strcmp(line, "...\n"))
			break;
		if (sscanf(line, "%u %ld %ld %ld %lu", &u, &m, &r, &n, &ns) != 5)
			t_fail("%s: bad line '%s'", path, line);
		if (u == uid && ns == userns) {
			*memory = m;
			*regions = r;
			found = true;
		}
	}
	fclose(f);
	return found;
}

pid_t t_fork_userns(uid_t creator, unsigned int outer_base, unsigned int nr,
		    unsigned long *userns)
{
	int go[2], ready[2], rootfd;
	char path[64], map[64], c;
	struct stat st;
	pid_t pid;

	if (pipe(go) || pipe(ready))
		t_fail("pipe: %s", t_errname(errno));
	pid = fork();
	if (pid < 0)
		t_fail("fork: %s", t_errname(errno));
	if (pid == 0) {
		close(go[1]);
		close(ready[0]);
		rootfd = open("/", O_DIRECTORY | O_CLOEXEC);
		if (rootfd < 0 || chroot("/proc/1/root") || chdir("/"))
			t_fail("leaving the chroot: %s", t_errname(errno));
		t_become(creator);
		if (unshare(CLONE_NEWUSER)) {
			if (errno == EPERM || errno == ENOSPC || errno == EINVAL)
				_exit(T_EXIT_SKIP);
			t_fail("unshare(CLONE_NEWUSER): %s", t_errname(errno));
		}
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(T_EXIT_FAIL);
		close(ready[1]);
		close(go[0]);
		if (setresgid(0, 0, 0) || setresuid(0, 0, 0))
			t_fail("inner root: %s", t_errname(errno));
		if (fchdir(rootfd) || chroot(".") || chdir("/"))
			t_fail("back into the chroot: %s", t_errname(errno));
		close(rootfd);
		return 0;
	}
	close(go[0]);
	close(ready[1]);
	if (read(ready[0], &c, 1) != 1) {
		int status = t_wait_child(pid);

		if (status == T_EXIT_SKIP)
			t_skip("uid %u may not create a user namespace", creator);
		t_fail("namespace child failed (status %d)", status);
	}
	close(ready[0]);
	if (userns) {
		snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
		if (stat(path, &st))
			t_fail("stat %s: %s", path, t_errname(errno));
		*userns = (unsigned long)st.st_ino;
	}
	snprintf(map, sizeof(map), "0 %u %u\n", outer_base, nr);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	t_write_file(path, map);
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	t_write_file(path, map);
	if (write(go[1], "g", 1) != 1)
		t_fail("write: %s", t_errname(errno));
	close(go[1]);
	return pid;
}

static void *t_zap_thread(void *arg)
{
	struct t_zap *z = arg;

	z->ret = madvise(z->p, z->len, MADV_DONTNEED);
	z->err = errno;
	return NULL;
}

void t_zap_start(struct t_zap *z, void *p, size_t len)
{
	int err;

	z->p = p;
	z->len = len;
	z->ret = -1;
	z->err = 0;
	err = pthread_create(&z->th, NULL, t_zap_thread, z);
	if (err)
		t_fail("pthread_create: %s", t_errname(err));
}

int t_zap_join(struct t_zap *z)
{
	int err = pthread_join(z->th, NULL);

	if (err)
		t_fail("pthread_join: %s", t_errname(err));
	return z->ret;
}
