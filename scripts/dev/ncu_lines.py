#!/usr/bin/env python3
"""Places a kernel's executed instructions and stall samples on its source lines, by joining
Nsight Compute's per-SASS-instruction CSV (scripts/dev/profile.sh: ncu_encode.csv, ncu_decode.csv) with the same
build's SASS disassembled with line info.

    nvcc ... -lineinfo -cubin -o k.cubin file.cu     (the build's flags; or cuobjdump -xelf all)
    nvdisasm -g -c k.cubin > k.sass                  (nvdisasm: the nvidia-cuda-nvdisasm wheel)
    python3 scripts/dev/ncu_lines.py ncu_encode.csv k.sass encodeKernelILi9ELb0ELb0E [units]

The third argument picks the kernel's section in the SASS (a piece of its mangled name); units
divides the counts (e.g. the number of rows, for instructions per row). Per source line: the
instructions executed, those that are branches or divergence regions (BRA, BSSY, BSYNC), and
the line's share of all stall samples and of the instruction-fetch (no_inst) samples. Check the
printed total against ncu's: a different build gives different offsets."""
import collections
import csv
import re
import sys


def profile_by_offset(path):
    rows = list(csv.reader(open(path)))
    header = next(i for i, r in enumerate(rows) if "Source" in r)
    names, data = rows[header], rows[header + 1:]
    col = {n: names.index(n) for n in ("Instructions Executed", "stall_no_inst",
                                       "Warp Stall Sampling (All Samples)")}
    base = int(data[0][0], 16)
    num = lambda r, n: float(r[col[n]] or 0)
    return {int(r[0], 16) - base: (num(r, "Instructions Executed"),
                                   num(r, "Warp Stall Sampling (All Samples)"),
                                   num(r, "stall_no_inst")) for r in data}


def main(csv_path, sass_path, kernel, units=1.0):
    prof = profile_by_offset(csv_path)
    lines = open(sass_path).read().split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith(".text.") and kernel in l)
    per_line = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    where = ("?", 0)
    for l in lines[start + 1:]:
        if l.startswith(".text."):
            break
        loc = re.search(r'//## File "([^"]+)", line (\d+)', l)
        if loc:
            where = (loc.group(1).split("/")[-1], int(loc.group(2)))
            continue
        ins = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", l)
        if not ins:
            continue
        executed, samples, no_inst = prof.get(int(ins.group(1), 16), (0.0, 0.0, 0.0))
        acc = per_line[where]
        acc[0] += executed
        acc[1] += samples
        acc[2] += no_inst
        if re.search(r"\b(BRA|BSSY|BSYNC)\b", ins.group(2)):
            acc[3] += executed
    total_e = sum(v[0] for v in per_line.values())
    total_s = sum(v[1] for v in per_line.values()) or 1
    print(f"instructions executed: {total_e:.0f} ({total_e / units:.1f} per unit), "
          f"of which branches and regions {sum(v[3] for v in per_line.values()) / units:.1f}")
    print(f"  {'file':24} {'line':>5} {'instr':>8} {'branch':>7} {'stall%':>7} {'no_inst%':>8}")
    for (name, line), v in sorted(per_line.items()):
        if v[0] > 0:
            print(f"  {name:24} {line:5d} {v[0] / units:8.1f} {v[3] / units:7.1f} "
                  f"{100 * v[1] / total_s:7.1f} {100 * v[2] / total_s:8.1f}")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 1.0)
