/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Shared helpers for the ummunot module tests that run inside the VM. */
#ifndef UMMUNOT_TESTS_KMOD_HELPERS_H
#define UMMUNOT_TESTS_KMOD_HELPERS_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include <linux/ummunot.h>

#define T_EXIT_PASS	0
#define T_EXIT_FAIL	1
#define T_EXIT_SKIP	77

#define UMMUNOT_DEV	"/dev/ummunot"
#define UMMUNOT_PARAM_DIR	"/sys/module/ummunot/parameters"

extern const char *t_prog;
extern long t_page;

/* Print "FAIL file:line: ..." and exit 1 (atexit restores run). */
void t_fail_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
/* Print "SKIP: ..." to stderr and exit 77. */
void t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void t_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define t_fail(...)	t_fail_at(__FILE__, __LINE__, __VA_ARGS__)

#define T_ASSERT(cond, fmt, ...) do {				\
	if (!(cond))							\
		t_fail_at(__FILE__, __LINE__, "assertion '%s' failed: " fmt, \
			  #cond, ##__VA_ARGS__);			\
} while (0)

/* Expect a u64 value: "what: expected X, got Y". */
#define T_EQ(what, expected, got) do {					\
	unsigned long long _e = (unsigned long long)(expected);		\
	unsigned long long _g = (unsigned long long)(got);		\
	if (_e != _g)							\
		t_fail_at(__FILE__, __LINE__,				\
			  "%s: expected %llu (0x%llx), got %llu (0x%llx)", \
			  (what), _e, _e, _g, _g);			\
} while (0)

/* Expect a syscall-like expression to return -1 with errno == err. */
#define T_ERRNO(what, err, expr) do {					\
	errno = 0;							\
	long _r = (long)(expr);						\
	int _err = errno;						\
	if (_r != -1 || _err != (err))					\
		t_fail_at(__FILE__, __LINE__,				\
			  "%s: expected -1/%s, got %ld/%s", (what),	\
			  t_errname(err), _r, _r == -1 ?		\
			  t_errname(_err) : "no error");		\
} while (0)

/* Expect a syscall-like expression to succeed (not return -1). */
#define T_OK(what, expr) ({						\
	errno = 0;							\
	long _r = (long)(expr);						\
	if (_r == -1)							\
		t_fail_at(__FILE__, __LINE__, "%s: expected success, got %s", \
			  (what), t_errname(errno));			\
	_r;								\
})

const char *t_errname(int err);
const char *t_event_name(uint32_t type);

/* Call first in main(): sets t_prog, installs restore-on-exit handlers. */
void t_init(int argc, char **argv);

/*
 * One open /dev/ummunot with its ring mapped.  next_seq is the seq the next
 * event is expected to carry (tests that expect a gap adjust it).
 */
struct t_file {
	int fd;
	struct ummunot_hello hello;
	void *map;
	size_t map_size;
	struct ummunot_ring_header *hdr;
	struct ummunot_event *ring;
	uint64_t cons;
	uint64_t next_seq;
};

/* Opens /dev/ummunot; fails the test (not a skip) when it is missing. */
int t_dev_open(void);
/* Open, HELLO (features = UMMUNOT_FEATURES_V1), mmap; fails on any error. */
void t_file_open(struct t_file *f, uint32_t ring_entries);
void t_file_close(struct t_file *f);

/* Ioctl wrappers returning 0 or -errno (errno preserved too). */
int t_ioctl(int fd, unsigned long cmd, void *arg);
int t_hello(int fd, struct ummunot_hello *h, uint32_t ring_entries);
int t_register_batch(int fd, struct ummunot_region *r, uint32_t count,
		     uint32_t *error_index);
int t_handle_batch(int fd, unsigned long cmd, const uint64_t *h, uint32_t count,
		   uint32_t *error_index);

/* Register one region; fails the test on error.  Returns the handle. */
uint64_t t_register(struct t_file *f, uintptr_t start, uint64_t length,
		    uint64_t cookie);
void t_unregister(struct t_file *f, uint64_t handle);
void t_rearm(struct t_file *f, uint64_t handle);
/* Returns the previous mask. */
uint64_t t_set_filter(struct t_file *f, uint64_t mask);
void t_get_stats(struct t_file *f, struct ummunot_stats *st);
uint64_t t_resync(struct t_file *f);

/* Pass a descriptor over a UNIX socket (SCM_RIGHTS); fail the test on error. */
void t_send_fd(int sock, int fd);
int t_recv_fd(int sock);

/* Wait for a child; fail the test unless it exited.  Returns its status. */
int t_wait_child(pid_t pid);

/* (C): acquire load of the producer index; pairs with the kernel's (B). */
static inline uint64_t t_producer(const struct t_file *f)
{
	return __atomic_load_n(&f->hdr->producer, __ATOMIC_ACQUIRE);
}

/* (F): acquire load of the generation; pairs with the kernel's (E). */
static inline uint64_t t_generation(const struct t_file *f)
{
	return __atomic_load_n(&f->hdr->generation, __ATOMIC_ACQUIRE);
}

/* Plain reads of the overflow/dropped words, ordered after a (C)/(F) load. */
static inline uint64_t t_overflow(const struct t_file *f)
{
	return __atomic_load_n(&f->hdr->overflow, __ATOMIC_ACQUIRE);
}

static inline uint64_t t_dropped(const struct t_file *f)
{
	return __atomic_load_n(&f->hdr->dropped, __ATOMIC_ACQUIRE);
}

