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
