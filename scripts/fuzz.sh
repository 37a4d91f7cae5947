#!/usr/bin/env bash
# Open-ended fuzzing of one parser with libFuzzer (clang), under AddressSanitizer and
# UndefinedBehaviorSanitizer: the same targets that CI runs on their seed corpora and a bounded
# number of mutations (scripts/sanitize.sh), here guided by coverage for as long as asked.
#   bash scripts/fuzz.sh TARGET [SECONDS]      TARGET: token_file, safetensors,
#                                              safetensors_index, checkpoint, metrics,
#                                              config_file or hf_config
# New inputs that reach new code go to build-fuzz/corpus/TARGET (copy the useful ones into
# tests/fuzz/corpus/TARGET); a crash leaves build-fuzz/crash-* for the driver or libFuzzer to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh TARGET [SECONDS]}
seconds=${2:-300}
[ -d "tests/fuzz/corpus/$target" ] || { echo "no fuzz target '$target' (tests/fuzz/corpus/)" >&2; exit 2; }
bash scripts/setup.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMESHTRAIN_CUDA=OFF -DMESHTRAIN_NCCL=OFF -DMESHTRAIN_MPI=OFF -DMESHTRAIN_BUILD_BENCH=OFF \
  -DMESHTRAIN_SANITIZE=address,undefined -DMESHTRAIN_LIBFUZZER=ON >/dev/null
cmake --build build-fuzz -j"${MESHTRAIN_JOBS:-2}" --target "fuzz_$target"
mkdir -p "build-fuzz/corpus/$target"
cd build-fuzz
"fuzz/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 "corpus/$target" \
  "../tests/fuzz/corpus/$target"
