// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A stand-in for libummunot.so.0 in the host tests of the activation
 * checks (test_activation.c): ua_check_forked() loads it by path, as the
 * Slurm plugin loads the real one.  Its ummunot_monitor_open() answers
 * what the test asks through the environment the check's child inherits:
 *
 *   FAKE_UMMUNOT_OPEN=N   fail with -N (else succeed)
 *   FAKE_UMMUNOT_SLEEP=S  first sleep S seconds (a device or a library
 *                         that hangs)
 *
 * and fails with -EXDEV when the calling process's real and effective
 * user ids differ: the check must run as the step's user entirely.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <ummunot/ummunot.h>

static int fake_monitor;

int ummunot_monitor_open(const struct ummunot_monitor_attr *attr, struct ummunot_monitor **m)
{
	const char *r = getenv("FAKE_UMMUNOT_OPEN");
	const char *s = getenv("FAKE_UMMUNOT_SLEEP");

	(void)attr;
	if (s)
		sleep((unsigned int)atoi(s));
	if (getuid() != geteuid() || getgid() != getegid())
		return -EXDEV;
	if (r)
		return -atoi(r);
	*m = (struct ummunot_monitor *)(void *)&fake_monitor;
	return 0;
}

void ummunot_monitor_close(struct ummunot_monitor *m)
{
	(void)m;
}
