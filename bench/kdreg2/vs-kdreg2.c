// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ummunot and kdreg2 side by side: one program, one boot, the same workload
 * against both modules (bench/kdreg2/run builds kdreg2 from its own source
 * and runs this in the VM; Documentation/performance.md has the method and
 * the results).  kdreg2's user API header (include/kdreg2.h of its source)
 * is used as it is: nothing of kdreg2 is copied here.
 *
 * Rows (--rows LIST selects, comma separated; default all):
 *   regunreg   register one region, unregister it, at 10^3 and 10^5 watched
 *              (--quick: 10^3 and 10^4); minimum and median of each ioctl
 *   check      "did anything change?" when nothing did: ummunot's
 *              out-of-line ummunot_monitor_changed(), its inline
 *              ummunot_monitor_check_changed(), kdreg2's inline
 *              kdreg2_mapping_changed()
 *   consume    read one pending event (ummunot: from the mapped ring;
 *              kdreg2: read(2)); the price of a whole-process generation
 *   open       open + size for 10^5 regions
 *   visible    munmap / MAP_FIXED / mremap / MADV_DONTNEED of a watched
 *              region while a second thread uses the monitor's fd: is the
 *              change visible when the system call returns?
 *   parked     the same (munmap) while a second thread is parked by a page
 *              fault (userfaultfd) inside the module: kdreg2's read(),
 *              ummunot's REGISTER copying its array
 *   fork       fork() with 1000 watched, touched regions: false invalidations
 *   mprotect   mprotect(PROT_READ) of 100 watched regions: false invalidations
 *   ksm        KSM merges two watched pages (ksmd's invalidation)
 *   native     (no module needed) the inline checks' cost on plain memory
 *
 * Every timing is the same loop for both modules in the same run; the
 * figures to compare are the ratios (TCG timings swing 20-40% run to run).
 * JSON on stdout, progress on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <kdreg2.h>
#include <ummunot/ummunot.h>

#include "bench-util.h"

#define PAGE 4096UL

enum kind { UM, KD, NR_KINDS };
static const char *const kname[NR_KINDS] = {"ummunot", "kdreg2"};

/* One open monitor of either kind. */
struct mon {
	enum kind kind;
	struct ummunot_monitor *um;
	int fd;				/* the module's file */
	const struct kdreg2_status_data *st;	/* kdreg2's status page */
};

/* One watched region. */
struct reg {
	uint64_t start, len, cookie;
	uint64_t handle;				/* ummunot */
	struct kdreg2_monitoring_params kp;		/* kdreg2 */
};

/* Cookies index um_seen[] below. */
#define MAX_COOKIES (1u << 22)
static uint64_t next_cookie = 1;

static uint64_t new_cookie(void)
{
	if (next_cookie >= MAX_COOKIES)
		bu_die("more than %u regions registered in one run", MAX_COOKIES);
	return next_cookie++;
}

static void mon_open(struct mon *m, enum kind k, size_t max_regions)
{
	memset(m, 0, sizeof(*m));
	m->kind = k;
	if (k == UM) {
		BU_OK("ummunot_monitor_open", ummunot_monitor_open(NULL, &m->um));
		m->fd = ummunot_monitor_fd(m->um);
		return;
	}
	/* Non-blocking: a consumer that polls (a blocking read() sleeps
	 * without kdreg2's mutex, but would wait for an event the other
	 * thread already took). */
	m->fd = BU_SYS("open " KDREG2_DEVICE_NAME,
		       open(KDREG2_DEVICE_NAME, O_RDWR | O_CLOEXEC | O_NONBLOCK));
	struct kdreg2_config_data cfg = {.max_regions = max_regions};
	BU_SYS("KDREG2_IOCTL_CONFIG_DATA", ioctl(m->fd, KDREG2_IOCTL_CONFIG_DATA, &cfg));
	m->st = cfg.status_data;
}

static void mon_close(struct mon *m)
{
	if (m->kind == UM)
		ummunot_monitor_close(m->um);
	else
		close(m->fd);
	m->um = NULL;
	m->fd = -1;
}

/* Register one region; 0 or -errno. */
static int mon_reg(struct mon *m, struct reg *r)
{
	r->cookie = new_cookie();
	if (m->kind == UM) {
		struct ummunot_region ur = {.start = r->start, .length = r->len,
					    .cookie = r->cookie};
		int e = ummunot_monitor_register(m->um, &ur, 1, NULL);
		r->handle = ur.handle;
		return e;
	}
	struct kdreg2_ioctl_monitor km = {
		.addr = (const void *)(uintptr_t)r->start,
		.length = r->len,
		.cookie = r->cookie,
	};
	if (ioctl(m->fd, KDREG2_IOCTL_MONITOR, &km))
		return -errno;
	r->kp = km.monitoring_params;
	return 0;
}

static int mon_unreg(struct mon *m, struct reg *r)
{
	if (m->kind == UM)
		return ummunot_monitor_unregister(m->um, &r->handle, 1, NULL);
	struct kdreg2_ioctl_unmonitor ku = {.cookie = r->cookie,
					    .monitoring_params = r->kp};
	return ioctl(m->fd, KDREG2_IOCTL_UNMONITOR, &ku) ? -errno : 0;
}

/* Register n regions (ummunot in batches of 4096, kdreg2 one by one). */
static void mon_reg_many(struct mon *m, struct reg *r, size_t n)
{
	if (m->kind == KD) {
		for (size_t i = 0; i < n; i++)
			BU_OK("KDREG2_IOCTL_MONITOR", mon_reg(m, &r[i]));
		return;
	}
	struct ummunot_region *ur = calloc(4096, sizeof(*ur));
	if (!ur)
		bu_die("out of memory");
	for (size_t i = 0; i < n; i += 4096) {
		unsigned int c = n - i < 4096 ? (unsigned int)(n - i) : 4096;
		for (unsigned int j = 0; j < c; j++) {
			r[i + j].cookie = new_cookie();
			ur[j] = (struct ummunot_region){.start = r[i + j].start,
				.length = r[i + j].len, .cookie = r[i + j].cookie};
		}
		BU_OK("ummunot_monitor_register", ummunot_monitor_register(m->um, ur, c, NULL));
		for (unsigned int j = 0; j < c; j++)
			r[i + j].handle = ur[j].handle;
	}
	free(ur);
}

/*
 * ummunot: events read so far, by cookie (the main thread is the ring's only
 * consumer).  Cookies are small integers: a bitmap of "seen".
 */
static uint8_t um_seen[MAX_COOKIES];

static void um_drain(struct mon *m)
{
	struct ummunot_event ev[64];
	int n;

	while ((n = ummunot_monitor_read(m->um, ev, 64)) > 0)
		for (int i = 0; i < n; i++)
			if (ev[i].cookie < MAX_COOKIES)
				um_seen[ev[i].cookie] = 1;	/* else the second thread's */
	if (n == -EOVERFLOW)
		bu_die("ummunot ring overflow");
	BU_OK("ummunot_monitor_read", n);
}

/* Is the invalidation of r visible now (to this thread, with no syscall)? */
static bool changed(struct mon *m, const struct reg *r)
{
	if (m->kind == KD)
		return kdreg2_mapping_changed(m->st, &r->kp);
	um_drain(m);
	return um_seen[r->cookie];
}

/* kdreg2: consume pending events (they would fill its queue). */
static void kd_drain(struct mon *m)
{
	struct kdreg2_event ev[64];

	while (kdreg2_read_counter(&m->st->pending_events)) {
		ssize_t n = read(m->fd, ev, sizeof(ev));
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0)
			break;
	}
}

