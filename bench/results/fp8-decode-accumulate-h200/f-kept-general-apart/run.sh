#!/usr/bin/env bash
# round f (see configs).
set -u
OUT=${OUT:-/tmp/cclz-out}
AB_TEST_VARIANTS=1 timeout 560 bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Fp8*' .devrun/configs gn=.devrun/gn.tar.gz > /dev/null
echo "ab-codec: exit $?"
sed -n 1,8p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -E "Failure|FAILED|differs" "$OUT/tests.log" | head -20
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-6s %-5s %10s enc %8s dec %8s copy %8s acc %8s\n", name, tag, $(1+o), $(7+o), $(9+o), $(10+o), $(12+o)}'
