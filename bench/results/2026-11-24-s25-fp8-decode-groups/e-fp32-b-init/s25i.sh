#!/usr/bin/env bash
# Session 25, ninth device call: the plain decode by groups of 4 values traded by shuffles (stores in group order), whole L2 lines per store into fp32 only, every other decode as before (this tree)
# against the tree before; the fp8 GPU tests (with the new large one).
set -u
OUT=${OUT:-/tmp/cclz-out}
timeout 560 bash scripts/ab-codec.sh .devrun/old.tar.gz '*Fp8*' .devrun/s25i.configs > /dev/null
echo "ab-codec: exit $?"
sed -n 1,8p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -B2 -A8 -E "FAILED|Failure" "$OUT/tests.log" | head -30
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-10s %-5s %10s enc %8s dec %8s copy %8s acc %8s\n", name, tag, $(1+o), $(7+o), $(9+o), $(10+o), $(12+o)}'
rm -f "$OUT"/j_*.json
