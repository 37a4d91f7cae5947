#!/usr/bin/env bash
# Builds and runs the sanitizer checks that scripts/test.sh (and so CI) runs after the suite:
#   thread   ThreadSanitizer over the concurrency tests: the CPU thread team, the local backend,
#            FSDP's prefetching and the pipeline runner (build-tsan/)
#   address  AddressSanitizer + UndefinedBehaviorSanitizer over the file parsers, the checkpoint
#            tests and the fuzz targets on their seed corpora and mutations (build-asan/)
# With no argument it runs both. Host code only (CUDA, NCCL and MPI off), and only the targets
# these checks need, so that CI's two cores build them in minutes. Longer fuzzing:
# MESHTRAIN_FUZZ_MUTATIONS=200000 bash scripts/sanitize.sh address (or scripts/fuzz.sh, libFuzzer).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=${MESHTRAIN_JOBS:-2}
# -O1 -g1: a quicker build than -O2, and stacks with lines in the sanitizers' reports.
common=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
        -DMESHTRAIN_CUDA=OFF -DMESHTRAIN_NCCL=OFF -DMESHTRAIN_MPI=OFF -DMESHTRAIN_BUILD_BENCH=OFF)

# build DIR SANITIZERS TARGETS...
build() {
  local dir=$1 sanitizers=$2
  shift 2
  cmake -S . -B "$dir" "${common[@]}" -DMESHTRAIN_SANITIZE="$sanitizers" \
    -DMESHTRAIN_FUZZ_MUTATIONS="${MESHTRAIN_FUZZ_MUTATIONS:-20000}" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$dir" -j"$jobs" "${targets[@]}"
}

# The layouts under ThreadSanitizer: collectives and point-to-point at an odd and an even world,
# FSDP with prefetching over an odd world and hybrid, pipelines whose receives come in another
# order than the sends, and 3D; and the layout search, whose meshes are replayed on every core.
tsan_layouts='Grid/LocalCollectives\..*/w[34]_n(7|65536)_f32|Grid/LocalP2P\..*/w[34]_|'
tsan_layouts+='Layouts/FsdpEquivalence\..*/W(3_full|3_grad_op_accum2_every|4_hybrid_accum2_last_clip)$|'
tsan_layouts+='Layouts/PpEquivalence\..*/(interleaved_pp2_m5|zb_h1_pp4_m5|3d_1f1b_full_clip)$|'
tsan_layouts+='LayoutSearch\.CoversTheSpaceFastestFirst$'

thread() {
  build build-tsan thread thread_team_test comm_test fsdp_test pp_train_test \
    plan_layout_search_test
  # second_deadlock_stack: both stacks of a lock-order report. OpenBLAS and oneDNN are not
  # instrumented; the cases here run f32 kernels single-threaded inside them. The suppressions
  # say why each is not a race of ours.
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan_suppressions.txt" \
    ctest --test-dir build-tsan \
    --output-on-failure -j"$jobs" \
    -R "^(ThreadTeam\.|SpawnRanks\.|LocalBackend\.|Sizes/LocalBackendInPlace\.|LastRankMoves\.|ProgressThread\.|AsyncWorkRunOnWait\.|Local(P2P)?(Failure|Abort)|LocalWorldAbort|$tsan_layouts)"
}

address() {
  build build-asan address,undefined checkpoint_tests models_tests fuzz_token_file fuzz_safetensors \
    fuzz_safetensors_index fuzz_checkpoint fuzz_metrics fuzz_config_file fuzz_hf_config
  # detect_leaks: a parser that loses memory on a refused input is a finding too.
  ASAN_OPTIONS="detect_leaks=1 abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" \
    -R '^(Fuzz\.|Checkpoint|Reshard|Convert|Safetensors|TokenFile|Hostile|HfConfigJson)'
}

case "${1:-all}" in
  thread) thread ;;
  address) address ;;
  all) thread && address ;;
  *) echo "usage: $0 [thread|address]" >&2; exit 2 ;;
esac
