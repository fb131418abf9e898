// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ummunot-fuzz: a seeded, multi-process, multi-threaded random fuzzer of
 * /dev/ummunot that checks every result against Documentation/abi.rst.
 *
 * Documentation/fuzzing.rst describes what it does and how to reproduce a
 * failure.  It talks to include/uapi/linux/ummunot.h directly and depends on
 * nothing else.
 *
 * Process layout: the controlling process saves the module parameters,
 * forks --procs workers (each with --threads threads and one "receiver"
 * child that is handed descriptors over SCM_RIGHTS), writes module
 * parameters in and out of range while they run, then restores the
 * parameters and checks that the module is back to no clients, no regions,
 * no per-user charge, an unchanged taint mask and a kernel log without bug
 * reports.
 *
 * Every thread draws its operations from its own PRNG, seeded from the run
 * seed, its process index and its thread index: the same seed and the same
 * scheduling give the same sequence per thread.  A contract violation
 * prints "FUZZ-FAIL", the seed, the process/thread/operation number and the
 * operation, and makes the run exit 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/ummunot.h>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define DEV		"/dev/ummunot"
#define PARAM_DIR	"/sys/module/ummunot/parameters"
#define STATS_DIR	"/sys/class/misc/ummunot/stats"
#define USERS_FILE	"/sys/class/misc/ummunot/users"

#define MAX_PROCS	16
#define MAX_THREADS	16
#define NSLOTS		3
#define MAXMAPS		4
#define MAXFRAGS	64
#define LIVE_MAX	2048
#define DEAD_MAX	256
#define TAB_BITS	15
#define TAB_SIZE	(1u << TAB_BITS)
#define ARENA_PAGES	256
#define BIG_HANDLES	16384
#define SCRATCH_PAGES	24

/* ------------------------------------------------------------ options */

static uint64_t opt_seed;
static uint64_t opt_calls = 150000;
static double opt_duration = 25;
static int opt_procs = 3;
static int opt_threads = 3;
static bool opt_params = true;
static bool opt_drop_uid = true;
static bool opt_trace;
static double opt_progress = 300;	/* seconds between progress lines; 0: none */

/* Shared between every process of the run (MAP_SHARED anonymous). */
struct shared {
	volatile int stop;
	volatile int failed;
	uint64_t calls;
	uint64_t violations;
	uint64_t errs_expected;		/* calls that failed as documented */
	uint64_t enospc;		/* documented-limit refusals */
	uint64_t events_read;
	uint64_t forks;
	uint64_t passes;
};
static struct shared *sh;

static long page_size;
static int my_proc = -1;	/* -1: the controlling process */
static double t_start;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ PRNG */

struct rng { uint64_t s[4]; };

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t x = seed ^ (a * 0x100000001b3ULL) ^ (b << 32) ^ 0x5eed;

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rnd(struct rng *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
	s[2] ^= t; s[3] = rotl(s[3], 45);
	return res;
}

/* Uniform in [0, n). */
static uint64_t below(struct rng *r, uint64_t n) { return n ? rnd(r) % n : 0; }
static bool chance(struct rng *r, unsigned pct) { return below(r, 100) < pct; }

/* ------------------------------------------------------------ errnos */

static const char *errname(int e)
{
	static __thread char b[24];

	switch (e) {
	case 0: return "OK";
	case EPERM: return "EPERM"; case ENOENT: return "ENOENT";
	case EINTR: return "EINTR"; case EBADF: return "EBADF";
	case EAGAIN: return "EAGAIN"; case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES"; case EFAULT: return "EFAULT";
	case EBUSY: return "EBUSY"; case EINVAL: return "EINVAL";
	case ENOTTY: return "ENOTTY"; case ENOSPC: return "ENOSPC";
	case E2BIG: return "E2BIG"; case ERANGE: return "ERANGE";
	case EBADFD: return "EBADFD"; case EALREADY: return "EALREADY";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case EOPNOTSUPP: return "EOPNOTSUPP"; case EIO: return "EIO";
	case ESPIPE: return "ESPIPE"; case ENODEV: return "ENODEV";
	default: snprintf(b, sizeof(b), "errno%d", e); return b;
	}
}

/* Errno sets as bit masks over errno values (all < 128). */
typedef unsigned __int128 eset;
#define B(e)	((eset)1 << (e))
static bool in_set(int e, eset set)
{
	return e > 0 && e < 128 && (set & B(e));
}

/* ------------------------------------------------------------ state */

struct map { char *addr; size_t len; int prot; };
struct frag { char *addr; size_t len; };

struct hent { uint64_t handle, cookie, start, end, info; };

struct slot {
	pthread_rwlock_t rw;	/* write: open/close/HELLO/mapping changes */
	int fd;
	unsigned epoch;
	bool hello_done;
	struct ummunot_hello hello;
	struct map maps[MAXMAPS];
	int nmaps;
	struct frag frags[MAXFRAGS];
	int nfrags;

	pthread_mutex_t cons_lock;
	uint64_t cons, last_prod, last_gen, last_dropped, last_seq;
	volatile int scribbled;

	pthread_mutex_t reg_lock;	/* held across REGISTER + recording */
	struct hent *tab;
	unsigned tab_used;
	bool tab_full;

	pthread_mutex_t filt_lock;	/* held across SET_FILTER */
	uint64_t mask, mask_union;

	pthread_mutex_t stats_lock;
	struct ummunot_stats last;
	bool have_last;
	uint64_t resync_sum;
	uint64_t resyncs;
};

static struct slot slots[NSLOTS];

/* Mappings of closed files (the file lives until they are gone). */
static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct frag orphans[32];
static int norphans;

struct tslot {
	unsigned epoch;
	uint64_t live[LIVE_MAX];
	unsigned nlive;
	uint64_t dead[DEAD_MAX];
	unsigned ndead, dead_pos;
};

struct thr {
	int idx;
	pthread_t tid;
	struct rng r;
	uint64_t op;		/* operation number in this thread */
	uint64_t calls, budget;
	uint64_t published;	/* of calls, added to sh->calls so far */
	char desc[512];
	struct tslot ts[NSLOTS];
	char *scratch;		/* SCRATCH_PAGES pages, then a PROT_NONE guard */
	char *guard;
	char *ro;		/* one page, read-only while a call uses it */
	uint64_t *big;		/* BIG_HANDLES handles */
};

static struct thr thrs[MAX_THREADS];
static char *arena;		/* ARENA_PAGES pages, churned by every thread */
static uintptr_t quiet_base;	/* never mapped: registrations that never fire */

/* Receiver of descriptors over SCM_RIGHTS. */
static int recv_sock = -1;
static pid_t recv_pid = -1;
static pthread_mutex_t recv_lock = PTHREAD_MUTEX_INITIALIZER;

static __thread struct thr *cur;

/* ------------------------------------------------------------ reporting */

static void fail_at(int line, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail_at(int line, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	__atomic_add_fetch(&sh->violations, 1, __ATOMIC_RELAXED);
	sh->failed = 1;
	sh->stop = 1;
	if (cur)
		fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 " proc=%d thread=%d op=%" PRIu64
			" (line %d)\n  operation: %s\n  violation: %s\n",
			opt_seed, my_proc, cur->idx, cur->op, line, cur->desc, msg);
	else
		fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 " proc=%d (line %d): %s\n",
			opt_seed, my_proc, line, msg);
	fflush(stderr);
}
#define FAIL(...) fail_at(__LINE__, __VA_ARGS__)

static void describe(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void describe(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cur->desc, sizeof(cur->desc), fmt, ap);
	va_end(ap);
	if (opt_trace)
		fprintf(stderr, "trace p%d t%d #%" PRIu64 ": %s\n", my_proc,
			cur->idx, cur->op, cur->desc);
}

static inline void count_call(void) { cur->calls++; }

/*
 * Check a result: ret is 0/-1 (or a pointer compared by the caller), err
 * the errno.  ok: success allowed.  lo/hi: allowed errnos.
 */
static bool expect(int line, const char *what, int err, bool ok, eset set)
{
	if (err == 0) {
		if (!ok)
			fail_at(line, "%s: succeeded, the documentation says it must fail", what);
		return ok;
	}
	if (!in_set(err, set)) {
		char names[256] = "";

		for (int e = 1; e < 128; e++)
			if (in_set(e, set)) {
				strncat(names, errname(e), sizeof(names) - strlen(names) - 2);
				strncat(names, " ", sizeof(names) - strlen(names) - 1);
			}
		fail_at(line, "%s: got %s, documented: %s%s", what, errname(err),
			ok ? "success or " : "", names);
		return false;
	}
	__atomic_add_fetch(&sh->errs_expected, 1, __ATOMIC_RELAXED);
	if (err == ENOSPC)
		__atomic_add_fetch(&sh->enospc, 1, __ATOMIC_RELAXED);
	return true;
}
#define EXPECT(what, err, ok, set) expect(__LINE__, (what), (err), (ok), (set))

static int xioctl(int fd, unsigned long cmd, void *arg)
{
	count_call();
	return ioctl(fd, cmd, arg) ? errno : 0;
}

/* ------------------------------------------------------------ handle table */

static struct hent *tab_find(struct slot *s, uint64_t h)
{
	uint64_t i = (h * 0x9e3779b97f4a7c15ULL) >> (64 - TAB_BITS);

	for (unsigned n = 0; n < TAB_SIZE; n++, i = (i + 1) & (TAB_SIZE - 1)) {
		if (s->tab[i].handle == h)
			return &s->tab[i];
		if (!s->tab[i].handle)
			return NULL;
	}
	return NULL;
}

/* Record a new handle; false if it was already known (reused). */
static bool tab_add(struct slot *s, uint64_t h, uint64_t cookie, uint64_t start,
		    uint64_t end, uint64_t info)
{
	uint64_t i = (h * 0x9e3779b97f4a7c15ULL) >> (64 - TAB_BITS);

	if (s->tab_used >= TAB_SIZE * 3 / 4) {
		s->tab_full = true;
		return true;
	}
	for (;; i = (i + 1) & (TAB_SIZE - 1)) {
		if (s->tab[i].handle == h)
			return false;
		if (!s->tab[i].handle)
			break;
	}
	s->tab[i] = (struct hent){ h, cookie, start, end, info };
	s->tab_used++;
	return true;
}

/* ------------------------------------------------------------ per-thread handles */

static struct tslot *tslot_of(struct slot *s)
{
	struct tslot *t = &cur->ts[s - slots];

	if (t->epoch != s->epoch) {
		t->epoch = s->epoch;
		t->nlive = t->ndead = t->dead_pos = 0;
	}
	return t;
}

static void dead_add(struct tslot *t, uint64_t h)
{
	t->dead[t->dead_pos] = h;
	t->dead_pos = (t->dead_pos + 1) % DEAD_MAX;
	if (t->ndead < DEAD_MAX)
		t->ndead++;
}

/* A handle no region of this file can have (bits 48..63 set, id 0, ...). */
static uint64_t garbage_handle(struct rng *r)
{
	switch (below(r, 4)) {
	case 0: return 0;
	case 1: return rnd(r) | (1ULL << (48 + below(r, 16)));
	case 2: return ~0ULL;
	default: return (0xfff0ULL + below(r, 16)) << 32 | (1 + below(r, 1000));
	}
}

/* ------------------------------------------------------------ addresses */

#define TASK_LIMIT_MAX	(1ULL << 56)	/* above: beyond user space on any x86-64 */

