#!/usr/bin/env bash
# One call on a GPU machine (../shared/MEASURING.md): build for the device, run the GPU tests, run
# benchmarks, write logs and JSON to $OUT, short table last.
# Prepare on the workstation:
#   scripts/dev/prepare-deps.sh            # .deps/: header-only libraries and googletest sources
#   scripts/dev/prepare-data.sh            # .data/: the shared GPT tensors
# then run with carry [".deps", ".data"]:  bash scripts/dev/device.sh [stage...]
# Stages (default: build tests codec):
#   build      configure and build build-device/ for sm_90a (CCLZ_BUILD_TARGETS: only those
#              ninja targets, e.g. "cclz cclz_fastcall" before train).
#   tests      the quick GPU set (ctest -L quick), with the count of cases that ran.
#   fulltests  every GPU test (ctest -L gpu: quick, large, the NCCL suites on 2 or more GPUs).
#   ncclsolo   (2 or more GPUs; runs on 2) the NCCL adaptive suite alone on the GPUs, repeated
#              (CCLZ_SOLO_REPEAT times, default 20) under a timeout, so that a hang fails the stage
#              instead of holding the machine; then the deferred-check and error cases, the
#              adaptive suite with CCLZ_CHECK_CALLS=1 and the asyncCalls tests (also on one
#              hardware queue, CUDA_DEVICE_MAX_CONNECTIONS=1) once each; a table
#              last, every run's output in ncclsolo.log. Without build among the stages it builds
#              only the NCCL test programs.
#   python     (2 or more GPUs) the Python package's tests over NCCL, on 2 and 4 ranks.
#   nccltests  (2 or more GPUs) NVIDIA's nccl-tests with -c 1, plain and under the NCCL drop-in
#              (their source in .deps/nccl-tests; skipped without it).
#   pybench    the Python call's overhead over C (2 ranks, or 1 on a machine of one GPU); with
#              4 GPUs the DDP hooks (DDP, bf16_compress, PowerSGD, cclz) over two emulated nodes.
#   trainsmoke (2 or more GPUs; runs on 2) cclz.train for 20 steps of each policy on the small
#              model (and of TP2 with --overlap), then 4 steps of the 1.3B model on tp 2, to
#              catch errors (~2 minutes).
#   train      (4 GPUs) issue 35's table: the 1.3B GPT as TP4, TP2 x DP2 and TP2 x PP2 over two
#              emulated nodes and over NVLink, uncompressed beside the best policy (and all),
#              the same tokens, 20 steps each; TP4 over NVLink also with --overlap (issue 37);
#              each pair compared; a table last (~8 minutes).
#              On 2 GPUs: TP2, DP2 and PP2 each over two emulated nodes of one GPU.
#              CCLZ_TRAIN_ONLY="NAME ..." runs only the launches named (tp4-nodes,
#              tp4-nodes-flat: TP4 over the nodes with CCLZ_TWO_LEVEL=0, tp4-nodes-overlap:
#              with --overlap and tp-fp8 alone, tp4-nvlink,
#              tp4-nvlink-overlap, tp4-nvlink-overlap-ce (CCLZ_OVERLAP_COPY=auto),
#              tp4-nvlink-fusedce (CCLZ_FUSED=ce),
#              tp2dp2-nodes, ...; on 2 GPUs also tp2-nvlink, tp2-nvlink-fusedce,
#              tp2-nvlink-overlap(-ce), tp2-nodes-overlap).
#   trainlong  (2 or 4 GPUs) the loss target: the small model for 2,400 steps, uncompressed
#              beside its policies (TP2, PP2 on 2 GPUs; TP2 x DP2, TP2 x PP2 with all on 4), and
#              TP with E4M3, and on 2 GPUs TP's codec on its gathers alone and on its reductions
#              alone; a pair takes ~5 minutes on 2 GPUs, so name one or two per call with
#              CCLZ_TRAINLONG_ONLY="NAME ..." (long-tp2, long-pp2, long-tp2-gathers, ...,
#              tp_grad_error);
#              CCLZ_TRAIN_STEPS sets the length.
#              Both after build: bash scripts/dev/device.sh build trainsmoke, then
#              bash scripts/dev/device.sh train in a call of its own.
#   codec      the three codecs' speed on Gaussian data and the real tensors, 4-256 MiB.
#   lpath      the lossless kernel families (CCLZ_LOSSLESS_PATH general, staged, auto) side by side.
#   lsplit     the staged lossless encoder with auto, 2 and 4 warps per chunk side by side.
#   fp8, qgrad each codec's options and the real tensors.
#   coll, collsock (2 or more GPUs): the NCCL collective tests under mpirun, then the cclz-perf
#              collective sweep, compressed beside plain NCCL, over NVLink (coll) and over NCCL's
#              socket transport on loopback (collsock, the stand-in for a slow network);
#              CCLZ_SWEEP_ARGS: more cclz-perf options for the sweep (--batch: nccl-tests' timing).
#   collnodes  (4 GPUs) the trainer's TP calls over two emulated nodes of two GPUs: fp8 (INT8)
#              all-gather and reduce-scatter beside plain NCCL, 16-256 MiB, three piece sizes.
#   twolevel   (4 GPUs) the two-level fp8 all-gather and reduce-scatter (CCLZ_TWO_LEVEL=1) over
#              two emulated nodes: the NCCL collective tests with it (device bytes against the
#              host path's), then the collnodes sweep two-level beside flat, each beside NCCL.
#   adapt      (2 or more GPUs) adaptive calls on and off side by side, NVLink and socket.
#   sharedgpu  (any GPUs) the socket transport with more ranks than GPUs: CCLZ_RANKS ranks (4),
#              each its own emulated node (bench/python/node_per_rank.sh), under MPS; the parts
#              of CCLZ_SHARED_PARTS ("tests coll adapt"; also "timeline"): nccl_tests suite by
#              suite on 2 and N ranks (CCLZ_SHARED_TIMEOUT each, 90 s), the collsock sweep, the
#              adapt sweep's socket half (ADAPT_SIZES: its sizes), one call's timeline at 64 MiB.
#   ncclwin    (2 or more GPUs) frames in NCCL symmetric windows with zero-CTA communicators,
#              beside the default, over NVLink.
#   check      (2 or more GPUs) what the call check costs over NVLink, a traced run in trace.log.
#   fused      (2 or more GPUs) the fused NVLink fp8 all-gather and reduce-scatter (and the
#              lossless all-gather on the kernel paths), each path of
#              CCLZ_FUSED_MODES (default "1 direct ce": frames stored by a kernel, by the
#              encodes themselves, copied by the copy engines): their tests (nccl_fused_tests) on
#              2 and, where there are 4 GPUs, 4
#              ranks, each under a timeout (a hang in its barriers fails the stage), then each
#              op's sweep (with ce also its calls queued anew, CCLZ_FUSED_GRAPHS=0, beside
#              its graph replays) 4 - 256 MiB (CCLZ_FUSED_MAX=1G: to 1 GiB, whose checks on the CPU take
#              minutes) over NVLink, nccl-tests' timing: each fused path, and the
#              codec's pipeline, each beside plain NCCL (and the qgrad all-reduce with error
#              feedback, pipeline and copy engines); a short table per op; then each op's
#              timeline at 64 MiB (CCLZ_TIMELINE=1). CCLZ_FUSED_ARGS: more cclz-perf options for
#              the sweeps (--piece-bytes 16M); CCLZ_FUSED_ROWS=4096: the fp8 sweeps once more with
#              that row length given (the trainer's case); CCLZ_FUSED_TESTS=0: no tests.
#              Without build among the stages it builds only nccl_fused_tests and cclz-perf.
#   overlap    (2 or more GPUs) the overlapped TP GEMMs' device path: nccl_overlap_tests on 2
#              and 4 ranks, then bench/python/overlap_gemm.py over NVLink (CCLZ_OVERLAP_NODES=1:
#              also over two emulated nodes; CCLZ_OVERLAP_ARGS: its options), then one shape's
#              cclz-perf --op ag_gemm and gemm_rs, and one shape's timeline (CCLZ_TIMELINE=1).
#              Without build among the stages it builds only nccl_overlap_tests, libcclz and
#              cclz-perf.
#   overlapnodes (4 GPUs) the overlapped GEMMs across two emulated nodes of two GPUs:
#              nccl_overlap_tests there (the fp8 reduce-scatter two-level), then
#              bench/python/overlap_gemm.py with the two-level reduce-scatter beside the direct
#              one (CCLZ_TWO_LEVEL=0); after overlap in the same call.
#   overlapce  (2 or more GPUs) the overlapped GEMMs with copy-engine transfers
#              (CCLZ_OVERLAP_COPY=ce): nccl_overlap_tests on 2 and 4 ranks, the Python
#              benchmark (overlap_ce.json) and cclz-perf --op ag_gemm|gemm_rs, as in overlap.
#              CCLZ_OVERLAP_PUSH=inturn: the all-gather's copies one peer after another
#              (overlap_ce_inturn.json).
#   interpose  (2 or more GPUs) the LD_PRELOAD drop-in libcclz_nccl.so: its CPU tests, then an
#              NCCL program and a torch.distributed program, each as it is and preloaded, results
#              compared bit for bit (tests/interpose); every run's table in interpose.log. After
#              build, in a call of its own: bash scripts/dev/device.sh interpose.
# $OUT receives at most 8 files (the device tool's limit): summary.txt, device.log (build and
# tests), bench.log (every benchmark's table, in order) and bench.json (one object per benchmark
# run: stage, name, the command and its rows), whatever stages run; train and trainsmoke add
# train.tgz and train.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cclz-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=${*:-build tests codec}
build=build-device
perf=$build/tools/cclz-perf/cclz-perf
summary=$OUT/summary.txt
log=$OUT/device.log
: >"$summary"
: >"$log"

has() { [[ " $stages " == *" $1 "* ]]; }

# One NCCL for every program of a run: torch's where torch has one (its Python processes load it
# whatever libcclz was linked against, and NCCL's device API needs the headers' own release;
# the machines' system NCCL is another release), else the system's.
nccl_choice=""
if torch_nccl=$(python3 -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])" 2>/dev/null); then
  nccl_choice="-DCCLZ_NCCL_FROM_TORCH=ON"
  # The programs find it by their RUNPATH; ahead of any other on LD_LIBRARY_PATH too.
  export LD_LIBRARY_PATH="$torch_nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# end_when_silent PID LOG SECONDS: returns when PID ends; ends it first (TERM, then KILL 15 s
# later) once LOG has not grown for SECONDS, and then returns 1 (a hang, not a slow run).
end_when_silent() {
  local pid=$1 log=$2 silence=$3
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    if [ $(($(date +%s) - $(stat -c %Y "$log"))) -gt "$silence" ]; then
      kill -TERM "$pid" 2>/dev/null  # timeout passes it on to mpirun, which ends the ranks
      sleep 15
      kill -KILL "$pid" 2>/dev/null
      return 1
    fi
  done
  return 0
}

