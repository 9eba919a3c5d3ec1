#!/usr/bin/env bash
# libcclz_nccl.so on GPUs (ctest: interpose_nccl, labels gpu;nccl;interpose): nccl_program.cpp,
# which checks its own results, four times -- as it is; preloaded (adaptive cclz
# communicators); preloaded with every eligible call compressed (CCLZ_INTERPOSE_FORCE=1); and so
# with the reductions too (CCLZ_INTERPOSE_REDUCE=1) -- then check_runs.py: every data-movement
# result bit-identical to the plain run's, the reductions too where the drop-in leaves them to
# NCCL, no call failed in cclz, and all-gather, all-to-all, send and recv ran compressed.
# Usage: run_nccl_program.sh PROGRAM LIBCCLZ_NCCL; the runs' output goes to
# $CCLZ_INTERPOSE_OUT/nccl when that is set, else to a temporary folder.
set -uo pipefail
program=$1 lib=$2
here=$(cd "$(dirname "$0")" && pwd)
out=${CCLZ_INTERPOSE_OUT:+$CCLZ_INTERPOSE_OUT/nccl}
out=${out:-$(mktemp -d)}
mkdir -p "$out"

run() {  # run NAME ENV...: the program with the environment, output in $out/NAME
  local name=$1; shift
  mkdir -p "$out/$name"
  env "$@" timeout 600 "$program" >"$out/$name/out.txt" 2>"$out/$name/err.txt"
  local status=$?
  echo "$name: exit $status ($(tail -1 "$out/$name/out.txt"))"
  return $status
}

run plain
status=$?
[ $status -eq 77 ] && exit 77
[ $status -eq 0 ] || { tail -20 "$out/plain/err.txt"; exit 1; }
failed=0
for spec in "adaptive:" "forced:CCLZ_INTERPOSE_FORCE=1" \
            "reduce:CCLZ_INTERPOSE_FORCE=1 CCLZ_INTERPOSE_REDUCE=1"; do
  name=${spec%%:*} settings=${spec#*:}
  # shellcheck disable=SC2086
  run "$name" LD_PRELOAD="$lib" CCLZ_INTERPOSE_DEBUG=1 $settings ||
    { failed=1; tail -20 "$out/$name/err.txt"; }
done
python3 "$here/check_runs.py" --compressed all-gather,all-to-all,send,recv \
  "plain:$out/plain" "adaptive:$out/adaptive:cclz" "forced:$out/forced:cclz,forced" \
  "reduce:$out/reduce:cclz,forced,reduce" || failed=1
exit $failed