static uint64_t random_valid_range(struct rng *r, uint64_t *len)
{
	uint64_t start;

	switch (below(r, 10)) {
	case 0 ... 6: {		/* inside the arena: churn makes events */
		uint64_t off = below(r, ARENA_PAGES * page_size);

		start = (uintptr_t)arena + off;
		*len = 1 + below(r, chance(r, 70) ? 3 * (uint64_t)page_size :
				 ARENA_PAGES * (uint64_t)page_size - off);
		if (start + *len > (uintptr_t)arena + ARENA_PAGES * page_size)
			*len = (uintptr_t)arena + ARENA_PAGES * page_size - start;
		break;
	}
	case 7:			/* never mapped: quiet */
		start = quiet_base + below(r, 1ULL << 30);
		*len = 1 + below(r, 1ULL << 20);
		break;
	case 8:			/* anywhere low */
		start = below(r, 1ULL << 46);
		*len = 1 + below(r, 1ULL << 32);
		break;
	default:		/* the scratch/ring area of this thread */
		start = (uintptr_t)cur->scratch + below(r, page_size);
		*len = 1 + below(r, 4 * page_size);
		break;
	}
	return start;
}

/* An element that must be refused with EINVAL. */
static void make_bad_region(struct rng *r, struct ummunot_region *u, const char **why)
{
	uint64_t len;

	u->start = random_valid_range(r, &len);
	u->length = len;
	switch (below(r, 6)) {
	case 0: u->length = 0; *why = "length 0"; break;
	case 1: u->start = ~0ULL - below(r, 4096); u->length = 4096 + below(r, 1 << 20);
		*why = "wrapping range"; break;
	case 2: u->start = TASK_LIMIT_MAX + below(r, 1ULL << 40); *why = "start beyond user space"; break;
	case 3: u->length = TASK_LIMIT_MAX + below(r, 1ULL << 40); *why = "end beyond user space"; break;
	case 4: u->flags = 1u << below(r, 32); *why = "flags non-zero"; break;
	default: u->resv = 1 + (uint32_t)below(r, 0xffffffffu); *why = "resv non-zero"; break;
	}
}

/* ------------------------------------------------------------ ring reading */

static bool valid_type(uint32_t t) { return t >= 1 && t <= 9; }

static void check_header_const(struct slot *s, const struct ummunot_ring_header *h,
			       const char *where)
{
	const struct ummunot_hello *he = &s->hello;

	if (h->magic != UMMUNOT_RING_MAGIC || h->version != UMMUNOT_RING_VERSION ||
	    h->header_size != he->header_size || h->entry_size != he->entry_size ||
	    h->nr_entries != he->ring_entries || h->entry_mask != he->ring_entries - 1 ||
	    h->features != he->features)
		FAIL("%s: ring header constants wrong: magic 0x%x version %u header_size %u "
		     "entry_size %u nr_entries %u entry_mask 0x%x features 0x%llx (HELLO said "
		     "header_size %u entry_size %u entries %u features 0x%llx)", where,
		     h->magic, h->version, h->header_size, h->entry_size, h->nr_entries,
		     h->entry_mask, (unsigned long long)h->features, he->header_size,
		     he->entry_size, he->ring_entries, (unsigned long long)he->features);
}

/* Called with s->rw held for reading. */
static void op_read_ring(struct slot *s)
{
	struct ummunot_ring_header *h;
	struct ummunot_event *ents;
	uint64_t gen, prod, dropped, resyncs, n;
	bool check;

	if (!s->hello_done || !s->nmaps || !(s->maps[0].prot & PROT_READ))
		return;
	describe("read ring slot %d (map %p)", (int)(s - slots), s->maps[0].addr);
	h = (void *)s->maps[0].addr;
	ents = (void *)(s->maps[0].addr + s->hello.header_size);
	pthread_mutex_lock(&s->cons_lock);
	check = !s->scribbled;
	gen = __atomic_load_n(&h->generation, __ATOMIC_ACQUIRE);	/* (F) */
	prod = __atomic_load_n(&h->producer, __ATOMIC_ACQUIRE);	/* (C) */
	dropped = __atomic_load_n(&h->dropped, __ATOMIC_ACQUIRE);
	resyncs = __atomic_load_n(&s->resyncs, __ATOMIC_ACQUIRE);
	if (check) {
		check_header_const(s, h, "ring read");
		if (prod < s->last_prod || gen < s->last_gen || dropped < s->last_dropped)
			FAIL("ring header went backwards: producer %llu -> %llu, generation "
			     "%llu -> %llu, dropped %llu -> %llu",
			     (unsigned long long)s->last_prod, (unsigned long long)prod,
			     (unsigned long long)s->last_gen, (unsigned long long)gen,
			     (unsigned long long)s->last_dropped, (unsigned long long)dropped);
		if (gen > prod + dropped + resyncs)
			FAIL("generation %llu > producer %llu + dropped %llu + resyncs %llu",
			     (unsigned long long)gen, (unsigned long long)prod,
			     (unsigned long long)dropped, (unsigned long long)resyncs);
		if (prod - s->cons > s->hello.ring_entries)
			FAIL("producer %llu is more than %u entries ahead of consumer %llu",
			     (unsigned long long)prod, s->hello.ring_entries,
			     (unsigned long long)s->cons);
		s->last_prod = prod;
		s->last_gen = gen;
		s->last_dropped = dropped;
	}
	if (!(s->maps[0].prot & PROT_WRITE)) {
		pthread_mutex_unlock(&s->cons_lock);
		return;
	}
	if (!check) {
		/* Whatever is there: read it, move the consumer. */
		volatile uint64_t sink = 0;

		n = prod - s->cons;
		if (n > s->hello.ring_entries)
			n = s->hello.ring_entries;
		for (uint64_t i = 0; i < n; i++)
			sink += ents[(s->cons + i) & (s->hello.ring_entries - 1)].seq;
		(void)sink;
		s->cons = prod;
		__atomic_store_n(&h->consumer, prod, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&s->cons_lock);
		return;
	}
	for (uint64_t i = s->cons; i != prod; i++) {
		struct ummunot_event ev = ents[i & (s->hello.ring_entries - 1)];
		struct hent *he;
		uint64_t mu;

		__atomic_add_fetch(&sh->events_read, 1, __ATOMIC_RELAXED);
		mu = __atomic_load_n(&s->mask_union, __ATOMIC_ACQUIRE);
		if (!valid_type(ev.type) || !(mu & UMMUNOT_EVENT_BIT(ev.type)) ||
		    ev.flags || ev.resv[0] || ev.resv[1] || ev.start >= ev.end ||
		    ev.seq <= s->last_seq || ev.seq < i + 1 || ev.seq - (i + 1) > dropped ||
		    (ev.handle >> 48)) {
			FAIL("bad event at index %llu: type %u flags %u resv %llx/%llx "
			     "[0x%llx, 0x%llx) seq %llu (previous %llu, dropped %llu, masks "
			     "ever set 0x%llx) handle 0x%llx",
			     (unsigned long long)i, ev.type, ev.flags,
			     (unsigned long long)ev.resv[0], (unsigned long long)ev.resv[1],
			     (unsigned long long)ev.start, (unsigned long long)ev.end,
			     (unsigned long long)ev.seq, (unsigned long long)s->last_seq,
			     (unsigned long long)dropped, (unsigned long long)mu,
			     (unsigned long long)ev.handle);
			break;
		}
		s->last_seq = ev.seq;
		pthread_mutex_lock(&s->reg_lock);
		he = tab_find(s, ev.handle);
		if (!he && !s->tab_full)
			FAIL("event for handle 0x%llx that no REGISTER of this file returned "
			     "(type %u [0x%llx, 0x%llx) seq %llu)",
			     (unsigned long long)ev.handle, ev.type,
			     (unsigned long long)ev.start, (unsigned long long)ev.end,
			     (unsigned long long)ev.seq);
		else if (he && (he->cookie != ev.cookie || ev.start < he->start ||
				ev.end > he->end))
			FAIL("event for handle 0x%llx: cookie 0x%llx [0x%llx, 0x%llx), region "
			     "registered with cookie 0x%llx as [0x%llx, 0x%llx)",
			     (unsigned long long)ev.handle, (unsigned long long)ev.cookie,
			     (unsigned long long)ev.start, (unsigned long long)ev.end,
			     (unsigned long long)he->cookie, (unsigned long long)he->start,
			     (unsigned long long)he->end);
		pthread_mutex_unlock(&s->reg_lock);
	}
	s->cons = prod;
	__atomic_store_n(&h->consumer, prod, __ATOMIC_RELEASE);	/* (D) */
	pthread_mutex_unlock(&s->cons_lock);
}

static void op_scribble(struct slot *s)
{
	char *m;
	size_t off;
	uint64_t v;

	if (!s->hello_done || !s->nmaps || !(s->maps[0].prot & PROT_WRITE))
		return;
	m = s->maps[0].addr;
	v = chance(&cur->r, 50) ? rnd(&cur->r) : below(&cur->r, 1 << 20);
	switch (below(&cur->r, 4)) {
	case 0: off = UMMUNOT_RING_HEADER_CONSUMER_OFFSET; break;
	case 1: off = below(&cur->r, s->hello.header_size / 8) * 8; break;
	case 2: off = UMMUNOT_RING_USER_AREA_OFFSET +
		      below(&cur->r, UMMUNOT_RING_USER_AREA_SIZE / 8) * 8;
		break;
	default: off = below(&cur->r, s->maps[0].len / 8) * 8; break;
	}
	describe("scribble 0x%llx at ring offset %zu (slot %d)", (unsigned long long)v,
		 off, (int)(s - slots));
	/*
	 * The user area is the consumer's: writing it is no scribble.  Under
	 * the reader's lock, so that a read in progress never sees a scribbled
	 * word with its checks still on.
	 */
	pthread_mutex_lock(&s->cons_lock);
	if (off < UMMUNOT_RING_USER_AREA_OFFSET ||
	    off >= UMMUNOT_RING_USER_AREA_OFFSET + UMMUNOT_RING_USER_AREA_SIZE)
		s->scribbled = 1;
	__atomic_store_n((uint64_t *)(m + off), v, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->cons_lock);
	count_call();
}

/* ------------------------------------------------------------ open/close/HELLO */

/* s->rw held for writing. */
static void unmap_all(struct slot *s, bool orphan)
{
	for (int i = 0; i < s->nmaps; i++) {
		pthread_mutex_lock(&orphan_lock);
		if (orphan && norphans < 32) {
			orphans[norphans++] = (struct frag){ s->maps[i].addr, s->maps[i].len };
			pthread_mutex_unlock(&orphan_lock);
			continue;
		}
		pthread_mutex_unlock(&orphan_lock);
		munmap(s->maps[i].addr, s->maps[i].len);
	}
	s->nmaps = 0;
	for (int i = 0; i < s->nfrags; i++)
		munmap(s->frags[i].addr, s->frags[i].len);
	s->nfrags = 0;
}

static void slot_reset(struct slot *s)
{
	s->epoch++;
	s->hello_done = false;
	memset(&s->hello, 0, sizeof(s->hello));
	s->cons = s->last_prod = s->last_gen = s->last_dropped = s->last_seq = 0;
	s->scribbled = 0;
	memset(s->tab, 0, TAB_SIZE * sizeof(*s->tab));
	s->tab_used = 0;
	s->tab_full = false;
	s->mask = UMMUNOT_EVENT_MASK_DEFAULT;
	s->mask_union = UMMUNOT_EVENT_MASK_DEFAULT;
	s->have_last = false;
	s->resync_sum = 0;
	s->resyncs = 0;
}

