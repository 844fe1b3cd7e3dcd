#!/usr/bin/env python3
"""Writes notebooks/07-attention.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_07.py
(ctest executes the notebook; see notebooks/CMakeLists.txt.)
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import csv, json, os, subprocess
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
# Opened in Jupyter from notebooks/, everything this notebook writes (runs, CSV files) goes
# to notebooks/out/, which git ignores; run_notebook.py runs it in a scratch folder instead.
if os.path.exists("run_notebook.py"):
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
nnlab = os.path.join(bin_dir, "nnlab")
quick = os.environ.get("NNLAB_QUICK") == "1"
out_dir = os.path.abspath("lesson07-run")

def run(*args):
    """Runs `nnlab <args>`, shows the end of its output, fails loudly if it failed."""
    cmd = [nnlab, *args, "--out-dir", out_dir] + (["--quick"] if quick else [])
    print(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-3000:])
    if r.returncode != 0:
        print(r.stderr)
        raise RuntimeError(f"exit status {r.returncode}")
    return r.stdout

def heatmap(ax, att, tokens, title, keys=None):
    """One attention matrix: row t = query position, column t2 = key position."""
    keys = tokens if keys is None else keys
    ax.imshow(np.array(att), vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(len(keys))); ax.set_xticklabels(keys, fontsize=8)
    ax.set_yticks(range(len(tokens))); ax.set_yticklabels(tokens, fontsize=8)
    ax.set_xlabel("key t2"); ax.set_ylabel("query t"); ax.set_title(title, fontsize=9)
'''

nb = new_notebook()
nb.cells = [
md('''# Lesson 07: attention

This notebook runs the lesson-07 program (`nnlab lesson07`) part by part and plots what it
wrote:

1. **scale**: the variance of the scores `q.k` with and without the `1/sqrt(hs)`, and how
   peaked the softmax gets, for head sizes 4 to 256;
2. **multihead**: the attention rows of the lesson's five hand-made tokens through 1, 2 and 4
   heads, as heatmaps;
3. **a trained model's attention maps** on a real line of text: these come from lesson 08's GPT
   (not built yet; the cell says so when the file is missing).

Every part runs in well under a second; under the test suite (`NNLAB_QUICK=1`) the scale
experiment uses fewer random queries.'''),
code(setup),
md('''## 1. Why the scores are divided by sqrt(hs)

With `q` and `k` of `hs` independent entries of variance 1, `q.k` is a sum of `hs` products
of variance 1: its variance is `hs`. Fed to a softmax unscaled, scores spread over
`+-2 sqrt(hs)` and the largest one takes nearly all the probability: the softmax becomes a
one-hot, and its Jacobian (the gradient's only way back to `q` and `k`) goes to 0. Dividing by
`sqrt(hs)` brings the variance back to 1 at every head size.'''),
code('''run("lesson07", "--part", "scale")
with open(os.path.join(out_dir, "scale.csv")) as f:
    rows = list(csv.DictReader(f))
s = {k: np.array([float(r[k]) for r in rows]) for k in rows[0]}
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4))
ax1.loglog(s["hs"], s["var_raw"], "o-", label="q.k")
ax1.loglog(s["hs"], s["var_scaled"], "s-", label="q.k / sqrt(hs)")
ax1.loglog(s["hs"], s["hs"], "k:", lw=1, label="hs")
ax1.set_xlabel("head size hs"); ax1.set_ylabel("variance of the score"); ax1.legend(); ax1.grid(alpha=0.3, which="both")
ax2.semilogx(s["hs"], s["maxp_raw"], "o-", label="unscaled")
ax2.semilogx(s["hs"], s["maxp_scaled"], "s-", label="scaled")
ax2.set_xlabel("head size hs"); ax2.set_ylabel("mean largest probability"); ax2.set_ylim(0, 1); ax2.legend(); ax2.grid(alpha=0.3)
ax3.semilogx(s["hs"], s["entropy_raw"], "o-", label="entropy, unscaled")
ax3.semilogx(s["hs"], s["entropy_scaled"], "s-", label="entropy, scaled")
ax3.semilogx(s["hs"], s["jac_raw"], "o--", label="sum p(1-p), unscaled")
ax3.semilogx(s["hs"], s["jac_scaled"], "s--", label="sum p(1-p), scaled")
ax3.set_xlabel("head size hs"); ax3.set_ylabel("nats / Jacobian trace"); ax3.legend(fontsize=8); ax3.grid(alpha=0.3)
fig.suptitle("softmax over 16 random keys"); plt.tight_layout(); plt.show()'''),
md('''## 2. Heads: the same tokens, split into 1, 2 and 4 heads

The tokens are `A B A C B` with `A.A = B.B = C.C = 2`, `A.C = B.C = 1`, `A.B = 0`, and the
projections `Wq = Wk = 2I`, `Wv = I` (part 1 of the program prints every step). Each row of a
heatmap is one query position's softmax over the positions it may see: the upper triangle is
the causal mask (exactly 0). With one head the queries find the tokens like themselves; with
four heads of one channel each, every head compares one feature, and a token that lacks that
feature has a zero query: it attends uniformly.'''),
code('''run("lesson07", "--part", "multihead")
mh = json.load(open(os.path.join(out_dir, "multihead.json")))
tokens = [f"{t}({i})" for i, t in enumerate(mh["tokens"])]
runs = mh["runs"]
ncols = max(r["NH"] for r in runs)
fig, axes = plt.subplots(len(runs), ncols, figsize=(3.2 * ncols, 3.1 * len(runs)), squeeze=False)
for row, r in enumerate(runs):
    for h in range(ncols):
        ax = axes[row][h]
        if h < r["NH"]:
            heatmap(ax, r["att"][h], tokens, f"NH = {r['NH']}, head {h} (hs = {r['hs']})")
        else:
            ax.axis("off")
plt.tight_layout(); plt.show()'''),
md('''## 3. Attention maps of a trained model on a real line of text

The toy examples above were hand-made. Here a GPT trained on Tiny Shakespeare (lesson 08's
trainer) reads one line, and `nnlab gpt dump` writes every named activation of that forward
pass, among them `h.<layer>.att`, the softmax rows of every head, to a safetensors file.
The cell uses the checkpoint of `bash scripts/run.sh` (`out/gpt/best.safetensors`) or of
`scripts/bench_lesson08.sh` when one exists; otherwise (and in quick mode) it trains a
small model for a few seconds, so the maps are those of a barely trained model: expect
mostly "look at the previous character" and "spread over the recent past" patterns.
Look for heads that attend to the start of the word, to the last space or newline, to the
same character earlier in the line.'''),
code('''import sys
sys.path.insert(0, os.path.join(src, "notebooks"))
from gpt_helpers import read_safetensors, plot_attention_grid
line = "ROMEO:\\nBut soft, what light through yonder window breaks?"
ckpts = [os.path.join(src, "out", "gpt", "best.safetensors"),
         os.path.join(src, "out", "bench-lesson08", "run", "best.safetensors")]
ckpt = None if quick else next((p for p in ckpts if os.path.isfile(p)), None)
if ckpt is None:
    small_dir = os.path.abspath("lesson07-gpt")
    os.makedirs(small_dir, exist_ok=True)
    cands = [os.path.join(src, "data", "tinyshakespeare", "input.txt"),
             os.path.join(src, "..", "shared", "data", "tinyshakespeare.txt"), "/usr/share/common-licenses/GPL-3"]
    source = next(p for p in cands if os.path.isfile(p))
    corpus = os.path.join(small_dir, "small.txt")
    open(corpus, "w").write(open(source, encoding="utf-8", errors="replace").read()[:40000])
    # --overwrite: this folder is the notebook's own scratch run, started over each time
    cmd = [nnlab, "gpt", "train", "--data", corpus, "--out-dir", small_dir, "--overwrite", "--n-layer", "2", "--n-head", "4",
           "--n-embd", "32", "--block-size", "64", "--batch-size", "8", "--max-iters", "60" if quick else "300",
           "--eval-interval", "60", "--eval-iters", "2", "--log", "none"]
    print(" ".join(cmd)); r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    print("\\n".join(l for l in r.stdout.splitlines() if not l.startswith("train "))[-800:])
    ckpt = os.path.join(small_dir, "best.safetensors")
    if "common-licenses" in source:
        line = "This program is free software: you can redistribute it"
dump = os.path.abspath("lesson07-attention.safetensors")
r = subprocess.run([nnlab, "gpt", "dump", "--checkpoint", ckpt, "--text", line, "--out", dump], capture_output=True, text=True)
assert r.returncode == 0, r.stdout + r.stderr
print(ckpt); print(r.stdout)
acts, _ = read_safetensors(dump)
fig = plot_attention_grid(acts, line[:-1], size=3.0)
plt.show()'''),
md('''## Questions

1. In the scale plot, the unscaled variance follows the dotted line `hs`. What would it follow
   if the entries of `q` and `k` had variance 0.5 each? What scale factor would you use then?
2. At `hs = 256` unscaled, the mean largest probability is above 0.9. Why does that make
   learning slow, even though the forward pass is "confident"?
3. In the 4-head heatmaps, find a row that is uniform. Which token is it, and why is its
   query zero in that head?
4. The causal mask makes the upper triangle zero. What would a model trained *without* the
   mask learn to do on the next-token task, and why would it fail at generation time?'''),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "07-attention.ipynb"))
