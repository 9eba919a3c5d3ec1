#!/usr/bin/env bash
# Builds cclz and its tests and runs them. The CUDA kernels are built whenever nvcc is on the
# machine (so their compile errors show up even without a GPU); the GPU tests (ctest label "gpu")
# run only when nvidia-smi sees a GPU.
#   scripts/test.sh [extra ctest arguments, e.g. -R Lossless]
# The Python package's tests (python/tests, under mpirun) run when the Python that CMake finds has
# torch, mpi4py and pytest (pip install torch mpi4py pytest); CMake says so when they are off.
# Environment: CCLZ_BUILD_DIR (default build), CCLZ_SHARED_DATA (the real tensors; tests that
# need them skip without them).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh  # Debian packages the build needs, where missing
command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export PATH=/usr/local/cuda/bin:$PATH
build=${CCLZ_BUILD_DIR:-build}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$build"

select=(-LE gpu)
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  select=()  # a GPU: run everything
fi
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "${select[@]}" "$@"
