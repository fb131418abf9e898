// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A consumer built by stat-install.sh against the installed headers and
 * pkg-config file: opening a device path that does not exist must fail
 * with -ENOENT through the C API, and the user-area contract header must
 * be usable from C.
 */
#include <errno.h>
#include <stdio.h>

#include <ummunot/ummunot.h>
#include <ummunot/user_area.h>

int main(void)
{
	struct ummunot_monitor_attr attr = { .device_path = "/nonexistent/ummunot" };
	struct ummunot_monitor *m = NULL;
	struct ummunot_user_area ua = { .magic = UMMUNOT_USER_AREA_MAGIC };
	int ret = ummunot_monitor_open(&attr, &m);

	if (ret != -ENOENT) {
		fprintf(stderr, "ummunot_monitor_open: expected %d, got %d\n", -ENOENT, ret);
		return 1;
	}
	if (sizeof(ua) != UMMUNOT_RING_USER_AREA_SIZE || ua.version != 0) {
		fprintf(stderr, "struct ummunot_user_area: unexpected layout\n");
		return 1;
	}
	printf("consumer: ummunot_monitor_open -> -ENOENT as expected\n");
	return 0;
}
