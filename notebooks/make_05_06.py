#!/usr/bin/env python3
"""Writes notebooks/05-rnn.ipynb and notebooks/06-lstm.ipynb (cells only, no outputs): edit
the cells here, then run
    /usr/bin/python3 notebooks/make_05_06.py
(ctest executes the notebooks; see notebooks/CMakeLists.txt.)
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
out_dir = os.path.abspath("{out}")

def run(*args):
    """Runs `nnlab <args>`, shows the end of its output, fails loudly if it failed."""
    cmd = [nnlab, *args, "--out-dir", out_dir] + (["--quick"] if quick else [])
    print(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-2500:])
    if r.returncode != 0:
        print(r.stderr)
        raise RuntimeError(f"exit status {{r.returncode}}")
    return r.stdout

def read_jsonl(path):
    return [json.loads(line) for line in open(path)]

def read_csv(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return {{k: np.array([float(r[k]) if k != "cell" and k != "model" else r[k] for r in rows]) for k in rows[0]}}
'''

nb5 = new_notebook()
nb5.cells = [
md('''# Lesson 05: recurrent networks

This notebook runs the lesson-05 program (`nnlab lesson05`) part by part and plots what it
wrote:

1. **gradients**: how the gradient reaching a hidden state shrinks (or blows up) with its
   distance in time from the loss: the reason plain RNNs forget;
2. **chars**: the learning curve of the character-level model, and samples at several
   temperatures from the trained weights;
3. **plant**: the RNN's one-step-ahead prediction of a simulated tank, next to the linear
   baselines a control engineer would try first.

Under the test suite (`NNLAB_QUICK=1`) every run is tiny (seconds); run the notebook
yourself for the real runs (a few minutes on 2 cores).'''),
code(setup.format(out="lesson05-run")),
md('''## 1. Vanishing and exploding gradients

A fresh tanh RNN reads 60 random inputs; the loss looks at the last hidden state only. Going
back one step multiplies the gradient by the Jacobian `diag(1 - h^2) Wh`, so after `d` steps
its size behaves like `(gain)^d`: a straight line on a log scale. With the recurrent weights
scaled down (x0.5) or at the default initialisation (x1) the line falls: the gradient
*vanishes*, and nothing that happened 20 steps ago can be learned. Scaled up (x4) it rises:
the gradient *explodes* (and gradient clipping is what keeps training alive).'''),
code('''run("lesson05", "--part", "gradients")
g = read_csv(os.path.join(out_dir, "gradients_rnn.csv"))
fig, ax = plt.subplots(figsize=(7, 4))
for s in sorted(set(g["scale"])):
    m = g["scale"] == s
    ax.semilogy(g["distance"][m], g["norm"][m], label=f"Wh x {s:g}")
ax.set_xlabel("distance d from the loss (steps)"); ax.set_ylabel("||dL/dh_t|| / ||dL/dh_last||")
ax.set_title("tanh RNN: gradient vs distance in time"); ax.grid(alpha=0.3, which="both"); ax.legend()
plt.tight_layout(); plt.show()
default = g["norm"][(g["scale"] == 1.0) & (g["distance"] == 20)][0]
print(f"at the default init, the gradient 20 steps back is {default:.1e} of the one at the loss")'''),
md('''## 2. A character-level language model

The program trains on Tiny Shakespeare when it finds it (`python3 scripts/fetch_data.py
tinyshakespeare` puts it in `data/`), otherwise on the licence texts every Debian machine has
in `/usr/share/common-licenses`, and says which. The loss is in nats per character: `log(65)
= 4.17` is a uniform guess over Shakespeare's 65 characters; good character models reach
~1.5.'''),
code('''out = run("lesson05", "--part", "chars")
curve = read_jsonl(os.path.join(out_dir, "char_rnn.jsonl"))
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot([r["iter"] for r in curve], [r["train_loss"] for r in curve], "o-", label="train (mean since last point)")
ax.plot([r["iter"] for r in curve], [r["val_loss"] for r in curve], "s-", label="validation")
ax.set_xlabel("iteration"); ax.set_ylabel("cross-entropy (nats/char)"); ax.grid(alpha=0.3); ax.legend()
ax.set_title("vanilla RNN, character model")
plt.tight_layout(); plt.show()
print(f"final validation loss {curve[-1]['val_loss']:.3f} nats/char after {curve[-1]['iter']} iterations, "
      f"{curve[-1]['seconds']:.0f} s of training")'''),
md('''### Temperature

Sampling draws each next character from `softmax(logits / T)`. The same trained weights
(loaded from the checkpoint, `--iters 0`), three temperatures: low `T` picks the likeliest
characters (safe, repetitive), high `T` flattens the distribution (adventurous, then
nonsense).'''),
code('''ckpt = os.path.join(out_dir, "char_rnn.safetensors")
prompt = open(os.path.join(out_dir, "char_rnn_sample.txt")).read()[:6]
for t in ["0.3", "0.8", "1.5"]:
    cmd = [nnlab, "lesson05", "--part", "chars", "--iters", "0", "--load", ckpt, "--temperature", t,
           "--prompt", prompt, "--sample-len", "200", "--out-dir", os.path.join(out_dir, "t" + t)]
    r = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = open(os.path.join(out_dir, "t" + t, "char_rnn_sample.txt")).read()
    print(f"---- temperature {t} ----\\n{text}")'''),
md('''## 3. Predicting a plant

A tank's level is held by a PI controller driving a pump; the water reaches the tank
`dead_time` steps after the pump command (a long pipe). At each step the network sees the
pump command, the level and the outflow, and predicts the level and outflow one step later.
The baselines: **persistence** (the next value is the current one) and **ARX** models fitted
by least squares, with a short input history (`nb = 2`, blind to the dead time) and a long
one (`nb = dead_time + 5`).'''),
code('''run("lesson05", "--part", "plant")
res = json.load(open(os.path.join(out_dir, "plant_rnn_d20.json")))
v = read_csv(os.path.join(out_dir, "plant_rnn_d20_val.csv"))
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [2.2, 1]})
n = min(600, len(v["t"]))
t = v["t"][:n]
ax1.plot(t, v["setpoint"][:n], "k--", lw=1, label="setpoint")
ax1.plot(t, v["level"][:n], color="0.6", lw=2, label="level (measured, t+1)")
ax1.plot(t, v["level_arx_long"][:n], lw=1, label="ARX long")
ax1.plot(t, v["level_net"][:n], lw=1, label="RNN")
ax1.set_xlabel("step"); ax1.set_ylabel("level (m)"); ax1.legend(fontsize=8); ax1.grid(alpha=0.3)
ax1.set_title("validation run: one-step-ahead predictions")
names = [s["model"] for s in res["scores"]]
ax2.barh(names, [1000 * s["level_rmse"] for s in res["scores"]])
ax2.set_xlabel("level RMSE (mm)"); ax2.grid(alpha=0.3, axis="x")
plt.tight_layout(); plt.show()
for s in res["scores"]:
    print(f"{s['model']:>20}: level {1000 * s['level_rmse']:.3f} mm, outflow {1000 * s['outflow_rmse']:.4f} l/s")'''),
md('''## Questions

1. In the gradient plot, read off the slope of the x1 line: by what factor does the gradient
   shrink per step? How many steps back is it 1e-6 of its size at the loss?
2. The validation loss is measured in nats per character. Convert the final value into
   bits, and into "the model is as unsure as a uniform choice among N characters" (N = e^loss).
3. Why can an ARX model with `nb = 2` not predict the effect of a pump change 20 steps ago,
   and why can the RNN, in principle? Does it, here?
4. The sensor noise on the level has a standard deviation of 2 mm. What does that mean for
   the lowest one-step RMSE any model could reach?'''),
]

nb6 = new_notebook()
nb6.cells = [
md('''# Lesson 06: LSTM vs RNN

This notebook runs `nnlab lesson06 --part gradients` and `--part compare` and plots:

1. the gradient vs distance in time for the RNN and the LSTM at their default initialisation;
2. the character model with each cell, trained on **the same data for the same wall-clock
   budget**, validation loss against seconds and against iterations, and samples from both;
3. the plant at several dead times: where the LSTM's longer memory matters.

Under the test suite (`NNLAB_QUICK=1`) the runs are tiny; run it yourself for the real
comparison (two minutes per character model by default, `--compare-budget`).'''),
code(setup.format(out="lesson06-run")),
md('''## 1. Gradients through time, RNN and LSTM

In the LSTM the cell `c_t = f * c_{t-1} + i * g` is a sum: going back one step along it
multiplies the gradient by the forget gate `f`, not by `Wh` and `tanh'`. With the forget bias
at 1, `f` starts near 0.73, and the gradient survives much further.'''),
code('''run("lesson06", "--part", "gradients")
g = read_csv(os.path.join(out_dir, "gradients.csv"))
fig, ax = plt.subplots(figsize=(7, 4))
for cell in ["rnn", "lstm"]:
    for s in sorted(set(g["scale"])):
        m = (g["cell"] == cell) & (g["scale"] == s)
        ax.semilogy(g["distance"][m], g["norm"][m], "-" if cell == "lstm" else "--", label=f"{cell}, Wh x {s:g}")
ax.set_xlabel("distance from the loss (steps)"); ax.set_ylabel("||dL/dh_t|| / ||dL/dh_last||")
ax.grid(alpha=0.3, which="both"); ax.legend(); plt.tight_layout(); plt.show()'''),
md('''## 2. Characters: the same data, the same time

Both models see the same corpus with the same seed and get the same number of seconds (the
LSTM does about 4x the work per step, so it makes fewer steps). Plotting against seconds is
the fair comparison; against iterations shows how much each step is worth.'''),
code('''out = run("lesson06", "--part", "compare")
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
for cell in ["rnn", "lstm"]:
    c = read_jsonl(os.path.join(out_dir, f"char_{cell}.jsonl"))
    ax1.plot([r["seconds"] for r in c], [r["val_loss"] for r in c], "o-", label=cell)
    ax2.plot([r["iter"] for r in c], [r["val_loss"] for r in c], "o-", label=cell)
ax1.set_xlabel("training time (s)"); ax2.set_xlabel("iteration")
for ax in (ax1, ax2):
    ax.set_ylabel("validation loss (nats/char)"); ax.grid(alpha=0.3); ax.legend()
plt.tight_layout(); plt.show()
for cell in ["rnn", "lstm"]:
    print(f"==== {cell} ====")
    print(open(os.path.join(out_dir, f"char_{cell}_sample.txt")).read()[:400])'''),
md('''## 3. The plant: where memory matters

The same plant at several dead times. With a short delay every model does about as well;
the longer the pump's effect takes to arrive, the further back a model must remember the
pump command. ARX with `nb = 2` cannot see it at all; ARX with `nb = dead_time + 5` is given
the answer's structure by construction; the networks must learn to keep it.'''),
code('''p = read_csv(os.path.join(out_dir, "compare_plant.csv"))
dead = sorted(set(p["dead_time"]))
models = ["persistence", "ARX short", "ARX long", "rnn", "lstm"]
def pick(d, cell, model_prefix):
    m = (p["dead_time"] == d) & (p["cell"] == cell)
    return [1000 * v for v, name in zip(p["level_rmse"][m], p["model"][m]) if name.startswith(model_prefix)][0]
vals = {"persistence": [pick(d, "rnn", "persistence") for d in dead],
        "ARX short": [pick(d, "rnn", "ARX") for d in dead],
        "ARX long": [[1000 * v for v, name in zip(p["level_rmse"][(p["dead_time"] == d) & (p["cell"] == "rnn")],
                      p["model"][(p["dead_time"] == d) & (p["cell"] == "rnn")]) if name.startswith("ARX")][1] for d in dead],
        "rnn": [pick(d, "rnn", "rnn") for d in dead],
        "lstm": [pick(d, "lstm", "lstm") for d in dead]}
x = np.arange(len(dead)); w = 0.16
fig, ax = plt.subplots(figsize=(9, 4))
for k, name in enumerate(models):
    ax.bar(x + (k - 2) * w, vals[name], w, label=name)
ax.set_xticks(x); ax.set_xticklabels([f"dead time {int(d)}" for d in dead])
ax.set_ylabel("level RMSE, one step ahead (mm)"); ax.grid(alpha=0.3, axis="y"); ax.legend(fontsize=8)
plt.tight_layout(); plt.show()
for i, d in enumerate(dead):
    print(f"dead time {int(d):3d}: " + ", ".join(f"{m} {vals[m][i]:.3f}" for m in models))'''),
code('''d = int(dead[-1])
fig, ax = plt.subplots(figsize=(12, 4))
for cell, style in [("rnn", "--"), ("lstm", "-")]:
    v = read_csv(os.path.join(out_dir, f"plant_{cell}_d{d}_val.csv"))
    n = min(500, len(v["t"]))
    if cell == "rnn":
        ax.plot(v["t"][:n], v["level"][:n], color="0.6", lw=2, label="level (measured)")
        ax.plot(v["t"][:n], v["setpoint"][:n], "k:", lw=1, label="setpoint")
    ax.plot(v["t"][:n], v["level_net"][:n], style, lw=1, label=cell)
ax.set_title(f"dead time {d}: one-step-ahead level predictions"); ax.set_xlabel("step"); ax.set_ylabel("level (m)")
ax.grid(alpha=0.3); ax.legend(fontsize=8); plt.tight_layout(); plt.show()'''),
md('''## Questions

1. Per second of training, which cell learned the characters faster here? Per iteration?
   Why can the answers differ?
2. Where in the LSTM's equations does the `4x` work per step come from? Which matmul
   dominates at `H = 256`, `B = 32`?
3. At which dead time does the RNN fall behind the LSTM on the plant? What sets the longest
   delay either can learn with truncated BPTT of `--seq-len 64` steps?
4. The ARX model with the right input history is hard to beat. What would you change in the
   plant to make the nonlinearity (the outlet's `sqrt(level)`) matter more?'''),
]
for nb, name in [(nb5, "05-rnn"), (nb6, "06-lstm")]:
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.ipynb"))
