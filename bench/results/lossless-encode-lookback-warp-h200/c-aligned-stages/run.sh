#!/usr/bin/env bash
# the look-back warp (lb), with the stages on 128-byte lines (lb128), with both and the escape cost bytes for fp16 and fp32 (this tree)
# against the tree before; this tree's lossless GPU tests by default, on the general kernels, and staged with 1 and 2 warps per chunk.
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
AB_TEST_ENVS="CCLZ_LOSSLESS_PATH=general;CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=1;CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=2" bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s23c.configs lb=.devrun/lb.tar.gz lb128=.devrun/lb128.tar.gz > /dev/null
sed -n 1,12p "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"
grep -B2 -A8 -E "FAILED|Failure" "$OUT/tests.log" | head -40
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-16s %-5s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
