#!/usr/bin/env bash
# scripts/test.sh: the README's second command, and exactly what CI runs (.ci/run).
# Sets up, builds (release preset) and runs every test: Catch2 unit tests, the lesson
# programs on small data, the CLI's error handling, the exercises (every stub must fail,
# every solution pass) and the notebooks; then the unit tests of kernels/, nn/ and gpt/
# once more for each other SIMD level this CPU runs (scripts/test_simd_paths.sh), and the
# bad-input campaign, the fuzzers and the sanitized loader tests (scripts/test_reliability.sh).
#   bash scripts/test.sh                  everything
#   bash scripts/test.sh -L unit          only ctest label "unit" (extra args go to ctest)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release
cmake --build --preset release
# Two tests at a time, each of whose programs may run 2 OpenMP threads: with OpenMP's
# default (spin at barriers) a thread whose partner is descheduled burns its time slice
# waiting; passive waiting sleeps instead (measured in lesson 04: 8x faster under load).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --preset release --parallel 2 "$@"
# The same unit tests of kernels/, nn/ and gpt/ on the other SIMD levels this CPU can run
# (portable C++ always; AVX2 on an AVX-512 CPU): a defect on one path only shows here.
# Skipped when arguments asked for a subset of the tests.
# Then bad input: the campaign, the fuzzers and the loaders under the sanitizers
# (scripts/test_reliability.sh, docs/reliability.md).
if [[ $# -eq 0 ]]; then
  bash scripts/test_simd_paths.sh
  bash scripts/test_reliability.sh
fi
