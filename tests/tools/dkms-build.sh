#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Build the module with Debian's dkms from a copy of the source tree laid
# out as a DKMS package (dkms.conf, kmod/, include/uapi/), against kernel
# headers given by KDIR (default: the 6.1 headers scripts/vm extracted into
# ~/.cache/ummunot-vm), with a private --dkmstree, --sourcetree and
# --installtree so that /var/lib/dkms, /usr/src and /lib/modules are not
# touched.  Skips (77) when dkms or the headers are missing.
# Usage: dkms-build.sh SOURCE_ROOT [KDIR]
set -u
src=$1
cache=${UMMUNOT_VM_CACHE:-${HOME:-/root}/.cache/ummunot-vm}
kver=
if [ $# -ge 2 ]; then
	kdir=$2
else
	kver=$(readlink "$cache/current/6.1" 2>/dev/null) || kver=
	kdir=$cache/$kver/root/usr/src/linux-headers-$kver
fi
command -v dkms >/dev/null || { echo "SKIP: dkms is not installed (apt-get install dkms)"; exit 77; }
[ -f "$kdir/Makefile" ] || { echo "SKIP: no kernel headers at $kdir (scripts/vm fetch 6.1)"; exit 77; }
[ -n "$kver" ] || kver=$(make -s -C "$kdir" kernelrelease 2>/dev/null)
[ -n "$kver" ] || { echo "FAIL: cannot tell the kernel release of $kdir"; exit 1; }
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$src/dkms.conf")
[ -n "$version" ] || { echo "FAIL: no PACKAGE_VERSION in dkms.conf"; exit 1; }

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
pkg=$t/src/ummunot-$version
mkdir -p "$pkg/include" "$t/tree" "$t/install"
cp "$src/dkms.conf" "$pkg/"
cp -r "$src/kmod" "$pkg/kmod"
cp -r "$src/include/uapi" "$pkg/include/uapi"
if ! dkms build "ummunot/$version" -k "$kver" --kernelsourcedir "$kdir" \
	--dkmstree "$t/tree" --sourcetree "$t/src" --installtree "$t/install" >"$t/dkms.log" 2>&1; then
	cat "$t/dkms.log"
	find "$t/tree" -name make.log -exec cat {} +
	echo "FAIL: dkms build"
	exit 1
fi
ko=$t/tree/ummunot/$version/$kver/x86_64/module/ummunot.ko
[ -f "$ko" ] || ko=$(find "$t/tree" -name 'ummunot.ko*' | head -n 1)
[ -n "$ko" ] && [ -f "$ko" ] || { cat "$t/dkms.log"; echo "FAIL: dkms built no ummunot.ko"; exit 1; }
modinfo -F vermagic "$ko" | grep -q "^$kver " || { echo "FAIL: $ko vermagic: $(modinfo -F vermagic "$ko")"; exit 1; }
echo "PASS: dkms built $(basename "$ko") for $kver ($(modinfo -F version "$ko"))"
