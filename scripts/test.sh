#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"${MESHTRAIN_JOBS:-2}"
