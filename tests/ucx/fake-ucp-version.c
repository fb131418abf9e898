// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Test-only libucp.so.0 for the version-gate rows (tests/ucx/meson.build,
 * adapter-refuses-*): makes ucp_get_version() say UCX 1.99, not a
 * release libummunot-ucx was tested with.  Copied as libucp.so.0 beside a
 * link to the system's libucs.so.0 (adapter-lines.sh): the adapter asks the
 * libucp beside each libucs for its release.  Never install it.
 */
void ucp_get_version(unsigned *major_version, unsigned *minor_version,
		     unsigned *release_number);

__attribute__((visibility("default")))
void ucp_get_version(unsigned *major_version, unsigned *minor_version,
		     unsigned *release_number)
{
	*major_version = 1;
	*minor_version = 99;
	*release_number = 0;
}
