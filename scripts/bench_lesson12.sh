#!/usr/bin/env bash
# scripts/bench_lesson12.sh: lesson 12's speed figures (docs/benchmarks/lesson12-*.{md,json}).
#
#   scripts/bench_lesson12.sh                 the random-weight figures + the transformers peer
#   scripts/bench_lesson12.sh --quick         the same at tiny shapes (a minute: a dry run)
#   scripts/bench_lesson12.sh --real          real weights, after scripts/fetch_model.py (below)
#
# 1. lesson12 --part speed at the GPT-2 124M, GPT-2 medium 355M and SmolLM-135M shapes
#    (random-initialised: decode speed does not depend on the values): tokens/s per format
#    against the bandwidth law, the perplexity each format costs on Tiny Shakespeare (a BPE
#    trained on it), speculative decoding 124M -> 355M and 355M int4 -> 355M.
#      -> docs/benchmarks/lesson12-speed.{json,txt}
# 2. Side by side with Hugging Face transformers (scripts/hf_peer.py: GPT2LMHeadModel /
#    LlamaForCausalLM of the same shape, fp32, greedy generate() with its cache): ROUNDS
#    rounds, ours and theirs alternating (A B A B ...) per shape, each side at its best
#    thread count (1 or 2), medians; OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset for the peer.
#      -> docs/benchmarks/lesson12-vs-transformers.{json,md}
# 3. --real: the same measurements on the real checkpoints. Needs, once, online:
#      python3 scripts/fetch_model.py gpt2 && python3 scripts/fetch_model.py gpt2-medium
#      python3 scripts/fetch_model.py smollm-135m
#    (lesson12 loads them with gpt/hf.h's load_hf_model). Runs
#      lesson12 --part speed --speed-models models/gpt2,models/gpt2-medium   (speculative
#                 124M -> 355M on real text, perplexity per format on Tiny Shakespeare)
#      lesson12 --part speed --speed-models models/smollm-135m --spec-target ""
#      -> docs/benchmarks/lesson12-real-speed.json, lesson12-real-smollm.json
#
# Environment: ROUNDS (default 3: alternating rounds of step 2), PARTS (default "figures peer":
# which of steps 1 and 2), EVAL_TOKENS (default 1024: perplexity tokens of step 1), TOKENS
# (default 32: decoded per round), THREADS (default "1 2": the thread settings each side tries;
# the best counts), PEER_THREADS (default "1,2,1x2,2x1": the peer's, T or TxB = torch T threads x
# OpenBLAS B; scripts/hf_peer.py), FIG_THREADS (default 0: the default; step 1's threads), NNLAB_HF_PYTHON (default <repo>/.venv/bin/python: a Python
# with torch and transformers), BIN (default build/release/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/release/bin}
OUT=docs/benchmarks
ROUNDS=${ROUNDS:-3}
PARTS=${PARTS:-figures peer}
EVAL_TOKENS=${EVAL_TOKENS:-1024}
TOKENS=${TOKENS:-32}
export THREADS=${THREADS:-1 2}
export PEER_THREADS=${PEER_THREADS:-1,2,1x2,2x1}
FIG_THREADS=${FIG_THREADS:-0}
HF_PY=${NNLAB_HF_PYTHON:-.venv/bin/python}
QUICK=0
REAL=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=1 ;;
    --real) REAL=1 ;;
    *) echo "usage: $0 [--quick] [--real]" >&2; exit 2 ;;
  esac
done
[ -x "$BIN/lesson12" ] || { echo "no $BIN/lesson12: cmake --build build/release --target lesson12" >&2; exit 1; }
if [ "$QUICK" = 1 ]; then
  OUT=$(mktemp -d)
  SHAPES="tiny-gpt2 tiny-llama"
  QFLAG=--quick
  PEER_ARGS="--prompt 16 --tokens 8"
  OURS_ARGS="--speed-prompt 16 --speed-tokens 8"
else
  SHAPES="gpt2-124m gpt2-355m smollm-135m"
  QFLAG=
  PEER_ARGS="--prompt 64 --tokens $TOKENS"
  OURS_ARGS="--speed-prompt 64 --speed-tokens $TOKENS"
fi
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) hardware threads"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$REAL" = 1 ]; then
  for d in models/gpt2 models/gpt2-medium models/smollm-135m; do
    [ -f "$d/model.safetensors" ] || { echo "missing $d: run python3 scripts/fetch_model.py $(basename "$d") (online, once)" >&2; exit 1; }
  done
  "$BIN/lesson12" --part speed --speed-models models/gpt2,models/gpt2-medium --speed-eval-tokens 4096 \
    --json "$OUT/lesson12-real-speed.json" | tee "$OUT/lesson12-real-speed.txt"
  "$BIN/lesson12" --part speed --speed-models models/smollm-135m --spec-target "" --speed-eval-tokens 4096 \
    --json "$OUT/lesson12-real-smollm.json" | tee "$OUT/lesson12-real-smollm.txt"
  exit 0
