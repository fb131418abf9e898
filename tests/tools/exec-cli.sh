#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ummunot-exec on the host, where there is no /dev/ummunot: each mode's
# answer to "activation is impossible" (the guest's tests/install checks
# the same with the module), usage errors, a mode it does not know.
# Usage: exec-cli.sh UMMUNOT_EXEC
set -u
x=$1
fails=0
t() {	# NAME WANT_RC WANT_OUT_REGEX -- COMMAND...
	local name=$1 want=$2 pat=$3 out rc; shift 4
	out=$("$@" 2>&1); rc=$?
	if [ "$rc" != "$want" ] || ! grep -qE -- "$pat" <<<"$out"; then
		echo "FAIL: $name: exit $rc (want $want), output: $out"
		fails=$((fails + 1))
	else
		echo "ok: $name"
	fi
}
[ -e /dev/ummunot ] && { echo "SKIP: this host has /dev/ummunot; the test needs a host without it"; exit 77; }

t "require refuses"  126 "refusing to start true unprotected \(mode require\): cannot open /dev/ummunot" -- env UMMUNOT=require "$x" true
t "on runs, says why" 0  "true runs without ummunot, on its stack's own memory hooks" -- env UMMUNOT=on "$x" true
t "on keeps the status" 3 "runs without ummunot" -- env UMMUNOT=on "$x" sh -c 'exit 3'
t "on leaves LD_PRELOAD" 0 "^preload=\[\]$" -- env UMMUNOT=on LD_PRELOAD= "$x" sh -c 'echo "preload=[$LD_PRELOAD]"'
t "off runs unchanged" 0 "^ran$" -- env UMMUNOT=off "$x" echo ran
t "a typo is refused" 126 "UMMUNOT='requre': expected on, require or off" -- env UMMUNOT=requre "$x" true
t "--check, require" 126 "not protected: cannot open /dev/ummunot" -- env UMMUNOT=require "$x" --check
t "--check, on" 1 "not protected" -- env UMMUNOT=on "$x" --check
t "--check, off" 0 "mode off" -- env UMMUNOT=off "$x" --check
t "no program" 2 "usage" -- "$x"
t "unknown option" 2 "unknown option --bogus" -- "$x" --bogus
t "-- then program" 0 "^ran$" -- env UMMUNOT=off "$x" -- echo ran
t "not executable" 127 "cannot run /nonexistent" -- env UMMUNOT=off "$x" /nonexistent
t "--version" 0 "^ummunot-exec [0-9]" -- "$x" --version
[ $fails -eq 0 ] || exit 1
