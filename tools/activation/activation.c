// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The activation decision shared by ummunot-exec and the Slurm SPANK
 * plugin: modes, checks, environment.  See activation.h.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "activation.h"

int ua_parse_mode(const char *s, enum ua_mode *m)
{
	if (!strcmp(s, "off") || !strcmp(s, "0"))
		*m = UA_MODE_OFF;
	else if (!strcmp(s, "on") || !strcmp(s, "1"))
		*m = UA_MODE_ON;
	else if (!strcmp(s, "require"))
		*m = UA_MODE_REQUIRE;
	else
		return -EINVAL;
	return 0;
}

const char *ua_mode_name(enum ua_mode m)
{
	switch (m) {
	case UA_MODE_OFF:
		return "off";
	case UA_MODE_ON:
		return "on";
	case UA_MODE_REQUIRE:
		return "require";
	}
	return "?";
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

int ua_read_conf(const char *path, enum ua_mode *m, char *why, size_t len)
{
	char line[256];
	unsigned int n = 0;
	FILE *f = fopen(path, "re");

	*m = UA_MODE_ON;
	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, len, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
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
		if (strcmp(key, "mode") || ua_parse_mode(val, m))
			goto bad;
	}
	fclose(f);
	return 0;
bad:
	snprintf(why, len, "%s:%u: expected \"mode = on|require|off\"", path, n);
	fclose(f);
	return -1;
}

int ua_resolve_mode(const char *env, const char *conf, enum ua_mode *m, char *why, size_t len)
{
	if (env && *env) {
		if (ua_parse_mode(env, m)) {
			snprintf(why, len, "UMMUNOT='%s': expected on, require or off", env);
			return -1;
		}
		return 0;
	}
	return ua_read_conf(conf, m, why, len);
}

int ua_monitor_ops_load(const char *library, struct ua_monitor_ops *ops, char *why, size_t len)
{
	void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(why, len, "cannot load %s", dlerror());
		return -1;
	}
	ops->open = (int (*)(const struct ummunot_monitor_attr *, struct ummunot_monitor **))
		dlsym(h, "ummunot_monitor_open");
	ops->close = (void (*)(struct ummunot_monitor *))dlsym(h, "ummunot_monitor_close");
	if (!ops->open || !ops->close) {
		snprintf(why, len, "%s has no ummunot_monitor_open/ummunot_monitor_close", library);
		return -1;
	}
	return 0;
}

int ua_check_device(const struct ua_monitor_ops *ops, char *why, size_t len)
{
	struct ummunot_monitor *m;
	int r = ops->open(NULL, &m);

	if (r == 0) {
		ops->close(m);
		return 0;
	}
	snprintf(why, len, "cannot open %s: %s%s", UMMUNOT_DEFAULT_DEVICE_PATH, strerror(-r),
		 r == -ENOENT ? " (is the ummunot module loaded?)" :
		 r == -EACCES || r == -EPERM ? " (see /lib/udev/rules.d/60-ummunot.rules)" :
		 r == -EPROTO ? " (module and library disagree on the ABI)" : "");
	return -1;
}

int ua_check_adapters(const char *list, char *why, size_t len)
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

int ua_check(const struct ua_monitor_ops *ops, const char *adapters, char *why, size_t len)
{
	if (!*adapters) {
		snprintf(why, len, "this build has no stack adapter");
		return -1;
	}
	if (ua_check_device(ops, why, len))
		return -1;
	return ua_check_adapters(adapters, why, len);
}

