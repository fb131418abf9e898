// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host test of the Slurm plugin's policy (tools/slurm/policy.c): the
 * site's plugin arguments, the user's --ummunot against them, the mode a
 * step runs in, and the lines a node prints.  Every refusal has its
 * allowed counterpart.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "policy.h"

static int parse(struct usp_policy *p, char *why, size_t len, int ac, ...)
{
	char *av[8];
	va_list ap;
	int i;

	va_start(ap, ac);
	for (i = 0; i < ac; i++)
		av[i] = va_arg(ap, char *);
	va_end(ap);
	usp_policy_init(p, "/lib/a.so:/lib/b.so", "libummunot.so.0");
	return usp_parse_args(p, ac, av, why, len);
}

static void test_args(void)
{
	struct usp_policy p;
	char why[512], longv[3000];

	CHECK(!parse(&p, why, sizeof(why), 0), "no arguments");
	CHECK(p.mode == UA_MODE_ON && p.optout && !strcmp(p.adapters, "/lib/a.so:/lib/b.so") &&
	      !strcmp(p.library, "libummunot.so.0"), "defaults: prefer, allow, the build's");
	CHECK(!parse(&p, why, sizeof(why), 2, "mode=require", "optout=deny") &&
	      p.mode == UA_MODE_REQUIRE && !p.optout, "require, deny");
	CHECK(!parse(&p, why, sizeof(why), 2, "mode=prefer", "optout=allow") &&
	      p.mode == UA_MODE_ON && p.optout, "prefer, allow");
	CHECK(!parse(&p, why, sizeof(why), 2, "adapters=/x/u.so", "libummunot=/x/libummunot.so.0") &&
	      !strcmp(p.adapters, "/x/u.so") && !strcmp(p.library, "/x/libummunot.so.0"),
	      "adapters, libummunot");
	CHECK(!parse(&p, why, sizeof(why), 1, "adapters=") && !strcmp(p.adapters, ""),
	      "no adapters (every node refused in require, with that reason)");
	/* Misspelt or unknown: refused, never a weaker policy. */
	CHECK(parse(&p, why, sizeof(why), 1, "mode=requre") == -EINVAL &&
	      strstr(why, "plugin argument 'mode=requre': expected mode=prefer|require"),
	      "mode typo: %s", why);
	CHECK(parse(&p, why, sizeof(why), 1, "mode=on") == -EINVAL, "mode=on is not a policy");
	CHECK(parse(&p, why, sizeof(why), 1, "mode=off") == -EINVAL, "mode=off is not a policy");
	CHECK(parse(&p, why, sizeof(why), 1, "optout=no") == -EINVAL, "optout typo");
	CHECK(parse(&p, why, sizeof(why), 1, "require") == -EINVAL && strstr(why, "'require'"),
	      "bare word: %s", why);
	CHECK(parse(&p, why, sizeof(why), 2, "mode=require", "optuot=deny") == -EINVAL &&
	      strstr(why, "'optuot=deny'"), "unknown key named: %s", why);
	CHECK(parse(&p, why, sizeof(why), 1, "libummunot=") == -EINVAL, "empty library");
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	memcpy(longv, "adapters=", 9);
	CHECK(parse(&p, why, sizeof(why), 1, longv) == -EINVAL, "adapters too long");
}

/* The mode a step gets from POLICY (mode, optout) and the user's OPTION. */
static void decide(enum ua_mode pmode, bool optout, const char *option, int want_r,
		   enum ua_mode want)
{
	struct usp_policy p;
	enum ua_mode m = (enum ua_mode)-1;
	char why[256] = "";
	int r;

	usp_policy_init(&p, "/lib/a.so", "libummunot.so.0");
	p.mode = pmode;
	p.optout = optout;
	r = usp_decide(&p, option, &m, why, sizeof(why));
	CHECK(r == want_r && (r || m == want),
	      "policy %s/%s, --ummunot=%s: %d %s (want %d %s) %s", ua_mode_name(pmode),
	      optout ? "allow" : "deny", option ? option : "(none)", r, r ? "-" : ua_mode_name(m),
	      want_r, ua_mode_name(want), why);
}

