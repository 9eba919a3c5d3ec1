#!/usr/bin/env python3
"""Summarizes an Nsight Compute per-SASS-instruction CSV (`--page source --csv --print-source sass`)
by code region: the instructions between two block barriers. Prints, for each region that holds
more than 1% of the executed instructions or of the stall samples, its share of both and the
memory operations in it, so that a kernel's time can be placed without reading the SASS."""
import csv
import sys


def main(path, top=0):
    rows = list(csv.reader(open(path)))
    header = next(i for i, r in enumerate(rows) if "Source" in r)
    names, data = rows[header], rows[header + 1:]
    src, execd = names.index("Source"), names.index("Instructions Executed")
    samples = names.index("Warp Stall Sampling (All Samples)")
    value = lambda r, i: float(r[i] or 0)
    total_e = sum(value(r, execd) for r in data) or 1
    total_s = sum(value(r, samples) for r in data) or 1
    region, start = [], None
    print(f"  {'region':>14} {'instr%':>7} {'stall%':>7}  memory operations")
    for r in data + [None]:
        if r is not None:
            region.append(r)
        if r is None or "BAR.SYNC" in r[src] or "B2R.RESULT" in r[src]:
            e = sum(value(x, execd) for x in region) / total_e
            s = sum(value(x, samples) for x in region) / total_s
            if region and (e > 0.01 or s > 0.01):
                ops = sorted({w for x in region for w in x[src].replace("@", " ").split()
                              if w.split(".")[0] in ("LDG", "STG", "LDS", "STS", "ATOMS", "ATOM",
                                                     "RED", "LDL", "STL", "SHFL", "LDGSTS")})
                print(f"  {region[0][0][-5:]}-{region[-1][0][-5:]} {100 * e:6.1f}% {100 * s:6.1f}%  {' '.join(ops[:8])}")
            region = []
    print(f"  total warp instructions {total_e:.3e}")
    if top:
        print(f"  the {top} instructions with the most stall samples:")
        for r in sorted(data, key=lambda x: -value(x, samples))[:top]:
            print(f"  {100 * value(r, samples) / total_s:5.1f}% {r[0][-5:]} {r[src][:90]}")


if __name__ == "__main__":
    # ncu_regions.py CSV [N]: N > 0 also lists the N instructions with the most stall samples.
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0)
