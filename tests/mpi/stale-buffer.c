// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * stale-buffer: the bug ummunot exists to remove, seen through MPI.
 *
 * Two ranks.  Every iteration both ranks give their communication buffer
 * back to the kernel and get new memory at the same virtual address (the
 * --reuse way), fill it, and move --size bytes between them (--op):
 *
 *   send  rank 0 MPI_Send()s its buffer, rank 1 MPI_Recv()s into its own;
 *   put   rank 0 MPI_Put()s its (origin) buffer into rank 1's window;
 *   get   rank 0 MPI_Get()s rank 1's window into its (origin) buffer.
 *
 * --op and --reuse take comma-separated lists (e.g. send,put,get): one job
 * runs each operation with each way in turn, with a line and the
 * expectation per pair (an MPI job's start-up dominates its cost in the VM
 * guest).
 *
 * --overlap moves each buffer as two overlapping transfers, its first three
 * quarters then its last three quarters: a registration cache that merges
 * overlapping registrations (UCX does) then holds one registration over
 * both, which must be dropped as a whole when the pages change.
 *
 * The window (put/get) is allocated once by MPI_Win_allocate and never
 * remapped: only the buffers the application passes to MPI are.  A
 * registration cache that did not learn that the old pages are gone hands
 * the transport the old registration: the receiver then sees the previous
 * iteration's data ("stale": a stale send/origin buffer), or its buffer
 * keeps the fill it had before the transfer ("lost": the data went to the
 * old pages of a stale receive/origin buffer).  Anything else that does not
 * match is "corrupt".
 *
 * Prints one line (rank 0):
 *   stale-buffer: op=send reuse=munmap size=1048576 iters=20: ok 20, stale 0, lost 0, corrupt 0
 * Then every rank prints "stale-buffer: rank N: MPI_Finalize" before it
 * calls MPI_Finalize() (tests/mpi/ucx/case.sh.in watches for it).
 * Exit status (every rank): --expect clean: 0 iff every iteration was ok;
 * --expect stale (a negative control): 0 iff at least one was not;
 * --expect report: 0.  1 on a failed expectation, 2 on a usage or setup
 * error (which is also printed).
 *
 * The transport, and whatever feeds its registration cache, is chosen by
 * mpirun's arguments and the environment, never here: see
 * tests/mpi/mpirun-2.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

enum op { OP_SEND, OP_PUT, OP_GET };

static const char *const op_names[] = { "send", "put", "get" };
static const char *const reuse_names[] = {
	"munmap", "fixed", "mremap", "dontneed", "free", "syscall", "syscall-mremap",
};
#define NR_REUSE ((int)(sizeof(reuse_names) / sizeof(reuse_names[0])))

static int rank = -1;

static void usage(void)
{
	if (rank <= 0)
		fprintf(stderr,
"usage: stale-buffer [--op OP[,OP...]] [--reuse WAY[,WAY...]] [--size BYTES]\n"
"                    [--iters N] [--overlap] [--expect clean|stale|report]\n"
"  OP: send, put or get (one job runs each listed one with each WAY in turn;\n"
"      --expect applies to each pair)\n"
"  WAY: how each iteration gets new memory at the same address:\n"
"    munmap    munmap(), then mmap() with the old address as hint\n"
"    fixed     mmap(MAP_FIXED) over the live buffer\n"
"    mremap    mremap() the buffer away, mmap(MAP_FIXED) at the old address\n"
"    dontneed  madvise(MADV_DONTNEED) (zero-fill pages on the next touch)\n"
"    free      free(), then malloc() (glibc: a chunk of its own mmap(), the\n"
"              mmap threshold pinned at 128 KiB so that free() unmaps it)\n"
"    syscall   syscall(SYS_munmap), syscall(SYS_mmap) with the hint: no libc\n"
"              function is called, so no hook on munmap/mmap sees it\n"
"    syscall-mremap  syscall(SYS_mremap, MREMAP_FIXED) the buffer away, then\n"
"              syscall(SYS_mmap, MAP_FIXED) at the old address\n"
"  --overlap: each transfer as two overlapping ones (first 3/4, last 3/4)\n"
"  defaults: --op send --reuse munmap --size 1048576 --iters 20 --expect clean\n");
}