static void test_decide(void)
{
	struct usp_policy p;
	enum ua_mode m;
	char why[256] = "";

	/* The site's mode when the user says nothing, or on. */
	decide(UA_MODE_ON, true, NULL, 0, UA_MODE_ON);
	decide(UA_MODE_ON, true, "on", 0, UA_MODE_ON);
	decide(UA_MODE_REQUIRE, true, NULL, 0, UA_MODE_REQUIRE);
	decide(UA_MODE_REQUIRE, true, "on", 0, UA_MODE_REQUIRE);
	/* A user may always raise it. */
	decide(UA_MODE_ON, true, "require", 0, UA_MODE_REQUIRE);
	decide(UA_MODE_ON, false, "require", 0, UA_MODE_REQUIRE);
	/* Opting out: where allowed, whatever the mode; else refused. */
	decide(UA_MODE_ON, true, "off", 0, UA_MODE_OFF);
	decide(UA_MODE_REQUIRE, true, "off", 0, UA_MODE_OFF);
	decide(UA_MODE_ON, false, "off", -EPERM, UA_MODE_OFF);
	decide(UA_MODE_REQUIRE, false, "off", -EPERM, UA_MODE_OFF);
	decide(UA_MODE_REQUIRE, false, "0", -EPERM, UA_MODE_OFF);
	decide(UA_MODE_REQUIRE, false, "on", 0, UA_MODE_REQUIRE);
	decide(UA_MODE_REQUIRE, false, NULL, 0, UA_MODE_REQUIRE);
	/* Not a value: refused in every policy. */
	decide(UA_MODE_ON, true, "of", -EINVAL, UA_MODE_OFF);
	decide(UA_MODE_ON, true, "", -EINVAL, UA_MODE_OFF);
	decide(UA_MODE_REQUIRE, true, "Off", -EINVAL, UA_MODE_OFF);

	usp_policy_init(&p, "/lib/a.so", "libummunot.so.0");
	p.optout = false;
	CHECK(usp_decide(&p, "off", &m, why, sizeof(why)) &&
	      !strcmp(why, "--ummunot=off: this cluster does not let jobs turn ummunot off "
			   "(optout=deny)"), "deny's line: %s", why);
	CHECK(usp_decide(&p, "maybe", &m, why, sizeof(why)) &&
	      !strcmp(why, "--ummunot=maybe: expected on, off or require"), "typo's line: %s", why);
}

static void test_lines(void)
{
	char buf[512];

	usp_step_name(buf, sizeof(buf), 12, 0);
	CHECK(!strcmp(buf, "StepId=12.0"), "%s", buf);
	usp_step_name(buf, sizeof(buf), 12, 0xfffffffbU);
	CHECK(!strcmp(buf, "StepId=12.batch"), "%s", buf);
	usp_step_name(buf, sizeof(buf), 12, 0xfffffffcU);
	CHECK(!strcmp(buf, "StepId=12.extern"), "%s", buf);
	usp_step_name(buf, sizeof(buf), 12, 0xfffffffaU);
	CHECK(!strcmp(buf, "StepId=12.interactive"), "%s", buf);
	usp_refusal(buf, sizeof(buf), "node2", "StepId=7.0", "cannot open /dev/ummunot: X");
	CHECK(!strcmp(buf, "ummunot: node2: refusing to start the tasks of StepId=7.0 unprotected "
			   "(mode require): cannot open /dev/ummunot: X"), "%s", buf);
	usp_fallback(buf, sizeof(buf), "node2", "StepId=7.0", "cannot open /dev/ummunot: X");
	CHECK(!strcmp(buf, "ummunot: node2: the tasks of StepId=7.0 run without ummunot, on their "
			   "stacks' own memory hooks: cannot open /dev/ummunot: X"), "%s", buf);
}

int main(void)
{
	test_args();
	test_decide();
	test_lines();
	return check_summary("test_policy");
}
