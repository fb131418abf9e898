# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Shared by the VM tests of ummunot-stat (sourced, bash).  Provides: STAT and
# CLIENT (paths of the programs), fail, check_eq, start_client,
# stop_clients, json_get, reload_module, and an EXIT trap that stops the
# clients and loads the module again if a test left it unloaded.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=/dev/null
. "$here/vm-paths.sh"
prog=${0##*/}
work=$(mktemp -d /tmp/ustat.XXXXXX)
CLIENT_PIDS=()

fail() { echo "FAIL $prog: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }

check_eq() {	# check_eq WHAT EXPECTED GOT
	[ "$2" = "$3" ] || fail "$1: expected '$2', got '$3'"
	echo "ok: $1 = $3"
}

ensure_module() {
	[ -d /sys/class/misc/ummunot ] && return 0
	[ -n "${UMMUNOT_KO:-}" ] || return 1
	insmod "$UMMUNOT_KO"
}

stop_clients() {
	local p
	for p in "${CLIENT_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	CLIENT_PIDS=()
}

on_exit() {
	local rc=$?
	stop_clients
	ensure_module || { echo "$prog: could not load the module again" >&2; rc=1; }
	rm -rf "$work"
	exit $rc
}
trap on_exit EXIT

# start_client NAME ARGS...: runs ustat-client in the background, waits for
# it to be ready; sets CPID.
start_client() {
	local name=$1; shift
	local ready=$work/$name.ready i
	"$CLIENT" --ready "$ready" "$@" >"$work/$name.log" 2>&1 &
	CPID=$!
	CLIENT_PIDS+=("$CPID")
	for i in $(seq 1 300); do
		[ -s "$ready" ] && return 0
		if ! kill -0 "$CPID" 2>/dev/null; then
			cat "$work/$name.log" >&2
			fail "client $name ($*) exited before it was ready"
		fi
		sleep 0.1
	done
	fail "client $name not ready after 30 s"
}

# json_get FILE EXPR: evaluates the Python expression EXPR over the JSON
# object in FILE (bound to j), prints the result (JSON for lists/dicts/None).
json_get() {
	python3 -c '
import json, sys
with open(sys.argv[1]) as f:
    lines = [l for l in f.read().splitlines() if l.strip()]
if len(lines) != 1:
    sys.exit("expected one JSON object, got %d lines" % len(lines))
j = json.loads(lines[0])
v = eval(sys.argv[2], {"j": j})
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)
' "$1" "$2" || fail "json_get $2 over $1"
}

# reload_module: rmmod and insmod $UMMUNOT_KO (fresh counters).
reload_module() {
	[ -n "${UMMUNOT_KO:-}" ] || skip "UMMUNOT_KO is not set: cannot reload the module"
	rmmod ummunot || fail "rmmod ummunot"
	insmod "$UMMUNOT_KO" || fail "insmod $UMMUNOT_KO"
}
