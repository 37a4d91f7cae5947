#!/usr/bin/env bash
# Configures and builds meshtrain in build/ (Release; CUDA, NCCL and MPI switched on when found).
# Arguments name the targets to build (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build -j"${MESHTRAIN_JOBS:-2}" "${targets[@]}"
