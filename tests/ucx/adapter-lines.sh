#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# What libummunot-ucx says on stderr, checked around tests/ucx/adapter-host.
# Usage: adapter-lines.sh refused|verbose ADAPTER FAKE-LIBUCP ADAPTER-HOST
#   refused  adapter-host loads the system's libucs through a directory
#            (LD_LIBRARY_PATH) whose libucp.so.0 is FAKE-LIBUCP, whose
#            ucp_get_version() says 1.99: exactly one line "libummunot-ucx:
#            not feeding UCX 1.99 at DIR/libucs.so.0: not a release this
#            adapter was tested with (tested: ...); every call to it goes to
#            UCX unchanged" and adapter-host --expect-refused passes (with or
#            without /dev/ummunot)
#   verbose  (needs /dev/ummunot) UMMUNOT_UCX_VERBOSE=1: exactly one
#            "libummunot-ucx: active: UCX X.Y" line; without it: no line
#            at all from the adapter (quiet by default)
set -u
mode=$1 adapter=$2 fake=$3 prog=$4
err=$(mktemp) || exit 1
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$err" "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat "$err"; exit 1; }

case $mode in
refused)
	ucs=$(ldd "$prog" | sed -n 's/^[[:space:]]*libucs\.so\.0 => \([^ ]*\) .*/\1/p')
	[ -n "$ucs" ] || fail "adapter-host is not linked with libucs.so.0"
	ln -s "$ucs" "$dir/libucs.so.0"
	cp "$fake" "$dir/libucp.so.0"
	echo "+ LD_LIBRARY_PATH=$dir LD_PRELOAD=$adapter $prog --expect-refused"
	LD_LIBRARY_PATH="$dir" LD_PRELOAD="$adapter" "$prog" --expect-refused 2>"$err" ||
		fail "adapter-host failed"
	n=$(grep -c "^libummunot-ucx: not feeding UCX 1\\.99 at $dir/libucs\\.so\\.0: not a release this adapter was tested with (tested: [0-9. ]*); every call to it goes to UCX unchanged\$" "$err")
	[ "$n" -eq 1 ] || fail "expected one refusal line naming 1.99, found $n"
	[ "$(grep -c '^libummunot-ucx:' "$err")" -eq 1 ] || fail "the adapter printed more than its refusal"
	grep '^libummunot-ucx:' "$err"
	;;
verbose)
	[ -e /dev/ummunot ] || { echo "SKIP: no /dev/ummunot (run under scripts/vm)"; exit 77; }
	echo "+ UMMUNOT_UCX_VERBOSE=1 LD_PRELOAD=$adapter $prog"
	UMMUNOT_UCX_VERBOSE=1 LD_PRELOAD="$adapter" "$prog" 2>"$err" || fail "adapter-host failed"
	n=$(grep -c '^libummunot-ucx: active: UCX [0-9]*\.[0-9]* at /[^ ]*libucs\.so\.0, pid [0-9]*$' "$err")
	[ "$n" -eq 1 ] || fail "expected one 'active' line with UMMUNOT_UCX_VERBOSE=1, found $n"
	grep '^libummunot-ucx:' "$err"
	echo "+ LD_PRELOAD=$adapter $prog"
	LD_PRELOAD="$adapter" "$prog" 2>"$err" || fail "adapter-host failed"
	[ "$(grep -c '^libummunot-ucx:' "$err")" -eq 0 ] || fail "the adapter is not quiet by default"
	;;
*)
	echo "usage: adapter-lines.sh refused|verbose ADAPTER FAKE ADAPTER-HOST" >&2
	exit 2
	;;
esac
echo PASS
