#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libummunot.so has no thread-local storage of its own: an MPI component
# that dlopen()s it needs no static TLS block (no PT_TLS segment, no
# DF_STATIC_TLS flag, no TLS symbol).
set -eu
so="$1"
if readelf -lW "$so" | grep -q '^ *TLS '; then
	echo "$so has a PT_TLS segment:"; readelf -lW "$so" | grep '^ *TLS '
	exit 1
fi
if readelf -dW "$so" | grep -q 'STATIC_TLS'; then
	echo "$so is marked DF_STATIC_TLS"
	exit 1
fi
n=$(readelf -sW "$so" | awk '$4 == "TLS"' | wc -l)
[ "$n" -eq 0 ] || { echo "$so has $n TLS symbols"; exit 1; }
echo "ok: no TLS in $so"
