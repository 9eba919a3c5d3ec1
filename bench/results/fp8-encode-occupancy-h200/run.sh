#!/usr/bin/env bash
# the fp8 encode at 36 warps per SM (this tree), 32 with blocks of
# 4 warps (c32) and 40 (o40) against the tree before; the fp8 GPU tests.
set -u
OUT=${OUT:-/tmp/cclz-out}
timeout 540 bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Fp8*' .devrun/s24a.configs c32=.devrun/c32.tar.gz o40=.devrun/o40.tar.gz > /dev/null
echo "ab-codec: exit $?"
sed -n 1,6p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -B2 -A8 -E "FAILED|Failure" "$OUT/tests.log" | head -30
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-16s %-5s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
rm -f "$OUT"/j_*.json