if has build; then
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$summary"
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a $nccl_choice \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >>"$log" 2>&1 &&
    ninja -C $build ${CCLZ_BUILD_TARGETS:-} >>"$log" 2>&1
  status=$?
  echo "build: exit $status ($(grep -h '^CCLZ_NCCL_LIBRARY:' $build/CMakeCache.txt))" | tee -a "$summary"
  [ $status -eq 0 ] || { tail -40 "$log"; exit 1; }
fi

# tests: the quick set (ctest -L quick: every GPU case but the largest messages, one device call);
# fulltests: every GPU test (labels gpu: quick, large, and the NCCL suites on 2 or more GPUs).
# Both report the gtest cases that ran against those selected (scripts/dev/test_counts.py).
gpu_tests() {  # gpu_tests NAME CTEST-SELECTION...
  local name=$1; shift
  local xml=$OUT/.xml-$name
  rm -rf "$xml"
  CCLZ_TEST_XML_DIR=$xml ctest --test-dir $build --output-on-failure -j"$(nproc)" "$@" \
    >"$OUT/tests.tmp" 2>&1
  local status=$?
  cat "$OUT/tests.tmp" >>"$log"
  echo "$name (ctest $*): exit $status -- $(grep -E 'tests passed|tests failed' "$OUT/tests.tmp")" | tee -a "$summary"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" "$OUT/tests.tmp" | head -20 | tee -a "$summary"
  python3 scripts/dev/test_counts.py $build "$xml" "$@" 2>&1 | tee -a "$summary"
  echo "$name counts: exit ${PIPESTATUS[0]}" >>"$summary"
  rm -rf "$OUT/tests.tmp" "$xml"
}
if has tests; then gpu_tests tests -L quick; fi

# python: the Python package's tests on GPUs (CCLZ_TEST_DEVICE=cuda: one GPU per MPI rank, NCCL),
# on 2 ranks and, where there are 4 GPUs, on 4; against this build's libcclz.
if has python; then
  gpus=$(nvidia-smi -L | wc -l)
  for ranks in ${CCLZ_PYTHON_RANKS:-2 4}; do
    [ "$ranks" -le "$gpus" ] || continue
    # test_cuda.py apart and last: a failed capture leaves torch's CUDA state unusable.
    status=0
    for files in "python/tests --ignore=python/tests/test_cuda.py" python/tests/test_cuda.py; do
      CCLZ_TEST_DEVICE=cuda PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so \
        timeout 900 mpirun --allow-run-as-root --oversubscribe -n $ranks \
        python3 -m pytest -q -p no:cacheprovider -rfEs $files >>"$OUT/python.tmp" 2>&1 || status=1
    done
    cat "$OUT/python.tmp" >>"$log"
    echo "python tests, $ranks GPUs: exit $status -- $(grep -E '[0-9]+ (passed|failed)' "$OUT/python.tmp" | sort | uniq -c | tr '\n' ' ')" | tee -a "$summary"
    grep -E "^(FAILED|ERROR)" "$OUT/python.tmp" | sort -u | head -20 | tee -a "$summary"
    rm -f "$OUT/python.tmp"
  done
fi
# The fused path's tests (label fused) run in the stage fused until they have passed on GPUs.
if has fulltests; then gpu_tests fulltests -L gpu -LE fused; fi

# ncclsolo: the NCCL suites' cases that drive the checking thread hardest, alone on 2 GPUs: the
# adaptive suite (trials, settling, feedback, device-wide waits between checked calls) repeated,
# each run under a timeout, and a table of what passed. A run that times out is run once more,
# traced (CCLZ_TRACE=1), and the trace's end kept in ncclsolo.log.
if has ncclsolo; then
  if ! has build; then
    cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a $nccl_choice \
      -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >>"$log" 2>&1 &&
      ninja -C $build nccl_tests nccl_async_tests >>"$log" 2>&1
    status=$?
    echo "ncclsolo build (nccl_tests, nccl_async_tests): exit $status" | tee -a "$summary"
    [ $status -eq 0 ] || { tail -40 "$log"; exit 1; }
  fi
  repeat=${CCLZ_SOLO_REPEAT:-20}
  solo=$OUT/ncclsolo.log
  : >"$solo"
  table=()
  # solorun NAME SECONDS REPEAT [VAR=VALUE...] -- PROGRAM ARGS...: the program on 2 ranks, ended
  # when it has run SECONDS or printed nothing for 90 s (a normal case prints within ~15 s: a
  # silence that long is a hang); one row of the table. Fails when it had to be ended.
  solorun() {
    local name=$1 secs=$2 rep=$3; shift 3
    local envs=()
    while [ "$1" != -- ]; do envs+=(-x "$1"); shift; done
    shift
    echo "== $name (${envs[*]-}): $* --gtest_repeat=$rep, at most ${secs}s" >>"$solo"
    local begin=$SECONDS hung=no
    : >"$OUT/solo.tmp"
    timeout -k 10 "$secs" mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 \
      -x NCCL_NVLS_ENABLE ${envs[@]+"${envs[@]}"} "$@" --gtest_color=no --gtest_repeat="$rep" \
      >"$OUT/solo.tmp" 2>&1 &
    local pid=$!
    end_when_silent $pid "$OUT/solo.tmp" 90 || hung=yes
    wait $pid
    local status=$? took=$((SECONDS - begin))
    { [ $status -eq 124 ] || [ $status -eq 137 ]; } && hung=yes
    cat "$OUT/solo.tmp" >>"$solo"
    # Rank 0 prints every case; rank 1 (gtest's brief mode) its failures only.
    local per ok failed
    per=$(grep -m1 -oE 'Running [0-9]+ tests?' "$OUT/solo.tmp" | grep -oE '[0-9]+')
    ok=$(grep -cE '^\[       OK \]' "$OUT/solo.tmp")
    failed=$(grep -cE '^\[  FAILED  \] .*\([0-9]+ ms\)$' "$OUT/solo.tmp")
    table+=("$(printf '%-36s %7s %9s %6s %4s %4s %5s' "$name" "$rep" \
      "$ok/$((${per:-0} * rep))" "$failed" "$hung" "$status" "$took")")
    echo "ncclsolo $name: exit $status" >>"$summary"
    rm -f "$OUT/solo.tmp"
    [ $hung = no ]
  }
  solotests=$build/tests/collective/nccl_tests
  solorun "NcclAdaptive.* x$repeat" $((20 * repeat + 60)) "$repeat" -- \
    $solotests --gtest_filter='NcclAdaptive.*' ||
    solorun "traced FeedbackCalls* (after a hang)" 120 1 CCLZ_TRACE=1 -- \
      $solotests --gtest_filter='NcclAdaptive.FeedbackCalls*'
  solorun "NcclDeferredCheck.*:NcclErrors.*" 240 1 -- \
    $solotests --gtest_filter='NcclDeferredCheck.*:NcclErrors.*'
  solorun "NcclAdaptive.*, CCLZ_CHECK_CALLS=1" 120 1 CCLZ_CHECK_CALLS=1 -- \
    $solotests --gtest_filter='NcclAdaptive.*'
  solorun "nccl_async_tests" 180 1 -- $build/tests/collective/nccl_async_tests
  solorun "nccl_async_tests, one hardware queue" 180 1 CUDA_DEVICE_MAX_CONNECTIONS=1 -- \
    $build/tests/collective/nccl_async_tests
  gzip -f "$solo"
  {
    echo "ncclsolo on 2 GPUs ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)):"
    printf '%-36s %7s %9s %6s %4s %4s %5s\n' run repeats ok/cases failed hung exit s
    printf '%s\n' "${table[@]}"
  } | tee -a "$summary"
fi

# pybench: the Python package's benchmarks: its overhead per call over the C API (2 GPUs), and
# (4 GPUs) the DDP hooks over two emulated nodes: DDP's own all-reduce, bf16_compress, PowerSGD,
# cclz qgrad4 and lossless, time per step and loss (bench/python/).
if has pybench; then
  { ls $build/src/_fastcall*.so 2>/dev/null ||
      echo "no cclz._fastcall in $build/src (no Python headers?): calls through ctypes"; } |
    tee -a "$summary"
  # Two ranks where there are two GPUs; one on a machine of one (the overhead is the host's).
  CCLZ_RANKS=$(( $(nvidia-smi -L | wc -l) >= 2 ? 2 : 1 )) \
    bench/python/call_overhead.sh $build "$OUT/overhead" >>"$log" 2>&1
  echo "pybench call overhead: exit $?" | tee -a "$summary"
  cat "$OUT/overhead/call_overhead.md" 2>/dev/null | tee -a "$summary"
  if [ "$(nvidia-smi -L | wc -l)" -ge 4 ]; then
    PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so timeout 900 \
      mpirun --allow-run-as-root --oversubscribe -n 4 bench/python/two_nodes.sh \
      python3 bench/python/ddp_hooks.py --json "$OUT/ddp_hooks.json" ${CCLZ_DDP_ARGS:-} \
      >"$OUT/ddp_hooks.log" 2>&1
    echo "pybench ddp hooks, 2 emulated nodes: exit $?" | tee -a "$summary"
    grep '^{' "$OUT/ddp_hooks.log" | tee -a "$summary"
  fi
  (cd "$OUT" && tar czf pybench.tgz overhead ddp_hooks.log 2>/dev/null; rm -rf overhead)
fi

