#!/usr/bin/env bash
# On a machine with the CUDA toolkit and an H100/H200 (sm_90): builds the CUDA kernel tests with
# CUDA and NCCL on, and runs them. Logs go to ${OUT:-/tmp}; the exit status is ctest's.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
build="${MESHTRAIN_GPU_BUILD:-build-gpu}"
mkdir -p "$out"

nvidia-smi >"$out/nvidia-smi.log" 2>&1 || echo "gpu_check: nvidia-smi failed (see $out/nvidia-smi.log)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_CUDA=ON -DMESHTRAIN_NCCL=ON \
  -DMESHTRAIN_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/gpu_configure.log" 2>&1 ||
  { tail -n 40 "$out/gpu_configure.log"; exit 1; }
cmake --build "$build" -j16 --target cuda_ops_test >"$out/gpu_build.log" 2>&1 ||
  { grep -E "error|Error" "$out/gpu_build.log" | head -n 40; exit 1; }
# Every case of the CUDA kernel tests has "Cuda" in its suite name.
ctest --test-dir "$build" -R Cuda --output-on-failure -j8 2>&1 | tee "$out/gpu_ctest.log" ||
  cuda_status=$?
# The nccl backend's tests (every case has "Nccl" in its name; multi-rank cases skip below W GPUs).
cmake --build "$build" -j16 --target comm_nccl_test >"$out/gpu_build_nccl.log" 2>&1 ||
  { grep -E "error|Error" "$out/gpu_build_nccl.log" | head -n 40; exit 1; }
ctest --test-dir "$build" -R Nccl --output-on-failure -j4 2>&1 | tee "$out/gpu_ctest_nccl.log"
exit "${cuda_status:-0}"
