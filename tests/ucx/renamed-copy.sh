#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libummunot-ucx in a process with a renamed copy of libucs
# (tests/ucx/ucx-copy.c says why).  The copy is the system's libucs.so.0
# with its soname changed by patchelf.
# Usage: renamed-copy.sh ADAPTER UCX-COPY LIBUCS
set -u
adapter=$1 prog=$2 libucs=$3
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
command -v patchelf >/dev/null || { echo "FAIL: patchelf is not installed (scripts/deps.txt)"; exit 1; }
cp "$libucs" "$dir/libucs-renamed.so.0"
patchelf --set-soname libucs-renamed.so.0 "$dir/libucs-renamed.so.0" || exit 1
echo "+ LD_PRELOAD=$adapter $prog $dir/libucs-renamed.so.0"
LD_PRELOAD="$adapter" "$prog" "$dir/libucs-renamed.so.0"
rc=$?
[ $rc -eq 0 ] || echo "FAIL: exit status $rc"
exit $rc