# train, trainsmoke: cclz.train (docs/train.md) on the GPUs. Each launch is one mpirun of
# `python -m cclz.train --policy none,BEST[,all]`: the policies one after the other in one process
# (the same model, batch, steps and tokens), in run folders under one temporary folder, packed
# into $OUT/train.tgz (logs, log.jsonl per run, compare.md and compare.png per pair); the rows in
# $OUT/train.json, the short table last in summary.txt. A launch ends when it has run its time
# (CCLZ_TRAIN_TIMEOUT, 200 s; trainsmoke 90 s) or printed nothing for CCLZ_TRAIN_SILENCE s (90: a
# hang); launches that no longer fit the stage's budget (CCLZ_TRAIN_BUDGET s, train 500,
# trainsmoke 150; less than 45 or 20 s left) are skipped, and say so. CCLZ_TRAIN_STEPS (20) and
# CCLZ_TRAIN_LOG_EVERY (5) set the length: tokens/s is the median of the logged intervals after
# the first (warm-up, the adaptive trials). CCLZ_TRAIN_DEVICE=cpu runs the same commands on CPU
# ranks with the tiny model (a dry run of the stage's logic: bash scripts/dev/device.sh train with
# OUT and CCLZ_LIBRARY set). CCLZ_CHECK_CALLS, CCLZ_ADAPTIVE and CCLZ_FUSED pass through when set.
if has train || has trainsmoke || has trainlong; then
  tdev=${CCLZ_TRAIN_DEVICE:-cuda}
  export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
  export CCLZ_LIBRARY=${CCLZ_LIBRARY:-$PWD/$build/src/libcclz.so}
  [ -e "$CCLZ_LIBRARY" ] || { echo "train: $CCLZ_LIBRARY is missing: build first (stage build)" |
                               tee -a "$summary"; exit 1; }
  tdir=$(mktemp -d)
  tgpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  trows=()  # "launch|network|exit|seconds" per launch, for the table
  # trainlaunch NAME NET RANKS SECONDS ARGS...: one launch of `python -m cclz.train ARGS --out
  # $tdir/NAME`, over NVLink (NET nvlink) or two emulated nodes of two ranks each (nodes:
  # bench/python/two_nodes.sh, NCCL's socket transport between ranks 0-1 and 2-3, NCCL's INIT
  # lines kept to show nNodes 2), ended after SECONDS or a silence of CCLZ_TRAIN_SILENCE.
  trainlaunch() {
    local name=$1 net=$2 ranks=$3 secs=$4; shift 4
    local left=$((tbudget - (SECONDS - tstart)))
    if [ "$left" -lt "$tmin" ]; then
      echo "train $name ($net): skipped, ${left}s of the stage's budget left" | tee -a "$summary"
      trows+=("$name|$net|skipped|0")
      return
    fi
    [ "$secs" -le "$left" ] || secs=$left
    local wrap=() envs=(-x NCCL_NVLS_ENABLE -x PYTHONPATH -x CCLZ_LIBRARY)
    [ -n "${CCLZ_CHECK_CALLS:-}" ] && envs+=(-x CCLZ_CHECK_CALLS)
    [ -n "${CCLZ_ADAPTIVE:-}" ] && envs+=(-x CCLZ_ADAPTIVE)
    [ -n "${CCLZ_FUSED:-}" ] && envs+=(-x CCLZ_FUSED)
    [ -n "${CCLZ_TWO_LEVEL:-}" ] && envs+=(-x CCLZ_TWO_LEVEL)
    [ -n "${CCLZ_OVERLAP_COPY:-}" ] && envs+=(-x CCLZ_OVERLAP_COPY)
    [ "$net" = nodes ] && wrap=(bench/python/two_nodes.sh) &&
      envs+=(-x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT)
    local cmd=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ranks" "${envs[@]}"
               ${wrap[@]+"${wrap[@]}"} python3 -m cclz.train "$@" --out "$tdir/$name")
    local out=$tdir/$name.log begin=$SECONDS hung=no
    mkdir -p "$tdir/$name"
    echo "${cmd[*]}" >"$tdir/$name/command.txt"
    echo "== $name ($net, at most ${secs}s): ${cmd[*]}" >"$out"
    timeout -k 15 "$secs" "${cmd[@]}" >>"$out" 2>&1 &
    local pid=$!
    end_when_silent $pid "$out" "${CCLZ_TRAIN_SILENCE:-90}" || hung=yes
    wait $pid
    local status=$? took=$((SECONDS - begin))
    { [ $status -eq 124 ] || [ $status -eq 137 ]; } && hung=yes
    local nodes
    nodes=$(grep -m1 -oE 'nNodes [0-9]+ localRanks [0-9]+' "$out")
    echo "train $name ($net, $ranks ranks): exit $status in ${took}s$([ $hung = yes ] && echo ', ended: timeout or silence')${nodes:+, NCCL: $nodes}" | tee -a "$summary"
    [ $status -eq 0 ] || grep -E 'Error|error:|failed' "$out" | grep -v NCCL | head -5 | tee -a "$summary"
    trows+=("$name|$net|$status|$took")
  }
  model=(--preset "${CCLZ_TRAIN_PRESET:-1.3b}")
  [ "$tdev" = cpu ] && model=(--device cpu --preset tiny)
  small=(--preset small)
  [ "$tdev" = cpu ] && small=(--device cpu --preset tiny)
  log_every=${CCLZ_TRAIN_LOG_EVERY:-5}
  if has trainsmoke; then
    tstart=$SECONDS tbudget=${CCLZ_TRAIN_BUDGET:-150} tmin=20
    steps=${CCLZ_TRAIN_STEPS:-20} secs=${CCLZ_TRAIN_TIMEOUT:-90}
    smoke=(--steps "$steps" --log-every "$log_every" --eval-every "$steps" --eval-batches 2
           --batch 16)
    if [ "$tdev" = cpu ] || [ "$tgpus" -ge 2 ]; then
      # Every policy on the small model (86M), the codecs forced on (--adaptive off) where the
      # adaptive calls would send NVLink plain data after their trials; then the measured
      # model's shapes and memory for a few steps (1.3b on tp 2, 8 sequences in one micro-batch
      # as each TP2 x DP2 replica has).
      trainlaunch smoke-tp2 nvlink 2 "$secs" "${small[@]}" --tp 2 "${smoke[@]}" --policy none,tp-fp8
      trainlaunch smoke-pp2 nvlink 2 "$secs" "${small[@]}" --pp 2 "${smoke[@]}" --policy pp-fp8 --adaptive off
      trainlaunch smoke-dp2 nvlink 2 "$secs" "${small[@]}" --dp 2 "${smoke[@]}" --policy dp-qgrad --adaptive off
      trainlaunch smoke-tp2-overlap nvlink 2 "$secs" "${small[@]}" --tp 2 --overlap "${smoke[@]}" \
        --policy none,tp-fp8
      trainlaunch smoke-big-tp2 nvlink 2 "$secs" "${model[@]}" --tp 2 --batch 8 --micro-batches 1 \
        --steps 4 --log-every 2 --eval-every 4 --eval-batches 1 --policy all
    else
      echo "trainsmoke: needs 2 GPUs, this machine has $tgpus" | tee -a "$summary"
    fi
  fi
  if has train; then
    tstart=$SECONDS tbudget=${CCLZ_TRAIN_BUDGET:-500} tmin=45
    steps=${CCLZ_TRAIN_STEPS:-20} secs=${CCLZ_TRAIN_TIMEOUT:-200}
    [ "$tdev" = cpu ] && steps=${CCLZ_TRAIN_STEPS:-10} && log_every=${CCLZ_TRAIN_LOG_EVERY:-2}
    run=("${model[@]}" --steps "$steps" --log-every "$log_every" --eval-every "$steps"
         --eval-batches 2)
    # Issue 35's table: TP4, TP2 x DP2 and TP2 x PP2, uncompressed beside the policy that
    # compresses the dimension crossing the nodes (and all), over two emulated nodes first (the
    # targets), then NVLink. Batches and micro-batches (docs/train.md, "The 1.3B model on 4
    # GPUs"): 32 sequences of 2048 tokens; TP4 over the nodes 8 (its step is ~2 s
    # uncompressed there; tp traffic grows with the tokens, so the ratio hardly depends on it).
    tp4=(--tp 4 --batch 32 --micro-batches 4)
    tp4nodes=(--tp 4 --batch "${CCLZ_TRAIN_TP4_NODES_BATCH:-8}" --micro-batches 1)
    tpdp=(--tp 2 --dp 2 --batch 32 --micro-batches 2)
    tppp=(--tp 2 --pp 2 --batch 32 --micro-batches 8)
    if [ "$tdev" = cpu ]; then
      tp4=(--tp 4 --batch 16 --micro-batches 2) tp4nodes=(--tp 4 --batch 8 --micro-batches 1)
      tpdp=(--tp 2 --dp 2 --batch 16 --micro-batches 2) tppp=(--tp 2 --pp 2 --batch 16 --micro-batches 4)
    fi
    # CCLZ_TRAIN_ONLY="NAME ...": only those launches (default: all).
    trainwanted() { [ -z "${CCLZ_TRAIN_ONLY:-}" ] || [[ " $CCLZ_TRAIN_ONLY " == *" $1 "* ]]; }
    trainonly() { trainwanted "$1" && trainlaunch "$@"; }
    if [ "$tdev" = cpu ] || [ "$tgpus" -ge 4 ]; then
      # TP's calls run in two levels across the nodes (the default; docs/collectives.md), and
      # flat beside them.
      trainonly tp4-nodes nodes 4 "$secs" "${run[@]}" "${tp4nodes[@]}" --policy none,tp-fp8
      CCLZ_TWO_LEVEL=0 trainonly tp4-nodes-flat nodes 4 "$secs" "${run[@]}" "${tp4nodes[@]}" \
        --policy none,tp-fp8
      # The TP linears as overlapped calls with fp8 in the ring (the reduce-scatter two-level,
      # docs/overlap.md, "Across nodes"), against tp4-nodes' none.
      trainonly tp4-nodes-overlap nodes 4 "$secs" "${run[@]}" "${tp4nodes[@]}" --overlap \
        --policy tp-fp8
      trainonly tp2dp2-nodes nodes 4 "$secs" "${run[@]}" "${tpdp[@]}" --policy none,dp-qgrad,all
      trainonly tp2pp2-nodes nodes 4 "$secs" "${run[@]}" "${tppp[@]}" --policy none,pp-fp8,all
      trainonly tp4-nvlink nvlink 4 "$secs" "${run[@]}" "${tp4[@]}" --policy none,tp-fp8
      # The TP calls' compressed trials on the fused copy-engine path (docs/collectives.md).
      CCLZ_FUSED=ce trainonly tp4-nvlink-fusedce nvlink 4 "$secs" "${run[@]}" "${tp4[@]}" \
        --policy none,tp-fp8
      # Issue 37's end to end: the TP linears as overlapped calls, against tp4-nvlink's none.
      trainonly tp4-nvlink-overlap nvlink 4 "$secs" "${run[@]}" "${tp4[@]}" --overlap \
        --policy none,tp-fp8
      # The same with the copy engines where every rank can use them (docs/overlap.md).
      CCLZ_OVERLAP_COPY=auto trainonly tp4-nvlink-overlap-ce nvlink 4 "$secs" "${run[@]}" \
        "${tp4[@]}" --overlap --policy none,tp-fp8
      trainonly tp2dp2-nvlink nvlink 4 "$secs" "${run[@]}" "${tpdp[@]}" --policy none,dp-qgrad,all
      trainonly tp2pp2-nvlink nvlink 4 "$secs" "${run[@]}" "${tppp[@]}" --policy none,pp-fp8,all
    elif [ "$tgpus" -ge 2 ]; then
      # Two GPUs: each dimension alone across two emulated nodes of one GPU each (every byte of
      # it crosses the socket transport), uncompressed beside its policy.
      trainonly tp2-nodes nodes 2 "$secs" "${run[@]}" --tp 2 --batch 8 --micro-batches 1 --policy none,tp-fp8
      # The TP linears as overlapped calls there, adaptive (docs/overlap.md, "Adaptive calls").
      trainonly tp2-nodes-overlap nodes 2 "$secs" "${run[@]}" --tp 2 --batch 8 --micro-batches 1 \
        --overlap --policy none,tp-fp8
      trainonly dp2-nodes nodes 2 "$secs" "${run[@]}" --dp 2 --batch 16 --micro-batches 2 --policy none,dp-qgrad
      trainonly pp2-nodes nodes 2 "$secs" "${run[@]}" --pp 2 --batch 16 --micro-batches 8 --policy none,pp-fp8
      # TP2 over NVLink, and with the overlapped linears (NCCL's transfers, then the copy
      # engines), each beside its own uncompressed run.
      trainonly tp2-nvlink nvlink 2 "$secs" "${run[@]}" --tp 2 --batch 8 --micro-batches 1 --policy none,tp-fp8
      CCLZ_FUSED=ce trainonly tp2-nvlink-fusedce nvlink 2 "$secs" "${run[@]}" --tp 2 --batch 8 \
        --micro-batches 1 --policy none,tp-fp8
      trainonly tp2-nvlink-overlap nvlink 2 "$secs" "${run[@]}" --tp 2 --batch 8 --micro-batches 1 \
        --overlap --policy none,tp-fp8
      CCLZ_OVERLAP_COPY=auto trainonly tp2-nvlink-overlap-ce nvlink 2 "$secs" "${run[@]}" --tp 2 \
        --batch 8 --micro-batches 1 --overlap --policy none,tp-fp8
    else
      echo "train: needs 2 GPUs, this machine has $tgpus" | tee -a "$summary"
    fi
  fi
  if has trainlong; then
    # The loss target: the small model long enough for its loss to fall well and flatten (2,400
    # steps of 16 x 1024 tokens, 39.3M tokens; the loss falls from 5.5 to ~0.6; at 1,200 steps it
    # is still falling steeply and two uncompressed runs end 2.4% apart, bench/results/
    # train-2xh200), every call through its codec (--adaptive off), uncompressed beside each
    # policy in one launch; TP also with E4M3
    # (--tp-codec fp8), the grid the presets left (docs/train.md, "Choosing the activations'
    # codec"). 2 GPUs: TP2 and PP2; 4: TP2 x DP2 and TP2 x PP2 with every dimension compressed.
    tstart=$SECONDS tbudget=${CCLZ_TRAIN_BUDGET:-560} tmin=60
    steps=${CCLZ_TRAIN_STEPS:-2400} secs=${CCLZ_TRAIN_TIMEOUT:-400}
    [ "$tdev" = cpu ] && steps=${CCLZ_TRAIN_STEPS:-40}
    long=("${small[@]}" --steps "$steps" --batch 16 --log-every 50 --eval-every 200
          --eval-batches 4 --adaptive off)
    # longlaunch: trainlaunch for the launches named in CCLZ_TRAINLONG_ONLY (default: all).
    longwanted() { [ -z "${CCLZ_TRAINLONG_ONLY:-}" ] || [[ " $CCLZ_TRAINLONG_ONLY " == *" $1 "* ]]; }
    longlaunch() { longwanted "$1" && trainlaunch "$@"; }
    if [ "$tdev" = cpu ] || [ "$tgpus" -ge 4 ]; then
      longlaunch long-tp2dp2 nvlink 4 "$secs" "${long[@]}" --tp 2 --dp 2 --policy none,all
      longlaunch long-tp2pp2 nvlink 4 "$secs" "${long[@]}" --tp 2 --pp 2 --micro-batches 4 --policy none,all
      longlaunch long-tp2dp2-e4m3 nvlink 4 "$secs" "${long[@]}" --tp 2 --dp 2 --policy all --tp-codec fp8
    elif [ "$tgpus" -ge 2 ]; then
      # TP's codec on its all-gathers alone and on its reductions alone beside both
      # (docs/train.md, "Choosing the activations' codec").
      longlaunch long-tp2 nvlink 2 "$secs" "${long[@]}" --tp 2 --policy none,tp-fp8
      longlaunch long-tp2-gathers nvlink 2 "$secs" "${long[@]}" --tp 2 --policy none,tp-fp8 \
        --tp-reduce-codec none
      longlaunch long-tp2-reductions nvlink 2 "$secs" "${long[@]}" --tp 2 --policy tp-fp8 \
        --tp-codec none --tp-reduce-codec fp8-int8
      longlaunch long-pp2 nvlink 2 "$secs" "${long[@]}" --pp 2 --micro-batches 4 --policy none,pp-fp8
      longlaunch long-tp2-e4m3 nvlink 2 "$secs" "${long[@]}" --tp 2 --policy tp-fp8 --tp-codec fp8
    else
      echo "trainlong: needs 2 GPUs, this machine has $tgpus" | tee -a "$summary"
    fi
    # One step's gradient error per TP codec on the GPUs (bf16 autocast, so no bf16 row; the
    # CPU runs have it): bench/python/tp_grad_error.py, 12 layers of 768, TP2.
    if [ "$tdev" = cuda ] && [ "$tgpus" -ge 2 ] && longwanted tp_grad_error; then
      timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 \
        -x NCCL_NVLS_ENABLE -x PYTHONPATH -x CCLZ_LIBRARY python3 bench/python/tp_grad_error.py \
        --layers 12 --hidden 768 --heads 12 --seq-len 1024 --batch 8 --warm-steps 200 \
        --precision bf16 --codecs lossless,fp8,fp8-int8,fp8-int8/none,none/fp8-int8 \
        --json "$tdir/tp_grad_error.json" \
        >"$tdir/tp_grad_error.log" 2>&1
      echo "trainlong tp_grad_error (2 GPUs): exit $?" | tee -a "$summary"
      grep '^|' "$tdir/tp_grad_error.log" | tee -a "$summary"
    fi
  fi
  # Each pair's comparison (python -m cclz.train compare, in one process), then the table.
  printf '%s\n' "${trows[@]}" >"$tdir/launches.txt"
  python3 - "$tdir" "$OUT/train.json" >"$tdir/table.md" 2>"$tdir/compare.log" <<'PY'
