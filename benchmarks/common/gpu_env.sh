# shellcheck shell=bash
# benchmarks/common/gpu_env.sh - the setup the GPU scripts of benchmarks/ share; `source` it, do
# not run it. Sets SDNN_ROOT (the repository root) and JOBS (build jobs, default 16; a script may
# set another default before sourcing), and defines the helpers below. It changes no directory and
# no shell option: each script keeps its own `set` line and decides where it runs.
#
#   source "$(dirname "$0")/common/gpu_env.sh"
#   B=$(abs_path "${1:-build-gpu}"); use_out "${OUT:-$B/out}"
#   gpu_banner my_script; configure_and_build graph_challenge || exit 1; say "done"

SDNN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${JOBS:-16}

# abs_path PATH: PATH made absolute against the current directory (PATH need not exist).
abs_path() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$PWD/$1" ;;
  esac
}

# use_out DIR [NAME]: creates DIR and sets OUT to its absolute path, and SUMMARY (the file `say`
# appends to) to OUT/NAME (default summary.txt), emptied; NAME "-": no summary file.
use_out() {
  mkdir -p "$1" || return 1
  OUT=$(cd "$1" && pwd) || return 1
  if [ "${2:-}" = - ]; then
    SUMMARY=
  else
    SUMMARY=$OUT/${2:-summary.txt}
    : >"$SUMMARY"
  fi
}

# say TEXT...: prints TEXT and appends it to $SUMMARY (when set).
say() {
  if [ -n "${SUMMARY:-}" ]; then echo "$*" | tee -a "$SUMMARY"; else echo "$*"; fi
}

# gpu_banner NAME: "== NAME <UTC time> on <host>, commit <short hash>", one "gpu: " line per GPU
# (the nvidia-smi fields of GPU_FIELDS, default name,driver_version,memory.total) and the nvcc
# release, all through `say`.
gpu_banner() {
  say "== $1 $(date -u +%FT%TZ) on $(hostname), commit $(git -C "$SDNN_ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  local line
  while IFS= read -r line; do
    say "gpu: $line"
  done < <(nvidia-smi --query-gpu="${GPU_FIELDS:-name,driver_version,memory.total}" --format=csv,noheader 2>&1)
  say "nvcc: $(nvcc --version 2>&1 | tail -1)"
}

# gpu_name_slug: the first GPU's name with every character other than [A-Za-z0-9] replaced by
# '_' (no trailing '_'), for file names; empty (and status 0) without nvidia-smi.
gpu_name_slug() {
  { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null || true; } | head -1 | tr -c 'A-Za-z0-9\n' '_' |
    sed 's/_*$//'
}

# cmake_configure: configures build directory $B from sources $SRC (default SDNN_ROOT): Release,
# CMAKE_CUDA_ARCHITECTURES=${ARCH:-90}, then the words of the array CMAKE_ARGS. Output on stdout.
cmake_configure() {
  cmake -S "${SRC:-$SDNN_ROOT}" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" \
    ${CMAKE_ARGS[@]+"${CMAKE_ARGS[@]}"}
}

# cmake_build [TARGETS...]: builds TARGETS (everything when none) in $B with $JOBS jobs.
cmake_build() {
  if [ $# -gt 0 ]; then
    cmake --build "$B" -j"$JOBS" --target "$@"
  else
    cmake --build "$B" -j"$JOBS"
  fi
}

# configure_and_build [TARGETS...]: cmake_configure into $CONFIGURE_LOG (default
# $OUT/configure.log) and cmake_build TARGETS into $BUILD_LOG (default $OUT/build.log; the two
# may be one file). On success says "build: ok in N s"; on failure says which step failed, shows
# the log's tail or its error lines, and returns 1 (the caller exits).
configure_and_build() {
  local clog=${CONFIGURE_LOG:-$OUT/configure.log} blog=${BUILD_LOG:-$OUT/build.log} t0
  t0=$(date +%s)
  if ! cmake_configure >"$clog" 2>&1; then
    say "configure FAILED (see $clog)"
    tail -30 "$clog"
    return 1
  fi
  [ "$blog" = "$clog" ] || : >"$blog"
  if ! cmake_build "$@" >>"$blog" 2>&1; then
    say "build FAILED (see $blog)"
    grep -E 'error|Error' "$blog" | head -40
    return 1
  fi
  say "build: ok in $(($(date +%s) - t0)) s"
}
