#!/usr/bin/env python3
"""Writes notebooks/11-modern.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_11.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)

The notebook runs `lesson11 --part all --json <file>` (with --quick under NNLAB_QUICK=1) and
plots the record it writes (schema "nnlab-lesson11/1", lessons/11-modern/modern_lesson.h). A
failing run, a missing record or one of another schema stops the notebook with the program's
own error: no plot is drawn from a stale or missing file. The 3-model comparison cell reads
docs/benchmarks/lesson11-compare.json (written by `lesson11 --part compare`) and says so
clearly when that record is absent.
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import json, os, subprocess
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
# Opened in Jupyter from notebooks/, everything this notebook writes goes to notebooks/out/,
# which git ignores; run_notebook.py runs it in a scratch folder instead.
if os.path.exists("run_notebook.py"):
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
quick = os.environ.get("NNLAB_QUICK") == "1"
# the stand-alone program when it is built, else the front door's subcommand (same flags)
if os.path.exists(os.path.join(bin_dir, "lesson11")):
    lesson11 = [os.path.join(bin_dir, "lesson11")]
else:
    lesson11 = [os.path.join(bin_dir, "nnlab"), "lesson11"]
SCHEMA = "nnlab-lesson11/1"

def machine_title(rec):
    m = rec.get("machine", {})
    t = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('omp_max_threads', '?')} threads, {m.get('date', '')}"
    if m.get("quick"):
        t += "  [QUICK: tiny sizes: a pipeline check, not a measurement]"
    return t

def print_table(header, rows):
    """Plain aligned columns (no pandas)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))

print("lesson 11:", " ".join(lesson11), "| quick" if quick else "")'''

run_cell = '''path = os.path.abspath("lesson11.json")
if os.path.exists(path):
    os.remove(path)  # never plot a record from an earlier run
sweep = "0,8,32,128,512,767" if quick else "0,16,64,256,767,1535,2047,3839"
cmd = [*lesson11, "--part", "all", "--json", path, "--bpe-sweep", sweep] + \\
      (["--quick"] if quick else ["--vocab-size", "4096"])
print(" ".join(cmd))
r = subprocess.run(cmd, capture_output=True, text=True)
print(r.stdout[-12000:])
if r.returncode != 0:
    print(r.stderr[-4000:])
    raise RuntimeError(f"lesson11 failed (exit status {r.returncode}): "
                       + (r.stderr.strip().splitlines() or ["no message"])[-1])
with open(path) as f:
    rec = json.load(f)
if rec.get("schema") != SCHEMA:
    raise RuntimeError(f"{path}: schema {rec.get('schema')!r}, this notebook reads {SCHEMA!r}")
parts = rec["parts"]
missing = [p for p in ("bpe", "norm", "rope", "swiglu", "flash") if p not in parts]
if missing:
    raise KeyError(f"the record lacks the parts {missing}")
print(machine_title(rec))'''

bpe_plot = '''bpe = parts["bpe"]
sw = bpe["sweep"]
fig, ax = plt.subplots(figsize=(8, 4.5))
ax.plot([r["merges"] for r in sw], [r["bytes_per_token"] for r in sw], "o-")
ax.set_xscale("symlog", linthresh=8)
ax.set_xlabel("merges learned (vocabulary = 1 special + 256 bytes + merges)")
ax.set_ylabel("bytes per token")
ax.set_title(f"BPE on {bpe['corpus']}: every merge shortens the text\\n" + machine_title(rec), fontsize=9)
ax.grid(alpha=0.3, which="both")
plt.tight_layout(); plt.show()
print_table(["merges", "vocab", "tokens", "bytes/token"],
            [[r["merges"], r["vocab_size"], r["tokens"], f"{r['bytes_per_token']:.3f}"] for r in sw])
# merges only ever replace two tokens by one: the token count never grows
toks = [r["tokens"] for r in sw]
assert all(a >= b for a, b in zip(toks, toks[1:])), "a merge made the text longer: a tokenizer bug"
print(f"encode {bpe['encode_seconds'] * 1e3:.1f} ms, of which the pre-tokenisation regex {bpe['regex_seconds'] * 1e3:.1f} ms")'''

norm_plot = '''norm = parts["norm"]
print(f"{norm['rows']} rows of 0.5 + N(0, 1), C = {norm['C']}, weight 1, bias 0")
print_table(["", "output mean", "output rms"],
            [["LayerNorm", f"{norm['layernorm_out_mean']:+.4f}", f"{norm['layernorm_out_rms']:.4f}"],
             ["RMSNorm", f"{norm['rmsnorm_out_mean']:+.4f}", f"{norm['rmsnorm_out_rms']:.4f}"]])
print(f"rmsnorm v2 vs v1: forward {norm['v1_v2_max_diff']:.1e}, backward {norm['backward_v1_v2_max_diff']:.1e}; "
      f"gradient check max rel err {norm['gradcheck_max_rel_err']:.1e}")