import contextlib, io, json, os, sys
from cclz.train import log as runlog
from cclz.train.__main__ import main as train_main

root, out = sys.argv[1], sys.argv[2]
rows = []
for line in open(os.path.join(root, "launches.txt")).read().split("\n"):
    if not line.strip():
        continue
    name, net, status, took = line.split("|")
    folder = os.path.join(root, name)
    runs = []  # a launch of several policies has a folder per policy, one of one policy its log
    for sub in [""] + (sorted(os.listdir(folder)) if os.path.isdir(folder) else []):
        path = os.path.join(folder, sub, "log.jsonl")
        if os.path.isfile(path):
            header, steps, summary = runlog.read(path)
            runs.append((header.get("policy_name") or sub, header, steps, summary or {}))
    runs.sort(key=lambda r: (r[0] != "none", r[0] == "all", r[0]))  # none, the best, all
    base = runs[0] if runs and runs[0][0] == "none" and runs[0][3] else None
    for policy, header, steps, summary in runs:
        if base and policy != "none":
            with contextlib.redirect_stdout(io.StringIO()):
                train_main(["compare", os.path.join(folder, "none"), os.path.join(folder, policy),
                            "--out", os.path.join(folder, f"compare-{policy}")])
        tps, val = summary.get("tokens_per_s"), summary.get("final_val_loss")
        btps = base[3].get("tokens_per_s") if base else None
        bval = base[3].get("final_val_loss") if base else None
        raw = sum(s.get("wire_raw_bytes") or 0 for s in steps)
        sent = sum(s.get("wire_sent_bytes") or 0 for s in steps)
        rows.append(dict(
            launch=name, network=net, exit=int(status) if status.lstrip("-").isdigit() else status,
            seconds=int(took), policy=policy, layout=f"tp{header['tp']} pp{header['pp']} dp{header['dp']}",
            preset=header.get("preset"), batch=header.get("batch"),
            micro_batches=header.get("micro_batches"), steps=len(steps) and steps[-1]["step"],
            tokens=summary.get("tokens"), tokens_per_s=tps,
            ratio=tps / btps if tps and btps else None, val_loss=val,
            val_vs_none_pct=100 * (val - bval) / bval if val is not None and bval else None,
            off_wire=1 - sent / raw if raw else None, peak_mem_gb=summary.get("peak_mem_gb"),
            device_used_gb=summary.get("device_used_gb"), gpu=header.get("gpu"),
            command=open(os.path.join(folder, "command.txt")).read().strip().replace(
                root, "train.tgz:")))
    if not runs:
        rows.append(dict(launch=name, network=net, exit=status, seconds=int(took),
                         policy="(skipped)" if status == "skipped" else f"(exit {status}, no log)"))
with open(out, "w") as f:
    json.dump(rows, f, indent=1)
fmt = lambda x, spec: "-" if x is None else format(x, spec)
print("| launch | network | layout | policy | batch x steps | tokens/s | ratio | val loss | val vs none % | off the wire | peak GB (torch) | GB in use (device) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['launch']} | {r['network']} | {r.get('layout', '-')} | {r['policy']} | "
          f"{r.get('batch', '-')} x {r.get('steps', '-')} | {fmt(r.get('tokens_per_s'), ',.0f')} | "
          f"{fmt(r.get('ratio'), '.2f')} | {fmt(r.get('val_loss'), '.4f')} | "
          f"{fmt(r.get('val_vs_none_pct'), '+.2f')} | "
          f"{'-' if r.get('off_wire') is None else format(r['off_wire'], '.0%')} | "
          f"{fmt(r.get('peak_mem_gb'), '.1f')} | {fmt(r.get('device_used_gb'), '.1f')} |")
PY
  echo "train table: exit $?" >>"$summary"
  (cd "$tdir" && tar czf "$OUT/train.tgz" .)
  { echo "cclz.train on $tdev ($(for s in trainsmoke train trainlong; do has $s && printf '%s ' $s; done)stages; tokens/s: the median of the logged intervals after the first; ratio: over none in the same launch):"
    cat "$tdir/table.md"; } | tee -a "$summary"
  rm -rf "$tdir"
fi

