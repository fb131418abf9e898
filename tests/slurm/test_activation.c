// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host test of tools/activation, the decision ummunot-exec and the Slurm
 * plugin share: modes and the site's file, the checks' reasons (through a
 * stand-in libummunot, in process and in the forked check a long-lived
 * caller uses), and the environment: what activation sets and what undoes
 * an inherited activation.  Each protection has its negative case.
 *
 * Usage: test_activation FAKE_LIBUMMUNOT   (tests/slurm/fake-libummunot.c)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "activation.h"
#include "check.h"

static bool eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* --- modes and the site's file ------------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void test_modes(const char *dir)
{
	char conf[512], why[512];
	enum ua_mode m;

	CHECK(!ua_parse_mode("on", &m) && m == UA_MODE_ON, "on");
	CHECK(!ua_parse_mode("1", &m) && m == UA_MODE_ON, "1");
	CHECK(!ua_parse_mode("require", &m) && m == UA_MODE_REQUIRE, "require");
	CHECK(!ua_parse_mode("off", &m) && m == UA_MODE_OFF, "off");
	CHECK(!ua_parse_mode("0", &m) && m == UA_MODE_OFF, "0");
	CHECK(ua_parse_mode("requre", &m) == -EINVAL, "a typo is no mode");
	CHECK(ua_parse_mode("", &m) == -EINVAL, "empty is no mode");
	CHECK(ua_parse_mode("ON", &m) == -EINVAL, "modes are lower case");

	snprintf(conf, sizeof(conf), "%s/exec.conf", dir);
	unlink(conf);
	m = UA_MODE_OFF;
	CHECK(!ua_read_conf(conf, &m, why, sizeof(why)) && m == UA_MODE_ON, "no file: on");
	write_file(conf, "# site\n\n  mode =  require  \n");
	CHECK(!ua_read_conf(conf, &m, why, sizeof(why)) && m == UA_MODE_REQUIRE, "file: require");
	write_file(conf, "mode=off\n");
	CHECK(!ua_read_conf(conf, &m, why, sizeof(why)) && m == UA_MODE_OFF, "file: off");
	write_file(conf, "# site\nmode = requre\n");
	CHECK(ua_read_conf(conf, &m, why, sizeof(why)) && strstr(why, "exec.conf:2: expected") &&
	      strstr(why, "\"mode = on|require|off\""), "file typo: %s", why);
	write_file(conf, "mood = on\n");
	CHECK(ua_read_conf(conf, &m, why, sizeof(why)), "unknown key refused");
	write_file(conf, "require\n");
	CHECK(ua_read_conf(conf, &m, why, sizeof(why)), "line without '=' refused");

	/* The job's variable over the site's file; its typo refused. */
	write_file(conf, "mode = require\n");
	CHECK(!ua_resolve_mode("off", conf, &m, why, sizeof(why)) && m == UA_MODE_OFF, "env wins");
	CHECK(!ua_resolve_mode("", conf, &m, why, sizeof(why)) && m == UA_MODE_REQUIRE,
	      "empty env: the file");
	CHECK(!ua_resolve_mode(NULL, conf, &m, why, sizeof(why)) && m == UA_MODE_REQUIRE,
	      "no env: the file");
	CHECK(ua_resolve_mode("requre", conf, &m, why, sizeof(why)) &&
	      !strcmp(why, "UMMUNOT='requre': expected on, require or off"), "env typo: %s", why);
	unlink(conf);
	CHECK(!strcmp(ua_mode_name(UA_MODE_REQUIRE), "require") &&
	      !strcmp(ua_mode_name(UA_MODE_ON), "on") && !strcmp(ua_mode_name(UA_MODE_OFF), "off"),
	      "mode names");
}

/* --- checks ------------------------------------------------------------------ */

static int fake_errno;

static int fake_open(const struct ummunot_monitor_attr *attr, struct ummunot_monitor **m)
{
	(void)attr;
	*m = NULL;
	return -fake_errno;
}

static void fake_close(struct ummunot_monitor *m)
{
	(void)m;
}

