#!/usr/bin/env python3
"""Writes notebooks/10-inference.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_10.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)

The notebook runs `lesson10 --part <p> --json-dir <dir>` for each part and plots the records
it writes (schema "nnlab-lesson10/1", lessons/10-inference/inference_lesson.h). A part that
fails, or writes no record, or a record of another schema, stops the notebook with the
program's own error: no plot is ever drawn from a stale or missing file.
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import glob, json, os, subprocess
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
# Opened in Jupyter from notebooks/, everything this notebook writes (runs, CSV files) goes
# to notebooks/out/, which git ignores; run_notebook.py runs it in a scratch folder instead.
if os.path.exists("run_notebook.py"):
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
quick = os.environ.get("NNLAB_QUICK") == "1"
# the stand-alone program when it is built, else the front door's subcommand (same flags)
if os.path.exists(os.path.join(bin_dir, "lesson10")):
    lesson10 = [os.path.join(bin_dir, "lesson10")]
else:
    lesson10 = [os.path.join(bin_dir, "nnlab"), "lesson10"]
json_dir = os.path.abspath("lesson10-json")   # the records this notebook reads
out_dir = os.path.abspath("lesson10-models")  # the trained models: trained once, reused next time
SCHEMA = "nnlab-lesson10/1"

def run_part(part, tail=4000):
    """Runs one part into json_dir and returns its record. Fails loudly (RuntimeError with the
    program's output) when the program fails or its record is missing or of another schema."""
    path = os.path.join(json_dir, f"lesson10-{part}.json")
    if os.path.exists(path):
        os.remove(path)  # never plot a record from an earlier run
    cmd = [*lesson10, "--part", part, "--json-dir", json_dir, "--out-dir", out_dir] + (["--quick"] if quick else [])
    print(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-tail:])
    if r.returncode != 0:
        print(r.stderr[-tail:])
        raise RuntimeError(f"lesson10 --part {part} failed (exit status {r.returncode}): "
                           + (r.stderr.strip().splitlines() or ["no message"])[-1])
    if not os.path.exists(path):
        raise RuntimeError(f"lesson10 --part {part} succeeded but wrote no {path}")
    with open(path) as f:
        rec = json.load(f)
    if rec.get("schema") != SCHEMA or rec.get("part") != part:
        raise RuntimeError(f"{path}: schema {rec.get('schema')!r}, part {rec.get('part')!r}; "
                           f"this notebook reads {SCHEMA!r}, part {part!r}")
    return rec

def need(rec, *keys):
    """The record's fields, or an error naming the missing ones."""
    missing = [k for k in keys if k not in rec]
    if missing:
        raise KeyError(f"lesson10-{rec.get('part')} record lacks {missing} (schema {SCHEMA})")
    return [rec[k] for k in keys]

def machine_title(rec):
    m = rec.get("machine", {})
    t = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, backend {m.get('backend', '?')}, {m.get('date', '')}"
    if m.get("quick"):
        t += "  [QUICK: tiny models, few tokens: a pipeline check, not a measurement]"
    return t