# nccltests: NVIDIA's nccl-tests (their source unpacked in .deps/nccl-tests, optional), built
# with MPI, each test with -c 1 (every result checked) on 2 GPUs: plain, under the NCCL drop-in,
# and under the drop-in with compression forced on every eligible call (CCLZ_INTERPOSE_FORCE=1).
if has nccltests && [ -d .deps/nccl-tests ]; then
  mpihome=$(mktemp -d)
  ln -s "$(mpicc --showme:incdirs | awk '{print $1}')" "$mpihome/include"
  ln -s "$(mpicc --showme:libdirs | awk '{print $1}')" "$mpihome/lib"
  make -C .deps/nccl-tests -j"$(nproc)" MPI=1 MPI_HOME="$mpihome" CUDA_HOME=/usr/local/cuda \
    NVCC_GENCODE="-gencode=arch=compute_90a,code=sm_90a" BUILDDIR=/tmp/nccl-tests >>"$log" 2>&1
  echo "nccl-tests build: exit $?" | tee -a "$summary"
  dropin=$PWD/$build/src/interpose/libcclz_nccl.so
  for test in all_gather sendrecv alltoall broadcast all_reduce reduce_scatter; do
    for mode in plain dropin forced; do
      env=()
      [ $mode = plain ] || env=(-x LD_PRELOAD="$dropin" -x CCLZ_INTERPOSE_DEBUG=1)
      [ $mode = forced ] && env+=(-x CCLZ_INTERPOSE_FORCE=1)
      timeout 300 mpirun --allow-run-as-root -n 2 "${env[@]}" /tmp/nccl-tests/${test}_perf \
        -b 64K -e 64M -f 8 -g 1 -c 1 -n 5 -w 2 >"$OUT/nccltest.tmp" 2>&1
      status=$?
      cat "$OUT/nccltest.tmp" >>"$OUT/nccltests.log"
      echo "nccl-tests $test $mode: exit $status, $(grep -E 'Out of bounds|Avg bus' "$OUT/nccltest.tmp" | tr -s ' ' | tr '\n' ';')" | tee -a "$summary"
    done
  done
  rm -f "$OUT/nccltest.tmp"
  gzip -f "$OUT/nccltests.log"
fi

parts=$(mktemp -d)  # one JSON file per benchmark, merged into bench.json at the end
launcher=()  # what starts cclz-perf: nothing, or mpirun for the collectives
# gtests LABEL RANKS PROGRAM [MPIRUN-ARGS...]: a gtest program on RANKS GPUs under a timeout (a
# hang in a barrier fails it instead of holding the machine); its output to device.log, and to the
# summary the exit status and the count of passing and failing ranks, the failed tests named.
# overlap_py LABEL JSON [MPIRUN ARGS...]: bench/python/overlap_gemm.py on every GPU (its
# options from CCLZ_OVERLAP_ARGS), the table to bench.log and the summary.
overlap_py() {
  local label=$1 json=$2 status; shift 2
  echo "== overlap_gemm ($label, $ngpu ranks)" >>"$OUT/bench.log"
  PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so timeout 500 \
    mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" -x NCCL_NVLS_ENABLE \
    -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x PYTHONPATH -x CCLZ_LIBRARY "$@" \
    python3 bench/python/overlap_gemm.py ${CCLZ_OVERLAP_ARGS:-} --json "$json" \
    >"$OUT/overlap.tmp" 2>&1
  status=$?
  grep '^|' "$OUT/overlap.tmp" >>"$OUT/bench.log"
  echo "overlap_gemm ($label): exit $status" | tee -a "$summary"
  [ $status -eq 0 ] || tail -15 "$OUT/overlap.tmp" | tee -a "$summary"
  grep '^|' "$OUT/overlap.tmp" | tee -a "$summary"
  rm -f "$OUT/overlap.tmp"
}

gtests() {
  local label=$1 n=$2 program=$3; shift 3
  local tmp=$OUT/gtests.tmp status
  echo "== $label, $n ranks" >>"$log"
  timeout "${gtests_timeout:-300}" mpirun --allow-run-as-root --oversubscribe --bind-to none \
    -n "$n" -x NCCL_NVLS_ENABLE "$@" "$program" --gtest_brief=1 >"$tmp" 2>&1
  status=$?
  cat "$tmp" >>"$log"
  echo "$label ($n ranks): exit $status$([ $status -eq 124 ] && echo ' (timed out: a hang)') -- $(sed 's/\x1b\[[0-9;]*m//g' "$tmp" | grep -E '^\[  (PASSED|FAILED)  \]' | sort | uniq -c | tr -s ' ' | tr '\n' ' ')" | tee -a "$summary"
  sed 's/\x1b\[[0-9;]*m//g' "$tmp" | grep -E '^\[  FAILED  \]' | sort -u | head -20 | tee -a "$summary"
  rm -f "$tmp"
}

bench() {  # bench STAGE NAME ARGS...: one cclz-perf run, its table to bench.log
  local stage=$1 name=$2; shift 2
  echo "== $stage/$name: ${launcher[*]} cclz-perf $*" >>"$OUT/bench.log"
  "${launcher[@]}" $perf "$@" \
    --json "$parts/$(printf '%03d' "$(ls "$parts" | wc -l)")_${stage}__$name.json" \
    >>"$OUT/bench.log" 2>&1
  echo "$stage $name: exit $?" >>"$summary"
  echo "${launcher[*]} cclz-perf $*" >"$parts/cmd_${stage}__$name.txt"
}

if has codec; then
  for dtype in bf16 fp16 fp32; do
    bench codec "gaussian_$dtype" --op codec --device gpu -d $dtype -b 4M -e 256M -f 4 -n 20 -w 5
  done
  bench codec randombits_bf16 --op codec --device gpu -d bf16 --data uniform-bits -b 256M -e 256M -n 10 -w 2
  bench codec tensors_bf16 --op codec --device gpu --input .data/index.json -n 20 -w 5
fi

if has lpath; then
  # The lossless kernel families (src/codec/lossless/kernel_path.h) in one run: staged should win
  # at 4 MiB and the rule of auto should follow the crossover.
  for path in general staged auto; do
    for dtype in bf16 fp32; do
      CCLZ_LOSSLESS_PATH=$path bench lpath "${dtype}_$path" --op codec --device gpu -d $dtype -b 4M -e 256M -f 4 -n 20 -w 5
    done
  done
fi

if has lsplit; then
  # The staged encoder with each fixed number of warps per chunk against auto's choice
  # (kernel_path.h, CCLZ_LOSSLESS_ENCODE_WARPS, encodeWarpsPerChunk); decode should not move.
  for warps in auto 2 4; do
    for dtype in bf16 fp16 fp32; do
      CCLZ_LOSSLESS_ENCODE_WARPS=$warps bench lsplit "${dtype}_warps_$warps" --op codec --device gpu -d $dtype -b 1M -e 256M -f 4 -n 20 -w 5
    done
  done
fi

if has fp8; then
  # The issue's targets: encode (bf16 in) and decode (bf16 out) >= 2 TB/s at 64-256 MiB, encode
  # >= 0.8 TB/s at 4 MiB, decode-and-accumulate >= 1.6 TB/s of fp32 output; quality per tensor.
  bench fp8 e4m3_bf16 --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  bench fp8 int8_bf16 --op codec --codec fp8 --fp8-format int8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  # The scale search's cost: the same without it (1 candidate; NMSE 5.6e-4 instead of 3.8e-4).
  bench fp8 e4m3_nosearch_bf16 --op codec --codec fp8 --fp8-candidates 1 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  bench fp8 e4m3_tensors --op codec --codec fp8 --fp8-row-elems 768 --device gpu --input .data/index.json -n 20 -w 5
  bench fp8 int8_tensors --op codec --codec fp8 --fp8-format int8 --fp8-row-elems 768 --device gpu --input .data/index.json -n 20 -w 5
  # The row length chosen from the data (the default above: e4m3_bf16, int8_bf16) against the
  # caller's rows (the sampling kernels skipped; int8 still smooths where it may), and on the
  # real tensors with the rows chosen and smoothing (bench/results/fp8-row-length-smoothing-cpu).
  bench fp8 e4m3_row1024_bf16 --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  bench fp8 int8_row1024_bf16 --op codec --codec fp8 --fp8-format int8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  bench fp8 e4m3_tensors_auto --op codec --codec fp8 --device gpu --input .data/index.json -n 20 -w 5
  bench fp8 int8_tensors_auto --op codec --codec fp8 --fp8-format int8 --device gpu --input .data/index.json -n 20 -w 5
fi

if has qgrad; then
  # The issue's targets: int4/64 wire size, encode with error feedback (fp32 in) and
  # decode-and-accumulate into fp32 at 256 MiB; NMSE per real tensor.
  bench qgrad fp32_ef --op codec --codec qgrad --device gpu -d fp32 -b 4M -e 256M -f 4 -n 20 -w 5
  bench qgrad bf16_ef --op codec --codec qgrad --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  bench qgrad fp32_int2_plain --op codec --codec qgrad --device gpu -d fp32 -b 256M -e 256M -n 20 -w 5 --feedback 0 --bits 2
  bench qgrad tensors --op codec --codec qgrad --device gpu --input .data/index.json -n 10 -w 3
fi

# The collectives need 2 or more GPUs (nvidia-h200-x4). Each stage fits one 10-minute call:
#   coll:     the NCCL tests (every GPU, then 2 ranks) and the sweep over NVLink;
#   collsock: the same sweep over NCCL's socket transport on loopback (run after coll, on the same
#             machine, without build: bash scripts/dev/device.sh collsock).
ranks() {  # ranks N ARGS...: N processes, one GPU each (the programs take GPU rank % count)
  local n=$1; shift
  mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" -x NCCL_NVLS_ENABLE "$@"
}
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
# collsweep NET [RANKS [WRAPPER...]]: the collective sweep, compressed beside plain NCCL, -c 1, on
# RANKS ranks (default one per GPU), each started through WRAPPER (node_per_rank.sh) if given;
# CCLZ_SWEEP_ARGS: more cclz-perf options for every run (--batch: nccl-tests' timing).
collsweep() {
  local net=$1 n=${2:-$ngpu}
  local wrap=("${@:3}")
  launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" -x NCCL_NVLS_ENABLE)
  # Socket: NCCL_P2P_NET_CHUNKSIZE=512K for the point-to-point frames of reduce-scatter and
  # all-to-all (measured +25% on loopback, docs/collectives.md); plain NCCL's collectives do not
  # use it. More iterations there: the socket's times vary by 20% from one run to the next.
  local sizes=(-b 64K -e 256M -f 16 -n 5 -w 2)
  [ "$net" = socket ] && launcher+=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1
                                    -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo
                                    -x NCCL_P2P_NET_CHUNKSIZE=524288) &&
    sizes=(-b 64K -e 256M -f 16 -n 11 -w 2)
  launcher+=(${wrap[@]+"${wrap[@]}"})
  sizes+=(${CCLZ_SWEEP_ARGS:-})
  for op in allgather reducescatter; do
    for codec in none lossless fp8; do
      bench coll "${net}_${op}_$codec" --op $op --codec $codec --device gpu "${sizes[@]}" --adaptive off
    done
  done
  for codec in none lossless; do
    bench coll "${net}_allreduce_$codec" --op allreduce --codec $codec --device gpu "${sizes[@]}" --adaptive off
  done
  bench coll "${net}_allreduce_qgrad4" --op allreduce --codec qgrad --bits 4 --device gpu "${sizes[@]}" --adaptive off
  bench coll "${net}_alltoall_lossless" --op alltoall --codec lossless --device gpu -b 64K -e 16M -f 16 -n 5 -w 2 --adaptive off ${CCLZ_SWEEP_ARGS:-}
  bench coll "${net}_sendrecv_lossless" --op sendrecv --codec lossless --device gpu -b 64K -e 16M -f 16 -n 5 -w 2 --adaptive off ${CCLZ_SWEEP_ARGS:-}
  launcher=()
}

