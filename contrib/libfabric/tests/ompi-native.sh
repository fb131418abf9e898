#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Open MPI over mtl ofi (verbs;ofi_rxm on rxe0) on a libfabric with the
# native ummunot monitor, no preload, Open MPI's patcher off: every way of
# reusing an address must come out right, and the monitor must have started
# in both ranks.  The negative control imports a monitor that is never told
# anything (tests/ofi/null-monitor-preload.c, built against PREFIX by
# scripts/ofi-matrix) into the same libfabric: the transfers must go wrong.  Run in the guest, from the repository root:
#
#   scripts/vm run --kernel 6.12 --userspace 13 --out ~/.cache/ummunot-ofi -- \
#       sh contrib/libfabric/tests/ompi-native.sh \
#       ~/.cache/ummunot-ofi/v2.1.0+series/prefix build-debian13
#
# PREFIX: the patched libfabric (scripts/ofi-matrix build v2.1.0+series);
# BUILD: this tree's build directory for the guest's userspace (its
# tests/mpi/stale-buffer).  scripts/ofi-matrix runs this script in its guest
# when MPI_BUILD is set.
# Exit status 0 iff both cases met their expectation.
set -u
prefix=$1 build=$2
top=$(cd "$(dirname "$0")/../../.." && pwd)
ways=munmap,fixed,mremap,dontneed,free,syscall,syscall-mremap
failures=0
out=$(mktemp)

job() {	# NAME EXPECT MPIRUN-ARG...
	name=$1 expect=$2
	shift 2
	"$top/tests/mpi/mpirun-2" --mca pml cm --mca mtl ofi \
		--mca mtl_ofi_provider_include 'verbs;ofi_rxm' --mca memory ^patcher \
		-x LD_LIBRARY_PATH="$prefix/lib" -x FI_LOG_LEVEL=info "$@" -- \
		"$build/tests/mpi/stale-buffer" --op send --reuse "$ways" --iters 3 \
		--expect "$expect" >"$out" 2>&1
	rc=$?
	pairs=$(grep -c 'stale-buffer: op=' "$out")
	ok=$(grep -o 'stale-buffer: op=.*: ok [0-9]*' "$out" | awk '{s += $NF} END {print s + 0}')
	started=$(grep -c 'ummunot memory monitor started' "$out")
	stats=$(grep -o 'MR cache stats: .*' "$out" | head -1)
	verdict=FAIL
	if [ "$expect" = clean ]; then
		[ "$rc" -eq 0 ] && [ "$pairs" -eq 7 ] && [ "$ok" -eq 21 ] && [ "$started" -eq 2 ] && verdict=PASS
	else
		[ "$pairs" -eq 7 ] && [ "$ok" -lt 21 ] && verdict=PASS
	fi
	echo "OMPI-OFI $name expect $expect pairs $pairs ok $ok/21 monitor-started $started exit $rc verdict $verdict ($stats)"
	if [ "$verdict" = FAIL ]; then
		failures=$((failures + 1))
		tail -20 "$out" | sed 's/^/    | /'
	fi
}

job native clean -x FI_MR_CACHE_MONITOR=ummunot
job null-monitor stale -x LD_PRELOAD="$prefix/lib/libnull-monitor-preload.so"
rm -f "$out"
if dmesg | grep -E 'BUG|WARNING|Oops|lockdep'; then
	failures=$((failures + 1))
fi
echo "OMPI-OFI cases failed: $failures"
[ "$failures" -eq 0 ]
