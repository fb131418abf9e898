/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The public header compiles as C99 and C11 (this file is built as both,
 * with -Wall -Wextra -Werror -pedantic), and the C API answers bad input
 * with a negative errno.  Linked against the shared libummunot.so.
 */
#include <errno.h>
#include <stdio.h>

#include <ummunot/ummunot.h>

static int failures;

#define EXPECT(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
		failures++; \
	} \
} while (0)

static int reg(void *ctx, void *addr, size_t length, int access, void **mr,
	       uint32_t *lkey, uint32_t *rkey)
{
	(void)ctx; (void)addr; (void)length; (void)access;
	*mr = NULL;
	*lkey = *rkey = 0;
	return 0;
}

static int dereg(void *ctx, void *mr)
{
	(void)ctx; (void)mr;
	return 0;
}

int main(void)
{
	struct ummunot_monitor_attr ma = {0};
	struct ummunot_cache_attr ca = {0};
	struct ummunot_backend_ops ops = {reg, dereg};
	struct ummunot_monitor *m = NULL;
	struct ummunot_cache *c = NULL;
	struct ummunot_cache_stats st;
	const struct ummunot_reg *r = NULL;
	uint64_t h = 1;

	ma.device_path = "/nonexistent/ummunot";
	EXPECT(ummunot_monitor_open(&ma, &m) == -ENOENT);
	EXPECT(m == NULL);
	ma.flags = 1;
	EXPECT(ummunot_monitor_open(&ma, &m) == -EINVAL);
	EXPECT(ummunot_monitor_open(NULL, NULL) == -EINVAL);
	EXPECT(ummunot_monitor_changed(NULL) == -EINVAL);
	EXPECT(ummunot_monitor_read(NULL, NULL, 0) == -EINVAL);
	EXPECT(ummunot_monitor_unregister(NULL, &h, 1, NULL) == -EINVAL);
	EXPECT(ummunot_monitor_fd(NULL) == -EINVAL);
	ummunot_monitor_close(NULL);

	ca.device_path = "/nonexistent/ummunot";
	EXPECT(ummunot_cache_create_backend(&ops, NULL, &ca, &c) == -ENOENT);
	EXPECT(ummunot_cache_create_backend(NULL, NULL, &ca, &c) == -EINVAL);
	EXPECT(ummunot_cache_get(NULL, &h, 8, 0, &r) == -EINVAL);
	EXPECT(ummunot_cache_put(NULL, r) == -EINVAL);
	EXPECT(ummunot_cache_stats(NULL, &st) == -EINVAL);
	EXPECT(ummunot_cache_monitor(NULL) == NULL);
	ummunot_cache_destroy(NULL);

	if (failures)
		return 1;
	printf("ok (C %ld)\n", (long)__STDC_VERSION__);
	return 0;
}
