// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libummunot-ofi-preload.so: activates libummunot-ofi in an unmodified
 * program.  Preloaded (LD_PRELOAD, or mpirun -x LD_PRELOAD=...), its
 * constructor imports the ummunot monitor into libfabric before the
 * program opens a domain.  If that fails it says why on stderr and the
 * program runs on with libfabric's own monitor - unless UMMUNOT_REQUIRE=1
 * (fail-closed, set by ummunot-exec in mode require): then the process
 * exits with status 126 after that line.
 *
 * Environment: UMMUNOT_OFI=0 leaves libfabric alone; UMMUNOT_OFI_VERBOSE=1
 * or UMMUNOT_VERBOSE=1 says "active" at start, the former also prints the
 * counters at exit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ummunot/ofi.h>

static int verbose;

static int env_on(const char *name)
{
	const char *e = getenv(name);

	return e && *e && strcmp(e, "0");
}

static void report(void)
{
	struct ummunot_ofi_stats st;

	if (ummunot_ofi_stats(&st, sizeof(st)) < 0)
		return;
	fprintf(stderr,
		"libummunot-ofi[%d]: subscribes %llu (refused %llu), unsubscribes %llu, "
		"valid() slow %llu, invalid %llu, events %llu, overflows %llu, forks %llu, "
		"collections %llu, regions %llu, invalidated %llu\n",
		(int)getpid(),
		(unsigned long long)st.subscribes, (unsigned long long)st.subscribe_errors,
		(unsigned long long)st.unsubscribes, (unsigned long long)st.valid_slow,
		(unsigned long long)st.invalid, (unsigned long long)st.events,
		(unsigned long long)st.overflows, (unsigned long long)st.forks,
		(unsigned long long)st.collections, (unsigned long long)st.regions,
		(unsigned long long)st.invalidated);
}

__attribute__((constructor)) static void ummunot_ofi_preload(void)
{
	const char *on = getenv("UMMUNOT_OFI");
	int require = env_on("UMMUNOT_REQUIRE");
	int r;

	verbose = env_on("UMMUNOT_OFI_VERBOSE");
	if (on && !strcmp(on, "0"))
		return;
	r = ummunot_ofi_import(0);
	if (r == 0) {
		if (verbose || env_on("UMMUNOT_VERBOSE"))
			fprintf(stderr, "libummunot-ofi[%d]: active: libfabric's MR cache monitor is ummunot\n",
				(int)getpid());
		if (verbose)
			atexit(report);
		return;
	}
	if (r == -EALREADY)
		return;
	fprintf(stderr, "libummunot-ofi[%d]: %s: %s\n", (int)getpid(),
		require ? "not active and UMMUNOT_REQUIRE is set, exiting" :
			  "not active, libfabric keeps its own memory monitor",
		r == -ENOTSUP ? "FI_MR_CACHE_MONITOR is set" :
		r == -EBUSY ? "libfabric already has an imported monitor or an open domain" :
		r == -ENOSYS ? "this libfabric cannot import a monitor (older than 1.13)" :
		r == -ENOENT ? "no /dev/ummunot (module not loaded)" :
		strerror(-r));
	if (require)
		_exit(126);
}
