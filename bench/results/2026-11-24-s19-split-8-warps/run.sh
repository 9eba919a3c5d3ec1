#!/usr/bin/env bash
# Session 19, second device call: the split encoder with 8 warps per chunk against 4 (one build,
# CCLZ_LOSSLESS_ENCODE_WARPS), its GPU tests, and where the staged kernels stop paying.
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
t0=$SECONDS
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
  -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >"$OUT/build.log" 2>&1 &&
  ninja -C build-device -j16 cclz-perf codec_gpu_tests >>"$OUT/build.log" 2>&1
echo "build: exit $? after $((SECONDS - t0)) s"
T=build-device/tests/codec/codec_gpu_tests
F='All/LosslessGpu.*_default_*:LosslessGpuV2*:LosslessGpuRealTensors.*-*_n16777216_*'
{ echo "== warps 8, every lossless GPU test"; CCLZ_LOSSLESS_ENCODE_WARPS=8 $T --gtest_filter='*Lossless*' --gtest_brief=1 2>&1 | tail -3
  echo "== warps 8 staged 16M"; CCLZ_LOSSLESS_ENCODE_WARPS=8 CCLZ_LOSSLESS_PATH=staged $T --gtest_filter='All/LosslessGpu.*_n16777216_default_*' --gtest_brief=1 2>&1 | tail -3
  echo "== warps 8, pdl off"; CCLZ_PDL=0 CCLZ_LOSSLESS_ENCODE_WARPS=8 $T --gtest_filter="$F" --gtest_brief=1 2>&1 | tail -3
  for w in 2 4; do echo "== warps $w"; CCLZ_LOSSLESS_ENCODE_WARPS=$w $T --gtest_filter="$F" --gtest_brief=1 2>&1 | tail -3; done
} > "$OUT/tests.log" 2>&1
grep -E "^==|PASSED|FAILED" "$OUT/tests.log"
echo "tests: $((SECONDS - t0)) s"
P=build-device/tools/cclz-perf/cclz-perf
run() {  # name, environment, cclz-perf arguments
  local name=$1 envs=$2; shift 2
  echo "== $name: $envs cclz-perf $*" >>"$OUT/bench.log"
  env $envs $P "$@" --json "$OUT/j_$name.json" </dev/null >>"$OUT/bench.log" 2>&1
}
: >"$OUT/bench.log"
for r in 1 2; do for w in 4 8; do
  run "w${w}_bf16_batch_r$r" "CCLZ_LOSSLESS_ENCODE_WARPS=$w" --op codec --codec lossless --device gpu -d bf16 -b 1M -e 16M -f 2 -n 20 -w 5 --batch
  run "w${w}_bf16_each_r$r" "CCLZ_LOSSLESS_ENCODE_WARPS=$w" --op codec --codec lossless --device gpu -d bf16 -b 1M -e 16M -f 2 -n 20 -w 5
  run "w${w}_fp32_batch_r$r" "CCLZ_LOSSLESS_ENCODE_WARPS=$w" --op codec --codec lossless --device gpu -d fp32 -b 1M -e 16M -f 4 -n 20 -w 5 --batch
done; done
echo "bench a: $((SECONDS - t0)) s"
for w in 4 8; do for path in general staged; do for d in bf16 fp32; do
  run "cross_${d}_w${w}_$path" "CCLZ_LOSSLESS_ENCODE_WARPS=$w CCLZ_LOSSLESS_PATH=$path" --op codec --codec lossless --device gpu -d $d -b 4M -e 64M -f 2 -n 20 -w 5 --batch
done; done; done
echo "bench: $((SECONDS - t0)) s"
grep -E "^== |^ +[0-9]+ " "$OUT/bench.log"
(cd "$OUT" && tar -czf bench-json.tgz j_*.json && rm -f j_*.json)
