#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# Build ummunot.ko out of the source tree: copy kmod/ to a private directory,
# run kbuild there against KDIR, copy the module to OUTPUT.
# Usage: build-ko.sh SRCDIR KDIR WORKDIR OUTPUT
set -eu
src=$1 kdir=$2 work=$3 out=$4
mkdir -p "$work"
cp "$src"/kmod/Kbuild "$src"/kmod/Makefile "$src"/kmod/*.c "$src"/kmod/*.h "$work"/
make -s -C "$work" KDIR="$kdir" UMMUNOT_UAPI="$src/include/uapi" W=1
cp "$work"/ummunot.ko "$out"
