#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Install the build into a staging directory (meson install --destdir) and
# check what an administrator and a consumer get: the tool, its man pages,
# the headers, and a C program built against the installed pkg-config file
# (libummunot.pc) that includes <ummunot/ummunot.h> and
# <ummunot/user_area.h> and links and runs against the installed library.
# Usage: stat-install.sh BUILD_DIR TESTS_TOOLS_SOURCE_DIR
set -u
bd=$1 src=$2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# man(1) as a reader runs it; where man-db is absent (a minimal root) the
# groff run it would make, with every warning on (as tests/docs does).
render_man() {
	if command -v man >/dev/null; then
		man --warnings -l "$1" >/dev/null
	else
		groff -man -ww -z "$1"
	fi
}

meson install -C "$bd" --no-rebuild --quiet --destdir "$stage" >"$stage/install.log" 2>&1 ||
	fail "meson install: $(cat "$stage/install.log")"
prefix=$(meson introspect "$bd" --buildoptions |
	 python3 -c 'import json, sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
root=$stage$prefix

[ -x "$root/bin/ummunot-stat" ] || fail "no $prefix/bin/ummunot-stat"
"$root/bin/ummunot-stat" --version | grep -q '^ummunot-stat ' || fail "installed ummunot-stat --version"
for m in man1/ummunot-stat.1 man4/ummunot.4 man7/ummunot.7; do
	[ -f "$root/share/man/$m" ] || fail "no $prefix/share/man/$m"
	render_man "$root/share/man/$m" 2>"$stage/man.err" ||
		fail "man $m: $(cat "$stage/man.err")"
	[ -s "$stage/man.err" ] && fail "man $m warns: $(cat "$stage/man.err")"
done
[ -f "$root/include/ummunot/user_area.h" ] || fail "no $prefix/include/ummunot/user_area.h"

pc=$(find "$root" -name libummunot.pc | head -n 1)
if [ -z "$pc" ]; then
	echo "SKIP: the build installs no libummunot.pc (library not built?)"
	exit 77
fi
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$stage
cflags=$(pkg-config --cflags libummunot) || fail "pkg-config --cflags libummunot"
libs=$(pkg-config --libs libummunot) || fail "pkg-config --libs libummunot"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror $cflags -o "$stage/consumer" "$src/install-consumer.c" $libs \
	>"$stage/cc.log" 2>&1 || fail "building the consumer: $(cat "$stage/cc.log")"
LD_LIBRARY_PATH=$(dirname "$(dirname "$pc")") "$stage/consumer" || fail "the consumer failed"
echo "PASS"