static void *map_anon(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		bu_die("mmap %zu: %s", len, strerror(errno));
	return p;
}

static double vmin(const double *v, size_t n)
{
	double m = v[0];
	for (size_t i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

/* ---- regunreg ---------------------------------------------------------- */

static void row_regunreg(void)
{
	size_t sizes[2] = {1000, bu_quick ? 10000 : 100000};
	size_t reps = bu_quick ? 300 : 2000;

	bu_json_arr_begin("regunreg");
	for (int s = 0; s < 2; s++) {
		size_t n = sizes[s];
		double res[NR_KINDS][4];
		/* Regions one page apart in a reserved, untouched mapping; the
		 * measured one after them (each rep reuses its address). */
		size_t len = (n + 2) * PAGE;
		unsigned char *base = map_anon(len, PROT_READ | PROT_WRITE);
		/* Interleave the two modules' repetitions so that both see
		 * the same host load. */
		struct mon m[NR_KINDS];
		struct reg *bg[NR_KINDS];
		for (int k = 0; k < NR_KINDS; k++) {
			bg[k] = calloc(n, sizeof(struct reg));
			for (size_t i = 0; i < n; i++)
				bg[k][i] = (struct reg){.start = (uintptr_t)base + i * PAGE,
							.len = PAGE};
			mon_open(&m[k], (enum kind)k, n + 16);
			uint64_t t0 = bu_now_ns();
			mon_reg_many(&m[k], bg[k], n);
			bu_log("regunreg: %s: %zu background regions in %.1f ms", kname[k], n,
			       (double)(bu_now_ns() - t0) / 1e6);
		}
		double *tr[NR_KINDS], *tu[NR_KINDS];
		for (int k = 0; k < NR_KINDS; k++) {
			tr[k] = calloc(reps, sizeof(double));
			tu[k] = calloc(reps, sizeof(double));
		}
		for (size_t i = 0; i < reps; i++) {
			for (int k = 0; k < NR_KINDS; k++) {
				struct reg r = {.start = (uintptr_t)base + (n + 1) * PAGE, .len = PAGE};
				uint64_t t0 = bu_now_ns();
				int e = mon_reg(&m[k], &r);
				uint64_t t1 = bu_now_ns();
				if (e)
					bu_die("%s: register: %s", kname[k], strerror(-e));
				e = mon_unreg(&m[k], &r);
				uint64_t t2 = bu_now_ns();
				if (e)
					bu_die("%s: unregister: %s", kname[k], strerror(-e));
				tr[k][i] = (double)(t1 - t0);
				tu[k][i] = (double)(t2 - t1);
			}
		}
		for (int k = 0; k < NR_KINDS; k++) {
			res[k][0] = vmin(tr[k], reps);
			res[k][1] = bu_median(tr[k], reps);
			res[k][2] = vmin(tu[k], reps);
			res[k][3] = bu_median(tu[k], reps);
			free(tr[k]);
			free(tu[k]);
			mon_close(&m[k]);
		}
		bu_json_obj_begin(NULL);
		bu_json_u64("watched", n);
		bu_json_u64("reps", reps);
		for (int k = 0; k < NR_KINDS; k++) {
			bu_json_obj_begin(kname[k]);
			bu_json_num("register_min_ns", res[k][0]);
			bu_json_num("register_median_ns", res[k][1]);
			bu_json_num("unregister_min_ns", res[k][2]);
			bu_json_num("unregister_median_ns", res[k][3]);
			bu_json_obj_end();
		}
		bu_json_num("register_min_ratio", res[UM][0] / res[KD][0]);
		bu_json_num("unregister_min_ratio", res[UM][2] / res[KD][2]);
		bu_json_obj_end();
		bu_log("regunreg %zu watched: register min %.2f us (ummunot) vs %.2f us (kdreg2), "
		       "ratio %.2f; unregister min %.2f vs %.2f us, ratio %.2f", n,
		       res[UM][0] / 1e3, res[KD][0] / 1e3, res[UM][0] / res[KD][0],
		       res[UM][2] / 1e3, res[KD][2] / 1e3, res[UM][2] / res[KD][2]);
		for (int k = 0; k < NR_KINDS; k++)
			free(bg[k]);
		munmap(base, len);
	}
	bu_json_arr_end();
}

/* ---- check -------------------------------------------------------------- */

/*
 * n checks of expr, ns per check.  prep runs first in every iteration: it
 * launders the pointers expr reads through, so that the compiler reloads
 * everything a check loads, as in a hit that gets its pointers afresh
 * (without it, kdreg2's non-volatile loads of max_regions, the array base
 * and the saved generation would be hoisted out of the loop).
 */
#define LAUNDER(p) __asm__ volatile("" : "+r"(p))
#define CHECK_LOOP(n, prep, expr) ({					\
	uint64_t _t0 = bu_now_ns();					\
	unsigned long _hits = 0;					\
	for (size_t _i = 0; _i < (n); _i++) {				\
		prep;							\
		_hits += (expr) ? 1 : 0;				\
	}								\
	uint64_t _t1 = bu_now_ns();					\
	if (_hits)							\
		bu_die("check: %lu changes where nothing changed", _hits); \
	(double)(_t1 - _t0) / (double)(n);				\
})

