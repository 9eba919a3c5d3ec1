#!/usr/bin/env bash
# Copies the header-only dependencies and the googletest sources from this machine's Debian
# packages into .deps/ (ignored by git), for machines that have a compiler but no package
# registry, such as the GPU machines: configure there with -DCCLZ_DEPS_DIR=$PWD/.deps.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .deps && mkdir -p .deps/include
cp -r /usr/include/CLI /usr/include/nlohmann /usr/include/fmt .deps/include/
cp -r /usr/src/googletest .deps/googletest
du -sh .deps
