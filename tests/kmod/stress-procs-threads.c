// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* 16 processes x 4 threads register/unmap concurrently for a few seconds: every watched unmap yields exactly its event, nothing else. */
#include "helpers.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define NPROC 16
#define NTHREAD 4
#define MAX_ITERS 1500		/* per thread; the ring holds every event */
#define RING 8192
#define SECONDS 3.0

struct expect {
	uint64_t start, end;
	bool want;		/* an event is expected (not unregistered first) */
	bool seen;
};

struct worker {
	int id;
	struct t_file *f;
	struct expect *exp;
	int n;
	double deadline;
	char err[256];
};

static uint64_t cookie_of(int thread, int iter)
{
	return ((uint64_t)(thread + 1) << 32) | (uint32_t)iter;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	unsigned int seed = w->id * 7919 + getpid();

	for (int i = 0; i < MAX_ITERS && t_now() < w->deadline; i++) {
		size_t npages = 1 + rand_r(&seed) % 3;
		size_t off = rand_r(&seed) % 64;
		bool unreg_first = rand_r(&seed) % 4 == 0;
		struct ummunot_region r = { 0 };
		struct ummunot_batch b = { .ptr = (uintptr_t)&r, .count = 1 };
		uint64_t before, after;
		bool found = false;
		char *p;

		p = mmap(NULL, npages * t_page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			snprintf(w->err, sizeof(w->err), "mmap: %s", t_errname(errno));
			return NULL;
		}
		if (rand_r(&seed) % 2)
			p[0] = 1;
		r.start = (uintptr_t)p + off;
		r.length = npages * t_page - off;
		r.cookie = cookie_of(w->id, i);
		if (ioctl(w->f->fd, UMMUNOT_IOC_REGISTER, &b)) {
			snprintf(w->err, sizeof(w->err), "REGISTER: %s", t_errname(errno));
			return NULL;
		}
		if (unreg_first) {
			struct ummunot_batch u = { .ptr = (uintptr_t)&r.handle, .count = 1 };

			if (ioctl(w->f->fd, UMMUNOT_IOC_UNREGISTER, &u)) {
				snprintf(w->err, sizeof(w->err), "UNREGISTER: %s",
					 t_errname(errno));
				return NULL;
			}
		}
		w->exp[i] = (struct expect){ r.start, r.start + r.length, !unreg_first, false };
		w->n = i + 1;
		before = t_producer(w->f);	/* (C) */
		munmap(p, npages * t_page);
		after = t_producer(w->f);	/* (C): pairs with (B) */
		/* Our event was written while munmap ran: it is in [before, after). */
		for (uint64_t k = before; k < after && !unreg_first; k++) {
			struct ummunot_event *e = &w->f->ring[k & (RING - 1)];

			if (e->cookie == r.cookie) {
				found = true;
				break;
			}
		}
		if (found != !unreg_first) {
			snprintf(w->err, sizeof(w->err),
				 "thread %d iter %d: event %s when munmap returned (ring [%llu, %llu))",
				 w->id, i, unreg_first ? "present" : "missing",
				 (unsigned long long)before, (unsigned long long)after);
			return NULL;
		}
		if (!unreg_first) {
			struct ummunot_batch u = { .ptr = (uintptr_t)&r.handle, .count = 1 };

			if (ioctl(w->f->fd, UMMUNOT_IOC_UNREGISTER, &u)) {
				snprintf(w->err, sizeof(w->err), "UNREGISTER after event: %s",
					 t_errname(errno));
				return NULL;
			}
		}
	}
	return NULL;
}

static int child(int idx)
{
	static struct expect exp[NTHREAD][MAX_ITERS];
	struct worker w[NTHREAD];
	pthread_t th[NTHREAD];
	struct ummunot_event ev;
	uint64_t total = 0, prod;
	struct t_file f;
	double deadline = t_now() + SECONDS;

	t_file_open(&f, RING);
	for (int t = 0; t < NTHREAD; t++) {
		w[t] = (struct worker){ .id = t, .f = &f, .exp = exp[t],
					.deadline = deadline };
		if (pthread_create(&th[t], NULL, work, &w[t]))
			t_fail("pthread_create");
	}
	for (int t = 0; t < NTHREAD; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < NTHREAD; t++) {
		if (w[t].err[0])
			t_fail("process %d thread %d: %s", idx, t, w[t].err);
		for (int i = 0; i < w[t].n; i++)
			total += exp[t][i].want;
	}
	prod = t_producer(&f);	/* (C) */
	if (t_overflow(&f))
		t_fail("process %d: overflow (dropped %llu)", idx,
		       (unsigned long long)t_dropped(&f));
	if (prod - f.cons != total)
		t_fail("process %d: expected %llu events, got %llu", idx,
		       (unsigned long long)total, (unsigned long long)(prod - f.cons));
	for (uint64_t k = 0; k < total; k++) {
		uint64_t t, i;
		struct expect *e;

		t_take(&f, &ev);
		if (ev.seq != k + 1)
			t_fail("process %d: seq expected %llu, got %llu", idx,
			       (unsigned long long)k + 1, (unsigned long long)ev.seq);
		t = (ev.cookie >> 32) - 1;
		i = (uint32_t)ev.cookie;
		if (t >= NTHREAD || i >= (uint64_t)w[t].n)
			t_fail("process %d: event with unknown cookie 0x%llx", idx,
			       (unsigned long long)ev.cookie);
		e = &exp[t][i];
		if (!e->want || e->seen)
			t_fail("process %d: %s event for thread %llu iter %llu", idx,
			       e->seen ? "second" : "unexpected (unregistered before munmap)",
			       (unsigned long long)t, (unsigned long long)i);
		e->seen = true;
		if (ev.type != UMMUNOT_EVENT_UNMAP || ev.start != e->start || ev.end != e->end)
			t_fail("process %d: thread %llu iter %llu: expected UNMAP [0x%llx, 0x%llx), "
			       "got %s [0x%llx, 0x%llx)", idx, (unsigned long long)t,
			       (unsigned long long)i, (unsigned long long)e->start,
			       (unsigned long long)e->end, t_event_name(ev.type),
			       (unsigned long long)ev.start, (unsigned long long)ev.end);
	}
	{
		struct ummunot_stats st;

		t_get_stats(&f, &st);
		if (st.regions != 0 || st.events != total)
			t_fail("process %d: stats regions %llu events %llu (expected 0, %llu)",
			       idx, (unsigned long long)st.regions,
			       (unsigned long long)st.events, (unsigned long long)total);
	}
	printf("process %d: %llu events checked\n", idx, (unsigned long long)total);
	t_file_close(&f);
	return 0;
}

int main(int argc, char **argv)
{
	pid_t pids[NPROC];
	int failed = 0;

	t_init(argc, argv);
	close(t_dev_open());
	for (int i = 0; i < NPROC; i++) {
		pids[i] = fork();
		T_ASSERT(pids[i] >= 0, "fork: %s", t_errname(errno));
		if (pids[i] == 0) {
			alarm(60);	/* a stuck child must not hang the suite */
			_exit(child(i));
		}
	}
	for (int i = 0; i < NPROC; i++) {
		int status;

		T_EQ("waitpid", pids[i], waitpid(pids[i], &status, 0));
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "process %d: status 0x%x\n", i, status);
			failed++;
		}
	}
	T_EQ("failed processes", 0, failed);
	return T_EXIT_PASS;
}