/*
 * Each timed loop is a function of its own, aligned to a page: under TCG a
 * translated block that crosses a page boundary is not chained to the next
 * one, and a loop that happened to straddle one ran 3.5x slower (kdreg2's
 * check measured 4.3 or 15 ns depending on where an unrelated change
 * moved it).  Page alignment gives every loop the same footing.
 */
#define LOOP_FN __attribute__((noinline, aligned(4096)))

static LOOP_FN double loop_call(size_t n, struct ummunot_monitor *mp)
{
	return CHECK_LOOP(n, LAUNDER(mp), ummunot_monitor_changed(mp));
}

static LOOP_FN double loop_inline(size_t n, const struct ummunot_monitor_check *cp)
{
	return CHECK_LOOP(n, LAUNDER(cp), ummunot_monitor_check_changed(cp));
}

static LOOP_FN double loop_kdreg2(size_t n, const struct kdreg2_status_data *sp,
				  const struct kdreg2_monitoring_params *kpp)
{
	return CHECK_LOOP(n, { LAUNDER(sp); LAUNDER(kpp); }, kdreg2_mapping_changed(sp, kpp));
}

static void row_check(void)
{
	size_t n = bu_quick ? 100000 : 1000000;
	int reps = bu_quick ? 5 : 11;
	struct mon um, kd;
	double t_out[11], t_in[11], t_kd[11];

	mon_open(&um, UM, 16);
	mon_open(&kd, KD, 16);
	unsigned char *p = map_anon(PAGE, PROT_READ | PROT_WRITE);
	struct reg ru = {.start = (uintptr_t)p, .len = PAGE}, rk = ru;
	BU_OK("register", mon_reg(&um, &ru));
	BU_OK("monitor", mon_reg(&kd, &rk));
	struct ummunot_monitor_check chk = { .size = sizeof(chk) };
	BU_OK("ummunot_monitor_check_init", ummunot_monitor_check_init(um.um, &chk));
	struct ummunot_monitor *mp = um.um;
	const struct ummunot_monitor_check *cp = &chk;
	const struct kdreg2_status_data *sp = kd.st;
	const struct kdreg2_monitoring_params *kpp = &rk.kp;
	for (int r = 0; r < reps; r++) {
		t_out[r] = loop_call(n, mp);
		t_in[r] = loop_inline(n, cp);
		t_kd[r] = loop_kdreg2(n, sp, kpp);
	}
	/* Both must see a real change (the check can fail). */
	munmap(p, PAGE);
	if (!ummunot_monitor_check_changed(&chk) || !kdreg2_mapping_changed(kd.st, &rk.kp))
		bu_die("check: a munmap of the watched page was not seen");
	double a = vmin(t_out, reps), b = vmin(t_in, reps), c = vmin(t_kd, reps);
	bu_json_obj_begin("check");
	bu_json_u64("iterations", n);
	bu_json_num("ummunot_out_of_line_min_ns", a);
	bu_json_num("ummunot_inline_min_ns", b);
	bu_json_num("kdreg2_inline_min_ns", c);
	bu_json_num("inline_ratio", b / c);
	bu_json_num("out_of_line_ratio", a / c);
	bu_json_obj_end();
	bu_log("check: ummunot out-of-line %.2f ns, inline %.2f ns, kdreg2 %.2f ns "
	       "(inline ratio %.2f)", a, b, c, b / c);
	mon_close(&um);
	mon_close(&kd);
}

