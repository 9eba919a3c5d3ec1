"""Compares runs of one NCCL program with and without libcclz_nccl.so (run_nccl_program.sh,
run_torch_program.sh) and prints a short table.

Each run is a folder holding `out.txt` (the program's output: lines "case NAME rank R hash H",
a line of its own per call and rank, plus anything else) and `err.txt` (its stderr: the drop-in's
lines "... CCLZ INFO libcclz_nccl: op=OP compressed=N plain=N failed=N forwarded=N REASON=N ...",
one per op and process at exit, with CCLZ_INTERPOSE_DEBUG=1). The first run is the program as it
is; every other run must have the same cases, with the same hash for every data-movement case
(every case whose name does not start with allreduce or reducescatter) and, unless the run is
marked `reduce`, for the reductions too. A run may be marked (NAME:FOLDER:MARK,MARK...):
  cclz       calls went through cclz: no op failed, and every op named by --compressed ran
             compressed at least once;
  forced     every call that went through cclz ran compressed (CCLZ_INTERPOSE_FORCE=1: none
             plain);
  reduce     all-reduce and reduce-scatter ran compressed too (CCLZ_INTERPOSE_REDUCE=1); their
             hashes are then reported, not required equal (cclz sums in fp32 in rank order);
  off        no call went through cclz (CCLZ_INTERPOSE=0), and the drop-in counted some.

    python3 check_runs.py --compressed all-gather,send plain:DIR drop-in:DIR:cclz ...
Exit 0 when every check passed.
"""
import argparse
import os
import re
import sys

CASE = re.compile(r"^case (\S+) rank (\d+) hash (\S+)")
COUNTS = re.compile(r"CCLZ INFO libcclz_nccl: op=(\S+) (.*)$")
REDUCTIONS = ("allreduce", "reducescatter")


def read_cases(folder):
    cases = {}
    with open(os.path.join(folder, "out.txt"), errors="replace") as f:
        for line in f:
            m = CASE.match(line)
            if m:
                cases[(m.group(1), int(m.group(2)))] = m.group(3)
    return cases


def read_counts(folder):
    """op -> {key: total over the run's processes}."""
    counts = {}
    path = os.path.join(folder, "err.txt")
    if not os.path.exists(path):
        return counts
    with open(path, errors="replace") as f:
        for line in f:
            m = COUNTS.search(line)
            if not m:
                continue
            op = counts.setdefault(m.group(1), {})
            for pair in m.group(2).split():
                key, _, value = pair.partition("=")
                op[key] = op.get(key, 0) + int(value)
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compressed", default="",
                        help="ops that a run marked cclz must have run compressed at least once")
    parser.add_argument("runs", nargs="+", help="NAME:FOLDER[:MARK,...], the plain run first")
    args = parser.parse_args()
    required = [op for op in args.compressed.split(",") if op]

    runs = []
    for spec in args.runs:
        name, folder, *marks = spec.split(":")
        runs.append((name, folder, set(",".join(marks).split(",")) - {""}))
    base_name, base_folder, _ = runs[0]
    base = read_cases(base_folder)
    problems = []
    if not base:
        problems.append(f"{base_name}: no cases in {base_folder}/out.txt")

    rows = []
    for name, folder, marks in runs:
        cases = read_cases(folder)
        counts = read_counts(folder)
        moved_differ = [k for k in base
                        if not k[0].startswith(REDUCTIONS) and cases.get(k) != base[k]]
        reduced = [k for k in base if k[0].startswith(REDUCTIONS)]
        reduced_differ = [k for k in reduced if cases.get(k) != base[k]]
        missing = [k for k in base if k not in cases]
        if missing:
            problems.append(f"{name}: {len(missing)} cases missing, e.g. {missing[0]}")
        if moved_differ:
            problems.append(f"{name}: {len(moved_differ)} data-movement results differ from "
                            f"{base_name}, e.g. {moved_differ[0]}")
        if reduced_differ and "reduce" not in marks:
            problems.append(f"{name}: {len(reduced_differ)} reduction results differ from "
                            f"{base_name}, e.g. {reduced_differ[0]}")
        if "cclz" in marks:
            if not counts:
                problems.append(f"{name}: no counts from the drop-in in {folder}/err.txt")
            for op, c in counts.items():
                if c.get("failed", 0):
                    problems.append(f"{name}: {c['failed']} {op} calls failed in cclz")
            for op in required:
                if counts.get(op, {}).get("compressed", 0) == 0:
                    problems.append(f"{name}: no {op} call ran compressed")
        if "forced" in marks:
            for op, c in counts.items():
                if c.get("plain", 0):
                    problems.append(f"{name}: {c['plain']} {op} calls ran plain (forced run)")
        if "off" in marks:
            if not counts:
                problems.append(f"{name}: no counts from the drop-in in {folder}/err.txt")
            for op, c in counts.items():
                if c.get("compressed", 0) or c.get("plain", 0) or c.get("failed", 0):
                    problems.append(f"{name}: {op} calls went through cclz (off run)")
        if "reduce" in marks:
            for op in ("all-reduce", "reduce-scatter"):
                if counts.get(op, {}).get("compressed", 0) == 0:
                    problems.append(f"{name}: no {op} call ran compressed (reduce run)")
        ops = ", ".join(f"{op} {c.get('compressed', 0)}/{c.get('plain', 0)}/{c.get('forwarded', 0)}"
                        for op, c in sorted(counts.items()))
        rows.append((name, len(cases), len(moved_differ), f"{len(reduced_differ)}/{len(reduced)}",
                     ops or "-"))

    print("run | cases | data movement differing | reductions differing | "
          "per op: compressed/plain/forwarded")
    for row in rows:
        print(" | ".join(str(x) for x in row))
    for p in problems:
        print("FAIL:", p)
    print("interpose check:", "PASS" if not problems else "FAIL")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