t = norm["timings"]
labels = [f"{r['op']}\\n{r['variant']}" for r in t]
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.bar(labels, [r["ms"] for r in t], color=["C0" if r["variant"] == "v1" else "C1" for r in t])
ax.set_ylabel("ms (median, through the harness)")
ax.set_title(f"RMSNorm ladder at {norm['timing_size']}\\n" + machine_title(rec), fontsize=9)
ax.grid(alpha=0.3, axis="y")
plt.tight_layout(); plt.show()'''

rope_plot = '''rope = parts["rope"]
pairs = rope["pairs"]
fig, ax = plt.subplots(figsize=(7, 4))
for d in sorted(set(p["diff"] for p in pairs)):
    sel = [p for p in pairs if p["diff"] == d]
    ax.plot([p["p"] for p in sel], [p["dot"] for p in sel], "o-", label=f"p - p' = {d}")
ax.axhline(rope["unrotated_dot"], color="gray", ls=":", label="q . k unrotated")
ax.set_xscale("symlog", linthresh=10)
ax.set_xlabel("query position p")
ax.set_ylabel("q_p . k_p'")
ax.set_title("RoPE: the score depends on p - p' only (flat lines)\\n" + machine_title(rec), fontsize=9)
ax.grid(alpha=0.3); ax.legend(fontsize=8)
plt.tight_layout(); plt.show()
print(f"largest spread at equal p - p': {rope['max_spread_equal_diff']:.1e}; v2 vs v1 {rope['v1_v2_max_diff']:.1e}; "
      f"gradient check {rope['gradcheck_max_rel_err']:.1e}")
assert rope["max_spread_equal_diff"] < 1e-9'''

swiglu_plot = '''sg = parts["swiglu"]
C, H = sg["C"], sg["H"]
print_table(["MLP", "matrices", "weights", "with biases"],
            [["GELU (GPT-2)", f"(4C, C) + (C, 4C)", f"{sg['gelu_mlp_weights']:,}", f"{sg['gelu_mlp_params']:,}"],
             ["SwiGLU (Llama)", f"2 x (H, C) + (C, H), H = {H}", f"{sg['swiglu_mlp_params']:,}", "no biases"]])
print(f"swiglu v2 vs v1 max |diff| {sg['v1_v2_max_diff']:.1e}; gradient check {sg['gradcheck_max_rel_err']:.1e}")
g = np.linspace(-6, 4, 200)
silu = g / (1 + np.exp(-g)); gelu = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(g, silu, label="silu(g) = g sigmoid(g)"); ax.plot(g, gelu, "--", label="gelu(g) (tanh form)")
ax.set_xlabel("g"); ax.grid(alpha=0.3); ax.legend(fontsize=8)
ax.set_title("the two activations are close; the gate (times up(x)) is the difference", fontsize=9)
plt.tight_layout(); plt.show()'''

flash_plot = '''fl = parts["flash"]
rows = fl["rows"]
T = np.array([r["T"] for r in rows], dtype=float)
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
axes[0].loglog(T, [r["full_bytes"] / 2**20 for r in rows], "o-", label="full: (B,NH,T,T) maps x4")
axes[0].loglog(T, [r["flash_bytes"] / 2**20 for r in rows], "o-", label="flash: lse + tiles")
axes[0].set_xlabel("T"); axes[0].set_ylabel("MiB beyond inputs and outputs")
axes[1].loglog(T, [r["full_ms"] for r in rows], "o-", label=fl["full"])
axes[1].loglog(T, [r["flash_ms"] for r in rows], "o-", label=fl["flash"])
axes[1].set_xlabel("T"); axes[1].set_ylabel("forward + backward, ms (median)")
for ax in axes:
    ax.grid(alpha=0.3, which="both"); ax.legend(fontsize=8); ax.set_xscale("log", base=2)
fig.suptitle(f"B = {fl['B']}, {fl['NH']} heads of {fl['hs']}\\n" + machine_title(rec), fontsize=9)
plt.tight_layout(); plt.show()
print_table(["T", "full MiB", "flash MiB", "full ms", "flash ms", "diff out", "diff dqkv"],
            [[r["T"], f"{r['full_bytes'] / 2**20:.3f}", f"{r['flash_bytes'] / 2**20:.3f}", f"{r['full_ms']:.2f}",
              f"{r['flash_ms']:.2f}", f"{r['max_rel_diff_out']:.1e}", f"{r['max_rel_diff_dqkv']:.1e}"] for r in rows])'''

recorded_cell = '''# The committed records (full runs, on the machines named in them)
bench = os.path.join(src, "docs", "benchmarks")
p = os.path.join(bench, "lesson11-bpe.json")
if os.path.exists(p):
    with open(p) as f:
        r = json.load(f)
    sw = r["parts"]["bpe"]["sweep"]
    print("lesson11-bpe.json (" + machine_title(r) + "):")
    print_table(["merges", "vocab", "bytes/token"], [[s["merges"], s["vocab_size"], f"{s['bytes_per_token']:.3f}"] for s in sw])
