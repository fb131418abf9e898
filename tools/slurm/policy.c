// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The Slurm SPANK plugin's policy, without Slurm (policy.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"

/* Slurm's special step ids (slurm/slurm.h, 22.05 to 24.11). */
#define STEP_INTERACTIVE 0xfffffffaU
#define STEP_BATCH 0xfffffffbU
#define STEP_EXTERN 0xfffffffcU
#define STEP_PENDING 0xfffffffdU

static int copy(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

int usp_policy_init(struct usp_policy *p, const char *adapters, const char *library)
{
	p->mode = UA_MODE_ON;
	p->optout = true;
	if (copy(p->adapters, sizeof(p->adapters), adapters) ||
	    copy(p->library, sizeof(p->library), library))
		return -ENAMETOOLONG;
	return 0;
}

int usp_parse_args(struct usp_policy *p, int ac, char **av, char *why, size_t len)
{
	int i;

	for (i = 0; i < ac; i++) {
		const char *a = av[i], *v = strchr(a, '=');

		if (!v)
			goto bad;
		v++;
		if (!strncmp(a, "mode=", 5)) {
			if (!strcmp(v, "prefer"))
				p->mode = UA_MODE_ON;
			else if (!strcmp(v, "require"))
				p->mode = UA_MODE_REQUIRE;
			else
				goto bad;
		} else if (!strncmp(a, "optout=", 7)) {
			if (!strcmp(v, "allow"))
				p->optout = true;
			else if (!strcmp(v, "deny"))
				p->optout = false;
			else
				goto bad;
		} else if (!strncmp(a, "adapters=", 9)) {
			if (copy(p->adapters, sizeof(p->adapters), v))
				goto bad;
		} else if (!strncmp(a, "libummunot=", 11)) {
			if (!*v || copy(p->library, sizeof(p->library), v))
				goto bad;
		} else {
			goto bad;
		}
	}
	return 0;
bad:
	snprintf(why, len, "plugin argument '%s': expected mode=prefer|require, optout=allow|deny, "
		 "adapters=PATH[:PATH...] or libummunot=PATH", av[i]);
	return -EINVAL;
}

int usp_decide(const struct usp_policy *p, const char *option, enum ua_mode *m,
	       char *why, size_t len)
{
	enum ua_mode u;

	if (!option) {
		*m = p->mode;
		return 0;
	}
	if (ua_parse_mode(option, &u)) {
		snprintf(why, len, "--ummunot=%s: expected on, off or require", option);
		return -EINVAL;
	}
	if (u == UA_MODE_OFF && !p->optout) {
		snprintf(why, len, "--ummunot=%s: this cluster does not let jobs turn ummunot off "
			 "(optout=deny)", option);
		return -EPERM;
	}
	/* on: the site's mode; require raises it; off (allowed) is off. */
	*m = u == UA_MODE_ON ? p->mode : u;
	return 0;
}

void usp_step_name(char *buf, size_t len, unsigned int job, unsigned int step)
{
	const char *name = step == STEP_BATCH ? "batch" :
			   step == STEP_EXTERN ? "extern" :
			   step == STEP_INTERACTIVE ? "interactive" :
			   step == STEP_PENDING ? "pending" : NULL;

	if (name)
		snprintf(buf, len, "StepId=%u.%s", job, name);
	else
		snprintf(buf, len, "StepId=%u.%u", job, step);
}

void usp_refusal(char *buf, size_t len, const char *node, const char *step, const char *why)
{
	snprintf(buf, len, "ummunot: %s: refusing to start the tasks of %s unprotected "
		 "(mode require): %s", node, step, why);
}

void usp_fallback(char *buf, size_t len, const char *node, const char *step, const char *why)
{
	snprintf(buf, len, "ummunot: %s: the tasks of %s run without ummunot, on their stacks' "
		 "own memory hooks: %s", node, step, why);
}
