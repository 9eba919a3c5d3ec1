#!/usr/bin/env bash
# fp8 GPU tests after the async removal; where the small-message
# time of the codecs goes (host cost per call, kernel durations under ncu); the lossless chunk
# size at small messages.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
ctest --test-dir $B -L gpu -R "Fp8" -j12 --output-on-failure --timeout 120 > /tmp/gpu.log 2>&1
echo "fp8 gpu tests: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/gpu.log) ($(( $(date +%s) - start )) s)"
grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" /tmp/gpu.log | head -12
g++ -O2 -std=c++17 -Iinclude -I/usr/local/cuda/include bench/probes/apicost.cpp -o /tmp/apicost \
  -L$B/src -lcclz -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$PWD/$B/src && /tmp/apicost | tee $OUT/apicost.txt
{
for ce in 1024 2048 4096; do
  for path in general staged; do
    echo "== lossless bf16 chunk $ce $path"; CCLZ_LOSSLESS_PATH=$path $P --op codec --device gpu -d bf16 -b 256K -e 256M -f 4 -n 20 -w 5 --chunk-elems $ce
  done
done
echo "== lossless tensors chunk 1024"; $P --op codec --device gpu --input .data/index.json -n 10 -w 3 --chunk-elems 1024
echo "== lossless fp32 chunk 1024"; $P --op codec --device gpu -d fp32 -b 1M -e 256M -f 4 -n 20 -w 5 --chunk-elems 1024
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]|summary' $OUT/bench.log | cut -c1-120
{
for args in "--codec lossless -d bf16 -b 1M -e 1M" "--codec lossless -d bf16 -b 4M -e 4M" \
            "--codec lossless -d bf16 -b 4M -e 4M --chunk-elems 1024" \
            "--codec fp8 --fp8-row-elems 1024 -d bf16 -b 4M -e 4M" "--codec fp8 -d bf16 -b 4M -e 4M" \
            "--codec fp8 --fp8-row-elems 1024 -d bf16 -b 256M -e 256M"; do
  echo "== ncu: $args"
  ncu --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread --csv --print-units base \
    $P --op codec --device gpu $args -n 2 -w 0 -c 0 2>&1 | grep -E '^"[0-9]' | \
    awk -F'","' '{print substr($5,1,60), $(NF-2), $NF}' | sed 's/"//g' | head -40
done
} > $OUT/ncu.txt 2>&1
cat $OUT/ncu.txt | cut -c1-160
echo "total: $(( $(date +%s) - start )) s"
