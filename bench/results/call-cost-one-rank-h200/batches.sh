# One GPU, one rank: cclz-perf's small calls against NCCL's own call, back to back (--batch).
#   bash bench/results/call-cost-one-rank-h200/batches.sh   # the device tool, carry .deps .data
set -u
O=$OUT
CCLZ_BUILD_TARGETS="cclz-perf" OUT=$O/b bash scripts/dev/device.sh build > $O/build.out 2>&1
echo "build exit $?"
tn=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH="$tn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
perf=build-device/tools/cclz-perf/cclz-perf
for op in allreduce allgather; do
  for codec in none fp8; do
    echo "== $op $codec"
    mpirun --allow-run-as-root -n 1 -x LD_LIBRARY_PATH \
      $perf --op $op --codec $codec --device gpu -d bf16 -b 1K -e 1M -f 8 -n 200 -w 20 --batch \
      --json $O/batches_${op}_${codec}.json 2>&1 | grep -v "^#   "
  done
done
