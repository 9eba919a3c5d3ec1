#!/usr/bin/env bash
# The library boundary, checked from outside (ctest: install_boundary):
#   1. libcclz.so's dynamic symbol table defines the C API's cclz* functions and nothing else;
#   2. `cmake --install` into a fresh prefix gives a package that a separate CMake project finds
#      with find_package(cclz), builds against and runs (consumer.c).
# Usage: check_install.sh BUILD_DIR SOURCE_DIR LIBRARY (the built libcclz.so)
set -euo pipefail
build=$1 source=$2 lib=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Defined dynamic symbols (T, D, B, R, W, V, ...); U (undefined) ones are the library's imports.
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$work/exported"
grep -v '^cclz[A-Z]' "$work/exported" >"$work/foreign" || true
if [ -s "$work/foreign" ]; then
  echo "libcclz exports symbols outside the C API:"; head -20 "$work/foreign"; exit 1
fi
declared=$(grep -cE '^CCLZ_API ' "$source/include/cclz/cclz.h")
exported=$(wc -l <"$work/exported")
if [ "$declared" != "$exported" ]; then
  echo "cclz.h declares $declared CCLZ_API functions, libcclz exports $exported:"
  grep -oE '^CCLZ_API [^(]*\bcclz[A-Za-z]+\(' "$source/include/cclz/cclz.h" |
    grep -oE 'cclz[A-Za-z]+' | sort | diff - "$work/exported" || true
  exit 1
fi
echo "libcclz exports $exported symbols, all of them the C API's"

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/consumer"
