#!/usr/bin/env bash
# scripts/check_neon.sh: build the kernel tests for 64-bit ARM (where kernels/simd.h picks
# NEON) and run them under qemu-user, so the NEON paths are validated on an x86 machine.
#
# Needs Debian's cross compiler and emulator (not part of setup.sh: only this check uses
# them):  sudo apt-get install g++-aarch64-linux-gnu qemu-user
# Arguments go to the test program (a Catch2 filter; default "[kernels]").
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check_neon: $tool not found: sudo apt-get install g++-aarch64-linux-gnu qemu-user" >&2
    exit 2
  fi
done
out=build/aarch64
mkdir -p "$out"
echo "compiling the kernels and their tests for aarch64 (NEON), static..."
aarch64-linux-gnu-g++ -O2 -std=c++20 -fopenmp -static -I. \
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion \
  -DNNLAB_SOURCE_DIR="\"$PWD\"" -DNNLAB_BIN_DIR="\"/nonexistent\"" \
  tests/main.cpp tests/test_kernels.cpp tests/test_kernels_fused.cpp \
  kernels/matmul.cpp kernels/elementwise.cpp kernels/softmax.cpp kernels/layernorm.cpp \
  kernels/bias_gelu.cpp kernels/ceilings.cpp kernels/harness.cpp kernels/bench/*.cpp \
  -o "$out/kernel_tests" 2> >(grep -v "dlopen' in statically linked" >&2)
aarch64-linux-gnu-g++ -std=c++20 -E -dM -x c++ /dev/null | grep -q __ARM_NEON ||
  { echo "check_neon: the cross compiler does not define __ARM_NEON" >&2; exit 1; }
echo "running under qemu-aarch64..."
qemu-aarch64 "$out/kernel_tests" "${@:-[kernels]}"