/* A setup error: print it (any rank), end every rank with status 2. */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "stale-buffer: rank %d: error: ", rank);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, 2);
	exit(2);
}

static void check_mpi(int rc, const char *what)
{
	char s[MPI_MAX_ERROR_STRING];
	int n = 0;

	if (rc == MPI_SUCCESS)
		return;
	MPI_Error_string(rc, s, &n);
	die("%s: %s", what, s);
}

static int pick(const char *arg, const char *const *names, int n, const char *opt)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(arg, names[i]))
			return i;
	if (rank <= 0)
		fprintf(stderr, "stale-buffer: unknown %s '%s'\n", opt, arg);
	usage();
	MPI_Finalize();
	exit(2);
}

/*
 * A comma-separated list of names, each at most once, into out[] (room for
 * n); returns how many.  Reports and exits on anything else.
 */
static int pick_list(const char *arg, const char *const *names, int n,
		     const char *opt, int *out)
{
	char list[128], *save = NULL;
	int k = 0;

	if (strlen(arg) >= sizeof(list))
		pick(arg, names, n, opt);	/* (reports it) */
	strcpy(list, arg);
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int x = pick(t, names, n, opt);

		for (int j = 0; j < k; j++)
			if (out[j] == x)
				pick("(twice)", names, n, opt);
		out[k++] = x;
	}
	if (!k)
		pick(arg, names, n, opt);
	return k;
}

static unsigned long parse_num(const char *arg, const char *opt, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 0);
	if (errno || end == arg || *end || v == 0 || v > max || arg[0] == '-') {
		if (rank <= 0)
			fprintf(stderr, "stale-buffer: %s needs a number in 1..%lu, got '%s'\n",
				opt, max, arg);
		MPI_Finalize();
		exit(2);
	}
	return v;
}

/* Whether the comma-separated list names name. */
static bool list_has(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *t = list; t; t = strchr(t, ',') ? strchr(t, ',') + 1 : NULL)
		if (!strncmp(t, name, n) && (t[n] == ',' || !t[n]))
			return true;
	return false;
}

#include "stale-pattern.h"
#include "same-address.h"

#define RE_FREE RE_ALLOC	/* free() and malloc() again */

/* ------------------------------------------------------------------ */
/* New memory at the same address                                      */
/* ------------------------------------------------------------------ */

static size_t page;
static void *moved;		/* mremap: where the old pages went */

static void *first_alloc(enum reuse how, size_t len)
{
	void *p;

	if (how != RE_FREE)
		return map_at(NULL, len, 0);
	p = malloc(len);
	if (!p)
		die("malloc(%zu) failed", len);
	return p;
}

/*
 * Returns the new buffer, which must be at old: a different address
 * would not test anything, so it is a setup error.
 */
static void *renew(enum reuse how, void *old, size_t len)
{
	void *p;

	if (how == RE_FREE) {
		free(old);
		p = malloc(len);
		if (!p)
			die("malloc(%zu) failed", len);
	} else {
		p = renew_mapping(how, old, len, &moved);
	}
	if (p != old)
		die("--reuse %s: the new buffer is at %p, not at the old address %p",
		    reuse_names[how], p, old);
	return p;
}

static void release(enum reuse how, void *buf, size_t len)
{
	if (how == RE_FREE) {
		free(buf);
		return;
	}
	munmap(buf, len);
	if (moved)
		munmap(moved, len);
}

/* ------------------------------------------------------------------ */

enum verdict { V_OK, V_STALE, V_LOST, V_CORRUPT };

static enum verdict judge(const void *buf, size_t len, int i)
{
	if (matches(buf, len, DATA(i)))
		return V_OK;
	if (i > 0 && matches(buf, len, DATA(i - 1)))
		return V_STALE;
	if (matches(buf, len, BEFORE(i)))
		return V_LOST;
	return V_CORRUPT;
}

/*
 * One operation, iters iterations: the buffer is new memory at the same
 * address every time, moved whole or (overlap) as two overlapping parts
 * at their own offsets.  Returns the counts by verdict, summed on rank 0.
 */
