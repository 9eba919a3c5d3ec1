#!/usr/bin/env bash
# Session 26, first device call: the fp8 GPU tests on this tree (the corrupt fp32 frames of 1f6143e, the accumulate checks new here), then decode-and-accumulate by groups (this tree, g1, rs) against 1f6143e.
set -u
OUT=${OUT:-/tmp/cclz-out}
timeout 570 bash scripts/ab-codec.sh .devrun/old.tar.gz '*Fp8*' .devrun/s26a.configs g1=.devrun/g1.tar.gz rs=.devrun/rs.tar.gz > /dev/null
echo "ab-codec: exit $?"
sed -n 1,8p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -B2 -A8 -E "FAILED|Failure" "$OUT/tests.log" | head -40
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-6s %-4s %10s enc %8s dec %8s copy %8s acc %8s\n", name, tag, $(1+o), $(7+o), $(9+o), $(10+o), $(12+o)}'
