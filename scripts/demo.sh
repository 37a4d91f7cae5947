#!/usr/bin/env bash
# Sets up, builds and runs the main job: GPT-2 (byte-level demo preset) trained on the demo corpus
# by 8 ranks of the local backend on a 3D mesh, pp=2 x dp_shard=2 x tp=2: a 1F1B pipeline over two
# stages streaming 4 micro-batches per step, FSDP over the data axis, Megatron tensor parallelism
# with sequence parallelism inside each pair of ranks: the settings of configs/demo.toml. Extra
# arguments go to `meshtrain train` and override the file (for example --steps 50).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh meshtrain
build/bin/meshtrain prepare data/demo_corpus.txt build/demo_corpus.bin
build/bin/meshtrain train --config configs/demo.toml "$@"
