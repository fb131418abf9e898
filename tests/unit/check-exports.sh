#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libummunot.so exports exactly the C API functions declared in the public
# header, all at version UMMUNOT_0.1, and has the soname libummunot.so.0.
set -eu
so="$1"
hdr="$2"
want=$(grep -oE '^(int|void|struct ummunot_monitor \*)[ *]*ummunot_[a-z_]+\(' "$hdr" |
	grep -oE 'ummunot_[a-z_]+\($' | tr -d '(' | sort)
have=$(nm -D --defined-only "$so" | awk '$3 != "UMMUNOT_0.1" {print $3}' | sort)
bad=$(nm -D --defined-only "$so" | awk '$3 != "UMMUNOT_0.1" {print $3}' | grep -v '@@UMMUNOT_0.1$' || true)
if [ -n "$bad" ]; then
	echo "symbols outside UMMUNOT_0.1: $bad"
	exit 1
fi
have=$(echo "$have" | sed 's/@@UMMUNOT_0.1$//')
if [ "$want" != "$have" ]; then
	echo "exports differ from the header:"
	echo "header:"; echo "$want"
	echo "library:"; echo "$have"
	exit 1
fi
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libummunot.so.0 ] || { echo "soname is '$soname'"; exit 1; }
echo "ok: $(echo "$have" | wc -l) symbols, soname $soname"