/* The same inline checks on plain memory: no module needed (host or guest). */
static void row_native(void)
{
	size_t n = bu_quick ? 10000000 : 100000000;
	int reps = bu_quick ? 3 : 7;
	static __u64 hdr_gen = 5;
	static uint64_t seen = 5;
	static struct kdreg2_monitoring_state states[64];
	static struct kdreg2_status_data st = {.max_regions = 64};
	struct kdreg2_monitoring_params kp = {.location = 17, .generation = 3};
	double t_in[7], t_kd[7];

	st.monitoring_state_base = states;
	states[17].u.state.val = 3;
	struct ummunot_monitor_check chk = { .size = sizeof(chk) };
	/* What ummunot_monitor_check_init() fills, pointing at plain words. */
	chk.generation = &hdr_gen;
	chk.seen = &seen;
	const struct ummunot_monitor_check *cp = &chk;
	const struct kdreg2_status_data *sp = &st;
	const struct kdreg2_monitoring_params *kpp = &kp;
	for (int r = 0; r < reps; r++) {
		t_in[r] = loop_inline(n, cp);
		t_kd[r] = loop_kdreg2(n, sp, kpp);
	}
	double b = vmin(t_in, reps), c = vmin(t_kd, reps);
	bu_json_obj_begin("native");
	bu_json_u64("iterations", n);
	bu_json_num("ummunot_inline_min_ns", b);
	bu_json_num("kdreg2_inline_min_ns", c);
	bu_json_num("inline_ratio", b / c);
	bu_json_obj_end();
	bu_log("native: ummunot inline %.3f ns, kdreg2 inline %.3f ns (ratio %.2f)", b, c, b / c);
}

/* ---- consume ------------------------------------------------------------ */

static void row_consume(void)
{
	size_t reps = bu_quick ? 200 : 1000;
	double *t[NR_KINDS];
	struct mon m[NR_KINDS];

	for (int k = 0; k < NR_KINDS; k++) {
		mon_open(&m[k], (enum kind)k, 64);
		t[k] = calloc(reps, sizeof(double));
	}
	for (size_t i = 0; i < reps; i++) {
		for (int k = 0; k < NR_KINDS; k++) {
			unsigned char *p = map_anon(PAGE, PROT_READ | PROT_WRITE);
			p[0] = 1;
			struct reg r = {.start = (uintptr_t)p, .len = PAGE};
			BU_OK("register", mon_reg(&m[k], &r));
			munmap(p, PAGE);
			uint64_t t0 = bu_now_ns(), t1;
			if (k == UM) {
				struct ummunot_event ev;
				int n = ummunot_monitor_read(m[k].um, &ev, 1);
				t1 = bu_now_ns();
				if (n != 1 || ev.cookie != r.cookie)
					bu_die("consume: ummunot read %d", n);
			} else {
				struct kdreg2_event ev;
				ssize_t n = read(m[k].fd, &ev, sizeof(ev));
				t1 = bu_now_ns();
				if (n != (ssize_t)sizeof(ev) || ev.u.mapping_change.cookie != r.cookie)
					bu_die("consume: kdreg2 read %zd", n);
			}
			t[k][i] = (double)(t1 - t0);
			/* kdreg2 unmonitors on the event; ummunot's region stays. */
			if (k == UM)
				BU_OK("unregister", mon_unreg(&m[k], &r));
		}
	}
	bu_json_obj_begin("consume");
	for (int k = 0; k < NR_KINDS; k++) {
		bu_json_obj_begin(kname[k]);
		bu_json_num("min_ns", vmin(t[k], reps));
		bu_json_num("median_ns", bu_median(t[k], reps));
		bu_json_obj_end();
	}
	bu_json_num("min_ratio", vmin(t[UM], reps) / vmin(t[KD], reps));
	bu_json_obj_end();
	bu_log("consume one event: ummunot %.0f ns, kdreg2 %.0f ns (min)",
	       vmin(t[UM], reps), vmin(t[KD], reps));
	for (int k = 0; k < NR_KINDS; k++) {
		mon_close(&m[k]);
		free(t[k]);
	}
}

