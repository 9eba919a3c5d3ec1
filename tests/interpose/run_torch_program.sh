#!/usr/bin/env bash
# libcclz_nccl.so under torch.distributed (scripts/dev/device.sh, stage interpose):
# torch_program.py with torchrun on every GPU, five times --
#   plain     as it is;
#   off       preloaded with CCLZ_INTERPOSE=0: every call forwarded;
#   adaptive  preloaded: adaptive cclz communicators;
#   forced    every eligible call compressed (CCLZ_INTERPOSE_FORCE=1);
#   reduce    the same with the reductions too (CCLZ_INTERPOSE_REDUCE=1)
# -- then check_runs.py: every data-movement result bit-identical to the plain run's, the
# reductions too where the drop-in leaves them to NCCL, no call failed in cclz, all-gathers ran
# compressed (which of torch's other calls reach NCCL outside a group, the table shows).
# Usage: run_torch_program.sh LIBCCLZ_NCCL OUT_FOLDER. Exit 77 with fewer than 2 GPUs.
set -uo pipefail
lib=$(realpath "$1") out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "$gpus" -lt 2 ]; then echo "skipped: $gpus GPUs, the program needs 2 or more"; exit 77; fi

run() {  # run NAME ENV...: torchrun with the environment, output in $out/NAME
  local name=$1; shift
  mkdir -p "$out/$name"
  env "$@" PYTHONUNBUFFERED=1 timeout 600 python3 -m torch.distributed.run --standalone \
    --nproc-per-node "$gpus" "$here/torch_program.py" "$out/$name" >"$out/$name/log.txt" \
    2>"$out/$name/err.txt"
  local status=$?
  cat "$out/$name"/cases.*.txt >"$out/$name/out.txt" 2>/dev/null
  local results failures
  results=$(grep -c '^case ' "$out/$name/out.txt")
  failures=$(grep -c ' FAILED$' "$out/$name/out.txt")
  echo "$name: exit $status ($results results, $failures failed)"
  [ $status -eq 0 ] || tail -20 "$out/$name/err.txt"
  return $status
}

failed=0
run plain || failed=1
run off LD_PRELOAD="$lib" CCLZ_INTERPOSE=0 CCLZ_INTERPOSE_DEBUG=1 || failed=1
run adaptive LD_PRELOAD="$lib" CCLZ_INTERPOSE_DEBUG=1 || failed=1
run forced LD_PRELOAD="$lib" CCLZ_INTERPOSE_DEBUG=1 CCLZ_INTERPOSE_FORCE=1 || failed=1
run reduce LD_PRELOAD="$lib" CCLZ_INTERPOSE_DEBUG=1 CCLZ_INTERPOSE_FORCE=1 \
  CCLZ_INTERPOSE_REDUCE=1 || failed=1
python3 "$here/check_runs.py" --compressed all-gather "plain:$out/plain" "off:$out/off:off" \
  "adaptive:$out/adaptive:cclz" "forced:$out/forced:cclz,forced" \
  "reduce:$out/reduce:cclz,forced,reduce" || failed=1
exit $failed
