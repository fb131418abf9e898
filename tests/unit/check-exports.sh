#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# libummunot.so exports exactly the C API functions declared in the public
# header: those of 0.1 at version UMMUNOT_0.1 (unchanged since its
# release), those of 0.2 at UMMUNOT_0.2, every later one at UMMUNOT_0.3;
# and has the soname libummunot.so.0.
set -eu
so="$1"
hdr="$2"
v01="ummunot_cache_create ummunot_cache_create_backend ummunot_cache_destroy
ummunot_cache_flush ummunot_cache_get ummunot_cache_monitor ummunot_cache_poll
ummunot_cache_put ummunot_cache_stats ummunot_monitor_changed ummunot_monitor_close
ummunot_monitor_fd ummunot_monitor_open ummunot_monitor_query ummunot_monitor_read
ummunot_monitor_rearm ummunot_monitor_register ummunot_monitor_resync
ummunot_monitor_set_filter ummunot_monitor_stats ummunot_monitor_unregister"
v02="ummunot_budget_create ummunot_budget_destroy ummunot_cache_create_ops
ummunot_cache_create_verbs ummunot_cache_fd ummunot_cache_invalidate
ummunot_cache_stats_ext ummunot_monitor_query_ext ummunot_reg_priv"
want=$(grep -oE '^(int|void|struct ummunot_monitor \*|void \*)[ *]*ummunot_[a-z_]+\(' "$hdr" |
	grep -oE 'ummunot_[a-z_]+\($' | tr -d '(' | sort)
syms=$(nm -D --defined-only "$so" | awk '$3 != "UMMUNOT_0.1" && $3 != "UMMUNOT_0.2" && $3 != "UMMUNOT_0.3" {print $3}')
fail=0
for s in $syms; do
	name=${s%%@*}
	ver=${s##*@}
	if echo "$v01" | tr ' ' '\n' | grep -qx "$name"; then
		expect=UMMUNOT_0.1
	elif echo "$v02" | tr ' ' '\n' | grep -qx "$name"; then
		expect=UMMUNOT_0.2
	else
		expect=UMMUNOT_0.3
	fi
	if [ "$ver" != "$expect" ]; then
		echo "$name is at '$ver', expected $expect"
		fail=1
	fi
done
have=$(for s in $syms; do echo "${s%%@*}"; done | sort)
if [ "$want" != "$have" ]; then
	echo "exports differ from the header:"
	echo "header:"; echo "$want"
	echo "library:"; echo "$have"
	exit 1
fi
[ $fail -eq 0 ] || exit 1
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libummunot.so.0 ] || { echo "soname is '$soname'"; exit 1; }
echo "ok: $(echo "$have" | wc -l) symbols, soname $soname"
