#!/usr/bin/env bash
# scripts/bench_gemm_cputime.sh: the sgemm rungs against OpenBLAS at given shapes, 1 thread,
# timed by CPU time (scripts/gemm_cputime.cpp says why). Needs the release build
# (build/release/kernels/libnnlab_kernels.a) and libopenblas-dev.
#   bash scripts/bench_gemm_cputime.sh REPEATS VARIANTS... SHAPES...
#   bash scripts/bench_gemm_cputime.sh 30 v6 v7 openblas 768x128x384nn 384x128x768tn
# A shape is MxNxK plus the transposes of A and B: nn, nt (A.B^T), tn (A^T.B).
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/release/bin/gemm_cputime
g++ -O2 -std=c++20 -march=native -fopenmp -I. scripts/gemm_cputime.cpp build/release/kernels/libnnlab_kernels.a \
  -lopenblas -o "$out"
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$out" "$@"