if has coll; then
  # The NCCL tests: every case on device buffers, compared with the host path byte for byte.
  for n in "$ngpu" 2; do
    echo "== nccl_tests, $n ranks" >>"$log"
    ranks "$n" $build/tests/collective/nccl_tests --gtest_brief=1 >>"$log" 2>&1
    echo "coll nccl_tests ($n ranks): exit $?" | tee -a "$summary"
    [ "$ngpu" -gt 2 ] || break
  done
  collsweep nvlink
fi

if has collsock; then
  collsweep socket
fi

if has collnodes; then
  # The trainer's TP calls across two emulated nodes of ngpu/2 GPUs (bench/python/two_nodes.sh:
  # NVLink inside a node, NCCL's socket transport between them; train-4xh200's TP4 case): fp8
  # (INT8 grid, rows of 2048, as the 1.3B model's) all-gathers and reduce-scatters beside plain
  # NCCL, calls back to back, 16-256 MiB, with the library's pieces and with 4 and 16 MiB ones.
  launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" -x NCCL_NVLS_ENABLE
            bench/python/two_nodes.sh)
  for op in allgather reducescatter; do
    for piece in default 4M 16M; do
      extra=()
      [ "$piece" = default ] || extra=(--piece-bytes "$piece")
      bench collnodes "${op}_fp8_int8_piece_$piece" --op $op --codec fp8 --fp8-format int8 \
        --fp8-row-elems 2048 --device gpu -b 16M -e 256M -f 4 -n 10 -w 3 --batch --adaptive off \
        ${extra[@]+"${extra[@]}"}
    done
  done
  # two_nodes.sh's 512 KiB point-to-point chunks against NCCL's default (128 KiB), for the
  # reduce-scatter's frames (the train stage ran TP4 across the nodes with NCCL's default).
  launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" -x NCCL_NVLS_ENABLE
            -x NCCL_P2P_NET_CHUNKSIZE=131072 bench/python/two_nodes.sh)
  bench collnodes reducescatter_fp8_int8_p2p_chunk_128k --op reducescatter --codec fp8 \
    --fp8-format int8 --fp8-row-elems 2048 --device gpu -b 16M -e 256M -f 4 -n 10 -w 3 --batch \
    --adaptive off
  launcher=()
fi

if has twolevel; then
  # The two-level all-gather and reduce-scatter (CCLZ_TWO_LEVEL=1, docs/collectives.md,
  # "Two-level calls across nodes") over two emulated nodes of ngpu/2 GPUs: first the NCCL
  # tests with it (every rank's device and host communicators learn the same layout, so
  # NcclCollective, NcclLarge and NcclFeedback (outputs and residuals) compare the device's
  # two-level bytes with the host's), then the
  # collnodes sweep of fp8 INT8 all-gathers and reduce-scatters, two-level beside flat, each
  # beside plain NCCL.
  if [ "$ngpu" -ge 4 ]; then
    ranks "$ngpu" -x CCLZ_TWO_LEVEL=1 bench/python/two_nodes.sh \
      $build/tests/collective/nccl_tests --gtest_brief=1 \
      --gtest_filter='*NcclCollective.*:*NcclLarge.*:NcclFeedback.*' >"$OUT/tests.tmp" 2>&1
    echo "twolevel nccl_tests ($ngpu ranks, two nodes): exit $? -- $(grep -m1 -E 'PASSED|FAILED' "$OUT/tests.tmp")" | tee -a "$summary"
    grep -E '^\[  FAILED' "$OUT/tests.tmp" | sort -u | head -20 | tee -a "$summary"
    cat "$OUT/tests.tmp" >>"$log"
    rm -f "$OUT/tests.tmp"
    for two in 1 0; do
      launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu"
                -x NCCL_NVLS_ENABLE -x CCLZ_TWO_LEVEL=$two bench/python/two_nodes.sh)
      for op in allgather reducescatter; do
        bench twolevel "${op}_fp8_int8_two_level_$two" --op $op --codec fp8 --fp8-format int8 \
          --fp8-row-elems 2048 --device gpu -b 16M -e 256M -f 4 -n 10 -w 3 --batch \
          --adaptive off -c 1
      done
    done
    launcher=()
  else
    echo "twolevel: needs 4 GPUs (two nodes of two), this machine has $ngpu" | tee -a "$summary"
  fi
fi

# adaptsweep NET [RANKS [WRAPPER...]]: adaptive calls on and off side by side (ADAPT_SIZES: the
# sizes' cclz-perf options), as collsweep runs its ranks.
adaptsweep() {
  local net=$1 n=${2:-$ngpu}
  local wrap=("${@:3}")
  local sizes=(${ADAPT_SIZES:--b 64K -e 256M -f 16})
  launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" -x NCCL_NVLS_ENABLE)
  [ $net = socket ] && launcher+=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1
                                  -x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_NET_CHUNKSIZE=524288)
  launcher+=(${wrap[@]+"${wrap[@]}"})
  for mode in on off; do
    for op in allgather reducescatter; do
      bench adapt "${net}_${op}_fp8_$mode" --op $op --codec fp8 --device gpu "${sizes[@]}" -n 10 -w 3 --batch --adaptive $mode
    done
    bench adapt "${net}_allgather_lossless_$mode" --op allgather --codec lossless --device gpu "${sizes[@]}" -n 10 -w 3 --batch --adaptive $mode
    bench adapt "${net}_allreduce_qgrad4_$mode" --op allreduce --codec qgrad --bits 4 --device gpu "${sizes[@]}" -n 10 -w 3 --batch --adaptive $mode
  done
  launcher=()
}

if has adapt; then
  # Adaptive calls (cclzCommConfig_t.adaptive, docs/collectives.md "Adaptive calls") on and off,
  # side by side, over NVLink and over the socket transport: on, a call runs compressed only where
  # its trials found that faster, so it should never lose to plain NCCL beyond noise; off is the
  # codec path. The NCCL tests' adaptive case first.
  ranks "$ngpu" $build/tests/collective/nccl_tests --gtest_brief=1 --gtest_filter='NcclAdaptive*' >>"$log" 2>&1
  echo "adapt nccl_tests NcclAdaptive ($ngpu ranks): exit $?" | tee -a "$summary"
  adaptsweep nvlink
  adaptsweep socket
fi

if has sharedgpu; then
  # Ranks sharing the GPUs, each its own emulated node (bench/python/node_per_rank.sh), so that
  # NCCL's socket transport joins every pair: the slow-network measurements on a machine with
  # fewer GPUs than ranks. Under MPS, so the ranks' kernels run side by side.
  n=${CCLZ_RANKS:-4}
  wrap=(bench/python/node_per_rank.sh)
  nvidia-cuda-mps-control -d || echo "sharedgpu: MPS did not start" | tee -a "$summary"
  for part in ${CCLZ_SHARED_PARTS:-tests coll adapt}; do
    case $part in
      tests)
        # Suite by suite, each under its own timeout and line-buffered, so that a slow or stuck
        # suite is named and the others still report (the whole program on 2 and 4 ranks did not
        # end within 230 s, its buffered output lost).
        for k in 2 "$n"; do
          for suite in NcclCollective NcclDeferredCheck NcclErrors NcclFeedback NcclAdaptive \
                       NcclTimeline NcclLarge; do
            echo "== nccl_tests *$suite*, $k ranks sharing $ngpu GPU(s), socket" >>"$log"
            start=$(date +%s)
            timeout ${CCLZ_SHARED_TIMEOUT:-90} mpirun --allow-run-as-root --oversubscribe \
              --bind-to none -n "$k" -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH "${wrap[@]}" \
              stdbuf -oL -eL $build/tests/collective/nccl_tests --gtest_filter="*$suite*" \
              >"$OUT/tests.tmp" 2>&1
            status=$?
            sed 's/\x1b\[[0-9;]*m//g' "$OUT/tests.tmp" >"$OUT/tests.plain"
            echo "sharedgpu nccl_tests $suite ($k ranks): exit $status in $(($(date +%s) - start)) s -- $(grep -cE '^\[       OK \]' "$OUT/tests.plain") OK lines (every rank's), last: $(grep -E '^\[ RUN' "$OUT/tests.plain" | tail -1)" | tee -a "$summary"
            grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT/tests.plain" | sort -u | head -10 | tee -a "$summary"
            cat "$OUT/tests.plain" >>"$log"
          done
        done
        rm -f "$OUT/tests.tmp" "$OUT/tests.plain" ;;
      timeline)
        # One call's steps (CCLZ_TIMELINE=1, rank 0, the last of the calls) at 64 MiB: where a
        # socket call's time goes (encode, move, decode per piece).
        for run in "reducescatter --codec fp8" "allgather --codec fp8" \
                   "allreduce --codec qgrad --bits 4"; do
          echo "== timeline: $run, 64 MiB, $n ranks, socket" >>"$OUT/bench.log"
          timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$n" \
            -x NCCL_NVLS_ENABLE -x CCLZ_TIMELINE=1 "${wrap[@]}" $perf --op $run --device gpu \
            -b 64M -e 64M -n 2 -w 1 --batch --adaptive off 2>&1 |
            grep '^cclz-timeline' | awk '!first { first = $3 } $3 == first' | tail -40 \
            >>"$OUT/bench.log"
        done ;;
      coll) collsweep socket "$n" "${wrap[@]}" ;;
      adapt) adaptsweep socket "$n" "${wrap[@]}" ;;
    esac
  done
  echo quit | nvidia-cuda-mps-control
fi

