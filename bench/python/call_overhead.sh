#!/usr/bin/env bash
# The Python package's overhead per call over the C API's, on 2 GPUs (one per MPI rank;
# CCLZ_RANKS=1 on a machine of one GPU):
#   bench/python/call_overhead.sh BUILD OUTDIR
# BUILD: a cclz build folder (its src/libcclz.so and, where Python's headers were, the
# _fastcall module beside it); OUTDIR gets call_overhead.json and .md.
# Each round times C, the raw ctypes and cclz._fastcall functions, and the Python method through
# each binding one after the other in one process (call_overhead.py). The ranks are not bound to cores (as torchrun starts them); CCLZ_BIND=core
# binds each to one core (OpenMPI's default for 2 ranks), where the communicator's own threads
# share the caller's.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1 out=$2
mkdir -p "$out"
cc -O2 -shared -fPIC bench/python/c_call_loop.c -I include -L "$build/src" \
  -Wl,-rpath,"$PWD/$build/src" -lcclz -o "$out/c_call_loop.so"
PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so \
  mpirun --allow-run-as-root --oversubscribe --bind-to "${CCLZ_BIND:-none}" -n "${CCLZ_RANKS:-2}" \
  python3 bench/python/call_overhead.py --c-loop "$out/c_call_loop.so" \
  --json "$out/call_overhead.json" --calls 200 --rounds 21
rm -f "$out/c_call_loop.so"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
data = json.load(open(f"{out}/call_overhead.json"))
data["mpirun_bind_to"] = os.environ.get("CCLZ_BIND", "none")
json.dump(data, open(f"{out}/call_overhead.json", "w"), indent=1)
def us(row, key):
    return f"{row[key]:.2f}" if key in row else "-"
lines = ["Overheads: the median over rounds of (way - C). The method's binding: "
         + data["rows"][0]["binding"] + ".", "",
         "| bytes per rank | codec | C (us/call) | raw ctypes | raw _fastcall | method, ctypes | "
         "method | overhead: raw ctypes | raw _fastcall | method, ctypes | **method** |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
for row in data["rows"]:
    lines.append(f"| {row['bytes']} | {row['codec']} | {us(row, 'c_us')} | {us(row, 'ctypes_us')} "
                 f"| {us(row, 'fastcall_us')} | {us(row, 'python_ctypes_us')} "
                 f"| {us(row, 'python_us')} | {us(row, 'ctypes_overhead_us')} "
                 f"| {us(row, 'fastcall_overhead_us')} | {us(row, 'python_ctypes_overhead_us')} "
                 f"| **{us(row, 'overhead_us')}** |")
open(f"{out}/call_overhead.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
