#!/usr/bin/env bash
# Installs what the README's test command needs, when something is missing, on Debian 12 /
# Ubuntu 24.04 (apt): the test suite's dependencies, which the main job does not need.
#
#   cmake, a C++17 compiler (g++)   the build
#   catch2                          the test framework (2.13 on Debian 12, 3.x on Ubuntu 24.04)
#   zlib1g-dev                      reading the shipped gzip'd test data (tests/data/*.gz)
#   libbenchmark-dev                the micro-benchmarks (built only where a GPU is visible)
#   libopenmpi-dev, openmpi-bin     sdnn::mpi and the MPI tests (label `mpi`, 2 and 3 ranks)
#   python3                         scripts/check_layering.py (CTest host.layering)
#   python3-dev, python3-pybind11,  the Python package sdnn (python/) and its pytest suite
#   libdlpack-dev, python3-numpy,   (CTest host.python)
#   python3-scipy, python3-pytest
#   clang, libclang-rt-dev          libFuzzer + ASan/UBSan for the fuzz targets (label `fuzz`, tests/fuzz)
#
# Nothing missing: prints one line, exits 0, installs nothing. Something missing: installs it
# with apt-get as root, or through sudo where sudo is available; otherwise prints the exact
# command to run and exits 1. Not an apt system: prints what to install and exits 1
# (SDNN_SKIP_DEPS=1 skips this script, for machines that provide the packages another way).
set -euo pipefail

if [ "${SDNN_SKIP_DEPS:-0}" = "1" ]; then
  echo "install_test_deps: SDNN_SKIP_DEPS=1, not checking"
  exit 0
fi

packages=(cmake g++ catch2 zlib1g-dev libbenchmark-dev libopenmpi-dev openmpi-bin python3 clang libclang-rt-dev
          python3-dev python3-pybind11 libdlpack-dev python3-numpy python3-scipy python3-pytest)

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "install_test_deps: not a Debian/Ubuntu (apt) system. The tests need: CMake >= 3.24, a C++17" >&2
  echo "  compiler, Catch2 2.13 or 3.x, zlib (headers), Python 3; optional: Python headers," >&2
  echo "  pybind11, DLPack, NumPy, SciPy and pytest (the Python package), Google Benchmark, MPI (C++)." >&2
  echo "  Install them with your package manager, then rerun with SDNN_SKIP_DEPS=1." >&2
  exit 1
fi

installed() {  # installed PACKAGE: dpkg says "install ok installed"
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

need=()
for p in "${packages[@]}"; do
  case "$p" in
    # Any working tool will do for these (a CMake or compiler installed outside apt counts).
    cmake) command -v cmake >/dev/null 2>&1 || need+=("$p") ;;
    g++) command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 || need+=("$p") ;;
    python3) command -v python3 >/dev/null 2>&1 || need+=("$p") ;;
    *) installed "$p" || need+=("$p") ;;
  esac
done

if [ ${#need[@]} -eq 0 ]; then
  echo "install_test_deps: all present (${packages[*]})"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && { sudo -n true 2>/dev/null || [ -t 0 ]; }; then
  as_root=(sudo)  # passwordless, or a terminal to ask the password on
else
  echo "install_test_deps: missing ${need[*]}; not root and no usable sudo. Run:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi

echo "install_test_deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! ${as_root[@]+"${as_root[@]}"} apt-get update -qq ||
   ! ${as_root[@]+"${as_root[@]}"} apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
  echo "install_test_deps: apt-get failed; install by hand: apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "install_test_deps: installed ${need[*]}"