if has ncclwin; then
  # The frame areas in NCCL symmetric windows with zero-CTA communicators (CCLZ_NCCL_WINDOWS=1,
  # CCLZ_NCCL_CTA_POLICY=zero: NCCL may move frames with the copy engines), beside the default,
  # over NVLink, nccl-tests' timing; the NCCL tests with both settings first.
  ranks "$ngpu" -x CCLZ_NCCL_WINDOWS=1 -x CCLZ_NCCL_CTA_POLICY=zero \
    $build/tests/collective/nccl_tests --gtest_brief=1 >>"$log" 2>&1
  echo "ncclwin nccl_tests ($ngpu ranks, windows, zero CTAs): exit $?" | tee -a "$summary"
  for setting in default windows; do
    launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" -x NCCL_NVLS_ENABLE)
    [ $setting = windows ] && launcher+=(-x CCLZ_NCCL_WINDOWS=1 -x CCLZ_NCCL_CTA_POLICY=zero)
    for op in allgather reducescatter; do
      bench ncclwin "${setting}_${op}_fp8" --op $op --codec fp8 --device gpu -b 16M -e 256M -f 4 -n 20 -w 5 --batch --adaptive off
    done
    bench ncclwin "${setting}_allgather_lossless" --op allgather --codec lossless --device gpu -b 16M -e 256M -f 4 -n 20 -w 5 --batch --adaptive off
    bench ncclwin "${setting}_allreduce_qgrad4" --op allreduce --codec qgrad --bits 4 --device gpu -b 16M -e 256M -f 4 -n 20 -w 5 --batch --adaptive off
  done
  launcher=()
fi

if has check; then
  # The call check's cost (bench/notes/collectives.md): the codec none over NVLink with the check
  # deferred (the default), on every call and on the first only, then 5 traced calls of each
  # (CCLZ_TRACE=1, host clock of every step) into trace.log.
  launcher=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" -x NCCL_NVLS_ENABLE)
  for mode in deferred 1 first; do
    for op in allgather allreduce; do
      launcher+=(-x CCLZ_CHECK_CALLS=$mode)
      bench check "${op}_none_check_$mode" --op $op --codec none --device gpu -b 64K -e 256M -f 16 -n 20 -w 5 --adaptive off
      launcher=("${launcher[@]:0:${#launcher[@]}-2}")
    done
  done
  # The same back to back (--batch: one sync per 20 calls, as a training step queues them).
  for mode in deferred 1 first; do
    launcher+=(-x CCLZ_CHECK_CALLS=$mode)
    bench check "allreduce_none_check_${mode}_batch" --op allreduce --codec none --device gpu -b 64K -e 256M -f 16 -n 20 -w 5 --batch --adaptive off
    launcher=("${launcher[@]:0:${#launcher[@]}-2}")
  done
  # Whether the back-to-back calls are bound by the host: each one's time beside the host's
  # time to queue it (cclz-perf's queue_us), cclz's and NCCL's.
  python3 - "$parts" >>"$summary" 2>&1 <<'PY'
import glob, json, os, sys
print("check: back to back, per call (us): cclz time / its queueing, NCCL time / its queueing")
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*_check__*_batch.json"))):
    name = os.path.basename(path).split("__", 1)[1][:-5]
    for r in json.load(open(path)):
        print("  %-40s %10d  %7.1f / %5.1f   %7.1f / %5.1f" % (
            name, r["bytes"], r["time_us"], r.get("queue_us") or -1,
            r["baseline_time_us"], r.get("baseline_queue_us") or -1))
PY
  for mode in deferred 1 first; do
    echo "== CCLZ_CHECK_CALLS=$mode, 16 MiB all-reduce, codec none" >>"$OUT/trace.log"
    "${launcher[@]}" -x CCLZ_CHECK_CALLS=$mode -x CCLZ_TRACE=1 $perf --op allreduce --codec none \
      --device gpu -b 16M -e 16M -n 5 -w 0 -c 0 >>"$OUT/trace.log" 2>&1
  done
  launcher=()
fi

# overlap: the overlapped TP GEMMs' device path (docs/overlap.md, "The device path"): its tests
# on 2 and (where there are) 4 GPUs under a timeout, then bench/python/overlap_gemm.py (GEMM,
# communication, serial, PyTorch's fused ops, cclz plain and fp8) over NVLink, and with
# CCLZ_OVERLAP_NODES=1 the same over two emulated nodes (bench/python/two_nodes.sh).
if has overlap; then
  if ! has build; then
    cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a $nccl_choice \
      -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >>"$log" 2>&1 &&
      ninja -C $build nccl_overlap_tests cclz cclz-perf >>"$log" 2>&1
    status=$?
    echo "overlap build (nccl_overlap_tests, libcclz, cclz-perf): exit $status" | tee -a "$summary"
    [ $status -eq 0 ] || { tail -40 "$log"; exit 1; }
  fi
  for n in 2 4; do
    [ "$n" -le "$ngpu" ] || continue
    gtests "overlap nccl_overlap_tests" "$n" $build/tests/overlap/nccl_overlap_tests
  done
  nets=(nvlink)
  [ -n "${CCLZ_OVERLAP_NODES:-}" ] && nets+=(nodes)
  for net in "${nets[@]}"; do
    wrap=()
    [ "$net" = nodes ] && wrap=(bench/python/two_nodes.sh)
    overlap_py "$net" "$OUT/overlap_$net.json" ${wrap[@]+"${wrap[@]}"}
  done
  # cclz-perf's view (the GEMM alone through cclz's own cuBLASLt plan, the plain collective, both
  # in turn, overlapped plain and fp8): Llama-3-70B's MLP at TP4, 4,096 and 16,384 tokens.
  launcher=(timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu"
            -x NCCL_NVLS_ENABLE)
  for op in ag_gemm gemm_rs; do
    bench overlap "cclz_perf_$op" --op $op --device gpu -b 64M -e 256M -f 4 -n 10 -w 3
  done
  # The all-gather's GEMMs merged (CCLZ_OVERLAP_GATHER=merged: the own chunk, then the rest in
  # two GEMMs), its tests on every GPU first.
  if [ "$ngpu" -gt 2 ]; then
    gtests "overlap nccl_overlap_tests, merged gather" "$ngpu" \
      $build/tests/overlap/nccl_overlap_tests -x CCLZ_OVERLAP_GATHER=merged
    launcher+=(-x CCLZ_OVERLAP_GATHER=merged)
    bench overlap cclz_perf_ag_gemm_merged --op ag_gemm --device gpu -b 64M -e 256M -f 4 -n 10 -w 3
  fi
  launcher=()
  # Where an overlapped call's time goes: each GEMM's and each step's span, one Llama-3-70B shape
  # of 4096 tokens, plain and fp8 (CCLZ_TIMELINE=1; one rank's last calls; docs/overlap.md).
  echo "== overlap timeline: llama3-70b 4096 tokens, rank 0 (plain, then fp8)" >>"$OUT/bench.log"
  PYTHONPATH=$PWD/python CCLZ_LIBRARY=$PWD/$build/src/libcclz.so timeout 200 \
    mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" -x NCCL_NVLS_ENABLE \
    -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x PYTHONPATH -x CCLZ_LIBRARY -x CCLZ_TIMELINE=1 \
    python3 bench/python/overlap_gemm.py --models llama3-70b --tokens 4096 --iters 1 \
    --warmup 1 --rounds 1 >"$OUT/timeline.tmp" 2>&1
  echo "overlap timeline: exit $?" | tee -a "$summary"
  # Rank 0's lines (the pid of the first line) of the overlapped calls' reports: each report's
  # spans come before its "end" line; the collectives' own reports (the benchmark's serial
  # column) name other stages. Without any overlapped span, the run's last lines instead.
  grep '^cclz-timeline' "$OUT/timeline.tmp" | awk '!first { first = $3 } $3 == first' |
    tail -120 >"$OUT/timeline.lines"
  if grep -qE ' (gemm|reduce) ' "$OUT/timeline.lines"; then
    cat "$OUT/timeline.lines" >>"$OUT/bench.log"
  else
    { echo "(no overlapped call's spans; the run's last lines:)"; tail -30 "$OUT/timeline.tmp"; } |
      tee -a "$summary" >>"$OUT/bench.log"
  fi
  rm -f "$OUT/timeline.tmp" "$OUT/timeline.lines"
fi

if has overlapce; then
  # The overlapped GEMMs with copy-engine transfers (CCLZ_OVERLAP_COPY=ce, docs/overlap.md):
  # their tests on 2 and 4 GPUs under a timeout (a flag never set would hang), then the Python
  # benchmark and cclz-perf's shapes as in the overlap stage. Run overlap first for the
  # transport path's numbers on the same machine.
  # CCLZ_OVERLAP_PUSH (together, inturn) reaches every rank where it is set.
  [ -x $build/tests/overlap/nccl_overlap_tests ] ||
    ninja -C $build nccl_overlap_tests cclz cclz-perf >>"$log" 2>&1
  push=()
  [ -n "${CCLZ_OVERLAP_PUSH:-}" ] && push=(-x CCLZ_OVERLAP_PUSH)
  for n in 2 4; do
    [ "$n" -le "$ngpu" ] || continue
    gtests "overlapce nccl_overlap_tests" "$n" $build/tests/overlap/nccl_overlap_tests \
      -x CCLZ_OVERLAP_COPY=ce "${push[@]}"
    gtests "overlapce nccl_overlap_tests, auto" "$n" $build/tests/overlap/nccl_overlap_tests \
      -x CCLZ_OVERLAP_COPY=auto "${push[@]}"
  done
  overlap_py "nvlink, copy engines${CCLZ_OVERLAP_PUSH:+, push $CCLZ_OVERLAP_PUSH}" \
    "$OUT/overlap_ce${CCLZ_OVERLAP_PUSH:+_$CCLZ_OVERLAP_PUSH}.json" -x CCLZ_OVERLAP_COPY=ce \
    "${push[@]}"
  launcher=(timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu"
            -x NCCL_NVLS_ENABLE -x CCLZ_OVERLAP_COPY=ce "${push[@]}")
  for op in ag_gemm gemm_rs; do
    bench overlapce "cclz_perf_${op}_ce" --op $op --device gpu -b 64M -e 256M -f 4 -n 10 -w 3
  done
  launcher=()
fi

if has overlapnodes; then
  # The overlapped GEMMs across two emulated nodes of two GPUs (docs/overlap.md, "Across
  # nodes"): their tests there (the fp8 reduce-scatter two-level, against its reference), then
  # the Python benchmark with the two-level reduce-scatter (the default) beside the direct
  # schedule (CCLZ_TWO_LEVEL=0), each beside serial GEMM + NCCL of its own run. Run overlap
  # first in the same call (its build).
  if [ "$ngpu" -ge 4 ]; then
    [ -x $build/tests/overlap/nccl_overlap_tests ] ||
      ninja -C $build nccl_overlap_tests cclz cclz-perf >>"$log" 2>&1
    gtests "overlapnodes nccl_overlap_tests, two nodes" "$ngpu" \
      $build/tests/overlap/nccl_overlap_tests bench/python/two_nodes.sh
    overlap_py "nodes, two-level" "$OUT/overlap_nodes.json" bench/python/two_nodes.sh
    overlap_py "nodes, direct" "$OUT/overlap_nodes_direct.json" -x CCLZ_TWO_LEVEL=0 \
      bench/python/two_nodes.sh
  else
    echo "overlapnodes: needs 4 GPUs (two nodes of two), this machine has $ngpu" | tee -a "$summary"
  fi
