#!/usr/bin/env bash
# Builds the decode fuzzer in build-fuzz (clang; libFuzzer, ASan, UBSan; CPU only), writes a seed
# corpus of valid frames, and fuzzes for N seconds (default 60). Exits non-zero on any crash,
# leak, sanitizer report or timeout; the failing input is left in build-fuzz/fuzz/artifacts/.
#   tests/fuzz/run.sh [seconds]
# Reproduce a failure: build-fuzz/tests/fuzz/decode_fuzzer build-fuzz/fuzz/artifacts/crash-...
set -euo pipefail
seconds=${1:-60}
cd "$(dirname "$0")/../.."
build=${CCLZ_FUZZ_BUILD_DIR:-build-fuzz}

mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCCLZ_WITH_CUDA=OFF -DCCLZ_FUZZ=ON -DCCLZ_BUILD_TOOLS=OFF >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
ninja -C "$build" decode_fuzzer make_fuzz_corpus

work=$build/fuzz
rm -rf "$work/seeds"
mkdir -p "$work/seeds" "$work/corpus" "$work/artifacts"
"$build/tests/fuzz/make_fuzz_corpus" "$work/seeds"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# New inputs go to corpus/ (kept between runs); seeds/ is read only.
"$build/tests/fuzz/decode_fuzzer" "$work/corpus" "$work/seeds" \
  -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$work/artifacts/" -print_final_stats=1
echo "fuzz: no crash in ${seconds}s"
