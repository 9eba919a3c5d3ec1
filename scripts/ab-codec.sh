#!/usr/bin/env bash
# A codec kernel change against the code before it, on one GPU: the tree before (a `git archive`
# tarball) and this tree are built side by side, this tree's GPU tests are run (frames byte for
# byte against the CPU reference), then cclz-perf runs each configuration on both builds,
# alternated (old, new), so both see the same machine state.
#   git archive -o .devrun/old.tar <commit before>
#   bash scripts/ab-codec.sh .devrun/old.tar '<gtest filter>' CONFIGS
# on the device, carrying .deps, .data and .devrun. CONFIGS has one configuration per line,
# `name cclz-perf arguments...` ('#' starts a comment). Writes $OUT: summary.txt (the commands'
# exit codes and each table's rows, old above new), tests.log, bench.log (every table with its
# exact command on its `==` line) and bench-json.tgz (cclz-perf's JSON, j_{old,new}_<name>.json).
# More trees to compare in the same run: NAME=TARBALL arguments after CONFIGS (each built like the
# old tree, run between old and new, rows tagged NAME). AB_TEST_ENV="VAR=value ...": the
# environment of the GPU tests only (e.g. CCLZ_LOSSLESS_PATH=general).
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
cd "$(dirname "$0")/.." || exit 1
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
  ( cfg "/tmp/ab-$tag" "/tmp/ab-$tag/build" -DCCLZ_BUILD_TESTS=OFF >"/tmp/ab-$tag.log" 2>&1 &&
      ninja -C "/tmp/ab-$tag/build" -j6 cclz-perf >>"/tmp/ab-$tag.log" 2>&1
    echo "$tag build: $?" >>"$sum" ) &
done
wait
echo "builds: $((SECONDS - t0)) s" >>"$sum"
grep -hE "error|FAILED" /tmp/ab-*.log | head -20 >>"$sum"
# shellcheck disable=SC2086  # the variables are words
env ${AB_TEST_ENV:-} build-device/tests/codec/codec_gpu_tests --gtest_filter="$filter" \
  --gtest_brief=1 >"$OUT/tests.log" 2>&1
status=$?
verdict=$(grep -E 'PASSED|FAILED' "$OUT/tests.log" | head -5 | tr '\n' ' ')
echo "gpu tests ($filter${AB_TEST_ENV:+, $AB_TEST_ENV}), new: exit $status -- $verdict" >>"$sum"
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