static void run_op(enum op op, enum reuse how, size_t size, unsigned long iters,
		   bool overlap, MPI_Win win, void *win_mem, long total[4])
{
	const size_t q = size / 4;
	const size_t part_off[2] = { 0, overlap ? q : 0 };
	const size_t part_len = overlap ? size - q : size;
	const int nparts = overlap ? 2 : 1;
	long counts[4] = { 0 };
	void *buf = NULL, *first = NULL;
	int rc;

	for (unsigned long i = 0; i < iters; i++) {
		if (i == 0)
			first = buf = first_alloc(how, size);
		else
			buf = renew(how, buf, size);
		if (buf != first)
			die("buffer moved from %p to %p", first, buf);

		switch (op) {
		case OP_SEND:
			if (rank == 0) {
				fill(buf, size, DATA(i));
				for (int k = 0; k < nparts; k++) {
					rc = MPI_Send((char *)buf + part_off[k], (int)part_len,
						      MPI_BYTE, 1, 7, MPI_COMM_WORLD);
					check_mpi(rc, "MPI_Send");
				}
			} else {
				fill(buf, size, BEFORE(i));
				for (int k = 0; k < nparts; k++) {
					rc = MPI_Recv((char *)buf + part_off[k], (int)part_len,
						      MPI_BYTE, 0, 7, MPI_COMM_WORLD,
						      MPI_STATUS_IGNORE);
					check_mpi(rc, "MPI_Recv");
				}
				counts[judge(buf, size, (int)i)]++;
			}
			break;
		case OP_PUT:
			/* origin rank 0's buf -> target rank 1's window */
			if (rank == 0)
				fill(buf, size, DATA(i));
			else
				fill(win_mem, size, BEFORE(i));
			check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
			for (int k = 0; rank == 0 && k < nparts; k++)
				check_mpi(MPI_Put((char *)buf + part_off[k], (int)part_len,
						  MPI_BYTE, 1, (MPI_Aint)part_off[k],
						  (int)part_len, MPI_BYTE, win), "MPI_Put");
			check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
			if (rank == 1)
				counts[judge(win_mem, size, (int)i)]++;
			break;
		case OP_GET:
			/* target rank 1's window -> origin rank 0's buf */
			if (rank == 0)
				fill(buf, size, BEFORE(i));
			else
				fill(win_mem, size, DATA(i));
			check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
			for (int k = 0; rank == 0 && k < nparts; k++)
				check_mpi(MPI_Get((char *)buf + part_off[k], (int)part_len,
						  MPI_BYTE, 1, (MPI_Aint)part_off[k],
						  (int)part_len, MPI_BYTE, win), "MPI_Get");
			check_mpi(MPI_Win_fence(0, win), "MPI_Win_fence");
			if (rank == 0)
				counts[judge(buf, size, (int)i)]++;
			break;
		}
		/* Nobody renews a buffer the peer may still be reading. */
		check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
	}
	release(how, buf, size);
	moved = NULL;
	check_mpi(MPI_Reduce(counts, total, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD),
		  "MPI_Reduce");
}

