// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ummunot-exec: start a program with ummunot's stack adapters active, or
 * refuse to start it unprotected.
 *
 *   ummunot-exec PROGRAM [ARG...]
 *   ummunot-exec --check
 *
 * Meant as the process launcher of an MPI runtime (Open MPI 4.1's
 * orte_fork_agent, Open MPI 5's odls_base_exec_agent: see
 * Documentation/admin-guide.rst, "Rolling out to a cluster"), so that
 * every rank on a node is started through it with nothing on the mpirun
 * line.  It checks what activation needs (the device opens and completes
 * its handshake, every adapter library loads), then, in the rank's
 * environment, preloads the adapters and turns off the stacks' own memory
 * hooks, and execs PROGRAM.  What it does when a check fails is the mode:
 *
 *   on       (default) one line on stderr, then PROGRAM runs as if
 *            ummunot-exec were not there: the stacks keep their own hooks
 *   require  one line on stderr and exit status 126: the rank never
 *            starts unprotected; the adapters get UMMUNOT_REQUIRE=1
 *            and exit the same way if they cannot activate later (a UCX
 *            version they do not support)
 *   off      PROGRAM runs unchanged, nothing is checked
 *
 * The mode comes from the environment variable UMMUNOT (a job's choice:
 * mpirun -x UMMUNOT=off), else from "mode = ..." in
 * UMMUNOT_SYSCONFDIR/ummunot/exec.conf (the site's), else "on".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

#include "activation.h"

#ifndef UMMUNOT_SYSCONFDIR
#define UMMUNOT_SYSCONFDIR "/etc"
#endif
#ifndef UMMUNOT_EXEC_VERSION
#define UMMUNOT_EXEC_VERSION "unknown"
#endif

/* The adapters this build installed, full paths (meson: -DUMMUNOT_ADAPTERS). */
#ifndef UMMUNOT_ADAPTERS
#define UMMUNOT_ADAPTERS ""
#endif

static const char *prog = "ummunot-exec";

/* The linked libummunot does the device check (tools/activation). */
static const struct ua_monitor_ops monitor_ops = {
	.open = ummunot_monitor_open,
	.close = ummunot_monitor_close,
};

static const char *process_getenv(void *ctx, const char *name)
{
	(void)ctx;
	return getenv(name);
}

/*
 * The rank's environment (tools/activation): adapters first in
 * LD_PRELOAD, hooks off.
 */
static int activate(const char *adapters, enum ua_mode m)
{
	struct ua_env env;
	unsigned int i;
	int r;

	ua_env_init(&env);
	r = ua_env_activate(&env, adapters, m, process_getenv(NULL, "LD_PRELOAD"));
	for (i = 0; !r && i < env.n; i++) {
		const struct ua_var *v = &env.var[i];

		if (v->value ? setenv(v->name, v->value, 1) : unsetenv(v->name)) {
			fprintf(stderr, "%s: setenv %s: %s\n", prog, v->name, strerror(errno));
			r = -1;
		}
	}
	ua_env_free(&env);
	return r ? -1 : 0;
}

/*
 * The mode, or one line on stderr.  (The reason quotes UMMUNOT whole,
 * however long.)
 */
static int resolve_mode(const char *env, const char *conf, enum ua_mode *m)
{
	size_t len = 512 + (env ? strlen(env) : 0);
	char *why = malloc(len);
	int r;

	if (!why) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	r = ua_resolve_mode(env, conf, m, why, len);
	if (r)
		fprintf(stderr, "%s: %s\n", prog, why);
	free(why);
	return r;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s PROGRAM [ARG...]\n"
		"       %s --check\n"
		"Start PROGRAM with ummunot's stack adapters active (%s).\n"
		"Mode: UMMUNOT=on|require|off, else \"mode =\" in %s/ummunot/exec.conf, else on.\n",
		prog, prog, *UMMUNOT_ADAPTERS ? UMMUNOT_ADAPTERS : "none built", UMMUNOT_SYSCONFDIR);
}

int main(int argc, char **argv)
{
	const char *env = getenv("UMMUNOT");
	const char *conf = UMMUNOT_SYSCONFDIR "/ummunot/exec.conf";
	const char *adapters = UMMUNOT_ADAPTERS;
	bool check_only = false, verbose;
	enum ua_mode m;
	char why[512] = "";
	int failed;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("ummunot-exec %s\n", UMMUNOT_EXEC_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--check"))
		check_only = true;
	else if (argv[1][0] == '-' && strcmp(argv[1], "--")) {
		fprintf(stderr, "%s: unknown option %s\n", prog, argv[1]);
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--")) {
		argv++;
		if (argc < 3) {
			usage(stderr);
			return 2;
		}
	}
	verbose = getenv("UMMUNOT_VERBOSE") && strcmp(getenv("UMMUNOT_VERBOSE"), "0");

	/* A typo must not silently mean "unprotected". */
	if (resolve_mode(env, conf, &m))
		return UA_EXIT_REFUSED;

	if (m == UA_MODE_OFF) {
		if (check_only) {
			printf("%s: mode off: programs run unchanged\n", prog);
			return 0;
		}
		execvp(argv[1], argv + 1);
		fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[1], strerror(errno));
		return 127;
	}

	failed = ua_check(&monitor_ops, adapters, why, sizeof(why));
	if (!failed && activate(adapters, m)) {
		snprintf(why, sizeof(why), "cannot set the environment");
		failed = -1;
	}

	if (check_only) {
		if (failed) {
			printf("%s: not protected: %s\n", prog, why);
			return m == UA_MODE_REQUIRE ? UA_EXIT_REFUSED : 1;
		}
		printf("%s: mode %s: programs start with %s preloaded\n", prog,
		       m == UA_MODE_REQUIRE ? "require" : "on", adapters);
		return 0;
	}
	if (failed) {
		if (m == UA_MODE_REQUIRE) {
			fprintf(stderr, "%s: refusing to start %s unprotected (mode require): %s\n",
				prog, argv[1], why);
			return UA_EXIT_REFUSED;
		}
		fprintf(stderr, "%s: %s runs without ummunot, on its stack's own memory hooks: %s\n",
			prog, argv[1], why);
	} else if (verbose) {
		fprintf(stderr, "%s[%ld]: active: %s with %s\n", prog, (long)getpid(), argv[1],
			adapters);
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[1], strerror(errno));
	return 127;
}