static void op_close(struct slot *s)
{
	bool orphan = chance(&cur->r, 40);

	describe("close slot %d fd %d%s", (int)(s - slots), s->fd,
		 orphan ? " keeping its ring mapped" : "");
	unmap_all(s, orphan);
	count_call();
	if (close(s->fd))
		FAIL("close: %s", errname(errno));
	s->fd = -1;
	slot_reset(s);
}

static void op_open(struct slot *s)
{
	describe("open slot %d", (int)(s - slots));
	count_call();
	s->fd = open(DEV, O_RDWR | O_CLOEXEC);
	if (s->fd < 0) {
		int e = errno;

		EXPECT("open " DEV, e, false, B(ENOMEM) | B(EMFILE) | B(ENFILE));
		s->fd = -1;
		return;
	}
	slot_reset(s);
}

static bool ring_mmap_valid(struct slot *s, char *fixed, char **out)
{
	int flags = MAP_SHARED | (fixed ? MAP_FIXED : 0);
	char *m;

	count_call();
	m = mmap(fixed, s->hello.ring_mmap_size, PROT_READ | PROT_WRITE, flags, s->fd,
		 s->hello.ring_mmap_offset);
	if (m == MAP_FAILED) {
		EXPECT("mmap of the ring with HELLO's size and offset", errno, false, B(ENOMEM));
		return false;
	}
	*out = m;
	return true;
}

static void op_hello(struct slot *s)
{
	struct rng *r = &cur->r;
	struct ummunot_hello h = { 0 }, *arg = &h;
	static const uint32_t sizes[] = { 0, 1, 63, 64, 65, 100, 128, 1000, 4096,
					  5000, 65536, 1u << 22, (1u << 22) + 1,
					  1u << 23, 0x80000000u, 0xffffffffu };
	const char *bad = NULL;
	eset allowed = B(ENOSPC) | B(ENOMEM);
	bool ok = true, ro = false;
	uint64_t rounded, req_features;
	uint32_t req_entries;
	int err;

	h.abi_version = UMMUNOT_ABI_VERSION;
	h.features = chance(r, 70) ? UMMUNOT_FEATURES_V1 : rnd(r);
	h.ring_entries = chance(r, 60) ? sizes[below(r, 9)] : sizes[below(r, 16)];
	if (chance(r, 15))
		h.ring_entries = (uint32_t)rnd(r);
	switch (below(r, 14)) {
	case 0: h.flags = 1u << below(r, 32); bad = "flags"; break;
	case 1: h.resv[below(r, 4)] = 1ULL << below(r, 64); bad = "resv"; break;
	case 2: h.abi_version = 0; bad = "abi_version 0"; break;
	case 3: h.abi_version = 2 + (uint32_t)below(r, 1000); bad = "newer abi"; break;
	case 4: arg = (void *)(uintptr_t)(chance(r, 50) ? 0 : 0xffff888000000000ULL);
		bad = "bad pointer"; break;
	case 5: ro = true; bad = "read-only argument"; break;
	default: break;
	}
	rounded = h.ring_entries < 64 ? 64 : h.ring_entries;
	if (rounded & (rounded - 1))
		rounded = 1ULL << (64 - __builtin_clzll(rounded));
	describe("HELLO slot %d abi %u flags 0x%x features 0x%llx ring_entries %u%s%s",
		 (int)(s - slots), h.abi_version, h.flags,
		 (unsigned long long)h.features, h.ring_entries, bad ? " bad: " : "",
		 bad ? bad : "");
	req_features = h.features;
	req_entries = h.ring_entries;
	if (ro) {
		memcpy(cur->ro, &h, sizeof(h));
		mprotect(cur->ro, page_size, PROT_READ);
		arg = (void *)cur->ro;
	}
	err = xioctl(s->fd, UMMUNOT_IOC_HELLO, arg);
	if (ro)
		mprotect(cur->ro, page_size, PROT_READ | PROT_WRITE);

	if (bad && !strcmp(bad, "bad pointer")) {
		EXPECT("HELLO with an unreadable argument", err, false, B(EFAULT));
		return;
	}
	if (bad && (!strcmp(bad, "flags") || !strcmp(bad, "resv") || !strcmp(bad, "abi_version 0"))) {
		EXPECT("HELLO with non-zero flags/resv or abi_version 0", err, false, B(EINVAL));
		return;
	}
	if (bad && !strcmp(bad, "newer abi")) {
		EXPECT("HELLO with a newer abi_version", err, false, B(EPROTONOSUPPORT));
		if (err == EPROTONOSUPPORT && h.abi_version != UMMUNOT_ABI_VERSION)
			FAIL("EPROTONOSUPPORT but abi_version written back is %u", h.abi_version);
		return;
	}
	if (rounded > (1u << 22))
		ok = false, allowed = B(E2BIG);
	else if (rounded > 64)
		allowed |= B(E2BIG);	/* max_ring_entries may be lowered meanwhile */
	if (s->hello_done) {
		EXPECT("second HELLO", err, false, B(EALREADY) | (allowed & B(E2BIG)));
		return;
	}
	if (ro) {
		/* The answer cannot be written back: EFAULT, handshake not done. */
		EXPECT("HELLO with a read-only argument", err, false, B(EFAULT) | allowed);
		return;
	}
	if (!EXPECT("HELLO", err, ok, allowed) || err)
		return;
	if (h.abi_version != UMMUNOT_ABI_VERSION || h.entry_size != 64 ||
	    h.header_size != page_size ||
	    h.features != ((req_features & h.supported_features) |
			   UMMUNOT_FEATURE_RING_GENERATION) ||
	    (h.supported_features & UMMUNOT_FEATURES_V1) != UMMUNOT_FEATURES_V1 ||
	    h.ring_entries < 64 || (h.ring_entries & (h.ring_entries - 1)) ||
	    (req_entries && h.ring_entries != rounded) ||
	    h.max_regions == 0 || h.ring_mmap_offset % page_size ||
	    h.ring_mmap_size != (uint64_t)page_size +
		((uint64_t)h.ring_entries * 64 + page_size - 1) / page_size * page_size ||
	    h.flags || h.resv[0] || h.resv[1] || h.resv[2] || h.resv[3])
		FAIL("HELLO answer inconsistent: abi %u features 0x%llx supported 0x%llx "
		     "entries %u entry_size %u header_size %u max_regions %u offset 0x%llx "
		     "size %llu", h.abi_version, (unsigned long long)h.features,
		     (unsigned long long)h.supported_features, h.ring_entries, h.entry_size,
		     h.header_size, h.max_regions, (unsigned long long)h.ring_mmap_offset,
		     (unsigned long long)h.ring_mmap_size);
	s->hello = h;
	s->hello_done = true;
	{
		char *m;

		if (ring_mmap_valid(s, NULL, &m)) {
			s->maps[0] = (struct map){ m, h.ring_mmap_size, PROT_READ | PROT_WRITE };
			s->nmaps = 1;
			check_header_const(s, (void *)m, "after HELLO");
		}
	}
}

/* ------------------------------------------------------------ batches */

/*
 * Place n elements of size esz so that element k (k < n) straddles the
 * guard page (k == n: the whole array is readable, ends at the guard).
 */
static void *place_before_guard(size_t esz, uint32_t n, uint32_t k)
{
	size_t before = (size_t)k * esz + (k < n ? esz / 2 : 0);

	return cur->guard - before;
}

static void op_register(struct slot *s)
{
	struct rng *r = &cur->r;
	struct tslot *t = tslot_of(s);
	struct ummunot_batch b = { 0 }, *barg = &b;
	struct ummunot_region *u;
	uint32_t n, bad_at = UINT32_MAX, fault_at = UINT32_MAX;
	const char *why = "";
	int kind = below(r, 20), err;
	bool ro = false, quiet = false, count_bad = false;
	size_t cap = (SCRATCH_PAGES * page_size) / sizeof(*u);

	n = chance(r, 80) ? 1 + below(r, 8) : 1 + below(r, chance(r, 80) ? 120 : cap - 1);
	if (n > LIVE_MAX - t->nlive)
		n = LIVE_MAX - t->nlive;
	if (n == 0)
		return;
	if (s->hello_done && n > s->hello.max_regions)
		n = s->hello.max_regions;
	if (kind == 14)
		fault_at = below(r, n);
	if (kind == 15)
		ro = quiet = true;
	u = place_before_guard(sizeof(*u), n, fault_at == UINT32_MAX ? n : fault_at);
	if (ro)
		u = (void *)cur->ro, n = n > (uint32_t)(page_size / sizeof(*u)) ?
			(uint32_t)(page_size / sizeof(*u)) : n;
	for (uint32_t i = 0; i < n && i < (fault_at == UINT32_MAX ? n : fault_at + 1); i++) {
		struct ummunot_region e = { 0 };
		uint64_t len;

		if (quiet) {
			e.start = quiet_base + below(r, 1ULL << 30);
			len = 1 + below(r, 1 << 20);
		} else {
			e.start = random_valid_range(r, &len);
		}
		e.length = len;
		e.cookie = rnd(r);
		e.handle = rnd(r);	/* output only: garbage in */
		if (i == fault_at) {	/* only the readable half */
			memcpy(&u[i], &e, sizeof(e) / 2);
			continue;
		}
		u[i] = e;
	}
	if (kind >= 10 && kind <= 13) {
		bad_at = below(r, n);
		u[bad_at].flags = u[bad_at].resv = 0;
		make_bad_region(r, &u[bad_at], &why);
	}
	b.ptr = (uintptr_t)u;
	b.count = n;
	b.error_index = 0xdeadbeef;
	if (kind == 16) {
		switch (below(r, 4)) {
		case 0: b.count = 0; why = "count 0"; break;
		case 1: b.count = s->hello_done ? s->hello.max_regions + 1 + below(r, 1000) : 0;
			why = "count above max_regions"; break;
		case 2: b.flags = 1u << below(r, 32); why = "batch flags"; break;
		default: b.resv = 1; why = "batch resv"; break;
		}
		count_bad = true;
	}
	if (kind == 17) {
		b.ptr = chance(r, 50) ? 0 : (chance(r, 50) ? 0xffff888000000000ULL : quiet_base);
		fault_at = 0;
		why = "unreadable array";
	}
	if (kind == 18)
		barg = (void *)(uintptr_t)(chance(r, 50) ? 8 : quiet_base), why = "bad batch pointer";
	describe("REGISTER slot %d count %u kind %d %s bad_at %d fault_at %d ro %d ptr 0x%llx",
		 (int)(s - slots), b.count, kind, why, (int)bad_at, (int)fault_at, ro,
		 (unsigned long long)b.ptr);
	if (ro)
		mprotect(cur->ro, page_size, PROT_READ);
	pthread_mutex_lock(&s->reg_lock);
	err = xioctl(s->fd, UMMUNOT_IOC_REGISTER, barg);
	if (ro)
		mprotect(cur->ro, page_size, PROT_READ | PROT_WRITE);
	if (!s->hello_done) {
		pthread_mutex_unlock(&s->reg_lock);
		EXPECT("REGISTER before HELLO", err, false, B(EBADFD));
		return;
	}
	if (barg != &b) {
		pthread_mutex_unlock(&s->reg_lock);
		EXPECT("REGISTER with an unreadable batch", err, false, B(EFAULT));
		return;
	}
	if (count_bad) {
		pthread_mutex_unlock(&s->reg_lock);
		if (EXPECT("REGISTER with a bad count/flags/resv", err, false, B(EINVAL)) &&
		    b.error_index != b.count)
			FAIL("error_index %u, expected count %u", b.error_index, b.count);
		return;
	}
	if (err == ENOSPC || err == ENOMEM) {
		pthread_mutex_unlock(&s->reg_lock);
		EXPECT("REGISTER", err, false, B(ENOSPC) | B(ENOMEM));
		if (b.error_index > b.count)
			FAIL("ENOSPC/ENOMEM with error_index %u > count %u", b.error_index, b.count);
		return;
	}
	{
		uint32_t first = bad_at < fault_at ? bad_at : fault_at;

		if (first != UINT32_MAX) {
			int want = first == bad_at ? EINVAL : EFAULT;

			pthread_mutex_unlock(&s->reg_lock);
			if (EXPECT("REGISTER with a bad element", err, false, B(want)) &&
			    b.error_index != first)
				FAIL("%s with error_index %u, expected %u (first element at fault)",
				     errname(err), b.error_index, first);
			return;
		}
	}
	if (ro) {
		pthread_mutex_unlock(&s->reg_lock);
		if (EXPECT("REGISTER whose handles cannot be written back", err, false, B(EFAULT)) &&
		    b.error_index != 0)
			FAIL("write-back EFAULT with error_index %u, expected 0", b.error_index);
		return;
	}
	if (!EXPECT("REGISTER", err, true, 0) || err) {
		pthread_mutex_unlock(&s->reg_lock);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (u[i].handle >> 48)
			FAIL("handle 0x%llx has bits 48..63 set", (unsigned long long)u[i].handle);
		if (!tab_add(s, u[i].handle, u[i].cookie, u[i].start, u[i].start + u[i].length,
			     (uint64_t)n << 32 | i))
			FAIL("REGISTER returned handle 0x%llx, already returned earlier by this file",
			     (unsigned long long)u[i].handle);
		t->live[t->nlive++] = u[i].handle;
	}
	pthread_mutex_unlock(&s->reg_lock);
}

