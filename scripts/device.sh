#!/usr/bin/env bash
# One call on a GPU machine (../shared/MEASURING.md): build for the device, run every test (the GPU
# ones included), run the codec benchmarks, write logs and JSON to $OUT, short table last.
# Prepare on the workstation:
#   scripts/prepare-deps.sh            # .deps/: header-only libraries and googletest sources
#   scripts/prepare-data.sh            # .data/: the shared GPT tensors
# then run with carry [".deps", ".data"]:  bash scripts/device.sh [stage...]
# Stages: build tests codec coll (default: build tests codec). $OUT receives at most 8 files (the
# device tool's limit): summary.txt, device.log (build and tests), codec.log (benchmark tables),
# codec_*.json (5 files); the coll stage adds coll.log and coll.json, so run it on its own:
#   bash scripts/device.sh build coll     (on a machine with 2 or more GPUs)
# coll: the NCCL collective tests under mpirun on every GPU, then the cclz-perf collective sweep
# (compressed beside plain NCCL) over NVLink and over NCCL's socket transport on loopback.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cclz-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=${*:-build tests codec}
[[ " $stages " == *" coll "* ]] && [[ " $stages " == *" codec "* ]] &&
  echo "note: codec and coll together write more than 8 files to \$OUT; run coll on its own" >&2
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

if has coll; then
  ngpu=$(nvidia-smi -L | wc -l)
  ranks() {  # ranks N CMD...: N processes, one GPU each (the programs pick rank % GPUs)
    local n=$1; shift
    mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" -x NCCL_NVLS_ENABLE "$@"
  }
  coll_log=$OUT/coll.log
  : >"$coll_log"
  # The NCCL tests: one process per GPU, every case compared with the host path.
  ranks "$ngpu" $build/tests/collective/nccl_tests --gtest_brief=1 >>"$coll_log" 2>&1
  echo "coll nccl_tests ($ngpu ranks): exit $?" | tee -a "$summary"
  if [ "$ngpu" -ge 4 ]; then
    ranks 2 $build/tests/collective/nccl_tests --gtest_brief=1 >>"$coll_log" 2>&1
    echo "coll nccl_tests (2 ranks): exit $?" | tee -a "$summary"
  fi
  mkdir -p "$OUT/.coll"
  socket=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo)
  sweep() {  # sweep NET NAME ARGS...: one cclz-perf run, its table to coll.log
    local net=$1 name=$2; shift 2
    local extra=()
    [ "$net" = socket ] && extra=("${socket[@]}")
    echo "== $net $name: cclz-perf $*" >>"$coll_log"
    ranks "$ngpu" "${extra[@]}" $perf --device gpu "$@" --json "$OUT/.coll/${net}_$name.json" \
      >>"$coll_log" 2>&1
    echo "coll $net $name: exit $?" >>"$summary"
  }
  sizes=(-b 64K -e 256M -f 4 -n 10 -w 3)
  for net in nvlink socket; do
    for op in allgather reducescatter allreduce; do
      sweep $net ${op}_none --op $op --codec none "${sizes[@]}"
      sweep $net ${op}_lossless --op $op --codec lossless "${sizes[@]}"
    done
    sweep $net allreduce_qgrad4 --op allreduce --codec qgrad --bits 4 "${sizes[@]}"
    sweep $net reducescatter_qgrad4 --op reducescatter --codec qgrad --bits 4 "${sizes[@]}"
    sweep $net allgather_qgrad8 --op allgather --codec qgrad --bits 8 "${sizes[@]}"
    sweep $net alltoall_lossless --op alltoall --codec lossless -b 64K -e 64M -f 16 -n 10 -w 3
    sweep $net sendrecv_lossless --op sendrecv --codec lossless -b 64K -e 64M -f 16 -n 10 -w 3
  done
  # One JSON array, each row tagged with its network.
  python3 - "$OUT/.coll" "$OUT/coll.json" <<'PY'
import json, os, sys
rows = []
for name in sorted(os.listdir(sys.argv[1])):
    net = name.split("_", 1)[0]
    try:
        for row in json.load(open(os.path.join(sys.argv[1], name))):
            row["network"] = net
            rows.append(row)
    except ValueError:
        pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
  rm -rf "$OUT/.coll"
fi

cat "$summary"
if [ -f "$OUT/codec.log" ]; then cat "$OUT/codec.log"; fi
if [ -f "$OUT/coll.log" ]; then grep -vE "^#  " "$OUT/coll.log" | tail -150; fi
! grep -qE "exit [1-9]" "$summary"  # the script fails if any stage did
