#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Two whole fake UCX stacks in one process (tests/ucx/two-copies.c): copy 1
# is FAKE-DIR as built; copy 2 is a copy of it whose libucs is renamed
# (soname libucs-two.so.0, libucp's DT_NEEDED changed to it, RUNPATH
# $ORIGIN), as a wheel or a vendor plugin ships UCX.
# Usage: two-copies.sh ADAPTER DRIVER FAKE-DIR host|device
#   device: also exactly one adapter line saying copy 2 is not fed because
#           copy 1 is
set -u
adapter=$1 prog=$2 fake=$3 mode=$4
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; [ -f "$dir/err" ] && { echo "--- stderr:"; cat "$dir/err"; }; exit 1; }
command -v patchelf >/dev/null || fail "patchelf is not installed (scripts/deps.txt)"
cp "$fake/libucs.so.0" "$dir/libucs-two.so.0" && cp "$fake/libucp.so.0" "$dir/libucp.so.0" ||
	fail "cannot copy the fake UCX"
patchelf --set-soname libucs-two.so.0 "$dir/libucs-two.so.0" &&
	patchelf --replace-needed libucs.so.0 libucs-two.so.0 "$dir/libucp.so.0" &&
	patchelf --set-rpath '$ORIGIN' "$dir/libucp.so.0" || fail "patchelf failed"
echo "+ LD_PRELOAD=$adapter $prog $fake $dir $mode"
LD_PRELOAD="$adapter" "$prog" "$fake" "$dir" "$mode" 2>"$dir/err" || fail "two-copies failed"
if [ "$mode" = device ]; then
	n=$(grep -c "^libummunot-ucx: not feeding UCX 1\.18 at $dir/libucs-two\.so\.0: a second UCX copy in this process (the first one is fed)" "$dir/err")
	[ "$n" -eq 1 ] || fail "expected one line saying copy 2 is not fed, found $n"
fi
grep '^libummunot-ucx:' "$dir/err"
echo PASS
