# One GPU, one rank: what cclz's call path adds to NCCL's own call, back to back (cclz-perf
# --batch), with each CCLZ_CHECK_CALLS mode of CHECKS (default: "default", the library's own
# choice; the older table: CHECKS="deferred first"). Writes $OUT/<op>_<codec>_<mode>.json.
#   bash bench/results/call-cost-one-rank-h200/run.sh     # the device tool, carry .deps .data
set -u
O=$OUT
CCLZ_BUILD_TARGETS="cclz-perf" OUT=$O/b bash scripts/dev/device.sh build > $O/build.out 2>&1
echo "build exit $?"
tn=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null)/lib
export LD_LIBRARY_PATH="$tn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
perf=build-device/tools/cclz-perf/cclz-perf
for op in allreduce allgather; do
  for codec in none fp8; do
    for mode in ${CHECKS:-default}; do
      echo "== $op $codec CCLZ_CHECK_CALLS=$mode"
      env=()
      [ "$mode" != default ] && env=(-x CCLZ_CHECK_CALLS="$mode")
      mpirun --allow-run-as-root -n 1 -x LD_LIBRARY_PATH "${env[@]}" \
        $perf --op $op --codec $codec --device gpu -d bf16 -b 1K -e 1M -f 8 -n 200 -w 20 --batch \
        --json $O/${op}_${codec}_$mode.json 2>&1 | grep -v "^#   "
    done
  done
done
