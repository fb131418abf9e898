#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ummunot-stat's command line on the host, against the fixture trees
# (--root): global text and JSON values, exit statuses for usage errors,
# a module that is not loaded, and a -p PID that does not exist.
# Usage: stat-host-cli.sh PATH/TO/ummunot-stat FIXTURES_DIR
set -u
stat=$1 fx=$2
loaded=$fx/root-loaded unloaded=$fx/root-unloaded
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

run() {	# run WANT_RC ARGS...
	local want=$1 rc=0; shift
	"$stat" "$@" >"$out" 2>"$err" || rc=$?
	[ "$rc" = "$want" ] || fail "ummunot-stat $*: exit $rc, expected $want: $(cat "$err")"
}

run 0 --help
grep -q -- '--watch SECONDS' "$out" || fail "--help lacks --watch"
run 0 --version
grep -qx 'ummunot-stat [0-9.]*' "$out" || fail "--version: $(cat "$out")"
run 2 --bogus
run 2 -p 0
run 2 -p abc
run 2 --watch -1
run 2 --count 0
run 2 extra-argument
run 3 --root "$unloaded"
grep -q 'module is not loaded' "$err" || fail "not loaded: $(cat "$err")"
run 3 --root "$unloaded" --clients --json
run 5 --root "$loaded" -p 1
grep -q 'does not exist' "$err" || fail "-p 1 in an empty /proc: $(cat "$err")"

run 0 --root "$loaded"
grep -qx 'ummunot module 0.1.0' "$out" || fail "text: version line: $(head -n 1 "$out")"
grep -qx 'parameters:      max_regions=131072 max_ring_entries=262144 default_ring_entries=4096' "$out" ||
	fail "text: parameters line"
grep -qx 'clients:         2' "$out" || fail "text: clients"
grep -qx 'overflows:       1 (6 events dropped)' "$out" || fail "text: overflows"
[ "$(awk '$1 == "other" { print $2, $3 }' "$out")" = "99 900" ] || fail "text: other row"

run 0 --root "$loaded" --users
grep -qx 'limits:          max_user_memory=82497536 max_regions_per_mm=131072' "$out" ||
	fail "--users: limits line: $(head -n 1 "$out")"
[ "$(awk '$1 == "65534" { print $2, $3, $4, $5 }' "$out")" = "1048568 1.3 7649 1" ] ||
	fail "--users: uid 65534 row: $(cat "$out")"
[ "$(awk '$6 == "4026532290" { print $1, $2, $4, $5 }' "$out")" = "0 41216 40 1" ] ||
	fail "--users: a container's budget (userns 4026532290): $(cat "$out")"
[ "$(awk '$1 == "65534" { print $6 }' "$out")" = "-" ] ||
	fail "--users: a user's budget shows no userns: $(cat "$out")"
run 2 --root "$loaded" --users --json
run 2 --root "$loaded" --users --clients
run 3 --root "$unloaded" --users

run 0 --root "$loaded" --json
python3 - "$out" <<'PY' || fail "JSON values"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
j = json.loads(lines[0])
assert j["schema"] == 1
assert j["module"] == {"version": "0.1.0", "parameters": {"max_regions": 131072, "max_ring_entries": 262144, "default_ring_entries": 4096}}, j["module"]
g = j["global"]
assert (g["clients"], g["regions"], g["regions_registered"], g["events"], g["dropped"], g["overflows"], g["ring_high_water"]) == (2, 85, 87, 67, 6, 1, 64), g
names = ["unmap", "clear", "protection_vma", "protection_page", "soft_dirty", "release", "migrate", "exclusive", "other"]
assert list(g["delivered"]) == names, list(g["delivered"])
assert [g["delivered"][n] for n in names] == [11 * i for i in range(1, 10)]
assert [g["filtered"][n] for n in names] == [100 * i for i in range(1, 10)]
assert j["rates"] is None and j["interval"] is None and "clients" not in j
PY

run 0 --root "$loaded" --clients --json
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["clients"] == [] and j["denied_pids"] == [], j' "$out" ||
	fail "--clients --json over an empty /proc"

run 0 --root "$loaded" --json --count 2 --watch 0.05
[ "$(wc -l <"$out")" = 2 ] || fail "--count 2: $(wc -l <"$out") lines"
python3 -c '
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
assert s[0]["rates"] is None
assert s[1]["interval"] > 0 and s[1]["rates"]["events"] == 0, s[1]
' "$out" || fail "--watch JSON rates"
echo "PASS"