static void handle_diag(struct slot *s, struct tslot *t, const char *name,
			uint64_t bh, uint32_t at)
{
	struct hent *he;
	bool live = false;

	for (unsigned j = 0; j < t->nlive; j++)
		live |= t->live[j] == bh;
	pthread_mutex_lock(&s->reg_lock);
	he = tab_find(s, bh);
	FAIL("%s: element %u is handle 0x%llx, %s, %s (registered in a batch of "
	     "%llu as element %llu [0x%llx, 0x%llx); this thread holds %u live handles)",
	     name, at, (unsigned long long)bh,
	     he ? "returned by a successful REGISTER of this file" : "unknown to the fuzzer",
	     live ? "never unregistered" : "not live",
	     he ? (unsigned long long)(he->info >> 32) : 0ULL,
	     he ? (unsigned long long)(he->info & 0xffffffff) : 0ULL,
	     he ? (unsigned long long)he->start : 0ULL, he ? (unsigned long long)he->end : 0ULL,
	     t->nlive);
	pthread_mutex_unlock(&s->reg_lock);
}

static void op_handles(struct slot *s, bool unreg)
{
	struct rng *r = &cur->r;
	struct tslot *t = tslot_of(s);
	struct ummunot_batch b = { 0 };
	uint64_t *hs, *pick = cur->big;
	uint32_t n, fault_at = UINT32_MAX, exp_idx = UINT32_MAX, idx[64];
	int kind = below(r, 16), want = 0, err;
	const char *name = unreg ? "UNREGISTER" : "REARM";
	bool count_bad = false, big = false;

	n = t->nlive ? 1 + below(r, t->nlive < 8 ? t->nlive : 8) : 1;
	if (t->nlive && chance(r, 10))
		n = 1 + below(r, t->nlive < 64 ? t->nlive : 64);
	if (n > 64)
		n = 64;
	/* Distinct live handles of this thread, in random order. */
	for (uint32_t i = 0; i < n; i++) {
		if (!t->nlive) {
			pick[i] = garbage_handle(r);
			if (exp_idx == UINT32_MAX)
				exp_idx = i, want = ENOENT;
			idx[i] = UINT32_MAX;
			continue;
		}
		do {
			idx[i] = below(r, t->nlive);
			for (uint32_t j = 0; j < i; j++)
				if (idx[j] == idx[i])
					idx[i] = UINT32_MAX;
		} while (idx[i] == UINT32_MAX && i < t->nlive);
		pick[i] = t->live[idx[i]];
	}
	if (!t->nlive) {
		n = 1 + below(r, 4), exp_idx = 0, want = ENOENT;
		for (uint32_t i = 0; i < n; i++)
			pick[i] = garbage_handle(r);
	}
	if (s->hello_done && n > s->hello.max_regions)
		n = s->hello.max_regions;	/* may be 1: the controller lowers it */
	if (exp_idx >= n)
		exp_idx = UINT32_MAX, want = 0;
	if (kind >= 8 && kind <= 11) {
		uint32_t k = below(r, n);

		if (kind == 8 || !t->ndead) {
			pick[k] = garbage_handle(r);
		} else if (kind == 9 && t->ndead) {
			pick[k] = t->dead[below(r, t->ndead)];
		} else if (k > 0) {
			pick[k] = pick[below(r, k)];	/* duplicate of an earlier one */
			if (!unreg)
				k = UINT32_MAX;		/* fine for REARM */
			else if (exp_idx == UINT32_MAX || k < exp_idx)
				exp_idx = k, want = EINVAL;
			goto dup_done;
		} else {
			pick[k] = garbage_handle(r);
		}
		if (exp_idx == UINT32_MAX || k < exp_idx)
			exp_idx = k, want = ENOENT;
dup_done:	;
	}
	if (!unreg && kind == 12 && t->nlive && s->hello_done) {
		/* One region named many times: one lookup each, at most max_regions. */
		uint32_t m = BIG_HANDLES < s->hello.max_regions ? BIG_HANDLES : s->hello.max_regions;

		n = 1 + below(r, m);
		for (uint32_t i = 1; i < n; i++)
			pick[i] = pick[0];
		big = true;
		exp_idx = UINT32_MAX;
	}
	hs = pick;
	if (!big && kind == 13) {
		fault_at = below(r, n);
		hs = place_before_guard(8, n, fault_at);
		memcpy(hs, pick, (size_t)fault_at * 8 + 4);
		if (exp_idx == UINT32_MAX || fault_at <= exp_idx)
			exp_idx = fault_at, want = EFAULT;
	}
	b.ptr = (uintptr_t)hs;
	b.count = n;
	b.error_index = 0xdeadbeef;
	if (kind == 14) {
		switch (below(r, 4)) {
		case 0: b.count = 0; break;
		case 1: b.count = s->hello_done ? s->hello.max_regions + 1 + below(r, 1u << 30) : 0; break;
		case 2: b.flags = 1; break;
		default: b.resv = 1u << below(r, 32); break;
		}
		count_bad = true;
	}
	if (kind == 15)
		b.ptr = chance(r, 50) ? 0 : quiet_base, exp_idx = 0, want = EFAULT;
	describe("%s slot %d count %u kind %d expect %s at %d first handle 0x%llx",
		 name, (int)(s - slots), b.count, kind, want ? errname(want) : "OK",
		 (int)exp_idx, (unsigned long long)pick[0]);
	err = xioctl(s->fd, unreg ? UMMUNOT_IOC_UNREGISTER : UMMUNOT_IOC_REARM, &b);
	if (!s->hello_done) {
		EXPECT("UNREGISTER/REARM before HELLO", err, false, B(EBADFD));
		return;
	}
	if (count_bad) {
		if (EXPECT("batch with bad count/flags/resv", err, false, B(EINVAL)) &&
		    b.error_index != b.count)
			FAIL("error_index %u, expected count %u", b.error_index, b.count);
		return;
	}
	if (exp_idx != UINT32_MAX) {
		if (EXPECT(name, err, false, B(want)) && err == want &&
		    b.error_index != exp_idx)
		{
			FAIL("%s %s: error_index %u, expected %u", name, errname(err),
			     b.error_index, exp_idx);
			if (b.error_index < n)
				handle_diag(s, t, name, pick[b.error_index], b.error_index);
		}
		return;
	}
	if (!EXPECT(name, err, true, 0) || err) {
		if (err && b.error_index < n)
			handle_diag(s, t, name, pick[b.error_index], b.error_index);
		return;
	}
	if (unreg) {
		/* Remove the named ones (indices idx[]) from live, newest first. */
		for (uint32_t i = 0; i < n; i++)
			dead_add(t, pick[i]);
		for (uint32_t i = 0; i < n; i++) {
			for (uint32_t j = 0; j < t->nlive; j++)
				if (t->live[j] == pick[i]) {
					t->live[j] = t->live[--t->nlive];
					break;
				}
		}
	}
}

static void op_filter(struct slot *s)
{
	struct rng *r = &cur->r;
	struct ummunot_filter f = { 0 }, *arg = &f;
	int kind = below(r, 10), err;
	uint64_t want_prev, newmask;

	f.mask = rnd(r) & UMMUNOT_EVENT_MASK_ALL;
	if (chance(r, 30))
		f.mask = UMMUNOT_EVENT_MASK_DEFAULT;
	if (kind == 6)
		f.mask |= 1ULL << (chance(r, 50) ? 0 : 10 + below(r, 54));
	if (kind == 7)
		chance(r, 50) ? (f.flags = 1) : (f.resv = 1u << below(r, 32));
	if (kind == 8)
		arg = (void *)(uintptr_t)(chance(r, 50) ? 0 : quiet_base);
	if (kind == 9) {
		memcpy(cur->ro, &f, sizeof(f));
		arg = (void *)cur->ro;
	}
	newmask = f.mask;
	describe("SET_FILTER slot %d mask 0x%llx flags %u resv %u kind %d",
		 (int)(s - slots), (unsigned long long)f.mask, f.flags, f.resv, kind);
	pthread_mutex_lock(&s->filt_lock);
	want_prev = s->mask;
	if (kind != 9 && kind != 8)
		__atomic_or_fetch(&s->mask_union, f.mask & UMMUNOT_EVENT_MASK_ALL, __ATOMIC_RELEASE);
	if (kind == 9)
		mprotect(cur->ro, page_size, PROT_READ);
	err = xioctl(s->fd, UMMUNOT_IOC_SET_FILTER, arg);
	if (kind == 9)
		mprotect(cur->ro, page_size, PROT_READ | PROT_WRITE);
	if (!s->hello_done) {
		EXPECT("SET_FILTER before HELLO", err, false, B(EBADFD));
	} else if (kind >= 6) {
		EXPECT("SET_FILTER with a bad mask/flags/pointer", err, false,
		       kind == 8 || kind == 9 ? B(EFAULT) : B(EINVAL));
	} else if (EXPECT("SET_FILTER", err, true, 0) && !err) {
		if (f.mask != want_prev)
			FAIL("SET_FILTER returned previous mask 0x%llx, expected 0x%llx",
			     (unsigned long long)f.mask, (unsigned long long)want_prev);
		s->mask = newmask;
	}
	pthread_mutex_unlock(&s->filt_lock);
}

static void op_resync(struct slot *s)
{
	struct rng *r = &cur->r;
	struct ummunot_resync rs = { 0 }, *arg = &rs;
	int kind = below(r, 8), err;

	if (kind == 5)
		rs.flags = 1u << below(r, 32);
	if (kind == 6)
		rs.resv = 1;
	if (kind == 7)
		arg = (void *)(uintptr_t)(chance(r, 50) ? 0 : quiet_base);
	describe("RESYNC slot %d kind %d", (int)(s - slots), kind);
	__atomic_add_fetch(&s->resyncs, 1, __ATOMIC_RELEASE);
	err = xioctl(s->fd, UMMUNOT_IOC_RESYNC, arg);
	if (!s->hello_done)
		EXPECT("RESYNC before HELLO", err, false, B(EBADFD));
	else if (kind >= 5)
		EXPECT("RESYNC with bad flags/resv/pointer", err, false,
		       kind == 7 ? B(EFAULT) : B(EINVAL));
	else if (EXPECT("RESYNC", err, true, 0) && !err)
		__atomic_add_fetch(&s->resync_sum, rs.dropped, __ATOMIC_RELEASE);
}