p = os.path.join(bench, "flash-attention-cpu.md")
if os.path.exists(p):
    print("\\nflash-attention-cpu.md (bench_flash_attention, up to T = 4096):")
    with open(p) as f:
        print("".join(l for l in f if l.startswith("|")))'''

compare_cell = '''# The 3-model comparison: char GPT-2 (lesson 08), BPE GPT-2, BPE llama-style, on one budget.
# Written by `lesson11 --part compare` into docs/benchmarks/lesson11-compare.json:
# {"machine", "budget", "runs": [{"name", "seed", "params", "tokens_per_s", "train_bytes",
#   "final_val_bpc", "curve": [{"step", "seconds", "val_bpc"}]}]}
p = os.path.join(src, "docs", "benchmarks", "lesson11-compare.json")
if not os.path.exists(p):
    print(f"SKIPPED: {p} does not exist yet: run `lesson11 --part compare` (see the lesson's README) "
          "to write it; nothing is plotted.")
else:
    with open(p) as f:
        cmp = json.load(f)
    runs = cmp.get("runs", [])
    if not runs:
        raise ValueError(f"{p} has no runs")
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, run in enumerate(runs):
        curve = run.get("curve", [])
        label = f"{run['name']} (seed {run.get('seed', '?')}, {run.get('params', 0):,} params)"
        ax.plot([c["seconds"] for c in curve], [c["val_bpc"] for c in curve], "o-", ms=3, color=f"C{i}", label=label)
    ax.set_xlabel("training seconds")
    ax.set_ylabel("validation bits per character")
    m = cmp.get("machine", "?")
    ax.set_title(f"one budget, three models ({m if isinstance(m, str) else json.dumps(m)[:80]})\\n"
                 f"budget: {json.dumps(cmp.get('budget', {}))[:100]}", fontsize=9)
    ax.grid(alpha=0.3); ax.legend(fontsize=8)
    plt.tight_layout(); plt.show()
    print_table(["run", "seed", "params", "tokens/s", "train bytes", "final val bpc"],
                [[r["name"], r.get("seed", "?"), f"{r.get('params', 0):,}", f"{r.get('tokens_per_s', float('nan')):.0f}",
                  r.get("train_bytes", "?"), f"{r.get('final_val_bpc', float('nan')):.4f}"] for r in runs])'''

nb = new_notebook()
nb.cells = [
    md('''# Lesson 11: from nanoGPT to a modern LLM

Each piece of a Llama-style model as a diff from GPT-2: byte-level BPE, RMSNorm, RoPE, SwiGLU,
grouped-query attention, flash attention (lessons/11-modern/README.md). This notebook runs
`lesson11 --part all --json ...` and plots what it measured. Under `NNLAB_QUICK=1` (what ctest
does) the sizes are tiny: the figures then check the pipeline, they are not measurements.'''),
    code(setup),
    md('''## Run every part

One run of the program; its record holds every part's numbers (schema `nnlab-lesson11/1`).
Every check inside it (gradient checks, v2 against v1, flash against full attention) stops the
program when it fails, so a record only exists when they passed.'''),
    code(run_cell),
    md('''## BPE: bytes per token against merges

The first k merges of one training are what a training to 257 + k tokens learns (the merge
loop is greedy), so one training gives the whole curve.'''),
    code(bpe_plot),
    md('''## RMSNorm vs LayerNorm

LayerNorm centres each row; RMSNorm only scales it, so the rows' mean survives. Then the
ladder: v2 against v1, the gradient check, and both timed through the harness.'''),
    code(norm_plot),
    md('''## RoPE: relative positions

q and k rotated to positions p and p': pairs with the same p - p' give the same dot product.'''),
    code(rope_plot),
    md('''## SwiGLU vs the GELU MLP

Three matrices of H x C with H = 8C/3 (rounded up to 32) against two of 4C x C.'''),
    code(swiglu_plot),
    md('''## Flash vs full attention

Memory beyond the inputs and outputs against T (the maps grow as T^2, lse as T), and forward +
backward time in alternating rounds.'''),
    code(flash_plot),
    md('''## Recorded figures

The committed records, full runs on the machines named in them.'''),
    code(recorded_cell),
    md('''## What it buys: three models on one budget

Validation loss in bits per character (independent of the tokenizer) against training time,
for the character GPT-2 of lesson 08, a BPE GPT-2 and a BPE llama-style model.'''),
    code(compare_cell),
    md('''## Questions

1. From the BPE table: how many merges does it take to halve the number of tokens? What does
   doubling the vocabulary again cost in embedding parameters at C = 768?
2. Why does RMSNorm's output keep a mean of 0.447 on rows of 0.5 + N(0, 1)? Compute it.
3. In the RoPE plot, why does the unrotated q . k equal the dot product at p - p' = 0?
4. At which T would full attention's maps for GPT-2 small (12 heads, B = 8) fill 16 GiB?
5. Flash attention computes the probabilities twice in its backward. Why is it still the
   default for long contexts?'''),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"lesson11-{i:02d}"  # stable ids: regenerating changes nothing unless a cell did
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "11-modern.ipynb"))
