/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Helpers shared by the benchmark programs that run in the VM: a clock,
 * medians, fatal errors and a tiny JSON writer (one object on stdout).
 */
#ifndef UMMUNOT_BENCH_UTIL_H
#define UMMUNOT_BENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern const char *bu_prog;

void bu_init(const char *prog, int argc, char **argv);
/* --quick was given. */
extern int bu_quick;

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bu_now_ns(void);

/* Median of n values (sorts v in place); 0 for n == 0. */
double bu_median(double *v, size_t n);

void bu_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A C API call that returns 0 (or a count) or -errno. */
#define BU_OK(what, expr) ({						\
	long _r = (expr);						\
	if (_r < 0)							\
		bu_die("%s: %s", (what), strerror((int)-_r));		\
	_r;								\
})
/* A libc call that returns -1 and sets errno. */
#define BU_SYS(what, expr) ({						\
	long _r = (long)(expr);						\
	if (_r == -1)							\
		bu_die("%s: %s", (what), strerror(errno));		\
	_r;								\
})

/* Progress on stderr (stdout is the JSON). */
void bu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * JSON on stdout.  bu_json_begin/end bracket objects and arrays; keys are
 * given with each value (NULL inside an array).
 */
void bu_json_obj_begin(const char *key);
void bu_json_obj_end(void);
void bu_json_arr_begin(const char *key);
void bu_json_arr_end(void);
void bu_json_num(const char *key, double v);
void bu_json_u64(const char *key, uint64_t v);
void bu_json_str(const char *key, const char *v);

/* /proc/meminfo field in KiB, or -1. */
long bu_meminfo_kb(const char *field);

#endif /* UMMUNOT_BENCH_UTIL_H */
