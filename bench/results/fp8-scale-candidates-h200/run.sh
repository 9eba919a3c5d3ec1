#!/usr/bin/env bash
# fp8 E4M3 with 8 grid-aligned candidates and packed keys (working tree), against 16 candidates
# (8abe04f, .devrun/mid.tar) and the exhaustive 32 (e1922c1, .devrun/old.tar), built side by side.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
sum=$OUT/summary.txt; : >"$sum"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$sum"
t0=$SECONDS
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" "${@:3}"; }
( cfg . build-device >/tmp/new.log 2>&1 && ninja -C build-device -j8 cclz-perf codec_gpu_tests >>/tmp/new.log 2>&1; echo "new build: $?" >>"$sum" ) &
for v in old mid; do
  mkdir -p /tmp/$v && tar -xf .devrun/$v.tar -C /tmp/$v
  ( cfg /tmp/$v /tmp/$v/build -DCCLZ_BUILD_TESTS=OFF >/tmp/$v.log 2>&1 && ninja -C /tmp/$v/build -j4 cclz-perf >>/tmp/$v.log 2>&1; echo "$v build: $?" >>"$sum" ) &
done
wait
echo "builds: $((SECONDS - t0)) s" >>"$sum"
cat /tmp/new.log /tmp/old.log /tmp/mid.log | grep -E "error|FAILED" | head -20 >>"$sum"
build-device/tests/codec/codec_gpu_tests --gtest_filter='*Fp8*' --gtest_brief=1 >"$OUT/tests.log" 2>&1
echo "fp8 gpu tests: exit $? -- $(grep -E 'PASSED|FAILED' "$OUT/tests.log" | head -5 | tr '\n' ' ')" >>"$sum"
echo "tests: $((SECONDS - t0)) s" >>"$sum"
: >"$OUT/bench.log"
run() {  # run TAG NAME ARGS
  local tag=$1 name=$2; shift 2
  local perf=build-device/tools/cclz-perf/cclz-perf
  [ "$tag" != new ] && perf=/tmp/$tag/build/tools/cclz-perf/cclz-perf
  echo "== $tag/$name: cclz-perf $*" >>"$OUT/bench.log"
  $perf "$@" --json "$OUT/j_${tag}_$name.json" >>"$OUT/bench.log" 2>&1
  echo "$tag $name: exit $?" >>"$sum"
}
for rep in 1 2; do
  for tag in old mid new; do
    run $tag row1024_bf16_r$rep --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  done
done
for tag in old mid new; do
  run $tag auto_bf16 --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag row1024_fp32 --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d fp32 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag row4096_bf16 --op codec --codec fp8 --fp8-row-elems 4096 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag tensors --op codec --codec fp8 --fp8-row-elems 768 --device gpu --input .data/index.json -n 20 -w 5
done
for tag in mid new; do
  run $tag e5m2_row1024_bf16 --op codec --codec fp8 --fp8-format e5m2 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
done
echo "bench: $((SECONDS - t0)) s" >>"$sum"
cd "$OUT" && tar -czf bench-json.tgz j_*.json && rm -f j_*.json
cat "$sum"
