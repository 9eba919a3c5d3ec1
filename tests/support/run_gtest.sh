#!/usr/bin/env bash
# Runs one GPU test process (cclz_register_gpu_test): the executable with its arguments, and
# gtest's XML report under $CCLZ_TEST_XML_DIR when that is set (one file per process, named
# after the executable and the process id, so that shards running at once never collide).
set -euo pipefail
exe=$1; shift
if [ -n "${CCLZ_TEST_XML_DIR:-}" ]; then
  mkdir -p "$CCLZ_TEST_XML_DIR"
  export GTEST_OUTPUT="xml:$CCLZ_TEST_XML_DIR/$(basename "$exe").$$.xml"
fi
exec "$exe" "$@"
