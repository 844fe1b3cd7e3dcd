#!/usr/bin/env bash
# scripts/bench_lesson12_lora.sh: lesson 12's LoRA measurement, run and recorded:
#   docs/benchmarks/lesson12-lora.json   the lesson12 record (schema nnlab-lesson12/1,
#                                        parts.lora's fields: lessons/12-real-models/lora_part.h)
#   docs/benchmarks/lesson12-lora.md     the machine, the command, the table, the load average
#   out/bench-lesson12/lora.log          the program's whole output
# A character GPT-2 (lesson 08's: 4 layers, 4 heads, 128 wide, context 64) trained on Tiny
# Shakespeare for BASE_ITERS steps, then adapted to the Debian licence texts
# (/usr/share/common-licenses) for ITERS steps each: full fine-tuning and LoRA at ranks RANKS
# on all four projections (the same steps, batches and schedule for every method). Step times
# come from separate alternating rounds (every method in turn, a fixed sgemm as the peer).
# ~5 minutes on 2 idle cores. Knobs (environment):
#   BASE_ITERS=2000 ITERS=400 RANKS=1,4,16 THREADS=0 (0: all cores) ARCH=gpt2 DATA=<Tiny Shakespeare>
#   EXTRA="..."  more flags for lesson12
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target lesson12 >/dev/null
bin=./build/release/bin
out=out/bench-lesson12
data="${DATA:-}"
if [[ -z "$data" ]]; then
  for f in data/tinyshakespeare/input.txt data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt \
           ../../shared/data/tinyshakespeare.txt; do
    [[ -f "$f" ]] && data="$f" && break
  done
fi
[[ -n "$data" ]] || { echo "bench_lesson12_lora: Tiny Shakespeare not found (python3 scripts/fetch_data.py tinyshakespeare)" >&2; exit 1; }
mkdir -p "$out" docs/benchmarks
load0="$(cat /proc/loadavg 2>/dev/null || echo unknown)"
echo "bench_lesson12_lora: load average now: $load0"
cmd=("$bin/lesson12" --part lora --data "$data" --threads "${THREADS:-0}" --lora-arch "${ARCH:-gpt2}"
     --lora-base-iters "${BASE_ITERS:-2000}" --lora-iters "${ITERS:-400}" --lora-ranks "${RANKS:-1,4,16}"
     --json docs/benchmarks/lesson12-lora.json)
# shellcheck disable=SC2086  # EXTRA is a list of flags
"${cmd[@]}" ${EXTRA:-} 2>&1 | tee "$out/lora.log"
load1="$(cat /proc/loadavg 2>/dev/null || echo unknown)"
python3 - "$out/lora.log" docs/benchmarks/lesson12-lora.json docs/benchmarks/lesson12-lora.md "$load0" "$load1" \
  "${cmd[*]} ${EXTRA:-}" <<'PY'
import json, sys
log, js, md, load0, load1, command = sys.argv[1:7]
rec = json.load(open(js))
m = rec["machine"]
part = rec["parts"]["lora"]
lines = open(log).read().splitlines()
table = [l for l in lines if l.startswith("|")]
notes = [l for l in lines if l and not l.startswith("|") and not l.startswith("wrote")]
with open(md, "w") as f:
    f.write("# Lesson 12: LoRA against full fine-tuning on a domain shift\n\n")
    f.write("Machine: " + ", ".join(f"{k} {v}" for k, v in m.items() if k != "quick") + "\n\n")
    f.write(f"Command (scripts/bench_lesson12_lora.sh): `{command}`\n\n")
    f.write(f"Load average (/proc/loadavg) before: {load0}; after: {load1}; around the fine-tuning runs: "
            f"{part['loadavg_start']} -> {part['loadavg_end']} (a shared 2-core VM: step times are noisy, "
            "read them against the peer in the same rounds).\n\n")
    f.write("Losses are nats per character; 'val new' is the licence texts' validation split, 'val old' Tiny "
            "Shakespeare's (forgetting). AdamW state = m and v of what is trained; 'file' = the adapter file "
            "(LoRA) or the fp32 checkpoint without optimizer state (full).\n\n")
    f.write("```\n" + "\n".join(notes) + "\n```\n\n")
    f.write("\n".join(table) + "\n")
print("wrote", md)
PY
