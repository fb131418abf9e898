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
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

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

#define EXIT_REFUSED 126	/* like a shell's "found but cannot run" */

enum mode { MODE_OFF, MODE_ON, MODE_REQUIRE };

static const char *prog = "ummunot-exec";

static int parse_mode(const char *s, enum mode *m)
{
	if (!strcmp(s, "off") || !strcmp(s, "0"))
		*m = MODE_OFF;
	else if (!strcmp(s, "on") || !strcmp(s, "1"))
		*m = MODE_ON;
	else if (!strcmp(s, "require"))
		*m = MODE_REQUIRE;
	else
		return -EINVAL;
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/*
 * "mode = on|require|off" from the site's file.  A missing file is "on";
 * a file that exists but says something else is an error: a site that
 * wrote "requre" wants to know, not to run unprotected.
 */
static int read_conf(const char *path, enum mode *m, char *why, size_t len)
{
	char line[256];
	unsigned int n = 0;
	FILE *f = fopen(path, "re");

	*m = MODE_ON;
	if (!f)
		return errno == ENOENT ? 0 : (snprintf(why, len, "cannot read %s: %s", path,
						       strerror(errno)), -1);
	while (fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq, *key, *val;

		n++;
		if (!*s || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (!eq)
			goto bad;
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		if (strcmp(key, "mode") || parse_mode(val, m))
			goto bad;
	}
	fclose(f);
	return 0;
bad:
	snprintf(why, len, "%s:%u: expected \"mode = on|require|off\"", path, n);
	fclose(f);
	return -1;
}

/* 0: the device opens and completes its handshake.  Else the reason. */
static int check_device(char *why, size_t len)
{
	struct ummunot_monitor *m;
	int r = ummunot_monitor_open(NULL, &m);

	if (r == 0) {
		ummunot_monitor_close(m);
		return 0;
	}
	snprintf(why, len, "cannot open %s: %s%s", UMMUNOT_DEFAULT_DEVICE_PATH, strerror(-r),
		 r == -ENOENT ? " (is the ummunot module loaded?)" :
		 r == -EACCES || r == -EPERM ? " (see /lib/udev/rules.d/60-ummunot.rules)" :
		 r == -EPROTO ? " (module and library disagree on the ABI)" : "");
	return -1;
}

/*
 * 0: every adapter loads here, so it will load in PROGRAM (same loader
 * path, same dependencies).  dlopen runs the adapters' constructors in
 * this process; they have nothing to act on before the exec replaces it.
 */
static int check_adapters(const char *list, char *why, size_t len)
{
	char *copy = strdup(list), *save = NULL, *p;
	bool quiet = !getenv("UMMUNOT_OFI");
	int r = 0;

	if (!copy) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	/* libummunot-ofi-preload's constructor would import its monitor here. */
	if (quiet && setenv("UMMUNOT_OFI", "0", 1)) {
		free(copy);
		snprintf(why, len, "cannot set the environment");
		return -1;
	}
	for (p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);

		if (!h) {
			snprintf(why, len, "cannot load %s", dlerror());
			r = -1;
			break;
		}
	}
	free(copy);
	if (quiet)
		unsetenv("UMMUNOT_OFI");
	return r;
}

static int set(const char *name, const char *value)
{
	if (setenv(name, value, 1) == 0)
		return 0;
	fprintf(stderr, "%s: setenv %s: %s\n", prog, name, strerror(errno));
	return -1;
}

/* The rank's environment: adapters first in LD_PRELOAD, hooks off. */
static int activate(const char *adapters, enum mode m)
{
	const char *old = getenv("LD_PRELOAD");
	char *preload;
	int r;

	if (old && *old)
		r = asprintf(&preload, "%s:%s", adapters, old);
	else
		r = asprintf(&preload, "%s", adapters);
	if (r < 0)
		return -1;
	r = set("LD_PRELOAD", preload);
	free(preload);
	if (r)
		return -1;
	/*
	 * UCX's hooks and Open MPI's feed of its patcher into UCX:
	 * libummunot-ucx feeds UCX's cache instead (never UCX_MEM_EVENTS=no,
	 * which turns the cache's events off too).  Open MPI's patcher itself
	 * stays: Open MPI's own registration cache (rcache grdma: btl openib,
	 * osc rdma over btl ofi) has no other source of events.
	 */
	if (strstr(adapters, "libummunot-ucx") &&
	    (set("UCX_MEM_MALLOC_HOOKS", "no") || set("UCX_MEM_MMAP_HOOK_MODE", "none") ||
	     set("OMPI_MCA_pml_ucx_opal_mem_hooks", "0")))
		return -1;
	if (m == MODE_REQUIRE && set("UMMUNOT_REQUIRE", "1"))
		return -1;
	return 0;
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
	enum mode m;
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

	if (env && *env) {
		if (parse_mode(env, &m)) {
			/* A typo must not silently mean "unprotected". */
			fprintf(stderr, "%s: UMMUNOT='%s': expected on, require or off\n", prog, env);
			return EXIT_REFUSED;
		}
	} else if (read_conf(conf, &m, why, sizeof(why))) {
		fprintf(stderr, "%s: %s\n", prog, why);
		return EXIT_REFUSED;
	}

	if (m == MODE_OFF) {
		if (check_only) {
			printf("%s: mode off: programs run unchanged\n", prog);
			return 0;
		}
		execvp(argv[1], argv + 1);
		fprintf(stderr, "%s: cannot run %s: %s\n", prog, argv[1], strerror(errno));
		return 127;
	}

	failed = !*adapters ? (snprintf(why, sizeof(why), "this build has no stack adapter"), -1) :
		 check_device(why, sizeof(why)) ? -1 :
		 check_adapters(adapters, why, sizeof(why));
	if (!failed && activate(adapters, m)) {
		snprintf(why, sizeof(why), "cannot set the environment");
		failed = -1;
	}

	if (check_only) {
		if (failed) {
			printf("%s: not protected: %s\n", prog, why);
			return m == MODE_REQUIRE ? EXIT_REFUSED : 1;
		}
		printf("%s: mode %s: programs start with %s preloaded\n", prog,
		       m == MODE_REQUIRE ? "require" : "on", adapters);
		return 0;
	}
	if (failed) {
		if (m == MODE_REQUIRE) {
			fprintf(stderr, "%s: refusing to start %s unprotected (mode require): %s\n",
				prog, argv[1], why);
			return EXIT_REFUSED;
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
