#!/usr/bin/env bash
# The Python package's overhead per call over the C API's, on 2 GPUs (one per MPI rank):
#   bench/python/call_overhead.sh BUILD OUTDIR
# BUILD: a cclz build folder (its src/libcclz.so); OUTDIR gets call_overhead.json and .md.
# The ranks are not bound to cores (as torchrun starts them); CCLZ_BIND=core binds each to one
# core (OpenMPI's default for 2 ranks), where the communicator's own threads share the caller's.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1 out=$2
mkdir -p "$out"
mpicc -O2 bench/python/c_call_loop.c -I include -I /usr/local/cuda/include -L "$build/src" \
  -L /usr/local/cuda/lib64 -Wl,-rpath,"$PWD/$build/src" -lcclz -lcudart -o "$out/c_call_loop"
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to "${CCLZ_BIND:-none}" -n 2)
PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so "${mpi[@]}" \
  python3 bench/python/call_overhead.py --json "$out/python.json" --calls 200 --rounds 21
for bytes in 65536 1048576; do
  for codec in none fp8; do
    "${mpi[@]}" "$out/c_call_loop" "$bytes" 200 21 "$codec"
  done
done >"$out/c.txt"
rm -f "$out/c_call_loop"
python3 - "$out" <<'PY'
import json, os, statistics, sys
out = sys.argv[1]
data = json.load(open(f"{out}/python.json"))
c = {}
for line in open(f"{out}/c.txt"):
    parts = line.split()
    if len(parts) == 4 and parts[0] == "c":
        c.setdefault((int(parts[2]), parts[1]), []).append(float(parts[3]))
lines = ["| bytes per rank | codec | C (us/call) | ctypes, args built once | Python method | overhead over C |",
         "|---|---|---|---|---|---|"]
for row in data["rows"]:
    row["c_us"] = statistics.median(c[(row["bytes"], row["codec"])])
    row["overhead_us"] = row["python_us"] - row["c_us"]
    lines.append(f"| {row['bytes']} | {row['codec']} | {row['c_us']:.2f} | {row['ctypes_us']:.2f} "
                 f"| {row['python_us']:.2f} | {row['overhead_us']:.2f} |")
data["c_command"] = f"mpirun --bind-to {os.environ.get('CCLZ_BIND', 'none')} -n 2 c_call_loop BYTES 200 21 CODEC (median of 21 rounds)"
json.dump(data, open(f"{out}/call_overhead.json", "w"), indent=1)
open(f"{out}/call_overhead.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
