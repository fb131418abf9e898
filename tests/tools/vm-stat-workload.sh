#!/bin/bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# ummunot-stat against a known workload on the real module (VM only).
#
# The module is reloaded first so that the system-wide counters start at
# zero.  Then three clients run (tests/tools/ustat-client.c, which checks
# with UMMUNOT_IOC_GET_STATS that the kernel counted what it predicts):
#   A: ring 64, 80 regions, 10 mprotect()ed (filtered protection_vma),
#      70 munmap()ed (64 delivered, 6 dropped, one overflow), user area
#      written with known library counters;
#   B: default ring, 5 regions, every type delivered, 1 mprotect()ed;
#   C: open file, no handshake.
# ummunot-stat's text and JSON output (global, --clients, -p, --watch) must
# report exactly those counts; after the clients exit, none are left.
# What this does not cover: a user area written by libummunot itself (the
# library does not publish its counters yet; client A writes the documented
# format directly).
. "$(dirname "$0")/vm-common.sh"

[ -e /dev/ummunot ] || skip "/dev/ummunot does not exist (module not loaded by the VM rig)"
command -v python3 >/dev/null || skip "python3 is not available in the guest"
reload_module
defring=$(cat /sys/module/ummunot/parameters/default_ring_entries)

# --- nothing running ---------------------------------------------------------
"$STAT" --json >"$work/empty.json" || fail "ummunot-stat --json (idle) exited $?"
check_eq "idle clients" 0 "$(json_get "$work/empty.json" 'j["global"]["clients"]')"
check_eq "idle events" 0 "$(json_get "$work/empty.json" 'j["global"]["events"]')"
check_eq "module version" "$(cat /sys/module/ummunot/version)" \
	"$(json_get "$work/empty.json" 'j["module"]["version"]')"
check_eq "default_ring_entries" "$defring" \
	"$(json_get "$work/empty.json" 'j["module"]["parameters"]["default_ring_entries"]')"
"$STAT" --clients >"$work/empty-clients.txt" || fail "--clients (idle) exited $?"
grep -q '^(no process has /dev/ummunot open)$' "$work/empty-clients.txt" ||
	fail "idle --clients: $(cat "$work/empty-clients.txt")"

# --- the workload ------------------------------------------------------------
start_client A --ring 64 --regions 80 --mprotect 10 --munmap 70 --user-area
A=$CPID
start_client B --regions 5 --mprotect 1 --filter-all
B=$CPID
start_client C --no-hello
C=$CPID

# Global, JSON.
"$STAT" --json >"$work/g.json" || fail "ummunot-stat --json exited $?"
cat "$work/g.json"
python3 - "$work/g.json" <<'PY' || fail "global JSON values"
import json, sys
j = json.loads(open(sys.argv[1]).read())
zero = {"unmap": 0, "clear": 0, "protection_vma": 0, "protection_page": 0, "soft_dirty": 0,
        "release": 0, "migrate": 0, "exclusive": 0, "other": 0}
want = {"clients": 3, "regions": 85, "regions_registered": 85, "events": 65, "dropped": 6,
        "overflows": 1, "ring_high_water": 64, "delivered": dict(zero, unmap=64, protection_vma=1),
        "filtered": dict(zero, protection_vma=10)}
assert j["global"] == want, (j["global"], want)
assert "clients" not in j and j["rates"] is None, j
print("ok: global JSON: %s" % j["global"])
PY

# Global, text.
"$STAT" >"$work/g.txt" || fail "ummunot-stat exited $?"
cat "$work/g.txt"
field() { awk -v k="$1" '$1 == k { print $2; exit }' "$work/g.txt"; }
check_eq "text clients" 3 "$(field clients:)"
check_eq "text regions" 85 "$(field regions:)"
check_eq "text events" 65 "$(field events:)"
check_eq "text overflows" 1 "$(field overflows:)"
check_eq "text dropped" "(6 events dropped)" "$(grep '^overflows:' "$work/g.txt" | sed 's/^.*\((.*)\)$/\1/')"
check_eq "text high-water" 64 "$(awk '/^ring high-water:/ { print $3 }' "$work/g.txt")"
check_eq "text unmap row" "unmap 64 0" "$(awk '$1 == "unmap" { print $1, $2, $3 }' "$work/g.txt")"
check_eq "text protection_vma row" "protection_vma 1 10" "$(awk '$1 == "protection_vma" { print $1, $2, $3 }' "$work/g.txt")"

# Clients, JSON.
"$STAT" --clients --json >"$work/c.json" || fail "--clients --json exited $?"
cat "$work/c.json"
python3 - "$work/c.json" "$A" "$B" "$C" "$defring" <<'PY' || fail "--clients --json values"
import json, sys
j = json.loads(open(sys.argv[1]).read())
A, B, C, defring = (int(x) for x in sys.argv[2:6])
by = {c["pid"]: c for c in j["clients"]}
assert len(j["clients"]) == 3 and set(by) == {A, B, C}, list(by)
assert j["denied_pids"] == [], j["denied_pids"]
def check(pid, want):
    got = {k: by[pid][k] for k in want}
    assert got == want, (pid, got, want)
    print("ok: client %d: %s" % (pid, ", ".join("%s=%s" % kv for kv in sorted(want.items()))))
zero = {"unmap": 0, "clear": 0, "protection_vma": 0, "protection_page": 0, "soft_dirty": 0,
        "release": 0, "migrate": 0, "exclusive": 0, "other": 0}