static void test_checks(const char *fake_lib)
{
	const struct ua_monitor_ops ops = { fake_open, fake_close };
	char why[1024], two[2048];

	fake_errno = ENOENT;
	CHECK(ua_check_device(&ops, why, sizeof(why)) &&
	      !strcmp(why, "cannot open /dev/ummunot: No such file or directory "
			   "(is the ummunot module loaded?)"), "ENOENT: %s", why);
	fake_errno = EACCES;
	CHECK(ua_check_device(&ops, why, sizeof(why)) &&
	      strstr(why, "Permission denied (see /lib/udev/rules.d/60-ummunot.rules)"),
	      "EACCES: %s", why);
	fake_errno = EPROTO;
	CHECK(ua_check_device(&ops, why, sizeof(why)) &&
	      strstr(why, "(module and library disagree on the ABI)"), "EPROTO: %s", why);
	fake_errno = ENOSPC;
	CHECK(ua_check_device(&ops, why, sizeof(why)) &&
	      !strcmp(why, "cannot open /dev/ummunot: No space left on device"), "ENOSPC: %s", why);
	fake_errno = 0;
	CHECK(!ua_check_device(&ops, why, sizeof(why)), "device opens");

	/* ua_check: an adapter at all, the device, then every adapter. */
	CHECK(ua_check(&ops, "", why, sizeof(why)) &&
	      !strcmp(why, "this build has no stack adapter"), "no adapter: %s", why);
	CHECK(!ua_check(&ops, fake_lib, why, sizeof(why)), "adapter loads: %s", why);
	snprintf(two, sizeof(two), "%s:/nonexistent/libx.so", fake_lib);
	CHECK(ua_check(&ops, two, why, sizeof(why)) &&
	      strstr(why, "cannot load /nonexistent/libx.so: "), "second adapter missing: %s", why);
	CHECK(!getenv("UMMUNOT_OFI"), "UMMUNOT_OFI restored after the adapters' check");
	fake_errno = ENOENT;
	CHECK(ua_check(&ops, two, why, sizeof(why)) && strstr(why, "cannot open /dev/ummunot"),
	      "device checked before the adapters: %s", why);
}

