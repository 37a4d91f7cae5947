#!/usr/bin/env bash
# Runs THERE: on the GPU machine, in the repo root, through the device tool (docs/gpu.md). Builds
# nothing. Expects
#   gpu-bundle/meshtrain-gpu.tar.xz  made here by scripts/gpu_bundle.sh (programs + the libraries a
#                                    bare machine lacks), carried there with carry ["gpu-bundle"];
#   the NVIDIA driver, and libcudart, libcublas, libcublasLt, libnccl somewhere below (CUDA toolkit
#   dirs, system lib dir, or python site-packages nvidia/*/lib);
#   OUT set (by hand: unset → /tmp/meshtrain-gpu-out). Writes four files there:
#   summary.txt (per program: counts, status, seconds), tests.log (all output), env.txt (libraries
#   found, ldd), nvidia-smi.txt.
# Runs every bundled program, each under a timeout, going on after one fails or crashes; a crashed
# program's last test is rerun under compute-sanitizer memcheck when the machine has it. Exits 0
# when nothing failed (every test skipping is fine with no GPU visible), 1 otherwise, 2 when the
# bundle is missing.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-/tmp/meshtrain-gpu-out}
archive=${MESHTRAIN_GPU_BUNDLE:-gpu-bundle/meshtrain-gpu.tar.xz}
total_s=${MESHTRAIN_GPU_TOTAL_S:-420}   # for all programs: under the timeout_s in docs/gpu.md
default_s=240                           # per program, unless named here:
declare -A budget_s=([cuda_ops_test]=90 [device_cache_test]=20 [comm_cuda_test]=60
                     [comm_nccl_test]=45 [gpu_training_test]=120 [gpu_train_bench]=120)
declare -A args=()                      # extra arguments per program, e.g. a benchmark's filter
needs_gpu=" gpu_train_bench "           # programs that measure a GPU: not run without one
mkdir -p "$out"
summary=$out/summary.txt log=$out/tests.log env=$out/env.txt

if [[ ! -f $archive ]]; then
  echo "gpu_check: no $archive. Make it on the build machine with scripts/gpu_bundle.sh, then run
this script through the device tool with carry [\"gpu-bundle\"] (docs/gpu.md)." | tee "$summary"
  exit 2
fi
bundle=$(mktemp -d)
trap 'rm -rf "$bundle"' EXIT
: >"$log"
tar -xJf "$archive" -C "$bundle" || { echo "gpu_check: cannot unpack $archive" | tee "$summary"; exit 1; }

# The CUDA libraries the programs take from this machine: the first directory holding each.
pythons=()
for py in python3 /opt/torch/.venv/bin/python3; do command -v "$py" >/dev/null && pythons+=("$py"); done
site_dirs=$(for py in "${pythons[@]}"; do
  "$py" -c 'import site; print(*site.getsitepackages(), site.getusersitepackages(), sep="\n")' 2>/dev/null
done | sort -u)
search_dirs=(/usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/x86_64-linux/lib
  /usr/lib/x86_64-linux-gnu)
for s in $site_dirs /opt/*/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages; do
  [[ -d $s/nvidia ]] && mapfile -t -O "${#search_dirs[@]}" search_dirs < <(
    find "$s/nvidia" -maxdepth 3 -type d -name lib | sort)
done
ld_dirs=("$bundle/lib")
found_report=""
for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcuda.so.1; do
  where="NOT FOUND"
  for d in "${search_dirs[@]}"; do
    [[ -e $d/$so ]] || continue
    where="$d/$so -> $(readlink -f "$d/$so")"
    [[ " ${ld_dirs[*]} " == *" $d "* ]] || ld_dirs+=("$d")
    break
  done
  cached=$(ldconfig -p 2>/dev/null | awk -v so="$so" '$1 == so && /x86-64/ {print $NF; exit}')
  [[ $where == "NOT FOUND" && -n $cached ]] && where="in the loader cache: $cached"
  found_report+="  $so: $where"$'\n'
done
LD_LIBRARY_PATH=$(IFS=:; echo "${ld_dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

gpu_note=""
if nvidia-smi >"$out/nvidia-smi.txt" 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
else
  gpus=0
  gpu_note="nvidia-smi failed: no GPU visible, so GPU tests should skip"
fi
# compute-sanitizer (toolkit or python wheel): a crashed program's last test is rerun under its
# memcheck, which names the kernel and the bad address.
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer \
  $(for s in $site_dirs; do echo "$s"/nvidia/cu*/bin/compute-sanitizer; done) 2>/dev/null | head -n1)
sanitize_s=90  # at most, for that rerun
# In the order of gpu_bundle.sh's list (the time left runs out for the last ones first).
programs=$(sed -n 's/^programs: //p' "$bundle/BUILD_INFO")
[[ -n $programs ]] || programs=$(ls "$bundle/bin")
{
  echo "== bundle"; cat "$bundle/BUILD_INFO"
  echo "== machine: $(uname -srm); $(ldd --version | head -n1); GPUs: $gpus"
  echo "== python: ${pythons[*]:-none}; site-packages: $(tr '\n' ' ' <<<"$site_dirs")"
  echo "== CUDA libraries found"; printf '%s' "$found_report"
  echo "== compute-sanitizer: ${sanitizer:-not found}"
  echo "== LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for p in $programs; do echo "== ldd -r $p"; ldd -r "$bundle/bin/$p" 2>&1; done
} >"$env"

