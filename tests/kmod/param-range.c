// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Every refused write to a module parameter fails with EINVAL
 * (Documentation/admin-guide.rst: "an out-of-range write fails with
 * EINVAL") and leaves the value unchanged: below the minimum, above the
 * maximum, values that overflow the parameter's type (these gave ERANGE
 * from param_set_uint_minmax()/kstrtoul() before), negative numbers,
 * garbage.  The largest in-range value is accepted and reads back.
 */
#include <fcntl.h>
#include <unistd.h>

#include "helpers.h"

static int write_param(const char *name, const char *val)
{
	char path[128];
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), UMMUNOT_PARAM_DIR "/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		t_fail("open %s: %s", path, t_errname(errno));
	n = write(fd, val, strlen(val));
	if (n < 0)
		err = errno;
	else if ((size_t)n != strlen(val))
		t_fail("write %s=%s: short write %zd", name, val, n);
	close(fd);
	return err;
}

static void expect_refused(const char *name, const char *val)
{
	long long before = t_param_get(name), after;
	int err = write_param(name, val);

	if (err != EINVAL)
		t_fail("%s=%s: expected EINVAL, got %s", name, val,
		       err ? t_errname(err) : "success");
	after = t_param_get(name);
	if (after != before)
		t_fail("%s=%s refused but the value changed %lld -> %lld", name,
		       val, before, after);
}

/* Out of range for every parameter: negative, garbage, huge. */
static const char *const common_bad[] = {
	"-1", "abc", "12x", "0x", "99999999999999999999999",
	"18446744073709551616",
};

int main(int argc, char **argv)
{
	static const char *const uint_params[] = {
		"max_regions", "max_regions_per_mm", "max_ring_entries",
		"default_ring_entries",
	};

	t_init(argc, argv);

	for (size_t p = 0; p < sizeof(uint_params) / sizeof(uint_params[0]); p++) {
		const char *name = uint_params[p];

		for (size_t i = 0; i < sizeof(common_bad) / sizeof(common_bad[0]); i++)
			expect_refused(name, common_bad[i]);
		/* Overflow unsigned int: ERANGE from kstrtouint() before. */
		expect_refused(name, "4294967296");
		expect_refused(name, "4294967295");
	}
	/* Regions: 1 .. 2^31-1. */
	for (size_t p = 0; p < 2; p++) {
		expect_refused(uint_params[p], "0");
		expect_refused(uint_params[p], "2147483648");
		t_param_set(uint_params[p], 2147483647);	/* restored at exit */
	}
	/* Ring entries: 64 .. 2^22. */
	for (size_t p = 2; p < 4; p++) {
		expect_refused(uint_params[p], "63");
		expect_refused(uint_params[p], "4194305");
	}
	t_param_set("max_ring_entries", 4194304);
	t_param_set("default_ring_entries", 64);
	/* Bytes: 0 (the default) .. LONG_MAX. */
	for (size_t i = 0; i < sizeof(common_bad) / sizeof(common_bad[0]); i++)
		expect_refused("max_user_memory", common_bad[i]);
	expect_refused("max_user_memory", "9223372036854775808");
	expect_refused("max_user_memory", "18446744073709551615");
	t_param_set("max_user_memory", 9223372036854775807LL);
	t_log("every refused write gave EINVAL and left the value unchanged");
	return T_EXIT_PASS;
}
