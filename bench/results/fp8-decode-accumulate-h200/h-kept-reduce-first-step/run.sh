#!/usr/bin/env bash
# round h (see configs), then the reduce-step probe built
# against each tree's library, run old, new, old, new.
set -u
OUT=${OUT:-/tmp/cclz-out}
timeout 330 bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Fp8*' .devrun/configs > /dev/null
echo "ab-codec: exit $?"
sed -n 1,6p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -E "Failure|FAILED|differs" "$OUT/tests.log" | head -20
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-6s %-5s %10s enc %8s dec %8s copy %8s acc %8s\n", name, tag, $(1+o), $(7+o), $(9+o), $(10+o), $(12+o)}'
probe=bench/probes/reduceprobe.cu
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA -I /tmp/ab-old/include -I /tmp/ab-old/src $probe /tmp/ab-old/build/src/libcclz_core.a -o /tmp/probe-old &
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA -I include -I src $probe build-device/src/libcclz_core.a -o /tmp/probe-new &
wait
for t in old new old new; do echo "== $t" >> $OUT/probe.txt; timeout 40 /tmp/probe-$t >> $OUT/probe.txt 2>&1; done
cat $OUT/probe.txt