check(A, {"owner_pid": A, "comm": "ustat-client", "abi": 1, "regions": 80, "regions_armed": 10,
          "regions_registered": 80, "ring_entries": 64, "ring_pending": 64, "ring_high_water": 64,
          "events": 64, "dropped": 6, "overflows": 1, "overflow": True, "event_mask": 0x2c6,
          "delivered": dict(zero, unmap=64), "filtered": dict(zero, protection_vma=10),
          "library": {"version": 1, "hits": 1234, "misses": 56,
                      "invalidations": dict(zero, resync=2, unmap=64), "invalidations_total": 66,
                      "evictions": 3, "resyncs": 0, "pinned_bytes": 40960, "entries": 10,
                      "registrations": 80, "deregistrations": 70},
          "rates": None})
check(B, {"owner_pid": B, "regions": 5, "regions_armed": 4, "ring_entries": defring, "ring_pending": 1,
          "events": 1, "dropped": 0, "overflow": False, "delivered": dict(zero, protection_vma=1),
          "filtered": zero, "library": None})
check(C, {"owner_pid": C, "regions": 0, "ring_entries": 0, "ring_pending": 0, "events": 0,
          "library": None})
PY
fdA=$(json_get "$work/c.json" "[x[\"fd\"] for x in j[\"clients\"] if x[\"pid\"] == $A][0]")
[ -e "/proc/$A/fd/$fdA" ] || fail "A's fd $fdA does not exist"

# One client, text.
"$STAT" -p "$A" >"$work/a.txt" || fail "-p A exited $?"
cat "$work/a.txt"
check_eq "-p A rows" 1 "$(tail -n +2 "$work/a.txt" | wc -l)"
check_eq "-p A row" "$A ustat-client $fdA 80 64/64 64 6 yes 1234 56 66 40960 -" \
	"$(tail -n 1 "$work/a.txt" | awk '{ $1 = $1; print }')"
"$STAT" -p "$B" >"$work/b.txt" || fail "-p B exited $?"
cat "$work/b.txt"
check_eq "-p B row tail" "5 1/$defring 1 0 no - - - -" \
	"$(tail -n 1 "$work/b.txt" | awk '{ print $4, $5, $6, $7, $8, $9, $10, $11, $12 }')"
"$STAT" -p "$A" --json >"$work/a.json" || fail "-p A --json exited $?"
check_eq "-p A --json clients" "[$A]" "$(json_get "$work/a.json" '[x["pid"] for x in j["clients"]]')"

# --watch: three samples, rates between them (nothing moves: all zero).
"$STAT" --json --clients --watch 0.3 --count 3 >"$work/w.json" || fail "--watch --json exited $?"
check_eq "watch samples" 3 "$(wc -l <"$work/w.json")"
python3 - "$work/w.json" "$A" <<'PY' || fail "watch JSON"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
a = int(sys.argv[2])
assert s[0]["rates"] is None and s[0]["interval"] is None, s[0]
for x in s[1:]:
    assert 0.2 < x["interval"] < 5, x["interval"]
    assert x["rates"]["events"] == 0 and x["rates"]["dropped"] == 0, x["rates"]
    assert all(v == 0 for v in x["rates"]["delivered"].values()), x["rates"]
    ca = [c for c in x["clients"] if c["pid"] == a][0]
    assert ca["rates"] == {"events": 0, "dropped": 0, "hits": 0, "misses": 0}, ca["rates"]
    assert x["global"]["events"] == 65
print("ok: watch JSON")
PY
"$STAT" --watch 0.3 --count 2 >"$work/w.txt" || fail "--watch exited $?"
cat "$work/w.txt"
check_eq "watch text lines" 3 "$(wc -l <"$work/w.txt")"
check_eq "watch text 1st line" "3 85 - - - - - - - - -" "$(sed -n 2p "$work/w.txt" | awk '{ $1 = $1; print }')"
check_eq "watch text 2nd line" "3 85 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0 0.0" "$(sed -n 3p "$work/w.txt" | awk '{ $1 = $1; print }')"

# A rate that moves: 20 more unmap events over one interval of client D.
"$STAT" --json --watch 2 --count 2 >"$work/r.json" &
wpid=$!
sleep 0.5
start_client D --regions 20 --munmap 20
wait "$wpid" || fail "--watch during a workload exited $?"
python3 - "$work/r.json" <<'PY' || fail "rate JSON"
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])]
d = s[1]["global"]["events"] - s[0]["global"]["events"]
assert d == 20, d
r = s[1]["rates"]["delivered"]["unmap"] * s[1]["interval"]
assert abs(r - 20) < 0.1, r
print("ok: rate x interval = %.3f events" % r)
PY

# --- after the clients exit ---------------------------------------------------
stop_clients
"$STAT" --json --clients >"$work/after.json" || fail "--json after exit exited $?"
check_eq "clients after exit" 0 "$(json_get "$work/after.json" 'j["global"]["clients"]')"
check_eq "regions after exit" 0 "$(json_get "$work/after.json" 'j["global"]["regions"]')"
check_eq "regions_registered kept" 105 "$(json_get "$work/after.json" 'j["global"]["regions_registered"]')"
check_eq "client list after exit" "[]" "$(json_get "$work/after.json" 'j["clients"]')"
echo "PASS"
