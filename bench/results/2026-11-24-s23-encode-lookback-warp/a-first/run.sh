#!/usr/bin/env bash
# Session 23, first device call: the look-back warp (this tree) and the escape cost bytes (esc)
# against the tree before; the lossless GPU tests of both trees in the default environment.
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
AB_TEST_VARIANTS=1 bash scripts/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s23a.configs esc=.devrun/esc.tar.gz > /dev/null
sed -n 1,12p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -B2 -A8 -E "FAILED|Failure" "$OUT/tests.log" | head -40
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-16s %-5s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
rm -f "$OUT/bench-json.tgz.unused"
