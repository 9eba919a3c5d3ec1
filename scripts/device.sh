#!/usr/bin/env bash
# One call on a GPU machine (../shared/MEASURING.md): build for the device, run every test (the GPU
# ones included), run the codec benchmarks, write logs and JSON to $OUT, short table last.
# Prepare on the workstation:
#   scripts/prepare-deps.sh            # .deps/: header-only libraries and googletest sources
#   scripts/prepare-data.sh            # .data/: the shared GPT tensors
# then run with carry [".deps", ".data"]:  bash scripts/device.sh [stage...]
# Stages: build tests codec lossless2 (default: build tests codec). lossless2: the lossless payload
# versions 1 and 2 side by side (bf16 4M..256M, fp32 256M, the real tensors). $OUT receives at most 8 files (the device tool's limit):
# summary.txt, device.log (build and tests), codec.log (benchmark tables), codec_*.json.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cclz-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=${*:-build tests codec}
build=build-device
perf=$build/tools/cclz-perf/cclz-perf
summary=$OUT/summary.txt
log=$OUT/device.log
: >"$summary"
: >"$log"

has() { [[ " $stages " == *" $1 "* ]]; }

if has build; then
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$summary"
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >>"$log" 2>&1 &&
    ninja -C $build >>"$log" 2>&1
  status=$?
  echo "build: exit $status" | tee -a "$summary"
  [ $status -eq 0 ] || { tail -40 "$log"; exit 1; }
fi

if has tests; then
  ctest --test-dir $build --output-on-failure -j"$(nproc)" >"$OUT/tests.tmp" 2>&1
  status=$?
  cat "$OUT/tests.tmp" >>"$log"
  echo "tests (all, gpu included): exit $status -- $(grep -E 'tests passed|tests failed' "$OUT/tests.tmp")" | tee -a "$summary"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" "$OUT/tests.tmp" | head -20 | tee -a "$summary"
  echo "gpu tests: $(ctest --test-dir $build -L gpu -N | tail -1)" >>"$summary"
  rm -f "$OUT/tests.tmp"
fi

if has codec; then
  : >"$OUT/codec.log"
  run() {  # run NAME ARGS...: one benchmark, its table to codec.log, its rows to codec_NAME.json
    local name=$1; shift
    echo "== $name: cclz-perf $*" >>"$OUT/codec.log"
    $perf "$@" --json "$OUT/codec_$name.json" >>"$OUT/codec.log" 2>&1
    echo "codec $name: exit $?" >>"$summary"
  }
  for dtype in bf16 fp16 fp32; do
    run "gaussian_$dtype" --op codec --device gpu -d $dtype -b 4M -e 256M -f 4 -n 20 -w 5
  done
  run randombits_bf16 --op codec --device gpu -d bf16 --data uniform-bits -b 256M -e 256M -n 10 -w 2
  run tensors_bf16 --op codec --device gpu --input .data/index.json -n 20 -w 5
fi

if has lossless2; then
  [ -f "$OUT/codec.log" ] || : >"$OUT/codec.log"
  v2run() {  # v2run NAME ARGS...: as run, one table per payload version, both in one JSON
    local name=$1; shift
    for version in 1 2; do
      echo "== $name v$version: cclz-perf $* --format-version $version" >>"$OUT/codec.log"
      $perf "$@" --format-version $version --json "$OUT/l2_${name}_v$version.json" >>"$OUT/codec.log" 2>&1
      echo "lossless2 $name v$version: exit $?" >>"$summary"
    done
  }
  v2run bf16 --op codec --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  v2run fp32 --op codec --device gpu -d fp32 -b 256M -e 256M -n 20 -w 5
  v2run tensors --op codec --device gpu --input .data/index.json -n 20 -w 5
fi

cat "$summary"
if [ -f "$OUT/codec.log" ]; then cat "$OUT/codec.log"; fi
! grep -qE "exit [1-9]" "$summary"  # the script fails if any stage did
