#!/usr/bin/env bash
# Copies the shared GPT tensors into .data/ (ignored by git), so that a GPU run can carry them.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${CCLZ_SHARED_DATA:-../shared/data/gpt-small-tensors}
rm -rf .data && mkdir -p .data && cp "$src"/index.json "$src"/*.bin .data/
du -sh .data
