/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The Slurm SPANK plugin's policy (ummunot-slurm(8)), without Slurm: the
 * site's plugin arguments, the user's --ummunot option, the mode a step
 * runs in and the lines the plugin prints.  Pure functions, so that the
 * host tests call them (tests/slurm/test_policy.c).
 */
#ifndef UMMUNOT_SLURM_POLICY_H
#define UMMUNOT_SLURM_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "activation.h"

/* The site's, from plugstack.conf. */
struct usp_policy {
	enum ua_mode mode;	/* mode=prefer: UA_MODE_ON; mode=require */
	bool optout;		/* optout=allow (true) or deny */
	char adapters[2048];	/* adapters=LIST, default the build's */
	char library[1024];	/* libummunot=PATH, default the soname */
};

/* Defaults: mode=prefer, optout=allow, the given adapters and library. */
int usp_policy_init(struct usp_policy *p, const char *adapters, const char *library);

/*
 * The plugin's arguments: mode=prefer|require, optout=allow|deny,
 * adapters=PATH[:PATH...], libummunot=PATH.  Anything else is an error
 * (a misspelt policy never means a weaker one).
 */
int usp_parse_args(struct usp_policy *p, int ac, char **av, char *why, size_t len);

/*
 * The mode a step's tasks run in, from the policy and the user's
 * --ummunot value (NULL: not given): on is the site's mode, require
 * raises it, off turns ummunot off where the site allows it.  An unknown
 * value, or off where the site says optout=deny, is an error.
 */
int usp_decide(const struct usp_policy *p, const char *option, enum ua_mode *m,
	       char *why, size_t len);

/* "StepId=JOB.STEP", with Slurm's names for the special steps. */
void usp_step_name(char *buf, size_t len, unsigned int job, unsigned int step);

/*
 * The one line of a node that cannot protect a step: refused (mode
 * require) or running on the stacks' own hooks (mode on).
 */
void usp_refusal(char *buf, size_t len, const char *node, const char *step, const char *why);
void usp_fallback(char *buf, size_t len, const char *node, const char *step, const char *why);

#endif
