#!/usr/bin/env bash
# Nsight Compute profiles of the encode and decode kernels after round 10 (fp8 bf16 rows of 1024
# at 256 MiB and 4 MiB; the lossless bf16 codec at 256 MiB), for where the time goes next.
# Device tool, carry [".deps"]:  bash bench/results/2026-11-23-s15-fp8-profile-h200/run.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
t0=$SECONDS
prof() {  # prof NAME BYTES ARGS...
  local name=$1; shift
  OUT=/tmp/prof/$name bash scripts/profile.sh "$@" >"$OUT/$name.txt" 2>&1
  echo "$name: exit $? at $((SECONDS - t0)) s" >>"$OUT/summary.txt"
}
prof fp8_row1024_256M 256M --codec fp8 --fp8-row-elems 1024 -d bf16
prof fp8_row1024_4M 4M --codec fp8 --fp8-row-elems 1024 -d bf16
prof lossless_bf16_256M 256M --codec lossless -d bf16
(cd /tmp/prof && tar -czf "$OUT/profiles.tgz" .)
cat "$OUT/summary.txt"