def print_table(header, rows):
    """Plain aligned columns (no pandas)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))

FORMAT_MARKERS = {"fp32": "o", "bf16": "s", "int8": "^", "int4": "v", "sparse24": "D"}
FORMAT_COLORS = {"fp32": "C0", "bf16": "C1", "int8": "C2", "int4": "C3", "sparse24": "C4"}
print("lesson 10:", " ".join(lesson10), "| quick" if quick else "")'''

kv_run = '''kv = run_part("kv")'''

kv_plot = '''rows, diff = need(kv, "rows", "max_logit_diff")
T = np.array([r["context"] for r in rows], dtype=float)
cache = np.array([r["ms_per_token_cache"] for r in rows])
nocache = np.array([r["ms_per_token_nocache"] for r in rows])
fig, ax = plt.subplots(figsize=(8, 5))
ax.loglog(T, nocache, "o-", color="C3", label="no cache: a forward over the whole context per token")
ax.loglog(T, cache, "o-", color="C0", label="KV cache: one row of every op per token")
# guides through the last point: slope 1 (O(T)) and slope 2 (O(T^2))
for p, style, name in [(1, ":", "~T"), (2, "--", "~T^2")]:
    ax.loglog(T, nocache[-1] * (T / T[-1]) ** p, style, color="gray", lw=1, label=f"slope {p} ({name})")
ax.set_xlabel("context length T (positions already seen)")
ax.set_ylabel("ms per generated token")
ax.set_title("ms/token with and without the KV cache\\n" + machine_title(kv), fontsize=9)
ax.grid(alpha=0.3, which="both"); ax.legend(fontsize=8)
plt.tight_layout(); plt.show()
print_table(["context", "ms/token cache", "ms/token no cache", "ratio"],
            [[int(t), f"{c:.3f}", f"{n:.3f}", f"{n / c:.1f}x"] for t, c, n in zip(T, cache, nocache)])
print(f"largest |logit difference| cache vs no cache, over every position checked: {diff:.2e}")
# The cache changes the cost, never the answer: the same logits up to float rounding.
assert diff < 1e-2, f"the cached decoder's logits differ from the full forward's by {diff}: the cache is wrong"'''

law_run = '''law = run_part("law")'''

law_plot = '''bw, bw1, rows, batch_rows = need(law, "bandwidth_gbs", "bandwidth_1t_gbs", "rows", "batch_rows")
fig, ax = plt.subplots(figsize=(9, 6))
b = np.array([r["bytes_per_token"] for r in rows], dtype=float)
xs = np.geomspace(b.min() / 2, b.max() * 2, 50)
ax.loglog(xs, bw * 1e9 / xs, "-", color="k", lw=1, label=f"law, all threads: {bw:.1f} GB/s / bytes")
ax.loglog(xs, bw1 * 1e9 / xs, "--", color="gray", lw=1, label=f"law, 1 thread: {bw1:.1f} GB/s / bytes")
for fmt in dict.fromkeys(r["format"] for r in rows):
    sel = [r for r in rows if r["format"] == fmt]
    ax.loglog([r["bytes_per_token"] for r in sel], [r["tokens_per_s"] for r in sel],
              FORMAT_MARKERS.get(fmt, "x"), color=FORMAT_COLORS.get(fmt), ms=8, label=fmt, linestyle="none")
for r in rows:
    if r["format"] == "fp32":
        ax.annotate(r["model"], (r["bytes_per_token"], r["tokens_per_s"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
ax.set_xlabel("bytes of weights read per token (log)")
ax.set_ylabel("tokens/s at batch 1 (log)")
ax.set_title("the bandwidth law: tokens/s = bandwidth / bytes per token\\n" + machine_title(law), fontsize=9)
ax.grid(alpha=0.3, which="both"); ax.legend(fontsize=8)
plt.tight_layout(); plt.show()
print_table(["model", "params", "format", "MB/token", "tokens/s", "law tokens/s", "of law"],
            [[r["model"], f"{r['params']:,}", r["format"], f"{r['bytes_per_token'] / 1e6:.2f}",
              f"{r['tokens_per_s']:.1f}", f"{r['law_tokens_per_s']:.1f}", f"{100 * r['fraction_of_law']:.0f}%"]
             for r in rows])'''

batch_plot = '''if not batch_rows:
    raise RuntimeError("lesson10-law has no batch_rows: the batch > 1 measurement is missing")
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for i, key in enumerate(dict.fromkeys((r["model"], r["format"]) for r in batch_rows)):
    sel = sorted((r for r in batch_rows if (r["model"], r["format"]) == key), key=lambda r: r["batch"])
    B = [r["batch"] for r in sel]
    axes[0].plot(B, [r["tokens_per_s"] for r in sel], "o-", color=f"C{i}", label=f"{key[0]} {key[1]}")
    axes[0].plot(B, [sel[0]["tokens_per_s"] * b / sel[0]["batch"] for b in B], ":", color=f"C{i}", lw=1,
                 label="if a step cost the same at every batch")
    axes[1].plot(B, [r["steps_per_s"] for r in sel], "o-", color=f"C{i}", label=f"{key[0]} {key[1]}")
axes[0].set_xlabel("batch (sequences decoded together)"); axes[0].set_ylabel("tokens/s (all sequences)")
axes[1].set_xlabel("batch"); axes[1].set_ylabel("steps/s (one token per sequence per step)")
axes[1].set_ylim(bottom=0)
for ax in axes:
    ax.set_xscale("log", base=2); ax.grid(alpha=0.3); ax.legend(fontsize=8)
fig.suptitle("batch > 1: the weights are read once per step for every sequence\\n" + machine_title(law), fontsize=9)
plt.tight_layout(); plt.show()
print_table(["model", "format", "batch", "tokens/s", "steps/s"],
            [[r["model"], r["format"], r["batch"], f"{r['tokens_per_s']:.1f}", f"{r['steps_per_s']:.1f}"]
             for r in batch_rows])'''

quant_run = '''quant = run_part("quant")'''

quant_plot = '''(rows,) = need(quant, "rows")
print(machine_title(quant))
print_table(["format", "MB", "MB/token", "tokens/s", "val loss", "change vs fp32"],
            [[r["format"], f"{r['bytes'] / 1e6:.2f}", f"{r['bytes_per_token'] / 1e6:.3f}", f"{r['tokens_per_s']:.1f}",
              f"{r['val_loss']:.4f}", f"{r['val_loss_change']:+.4f}"] for r in rows])
fmts = [r["format"] for r in rows]
colors = [FORMAT_COLORS.get(f, "gray") for f in fmts]
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
axes[0].bar(fmts, [r["bytes_per_token"] / 1e6 for r in rows], color=colors); axes[0].set_ylabel("MB read per token")
axes[1].bar(fmts, [r["tokens_per_s"] for r in rows], color=colors); axes[1].set_ylabel("tokens/s (batch 1)")
axes[2].bar(fmts, [r["val_loss_change"] for r in rows], color=colors); axes[2].set_ylabel("val loss - fp32's (nats/char)")
axes[2].axhline(0, color="k", lw=0.8)
for ax in axes:
    ax.grid(alpha=0.3, axis="y")
fig.suptitle("one trained model in every format\\n" + machine_title(quant), fontsize=9)
plt.tight_layout(); plt.show()
base = next((r for r in rows if r["format"] == "fp32"), None)
if base:
    for r in rows:
        print(f"{r['format']:9s} reads {r['bytes_per_token'] / base['bytes_per_token']:5.3f} of fp32's bytes per token, "
              f"runs at {r['tokens_per_s'] / base['tokens_per_s']:5.2f}x its tokens/s "
              f"(the law's promise: {base['bytes_per_token'] / r['bytes_per_token']:5.2f}x)")'''

spec_run = '''spec = run_part("speculative")'''

spec_plot = '''rows, baseline = need(spec, "rows", "baseline_tokens_per_s")
print("target:", json.dumps(spec.get("target", {})))
print(f"baseline (the target alone, one step per token): {baseline:.1f} tokens/s")
drafts = list(dict.fromkeys(r["draft"] for r in rows))
fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
for i, d in enumerate(drafts):
    sel = sorted((r for r in rows if r["draft"] == d), key=lambda r: r["k"])
    k = [r["k"] for r in sel]
    lab = f"{d} ({sel[0]['draft_params']:,} params, c = {np.mean([r['cost_ratio'] for r in sel]):.2f})"
    axes[0].plot(k, [r["acceptance"] for r in sel], "o-", color=f"C{i}", label=lab)
    axes[1].plot(k, [r["tokens_per_round"] for r in sel], "o-", color=f"C{i}", label=f"{d} measured")
    axes[1].plot(k, [r["expected_tokens_per_round"] for r in sel], "--", color=f"C{i}", label=f"{d} (1-a^(k+1))/(1-a)")
    axes[2].plot(k, [r["speedup"] for r in sel], "o-", color=f"C{i}", label=f"{d} measured")
    axes[2].plot(k, [r["expected_speedup"] for r in sel], "--", color=f"C{i}", label=f"{d} expected")
axes[0].set_ylabel("acceptance rate a"); axes[0].set_ylim(0, 1.05)
axes[1].set_ylabel("tokens per target step")
axes[2].set_ylabel("speedup over the target alone"); axes[2].axhline(1, color="k", lw=0.8)
for ax in axes:
    ax.set_xlabel("k (drafts per round)"); ax.grid(alpha=0.3); ax.legend(fontsize=7)
fig.suptitle("speculative decoding: measured (solid) vs the i.i.d. formulas with the measured a and c (dashed)\\n"
             + machine_title(spec), fontsize=9)
plt.tight_layout(); plt.show()
print_table(["draft", "k", "accept", "tok/round", "expected", "c", "speedup", "expected"],
            [[r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['tokens_per_round']:.2f}",
              f"{r['expected_tokens_per_round']:.2f}", f"{r['cost_ratio']:.3f}", f"{r['speedup']:.2f}x",
              f"{r['expected_speedup']:.2f}x"] for r in rows])'''

prune_run = '''prune = run_part("prune")'''

prune_plot = '''rows, speed = need(prune, "rows", "speed")
fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), gridspec_kw={"width_ratios": [3, 2]})
ax = axes[0]
mag = sorted((r for r in rows if r["kind"] == "magnitude"), key=lambda r: r["sparsity"])
if mag:
    s = [r["sparsity"] for r in mag]
    ax.plot(s, [r["val_loss_pruned"] for r in mag], "o-", color="C3", label="magnitude, pruned")
    ax.plot(s, [r["val_loss_finetuned"] for r in mag], "o-", color="C0", label="magnitude, pruned + fine-tuned")
for r in rows:
    if r["kind"] != "magnitude":
        ax.plot([r["sparsity"]], [r["val_loss_pruned"]], "D", color="C3", ms=9, mfc="none", label=f"{r['kind']}, pruned")
        ax.plot([r["sparsity"]], [r["val_loss_finetuned"]], "D", color="C0", ms=9, label=f"{r['kind']}, fine-tuned")
ax.set_xlabel("sparsity of the pruned matrices"); ax.set_ylabel("validation loss (nats/char)")
ax.grid(alpha=0.3); ax.legend(fontsize=8)
ax.set_title("what pruning costs in loss, and what a short fine-tune wins back", fontsize=9)
ax = axes[1]
names = [s_["what"] for s_ in speed]
ax.barh(names, [s_["tokens_per_s"] for s_ in speed], color="C2")
for y, s_ in enumerate(speed):
    ax.annotate(f"{s_['bytes_per_token'] / 1e6:.2f} MB/token", (s_["tokens_per_s"], y), fontsize=8,
                xytext=(3, -3), textcoords="offset points")
ax.invert_yaxis(); ax.set_xlabel("tokens/s (batch 1)")
ax.set_title("what pruning buys in speed", fontsize=9)
fig.suptitle(machine_title(prune), fontsize=9)
plt.tight_layout(); plt.show()
print_table(["kind", "sparsity", "val loss pruned", "fine-tuned"],
            [[r["kind"], f"{r['sparsity']:.2f}", f"{r['val_loss_pruned']:.4f}", f"{r['val_loss_finetuned']:.4f}"]
             for r in rows])
print()
print_table(["what", "MB/token", "tokens/s"],
            [[s_["what"], f"{s_['bytes_per_token'] / 1e6:.3f}", f"{s_['tokens_per_s']:.1f}"] for s_ in speed])'''

recorded_cell = '''# Records committed to docs/benchmarks/ (the lead's full runs; QUICK records are pipeline
# checks and are left out). lesson10-law-cuda.json is the law measured on a GPU.
recorded = []
for path in sorted(glob.glob(os.path.join(src, "docs", "benchmarks", "lesson10-law*.json"))):
    with open(path) as f:
        rec = json.load(f)
    if rec.get("schema") == SCHEMA and not rec.get("machine", {}).get("quick"):
        recorded.append((path, rec))
if not recorded:
    print("No recorded lesson10-law*.json in docs/benchmarks/ yet: only this run's figures above.")
for path, rec in recorded:
    rows = rec["rows"]
    fig, ax = plt.subplots(figsize=(8, 5))
    b = np.array([r["bytes_per_token"] for r in rows], dtype=float)
    xs = np.geomspace(b.min() / 2, b.max() * 2, 50)
    ax.loglog(xs, rec["bandwidth_gbs"] * 1e9 / xs, "-", color="k", lw=1,
              label=f"law: {rec['bandwidth_gbs']:.1f} GB/s / bytes")
    for fmt in dict.fromkeys(r["format"] for r in rows):
        sel = [r for r in rows if r["format"] == fmt]
        ax.loglog([r["bytes_per_token"] for r in sel], [r["tokens_per_s"] for r in sel],
                  FORMAT_MARKERS.get(fmt, "x"), color=FORMAT_COLORS.get(fmt), ms=8, label=fmt, linestyle="none")
    ax.set_xlabel("bytes per token"); ax.set_ylabel("tokens/s at batch 1")
    ax.set_title(os.path.relpath(path, src) + "\\n" + machine_title(rec), fontsize=9)
    ax.grid(alpha=0.3, which="both"); ax.legend(fontsize=8)
    plt.tight_layout(); plt.show()'''

nb = new_notebook()
nb.cells = [
md('''# Lesson 10: inference

This notebook runs the five parts of lesson 10 (`lesson10 --part kv|law|quant|speculative|prune
--json-dir DIR`) and plots the record each writes (`lesson10-<part>.json`, schema
`nnlab-lesson10/1`, lessons/10-inference/inference_lesson.h). The lesson text,
[lessons/10-inference/README.md](../lessons/10-inference/README.md), explains each figure.

The first run trains the lesson's models (a target and two drafts, on Tiny Shakespeare or the
Debian fallback text) into `lesson10-models/` beside the notebook and reuses them after. Under
the test suite (`NNLAB_QUICK=1`) every model is tiny and every measurement short: the plots
then check the pipeline, and their numbers mean little. If a part fails, its cell stops the
notebook with the program's error.'''),
code(setup),
md('''## 1. The KV cache (`--part kv`)

Without a cache, generating the token at position `T` runs the whole model over all `T`
positions again: the matmuls cost `O(T)` and attention `O(T^2)` for ONE new token. With the
cache, the keys and values of earlier positions are kept, and a token costs one row of every
matmul plus one query's attention over `T` cached keys: `O(T)` in attention, constant in the
rest. Look at the slopes: the no-cache line bends towards slope 2 as attention grows; the
cache line stays flat while the weights dominate and rises gently (slope up to 1) when the
context is long. The last line checks that both give the same logits.'''),
code(kv_run),
code(kv_plot),
md('''## 2. The bandwidth law (`--part law`)

At batch 1 every weight is read once per token and used for one multiply-add: 2 FLOPs per
weight read, far below the machine's FLOPs per byte. So a token costs (bytes of weights) /
(memory bandwidth), and the black line `tokens/s = bandwidth / bytes per token` is the
ceiling. Each marker is one model in one format; the formats move a model LEFT (fewer bytes),
and the law says how far UP it should go.

What to look at: where the points sit under the line (the `of law` column), and where they
break it. Small models whose weights fit in the last-level cache can sit ABOVE the DRAM line
(the cache is faster than DRAM); the tiniest are overhead-bound (the fixed cost of a step,
not bytes, sets their speed) and sit below it; int4's and int8's kernels do more arithmetic
per byte, which may show as a lower fraction.'''),
code(law_run),
code(law_plot),
md('''### Batch > 1

With `B` sequences decoded together, each weight read serves `B` multiply-adds: the step
reads the same bytes, so steps/s (right) should barely fall while tokens/s (left) grows
almost `B` times, until the arithmetic (2B FLOPs per weight) or the activations catch up with
the bytes. The dotted line is perfect scaling from batch 1.'''),
code(batch_plot),
md('''## 3. Quantisation (`--part quant`)

The trained target in each weight format: its bytes, the bytes a token reads, tokens/s, and
the validation loss of the model the format stands for (`gpt::dequantized_copy`) with its
change from fp32. bf16 halves the bytes (2 per weight); int8 per output channel about
quarters them (1 + 4/cols); int4 in groups of 32 reads 0.625 bytes per weight, 1/6.4 of
fp32. Expect the loss change to grow as the bits shrink, and the tokens/s to follow the
bytes only as far as the unpacking keeps up. sparse24 is pruning (2:4 on the dense model,
no fine-tune), not quantisation: compare its loss change with the prune section's, where a
fine-tune wins some back.'''),
code(quant_run),
code(quant_plot),
md('''## 4. Speculative decoding (`--part speculative`)

A small draft proposes `k` tokens; the target checks all of them in one step. Left: how often
a draft token is accepted (a better draft: higher). Middle: tokens per target step, measured
(solid) and `(1 - a^(k+1)) / (1 - a)` from the measured acceptance (dashed). Right: the
speedup over the target alone, measured and `(1 - a^(k+1)) / ((1 - a)(k c + 1))` with the
measured cost ratio `c` of a draft step to a target step.

The formulas assume every draft is accepted independently with the same probability, and that
a target step costs the same for `k + 1` tokens as for one. Neither holds exactly: easy
stretches of text are accepted in runs; the `k + 1`-token step reads the weights once but does
`k + 1` times the arithmetic. Where solid and dashed part, say which assumption broke.'''),
code(spec_run),
code(spec_plot),
md('''## 5. Pruning (`--part prune`)

Left: validation loss against sparsity, for magnitude pruning (the smallest `|w|` of each
matrix set to zero) before and after a short fine-tune with the zeros held, and for 2:4 (two
of every four weights, sparsity 0.5). Right: what it buys. A dense kernel reads a zero as fast
as any number, so the 50%-pruned model stored densely reads the same bytes and runs at the
same speed as the dense one. Only a format that skips zeros reads fewer bytes: 2:4 stored as
two values and two 2-bit positions per four weights, 2.125 bytes per weight instead of 4.'''),
code(prune_run),
code(prune_plot),
md('''## Recorded figures

The full (not quick) runs of the lesson, on the machines named in them, are committed as
`docs/benchmarks/lesson10-*.json` and `.md`. If the bandwidth law is there (for the CPU, and
`-cuda` for a GPU), it is plotted here.'''),
code(recorded_cell),
md('''## Questions

1. In the law plot, which models sit above the line? Compute their bytes per token and compare
   with the last-level cache size of the machine in the title.
2. Do the int4 points reach the same fraction of the law as fp32's? Count the instructions
   per weight each format's inner loop needs (load, unpack, convert, scale, multiply-add).
3. At what batch would the matvec stop being memory-bound? Use 2B FLOPs per weight read and
   the machine's FLOPs-per-byte ridge point (lesson 03's roofline).
4. From the speculative table, pick the draft and k with the best measured speedup. Is it the
   one the formula predicts? If not, which of its assumptions failed?
5. The 50% magnitude-pruned model and the 2:4 model have the same number of zeros. Why is
   only one of them faster, and which has the lower validation loss after fine-tuning? Why?'''),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"lesson10-{i:02d}"  # stable ids: regenerating changes nothing unless a cell did
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "10-inference.ipynb"))
