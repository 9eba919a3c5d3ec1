#!/usr/bin/env bash
# Tuning probe for the collectives over NCCL's socket transport on loopback: all-gather and
# reduce-scatter (none and fp8) at 64 and 256 MiB under a few NCCL point-to-point settings and
# piece sizes, each beside plain NCCL in the same run. Needs build-device (scripts/dev/device.sh
# build) and 2 or more GPUs. Usage: bash scripts/dev/coll-probe.sh ["ENV=V ..." ...]; every argument
# is one variant (a list of environment settings, "" for none). Tables go to $OUT/probe.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cclz-out}
mkdir -p "$OUT"
perf=build-device/tools/cclz-perf/cclz-perf
ngpu=$(nvidia-smi -L | wc -l)
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=("")
for variant in "${variants[@]}"; do
  envs=(-x NCCL_NVLS_ENABLE=0 -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1
        -x NCCL_SOCKET_IFNAME=lo)
  for kv in $variant; do envs+=(-x "$kv"); done
  for op in allgather reducescatter; do
    for codec in none fp8; do
      echo "== variant [$variant] $op $codec" >>"$OUT/probe.log"
      mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" "${envs[@]}" \
        $perf --op $op --codec $codec --device gpu -b 64M -e 256M -f 4 -n 5 -w 2 2>&1 |
        grep -E '^ +[0-9]' >>"$OUT/probe.log"
    done
  done
done
