#!/usr/bin/env bash
# where the fp8 encode's time goes at 64 MiB (rows of 1024, bf16),
# after round 19's ALU cuts: Nsight Compute on the kept tree (encode and decode).
set -u
OUT=${OUT:-/tmp/cclz-out}
OUT=$OUT/p bash scripts/dev/profile.sh 64M --codec fp8 -d bf16 --fp8-row-elems 1024 > "$OUT/profile-64M.txt" 2>&1
echo "profile: exit $?"
(cd "$OUT/p" && gzip -9 ncu_encode.csv && rm -f ncu_decode.csv ncu_*.log build.log && mv ncu_encode.csv.gz ncu_encode.details ncu_decode.details .. ) ; rm -rf "$OUT/p"
cat "$OUT/profile-64M.txt"