/* The child of ua_check_forked(): one byte '0' or '1', then the reason. */
static void __attribute__((noreturn))
check_child(int fd, const char *library, const char *adapters)
{
	struct ua_monitor_ops ops;
	char msg[1024] = "";
	uid_t uid = geteuid();
	gid_t gid = getegid();
	size_t n, off = 0;
	int r;

	if (setresgid(gid, gid, gid) || setresuid(uid, uid, uid)) {
		snprintf(msg, sizeof(msg), "the check cannot run as uid %u: %s", (unsigned int)uid,
			 strerror(errno));
		r = -1;
	} else {
		r = ua_monitor_ops_load(library, &ops, msg, sizeof(msg));
		if (!r)
			r = ua_check(&ops, adapters, msg, sizeof(msg));
	}
	memmove(msg + 1, msg, sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	msg[0] = r ? '1' : '0';
	n = strlen(msg);
	while (off < n) {
		ssize_t w = write(fd, msg + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	/* No exit handlers, no stdio flush: they are the parent's. */
	_exit(r ? 1 : 0);
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

int ua_check_forked(const char *library, const char *adapters, unsigned int timeout_s,
		    char *why, size_t len)
{
	char buf[1024];
	size_t got = 0;
	long deadline = now_ms() + 1000L * timeout_s;
	bool timed_out = false;
	int p[2], status = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC)) {
		snprintf(why, len, "cannot run the check: pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, len, "cannot run the check: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		check_child(p[1], library, adapters);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		long left = deadline - now_ms();
		ssize_t r;
		int pr;

		if (left <= 0) {
			timed_out = true;
			break;
		}
		pr = poll(&pfd, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			timed_out = pr == 0;
			break;
		}
		r = read(p[0], buf + got, sizeof(buf) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(buf) - 1)
			break;
	}
	close(p[0]);
	buf[got] = '\0';
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		snprintf(why, len, "the check did not finish in %u s", timeout_s);
		return -1;
	}
	if (got > 0 && buf[0] == '0')
		return 0;
	if (got > 1 && buf[0] == '1') {
		snprintf(why, len, "%s", buf + 1);
		return -1;
	}
	/* (waitpid may have failed: a caller that ignores SIGCHLD) */
	if (WIFSIGNALED(status))
		snprintf(why, len, "the check was killed by signal %d", WTERMSIG(status));
	else
		snprintf(why, len, "the check ended without an answer");
	return -1;
}

/* --- environment ----------------------------------------------------------- */

/*
 * What libummunot-ucx replaces: UCX's hooks and Open MPI's feed of its
 * patcher into UCX (never UCX_MEM_EVENTS=no, which turns the cache's
 * events off too).
 */
static const struct ua_hook {
	const char *name, *value;
} ucx_hooks_off[] = {
	{ "UCX_MEM_MALLOC_HOOKS", "no" },
	{ "UCX_MEM_MMAP_HOOK_MODE", "none" },
	{ "OMPI_MCA_pml_ucx_opal_mem_hooks", "0" },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define REQUIRE_VAR "UMMUNOT_REQUIRE"

void ua_env_init(struct ua_env *e)
{
	e->n = 0;
}

void ua_env_free(struct ua_env *e)
{
	while (e->n)
		free(e->var[--e->n].value);
}

/* Takes VALUE (owned, may be NULL for a removal) whatever the result. */
static int env_add(struct ua_env *e, const char *name, char *value)
{
	if (e->n == UA_ENV_MAX) {
		free(value);
		return -ENOSPC;
	}
	e->var[e->n].name = name;
	e->var[e->n].value = value;
	e->n++;
	return 0;
}

static int env_set(struct ua_env *e, const char *name, const char *value)
{
	char *v = strdup(value);

	if (!v)
		return -ENOMEM;
	return env_add(e, name, v);
}

const char *ua_env_value(const struct ua_env *e, const char *name, ua_getenv_fn get, void *ctx)
{
	unsigned int i = e->n;

	while (i--)
		if (!strcmp(e->var[i].name, name))
			return e->var[i].value;
	return get(ctx, name);
}

static bool has_ucx_adapter(const char *adapters)
{
	return strstr(adapters, "libummunot-ucx") != NULL;
}

int ua_env_activate(struct ua_env *e, const char *adapters, enum ua_mode m, const char *preload)
{
	char *v;
	size_t i;
	int r;

	if (preload && *preload)
		r = asprintf(&v, "%s:%s", adapters, preload);
	else
		r = asprintf(&v, "%s", adapters);
	if (r < 0)
		return -ENOMEM;
	r = env_add(e, "LD_PRELOAD", v);
	/*
	 * Open MPI's patcher itself stays: Open MPI's own registration cache
	 * (rcache grdma: btl openib, osc rdma over btl ofi) has no other
	 * source of events.
	 */
	for (i = 0; !r && has_ucx_adapter(adapters) && i < ARRAY_SIZE(ucx_hooks_off); i++)
		r = env_set(e, ucx_hooks_off[i].name, ucx_hooks_off[i].value);
	if (!r && m == UA_MODE_REQUIRE)
		r = env_set(e, REQUIRE_VAR, "1");
	return r;
}

/*
 * Where the ':'-separated sequence BLOCK starts in LIST, on component
 * boundaries; -1 if it does not.
 */
static long find_block(const char *list, const char *block)
{
	size_t bl = strlen(block);
	const char *p = list;

	if (!bl)
		return -1;
	for (;;) {
		if (!strncmp(p, block, bl) && (p[bl] == '\0' || p[bl] == ':'))
			return p - list;
		p = strchr(p, ':');
		if (!p)
			return -1;
		p++;
	}
}

int ua_env_deactivate(struct ua_env *e, const char *adapters, ua_getenv_fn get, void *ctx)
{
	const char *cur = get(ctx, "LD_PRELOAD");
	unsigned int n0 = e->n;
	size_t i, bl = strlen(adapters);
	char *list, *rest;
	long at;
	int r;

	if (!cur)
		return 0;
	list = strdup(cur);
	if (!list)
		return -ENOMEM;
	at = find_block(list, adapters);
	if (at < 0) {
		free(list);
		return 0;
	}
	/* LIST without the block and the separator next to it. */
	rest = list + at + bl;
	if (*rest == ':')
		rest++;
	else if (at > 0)
		at--;	/* the block ended the list: drop the ':' before it */
	memmove(list + at, rest, strlen(rest) + 1);
	if (*list) {
		r = env_add(e, "LD_PRELOAD", list);
	} else {
		free(list);
		r = env_add(e, "LD_PRELOAD", NULL);
	}
	for (i = 0; !r && has_ucx_adapter(adapters) && i < ARRAY_SIZE(ucx_hooks_off); i++) {
		const char *v = get(ctx, ucx_hooks_off[i].name);

		if (v && !strcmp(v, ucx_hooks_off[i].value))
			r = env_add(e, ucx_hooks_off[i].name, NULL);
	}
	if (!r) {
		const char *v = get(ctx, REQUIRE_VAR);

		if (v && !strcmp(v, "1"))
			r = env_add(e, REQUIRE_VAR, NULL);
	}
	return r ? r : (int)(e->n - n0);
}