int main(int argc, char **argv)
{
	enum op ops[3];
	int nops = 1;
	enum reuse ways[NR_REUSE];
	int nways = 1;
	bool overlap = false;
	enum { EX_CLEAN, EX_STALE, EX_REPORT } expect = EX_CLEAN;
	static const char *const expect_names[] = { "clean", "stale", "report" };
	unsigned long size = 1 << 20, iters = 20;
	int nranks;
	void *win_mem = NULL;
	MPI_Win win = MPI_WIN_NULL;
	bool one_sided = false;

	ops[0] = OP_SEND;
	ways[0] = RE_MUNMAP;
	/*
	 * --reuse free: a fixed mmap threshold (glibc raises a dynamic one
	 * past a freed mmap()ed chunk's size, and the next malloc() would
	 * come from the heap at another address).  The heap itself cannot
	 * be trimmed reliably under MPI: the stack allocates above the
	 * buffer.
	 */
	for (int a = 1; a + 1 < argc; a++)
		if (!strcmp(argv[a], "--reuse") && list_has(argv[a + 1], "free") &&
		    !mallopt(M_MMAP_THRESHOLD, 128 << 10)) {
			fprintf(stderr, "stale-buffer: mallopt(M_MMAP_THRESHOLD) failed\n");
			return 2;
		}

	check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

	for (int a = 1; a < argc; a++) {
		const char *o = argv[a];

		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			usage();
			MPI_Finalize();
			return 0;
		}
		if (!strcmp(o, "--overlap")) {
			overlap = true;
			continue;
		}
		if (a + 1 >= argc) {
			if (rank == 0)
				fprintf(stderr, "stale-buffer: unknown option or missing value: '%s'\n", o);
			usage();
			MPI_Finalize();
			return 2;
		}
		const char *v = argv[++a];

		if (!strcmp(o, "--op")) {
			int l[3];

			nops = pick_list(v, op_names, 3, o, l);
			for (int j = 0; j < nops; j++)
				ops[j] = (enum op)l[j];
		} else if (!strcmp(o, "--reuse")) {
			int l[NR_REUSE];

			nways = pick_list(v, reuse_names, NR_REUSE, o, l);
			for (int j = 0; j < nways; j++)
				ways[j] = (enum reuse)l[j];
		} else if (!strcmp(o, "--expect"))
			expect = pick(v, expect_names, 3, o);
		else if (!strcmp(o, "--size"))
			size = parse_num(v, o, 1ul << 30);
		else if (!strcmp(o, "--iters"))
			iters = parse_num(v, o, 1000000);
		else {
			if (rank == 0)
				fprintf(stderr, "stale-buffer: unknown option '%s'\n", o);
			usage();
			MPI_Finalize();
			return 2;
		}
	}
	if (nranks != 2)
		die("needs exactly 2 ranks, got %d", nranks);
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (size % page)
		die("--size %lu is not a multiple of the page size (%zu)", size, page);
	if (overlap && size % (4 * page))
		die("--overlap: --size %lu is not a multiple of 4 pages", size);

	for (int j = 0; j < nops; j++)
		one_sided |= ops[j] != OP_SEND;
	if (one_sided)
		check_mpi(MPI_Win_allocate((MPI_Aint)size, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
					   &win_mem, &win), "MPI_Win_allocate");

	int status = 0;

	for (int w = 0; w < nways; w++)
	for (int j = 0; j < nops; j++) {
		long total[4] = { 0 };
		enum reuse how = ways[w];

		run_op(ops[j], how, size, iters, overlap, win, win_mem, total);
		if (rank != 0)
			continue;

		long bad = total[V_STALE] + total[V_LOST] + total[V_CORRUPT];

		printf("stale-buffer: op=%s reuse=%s%s size=%lu iters=%lu: ok %ld, stale %ld, lost %ld, corrupt %ld\n",
		       op_names[ops[j]], reuse_names[how], overlap ? " overlap" : "", size, iters,
		       total[V_OK], total[V_STALE], total[V_LOST], total[V_CORRUPT]);
		if (total[V_OK] + bad != (long)iters) {
			printf("stale-buffer: FAIL: %ld results for %lu iterations\n",
			       total[V_OK] + bad, iters);
			status = 1;
		} else if (expect == EX_CLEAN && bad) {
			printf("stale-buffer: FAIL: op=%s reuse=%s: expected every iteration to be correct\n",
			       op_names[ops[j]], reuse_names[how]);
			status = 1;
		} else if (expect == EX_STALE && !bad) {
			printf("stale-buffer: FAIL: op=%s reuse=%s: expected stale data (negative control), every iteration was correct\n",
			       op_names[ops[j]], reuse_names[how]);
			status = 1;
		}
		fflush(stdout);
	}
	if (win != MPI_WIN_NULL)
		MPI_Win_free(&win);
	MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
	/* every verdict is out: what follows is the stack's own shutdown */
	printf("stale-buffer: rank %d: MPI_Finalize\n", rank);
	fflush(stdout);
	MPI_Finalize();
	return status;
}