static void op_stats(struct slot *s)
{
	struct rng *r = &cur->r;
	struct ummunot_stats st, *arg = &st;
	int kind = below(r, 8), err;

	memset(&st, 0xa5, sizeof(st));
	if (kind == 7)
		arg = (void *)(uintptr_t)(chance(r, 50) ? 0 : quiet_base);
	if (kind == 6)
		arg = (void *)cur->ro;
	describe("GET_STATS slot %d kind %d", (int)(s - slots), kind);
	pthread_mutex_lock(&s->stats_lock);
	if (kind == 6)
		mprotect(cur->ro, page_size, PROT_READ);
	err = xioctl(s->fd, UMMUNOT_IOC_GET_STATS, arg);
	if (kind == 6)
		mprotect(cur->ro, page_size, PROT_READ | PROT_WRITE);
	if (!s->hello_done) {
		EXPECT("GET_STATS before HELLO", err, false, B(EBADFD));
	} else if (kind >= 6) {
		EXPECT("GET_STATS into an unwritable buffer", err, false, B(EFAULT));
	} else if (EXPECT("GET_STATS", err, true, 0) && !err) {
		struct ummunot_stats *l = &s->last;
		uint64_t rsum = __atomic_load_n(&s->resync_sum, __ATOMIC_ACQUIRE);
		bool resv = false;

		for (int i = 0; i < 8; i++)
			resv |= st.resv[i] != 0;
		for (int i = 10; i < UMMUNOT_EVENT_TYPE_MAX; i++)
			resv |= st.delivered[i] || st.filtered[i];
		if (resv || (st.event_mask & ~UMMUNOT_EVENT_MASK_ALL) || st.delivered[0] ||
		    st.filtered[0] || st.ring_high_water > s->hello.ring_entries)
			FAIL("GET_STATS: non-zero reserved/unknown-type fields, mask 0x%llx or "
			     "high water %llu > %u", (unsigned long long)st.event_mask,
			     (unsigned long long)st.ring_high_water, s->hello.ring_entries);
		if (s->have_last &&
		    (st.regions_registered < l->regions_registered || st.events < l->events ||
		     st.dropped < l->dropped || st.overflows < l->overflows ||
		     st.ring_high_water < l->ring_high_water))
			FAIL("GET_STATS cumulative counters went backwards: registered %llu->%llu "
			     "events %llu->%llu dropped %llu->%llu overflows %llu->%llu",
			     (unsigned long long)l->regions_registered,
			     (unsigned long long)st.regions_registered,
			     (unsigned long long)l->events, (unsigned long long)st.events,
			     (unsigned long long)l->dropped, (unsigned long long)st.dropped,
			     (unsigned long long)l->overflows, (unsigned long long)st.overflows);
		if (rsum > st.dropped)
			FAIL("RESYNC calls returned %llu dropped events in all, GET_STATS says %llu",
			     (unsigned long long)rsum, (unsigned long long)st.dropped);
		*l = st;
		s->have_last = true;
	}
	pthread_mutex_unlock(&s->stats_lock);
}