/* ---- open --------------------------------------------------------------- */

static void row_open(void)
{
	int reps = bu_quick ? 5 : 20;
	double t[NR_KINDS][20];

	for (int r = 0; r < reps; r++) {
		for (int k = 0; k < NR_KINDS; k++) {
			struct mon m;
			uint64_t t0 = bu_now_ns();
			mon_open(&m, (enum kind)k, 100000);
			t[k][r] = (double)(bu_now_ns() - t0);
			mon_close(&m);
		}
	}
	double a = vmin(t[UM], reps), b = vmin(t[KD], reps);
	bu_json_obj_begin("open");
	bu_json_num("ummunot_min_ns", a);
	bu_json_num("kdreg2_min_ns", b);
	bu_json_num("min_ratio", a / b);
	bu_json_obj_end();
	bu_log("open+size 1e5: ummunot %.2f ms, kdreg2 %.2f ms (min)", a / 1e6, b / 1e6);
}

/* ---- visible ------------------------------------------------------------ */

/* The second thread: uses the monitor's file in a loop (the module's locks). */
struct user_thread {
	pthread_t tid;
	struct mon *m;
	atomic_int stop;
	unsigned long calls;
};

static void *user_fn(void *arg)
{
	struct user_thread *u = arg;
	unsigned char *dummy = map_anon(PAGE, PROT_NONE);

	while (!atomic_load_explicit(&u->stop, memory_order_relaxed)) {
		if (u->m->kind == KD) {
			/* What a kdreg2 consumer does: read events, (un)monitor. */
			struct kdreg2_event ev[8];
			if (read(u->m->fd, ev, sizeof(ev)) < 0 && errno != EAGAIN)
				bu_die("kdreg2 read: %s", strerror(errno));
			struct kdreg2_ioctl_monitor km = {.addr = dummy, .length = PAGE,
				.cookie = (1ull << 40) + u->calls};
			if (ioctl(u->m->fd, KDREG2_IOCTL_MONITOR, &km) == 0) {
				struct kdreg2_ioctl_unmonitor ku = {.cookie = km.cookie,
					.monitoring_params = km.monitoring_params};
				ioctl(u->m->fd, KDREG2_IOCTL_UNMONITOR, &ku);
			}
		} else {
			/* The same on ummunot's file, raw ioctls (the library's
			 * consumer is the main thread). */
			struct ummunot_stats st;
			ioctl(u->m->fd, UMMUNOT_IOC_GET_STATS, &st);
			struct ummunot_region r = {.start = (uintptr_t)dummy, .length = PAGE,
				.cookie = 1ull << 40};
			struct ummunot_batch b = {.ptr = (uintptr_t)&r, .count = 1};
			if (ioctl(u->m->fd, UMMUNOT_IOC_REGISTER, &b) == 0) {
				b.ptr = (uintptr_t)&r.handle;
				ioctl(u->m->fd, UMMUNOT_IOC_UNREGISTER, &b);
			}
		}
		u->calls++;
	}
	munmap(dummy, PAGE);
	return NULL;
}

enum op { OP_MUNMAP, OP_MAP_FIXED, OP_MREMAP, OP_DONTNEED, NR_OPS };
static const char *const opname[NR_OPS] = {"munmap", "map_fixed", "mremap", "madv_dontneed"};

#define VLEN (64 * 1024)

/* One iteration: watch a fresh touched region, change it, check at once.
 * Returns 0 (visible at return) or the ns until it became visible. */
