#!/usr/bin/env bash
# The main job, on whatever hardware this machine has: installs the build dependencies, builds cclz
# (with its CUDA kernels when nvcc is there) and runs the codec benchmark on the real training
# tensors and on seeded Gaussian data, on the GPU if one is present, else on the CPU.
#   scripts/run.sh [extra cclz-perf flags]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target cclz-perf

device=cpu
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then device=gpu; fi
perf=build/tools/cclz-perf/cclz-perf
tensors=${CCLZ_SHARED_DATA:-../shared/data/gpt-small-tensors}
if [ -f "$tensors/index.json" ]; then
  "$perf" --op codec --device "$device" --input "$tensors/index.json" -n 5 -w 1 "$@"
else
  echo "(no real tensors at $tensors: set CCLZ_SHARED_DATA to the gpt-small-tensors folder)"
fi
if [ "$device" = gpu ]; then
  "$perf" --op codec --device gpu -d bf16 -b 4M -e 256M -f 4 "$@"
else
  "$perf" --op codec --device cpu -d bf16 -b 64K -e 16M -f 4 -n 3 -w 1 "$@"
fi

# A compressed all-reduce beside the plain one, one process per rank under mpirun: every GPU when
# there are two or more, else two CPU ranks over MPI. (cclz-perf takes collective ops when it was
# built with MPI; mpirun comes from Debian's openmpi-bin.)
command -v mpirun >/dev/null || { echo "(no mpirun: the collective benchmark is skipped)"; exit 0; }
mpi=(mpirun --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE=0)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
gpus=0
[ "$device" = gpu ] && gpus=$(nvidia-smi -L | wc -l)
if [ "$gpus" -ge 2 ]; then
  "${mpi[@]}" -n "$gpus" "$perf" --op allreduce --codec qgrad --device gpu -b 1M -e 256M -f 16
else
  "${mpi[@]}" -n 2 "$perf" --op allreduce --codec qgrad --device cpu -b 64K -e 4M -f 4 -n 3 -w 1
fi
