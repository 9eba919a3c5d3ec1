#!/usr/bin/env bash
# A codec kernel change against the code before it, on one GPU: the tree before (a `git archive`
# tarball) and this tree are built side by side, this tree's GPU tests are run (frames byte for
# byte against the CPU reference), then cclz-perf runs each configuration on both builds,
# alternated (old, new), so both see the same machine state.
#   git archive -o .devrun/old.tar <commit before>
#   bash scripts/dev/ab-codec.sh .devrun/old.tar '<gtest filter>' CONFIGS
# on the device, carrying .deps, .data and .devrun. CONFIGS has one configuration per line,
# `name cclz-perf arguments...` ('#' starts a comment). Writes $OUT: summary.txt (the commands'
# exit codes and each table's rows, old above new), tests.log, bench.log (every table with its
# exact command on its `==` line) and bench-json.tgz (cclz-perf's JSON, j_{old,new}_<name>.json).
# More trees to compare in the same run: NAME=TARBALL arguments after CONFIGS (each built like the
# old tree, run between old and new, rows tagged NAME). AB_TEST_ENV="VAR=value ...": the
# environment of the GPU tests only (e.g. CCLZ_LOSSLESS_PATH=general). AB_TEST_ENVS: more runs
# of the same tests, one per environment, separated by ';' (e.g. "CCLZ_LOSSLESS_PATH=general;
# CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=4"): the kernel paths the default does
# not take. AB_TEST_VARIANTS=1: the variant trees are built with their GPU tests, and run them too.
set -uo pipefail
[ $# -ge 3 ] || { sed -n 2,14p "$0"; exit 2; }
old_tar=$(realpath "$1") filter=$2 configs=$(realpath "$3")
shift 3
tags=(old)
declare -A tree=([old]="$old_tar")
for v in "$@"; do
  name=${v%%=*}
  [[ "$v" == *=* && "$name" =~ ^[a-z0-9_]+$ && "$name" != old && "$name" != new ]] ||
    { echo "variant '$v': expected name=tarball (name: a-z, 0-9, _)"; exit 2; }
  tags+=("$name")
  tree[$name]=$(realpath "${v#*=}")
done
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
sum=$OUT/summary.txt; : >"$sum"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader >>"$sum"
t0=$SECONDS
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" "${@:3}"; }
( cfg . build-device >/tmp/ab-new.log 2>&1 &&
    ninja -C build-device -j10 cclz-perf codec_gpu_tests >>/tmp/ab-new.log 2>&1
  echo "new build: $?" >>"$sum" ) &
for tag in "${tags[@]}"; do
  rm -rf "/tmp/ab-$tag" && mkdir -p "/tmp/ab-$tag" && tar -xf "${tree[$tag]}" -C "/tmp/ab-$tag"
  tests=OFF targets=cclz-perf
  [ "$tag" != old ] && [ "${AB_TEST_VARIANTS:-0}" = 1 ] && tests=ON targets="cclz-perf codec_gpu_tests"
  # shellcheck disable=SC2086  # the targets are words
  ( cfg "/tmp/ab-$tag" "/tmp/ab-$tag/build" -DCCLZ_BUILD_TESTS=$tests >"/tmp/ab-$tag.log" 2>&1 &&
      ninja -C "/tmp/ab-$tag/build" -j6 $targets >>"/tmp/ab-$tag.log" 2>&1
    echo "$tag build: $?" >>"$sum" ) &
done
wait
echo "builds: $((SECONDS - t0)) s" >>"$sum"
grep -hE "error|FAILED" /tmp/ab-*.log | head -20 >>"$sum"
# The GPU tests: this tree's, in AB_TEST_ENV, then in each of AB_TEST_ENVS; the variants' too
# with AB_TEST_VARIANTS=1. One line each in the summary; the failures' output in tests.log.
test_trees=(new)
[ "${AB_TEST_VARIANTS:-0}" = 1 ] && test_trees+=("${tags[@]:1}")
IFS=';' read -r -a test_envs <<<"${AB_TEST_ENV:-}${AB_TEST_ENVS:+;$AB_TEST_ENVS}"
[ ${#test_envs[@]} -gt 0 ] || test_envs=("")
: >"$OUT/tests.log"
for tag in "${test_trees[@]}"; do
  bin=build-device/tests/codec/codec_gpu_tests
  [ "$tag" = new ] || bin=/tmp/ab-$tag/build/tests/codec/codec_gpu_tests
  for e in "${test_envs[@]}"; do
    echo "== $tag: ${e:-default environment}" >>"$OUT/tests.log"
    # shellcheck disable=SC2086  # the environment's settings are words
    env $e "$bin" --gtest_filter="$filter" --gtest_brief=1 >/tmp/ab-test.log 2>&1
    status=$?
    grep -vE '^\[ +(RUN|OK) +\]' /tmp/ab-test.log | tail -40 >>"$OUT/tests.log"
    verdict=$(grep -E 'PASSED|FAILED' /tmp/ab-test.log | head -5 | tr '\n' ' ')
    echo "gpu tests ($filter${e:+, $e}), $tag: exit $status -- $verdict" >>"$sum"
  done
done
: >"$OUT/bench.log"
while read -r name args; do
  case "$name" in ''|'#'*) continue ;; esac
  for tag in "${tags[@]}" new; do
    perf=build-device/tools/cclz-perf/cclz-perf
    [ "$tag" = new ] || perf=/tmp/ab-$tag/build/tools/cclz-perf/cclz-perf
    echo "== $tag/$name: cclz-perf $args" >>"$OUT/bench.log"
    # shellcheck disable=SC2086  # the configuration's arguments are words
    $perf $args --json "$OUT/j_${tag}_$name.json" </dev/null >>"$OUT/bench.log" 2>&1
    echo "$tag $name: exit $?" >>"$sum"
  done
done <"$configs"
echo "bench: $((SECONDS - t0)) s" >>"$sum"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | head -120 >>"$sum"
(cd "$OUT" && tar -czf bench-json.tgz j_*.json && rm -f j_*.json)
cat "$sum"
