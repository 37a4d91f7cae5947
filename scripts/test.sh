#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (GPU tests skip without a GPU), then the sanitizer
# builds: ThreadSanitizer over the concurrency tests, AddressSanitizer + UndefinedBehaviorSanitizer
# over the parsers, the checkpoint tests and the fuzz targets (scripts/sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j"${MESHTRAIN_JOBS:-2}"
bash scripts/sanitize.sh