static uint64_t visible_once(struct mon *m, enum op op, unsigned char *spare)
{
	unsigned char *p = map_anon(VLEN, PROT_READ | PROT_WRITE);
	memset(p, 1, VLEN);
	struct reg r = {.start = (uintptr_t)p, .len = VLEN};
	BU_OK("register", mon_reg(m, &r));
	switch (op) {
	case OP_MUNMAP:
		munmap(p, VLEN);
		break;
	case OP_MAP_FIXED:
		if (mmap(p, VLEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
			 -1, 0) != p)
			bu_die("mmap MAP_FIXED: %s", strerror(errno));
		break;
	case OP_MREMAP:
		if (mremap(p, VLEN, VLEN, MREMAP_MAYMOVE | MREMAP_FIXED, spare) != spare)
			bu_die("mremap: %s", strerror(errno));
		break;
	case OP_DONTNEED:
		madvise(p, VLEN, MADV_DONTNEED);
		break;
	default:
		break;
	}
	uint64_t late = 0;
	if (!changed(m, &r)) {
		uint64_t t0 = bu_now_ns();
		while (!changed(m, &r)) {
			if (bu_now_ns() - t0 > 10ull * 1000000000)
				bu_die("%s: %s never became visible", kname[m->kind], opname[op]);
			sched_yield();
		}
		late = bu_now_ns() - t0;
		if (!late)
			late = 1;
	}
	/* Clean up: kdreg2 unmonitored the region at the event; ummunot's
	 * region stays until unregistered. */
	if (m->kind == UM)
		BU_OK("unregister", mon_unreg(m, &r));
	else
		kd_drain(m);
	if (op == OP_MREMAP)
		munmap(spare, VLEN);
	else if (op != OP_MUNMAP)
		munmap(p, VLEN);
	return late;
}

static void row_visible(size_t iters)
{
	bu_json_obj_begin("visible");
	bu_json_u64("iterations_per_op", iters);
	for (int k = 0; k < NR_KINDS; k++) {
		struct mon m;
		mon_open(&m, (enum kind)k, 4096);
		struct user_thread u = {.m = &m};
		if (pthread_create(&u.tid, NULL, user_fn, &u))
			bu_die("pthread_create");
		bu_json_obj_begin(kname[k]);
		unsigned long total_late = 0;
		for (int op = 0; op < NR_OPS; op++) {
			unsigned long late = 0;
			uint64_t worst = 0;
			for (size_t i = 0; i < iters; i++) {
				unsigned char *spare = NULL;
				if (op == OP_MREMAP) {
					spare = map_anon(VLEN, PROT_NONE);
				}
				uint64_t l = visible_once(&m, (enum op)op, spare);
				if (l) {
					late++;
					if (l > worst)
						worst = l;
				}
			}
			bu_json_obj_begin(opname[op]);
			bu_json_u64("late", late);
			bu_json_num("worst_late_ms", (double)worst / 1e6);
			bu_json_obj_end();
			bu_log("visible: %s: %s: %lu of %zu late (worst %.3f ms)", kname[k],
			       opname[op], late, iters, (double)worst / 1e6);
			total_late += late;
		}
		atomic_store(&u.stop, 1);
		pthread_join(u.tid, NULL);
		bu_json_u64("late", total_late);
		bu_json_u64("second_thread_calls", u.calls);
		bu_json_obj_end();
		mon_close(&m);
	}
	bu_json_obj_end();
}

/* ---- parked ------------------------------------------------------------- */

struct parked {
	struct mon *m;
	void *buf;		/* userfaultfd-registered, never populated */
	long ret;
	int err;
};

static void *parked_fn(void *arg)
{
	struct parked *pk = arg;

	if (pk->m->kind == KD) {
		/* kdreg2 holds its mutex across copy_to_user(): park there. */
		pk->ret = read(pk->m->fd, pk->buf, sizeof(struct kdreg2_event));
	} else {
		/* ummunot's REGISTER copying its batch array from the page. */
		struct ummunot_batch b = {.ptr = (uintptr_t)pk->buf, .count = 1};
		pk->ret = ioctl(pk->m->fd, UMMUNOT_IOC_REGISTER, &b);
	}
	pk->err = pk->ret < 0 ? errno : 0;
	return NULL;
}

