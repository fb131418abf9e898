#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ummunot-stat's error paths on the real module (VM only):
#   - a bad command line: exit 2;
#   - -p PID of a process without a ummunot fd, or of no process: exit 5;
#   - an unprivileged user (uid 65534) asking for root's client with -p:
#     exit 4 and a permission message; with --clients: exit 0, root's
#     client not shown, a note (and denied_pids in JSON) saying why; the
#     user's own client is shown in full; the global view works;
#   - --users: exit 4 for uid 65534, root sees both users' regions and rings;
#   - the module not loaded (rmmod): exit 3 for every view; insmod
#     $UMMUNOT_KO afterwards on every path (vm-common.sh's EXIT trap).
. "$(dirname "$0")/vm-common.sh"

[ -e /dev/ummunot ] || skip "/dev/ummunot does not exist (module not loaded by the VM rig)"
command -v python3 >/dev/null || skip "python3 is not available in the guest"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not available"
[ "$(id -u)" = 0 ] || skip "needs root (rmmod, setpriv)"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)

expect_rc() {	# expect_rc WHAT RC PATTERN CMD...: exit status and stderr
	local what=$1 want=$2 pat=$3 rc=0; shift 3
	"$@" >"$work/out" 2>"$work/err" || rc=$?
	[ "$rc" = "$want" ] || fail "$what: exit status $rc, expected $want (stderr: $(cat "$work/err"))"
	grep -q -e "$pat" "$work/err" || fail "$what: stderr lacks '$pat': $(cat "$work/err")"
	echo "ok: $what: exit $rc: $(head -n 1 "$work/err")"
}

# --- usage -------------------------------------------------------------------
expect_rc "unknown option" 2 "unknown option" "$STAT" --bogus
expect_rc "bad --watch" 2 "needs seconds" "$STAT" --watch 0
expect_rc "bad --count" 2 "whole number" "$STAT" --count x
expect_rc "stray argument" 2 "unexpected argument" "$STAT" extra

# --- -p of a non-client -------------------------------------------------------
expect_rc "-p non-client" 5 "has no /dev/ummunot file open" "$STAT" -p $$
expect_rc "-p non-client --json" 5 "has no /dev/ummunot file open" "$STAT" -p $$ --json
expect_rc "-p no such process" 5 "does not exist" "$STAT" -p 1073741823

# --- permissions ---------------------------------------------------------------
chmod 1777 "$work"
start_client root --regions 4 --munmap 1 --user-area
R=$CPID
# The unprivileged user's own client.
"${NOBODY[@]}" "$CLIENT" --ready "$work/nobody.ready" --regions 3 --munmap 2 >"$work/nobody.log" 2>&1 &
N=$!
CLIENT_PIDS+=("$N")
for i in $(seq 1 300); do [ -s "$work/nobody.ready" ] && break; sleep 0.1; done
[ -s "$work/nobody.ready" ] || fail "unprivileged client not ready: $(cat "$work/nobody.log")"

expect_rc "nobody -p root's client" 4 "permission denied" "${NOBODY[@]}" "$STAT" -p "$R"
expect_rc "nobody -p root's client --json" 4 "permission denied" "${NOBODY[@]}" "$STAT" -p "$R" --json

"${NOBODY[@]}" "$STAT" --clients >"$work/nc.txt" 2>"$work/err" ||
	fail "nobody --clients exited $?: $(cat "$work/err")"
cat "$work/nc.txt"
grep -q "^note: [0-9]* processes of other users could not be inspected (permission denied)" "$work/nc.txt" ||
	fail "nobody --clients: no permission note"
awk -v r="$R" '$1 == r { exit 1 }' "$work/nc.txt" || fail "nobody --clients shows root's client $R"
check_eq "nobody sees own client" "$N ustat-client 3 2/$(cat /sys/module/ummunot/parameters/default_ring_entries) 2" \
	"$(awk -v n="$N" '$1 == n { print $1, $2, $4, $5, $6 }' "$work/nc.txt")"

"${NOBODY[@]}" "$STAT" --clients --json >"$work/nc.json" 2>"$work/err" ||
	fail "nobody --clients --json exited $?: $(cat "$work/err")"
check_eq "nobody JSON: root's pid denied" true "$(json_get "$work/nc.json" "$R in j['denied_pids']")"
check_eq "nobody JSON: clients" "[$N]" "$(json_get "$work/nc.json" '[c["pid"] for c in j["clients"]]')"
check_eq "nobody JSON: global clients" 2 "$(json_get "$work/nc.json" 'j["global"]["clients"]')"
check_eq "nobody -p own client" 0 "$("${NOBODY[@]}" "$STAT" -p "$N" >/dev/null 2>&1; echo $?)"
check_eq "root sees both" "[$R, $N]" "$("$STAT" --clients --json >"$work/rc.json" && json_get "$work/rc.json" 'sorted(c["pid"] for c in j["clients"])')"

# Per-user use: root only; one row per user with its regions and ring.
expect_rc "nobody --users" 4 "shown to root only" "${NOBODY[@]}" "$STAT" --users
"$STAT" --users >"$work/users.txt" 2>"$work/err" || fail "--users exited $?: $(cat "$work/err")"
cat "$work/users.txt"
check_eq "--users: uid 65534 regions and rings" "3 1" \
	"$(awk '$1 == "65534" { print $4, $5 }' "$work/users.txt")"
check_eq "--users: uid 0 regions and rings" "4 1" \
	"$(awk '$1 == "0" { print $4, $5 }' "$work/users.txt")"
stop_clients

# --- module not loaded ---------------------------------------------------------
[ -n "${UMMUNOT_KO:-}" ] || skip "UMMUNOT_KO is not set: cannot test the module-not-loaded path"
rmmod ummunot || fail "rmmod ummunot"
expect_rc "not loaded" 3 "module is not loaded" "$STAT"
expect_rc "not loaded --clients" 3 "module is not loaded" "$STAT" --clients
expect_rc "not loaded --json" 3 "module is not loaded" "$STAT" --json
expect_rc "not loaded -p" 3 "module is not loaded" "$STAT" -p $$
expect_rc "not loaded --watch" 3 "module is not loaded" "$STAT" --watch 0.1 --count 2
expect_rc "not loaded --users" 3 "module is not loaded" "$STAT" --users
insmod "$UMMUNOT_KO" || fail "insmod $UMMUNOT_KO"
"$STAT" >/dev/null || fail "ummunot-stat after insmod exited $?"
echo "PASS"
