#!/usr/bin/env bash
# The Python package's overhead per call over the C API's, on 2 GPUs (one per MPI rank):
#   bench/python/call_overhead.sh BUILD OUTDIR
# BUILD: a cclz build folder (its src/libcclz.so); OUTDIR gets call_overhead.json and .md.
# Each round times C, raw ctypes and the Python method one after the other in one process
# (call_overhead.py). The ranks are not bound to cores (as torchrun starts them); CCLZ_BIND=core
# binds each to one core (OpenMPI's default for 2 ranks), where the communicator's own threads
# share the caller's.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1 out=$2
mkdir -p "$out"
cc -O2 -shared -fPIC bench/python/c_call_loop.c -I include -L "$build/src" \
  -Wl,-rpath,"$PWD/$build/src" -lcclz -o "$out/c_call_loop.so"
PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so \
  mpirun --allow-run-as-root --oversubscribe --bind-to "${CCLZ_BIND:-none}" -n 2 \
  python3 bench/python/call_overhead.py --c-loop "$out/c_call_loop.so" \
  --json "$out/call_overhead.json" --calls 200 --rounds 21
rm -f "$out/c_call_loop.so"
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
data = json.load(open(f"{out}/call_overhead.json"))
data["mpirun_bind_to"] = os.environ.get("CCLZ_BIND", "none")
json.dump(data, open(f"{out}/call_overhead.json", "w"), indent=1)
lines = ["| bytes per rank | codec | C (us/call) | ctypes, args built once | Python method | "
         "overhead over C (median of rounds' differences) |", "|---|---|---|---|---|---|"]
for row in data["rows"]:
    lines.append(f"| {row['bytes']} | {row['codec']} | {row['c_us']:.2f} | {row['ctypes_us']:.2f} "
                 f"| {row['python_us']:.2f} | {row['overhead_us']:.2f} |")
open(f"{out}/call_overhead.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
