#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Side-by-side table (Markdown) from vs-kdreg2's JSON, one column pair per
file (kernel).  Usage: report.py FILE.json..."""
import json
import os
import sys


def us(ns):
    return f"{ns / 1e3:.2f} us"


def rows_of(d):
    out = []
    for r in d.get("regunreg", []):
        u, k, n = r["ummunot"], r["kdreg2"], r["watched"]
        out.append((f"register one, {n} watched (min; median)",
                    f"{us(u['register_min_ns'])}; {us(u['register_median_ns'])}",
                    f"{us(k['register_min_ns'])}; {us(k['register_median_ns'])}",
                    f"{u['register_min_ns'] / k['register_min_ns']:.2f}"))
        out.append((f"unregister one, {n} watched (min; median)",
                    f"{us(u['unregister_min_ns'])}; {us(u['unregister_median_ns'])}",
                    f"{us(k['unregister_min_ns'])}; {us(k['unregister_median_ns'])}",
                    f"{u['unregister_min_ns'] / k['unregister_min_ns']:.2f}"))
    if "check" in d:
        c = d["check"]
        out.append(("\"changed?\" inline (min)", f"{c['ummunot_inline_min_ns']:.2f} ns",
                    f"{c['kdreg2_inline_min_ns']:.2f} ns", f"{c['inline_ratio']:.2f}"))
        out.append(("\"changed?\" ummunot_monitor_changed() call (min)",
                    f"{c['ummunot_out_of_line_min_ns']:.2f} ns",
                    f"{c['kdreg2_inline_min_ns']:.2f} ns", f"{c['out_of_line_ratio']:.2f}"))
    if "native" in d:
        c = d["native"]
        out.append(("\"changed?\" inline on plain memory, no module (min)", f"{c['ummunot_inline_min_ns']:.2f} ns",
                    f"{c['kdreg2_inline_min_ns']:.2f} ns", f"{c['inline_ratio']:.2f}"))
    if "consume" in d:
        c = d["consume"]
        out.append(("consume one event (min; median)",
                    f"{us(c['ummunot']['min_ns'])}; {us(c['ummunot']['median_ns'])}",
                    f"{us(c['kdreg2']['min_ns'])}; {us(c['kdreg2']['median_ns'])}",
                    f"{c['min_ratio']:.2f}"))
    if "open" in d:
        c = d["open"]
        out.append(("open + size for 10^5 regions (min)", f"{c['ummunot_min_ns'] / 1e6:.2f} ms",
                    f"{c['kdreg2_min_ns'] / 1e6:.2f} ms", f"{c['min_ratio']:.2f}"))
    if "visible" in d:
        v = d["visible"]
        n = v["iterations_per_op"]
        for op in ("munmap", "map_fixed", "mremap", "madv_dontneed"):
            cells = []
            for m in ("ummunot", "kdreg2"):
                x = v[m][op]
                cells.append(f"{x['late']} of {n} late" +
                             (f" (worst {x['worst_late_ms']:.1f} ms)" if x["late"] else ""))
            out.append((f"visible at return: {op}, second thread on the fd", *cells, ""))
    if "parked" in d:
        p = d["parked"]
        n = p["munmaps"]
        out.append(("visible at return: munmap, second thread parked in a fault",
                    f"{p['ummunot']['stale_at_return']} of {n} stale",
                    f"{p['kdreg2']['stale_at_return']} of {n} stale", ""))
    for name, what in (("fork", "fork() with"), ("mprotect", "mprotect() of")):
        if name in d:
            f = d[name]
            out.append((f"false invalidations: {what} {f['regions']} watched regions",
                        f"{f['ummunot']} of {f['regions']}", f"{f['kdreg2']} of {f['regions']}", ""))
    if "ksm" in d:
        k = d["ksm"]
        if "skipped" in k:
            out.append(("KSM merge of 2 watched pages reported", "skipped", "skipped", ""))
        else:
            out.append(("KSM merge of 2 watched pages reported",
                        f"{k['ummunot']['reported']} of 2 ({k['ummunot']['merged_pages']:.0f} merged)",
                        f"{k['kdreg2']['reported']} of 2 ({k['kdreg2']['merged_pages']:.0f} merged)", ""))
    return out


# ------------------------------------------- the documentation's blocks
# (scripts/docs-results render kdreg2 | kdreg2-correctness, from the run
# committed in Documentation/results/kdreg2/: meta.json and one
# <kernel>.json per kernel)

def load(d):
    """(meta, [(kernel, results)]) of a run directory."""
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    runs = []
    for k in meta["kernels"]:
        with open(os.path.join(d, k + ".json")) as f:
            runs.append((k, json.load(f)))
    return meta, runs


def stamp(meta):
    return (f"Run of {meta['date']}, ummunot {meta['commit']}, kdreg2 "
            f"{meta['kdreg2_commit']}, `bench/kdreg2/run` ({meta['mode']}), in QEMU/TCG "
            f"guests on a {meta['host_cpus']}-CPU host: times are emulated, read the ratios.")


def timed_md(d):
    meta, runs = load(d)
    out = ["*" + stamp(meta) + "*", ""]
    for k, r in runs:
        out += [f"Kernel {r.get('kernel', k)}:", "",
                "| row | ummunot | kdreg2 | ratio (ummunot / kdreg2) |", "|---|---|---|---|"]
        out += ["| " + " | ".join(row) + " |" for row in rows_of(r)]
        out.append("")
    return out


def correctness_cells(r):
    """The correctness rows of one kernel: [(row, ummunot, kdreg2)]."""
    out = []
    if "visible" in r:
        v, n = r["visible"], r["visible"]["iterations_per_op"]
        ops = ("munmap", "map_fixed", "mremap", "madv_dontneed")
        late = {m: sum(v[m][op]["late"] for op in ops) for m in ("ummunot", "kdreg2")}
        out.append(("late at return: 4 calls, a second thread on the file",
                    f"{late['ummunot']:,} of {4 * n:,}", f"{late['kdreg2']:,} of {4 * n:,}"))
    if "parked" in r:
        p = r["parked"]
        out.append(("stale at return: munmap, a thread parked in a fault",
                    f"{p['ummunot']['stale_at_return']} of {p['munmaps']}",
                    f"{p['kdreg2']['stale_at_return']} of {p['munmaps']}"))
    for name, what in (("fork", "fork()"), ("mprotect", "mprotect()")):
        if name in r:
            f = r[name]
            out.append((f"false invalidations: {what}, {f['regions']} regions",
                        f"{f['ummunot']:,}", f"{f['kdreg2']:,}"))
    if "ksm" in r and "skipped" not in r["ksm"]:
        k = r["ksm"]
        out.append(("KSM merge of 2 watched pages: reported",
                    f"{k['ummunot']['reported']} of 2", f"{k['kdreg2']['reported']} of 2"))
    return out


def correctness_rst(d):
    meta, runs = load(d)
    names = [row for row, _, _ in correctness_cells(runs[0][1])]
    hdr = ["row"]
    for k, _ in runs:
        hdr += [f"{k} ummunot", f"{k} kdreg2"]
    table = []
    for i, name in enumerate(names):
        cells = [name]
        for _, r in runs:
            c = correctness_cells(r)
            cells += [c[i][1], c[i][2]] if i < len(c) and c[i][0] == name else ["-", "-"]
        table.append(cells)
    w = [max(len(x[j]) for x in table + [hdr]) for j in range(len(hdr))]
    sep = "  ".join("=" * x for x in w)
    line = lambda cells: "  ".join(c.ljust(x) for c, x in zip(cells, w)).rstrip()
    return ["*" + stamp(meta).replace("`", "``") + "*", "", sep, line(hdr), sep] + \
        [line(c) for c in table] + [sep]


def main():
    for path in sys.argv[1:]:
        with open(path) as f:
            d = json.load(f)
        name = d.get("kernel") or os.path.basename(path).removesuffix(".json")
        print(f"### {name}\n")
        print("| row | ummunot | kdreg2 | ratio (ummunot / kdreg2) |")
        print("|---|---|---|---|")
        for r in rows_of(d):
            print("| " + " | ".join(r) + " |")
        print()


if __name__ == "__main__":
    main()
