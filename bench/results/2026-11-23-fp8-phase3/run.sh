#!/usr/bin/env bash
# The pending fp8 encode change (fp8-encode-phase3.patch, README.md here) against the tree as it
# is, built side by side on one GPU: the patched tree's fp8 GPU tests (frames byte for byte
# against the CPU reference), then cclz-perf on both, alternated, twice.
# Run on the device from the repository root, carrying .deps and .data:
#   bash bench/pending/fp8-encode-phase3.sh     (writes $OUT: summary.txt, tests.log, bench.log)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
sum=$OUT/summary.txt; : >"$sum"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$sum"
t0=$SECONDS
rm -rf /tmp/new && mkdir -p /tmp/new
tar --exclude=./build-device --exclude=./.git -cf - . | tar -xf - -C /tmp/new
apply() { if command -v git >/dev/null; then git apply "$1"; else patch -p1 <"$1"; fi; }
(cd /tmp/new && apply bench/pending/fp8-encode-phase3.patch) >>"$sum" 2>&1 ||
  { echo "patch failed" >>"$sum"; cat "$sum"; exit 1; }
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" "${@:3}"; }
( cfg /tmp/new /tmp/new/build >/tmp/new.log 2>&1 && ninja -C /tmp/new/build -j10 cclz-perf codec_gpu_tests >>/tmp/new.log 2>&1; echo "new build: $?" >>"$sum" ) &
( cfg . build-device -DCCLZ_BUILD_TESTS=OFF >/tmp/old.log 2>&1 && ninja -C build-device -j6 cclz-perf >>/tmp/old.log 2>&1; echo "old build: $?" >>"$sum" ) &
wait
echo "builds: $((SECONDS - t0)) s" >>"$sum"
cat /tmp/new.log /tmp/old.log | grep -E "error|FAILED" | head -20 >>"$sum"
/tmp/new/build/tests/codec/codec_gpu_tests --gtest_filter='*Fp8*' --gtest_brief=1 >"$OUT/tests.log" 2>&1
echo "fp8 gpu tests (new): exit $? -- $(grep -E 'PASSED|FAILED' "$OUT/tests.log" | head -5 | tr '\n' ' ')" >>"$sum"
echo "tests: $((SECONDS - t0)) s" >>"$sum"
: >"$OUT/bench.log"
run() {  # run TAG NAME ARGS
  local tag=$1 name=$2; shift 2
  local perf=build-device/tools/cclz-perf/cclz-perf
  [ "$tag" = new ] && perf=/tmp/new/build/tools/cclz-perf/cclz-perf
  echo "== $tag/$name: cclz-perf $*" >>"$OUT/bench.log"
  $perf "$@" --json "$OUT/j_${tag}_$name.json" >>"$OUT/bench.log" 2>&1
  echo "$tag $name: exit $?" >>"$sum"
}
for rep in 1 2; do
  for tag in old new; do
    run $tag row1024_bf16_r$rep --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  done
done
for tag in old new; do
  run $tag auto_bf16 --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag row4096_bf16 --op codec --codec fp8 --fp8-row-elems 4096 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag row1024_fp32 --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d fp32 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag e5m2_row1024_bf16 --op codec --codec fp8 --fp8-format e5m2 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag tensors --op codec --codec fp8 --fp8-row-elems 768 --device gpu --input .data/index.json -n 20 -w 5
done
echo "bench: $((SECONDS - t0)) s" >>"$sum"
# The encode column of each run, old beside new.
grep -E "^== |^ +[0-9]+ " "$OUT/bench.log" | head -80 >>"$sum"
cd "$OUT" && tar -czf bench-json.tgz j_*.json && rm -f j_*.json
cat "$sum"
