#!/usr/bin/env bash
# scripts/test_simd_paths.sh: the unit tests of kernels/, nn/ and gpt/ again, compiled for
# the other SIMD levels this machine can run. Called by scripts/test.sh after the main
# build (which is -march=native: this machine's best level) has passed its tests.
#
# Why: kernels/simd.h picks its path at compile time (AVX-512, AVX2+FMA, NEON or portable
# C++). A build tests one of them. A defect that shows only on AVX2, or only without SIMD,
# would pass on an AVX-512 machine; one that shows only on AVX-512 would pass on an AVX2
# machine. So, on top of the native build:
#   portable   -DNNLAB_NATIVE=OFF: no -march flag, kernels take Portable<8>    every machine
#   avx2       -march=x86-64-v3: AVX2+FMA, the path of most laptops             x86 CPUs with AVX-512
#   avx512     -march=x86-64-v4, compiled but NOT run (this CPU cannot run it)  x86 CPUs without AVX-512
# Each is a core-only build (NNLAB_CORE_ONLY: kernels/, nn/, gpt/ and their unit tests, no
# lessons, no CUDA) in build/simd-<level>, and every level first passes the compiler canary
# with its own flags (cmake/NnlabCompilerCanary.cmake).
#
#   bash scripts/test_simd_paths.sh            the levels above for this machine
#   bash scripts/test_simd_paths.sh portable   one level
set -euo pipefail
cd "$(dirname "$0")/.."

has_cpu_flag() { grep -qw "$1" /proc/cpuinfo 2>/dev/null; }

levels=("$@")
if [[ ${#levels[@]} -eq 0 ]]; then
  levels=(portable)
  if [[ "$(uname -m)" == x86_64 ]]; then
    if has_cpu_flag avx512f; then
      levels+=(avx2)
    elif has_cpu_flag avx2; then
      levels+=(avx512)
    fi
  fi
fi

jobs=$(nproc 2>/dev/null || echo 2)
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
for level in "${levels[@]}"; do
  run=yes
  case "$level" in
    portable) flags=(-DNNLAB_NATIVE=OFF); expect="portable C++" ;;
    avx2) flags=(-DNNLAB_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-march=x86-64-v3"); expect="AVX2+FMA" ;;
    avx512) flags=(-DNNLAB_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-march=x86-64-v4"); expect="AVX-512F"; run=no ;;
    *) echo "test_simd_paths: unknown level '$level' (portable, avx2, avx512)" >&2; exit 2 ;;
  esac
  dir="build/simd-$level"
  echo "== SIMD level $level: configure $dir (${flags[*]})"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNNLAB_CORE_ONLY=ON -DNNLAB_CUDA=OFF "${flags[@]}" \
    > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  grep "nnlab: compiler canary" "$dir.configure.log" || true
  if [[ $run == no ]]; then
    # This CPU cannot execute these instructions: compile the kernels and their tests, so
    # at least a build error on the other level shows here.
    echo "== SIMD level $level: compile only (this CPU cannot run it)"
    cmake --build "$dir" --target nnlab_tests -j "$jobs"
    continue
  fi
  cmake --build "$dir" --target nnlab_tests -j "$jobs"
  # tests/test_kernels.cpp [simd-level] fails unless the kernels really took this path.
  echo "== SIMD level $level: the unit tests, kernels on the $expect path"
  NNLAB_EXPECT_SIMD="$expect" ctest --test-dir "$dir" -L unit --parallel "$jobs" --output-on-failure
done
