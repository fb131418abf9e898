// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * spank_ummunot.so: a Slurm SPANK plugin that starts every task of every
 * step with ummunot's stack adapters active, or, in mode require, refuses
 * a step on a node that cannot protect it: none of its tasks' programs
 * runs there.  ummunot-slurm(8) is its manual; the decision (mode, checks,
 * environment) is ummunot-exec's, from tools/activation.
 *
 * plugstack.conf:  required spank_ummunot.so [mode=prefer|require]
 *                      [optout=allow|deny] [adapters=LIST] [libummunot=PATH]
 * srun, sbatch, salloc:  --ummunot=on|off|require
 *
 * Where it acts (remote context, slurmstepd):
 *   user_init   once per step and node, as the step's user, after Slurm
 *               has connected the step's standard error to the user's
 *               output and before any task is forked: the decision and the
 *               checks, in a child process (ua_check_forked: slurmstepd
 *               loads neither libummunot nor an adapter).  A node that
 *               cannot protect a step in mode require prints one
 *               slurm_error() line naming the node and the reason (the
 *               user's output and slurmd's log).
 *   task_init   in each task just before its exec: a refused step's task
 *               fails here, so it exits with status 1 and its program never
 *               runs (failing user_init instead would drain the node of a
 *               batch step and leave srun's exit status 0, Slurm 22.05);
 *               else the environment: an activation inherited from an
 *               activated batch script or parent step undone, then this
 *               step's.
 * In srun, sbatch and salloc it only checks the option against the policy
 * (an opt-out the site denies fails there, before the job is submitted).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "activation.h"
#include "policy.h"

/* The adapters this build installs and the library the check loads. */
#ifndef UMMUNOT_ADAPTERS
#define UMMUNOT_ADAPTERS ""
#endif
#ifndef UMMUNOT_LIBRARY
#define UMMUNOT_LIBRARY "libummunot.so.0"
#endif
/* How long the check may take (loading UCX through the adapter). */
#define CHECK_TIMEOUT_S 60

SPANK_PLUGIN(ummunot, 1);

static struct usp_policy policy;
static bool policy_ok;
static char *user_option;	/* --ummunot's value, NULL if not given */

/* Remote context: what user_init decided for this node's tasks. */
static enum ua_mode step_mode = UA_MODE_OFF;
static bool step_protected;
static bool step_refused;

static int option_cb(int val, const char *optarg, int remote);

/*
 * Registered in slurm_spank_init: sbatch and salloc ignore a static
 * spank_options table.
 */
static struct spank_option ummunot_option = {
	"ummunot", "on|off|require",
	"ummunot for this job's tasks: on (the site's default), off (the stacks' own "
	"memory hooks, where the site allows it) or require (refuse to start on a node "
	"that cannot protect them)",
	1, 0, option_cb
};

static int option_cb(int val, const char *optarg, int remote)
{
	char why[256];
	enum ua_mode m;

	(void)val;
	free(user_option);
	user_option = strdup(optarg ? optarg : "");
	if (!user_option)
		return -1;
	/*
	 * srun, sbatch, salloc: refuse here, before the job exists.  On the
	 * node the node's policy decides again in user_init, where the line
	 * reaches the user's output (a failure here would not).
	 */
	if (!remote && policy_ok && usp_decide(&policy, user_option, &m, why, sizeof(why))) {
		slurm_error("ummunot: %s", why);
		return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	char why[2304];
	spank_err_t e;

	if (usp_policy_init(&policy, UMMUNOT_ADAPTERS, UMMUNOT_LIBRARY) ||
	    usp_parse_args(&policy, ac, av, why, sizeof(why))) {
		slurm_error("ummunot: plugstack.conf: %s", why);
		return -1;
	}
	policy_ok = true;
	/* (slurmd itself and the prolog/epilog take no option) */
	if (spank_context() == S_CTX_SLURMD || spank_context() == S_CTX_JOB_SCRIPT)
		return 0;
	e = spank_option_register(sp, &ummunot_option);
	if (e != ESPANK_SUCCESS) {
		slurm_error("ummunot: cannot register --ummunot: %s", spank_strerror(e));
		return -1;
	}
	return 0;
}

static const char *node_name(void)
{
	static char host[256];
	const char *n = getenv("SLURMD_NODENAME");	/* slurmstepd's own */

	if (n && *n)
		return n;
	if (gethostname(host, sizeof(host) - 1))
		return "?";
	return host;
}

static void step_name(spank_t sp, char *buf, size_t len)
{
	uint32_t job = 0, step = 0;

	if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS) {
		snprintf(buf, len, "this step");
		return;
	}
	usp_step_name(buf, len, job, step);
}

static bool job_verbose(spank_t sp)
{
	char v[16];

	return spank_getenv(sp, "UMMUNOT_VERBOSE", v, sizeof(v)) == ESPANK_SUCCESS &&
	       strcmp(v, "0") && *v;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	char why[1024], step[64], line[1400];
	const char *node;

	(void)ac;
	(void)av;
	if (!spank_remote(sp))
		return 0;
	node = node_name();
	step_name(sp, step, sizeof(step));
	step_protected = false;
	step_refused = false;
	if (usp_decide(&policy, user_option, &step_mode, why, sizeof(why))) {
		slurm_error("ummunot: %s: refusing to start the tasks of %s: %s", node, step, why);
		step_refused = true;
		return 0;
	}
	if (step_mode == UA_MODE_OFF) {
		slurm_verbose("ummunot: %s: %s: mode off, tasks start unchanged", node, step);
		return 0;
	}
	if (ua_check_forked(policy.library, policy.adapters, CHECK_TIMEOUT_S, why, sizeof(why))) {
		if (step_mode == UA_MODE_REQUIRE) {
			usp_refusal(line, sizeof(line), node, step, why);
			slurm_error("%s", line);
			step_refused = true;
			return 0;
		}
		usp_fallback(line, sizeof(line), node, step, why);
		slurm_spank_log("%s", line);
		return 0;
	}
	step_protected = true;
	if (job_verbose(sp))
		slurm_spank_log("ummunot: %s: %s: active (mode %s): %s preloaded", node, step,
				ua_mode_name(step_mode), policy.adapters);
	else
		slurm_verbose("ummunot: %s: %s: active (mode %s)", node, step,
			      ua_mode_name(step_mode));
	return 0;
}

/* The task's environment, for tools/activation. */
struct task_env {
	spank_t sp;
	char *buf;
	size_t size;
};

static const char *task_getenv(void *ctx, const char *name)
{
	struct task_env *t = ctx;

	for (;;) {
		spank_err_t r = spank_getenv(t->sp, name, t->buf, (int)t->size);
		char *b;

		if (r == ESPANK_SUCCESS)
			return t->buf;
		if (r != ESPANK_NOSPACE || t->size >= (1U << 20))
			return NULL;
		b = realloc(t->buf, t->size * 2);
		if (!b)
			return NULL;
		t->buf = b;
		t->size *= 2;
	}
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	struct task_env t = { .sp = sp, .size = 4096 };
	struct ua_env env;
	unsigned int i;
	int r;

	(void)ac;
	(void)av;
	if (!spank_remote(sp))
		return 0;
	if (step_refused)
		return -1;
	t.buf = malloc(t.size);
	if (!t.buf)
		return -1;
	ua_env_init(&env);
	r = ua_env_deactivate(&env, policy.adapters, task_getenv, &t);
	if (r >= 0 && step_protected)
		r = ua_env_activate(&env, policy.adapters, step_mode,
				    ua_env_value(&env, "LD_PRELOAD", task_getenv, &t));
	if (r < 0) {
		slurm_error("ummunot: %s: cannot compute a task's environment: %s", node_name(),
			    strerror(-r));
	} else {
		for (i = 0; i < env.n; i++) {
			const struct ua_var *v = &env.var[i];
			spank_err_t e = v->value ? spank_setenv(sp, v->name, v->value, 1) :
						   spank_unsetenv(sp, v->name);

			if (e != ESPANK_SUCCESS) {
				slurm_error("ummunot: %s: cannot set %s in a task's environment: %s",
					    node_name(), v->name, spank_strerror(e));
				r = -1;
				break;
			}
		}
	}
	ua_env_free(&env);
	free(t.buf);
	return r < 0 ? -1 : 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	free(user_option);
	user_option = NULL;
	return 0;
}
