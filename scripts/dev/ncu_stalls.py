#!/usr/bin/env python3
"""Reads the same Nsight Compute per-SASS-instruction CSV as ncu_regions.py and prints what a
kernel's warps wait on: the stall reasons' shares of all samples, the instructions with the most
samples of the leading reasons, and the code the kernel executes (static instructions with any
execution, and how many cover 99% of it). A large `no_inst` share beside a hot path of tens of
KiB says the instruction cache, not the data, is what the warps wait for; so does a
share of the no_inst samples on the first instructions of 128-byte lines well above 2/8.
  python3 scripts/dev/ncu_stalls.py ncu_encode.csv [top]"""
import csv
import sys


def main(path, top=5):
    rows = list(csv.reader(open(path)))
    header = next(i for i, r in enumerate(rows) if "Source" in r)
    names, data = rows[header], rows[header + 1:]
    number = lambda s: float(s.replace(",", "") or 0)
    src, execd = names.index("Source"), names.index("Instructions Executed")
    reasons = [i for i, n in enumerate(names) if n.startswith("stall_") and "Not Issued" not in n]
    totals = {names[i]: sum(number(r[i]) for r in data) for i in reasons}
    all_samples = sum(totals.values()) or 1
    leading = sorted(totals, key=lambda n: -totals[n])
    print("  stall reasons (share of samples):")
    for n in leading[:8]:
        print(f"    {n[6:]:<18} {100 * totals[n] / all_samples:5.1f}%")
    for n in leading[:3]:
        col = names.index(n)
        print(f"  most {n[6:]} samples:")
        for r in sorted(data, key=lambda r: -number(r[col]))[:top]:
            share = 100 * number(r[col]) / (totals[n] or 1)
            print(f"    {share:5.1f}%  x{number(r[execd]):<9.0f} {r[src][:70]}")
    weights = sorted((number(r[execd]) for r in data), reverse=True)
    total, covered, hot = sum(weights) or 1, 0, 0
    for w in weights:
        if covered >= 0.99 * total:
            break
        covered, hot = covered + w, hot + 1
    executed = sum(1 for w in weights if w > 0)
    print(f"  code: {len(data)} instructions ({16 * len(data) // 1024} KiB), {executed} executed "
          f"({16 * executed // 1024} KiB), {hot} cover 99% of execution ({16 * hot // 1024} KiB)")
    # The path most warps run (executed at least 1% as often as the hottest instruction), in
    # 128-byte instruction-cache lines, and the share of the no_inst samples on a line's first
    # instructions: where each warp runs a straight path once (few rows or chunks per warp), a
    # cold instruction cache stalls it at every line it enters.
    base = int(data[0][0], 16)
    common = [int(r[0], 16) - base for r in data if number(r[execd]) >= 0.01 * weights[0]]
    col = names.index("stall_no_inst") if "stall_no_inst" in names else None
    if col is not None and totals[names[col]] > 0:
        entry = sum(number(r[col]) for r in data if (int(r[0], 16) - base) % 128 < 32)
        print(f"  common path: {len(common)} instructions on {len({a // 128 for a in common})} "
              f"128-byte lines; {100 * entry / totals[names[col]]:.0f}% of no_inst samples on a "
              f"line's first two instructions")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