fi

# 1. the lesson's figures
if [[ " $PARTS " == *" figures "* ]]; then
  "$BIN/lesson12" --part speed $QFLAG $OURS_ARGS --threads "$FIG_THREADS" --speed-rounds 3 --speed-eval-tokens "$EVAL_TOKENS" \
    --json "$OUT/lesson12-speed.json" | tee "$OUT/lesson12-speed.txt"
  echo "load average after the figures: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/lesson12-speed.txt"
fi
[[ " $PARTS " == *" peer "* ]] || exit 0

# 2. against transformers, alternating
if ! "$HF_PY" -c "import torch, transformers" 2>/dev/null; then
  echo "SKIP the transformers peer: $HF_PY has no torch + transformers (scripts/setup.sh makes .venv)" >&2
  exit 0
fi
TMP=$(mktemp -d)
for shape in $SHAPES; do
  for r in $(seq 1 "$ROUNDS"); do
    for t in $THREADS; do
      "$BIN/lesson12" --part speed --speed-shapes "$shape" --speed-eval-tokens 0 --spec-target "" --threads "$t" \
        $OURS_ARGS --speed-rounds 3 --json "$TMP/ours-$shape-$r-$t.json" > "$TMP/ours-$shape-$r-$t.txt"
    done
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$HF_PY" scripts/hf_peer.py --shape "$shape" $PEER_ARGS \
      --rounds 3 --threads "$PEER_THREADS" --json "$TMP/theirs-$shape-$r.json"
    echo "  $shape round $r done (load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$TMP" "$OUT" "$ROUNDS" "$SHAPES" <<'EOF'
import glob, json, os, statistics, sys, platform, subprocess
tmp, out, rounds, shapes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
import datetime
res = {"schema": "nnlab-lesson12-vs-transformers/1", "machine": {"cpu": cpu, "hardware_threads": os.cpu_count(),
       "cores": os.cpu_count(), "date": datetime.date.today().isoformat()},
       "rounds": rounds, "shapes": []}
lines = ["# Lesson 12: our decode against Hugging Face transformers (same shapes, CPU)", "",
         f"Machine: {cpu}, {os.cpu_count()} hardware threads. {rounds} rounds per shape, ours and transformers "
         f"alternating; each side at its best per round (ours: threads {os.environ.get('THREADS', '1 2')}; transformers: torch x OpenBLAS threads {os.environ.get('PEER_THREADS', '')}); medians over rounds. Random-initialised "
         "models (speed does not depend on the values). Commands: `scripts/bench_lesson12.sh` (see its header).", "",
         "| shape | format | ours tokens/s | transformers fp32 tokens/s | ours / theirs |", "|---|---|---:|---:|---:|"]
for shape in shapes:
    theirs = [json.load(open(p)) for p in sorted(glob.glob(f"{tmp}/theirs-{shape}-*.json"))]
    ours = {}
    for r in range(1, rounds + 1):
        best = {}
        for p in sorted(glob.glob(f"{tmp}/ours-{shape}-{r}-*.json")):
            d = json.load(open(p))
            t = d["parts"]["speed"]["threads"]
            for row in d["parts"]["speed"]["models"][0]["rows"]:
                if row["tokens_per_s"] > best.get(row["format"], (0, 0))[0]:
                    best[row["format"]] = (row["tokens_per_s"], t)
        for f, (v, t) in best.items():
            ours.setdefault(f, []).append({"tokens_per_s": v, "threads": t})
    th = statistics.median(x["tokens_per_s"] for x in theirs)
    entry = {"shape": shape, "transformers": {"tokens_per_s": th, "rounds": theirs,
                                              "torch": theirs[0]["torch"], "transformers": theirs[0]["transformers"]},
             "ours": {}}
    for f, rows in ours.items():
        med = statistics.median(x["tokens_per_s"] for x in rows)
        entry["ours"][f] = {"tokens_per_s": med, "ratio": med / th, "rounds": rows}
        lines.append(f"| {shape} | {f} | {med:.2f} | {th:.2f} | {med / th:.2f}x |")
    res["shapes"].append(entry)
with open(f"{out}/lesson12-vs-transformers.json", "w") as f:
    json.dump(res, f, indent=1)
with open(f"{out}/lesson12-vs-transformers.table.md", "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "wrote $OUT/lesson12-vs-transformers.json and .table.md"
