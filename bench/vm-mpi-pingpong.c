// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vm-mpi-pingpong: Open MPI ping-pong, 2 ranks, 8 B .. 4 MiB, two series:
 *
 *   "reuse"  one buffer per size, allocated before the timed round trips
 *            and reused by all of them: the registration cache hits;
 *   "free"   the buffer malloc()ed and freed around every round trip (large
 *            ones are mmap()ed and unmapped: the registration cache is
 *            invalidated and refilled as an application that does this
 *            would make it).
 *
 * Rank 0 prints one JSON object: per series and size, the best of 3
 * medians of half round trips, in ns, and the bandwidth that gives.
 * Whatever feeds the transport's registration cache is chosen by mpirun's
 * arguments (bench/guest-run runs it over mtl ofi and pml ucx, each with
 * the stack's own hooks and with the ummunot adapter).
 * Usage: vm-mpi-pingpong [--quick] [--label NAME]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One round trip from buf; returns half of it in seconds. */
static double round_trip(int rank, char *buf, size_t size)
{
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();

	if (rank == 0) {
		MPI_Send(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
		MPI_Recv(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	} else {
		MPI_Recv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Send(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
	}
	return (MPI_Wtime() - t0) / 2;
}

/* The "reuse" (one buffer per size) or "free" series, as a JSON member. */
static void series(int rank, int quick, int reuse)
{
	static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1u << 20, 4u << 20 };
	int first = 1;

	if (rank == 0)
		printf(", \"%s\": [", reuse ? "reuse" : "free");
	for (unsigned int k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t size = sizes[k];
		int reps = size >= (1u << 20) ? (quick ? 5 : 15) : (quick ? 20 : 100);
		int rounds = 3;
		double *t = malloc(sizeof(double) * (size_t)reps), best = 1e30;
		char *kept = NULL;

		if (!t)
			MPI_Abort(MPI_COMM_WORLD, 1);
		if (reuse) {
			kept = malloc(size);
			if (!kept)
				MPI_Abort(MPI_COMM_WORLD, 1);
			memset(kept, 1, size);
			round_trip(rank, kept, size);	/* the one miss */
		}
		for (int r = 0; r < rounds; r++) {
			for (int i = 0; i < reps; i++) {
				char *buf = kept ? kept : malloc(size);

				if (!buf)
					MPI_Abort(MPI_COMM_WORLD, 1);
				memset(buf, i, size);
				t[i] = round_trip(rank, buf, size);
				if (!kept)
					free(buf);
			}
			qsort(t, (size_t)reps, sizeof(double), cmp);
			if (t[reps / 2] < best)
				best = t[reps / 2];
		}
		free(t);
		free(kept);
		if (rank == 0) {
			printf("%s{\"bytes\": %zu, \"half_rtt_ns\": %.0f, \"mb_per_s\": %.2f}",
			       first ? "" : ", ", size, best * 1e9, size / best / 1e6);
			fflush(stdout);
		}
		first = 0;
	}
	if (rank == 0)
		printf("]");
}

int main(int argc, char **argv)
{
	int quick = 0, rank, n;
	const char *label = "run";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);
	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--quick"))
			quick = 1;
		else if (!strcmp(argv[a], "--label") && a + 1 < argc)
			label = argv[++a];
		else {
			if (rank == 0)
				fprintf(stderr, "usage: vm-mpi-pingpong [--quick] [--label NAME]\n");
			MPI_Finalize();
			return 2;
		}
	}
	if (n != 2) {
		if (rank == 0)
			fprintf(stderr, "vm-mpi-pingpong: needs 2 ranks\n");
		MPI_Finalize();
		return 2;
	}
	if (rank == 0)
		printf("{\"benchmark\": \"mpi-pingpong\", \"label\": \"%s\"", label);
	series(rank, quick, 1);
	series(rank, quick, 0);
	if (rank == 0)
		printf("}\n");
	MPI_Finalize();
	return 0;
}
