#!/usr/bin/env bash
# scripts/bench_lesson03.sh: record lesson 03's figures on this machine in docs/benchmarks/.
#
#   lesson03-matmul.{json,md}  the sgemm ladder v1..v6 and OpenBLAS at 256^3, 1024^3 and
#                              2048^3, 1 and all threads (nnlab bench matmul)
#   lesson03-layers.{json,md}  the shapes the lesson-02 MLP multiplies (batch 128), all
#                              three transpose forms
#   lesson03-fusion.{json,md}  the fused-vs-unfused ops over sizes from in-cache to far out
#   lesson03-ladder.txt        the lesson program's ladder table, with the Python loop
#
# Run it on a quiet machine: anything else running skews every number. Arguments go to
# every `nnlab bench` call (e.g. --repeats 9).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release >/dev/null
bin=./build/release/bin
out=docs/benchmarks
mkdir -p "$out"
"$bin/nnlab" bench matmul --sizes 256,1024,2048 --threads 1,2 --repeats 7 --out "$out" --name lesson03-matmul "$@"
"$bin/nnlab" bench matmul --sizes 128x256x784nt,128x784x256,256x784x128tn,128x10x128nt \
  --variants v2,v3,v5,v6,openblas --threads 1,2 --repeats 9 --out "$out" --name lesson03-layers "$@"
"$bin/nnlab" bench cos2 bias_gelu softmax layernorm --threads 1,2 --repeats 7 --out "$out" \
  --name lesson03-fusion "$@"
"$bin/nnlab" lesson03 --part ladder --size 1024 --threads 1,2 --repeats 5 --out-dir out/lesson03 |
  sed -n '/^The ladder/,$p' > "$out/lesson03-ladder.txt"
echo "wrote $out/lesson03-{matmul,layers,fusion}.{json,md} and $out/lesson03-ladder.txt"
