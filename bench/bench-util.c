// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Helpers shared by the VM benchmark programs (bench-util.h). */
#define _GNU_SOURCE
#include "bench-util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *bu_prog = "bench";
int bu_quick;

void bu_init(const char *prog, int argc, char **argv)
{
	bu_prog = prog;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			bu_quick = 1;
		else
			bu_die("unknown argument '%s' (usage: %s [--quick])", argv[i], prog);
	}
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
}

uint64_t bu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bu_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* "prog: " what "message\n" on stderr. */
static void vmsg(const char *what, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: %s", bu_prog, what);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void bu_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	va_start(ap, fmt);
	vmsg("error: ", fmt, ap);
	va_end(ap);
	exit(1);
}

void bu_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

/* JSON: a stack of "does the next item need a comma". */
static bool need_comma[32];
static int depth;

static void key(const char *k)
{
	if (need_comma[depth])
		putchar(',');
	need_comma[depth] = true;
	if (k)
		printf("\"%s\":", k);
}

static void begin(const char *k, char bracket)
{
	key(k);
	putchar(bracket);
	need_comma[++depth] = false;
}

void bu_json_obj_begin(const char *k)
{
	begin(k, '{');
}

void bu_json_obj_end(void)
{
	depth--;
	putchar('}');
	if (depth == 0) {
		putchar('\n');
		fflush(stdout);
	}
}

void bu_json_arr_begin(const char *k)
{
	begin(k, '[');
}

void bu_json_arr_end(void)
{
	depth--;
	putchar(']');
}

void bu_json_num(const char *k, double v)
{
	key(k);
	printf("%.6g", v);
}

void bu_json_u64(const char *k, uint64_t v)
{
	key(k);
	printf("%llu", (unsigned long long)v);
}

void bu_json_str(const char *k, const char *v)
{
	key(k);
	putchar('"');
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			putchar('\\');
		putchar(*v);
	}
	putchar('"');
}

long bu_meminfo_kb(const char *field)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	size_t n = strlen(field);
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, field, n) == 0 && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}