static void op_bad_ioctl(struct slot *s)
{
	struct rng *r = &cur->r;
	static const unsigned long valid[] = { UMMUNOT_IOC_HELLO, UMMUNOT_IOC_REGISTER,
		UMMUNOT_IOC_UNREGISTER, UMMUNOT_IOC_REARM, UMMUNOT_IOC_SET_FILTER,
		UMMUNOT_IOC_RESYNC, UMMUNOT_IOC_GET_STATS };
	unsigned long cmd;
	bool is_valid;
	int err;

	do {
		unsigned dir = below(r, 4), nr = below(r, 4) ? below(r, 16) : below(r, 256);
		unsigned size = below(r, 3) ? below(r, 400) : below(r, 1 << 14);
		unsigned type = chance(r, 85) ? UMMUNOT_IOC_MAGIC : 0xcf;

		cmd = _IOC(dir, type, nr, size);
		is_valid = false;
		for (unsigned i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
			is_valid |= cmd == valid[i];
	} while (is_valid);
	describe("unknown ioctl 0x%lx on slot %d", cmd, (int)(s - slots));
	err = xioctl(s->fd, cmd, cur->scratch);
	EXPECT("unknown ioctl", err, false, B(ENOTTY));
}

/* ------------------------------------------------------------ ring mappings */

static void op_ring_vma(struct slot *s)
{
	struct rng *r = &cur->r;
	size_t sz = s->hello.ring_mmap_size;
	int kind = below(r, 18);
	char *m;

	if (!s->hello_done)  {
		describe("mmap before HELLO slot %d", (int)(s - slots));
		count_call();
		m = mmap(NULL, page_size * (1 + below(r, 8)), PROT_READ | PROT_WRITE,
			 MAP_SHARED, s->fd, 0);
		if (m != MAP_FAILED) {
			FAIL("mmap before HELLO succeeded");
			munmap(m, page_size);
			return;
		}
		EXPECT("mmap before HELLO", errno, false, B(EBADFD));
		return;
	}
	switch (kind) {
	case 0: case 1: {	/* another valid mapping, sometimes MAP_FIXED over one */
		char *fixed = NULL;
		int over = -1;

		if (s->nmaps >= MAXMAPS || (s->nmaps && chance(r, 40))) {
			if (!s->nmaps)
				return;
			over = below(r, s->nmaps);
			fixed = s->maps[over].addr;
		}
		describe("mmap ring%s slot %d", fixed ? " MAP_FIXED over a ring mapping" : "",
			 (int)(s - slots));
		if (!ring_mmap_valid(s, fixed, &m)) {
			if (fixed) {	/* the old one may be gone */
				munmap(fixed, sz);
				s->maps[over] = s->maps[--s->nmaps];
			}
			return;
		}
		if (fixed && m != fixed)
			FAIL("MAP_FIXED mmap returned %p, not %p", m, fixed);
		if (over >= 0)
			s->maps[over] = (struct map){ m, sz, PROT_READ | PROT_WRITE };
		else
			s->maps[s->nmaps++] = (struct map){ m, sz, PROT_READ | PROT_WRITE };
		/*
		 * The same pages: the header's constant words (never written by
		 * the kernel after HELLO; a scribble may have changed them in
		 * both) read the same through both mappings.
		 */
		if (s->nmaps > 1 && m != s->maps[0].addr && (s->maps[0].prot & PROT_READ) &&
		    memcmp(m, s->maps[0].addr, 32))
			FAIL("a second mapping of the ring shows other header bytes than the first");
		return;
	}
	case 2: {		/* invalid mmaps */
		static const char *const what[] = { "size - page", "size + page", "offset + page",
			"MAP_PRIVATE", "PROT_EXEC", "PROT_EXEC|MAP_PRIVATE", "offset 2^40" };
		int w = below(r, 7), prot = PROT_READ | PROT_WRITE, flags = MAP_SHARED;
		size_t len = sz;
		off_t off = s->hello.ring_mmap_offset;
		eset want = B(EINVAL);

		switch (w) {
		case 0: len = sz - page_size; if (!len) len = sz * 2; break;
		case 1: len = sz + page_size; break;
		case 2: off += page_size; break;
		case 3: flags = MAP_PRIVATE; break;
		case 4: prot |= PROT_EXEC; want = B(EPERM); break;
		case 5: prot |= PROT_EXEC; flags = MAP_PRIVATE; break;
		default: off = 1LL << 40; break;
		}
		describe("invalid mmap of the ring (%s) slot %d", what[w], (int)(s - slots));
		count_call();
		m = mmap(NULL, len, prot, flags, s->fd, off);
		if (m != MAP_FAILED) {
			FAIL("invalid mmap (%s) succeeded", what[w]);
			munmap(m, len);
			return;
		}
		EXPECT("invalid mmap of the ring", errno, false, want | B(ENOMEM));
		return;
	}
	}
	if (!s->nmaps)
		return;
	{
		int i = below(r, s->nmaps);
		struct map *mp = &s->maps[i];
		int ret, e;

		switch (kind) {
		case 3: case 4:	/* munmap whole or part */
			if (kind == 4 && mp->len > (size_t)page_size) {
				size_t cut = page_size * (1 + below(r, mp->len / page_size - 1));
				bool front = chance(r, 50);

				describe("munmap part of a ring mapping (%s %zu bytes)",
					 front ? "front" : "back", cut);
				count_call();
				ret = munmap(front ? mp->addr : mp->addr + mp->len - cut, cut);
				if (ret) {
					FAIL("partial munmap of the ring: %s", errname(errno));
					return;
				}
				if (s->nfrags < MAXFRAGS)
					s->frags[s->nfrags++] = (struct frag){
						front ? mp->addr + cut : mp->addr, mp->len - cut };
				else
					munmap(front ? mp->addr + cut : mp->addr, mp->len - cut);
			} else {
				describe("munmap a ring mapping");
				count_call();
				if (munmap(mp->addr, mp->len))
					FAIL("munmap of the ring: %s", errname(errno));
			}
			*mp = s->maps[--s->nmaps];
			return;
		case 5: {	/* mremap same size, moving */
			describe("mremap ring same size MREMAP_MAYMOVE");
			count_call();
			m = mremap(mp->addr, mp->len, mp->len, MREMAP_MAYMOVE);
			if (m == MAP_FAILED) {
				EXPECT("mremap of the ring, same size", errno, false, B(ENOMEM));
				return;
			}
			mp->addr = m;
			return;
		}
		case 6: {	/* mremap smaller */
			size_t nl = mp->len > (size_t)page_size ? page_size * (1 + below(r, mp->len / page_size - 1)) : mp->len;

			describe("mremap ring smaller %zu -> %zu", mp->len, nl);
			count_call();
			m = mremap(mp->addr, mp->len, nl, chance(r, 50) ? MREMAP_MAYMOVE : 0);
			if (m == MAP_FAILED) {
				EXPECT("mremap of the ring, smaller", errno, false, B(ENOMEM));
				return;
			}
			if (nl == mp->len) {
				mp->addr = m;
				return;
			}
			if (s->nfrags < MAXFRAGS)
				s->frags[s->nfrags++] = (struct frag){ m, nl };
			else
				munmap(m, nl);
			*mp = s->maps[--s->nmaps];
			return;
		}
		case 7:		/* grow: refused */
			describe("mremap ring grow");
			count_call();
			m = mremap(mp->addr, mp->len, mp->len + page_size * (1 + below(r, 4)),
				   chance(r, 50) ? MREMAP_MAYMOVE : 0);
			if (m != MAP_FAILED) {
				FAIL("growing the ring with mremap succeeded");
				return;
			}
			EXPECT("mremap grow of the ring", errno, false, B(EFAULT) | B(ENOMEM));
			return;
		case 8:
			describe("mremap ring MREMAP_DONTUNMAP");
			count_call();
			m = mremap(mp->addr, mp->len, mp->len, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
			if (m != MAP_FAILED) {
				FAIL("mremap(MREMAP_DONTUNMAP) of the ring succeeded");
				return;
			}
			EXPECT("mremap DONTUNMAP of the ring", errno, false, B(EINVAL));
			return;
		case 9: case 10: {	/* madvise */
			static const int adv[] = { MADV_DONTNEED, MADV_DOFORK, MADV_WIPEONFORK,
				MADV_DONTFORK, MADV_WILLNEED, MADV_NORMAL, MADV_RANDOM,
				MADV_SEQUENTIAL, MADV_COLD, MADV_PAGEOUT, MADV_DONTDUMP,
				MADV_DODUMP, MADV_FREE, MADV_REMOVE, MADV_HUGEPAGE,
				MADV_NOHUGEPAGE, MADV_MERGEABLE, MADV_POPULATE_WRITE };
			int a = adv[below(r, sizeof(adv) / sizeof(adv[0]))];
			char hdr0[32];

			describe("madvise(ring, %d)", a);
			if (mp->prot & PROT_READ)
				memcpy(hdr0, mp->addr, sizeof(hdr0));
			count_call();
			ret = madvise(mp->addr, mp->len, a);
			e = ret ? errno : 0;
			if (a == MADV_DONTNEED)
				EXPECT("madvise(ring, MADV_DONTNEED)", e, true, 0);
			else if (a == MADV_DOFORK || a == MADV_WIPEONFORK)
				EXPECT("madvise(ring, MADV_DOFORK/WIPEONFORK)", e, false, B(EINVAL));
			/* others: undocumented for the ring; the kernel must only survive */
			/* Never lost: the same page, whatever the advice did. */
			if ((mp->prot & PROT_READ) && memcmp(hdr0, mp->addr, sizeof(hdr0)))
				FAIL("after madvise(%d) the ring header's constant words changed", a);
			return;
		}
		case 11: case 12: {	/* mprotect */
			static const int prots[] = { PROT_READ, PROT_NONE, PROT_READ | PROT_WRITE,
						     PROT_READ | PROT_WRITE, PROT_READ | PROT_EXEC };
			int p = prots[below(r, 5)];

			if (i == 0 && p != (PROT_READ | PROT_WRITE) && chance(r, 50))
				p = PROT_READ | PROT_WRITE;
			describe("mprotect(ring mapping %d, %d)", i, p);
			count_call();
			ret = mprotect(mp->addr, mp->len, p);
			e = ret ? errno : 0;
			if (p & PROT_EXEC) {
				EXPECT("mprotect(ring, PROT_EXEC)", e, false, B(EACCES));
				if (!e)
					mp->prot = p;
			} else if (EXPECT("mprotect(ring)", e, true, B(ENOMEM)) && !e) {
				mp->prot = p;
			}
			return;
		}
		case 13:
			describe("mlock/munlock ring mapping");
			count_call();
			ret = mlock(mp->addr, mp->len);
			e = ret ? errno : 0;
			EXPECT("mlock(ring)", e, true, B(ENOMEM) | B(EAGAIN) | B(EPERM));
			count_call();
			munlock(mp->addr, mp->len);
			return;
		case 14: {	/* anonymous MAP_FIXED over it: unmaps it */
			describe("anonymous MAP_FIXED over a ring mapping");
			count_call();
			m = mmap(mp->addr, mp->len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (m == MAP_FAILED) {
				FAIL("MAP_FIXED anonymous over the ring: %s", errname(errno));
				return;
			}
			if (s->nfrags < MAXFRAGS)
				s->frags[s->nfrags++] = (struct frag){ m, mp->len };
			else
				munmap(m, mp->len);
			*mp = s->maps[--s->nmaps];
			return;
		}
		case 15: {	/* mremap to a fixed address, same size */
			char *dst;

			describe("mremap ring MREMAP_FIXED same size");
			count_call();
			dst = mmap(NULL, mp->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (dst == MAP_FAILED)
				return;
			count_call();
			m = mremap(mp->addr, mp->len, mp->len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
			if (m == MAP_FAILED) {
				EXPECT("mremap MREMAP_FIXED of the ring", errno, false, B(ENOMEM));
				munmap(dst, mp->len);
				return;
			}
			if (m != dst)
				FAIL("MREMAP_FIXED returned %p, not %p", m, dst);
			mp->addr = m;
			return;
		}
		default: {	/* mincore / read via the kernel: VM_IO */
			unsigned char vec[8];

			describe("mincore ring mapping");
			count_call();
			ret = mincore(mp->addr, page_size, vec);
			if (ret)
				EXPECT("mincore(ring)", errno, false, B(ENOMEM) | B(EFAULT));
			return;
		}
		}
	}
}

/* ------------------------------------------------------------ other address spaces */

/* A request to the receiver: which call to make on the passed descriptor. */
struct rreq { int what; int keep; uint64_t size; };

static void receiver_main(int sock)
{
	int kept[4] = { -1, -1, -1, -1 }, nk = 0;

	for (;;) {
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct rreq q;
		struct iovec io = { &q, sizeof(q) };
		struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c;
		int fd = -1, res = 0;
		ssize_t n = recvmsg(sock, &mh, 0);

		if (n <= 0)
			break;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				memcpy(&fd, CMSG_DATA(c), sizeof(int));
		if (fd < 0) {
			res = -1;
		} else {
			union {
				struct ummunot_hello h;
				struct ummunot_batch b;
				struct ummunot_filter f;
				struct ummunot_resync r;
				struct ummunot_stats s;
			} a;
			struct ummunot_region reg = { .start = 0x10000, .length = 4096 };
			uint64_t h = 1;

			memset(&a, 0, sizeof(a));
			switch (q.what) {
			case 0: a.h.abi_version = 1; res = ioctl(fd, UMMUNOT_IOC_HELLO, &a); break;
			case 1: a.b.ptr = (uintptr_t)&reg; a.b.count = 1;
				res = ioctl(fd, UMMUNOT_IOC_REGISTER, &a); break;
			case 2: a.b.ptr = (uintptr_t)&h; a.b.count = 1;
				res = ioctl(fd, UMMUNOT_IOC_UNREGISTER, &a); break;
			case 3: a.b.ptr = (uintptr_t)&h; a.b.count = 1;
				res = ioctl(fd, UMMUNOT_IOC_REARM, &a); break;
			case 4: res = ioctl(fd, UMMUNOT_IOC_SET_FILTER, &a); break;
			case 5: res = ioctl(fd, UMMUNOT_IOC_RESYNC, &a); break;
			case 6: res = ioctl(fd, UMMUNOT_IOC_GET_STATS, &a); break;
			default: {
				void *m = mmap(NULL, q.size ? q.size : 4096, PROT_READ | PROT_WRITE,
					       MAP_SHARED, fd, 0);

				res = m == MAP_FAILED ? -1 : 0;
				if (m != MAP_FAILED)
					munmap(m, q.size);
			}
			}
			res = res ? errno : 0;
			if (q.keep) {	/* the last close may then happen here */
				if (kept[nk] >= 0)
					close(kept[nk]);
				kept[nk] = fd;
				nk = (nk + 1) % 4;
			} else {
				close(fd);
			}
		}
		if (write(sock, &res, sizeof(res)) != sizeof(res))
			break;
	}
	_exit(0);
}

static void op_other_mm(struct slot *s)
{
	struct rng *r = &cur->r;
	int what = below(r, 8);

	if (chance(r, 50)) {
		/* fork: the child inherits the descriptor, not the ring mapping */
		char *ringaddr = s->nmaps ? s->maps[0].addr : NULL;
		pid_t pid;
		int st;

		describe("fork; child calls %d on inherited fd %d of slot %d", what, s->fd,
			 (int)(s - slots));
		count_call();
		__atomic_add_fetch(&sh->forks, 1, __ATOMIC_RELAXED);
		pid = fork();
		if (pid < 0) {
			EXPECT("fork", errno, false, B(EAGAIN) | B(ENOMEM));
			return;
		}
		if (pid == 0) {
			struct ummunot_hello h = { .abi_version = 1 };
			struct ummunot_stats stt;
			struct ummunot_filter f = { .mask = 0 };
			struct ummunot_resync rs = { 0 };
			uint64_t hd = 1;
			struct ummunot_batch b = { .ptr = (uintptr_t)&hd, .count = 1 };
			unsigned char vec;
			int res;
			void *m;

			alarm(30);
			switch (what) {
			case 0: res = ioctl(s->fd, UMMUNOT_IOC_HELLO, &h); break;
			case 1: res = ioctl(s->fd, UMMUNOT_IOC_REGISTER, &b); break;
			case 2: res = ioctl(s->fd, UMMUNOT_IOC_UNREGISTER, &b); break;
			case 3: res = ioctl(s->fd, UMMUNOT_IOC_REARM, &b); break;
			case 4: res = ioctl(s->fd, UMMUNOT_IOC_SET_FILTER, &f); break;
			case 5: res = ioctl(s->fd, UMMUNOT_IOC_RESYNC, &rs); break;
			case 6: res = ioctl(s->fd, UMMUNOT_IOC_GET_STATS, &stt); break;
			default:
				m = mmap(NULL, s->hello_done ? s->hello.ring_mmap_size : 4096,
					 PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
				res = m == MAP_FAILED ? -1 : 0;
			}
			if (res == 0)
				_exit(10);		/* it worked: violation */
			if (errno != EPERM)
				_exit(errno < 100 ? 20 + errno : 11);
			if (ringaddr && mincore(ringaddr, page_size, &vec) == 0)
				_exit(12);		/* the ring was inherited */
			_exit(0);
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			int c = WIFEXITED(st) ? WEXITSTATUS(st) : -1;

			if (c == 10)
				FAIL("forked child: call %d on the inherited fd succeeded (EPERM documented)", what);
			else if (c > 20 && c < 120)
				FAIL("forked child: call %d on the inherited fd failed with %s, "
				     "documented EPERM", what, errname(c - 20));
			else if (c == 12)
				FAIL("forked child has the ring mapping (documented: never inherited)");
			else
				FAIL("forked child status 0x%x", st);
		}
		return;
	}
	/* SCM_RIGHTS to the receiver process */
	{
		struct rreq q = { what, chance(r, 30), s->hello_done ? s->hello.ring_mmap_size : 4096 };
		char cbuf[CMSG_SPACE(sizeof(int))];
		struct iovec io = { &q, sizeof(q) };
		struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1,
				     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		struct cmsghdr *c;
		int res = -2;

		if (recv_sock < 0)
			return;
		memset(cbuf, 0, sizeof(cbuf));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &s->fd, sizeof(int));
		describe("SCM_RIGHTS fd of slot %d to pid %d, which calls %d (keep %d)",
			 (int)(s - slots), (int)recv_pid, what, q.keep);
		pthread_mutex_lock(&recv_lock);
		count_call();
		if (sendmsg(recv_sock, &mh, 0) == sizeof(q))
			if (read(recv_sock, &res, sizeof(res)) != sizeof(res))
				res = -3;
		pthread_mutex_unlock(&recv_lock);
		if (res < 0) {
			FAIL("receiver process did not answer (%d)", res);
			return;
		}
		EXPECT("call from the process that received the fd over SCM_RIGHTS", res,
		       false, B(EPERM));
	}
}

/* ------------------------------------------------------------ memory churn */

static void op_churn(void)
{
	struct rng *r = &cur->r;
	size_t pg = below(r, ARENA_PAGES), np = 1 + below(r, chance(r, 80) ? 4 : 64);
	char *a;
	size_t len;

	if (pg + np > ARENA_PAGES)
		np = ARENA_PAGES - pg;
	a = arena + pg * page_size;
	len = np * page_size;
	count_call();
	switch (below(r, 9)) {
	case 0:
		describe("churn munmap %p +%zu", a, len);
		munmap(a, len);
		break;
	case 1: case 2:
		describe("churn mmap MAP_FIXED %p +%zu", a, len);
		if (mmap(a, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) == MAP_FAILED)
			FAIL("MAP_FIXED in the arena: %s", errname(errno));
		break;
	case 3:
		describe("churn mprotect %p +%zu", a, len);
		mprotect(a, len, chance(r, 50) ? PROT_READ : PROT_READ | PROT_WRITE);
		break;
	case 4: case 5:
		describe("churn madvise DONTNEED/FREE %p +%zu", a, len);
		madvise(a, len, chance(r, 60) ? MADV_DONTNEED : MADV_FREE);
		break;
	case 6: {
		size_t dpg = below(r, ARENA_PAGES - np + 1);

		describe("churn mremap %p +%zu -> page %zu", a, len, dpg);
		if (dpg != pg)
			mremap(a, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, arena + dpg * page_size);
		break;
	}
	default:
		describe("churn populate %p +%zu", a, len);
		madvise(a, len, MADV_POPULATE_WRITE);	/* faults in, never SIGSEGVs */
		break;
	}
}

/* ------------------------------------------------------------ misc reads */

static void op_observe(struct slot *s)
{
	char path[64], buf[4096];
	struct pollfd p = { .fd = s->fd, .events = POLLIN };
	int fd, n;

	describe("poll + fdinfo of slot %d", (int)(s - slots));
	count_call();
	if (poll(&p, 1, 0) < 0)
		FAIL("poll: %s", errname(errno));
	else if (p.revents & POLLNVAL)
		FAIL("poll: POLLNVAL on an open ummunot fd");
	else if (!s->hello_done && !(p.revents & POLLERR))
		FAIL("poll before HELLO: revents 0x%x, documented EPOLLERR", p.revents);
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", s->fd);
	count_call();
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			if (s->hello_done && !strstr(buf, "ummunot_abi:"))
				FAIL("fdinfo lacks ummunot_abi: %.200s", buf);
		}
	}
}

/* ------------------------------------------------------------ the thread loop */

static void *thread_main(void *arg)
{
	struct thr *t = arg;

	cur = t;
	while (!sh->stop && t->calls < t->budget) {
		struct slot *s = &slots[below(&t->r, NSLOTS)];
		unsigned w = below(&t->r, 1000);

		t->op++;
		if (!(t->op & 63)) {
			if (now() - t_start > opt_duration)
				break;
			/* For the controlling process's progress lines. */
			__atomic_add_fetch(&sh->calls, t->calls - t->published, __ATOMIC_RELAXED);
			t->published = t->calls;
		}
		if (w < 130) {
			op_churn();
			continue;
		}
		if (w < 150 || s->fd < 0) {
			/* structural: open/close/HELLO */
			pthread_rwlock_wrlock(&s->rw);
			if (s->fd < 0)
				op_open(s);
			else if (!s->hello_done || chance(&t->r, 30))
				op_hello(s);
			else if (chance(&t->r, 25))
				op_close(s);
			else
				op_ring_vma(s);
			pthread_rwlock_unlock(&s->rw);
			continue;
		}
		if (w < 230) {
			pthread_rwlock_wrlock(&s->rw);
			if (s->fd >= 0)
				op_ring_vma(s);
			pthread_rwlock_unlock(&s->rw);
			continue;
		}
		pthread_rwlock_rdlock(&s->rw);
		if (s->fd < 0) {
			pthread_rwlock_unlock(&s->rw);
			continue;
		}
		if (w < 420)
			op_register(s);
		else if (w < 520)
			op_handles(s, true);
		else if (w < 600)
			op_handles(s, false);
		else if (w < 640)
			op_filter(s);
		else if (w < 670)
			op_resync(s);
		else if (w < 710)
			op_stats(s);
		else if (w < 730)
			op_bad_ioctl(s);
		else if (w < 870)
			op_read_ring(s);
		else if (w < 890)
			op_scribble(s);
		else if (w < 910)
			op_other_mm(s);
		else
			op_observe(s);
		pthread_rwlock_unlock(&s->rw);
	}
	__atomic_add_fetch(&sh->calls, t->calls - t->published, __ATOMIC_RELAXED);
	t->published = t->calls;
	return NULL;
}

/* Single-threaded again: the exact bookkeeping must match the module's. */
static struct thr fin = { .idx = -1 };

static void worker_final(void)
{

	cur = &fin;
	for (int i = 0; i < NSLOTS; i++) {
		struct slot *s = &slots[i];
		uint64_t live = 0;
		struct ummunot_stats st;

		if (s->fd < 0)
			continue;
		snprintf(fin.desc, sizeof(fin.desc), "final check of slot %d", i);
		for (int k = 0; k < opt_threads; k++)
			if (thrs[k].ts[i].epoch == s->epoch)
				live += thrs[k].ts[i].nlive;
		if (s->hello_done) {
			if (ioctl(s->fd, UMMUNOT_IOC_GET_STATS, &st))
				FAIL("final GET_STATS: %s", errname(errno));
			else if (st.regions != live)
				FAIL("slot %d: GET_STATS says %llu regions, the fuzzer holds %llu "
				     "handles (a batch was not all-or-nothing?)", i,
				     (unsigned long long)st.regions, (unsigned long long)live);
			for (int k = 0; k < opt_threads; k++) {
				struct tslot *t = &thrs[k].ts[i];

				if (t->epoch != s->epoch)
					continue;
				for (unsigned j = 0; j < t->nlive; j++) {
					struct ummunot_batch b = { .ptr = (uintptr_t)&t->live[j], .count = 1 };

					if (ioctl(s->fd, UMMUNOT_IOC_UNREGISTER, &b))
						FAIL("final UNREGISTER of live handle 0x%llx: %s",
						     (unsigned long long)t->live[j], errname(errno));
				}
			}
			if (!ioctl(s->fd, UMMUNOT_IOC_GET_STATS, &st) && st.regions)
				FAIL("slot %d: %llu regions left after unregistering all", i,
				     (unsigned long long)st.regions);
		}
		unmap_all(s, false);
		close(s->fd);
		s->fd = -1;
	}
	for (int i = 0; i < norphans; i++)
		munmap(orphans[i].addr, orphans[i].len);
	norphans = 0;
}

static int worker_main(int proc, uint64_t calls_per_thread)
{
	int sv[2];

	my_proc = proc;
	/* The receiver first: it must not inherit any /dev/ummunot descriptor. */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		recv_pid = fork();
		if (recv_pid == 0) {
			close(sv[0]);
			receiver_main(sv[1]);
		}
		close(sv[1]);
		recv_sock = recv_pid > 0 ? sv[0] : -1;
	}
	if (opt_drop_uid && (proc & 1) && geteuid() == 0) {
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			fprintf(stderr, "proc %d: cannot drop to uid 65534: %s\n", proc,
				errname(errno));
	}
	arena = mmap((void *)(uintptr_t)(0x100000000000ULL + (uint64_t)proc * 0x1000000000ULL),
		     ARENA_PAGES * page_size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (arena == MAP_FAILED) {
		fprintf(stderr, "proc %d: arena: %s\n", proc, errname(errno));
		return 1;
	}
	quiet_base = 0x300000000000ULL + (uint64_t)proc * 0x10000000000ULL;
	for (int i = 0; i < NSLOTS; i++) {
		struct slot *s = &slots[i];

		pthread_rwlock_init(&s->rw, NULL);
		pthread_mutex_init(&s->cons_lock, NULL);
		pthread_mutex_init(&s->reg_lock, NULL);
		pthread_mutex_init(&s->filt_lock, NULL);
		pthread_mutex_init(&s->stats_lock, NULL);
		s->fd = -1;
		s->tab = calloc(TAB_SIZE, sizeof(*s->tab));
		if (!s->tab)
			return 1;
		slot_reset(s);
	}
	for (int k = 0; k < opt_threads; k++) {
		struct thr *t = &thrs[k];
		char *m = mmap(NULL, (SCRATCH_PAGES + 2) * page_size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return 1;
		t->idx = k;
		rng_seed(&t->r, opt_seed, proc + 1, k + 1);
		t->budget = calls_per_thread;
		t->scratch = m;
		t->guard = m + SCRATCH_PAGES * page_size;
		mprotect(t->guard, page_size, PROT_NONE);
		t->ro = t->guard + page_size;
		t->big = calloc(BIG_HANDLES, sizeof(uint64_t));
		if (!t->big)
			return 1;
	}
	for (int k = 0; k < opt_threads; k++)
		if (pthread_create(&thrs[k].tid, NULL, thread_main, &thrs[k])) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	for (int k = 0; k < opt_threads; k++)
		pthread_join(thrs[k].tid, NULL);
	if (!sh->failed)
		worker_final();
	if (recv_sock >= 0) {
		int st;

		close(recv_sock);
		waitpid(recv_pid, &st, 0);
	}
	return sh->failed ? 1 : 0;
}

/* ------------------------------------------------------------ controller */

static const char *const params[] = { "max_regions", "max_regions_per_mm",
	"max_user_memory", "max_ring_entries", "default_ring_entries" };
#define NPARAMS 5
static char saved[NPARAMS][64];
static bool have_saved[NPARAMS];

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return errno;
	if (write(fd, val, strlen(val)) < 0)
		ret = errno;
	close(fd);
	return ret;
}

static unsigned long long param_get(int i)
{
	char p[128], b[64];

	snprintf(p, sizeof(p), PARAM_DIR "/%s", params[i]);
	if (read_file(p, b, sizeof(b)) < 0)
		return 0;
	return strtoull(b, NULL, 0);
}

static void params_restore(void)
{
	for (int i = 0; i < NPARAMS; i++) {
		char p[128];

		if (!have_saved[i])
			continue;
		snprintf(p, sizeof(p), PARAM_DIR "/%s", params[i]);
		write_file(p, saved[i]);
	}
}

static void on_signal(int sig)
{
	if (my_proc < 0)
		params_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static unsigned long long default_user_memory;
static uint64_t param_writes, param_refusals;
/*
 * One write to a module parameter.  In range: must succeed and read back
 * (max_user_memory 0: the default).  Out of range: must fail with EINVAL
 * (admin-guide.rst: "an out-of-range write fails with EINVAL") and leave
 * the value unchanged.
 */
static void param_op(struct rng *r)
{
	int i = below(r, NPARAMS), err;
	char p[128], v[80];
	unsigned long long before = param_get(i), after, want = 0;
	bool in_range = chance(r, 50);

	snprintf(p, sizeof(p), PARAM_DIR "/%s", params[i]);
	if (in_range) {
		switch (i) {
		case 0: case 1:	/* regions: 1 .. 2^31-1 */
			want = chance(r, 20) ? 1 + below(r, 16) :
			       chance(r, 50) ? 131072 : (1ULL << 31) - 1 - below(r, 2);
			break;
		case 2:		/* bytes; 0 = default; kept at or below the default */
			want = chance(r, 20) ? 0 : 1 + below(r, default_user_memory);
			break;
		default:	/* ring entries: 64 .. 2^22 */
			want = chance(r, 30) ? 64 : chance(r, 50) ? 4096 : 64 + below(r, (1 << 22) - 63);
			break;
		}
		snprintf(v, sizeof(v), "%llu", want);
	} else {
		switch (below(r, 6)) {
		case 0:
			snprintf(v, sizeof(v), "%s", i == 2 ? "9223372036854775808" :
				 i <= 1 ? (chance(r, 50) ? "0" : "2147483648") :
				 (chance(r, 50) ? "63" : "4194305"));
			break;
		case 1: snprintf(v, sizeof(v), "-%llu", 1 + (unsigned long long)below(r, 100)); break;
		case 2: snprintf(v, sizeof(v), "abc"); break;
		case 3: snprintf(v, sizeof(v), "%s", i == 2 ? "18446744073709551615" :
				 (chance(r, 50) ? "4294967295" : "4294967296")); break;
		case 4: snprintf(v, sizeof(v), "99999999999999999999999"); break;
		default: snprintf(v, sizeof(v), "12x"); break;
		}
	}
	err = write_file(p, v);
	param_writes++;
	after = param_get(i);
	if (in_range) {
		if (err)
			FAIL("writing %s=%s (in range) failed: %s", params[i], v, errname(err));
		else if (i == 2 && want == 0 ? after != default_user_memory : after != want)
			FAIL("%s=%s read back as %llu", params[i], v, after);
		return;
	}
	param_refusals++;
	if (!err)
		FAIL("out-of-range write %s=%s succeeded (now %llu)", params[i], v, after);
	else if (err != EINVAL)
		FAIL("out-of-range write %s=%s failed with %s; admin-guide.rst and abi.rst "
		     "document EINVAL", params[i], v, errname(err));
	if (after != before)
		FAIL("refused write %s=%s changed the value %llu -> %llu", params[i], v,
		     before, after);
}

static unsigned long long stat_get(const char *name)
{
	char p[128], b[64];

	snprintf(p, sizeof(p), STATS_DIR "/%s", name);
	if (read_file(p, b, sizeof(b)) < 0)
		return ~0ULL;
	return strtoull(b, NULL, 0);
}

/* Kernel log lines that are bug reports (as tests/vm/guest-runner). */
static bool bad_kmsg(const char *l)
{
	static const char *const pat[] = { "BUG", "WARNING", "Oops", "scheduling while atomic",
		"lockdep", "possible circular locking", "general protection fault",
		"refcount_t", "list_del corruption", "KASAN", "UBSAN" };

	for (unsigned i = 0; i < sizeof(pat) / sizeof(pat[0]); i++)
		if (strstr(l, pat[i]))
			return true;
	return false;
}

static int kmsg_fd = -1;

static int kmsg_check(void)
{
	char buf[8192];
	int bad = 0;
	ssize_t n;

	if (kmsg_fd < 0)
		return 0;
	while ((n = read(kmsg_fd, buf, sizeof(buf) - 1)) > 0 || (n < 0 && errno == EPIPE)) {
		char *msg;

		if (n < 0)
			continue;
		buf[n] = 0;
		msg = strchr(buf, ';');
		msg = msg ? msg + 1 : buf;
		if (bad_kmsg(msg)) {
			fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 ": kernel log: %s", opt_seed, msg);
			bad = 1;
		} else if (strstr(msg, "ummunot")) {
			fprintf(stderr, "kernel: %s", msg);
		}
	}
	return bad;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ummunot-fuzz [--seed S] [--calls N] [--duration SECONDS] [--procs P]\n"
		"                    [--threads T] [--no-params] [--no-drop-uid] [--trace]\n"
		"                    [--progress SECONDS]\n"
		"defaults: random seed (printed), --calls 150000 --duration 25 --procs 3 --threads 3\n"
		"          --progress 300 (a line with the calls so far; 0: none)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	bool seed_given = false;
	unsigned long long clients0, regions0, taint0 = 0, taint1 = 0;
	char users0[4096] = "", users1[4096] = "", tbuf[64];
	pid_t pids[MAX_PROCS];
	struct rng cr;
	double t_end;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--seed") && v) opt_seed = strtoull(v, NULL, 0), seed_given = true, i++;
		else if (!strcmp(a, "--calls") && v) opt_calls = strtoull(v, NULL, 0), i++;
		else if (!strcmp(a, "--duration") && v) opt_duration = atof(v), i++;
		else if (!strcmp(a, "--procs") && v) opt_procs = atoi(v), i++;
		else if (!strcmp(a, "--threads") && v) opt_threads = atoi(v), i++;
		else if (!strcmp(a, "--no-params")) opt_params = false;
		else if (!strcmp(a, "--no-drop-uid")) opt_drop_uid = false;
		else if (!strcmp(a, "--trace")) opt_trace = true;
		else if (!strcmp(a, "--progress") && v) opt_progress = atof(v), i++;
		else usage();
	}
	if (opt_procs < 1 || opt_procs > MAX_PROCS || opt_threads < 1 ||
	    opt_threads > MAX_THREADS || opt_duration <= 0 || opt_calls == 0 ||
	    opt_progress < 0)
		usage();
	if (!seed_given) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		opt_seed = (uint64_t)ts.tv_sec * 1000003 ^ ts.tv_nsec ^ ((uint64_t)getpid() << 40);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	page_size = sysconf(_SC_PAGESIZE);
	printf("ummunot-fuzz: seed %" PRIu64 " calls %" PRIu64 " duration %.0fs procs %d threads %d%s\n"
	       "ummunot-fuzz: reproduce with: ummunot-fuzz --seed %" PRIu64 " --calls %" PRIu64
	       " --duration %.0f --procs %d --threads %d%s\n",
	       opt_seed, opt_calls, opt_duration, opt_procs, opt_threads,
	       opt_params ? "" : " (no parameter writes)", opt_seed, opt_calls, opt_duration,
	       opt_procs, opt_threads, opt_params ? "" : " --no-params");
	if (access(DEV, R_OK | W_OK)) {
		fprintf(stderr, "ummunot-fuzz: %s: %s (module not loaded?)\n", DEV, errname(errno));
		return 1;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	if (geteuid() != 0) {
		opt_params = false;
		opt_drop_uid = false;
		printf("ummunot-fuzz: not root: no parameter writes, no kernel log or users checks\n");
	}
	kmsg_fd = geteuid() == 0 ? open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC) : -1;
	if (kmsg_fd >= 0)
		lseek(kmsg_fd, 0, SEEK_END);
	if (read_file("/proc/sys/kernel/tainted", tbuf, sizeof(tbuf)) > 0)
		taint0 = strtoull(tbuf, NULL, 0);
	clients0 = stat_get("clients");
	regions0 = stat_get("regions");
	read_file(USERS_FILE, users0, sizeof(users0));
	for (int i = 0; i < NPARAMS; i++) {
		char p[128];

		snprintf(p, sizeof(p), PARAM_DIR "/%s", params[i]);
		if (read_file(p, saved[i], sizeof(saved[i])) > 0) {
			saved[i][strcspn(saved[i], "\n")] = 0;
			have_saved[i] = true;
		}
	}
	if (opt_params) {
		char p[128];

		/* Learn the default of max_user_memory (writing 0 selects it). */
		snprintf(p, sizeof(p), PARAM_DIR "/max_user_memory");
		write_file(p, "0");
		default_user_memory = param_get(2);
		write_file(p, saved[2]);
		{
			struct sigaction sa = { .sa_handler = on_signal };

			sigemptyset(&sa.sa_mask);
			sigaction(SIGINT, &sa, NULL);
			sigaction(SIGTERM, &sa, NULL);
			sigaction(SIGHUP, &sa, NULL);
		}
	}
	t_start = now();
	for (int p = 0; p < opt_procs; p++) {
		pids[p] = fork();
		if (pids[p] == 0) {
			if (kmsg_fd >= 0)
				close(kmsg_fd);
			_exit(worker_main(p, opt_calls / (opt_procs * opt_threads) + 1));
		}
		if (pids[p] < 0) {
			perror("fork");
			sh->stop = 1;
			opt_procs = p;
			rc = 1;
			break;
		}
	}
	rng_seed(&cr, opt_seed, 0, 0);
	{
		int left = opt_procs;
		double t_progress = t_start + opt_progress;
		cur = NULL;
		while (left > 0) {
			int st;
			pid_t w = waitpid(-1, &st, WNOHANG);

			if (w > 0) {
				left--;
				if (!WIFEXITED(st) || WEXITSTATUS(st)) {
					fprintf(stderr, "ummunot-fuzz: worker %d exited with status 0x%x\n",
						(int)w, st);
					rc = 1;
					sh->stop = 1;
				}
				continue;
			}
			if (opt_params && !sh->stop && chance(&cr, 30))
				param_op(&cr);
			if (chance(&cr, 20)) {	/* observers never wait for ioctls */
				stat_get("clients");
				stat_get("regions");
				read_file(USERS_FILE, users1, sizeof(users1));
			}
			usleep(20000);
			if (opt_progress > 0 && now() >= t_progress) {
				uint64_t c = __atomic_load_n(&sh->calls, __ATOMIC_RELAXED);
				double t = now() - t_start;

				fprintf(stderr, "ummunot-fuzz: %" PRIu64 " calls in %.0f s (%.0f calls/s)\n",
					c, t, c / t);
				t_progress += opt_progress;
			}
			if (now() - t_start > opt_duration + 120) {
				fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 ": workers did not stop "
					"120 s after the deadline\n", opt_seed);
				sh->failed = 1;
				for (int p = 0; p < opt_procs; p++)
					kill(pids[p], SIGKILL);
			}
		}
	}
	t_end = now();
	params_restore();
	for (int i = 0; i < NPARAMS; i++) {
		char p[128], b[64];

		snprintf(p, sizeof(p), PARAM_DIR "/%s", params[i]);
		if (have_saved[i] && read_file(p, b, sizeof(b)) > 0 &&
		    strtoull(b, NULL, 0) != strtoull(saved[i], NULL, 0)) {
			fprintf(stderr, "FUZZ-FAIL: %s not restored: %s (was %s)\n", params[i], b, saved[i]);
			rc = 1;
		}
	}
	/* Everything closed: no client, no region, no per-user charge left. */
	{
		unsigned long long c = 0, g = 0;
		bool users_ok = false;

		for (int i = 0; i < 100; i++) {
			c = stat_get("clients");
			g = stat_get("regions");
			read_file(USERS_FILE, users1, sizeof(users1));
			users_ok = !strcmp(users0, users1);
			if (c == clients0 && g == regions0 && users_ok)
				break;
			usleep(100000);
		}
		if (c != clients0 || g != regions0) {
			fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 ": after every fuzz process exited: "
				"clients %llu (before %llu), regions %llu (before %llu)\n",
				opt_seed, c, clients0, g, regions0);
			rc = 1;
		}
		if (!users_ok && geteuid() == 0) {
			fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 ": %s differs from before the run:\n"
				"before:\n%safter:\n%s", opt_seed, USERS_FILE, users0, users1);
			rc = 1;
		}
	}
	if (read_file("/proc/sys/kernel/tainted", tbuf, sizeof(tbuf)) > 0)
		taint1 = strtoull(tbuf, NULL, 0);
	if (taint1 != taint0) {
		fprintf(stderr, "FUZZ-FAIL seed=%" PRIu64 ": kernel taint 0x%llx -> 0x%llx\n",
			opt_seed, taint0, taint1);
		rc = 1;
	}
	if (kmsg_check())
		rc = 1;
	if (sh->failed)
		rc = 1;
	printf("ummunot-fuzz: %" PRIu64 " calls in %.1f s (%.0f calls/s), %" PRIu64
	       " documented errors, %" PRIu64 " ENOSPC, %" PRIu64 " events read, %" PRIu64
	       " forks, %" PRIu64 " parameter writes (%" PRIu64 " out of range), %" PRIu64
	       " violations\n", sh->calls, t_end - t_start,
	       sh->calls / (t_end - t_start), sh->errs_expected, sh->enospc, sh->events_read,
	       sh->forks, param_writes, param_refusals, sh->violations);
	printf("ummunot-fuzz: seed %" PRIu64 ": %s\n", opt_seed, rc ? "FAIL" : "PASS");
	return rc;
}