static void row_parked(size_t rounds)
{
	bu_json_obj_begin("parked");
	bu_json_u64("munmaps", rounds);
	for (int k = 0; k < NR_KINDS; k++) {
		struct mon m;
		mon_open(&m, (enum kind)k, 4096);
		int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
		if (uffd < 0)
			bu_die("userfaultfd: %s", strerror(errno));
		struct uffdio_api api = {.api = UFFD_API};
		BU_SYS("UFFDIO_API", ioctl(uffd, UFFDIO_API, &api));
		unsigned char *ub = map_anon(PAGE, PROT_READ | PROT_WRITE);
		struct uffdio_register ur = {.range = {.start = (uintptr_t)ub, .len = PAGE},
					     .mode = UFFDIO_REGISTER_MODE_MISSING};
		BU_SYS("UFFDIO_REGISTER", ioctl(uffd, UFFDIO_REGISTER, &ur));

		/* The watched regions first (kdreg2's MONITOR would wait for the
		 * parked thread's mutex), plus one whose event the reader gets. */
		struct reg *r = calloc(rounds + 1, sizeof(*r));
		unsigned char **pages = calloc(rounds + 1, sizeof(*pages));
		for (size_t i = 0; i <= rounds; i++) {
			pages[i] = map_anon(PAGE, PROT_READ | PROT_WRITE);
			pages[i][0] = 1;
			r[i] = (struct reg){.start = (uintptr_t)pages[i], .len = PAGE};
			BU_OK("register", mon_reg(&m, &r[i]));
		}
		if (k == KD) {
			munmap(pages[rounds], PAGE);	/* an event to read */
			while (!kdreg2_read_counter(&m.st->pending_events))
				sched_yield();
		}
		struct parked pk = {.m = &m, .buf = ub};
		pthread_t tid;
		if (pthread_create(&tid, NULL, parked_fn, &pk))
			bu_die("pthread_create");
		/* Parked: its fault is pending on the userfaultfd. */
		struct uffd_msg msg;
		if (read(uffd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg) ||
		    msg.event != UFFD_EVENT_PAGEFAULT)
			bu_die("parked: no page fault from the second thread");
		unsigned long stale = 0;
		for (size_t i = 0; i < rounds; i++) {
			munmap(pages[i], PAGE);
			if (!changed(&m, &r[i]))
				stale++;
		}
		/* Unpark: a zero page (ummunot's REGISTER then fails with
		 * EINVAL on the zero-length region, which is fine). */
		struct uffdio_zeropage zp = {.range = {.start = (uintptr_t)ub, .len = PAGE}};
		BU_SYS("UFFDIO_ZEROPAGE", ioctl(uffd, UFFDIO_ZEROPAGE, &zp));
		pthread_join(tid, NULL);
		/* Eventually visible (kdreg2's deferred work ran)? */
		unsigned long never = 0;
		uint64_t t0 = bu_now_ns();
		for (size_t i = 0; i < rounds; i++)
			while (!changed(&m, &r[i])) {
				if (bu_now_ns() - t0 > 5ull * 1000000000) {
					never++;
					break;
				}
				usleep(1000);
			}
		bu_json_obj_begin(kname[k]);
		bu_json_u64("stale_at_return", stale);
		bu_json_u64("never_visible_5s", never);
		bu_json_obj_end();
		bu_log("parked: %s: %lu of %zu munmaps returned stale (%lu never visible in 5 s)",
		       kname[k], stale, rounds, never);
		close(uffd);
		munmap(ub, PAGE);
		free(r);
		free(pages);
		mon_close(&m);
	}
	bu_json_obj_end();
}

/* ---- fork / mprotect ---------------------------------------------------- */

/* Regions of one touched page each; returns how many report a change. */
static unsigned long false_inval(enum kind k, size_t n, int what)
{
	struct mon m;
	mon_open(&m, k, n + 16);
	unsigned char *base = map_anon(n * 2 * PAGE, PROT_READ | PROT_WRITE);
	struct reg *r = calloc(n, sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		/* A gap between regions: mprotect must not merge them away. */
		base[i * 2 * PAGE] = 1;
		r[i] = (struct reg){.start = (uintptr_t)base + i * 2 * PAGE, .len = PAGE};
	}
	mon_reg_many(&m, r, n);
	if (what == 0) {
		pid_t pid = fork();
		if (pid < 0)
			bu_die("fork: %s", strerror(errno));
		if (pid == 0)
			_exit(0);
		int st;
		waitpid(pid, &st, 0);
	} else {
		for (size_t i = 0; i < n; i++)
			BU_SYS("mprotect", mprotect((void *)(uintptr_t)r[i].start, PAGE, PROT_READ));
	}
	unsigned long c = 0;
	for (size_t i = 0; i < n; i++)
		c += changed(&m, &r[i]);
	/* Positive control: the same regions do report a real change. */
	munmap(base, n * 2 * PAGE);
	unsigned long seen = 0;
	for (size_t i = 0; i < n; i++)
		seen += changed(&m, &r[i]);
	if (seen != n)
		bu_die("%s: only %lu of %zu regions reported their munmap", kname[k], seen, n);
	free(r);
	mon_close(&m);
	return c;
}

static void row_false(const char *name, size_t n, int what)
{
	bu_json_obj_begin(name);
	bu_json_u64("regions", n);
	for (int k = 0; k < NR_KINDS; k++) {
		unsigned long c = false_inval((enum kind)k, n, what);
		bu_json_u64(kname[k], c);
		bu_log("%s: %s: %lu of %zu regions invalidated", name, kname[k], c, n);
	}
	bu_json_obj_end();
}

