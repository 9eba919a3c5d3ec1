#!/usr/bin/env bash
# Session 12, one H200, first call: profiles of the codec kernels that miss their speed targets
# (lossless bf16 256 MiB encode/decode, fp8 bf16 rows of 1024 at 256 MiB and 4 MiB), unchanged code.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
P=/tmp/prof; mkdir -p $P
OUT=$P/lossless256 timeout 200 bash scripts/profile.sh 256M --codec lossless -d bf16 > $P/lossless256.txt 2>&1
echo "lossless 256M: $(el) s"
OUT=$P/fp8_256 timeout 200 bash scripts/profile.sh 256M --codec fp8 -d bf16 --fp8-row-elems 1024 > $P/fp8_256.txt 2>&1
echo "fp8 256M: $(el) s"
OUT=$P/fp8_4 timeout 120 bash scripts/profile.sh 4M --codec fp8 -d bf16 --fp8-row-elems 1024 > $P/fp8_4.txt 2>&1
echo "fp8 4M: $(el) s"
B=build-device/tools/cclz-perf/cclz-perf
timeout 60 $B --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 > $P/perf_fp8.txt 2>&1
timeout 60 $B --op codec --codec lossless --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 > $P/perf_lossless.txt 2>&1
cat $P/perf_fp8.txt $P/perf_lossless.txt
tar czf $OUT/prof.tgz -C /tmp prof
cat $P/lossless256.txt $P/fp8_256.txt $P/fp8_4.txt | cut -c1-200
echo "total: $(el) s"