fi

if has interpose; then
  # The drop-in (docs/collectives.md, "The NCCL drop-in"): the CPU tests of its routing and
  # symbols, then the NCCL program (ctest interpose_nccl: as it is, preloaded, every eligible call
  # compressed, reductions too) and the torch.distributed program (the same, and preloaded with
  # CCLZ_INTERPOSE=0). Each program checks its own results; check_runs.py compares the runs and
  # reads the drop-in's counts (CCLZ_INTERPOSE_DEBUG=1).
  ilog=$OUT/interpose.log
  : >"$ilog"
  runs=$(mktemp -d)
  CCLZ_INTERPOSE_OUT=$runs ctest --test-dir $build -R '[Ii]nterpose' --output-on-failure \
    >"$OUT/tests.tmp" 2>&1
  status=$?
  cat "$OUT/tests.tmp" >>"$ilog"
  echo "interpose ctest (CPU tests, NCCL program): exit $status -- $(grep -E 'tests passed|tests failed' "$OUT/tests.tmp")" | tee -a "$summary"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception|Skipped" "$OUT/tests.tmp" | tee -a "$summary"
  rm -f "$OUT/tests.tmp"
  if [ -d "$runs/nccl" ]; then
    echo "== NCCL program, tests/interpose/run_nccl_program.sh" | tee -a "$ilog" "$summary"
    python3 tests/interpose/check_runs.py --compressed all-gather,all-to-all,send,recv \
      "plain:$runs/nccl/plain" "adaptive:$runs/nccl/adaptive:cclz" \
      "forced:$runs/nccl/forced:cclz,forced" "reduce:$runs/nccl/reduce:cclz,forced,reduce" \
      2>&1 | tee -a "$ilog" "$summary"
  fi
  echo "== torch.distributed program, tests/interpose/run_torch_program.sh" | tee -a "$ilog"
  bash tests/interpose/run_torch_program.sh $build/src/interpose/libcclz_nccl.so "$runs/torch" \
    >"$OUT/torch.tmp" 2>&1
  status=$?
  cat "$OUT/torch.tmp" >>"$ilog"
  echo "interpose torch program: exit $status" | tee -a "$summary"
  sed -n '/^run | cases/,$p' "$OUT/torch.tmp" | tee -a "$summary"
  rm -rf "$OUT/torch.tmp" "$runs"
fi

if has fused; then
  if ! has build; then
    cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a $nccl_choice \
      -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >>"$log" 2>&1 &&
      ninja -C $build nccl_fused_tests cclz-perf >>"$log" 2>&1
    status=$?
    echo "fused build (nccl_fused_tests, cclz-perf): exit $status" | tee -a "$summary"
    [ $status -eq 0 ] || { tail -40 "$log"; exit 1; }
  fi
  # CCLZ_FUSED_MODES: the fused paths to test and sweep (1: frames stored by a kernel, direct: by
  # the encodes, ce: copied by the copy engines); CCLZ_FUSED_ARGS: more cclz-perf options for
  # every sweep (the piece); CCLZ_FUSED_ROWS: a second set of sweeps with that row length given;
  # CCLZ_FUSED_TESTS=0 skips the tests (a second sweep in the same call).
  modes=${CCLZ_FUSED_MODES:-1 direct ce}
  read -r -a fusedargs <<<"${CCLZ_FUSED_ARGS:-}"
  for mode in $modes; do
    [ "${CCLZ_FUSED_TESTS:-1}" = 0 ] && break
    for n in 2 4; do
      [ "$n" -le "$ngpu" ] || continue
      # NOTE: 120 s, not 300: the suite takes ~5 s, and a hang would spend the rest of the call.
      gtests_timeout=120 gtests "fused nccl_fused_tests CCLZ_FUSED=$mode" "$n" \
        $build/tests/collective/nccl_fused_tests -x CCLZ_FUSED=$mode
    done
  done
  # The sweeps and their table, once with CCLZ_FUSED_ARGS, and where CCLZ_FUSED_ROWS is set once
  # more with the row length given (--fp8-row-elems, as the trainer passes its hidden size).
  fused_sweeps() {  # fused_sweeps SUFFIX CCLZ-PERF-OPTIONS...
    local suffix=$1; shift
    local fusedparts; fusedparts=$(mktemp -d)
    # The fp8 all-gather and reduce-scatter on every path; the lossless all-gather on the pipeline
    # and the kernel paths (the copy engines take fixed-size frames only); the qgrad all-reduce
    # (error feedback, issue 36's target) on the pipeline and the copy engines (the kernel path
    # does not take it).
    # With ce, also its calls queued anew every time (CCLZ_FUSED_GRAPHS=0) beside its graph
    # replays, in the same run.
    local settings="pipeline $modes"
    [[ " $modes " == *" ce "* ]] && settings+=" ce-queued"
    for spec in allgather:fp8 reducescatter:fp8 allgather:lossless allreduce:qgrad; do
      op=${spec%%:*} codec=${spec##*:}
      [ -n "$suffix" ] && [ $codec != fp8 ] && continue
      for setting in $settings; do
        [ $op = allreduce ] && { [ $setting = 1 ] || [ $setting = direct ]; } && continue
        [ $codec = lossless ] && [[ $setting == ce* ]] && continue
        launcher=(timeout 300 mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu"
                  -x NCCL_NVLS_ENABLE)
        [ $setting = ce-queued ] && launcher+=(-x CCLZ_FUSED_GRAPHS=0)
        extra=()
        [ $setting != pipeline ] && extra=(--fused=${setting%-queued})
        name=$setting
        [ $setting = 1 ] && name=fused
        [ $setting = ce ] && name=fusedce
        [ $setting = ce-queued ] && name=fusedce_queued
        [ $setting = direct ] && name=fuseddirect
        bench fused "${op}_${codec}_$name$suffix" --op $op --codec $codec --device gpu -b 4M \
          -e "${CCLZ_FUSED_MAX:-256M}" -f 4 \
          -n 20 -w 5 --batch --adaptive off "${extra[@]}" "$@"
        cp "$(ls "$parts"/[0-9]*_fused__${op}_${codec}_$name$suffix.json | tail -1)" \
          "$fusedparts/${op}_${codec}_$name.json" 2>/dev/null
      done
    done
    launcher=()
    echo "== fused sweeps${suffix:+ ($suffix)}: cclz-perf options $*" >>"$OUT/bench.log"
    # The short tables: per op and size, plain NCCL's time (the fused run's baseline), the
    # pipeline's and the fused path's, and their speedups over plain NCCL, from the runs' JSON.
    python3 - "$fusedparts" >>"$OUT/bench.log" 2>&1 <<'PY'
import json, os, sys
d = sys.argv[1]
for op, codec in (("allgather", "fp8"), ("reducescatter", "fp8"), ("allgather", "lossless"),
                  ("allreduce", "qgrad")):
    runs = {}
    paths = ("pipeline", "fused", "fuseddirect", "fusedce", "fusedce_queued")
    for s in paths:
        p = os.path.join(d, f"{op}_{codec}_{s}.json")
        runs[s] = {r["bytes"]: r for r in json.load(open(p))} if os.path.exists(p) else {}
    if not any(runs.values()):
        continue
    print(f"# fused: {codec} {op} over NVLink, per call (us), speedup over plain NCCL of the same run")
    # NOTE: no line starts with "#   ": the script's end prints bench.log without those.
    print("#size(B)%7s %10s %10s %8s %10s %8s %10s %8s %10s %8s %10s %8s %7s" % (
        "", "nccl", "pipeline", "x", "fused", "x", "direct", "x", "fused-ce", "x", "ce-queued", "x",
        "wrong"))
    for size in sorted(set().union(*runs.values())):
        got = [runs[s].get(size) for s in paths]
        base = next(r for r in got if r)["baseline_time_us"]
        cell = lambda r: ("%10.1f %8.2f" % (r["time_us"], r["speedup"])) if r else "%10s %8s" % ("-", "-")
        wrong = sum(r.get("wrong") or 0 for r in got if r)
        print("  %12d %10.1f %s %s %s %s %s %7d" % (size, base, *map(cell, got), wrong))
PY
    rm -rf "$fusedparts"
  }
  fused_sweeps "" "${fusedargs[@]}"
  [ -n "${CCLZ_FUSED_ROWS:-}" ] &&
    fused_sweeps "_rows${CCLZ_FUSED_ROWS}" "${fusedargs[@]}" --fp8-row-elems "$CCLZ_FUSED_ROWS"
  # Where a fused call's time goes: each piece's encode, push and decode spans at 64 MiB
  # (CCLZ_TIMELINE=1; one rank's last calls; docs/collectives.md, "Fused NVLink paths").
  for mode in $modes; do
    for op in allgather reducescatter; do
      echo "== fused timeline: $op fp8 64 MiB, CCLZ_FUSED=$mode ${fusedargs[*]}, rank 0" \
        >>"$OUT/bench.log"
      timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -n "$ngpu" \
        -x NCCL_NVLS_ENABLE -x CCLZ_TIMELINE=1 $perf --op $op --codec fp8 --device gpu -b 64M \
        -e 64M -n 2 -w 1 --batch --adaptive off --fused=$mode "${fusedargs[@]}" 2>&1 |
        grep '^cclz-timeline' | awk '!first { first = $3 } $3 == first' | tail -40 \
        >>"$OUT/bench.log"
    done
  done
fi

# bench.json: [{stage, name, command, rows: [...]}, ...] in the order the benchmarks ran.
if ls "$parts"/*.json >/dev/null 2>&1; then
  python3 - "$parts" "$OUT/bench.json" <<'PY'
import glob, json, os, sys
parts, out = sys.argv[1], sys.argv[2]
runs = []
for path in sorted(glob.glob(os.path.join(parts, "[0-9]*.json"))):
    stage, name = os.path.basename(path)[4:-5].split("__", 1)
    with open(os.path.join(parts, f"cmd_{stage}__{name}.txt")) as f:
        command = f.read().strip()
    with open(path) as f:
        rows = json.load(f)
    runs.append({"stage": stage, "name": name, "command": command, "rows": rows})
with open(out, "w") as f:
    json.dump(runs, f, indent=1)
PY
fi
rm -rf "$parts"

cat "$summary"
if [ -f "$OUT/bench.log" ]; then grep -vE '^#   ' "$OUT/bench.log"; fi
! grep -qE "exit [1-9]" "$summary"  # the script fails if any stage did
