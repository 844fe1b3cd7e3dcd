#!/usr/bin/env bash
# scripts/run.sh: the README's first command. Sets up, builds (release preset) and runs
# the course's flagship job: lesson 02's MLP trained on Fashion-MNIST.
# Extra arguments go to the program, e.g.  bash scripts/run.sh --epochs 3
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release
cmake --build --preset release
exec ./build/release/bin/nnlab lesson02 --part train "$@"
