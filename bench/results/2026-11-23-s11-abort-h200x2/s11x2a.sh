#!/usr/bin/env bash
# Session 11, 2x H200, first call: why ncclCommAbort hangs after three deferred mismatch kinds.
# Each disabled NcclDeferredCheck case under four variants (abort order control-first (today),
# data-first, concurrent; NCCL_RUNTIME_CONNECT=0), traced; a case still running after 15 s gets
# every thread's stack of both ranks (gdb), then is killed.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s; gdb: $(which gdb)"
B=build-device
for t in RejectedArguments CountOnLosslessFrames PlainDataAgainstLosslessFrames; do
  for v in control-first data-first concurrent rc0; do
    order=$v; rc=1; [ $v = rc0 ] && { order=control-first; rc=0; }
    log=$OUT/$t.log
    echo "=================== $t variant $v" >> $log
    mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
      -x CCLZ_TRACE=1 -x CCLZ_ABORT_ORDER=$order -x NCCL_RUNTIME_CONNECT=$rc \
      -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,P2P,PROXY \
      $B/tests/collective/nccl_tests --gtest_also_run_disabled_tests \
      --gtest_filter="NcclDeferredCheck.DISABLED_$t" > /tmp/t.log 2>&1 &
    mp=$!
    for i in $(seq 30); do kill -0 $mp 2>/dev/null || break; sleep 0.5; done
    hung=no
    if kill -0 $mp 2>/dev/null; then
      hung=yes
      [ $v = control-first ] && for pid in $(pgrep -f "bin/nccl_tests|collective/nccl_tests" | grep -v $mp); do
        [ "$(cat /proc/$pid/comm)" = nccl_tests ] || continue
        echo "----- stacks of pid $pid" >> /tmp/t.log
        timeout 20 gdb -p $pid -batch -ex "thread apply all bt 25" >> /tmp/t.log 2>&1
      done
      kill -9 $mp; pkill -9 -f collective/nccl_tests; sleep 1
    fi
    wait $mp 2>/dev/null
    echo "$t $v: hung=$hung ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/t.log | head -2 | tr '\n' ' ')"
    grep -vE "NCCL INFO (Channel|Connected|[0-9]+ coll channels|comm 0x.* rank [0-9]+ nRanks|Trees|P2P Chunksize|Enabled NCCL Func|CC Off|NCCL_|ncclCommInitRankConfig comm|Setting affinity|NVLS|Bootstrap|cudaDriverVersion|NET/|Using network|Init timings|MNNVL|PXN|TUNER|PROFILER|Assigned NET|threadThresholds|Ring [0-9]|Tree [0-9]|Pattern|CPU/|Check P2P|Comm config)" /tmp/t.log | cut -c1-300 >> $log
  done
done
echo "total: $(el) s"
