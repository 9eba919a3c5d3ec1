#!/usr/bin/env bash
# fifth device call (round 4 ran out of time in its tests): this tree's fp8 GPU tests,
# its lossless GPU tests by default, on the general kernels and staged with 4 warps per chunk;
# then the fp8 configurations round 4 did not reach, against session 22's end.
set -u
OUT=${OUT:-/tmp/cclz-out}
AB_TEST_ENVS="CCLZ_LOSSLESS_PATH=general;CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=4" \
  timeout 450 bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s23e.configs > /dev/null
echo "ab-codec: exit $?"
timeout 100 build-device/tests/codec/codec_gpu_tests --gtest_filter='*Fp8*' --gtest_brief=1 > "$OUT/tests-fp8.log" 2>&1
echo "fp8 gpu tests: exit $? -- $(grep -E 'PASSED|FAILED|tests from' "$OUT/tests-fp8.log" | tr '\n' ' ')"
sed -n 1,8p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -B2 -A8 -E "FAILED|Failure" "$OUT/tests.log" "$OUT/tests-fp8.log" | head -40
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-16s %-5s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
rm -f "$OUT"/j_*.json
