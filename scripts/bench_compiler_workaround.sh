#!/usr/bin/env bash
# scripts/bench_compiler_workaround.sh: what the compiler check's workaround costs on this machine.
#
# Where configure applied a workaround (cmake/NnlabCompilerCanary.cmake: GCC 12.2 with
# AVX-512 gets -fno-tree-slp-vectorize), this times the release build against a build of the
# same sources with the check off (-DNNLAB_COMPILER_CHECK=OFF: the miscompiling flags, for
# measuring only), in alternating rounds on the same machine:
#   lesson 03's matmul ladder at 512^3 on 1 thread: v4 (portable C++, the auto-vectoriser's
#       work) and v5 (intrinsics), GFLOP/s
#   lesson 08's training step (nanoGPT's CPU config, cpu backend, 2 threads), ms/step
# and writes docs/benchmarks/compiler-workaround.md.
#   bash scripts/bench_compiler_workaround.sh [rounds]      (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-5}"
cmake --preset release > /dev/null
cmake --build --preset release --target lesson03 lesson08
workaround=$(./build/release/bin/nnlab info 2>/dev/null | sed -n 's/^  workaround[[:space:]]*//p')
if [[ -z "$workaround" || "$workaround" == none ]]; then
  echo "bench_compiler_workaround: this build needed no workaround (nnlab info): nothing to measure"
  exit 0
fi
cmake -S . -B build/nocheck -G Ninja -DCMAKE_BUILD_TYPE=Release -DNNLAB_COMPILER_CHECK=OFF \
  -DNNLAB_CUDA=OFF -DNNLAB_BUILD_TESTS=OFF > /dev/null 2>&1
cmake --build build/nocheck --target lesson03 lesson08

rows=()
for ((r = 1; r <= rounds; ++r)); do
  for b in release nocheck; do
    ladder=$(./build/$b/bin/lesson03 --part ladder --size 512 --threads 1 --no-python --repeats 5 \
               --out-dir "build/$b/bench-workaround" 2>&1)
    v4=$(echo "$ladder" | awk '/^  v4 packed-portable/ && !seen4 {print $4; seen4 = 1}')
    v5=$(echo "$ladder" | awk '/^  v5 packed-simd/ && !seen5 {print $4; seen5 = 1}')
    step=$(./build/$b/bin/lesson08 --part flops --flops-iters 30 2>&1 | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p')
    echo "round $r, $b: v4 $v4 GFLOP/s, v5 $v5 GFLOP/s, GPT step $step ms"
    rows+=("| $r | $b | $v4 | $v5 | $step |")
  done
done

median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
col() { printf '%s\n' "${rows[@]}" | awk -F'|' -v b=" $1 " -v c="$2" '$3 == b {print $c}' | median; }
cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
simd=$(./build/release/bin/nnlab info | sed -n 's/^  this CPU has[[:space:]]*//p')
compiler=$(./build/release/bin/nnlab info | sed -n 's/^  compiler  [[:space:]]*//p')
{
  echo "# What the compiler workaround costs"
  echo
  echo "Machine: $cpu, $(nproc) cores ($simd); $compiler; $(date +%Y-%m-%d)."
  echo "The compiler check (\`cmake/NnlabCompilerCanary.cmake\`) found a miscompile and applied \`$workaround\`;"
  echo "\`release\` is that build, \`nocheck\` the same sources with \`-DNNLAB_COMPILER_CHECK=OFF\` (the"
  echo "miscompiling flags: for this measurement only). Made by \`bash scripts/bench_compiler_workaround.sh $rounds\`,"
  echo "rounds alternating between the two builds."
  echo
  echo "| round | build | matmul v4 (portable C++) GFLOP/s | matmul v5 (intrinsics) GFLOP/s | GPT step ms |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Medians: v4 $(col release 4) with the workaround against $(col nocheck 4) without; v5 $(col release 5)"
  echo "against $(col nocheck 5); the GPT step $(col release 6) ms against $(col nocheck 6) ms. Matmul: lesson 03's"
  echo "ladder at 512^3 on 1 thread (median of 5 runs each); step: lesson 08's flops part (nanoGPT's CPU config,"
  echo "cpu backend, median of 30 steps). Compare the medians with the spread of the rounds before"
  echo "reading a difference into them."
} > docs/benchmarks/compiler-workaround.md
echo "wrote docs/benchmarks/compiler-workaround.md"