# gtest's closing lines: "[  PASSED  ] 3 tests.", "[  SKIPPED ] 2 tests, listed below:", ...
count() { grep -oE "^\[  $1 *\] [0-9]+ tests?[.,]" "$2" | grep -oE '[0-9]+' | head -n1; }
{
  echo "meshtrain GPU check: $(head -n1 "$bundle/BUILD_INFO"); GPUs visible: $gpus"
  [[ -n $gpu_note ]] && echo "NOTE: $gpu_note"
  grep -q "NOT FOUND" <<<"$found_report" && printf 'CUDA libraries:\n%s' "$found_report"
  printf '%-18s %6s %6s %7s  %-28s %5s\n' program passed failed skipped status secs
} >"$summary"
failed=0 passed_all=0 skipped_all=0 start=$SECONDS
for p in $programs; do
  bin=$bundle/bin/$p plog=$bundle/$p.log
  missing=$(ldd -r "$bin" 2>&1 | grep -E 'not found|undefined symbol' | sed 's/^[[:space:]]*//')
  left=$((total_s - (SECONDS - start)))
  limit=${budget_s[$p]:-$default_s}
  ((limit > left)) && limit=$left
  t0=$SECONDS
  echo "gpu_check: $p (limit ${limit}s)"
  if [[ -n $missing ]]; then
    status="NOT RUN: libraries missing"
    echo "$missing" >"$plog"
  elif ((gpus == 0)) && [[ $needs_gpu == *" $p "* ]]; then
    status="skipped: no GPU"
    : >"$plog"
  elif ((limit < 10)); then
    status="NOT RUN: out of time"
    : >"$plog"
  else
    # shellcheck disable=SC2086  # args split into words on purpose
    timeout -k 10 "$limit" "$bin" ${args[$p]:-} >"$plog" 2>&1
    rc=$?
    case $rc in
      0) status=ok ;;
      124 | 137) status="TIMEOUT after ${limit}s" ;;
      *) ((rc > 128)) && status="CRASHED (signal $((rc - 128)))" || status="FAILED (exit $rc)" ;;
    esac
  fi
  secs=$((SECONDS - t0))
  last_test=$(grep -E '^\[ RUN      \]' "$plog" | tail -n1 | sed 's/^\[ RUN      \] //')
  slog=""
  left=$((total_s - (SECONDS - start)))
  if [[ $status == CRASHED* && -n $sanitizer && -n $last_test ]] && ((left >= 20)); then
    slog=$bundle/$p.sanitizer.log
    echo "gpu_check: $p crashed in $last_test: rerunning it under compute-sanitizer"
    timeout -k 5 $((left < sanitize_s ? left : sanitize_s)) "$sanitizer" --tool memcheck \
      --print-limit 10 "$bin" --gtest_filter="$last_test" >"$slog" 2>&1
  fi
  pass=$(count PASSED "$plog") fail=$(count FAILED "$plog") skip=$(count SKIPPED "$plog")
  [[ -n $pass ]] && fail=${fail:-0} skip=${skip:-0}  # gtest prints these two only when nonzero
  [[ $status != ok && $status != skipped* ]] && failed=1
  {
    printf '%-18s %6s %6s %7s  %-28s %5s\n' "$p" "${pass:--}" "${fail:--}" "${skip:--}" "$status" "$secs"
    [[ $status == NOT\ RUN:\ lib* ]] && sed 's/^/    /' "$plog"
    # gtest names each failed test once more after its summary; a dead program, the test it was in.
    grep -E '^\[  FAILED  \] [A-Za-z_0-9/.]+(, where .*)?$' "$plog" | grep -vE ' \([0-9]+ ms\)$' |
      sed 's/^/    /'
    [[ -z $pass && -z $fail && -n $last_test ]] && echo "    last test started: $last_test"
    [[ -n $slog ]] && grep -E '^========= ' "$slog" | head -n 15 | sed 's/^/    sanitizer: /'
    # A benchmark's result tables (gpu_train_bench prints them after its runs, before its profile).
    [[ $needs_gpu == *" $p "* ]] && sed -n '/^one GPU/,/^profile:/p' "$plog" | sed 's/^/    /'
  } >>"$summary"
  { echo "===== $p: $status, ${secs}s"; cat "$plog"; [[ -n $slog ]] && cat "$slog"; } >>"$log"
  passed_all=$((passed_all + ${pass:-0})) skipped_all=$((skipped_all + ${skip:-0}))
done
if ((failed)); then
  echo "RESULT: FAILED (see tests.log)" >>"$summary"
elif ((gpus > 0 && passed_all == 0)); then
  echo "RESULT: FAILED: a GPU is visible but no test passed ($skipped_all skipped)" >>"$summary"
  failed=1
elif ((gpus == 0)); then
  echo "RESULT: ok, but no GPU visible: $passed_all passed, $skipped_all skipped" >>"$summary"
else
  echo "RESULT: ok ($passed_all passed, $skipped_all skipped)" >>"$summary"
fi
cat "$summary"
exit "$failed"