static void test_forked(const char *fake_lib)
{
	char why[1024];
	pid_t pid;
	int st;

	unsetenv("FAKE_UMMUNOT_OPEN");
	unsetenv("FAKE_UMMUNOT_SLEEP");
	CHECK(!ua_check_forked(fake_lib, fake_lib, 30, why, sizeof(why)), "forked: passes: %s", why);
	setenv("FAKE_UMMUNOT_OPEN", "13", 1);
	CHECK(ua_check_forked(fake_lib, fake_lib, 30, why, sizeof(why)) &&
	      !strcmp(why, "cannot open /dev/ummunot: Permission denied "
			   "(see /lib/udev/rules.d/60-ummunot.rules)"), "forked: EACCES: %s", why);
	unsetenv("FAKE_UMMUNOT_OPEN");
	CHECK(ua_check_forked(fake_lib, "/nonexistent/adapter.so", 30, why, sizeof(why)) &&
	      strstr(why, "cannot load /nonexistent/adapter.so"), "forked: adapter: %s", why);
	CHECK(ua_check_forked(fake_lib, "", 30, why, sizeof(why)) &&
	      !strcmp(why, "this build has no stack adapter"), "forked: no adapter: %s", why);
	CHECK(ua_check_forked("/nonexistent/libummunot.so.0", fake_lib, 30, why, sizeof(why)) &&
	      strstr(why, "cannot load /nonexistent/libummunot.so.0"), "forked: no library: %s",
	      why);
	CHECK(ua_check_forked("libc.so.6", fake_lib, 30, why, sizeof(why)) &&
	      !strcmp(why, "libc.so.6 has no ummunot_monitor_open/ummunot_monitor_close"),
	      "forked: not libummunot: %s", why);
	/* A check that hangs: it is given up. */
	setenv("FAKE_UMMUNOT_SLEEP", "20", 1);
	CHECK(ua_check_forked(fake_lib, fake_lib, 1, why, sizeof(why)) &&
	      !strcmp(why, "the check did not finish in 1 s"), "forked: timeout: %s", why);
	unsetenv("FAKE_UMMUNOT_SLEEP");
	/* The real device, as this host has it (module loaded or not). */
	if (access("/dev/ummunot", F_OK))
		printf("(this host has no /dev/ummunot)\n");

	/*
	 * slurmstepd calls the check with only its effective ids switched to
	 * the step's user (seteuid): the check takes them as its real ids,
	 * else the stand-in returns -EXDEV.  Negative case: the in-process
	 * check, which does not switch, sees the difference.
	 */
	if (geteuid() != 0) {
		printf("(not root: the effective-ids case needs seteuid)\n");
		CHECK(getuid() == geteuid(), "a non-root test runs with equal ids");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct ua_monitor_ops ops;
		int r1, r2;

		if (setegid(65534) || seteuid(65534))
			_exit(3);
		r1 = ua_check_forked(fake_lib, fake_lib, 30, why, sizeof(why));
		if (r1)
			fprintf(stderr, "forked as uid 65534: %s\n", why);
		r2 = ua_monitor_ops_load(fake_lib, &ops, why, sizeof(why)) ||
		     ua_check_device(&ops, why, sizeof(why)) != -1 ||
		     !strstr(why, "Invalid cross-device link");
		if (r2)
			fprintf(stderr, "in process as euid 65534: %s\n", why);
		_exit(r1 ? 1 : r2 ? 2 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "the check runs as the effective user (status %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* --- environment ------------------------------------------------------------- */

#define A_UCX "/usr/lib/x/libummunot-ucx.so.0"
#define A_OFI "/usr/lib/x/ummunot/libummunot-ofi-preload.so"
#define ADAPTERS A_UCX ":" A_OFI

struct fake_env {
	const char *names[16];
	const char *values[16];
	unsigned int n;
};

static const char *fake_getenv(void *ctx, const char *name)
{
	struct fake_env *f = ctx;
	unsigned int i;

	for (i = 0; i < f->n; i++)
		if (!strcmp(f->names[i], name))
			return f->values[i];
	return NULL;
}

static void fake_set(struct fake_env *f, const char *name, const char *value)
{
	f->names[f->n] = name;
	f->values[f->n] = value;
	f->n++;
}

/* The value NAME gets from E, or "(unchanged)". */
static const char *change(const struct ua_env *e, const char *name)
{
	unsigned int i = e->n;

	while (i--)
		if (!strcmp(e->var[i].name, name))
			return e->var[i].value;
	return "(unchanged)";
}

static void test_activate(void)
{
	struct ua_env e;

	ua_env_init(&e);
	CHECK(!ua_env_activate(&e, ADAPTERS, UA_MODE_REQUIRE, "/opt/libfoo.so"), "activate");
	CHECK(e.n == 5, "5 changes, %u", e.n);
	CHECK(eq(change(&e, "LD_PRELOAD"), ADAPTERS ":/opt/libfoo.so"), "preload in front: %s",
	      change(&e, "LD_PRELOAD"));
	CHECK(eq(change(&e, "UCX_MEM_MALLOC_HOOKS"), "no") &&
	      eq(change(&e, "UCX_MEM_MMAP_HOOK_MODE"), "none") &&
	      eq(change(&e, "OMPI_MCA_pml_ucx_opal_mem_hooks"), "0"), "UCX hooks off");
	CHECK(eq(change(&e, "UMMUNOT_REQUIRE"), "1"), "require passed on to the adapters");
	CHECK(eq(change(&e, "UCX_MEM_EVENTS"), "(unchanged)"), "UCX's memory events stay on");
	ua_env_free(&e);
	CHECK(e.n == 0, "freed");

	/* Mode on, libfabric's adapter only: no UCX variable, no require. */
	CHECK(!ua_env_activate(&e, A_OFI, UA_MODE_ON, ""), "activate ofi");
	CHECK(e.n == 1 && eq(change(&e, "LD_PRELOAD"), A_OFI), "ofi only: %u changes", e.n);
	CHECK(eq(change(&e, "UMMUNOT_REQUIRE"), "(unchanged)"), "mode on: no UMMUNOT_REQUIRE");
	ua_env_free(&e);
	CHECK(!ua_env_activate(&e, ADAPTERS, UA_MODE_ON, NULL) &&
	      eq(change(&e, "LD_PRELOAD"), ADAPTERS), "no LD_PRELOAD before");
	ua_env_free(&e);
}

/* Deactivating LD_PRELOAD=BEFORE gives AFTER (NULL: removed; "(unchanged)"). */
static void deact_preload(const char *before, const char *after, int want)
{
	struct fake_env f = { .n = 0 };
	struct ua_env e;
	int r;

	if (before)
		fake_set(&f, "LD_PRELOAD", before);
	ua_env_init(&e);
	r = ua_env_deactivate(&e, ADAPTERS, fake_getenv, &f);
	CHECK(r == want && eq(change(&e, "LD_PRELOAD"), after),
	      "LD_PRELOAD '%s': %d changes (want %d), now '%s' (want '%s')", before ? before : "(unset)",
	      r, want, change(&e, "LD_PRELOAD") ? change(&e, "LD_PRELOAD") : "(removed)",
	      after ? after : "(removed)");
	ua_env_free(&e);
}

static void test_deactivate(void)
{
	struct fake_env f = { .n = 0 };
	struct ua_env e;
	int r;

	deact_preload(ADAPTERS, NULL, 1);
	deact_preload(ADAPTERS ":/a.so", "/a.so", 1);
	deact_preload("/a.so:" ADAPTERS, "/a.so", 1);
	deact_preload("/a.so:" ADAPTERS ":/b.so", "/a.so:/b.so", 1);
	/* Negative cases: no activation there, nothing changes. */
	deact_preload(NULL, "(unchanged)", 0);
	deact_preload("/a.so", "(unchanged)", 0);
	deact_preload(A_UCX, "(unchanged)", 0);			/* part of the block */
	deact_preload(A_OFI ":" A_UCX, "(unchanged)", 0);	/* another order */
	deact_preload("/x" ADAPTERS, "(unchanged)", 0);		/* not on a boundary */
	deact_preload(ADAPTERS "x", "(unchanged)", 0);

	/* The hooks go only with the activation, and only with its values. */
	fake_set(&f, "LD_PRELOAD", ADAPTERS);
	fake_set(&f, "UCX_MEM_MALLOC_HOOKS", "no");
	fake_set(&f, "UCX_MEM_MMAP_HOOK_MODE", "bistro");	/* the user's own */
	fake_set(&f, "OMPI_MCA_pml_ucx_opal_mem_hooks", "0");
	fake_set(&f, "UMMUNOT_REQUIRE", "1");
	ua_env_init(&e);
	r = ua_env_deactivate(&e, ADAPTERS, fake_getenv, &f);
	CHECK(r == 4, "4 changes, %d", r);
	CHECK(!change(&e, "UCX_MEM_MALLOC_HOOKS") && !change(&e, "OMPI_MCA_pml_ucx_opal_mem_hooks") &&
	      !change(&e, "UMMUNOT_REQUIRE"), "activation's values removed");
	CHECK(eq(change(&e, "UCX_MEM_MMAP_HOOK_MODE"), "(unchanged)"), "the user's value stays");
	ua_env_free(&e);
	f.values[0] = "/a.so";	/* no activation: the same variables stay */
	r = ua_env_deactivate(&e, ADAPTERS, fake_getenv, &f);
	CHECK(r == 0 && e.n == 0, "no activation, no change: %d", r);
	ua_env_free(&e);

	/*
	 * Undo then activate again (a step started from an activated batch
	 * script): the adapters once, the job's own preload kept.
	 */
	f.values[0] = ADAPTERS ":/job.so";
	r = ua_env_deactivate(&e, ADAPTERS, fake_getenv, &f);
	CHECK(r > 0, "inherited activation found");
	CHECK(!ua_env_activate(&e, ADAPTERS, UA_MODE_ON,
			       ua_env_value(&e, "LD_PRELOAD", fake_getenv, &f)), "re-activate");
	CHECK(eq(ua_env_value(&e, "LD_PRELOAD", fake_getenv, &f), ADAPTERS ":/job.so"),
	      "adapters once: %s", ua_env_value(&e, "LD_PRELOAD", fake_getenv, &f));
	CHECK(eq(ua_env_value(&e, "UMMUNOT_REQUIRE", fake_getenv, &f), NULL),
	      "mode on after an inherited require: UMMUNOT_REQUIRE removed");
	CHECK(eq(ua_env_value(&e, "UCX_MEM_MALLOC_HOOKS", fake_getenv, &f), "no"), "hooks off again");
	CHECK(eq(ua_env_value(&e, "HOME", fake_getenv, &f), NULL), "unset stays unset");
	ua_env_free(&e);
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/test_activation.XXXXXX";

	if (argc != 2) {
		fprintf(stderr, "usage: test_activation FAKE_LIBUMMUNOT\n");
		return 2;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	unsetenv("UMMUNOT_OFI");
	test_modes(dir);
	test_checks(argv[1]);
	test_forked(argv[1]);
	test_activate();
	test_deactivate();
	rmdir(dir);
	return check_summary("test_activation");
}