/* ---- ksm ---------------------------------------------------------------- */

static int write_str(const char *path, const char *v)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, v, strlen(v));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* The page frame behind p (0: none, or not visible without root). */
static uint64_t pfn_of(const void *p)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (fd < 0)
		return 0;
	if (pread(fd, &e, sizeof(e), (off_t)((uintptr_t)p / PAGE * sizeof(e))) != sizeof(e))
		e = 0;
	close(fd);
	return (e >> 63) & 1 ? e & ((1ULL << 55) - 1) : 0;
}

static void row_ksm(void)
{
	bu_json_obj_begin("ksm");
	if (write_str("/sys/kernel/mm/ksm/sleep_millisecs", "10") ||
	    write_str("/sys/kernel/mm/ksm/pages_to_scan", "1000") ||
	    write_str("/sys/kernel/mm/ksm/run", "1")) {
		bu_log("ksm: /sys/kernel/mm/ksm not writable (CONFIG_KSM, root?): skipped");
		bu_json_str("skipped", "no KSM");
		bu_json_obj_end();
		return;
	}
	for (int k = 0; k < NR_KINDS; k++) {
		struct mon m;
		mon_open(&m, (enum kind)k, 16);
		unsigned char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			bu_die("mmap: %s", strerror(errno));
		/* Same content in both pages, different from anything else. */
		for (size_t i = 0; i < 2 * PAGE; i++)
			p[i] = (unsigned char)(i % PAGE * 7 + 13 + k + (size_t)getpid());
		struct reg r[2] = {{.start = (uintptr_t)p, .len = PAGE},
				   {.start = (uintptr_t)p + PAGE, .len = PAGE}};
		BU_OK("register", mon_reg(&m, &r[0]));
		BU_OK("register", mon_reg(&m, &r[1]));
		BU_SYS("madvise MERGEABLE", madvise(p, 2 * PAGE, MADV_MERGEABLE));
		/* Merged when both pages have the same frame (pagemap, root).
		 * /proc/self/ksm_merging_pages is no use here: it lags, and
		 * still counted the previous module's pages. */
		uint64_t t0 = bu_now_ns();
		long merged = 0;
		while (bu_now_ns() - t0 < 60ull * 1000000000) {
			uint64_t a = pfn_of(p), b = pfn_of(p + PAGE);
			if (a && a == b) {
				merged = 2;
				break;
			}
			usleep(10000);
		}
		/* Both modules' callbacks ran inside the merge; a deferred one
		 * gets 100 ms more. */
		usleep(100000);
		unsigned long seen = changed(&m, &r[0]) + changed(&m, &r[1]);
		bu_json_obj_begin(kname[k]);
		bu_json_num("merged_pages", (double)merged);
		bu_json_u64("reported", seen);
		bu_json_num("wait_ms", (double)(bu_now_ns() - t0) / 1e6);
		bu_json_obj_end();
		bu_log("ksm: %s: %ld pages merged, %lu of 2 watched pages reported", kname[k],
		       merged, seen);
		munmap(p, 2 * PAGE);
		mon_close(&m);
	}
	write_str("/sys/kernel/mm/ksm/run", "0");
	bu_json_obj_end();
}

/* ---- main --------------------------------------------------------------- */

static bool want(const char *rows, const char *name)
{
	if (!rows)
		return strcmp(name, "native") != 0;
	size_t l = strlen(name);
	for (const char *s = rows; (s = strstr(s, name)); s += l)
		if ((s == rows || s[-1] == ',') && (s[l] == 0 || s[l] == ','))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	const char *rows = NULL;
	size_t iters = 0;

	bu_prog = "vs-kdreg2";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rows") && i + 1 < argc)
			rows = argv[++i];
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--quick"))
			bu_quick = 1;
		else
			bu_die("usage: vs-kdreg2 [--quick] [--rows LIST] [--iters N]");
	}
	bu_init("vs-kdreg2", 1, argv);
	if (!iters)
		iters = bu_quick ? 500 : 3000;
	signal(SIGPIPE, SIG_IGN);

	bu_json_obj_begin(NULL);
	bu_json_str("kernel", getenv("UMMUNOT_KERNEL") ? getenv("UMMUNOT_KERNEL") : "");
	if (want(rows, "native"))
		row_native();
	if (want(rows, "regunreg"))
		row_regunreg();
	if (want(rows, "check"))
		row_check();
	if (want(rows, "consume"))
		row_consume();
	if (want(rows, "open"))
		row_open();
	if (want(rows, "visible"))
		row_visible(iters);
	if (want(rows, "parked"))
		row_parked(25);
	if (want(rows, "fork"))
		row_false("fork", 1000, 0);
	if (want(rows, "mprotect"))
		row_false("mprotect", 100, 1);
	if (want(rows, "ksm"))
		row_ksm();
	bu_json_obj_end();
	return 0;
}
