#!/usr/bin/env bash
# One call on a GPU machine (../shared/MEASURING.md): build for the device, run the GPU tests, run
# the codec benchmarks, write logs and JSON to $OUT, short table last. Prepare on the workstation:
#   scripts/prepare-deps.sh            # .deps/: header-only libraries and googletest sources
#   scripts/prepare-data.sh            # .data/: the shared GPT tensors
# then run with carry [".deps", ".data"]:  bash scripts/device.sh [stage...]
# Stages: build tests codec (default: all of them).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cclz-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=${*:-build tests codec}
build=build-device
perf=$build/tools/cclz-perf/cclz-perf
summary=$OUT/summary.txt
: >"$summary"

has() { [[ " $stages " == *" $1 "* ]]; }

if has build; then
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv | tee "$OUT/gpu.txt"
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >"$OUT/build.log" 2>&1 &&
    ninja -C $build >>"$OUT/build.log" 2>&1
  status=$?
  echo "build: exit $status" | tee -a "$summary"
  [ $status -eq 0 ] || { tail -40 "$OUT/build.log"; exit 1; }
fi

if has tests; then
  ctest --test-dir $build --output-on-failure -j4 >"$OUT/tests.log" 2>&1
  echo "tests (all, gpu included): exit $? -- $(grep -E 'tests passed|tests failed' "$OUT/tests.log")" | tee -a "$summary"
fi

if has codec; then
  for dtype in bf16 fp16 fp32; do
    $perf --op codec --device gpu -d $dtype -b 4M -e 256M -f 4 -n 20 -w 5 \
      --json "$OUT/codec_gaussian_$dtype.json" >"$OUT/codec_gaussian_$dtype.log" 2>&1
    echo "codec gaussian $dtype: exit $?" >>"$summary"
  done
  $perf --op codec --device gpu -d bf16 --data uniform-bits -b 256M -e 256M -n 10 -w 2 \
    --json "$OUT/codec_randombits_bf16.json" >"$OUT/codec_randombits_bf16.log" 2>&1
  $perf --op codec --device gpu --input .data/index.json -n 20 -w 5 \
    --json "$OUT/codec_tensors_bf16.json" >"$OUT/codec_tensors_bf16.log" 2>&1
  echo "codec tensors: exit $?" >>"$summary"
fi

cat "$summary"
for f in "$OUT"/codec_*.log; do [ -f "$f" ] && { echo "== $(basename "$f")"; cat "$f"; }; done
