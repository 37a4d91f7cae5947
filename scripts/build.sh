#!/usr/bin/env bash
# Configures and builds meshtrain in build/ (Release; CUDA, NCCL and MPI switched on when found).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"${MESHTRAIN_JOBS:-2}"
