#!/usr/bin/env bash
# where the staged lossless kernels stop paying, per direction and
# dtype (CCLZ_LOSSLESS_PATH=general against staged, one build, interleaved).
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
t0=$SECONDS
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
  -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >"$OUT/build.log" 2>&1 &&
  ninja -C build-device -j16 cclz-perf >>"$OUT/build.log" 2>&1
echo "build: exit $? after $((SECONDS - t0)) s"
P=build-device/tools/cclz-perf/cclz-perf
: >"$OUT/bench.log"
for mode in batch each; do
  b=; [ $mode = batch ] && b=--batch
  for sweep in "-b 8M -e 64M -f 2" "-b 12M -e 48M -f 2"; do
    for path in general staged; do
      echo "== bf16 $mode $path: $sweep" >>"$OUT/bench.log"
      CCLZ_LOSSLESS_PATH=$path $P --op codec --codec lossless --device gpu -d bf16 $sweep -n 20 -w 5 $b </dev/null >>"$OUT/bench.log" 2>&1
    done
  done
  for sweep in "-b 8M -e 256M -f 2" "-b 12M -e 192M -f 2"; do
    for path in general staged; do
      echo "== fp32 $mode $path: $sweep" >>"$OUT/bench.log"
      CCLZ_LOSSLESS_PATH=$path $P --op codec --codec lossless --device gpu -d fp32 $sweep -n 20 -w 5 $b </dev/null >>"$OUT/bench.log" 2>&1
    done
  done
  echo "$mode: $((SECONDS - t0)) s"
done
grep -E "^== |^ +[0-9]+ " "$OUT/bench.log"
