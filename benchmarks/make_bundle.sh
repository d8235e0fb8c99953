#!/usr/bin/env bash
# Packs device binaries built on a machine without a GPU into one archive for a device call that
# only runs them (benchmarks/session_gpu.sh with BUNDLE=...): the compile minutes are spent here,
# not out of the device budget. The binaries need the same CUDA major version on the device.
#
#   benchmarks/make_bundle.sh BUILD_DIR OUT.tar.xz [BASE_SRC]
# BUILD_DIR: a build of this tree with -DSDNN_BUILD_DEVICE_TESTS=ON -DSDNN_BUILD_BENCHMARKS=ON.
# BASE_SRC: optional sources of an earlier commit (git archive); its graph_challenge and bench_spmm
# are built into base/ for the same-call comparison. The archive holds tests/, examples/,
# benchmarks/ and base/ as in a build directory, lib/ (Google Benchmark's library) and manifest.txt.
# env: COMMIT / BASE_COMMIT name the sources in the manifest when they are not a git checkout.
set -euo pipefail
B=$(cd "${1:?usage: make_bundle.sh BUILD_DIR OUT.tar.xz [BASE_SRC]}" && pwd)
OUTF=${2:?usage: make_bundle.sh BUILD_DIR OUT.tar.xz [BASE_SRC]}
BASE=${3:-}
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/tests" "$STAGE/examples/graph_challenge" "$STAGE/benchmarks" "$STAGE/lib"
cp "$B/tests/sdnn_cuda_tests" "$STAGE/tests/"
cp "$B/examples/graph_challenge/graph_challenge" "$STAGE/examples/graph_challenge/"
for ex in train_structured train_cnn; do  # the training stages' programs, when built
  if [ -x "$B/examples/$ex/$ex" ]; then
    mkdir -p "$STAGE/examples/$ex"
    cp "$B/examples/$ex/$ex" "$STAGE/examples/$ex/"
  fi
done
for b in "$B"/benchmarks/bench_*; do [ -x "$b" ] && cp "$b" "$STAGE/benchmarks/"; done
lib=$(ldd "$STAGE/benchmarks/bench_spmm" | awk '/libbenchmark/ {print $3}')
[ -n "$lib" ] && cp "$lib" "$STAGE/lib/"
if [ -n "$BASE" ]; then
  cmake -S "$BASE" -B "$BASE/build-cmp" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DSDNN_BUILD_TESTS=OFF -DSDNN_HEADER_CHECK=OFF -DSDNN_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$BASE/build-cmp" -j"${JOBS:-2}" --target graph_challenge bench_spmm >/dev/null
  mkdir -p "$STAGE/base/examples/graph_challenge" "$STAGE/base/benchmarks"
  cp "$BASE/build-cmp/examples/graph_challenge/graph_challenge" "$STAGE/base/examples/graph_challenge/"
  cp "$BASE/build-cmp/benchmarks/bench_spmm" "$STAGE/base/benchmarks/"
fi
{
  # The sources the binaries were built from (a git archive has no history: COMMIT names it).
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt")
  echo "commit ${COMMIT:-$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
  echo "built $(date -u +%FT%TZ) on $(hostname) with $(nvcc --version | tail -1)"
  echo "test_data_dir $src/tests/data"
  if [ -n "$BASE" ]; then
    echo "base ${BASE_COMMIT:-$BASE}"
    echo "test_data_dir $(cd "$BASE" && pwd)/tests/data"  # the base graph_challenge's built-in data path
  fi
} >"$STAGE/manifest.txt"
tar -C "$STAGE" -cJf "$OUTF" .
echo "$OUTF: $(du -h "$OUTF" | cut -f1)"
cat "$STAGE/manifest.txt"
