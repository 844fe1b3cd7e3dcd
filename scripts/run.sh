#!/usr/bin/env bash
# scripts/run.sh: the README's first command. Sets up, builds (release preset) and runs
# the course's flagship demo: the lesson-08 GPT trained on Tiny Shakespeare on the CPU
# (nanoGPT's CPU configuration: 4 layers, 4 heads, 128 wide, context 64, 2000 steps), then
# samples from it. Extra arguments go to `nnlab gpt train`, e.g.
#   bash scripts/run.sh --max-iters 500          a shorter run
#   bash scripts/run.sh --time-budget 120        stop after two minutes
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake --preset release
cmake --build --preset release
# Tiny Shakespeare: downloaded once (MD5-checked) into data/ when online. Offline, the
# trainer looks in ../shared/data, then falls back to a Debian text, and says which.
if [[ ! -f data/tinyshakespeare/input.txt ]]; then
  python3 scripts/fetch_data.py tinyshakespeare ||
    echo "run: Tiny Shakespeare could not be downloaded; the trainer will say which text it uses instead"
fi
exec ./build/release/bin/nnlab gpt train --sample-tokens 600 --out-dir out/gpt "$@"
