#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Install the build into a staging directory and check what a consumer of
# libummunot-ofi gets: the header, the man page (no groff warnings), the
# pkg-config file, a program built from it that calls ummunot_ofi_import()
# and ummunot_ofi_stats(), and the preload library (exports nothing, has a
# constructor, and says why it is not active where there is no module).
# Usage: ofi-install.sh BUILD_DIR
set -u
bd=$1
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

[ -f "$root/include/ummunot/ofi.h" ] || fail "no $prefix/include/ummunot/ofi.h"
m=$root/share/man/man3/ummunot_ofi_import.3
[ -f "$m" ] || fail "no $prefix/share/man/man3/ummunot_ofi_import.3"
render_man "$m" 2>"$stage/man.err" || fail "man: $(cat "$stage/man.err")"
[ -s "$stage/man.err" ] && fail "man warns: $(cat "$stage/man.err")"

pc=$(find "$root" -name libummunot-ofi.pc | head -n 1)
[ -n "$pc" ] || fail "no libummunot-ofi.pc installed"
pre=$(find "$root" -name libummunot-ofi-preload.so | head -n 1)
[ -n "$pre" ] || fail "no libummunot-ofi-preload.so installed"
libdir=${pc%/pkgconfig/*}
export PKG_CONFIG_PATH=${pc%/*} PKG_CONFIG_SYSROOT_DIR=$stage
cflags=$(pkg-config --cflags libummunot-ofi) || fail "pkg-config --cflags libummunot-ofi"
libs=$(pkg-config --libs libummunot-ofi) || fail "pkg-config --libs libummunot-ofi"
cat >"$stage/c.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <ummunot/ofi.h>
int main(void)
{
	struct ummunot_ofi_stats st;
	int r = ummunot_ofi_import(1);

	if (r != -EINVAL) { printf("import(1): %d, want -EINVAL\n", r); return 1; }
	if (ummunot_ofi_stats(&st, sizeof(st)) != -ENOENT) { printf("stats before import\n"); return 1; }
	r = ummunot_ofi_import(0);
	if (access("/dev/ummunot", F_OK) && r != -ENOENT) {
		printf("import without /dev/ummunot: %d (%s), want -ENOENT\n", r, strerror(-r));
		return 1;
	}
	return 0;
}
C
# shellcheck disable=SC2086  # (staged: the linker finds libummunot.so.0 only with -rpath-link)
cc -std=c11 -Wall -Wextra -Werror $cflags -o "$stage/consumer" "$stage/c.c" $libs -Wl,-rpath-link,"$libdir" \
	>"$stage/cc.log" 2>&1 || fail "building the consumer: $(cat "$stage/cc.log")"
LD_LIBRARY_PATH=$libdir "$stage/consumer" || fail "the consumer failed"

exports=$(nm -D --defined-only "$pre" | awk '$2 ~ /^[TDBR]$/ { print $3 }')
[ -z "$exports" ] || fail "the preload library exports symbols: $exports"
if [ ! -e /dev/ummunot ]; then
	out=$(LD_LIBRARY_PATH=$libdir LD_PRELOAD=$pre /bin/true 2>&1)
	case "$out" in
	*"not active"*"no /dev/ummunot"*) ;;
	*) fail "preloaded without a module, expected a 'not active ... no /dev/ummunot' line, got: $out" ;;
	esac
	out=$(UMMUNOT_OFI=0 LD_LIBRARY_PATH=$libdir LD_PRELOAD=$pre /bin/true 2>&1)
	[ -z "$out" ] || fail "UMMUNOT_OFI=0 still printed: $out"
	# Preloaded by full path with libummunot*.so.0 outside the loader's
	# path (no LD_LIBRARY_PATH): its RUNPATH finds them.
	out=$(LD_PRELOAD=$pre /bin/true 2>&1)
	case "$out" in
	*"cannot be preloaded"*|*"cannot open shared object"*) fail "full-path preload without LD_LIBRARY_PATH: $out" ;;
	*"not active"*) ;;
	*) fail "full-path preload without LD_LIBRARY_PATH, expected a 'not active' line, got: $out" ;;
	esac
	# Fail-closed: UMMUNOT_REQUIRE=1 turns that line into exit status 126.
	out=$(UMMUNOT_REQUIRE=1 LD_PRELOAD=$pre /bin/true 2>&1); rc=$?
	[ $rc -eq 126 ] || fail "UMMUNOT_REQUIRE=1 without a module: exit $rc, want 126 ($out)"
	case "$out" in
	*"not active and UMMUNOT_REQUIRE is set, exiting"*) ;;
	*) fail "UMMUNOT_REQUIRE=1 without a module printed: $out" ;;
	esac
fi
echo "PASS"