/* Number of events the kernel has published and we have not consumed. */
static inline uint64_t t_pending(const struct t_file *f)
{
	return t_producer(f) - f->cons;
}

/*
 * Take the next event out of the ring (copy), advancing the consumer with
 * (D): store_release(&hdr->consumer), which pairs with the kernel's (A).
 * Fails the test when no event is pending.
 */
void t_take(struct t_file *f, struct ummunot_event *ev);

/*
 * The core check: exactly one new event is in the ring right now (producer
 * read with (C), no syscall in between) and it is (cookie, handle, [start,
 * end), type) with seq == f->next_seq.  Consumes it.
 */
#define t_expect_event(f, cookie, handle, start, end, type) \
	t_expect_event_at(__FILE__, __LINE__, (f), (cookie), (handle), \
			  (start), (end), (type))
void t_expect_event_at(const char *file, int line, struct t_file *f,
		       uint64_t cookie, uint64_t handle, uint64_t start,
		       uint64_t end, uint32_t type);

/* A set of expected events, matched in any order by handle. */
struct t_expect {
	uint64_t cookie;
	uint64_t handle;
	uint64_t start;
	uint64_t end;
	uint32_t type;
	bool seen;
};

/*
 * Exactly n new events are in the ring right now ((C), no syscall in
 * between), one per expectation, with consecutive seqs from f->next_seq.
 */
#define t_expect_events(f, e, n) t_expect_events_at(__FILE__, __LINE__, (f), (e), (n))
void t_expect_events_at(const char *file, int line, struct t_file *f,
			struct t_expect *e, size_t n);

/* No unconsumed event in the ring (and no overflow). */
#define t_expect_no_event(f, what) t_expect_no_event_at(__FILE__, __LINE__, (f), (what))
void t_expect_no_event_at(const char *file, int line, struct t_file *f,
			  const char *what);

/* Check one copied event against expectations (seq not checked). */
#define t_check_event(what, ev, cookie, handle, start, end, type) \
	t_check_event_at(__FILE__, __LINE__, (what), (ev), (cookie), (handle), \
			 (start), (end), (type))
void t_check_event_at(const char *file, int line, const char *what,
		      const struct ummunot_event *ev, uint64_t cookie,
		      uint64_t handle, uint64_t start, uint64_t end,
		      uint32_t type);

/* Anonymous private mapping of npages, optionally touched (written). */
void *t_map_anon(size_t npages, bool touch);
/* Same, placed at a multiple of align (a power of two). */
void *t_map_anon_aligned(size_t npages, size_t align, bool touch);
void t_touch(void *p, size_t len);

/*
 * A second thread that runs madvise(p, len, MADV_DONTNEED) once: one
 * invalidation over the whole range.  t_zap_join() waits for it and
 * returns madvise's result (0 or -1 with errno in z->err).
 */
struct t_zap {
	void *p;
	size_t len;
	int ret;
	int err;
	pthread_t th;
};
void t_zap_start(struct t_zap *z, void *p, size_t len);
int t_zap_join(struct t_zap *z);

/*
 * Module parameters.  t_param_set() remembers the first value it replaced
 * and puts it back at exit, on every path (exit, t_fail, fatal signals).
 */
long long t_param_get(const char *name);
void t_param_set(const char *name, long long value);
void t_param_restore_all(void);

/*
 * /sys/class/misc/ummunot/users: the line of the budget (@uid, @userns)
 * (userns 0: a user's budget; else a namespace's inode number), its memory
 * and regions; false if it has no line.  Fails the test on a malformed file.
 */
bool t_users_budget(unsigned int uid, unsigned long userns, long *memory, long *regions);
/*
 * fork() a child in a new user namespace that @creator creates, whose uids
 * and gids 0..@nr-1 map to @outer_base.. (written by the calling process,
 * as newuidmap or a container runtime does), and that is root in it.  The
 * rig runs tests chrooted, and a chrooted process may not create a user
 * namespace: the child leaves for pid 1's root first and comes back as the
 * namespace's root.  Returns 0 in the child, its pid in the parent (the
 * namespace's inode number in *@userns when not NULL).  Skips the test when
 * @creator may not create user namespaces.
 */
pid_t t_fork_userns(uid_t creator, unsigned int outer_base, unsigned int nr,
		    unsigned long *userns);
/* setgroups(0) and all three uids and gids to @uid; fails the test if not. */
void t_become(uid_t uid);
/* Write @s to @path (a /proc or /sys file); fails the test if not whole. */
void t_write_file(const char *path, const char *s);

/* /sys/module/ummunot/refcnt, or -1 when the module is not loaded. */
long t_module_refcnt(void);
bool t_module_loaded(void);
/* finit_module($UMMUNOT_KO); waits for /dev/ummunot.  0 or -errno. */
int t_module_insert(void);
/* delete_module("ummunot", O_NONBLOCK).  0 or -errno. */
int t_module_remove(void);
/* Make sure the module is loaded at exit (for tests that rmmod). */
void t_module_ensure_loaded_at_exit(void);

/*
 * Whether the guest runs a debug kernel (UMMUNOT_KERNEL ends in "-debug":
 * KASAN, lockdep, kmemleak), where tests that only repeat work for
 * coverage do fewer rounds.
 */
bool t_debug_kernel(void);

/* Monotonic time in seconds. */
double t_now(void);

#endif
