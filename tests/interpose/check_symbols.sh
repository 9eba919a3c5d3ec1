#!/usr/bin/env bash
# libcclz_nccl.so from outside (ctest: interpose_symbols):
#   1. its dynamic symbol table defines exactly the functions of libcclz_nccl.map, nothing else;
#   2. each of them is a function the NCCL it was built against defines (NCCL's own names);
#   3. it links none of libcclz, NCCL and the CUDA runtime (it loads libcclz when a call needs
#      it, which then binds to the program's NCCL: src/interpose/cclz_library.h).
# Usage: check_symbols.sh LIBCCLZ_NCCL MAP LIBNCCL
set -euo pipefail
lib=$1 map=$2 nccl=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$work/exported"
sed -n '/global:/,/local:/p' "$map" | grep -oE '^\s*nccl[A-Za-z]+;' | tr -d ' ;' | sort -u \
  >"$work/listed"
if ! diff "$work/listed" "$work/exported" >"$work/diff"; then
  echo "libcclz_nccl.so's defined symbols differ from libcclz_nccl.map (< map, > library):"
  cat "$work/diff"
  exit 1
fi
nm -D --defined-only "$nccl" | awk '{print $NF}' | sort -u >"$work/nccl"
missing=$(comm -23 "$work/exported" "$work/nccl")
if [ -n "$missing" ]; then
  echo "libcclz_nccl.so defines functions that $nccl does not: $missing"
  exit 1
fi
needed=$(readelf -d "$lib" | grep NEEDED || true)
for unwanted in libcclz libnccl libcudart; do
  if grep -q "\[$unwanted\." <<<"$needed"; then
    echo "libcclz_nccl.so links $unwanted:"; echo "$needed"; exit 1
  fi
done
echo "libcclz_nccl.so defines $(wc -l <"$work/exported") NCCL functions and nothing else"
