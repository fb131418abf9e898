/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The host tests' assertion (tests/slurm): CHECK(cond, fmt, ...) counts,
 * and on failure prints the place, the condition and the message; the
 * test ends with check_summary(), its exit status.
 */
#ifndef UMMUNOT_TESTS_SLURM_CHECK_H
#define UMMUNOT_TESTS_SLURM_CHECK_H

#include <stdio.h>

static int checks, fails;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		checks++;                                                    \
		if (!(cond)) {                                               \
			fails++;                                             \
			printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                 \
			printf("\n");                                        \
		}                                                            \
	} while (0)

static inline int check_summary(const char *test)
{
	printf("%s: %d checks, %d failed\n", test, checks, fails);
	return fails ? 1 : 0;
}

#endif
