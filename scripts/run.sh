#!/usr/bin/env bash
# The main job, on whatever hardware this machine has: builds cclz, then trains the same GPT twice,
# uncompressed and with every parallel dimension's traffic compressed (--policy all), and compares
# the two runs (train and validation loss against tokens, tokens/s; a PNG and a markdown table).
#   With two or more GPUs: one rank per GPU (torchrun, NCCL), the small model (86M parameters),
#     tensor parallel over pairs of GPUs and data parallel across the pairs, 300 steps.
#   Otherwise: two CPU ranks (mpirun, MPI), the tiny model, tensor + sequence parallel, 300 steps;
#     a few minutes on two cores. CPU tokens/s say little (the codecs run their CPU reference
#     between processes of one machine); the loss curves are the point there.
#   scripts/run.sh [extra python -m cclz.train flags]
# Environment: CCLZ_RUN_DIR, where the runs and the comparison go (default runs/<date-time>);
# CCLZ_BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
command -v nvcc >/dev/null || [ ! -x /usr/local/cuda/bin/nvcc ] || export PATH=/usr/local/cuda/bin:$PATH
build=${CCLZ_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target cclz

# The trainer needs torch and mpi4py; matplotlib draws the plot (without it: the table only).
python3 -c "import torch, mpi4py" 2>/dev/null || python3 -m pip install -q torch mpi4py
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install -q matplotlib ||
  echo "(matplotlib could not be installed: the comparison is a table only)"
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export CCLZ_LIBRARY=$(cd "$build/src" && pwd)/libcclz.so  # this build's, not another build*/

out=${CCLZ_RUN_DIR:-runs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
gpus=0
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | wc -l)
fi
if [ "$gpus" -ge 2 ]; then
  layout=(--tp 2)  # data parallel over the pairs
  [ $((gpus % 2)) -eq 0 ] || layout=(--dp "$gpus" --batch $((8 * gpus)))
  launch=(env NCCL_NVLS_ENABLE=0
          python3 -m torch.distributed.run --nproc-per-node "$gpus"
          -m cclz.train --preset small "${layout[@]}" --steps 300)
else
  mpi=(mpirun --oversubscribe --bind-to none -n 2)
  [ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
  launch=("${mpi[@]}" python3 -m cclz.train --preset tiny --tp 2 --steps 300)
fi
for policy in none all; do
  "${launch[@]}" --policy "$policy" --log-every 25 --eval-every 50 --out "$out/$policy" "$@"
done
python3 -m cclz.train compare "$out/none" "$out/all" --out "$out"
echo "results: $out (compare.png, compare.md, none/log.jsonl, all/log.jsonl)"
