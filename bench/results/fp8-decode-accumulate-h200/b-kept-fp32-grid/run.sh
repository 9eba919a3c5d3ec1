#!/usr/bin/env bash
# round b (see configs), the variants' GPU tests too; then the
# 4 MiB bf16 encode, queued, six times in a row with each build (is its spread the machine's?).
set -u
OUT=${OUT:-/tmp/cclz-out}
AB_TEST_VARIANTS=1 timeout 480 bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Fp8*' .devrun/configs f32rs=.devrun/f32rs.tar.gz mut=.devrun/mut.tar.gz > /dev/null
echo "ab-codec: exit $?"
sed -n 1,8p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -E "Failure|FAILED|differs" "$OUT/tests.log" | head -20
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-6s %-5s %10s enc %8s dec %8s copy %8s acc %8s\n", name, tag, $(1+o), $(7+o), $(9+o), $(10+o), $(12+o)}'
for k in 1 2 3 4 5 6; do for t in old new; do
  perf=build-device/tools/cclz-perf/cclz-perf; [ $t = old ] && perf=/tmp/ab-old/build/tools/cclz-perf/cclz-perf
  echo "== $t/enc4m_$k: cclz-perf --op codec --codec fp8 --device gpu -b 4M -e 4M -n 50 -w 10 --fp8-row-elems 1024 -d bf16 --batch" >> $OUT/enc4m.log
  $perf --op codec --codec fp8 --device gpu -b 4M -e 4M -n 50 -w 10 --fp8-row-elems 1024 -d bf16 --batch >> $OUT/enc4m.log 2>&1
done; done
awk '/^==/{t=$2} / 4194304 /{print t, "enc", $7, "dec", $9, "acc", $12}' $OUT/enc4m.log
