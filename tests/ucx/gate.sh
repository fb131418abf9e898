#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libummunot-ucx's gate against a fake UCX (tests/ucx/fake-ucs.c) in DIR.
# Usage: gate.sh ADAPTER GATE-DRIVER DIR accepted|refused
#   refused   (the fake linked with -Bsymbolic-functions) exactly one line
#             "libummunot-ucx: not feeding UCX 1.18 at DIR/libucs.so.0: ...
#             (libucs linked with -Bsymbolic?) ..." at the first cache, and
#             the driver sees refused 1
#   accepted  (linked normally) no "not feeding" line; the driver sees the
#             copy accepted (then active with /dev/ummunot, passive
#             without: the fake has no real memory events to give)
set -u
adapter=$1 prog=$2 dir=$3 want=$4
err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$err"; exit 1; }
echo "+ LD_PRELOAD=$adapter $prog $dir $want"
LD_PRELOAD="$adapter" "$prog" "$dir" "$want" 2>"$err" || fail "gate-driver failed"
n=$(grep -c "^libummunot-ucx: not feeding UCX 1\.18 at $dir/libucs\.so\.0: its own calls to ucs_pgtable_init() do not reach this adapter (libucs linked with -Bsymbolic?); every call to it goes to UCX unchanged\$" "$err")
case $want in
refused) [ "$n" -eq 1 ] || fail "expected one -Bsymbolic refusal line, found $n" ;;
accepted) [ "$(grep -c '^libummunot-ucx: not feeding' "$err")" -eq 0 ] || fail "the gate refused a normally linked UCX" ;;
*) echo "usage: gate.sh ADAPTER DRIVER DIR accepted|refused" >&2; exit 2 ;;
esac
grep '^libummunot-ucx:' "$err"
echo PASS
