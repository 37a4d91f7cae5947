#!/usr/bin/env bash
# Runs HERE (a build machine with the CUDA toolkit and NCCL; no GPU needed). Builds the GPU test
# programs in build-gpu/ (Release, CUDA + NCCL on, MPI off, sm_90) and packs them, with every shared
# library a bare GPU machine lacks, into ONE archive: gpu-bundle/meshtrain-gpu.tar.xz, holding
#   bin/        the programs listed in `targets` below (stripped)
#   lib/        their shared-library closure from ldd, less glibc and less what the GPU machine
#               provides (driver, cudart, cuBLAS, cuBLASLt, NCCL)
#   BUILD_INFO  commit, dirty files, date, and the provided libraries the programs expect there
# Carry gpu-bundle to the GPU machine and run scripts/gpu_check.sh there (see docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."

# The GPU programs to bundle (CMake target names): adding one is adding its name here.
targets=(cuda_ops_test device_cache_test comm_cuda_test comm_nccl_test gpu_training_test
         gpu_train_bench)

build=${MESHTRAIN_GPU_BUILD:-build-gpu}
jobs=${MESHTRAIN_JOBS:-2}
archive=gpu-bundle/meshtrain-gpu.tar.xz
max_mib=48
# Not bundled: glibc (the GPU machine's own is newer) and the libraries the GPU machine provides.
glibc_re='^(ld-linux.*|libc|libm|libmvec|libdl|libpthread|librt|libutil|libresolv|libanl)\.so'
provided_re='^(libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'

die() { echo "gpu_bundle: $*" >&2; exit 1; }
# Shares the build lock with the other builds on this machine.
locked() { flock /tmp/meshtrain-build.lock "$@"; }

echo "gpu_bundle: configuring $build"
locked cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMESHTRAIN_CUDA=ON -DMESHTRAIN_NCCL=ON \
  -DMESHTRAIN_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
target_args=()
for t in "${targets[@]}"; do target_args+=(--target "$t"); done
echo "gpu_bundle: building ${targets[*]} (-j$jobs)"
locked cmake --build "$build" -j"$jobs" "${target_args[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
declare -A provided=()
for t in "${targets[@]}"; do
  # A target's program is the one executable file of that name in the build tree.
  mapfile -t found < <(find "$build" -type f -name "$t" -perm -u+x -not -path '*/CMakeFiles/*')
  [[ ${#found[@]} -eq 1 ]] || die "expected one program '$t' under $build, found ${#found[@]}"
  cp "${found[0]}" "$stage/bin/$t"
  strip --strip-unneeded "$stage/bin/$t"
  # ldd lists the whole closure: "soname => path (addr)", "soname => not found" or "path (addr)".
  lddout=$(ldd "${found[0]}") || die "ldd failed on ${found[0]}"
  missing=$(grep 'not found' <<<"$lddout" || true)
  [[ -z $missing ]] || die "$t needs libraries that cannot be resolved here:"$'\n'"$missing"
  while read -r name arrow path _; do
    [[ $arrow == "=>" ]] || continue  # the vdso and the loader itself
    [[ $name =~ $glibc_re ]] && continue
    if [[ $name =~ $provided_re ]]; then provided[$name]=1; continue; fi
    [[ -f $stage/lib/$name ]] || cp -L "$path" "$stage/lib/$name"
  done <<<"$lddout"
done

{
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  echo "dirty files: $(git status --porcelain --untracked-files=no 2>/dev/null | wc -l)"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(ldd --version | head -n1))"
  echo "programs: ${targets[*]}"
  echo "provided by the GPU machine: ${!provided[*]}"
} >"$stage/BUILD_INFO"

mkdir -p "$(dirname "$archive")"
echo "gpu_bundle: compressing (xz -9)"
tar -C "$stage" -cf - BUILD_INFO bin lib | xz -T"$jobs" -9 >"$archive.tmp"
mv "$archive.tmp" "$archive"
size=$(stat -c %s "$archive")

echo "gpu_bundle: wrote $archive ($((size / 1024 / 1024)) MiB, $size bytes; unpacked $(du -sh "$stage" | cut -f1))"
echo "  bin: $(cd "$stage/bin" && echo *)"
echo "  lib: $(cd "$stage/lib" && echo *)"
echo "  provided by the GPU machine: ${!provided[*]}"
((size <= max_mib * 1024 * 1024)) ||
  die "$archive is over $max_mib MiB: it would not fit the 64 MiB carried to the GPU machine"
echo "gpu_bundle: next, run scripts/gpu_check.sh there with carry [\"gpu-bundle\"] (docs/gpu.md)"
