// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Test-only preload for the version-gate rows (tests/ucx/meson.build,
 * adapter-refuses-*): makes ucp_get_version() say UCX 1.99, a version no
 * build of libummunot-ucx was tested with.  Preloaded after the adapter;
 * the adapter asks ucp_get_version() in the process's global scope first,
 * so it sees this one.  Never install it.
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
