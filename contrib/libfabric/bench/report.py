#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The table of contrib/libfabric/bench/monitors, from one run's files:
meta.json (tag, kernel, userspace, commit, date), cost.json (monitor-cost's
lines) and pingpong-MONITOR-ROUND.json (vm-mpi-pingpong's, per rank line).
scripts/docs-results render ofi-monitors renders the run committed in
Documentation/results/ofi-monitors/.  Usage: report.py DIR"""
import glob
import json
import os
import sys

MONITORS = ("ummunot", "memhooks", "userfaultfd")
SIZES = (8, 4096, 262144, 4194304)


def med(v):
    v = sorted(v)
    return v[len(v) // 2]


def render(d):
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    cost = {}
    for line in open(os.path.join(d, "cost.json")):
        if line.startswith("{"):
            o = json.loads(line)
            cost[o["monitor"]] = o
    mons = [m for m in MONITORS if m in cost]
    L = [f"*Run of {meta['date']}: libfabric {meta['tag']}, kernel {meta['kernel']}, Debian "
         f"{meta['userspace']}, QEMU -icount (one vCPU), ummunot {meta['commit']}; one boot, "
         "ratios within it.*", "",
         "| | " + " | ".join(mons) + " |", "| --- |" + " --- |" * len(mons)]
    L.append("| cache hit, ns (search + valid()) | " +
             " | ".join(f"{cost[m]['hit_ns']:.0f}" for m in mons) + " |")
    for n in ("100", "1000", "10000"):
        for kind, what in (("other", "a page not cached"), ("cached", "a cached page")):
            L.append(f"| munmap() of {what}, {n} cached, ns | " +
                     " | ".join(f"{cost[m]['munmap_ns'][n][kind]:.0f}" for m in mons) + " |")
    pp = {}  # label -> [round results]
    for path in sorted(glob.glob(os.path.join(d, "pingpong-*.json"))):
        for line in open(path):
            i = line.find('{"benchmark"')  # mpirun-2 tags each rank's lines
            if i >= 0:
                o = json.loads(line[i:])
                pp.setdefault(o["label"], []).append(o)
    if "ummunot" not in pp:
        return L
    pm = [m for m in mons if m in pp]
    rounds = min(len(pp[m]) for m in pm)
    L += ["", f"Open MPI ping-pong, half round trip in µs, median of {rounds} rounds "
          "(bench/vm-mpi-pingpong --quick; \"free\": the buffer freed and allocated again "
          "every round trip); ratios: of the medians, [lowest, highest] per-round ratio:", "",
          "| series | bytes | " + " | ".join(pm) +
          " | ummunot / memhooks | ummunot / userfaultfd |",
          "| --- | --- |" + " --- |" * (len(pm) + 2)]
    for series in ("reuse", "free"):
        for i, row in enumerate(pp["ummunot"][0][series]):
            b = row["bytes"]
            if b not in SIZES:
                continue
            runs = {m: [pp[m][k][series][i]["half_rtt_ns"] for k in range(rounds)] for m in pm}
            v = {m: med(runs[m]) for m in pm}

            def ratio(o):
                if o not in v or not v[o]:
                    return "-"
                per = [runs["ummunot"][k] / runs[o][k] for k in range(rounds)]
                return f"{v['ummunot'] / v[o]:.2f} [{min(per):.2f}, {max(per):.2f}]"
            L.append(f"| {series} | {b} | " + " | ".join(f"{v[m] / 1000:.1f}" for m in pm) +
                     f" | {ratio('memhooks')} | {ratio('userfaultfd')} |")
    return L


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print("\n".join(render(sys.argv[1])))
