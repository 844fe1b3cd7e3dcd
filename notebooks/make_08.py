#!/usr/bin/env python3
"""Writes notebooks/08-gpt.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_08.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import os, subprocess, sys
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
sys.path.insert(0, os.path.join(src, "notebooks"))
from gpt_helpers import read_safetensors, read_jsonl, plot_attention_grid, char_labels

def run(*args, tail=2500):
    """Runs `nnlab <args>`, shows the end of its output, fails loudly if it failed."""
    cmd = [nnlab, *map(str, args)]
    print(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-tail:])
    if r.returncode != 0:
        print(r.stderr)
        raise RuntimeError(f"exit status {r.returncode}")
    return r.stdout
'''

nb = new_notebook()
nb.cells = [
md('''# Lesson 08: the GPT

This notebook looks at a trained character GPT (`nnlab lesson08 --part train`, nanoGPT's
Shakespeare-char CPU config: `L=4 NH=4 C=128 T=64 B=12`, 2000 steps):

1. **the loss curves** from the trainer's log (`<out-dir>/log.jsonl`): the training loss of every
   step, the evaluations of both splits, the learning-rate schedule, the gradient norm and MFU;
2. **samples** at several temperatures and with top-k (`nnlab gpt sample`);
3. **attention maps** of every layer and head on a real line of text (`nnlab gpt dump`),
   with the characters on the axes.

Under the test suite (`NNLAB_QUICK=1`) it trains a tiny model (2 layers, 32 wide) for 50
steps on a small slice of text, in seconds. Run it yourself for the real thing: it reuses
`out/gpt/` if `nnlab lesson08 --part train` already wrote a log and a checkpoint there, and
trains the real config otherwise (a few minutes on 2 cores).'''),
code(setup),
md('''## Train (or reuse a run)'''),
code('''existing = os.environ.get("NNLAB_GPT_DIR", os.path.join(src, "out", "gpt"))
if quick:
    out_dir = os.path.abspath("lesson08-run")
    os.makedirs(out_dir, exist_ok=True)
    # a small slice of real text: Tiny Shakespeare if it is here, else a Debian licence
    candidates = [os.path.join(d, f) for d in [os.environ.get("NNLAB_DATA", ""), os.path.join(src, "data"),
                                               os.path.join(src, "..", "shared", "data")]
                  for f in ["tinyshakespeare.txt", os.path.join("tinyshakespeare", "input.txt")]]
    candidates.append("/usr/share/common-licenses/GPL-3")
    source = next(p for p in candidates if p and os.path.isfile(p))
    corpus = os.path.join(out_dir, "small.txt")
    with open(source, encoding="utf-8", errors="replace") as f:
        open(corpus, "w").write(f.read()[:30000])
    print("quick mode: 30,000 characters of", source)
    run("lesson08", "--part", "train", "--data", corpus, "--n-layer", 2, "--n-head", 2, "--n-embd", 32,
        "--block-size", 32, "--batch-size", 8, "--max-iters", 50, "--warmup-iters", 5, "--eval-interval", 25,
        "--eval-iters", 4, "--sample-tokens", 100, "--out-dir", out_dir, "--overwrite")  # a scratch run
elif os.path.isfile(os.path.join(existing, "log.jsonl")) and os.path.isfile(os.path.join(existing, "best.safetensors")):
    out_dir = existing
    print("reusing the run in", out_dir)
else:
    out_dir = os.path.abspath("lesson08-run")
    run("lesson08", "--part", "train", "--out-dir", out_dir, "--overwrite", tail=4000)  # the notebook's own run
log = read_jsonl(os.path.join(out_dir, "log.jsonl"))
ckpt = os.path.join(out_dir, "best.safetensors")
train = [r for r in log if r["split"] == "train"]
evals = [r for r in log if r["split"] == "eval"]
print(f"{len(train)} training steps, {len(evals)} evaluations in the log")'''),
md('''## 1. Loss curves

The training loss of one step is noisy (one batch of `B` sequences); the evaluations average
`eval_iters` fixed batches of each split. A fresh model scores about `log V` (a uniform guess); the
2000-step run of the default config is recorded in `docs/benchmarks/lesson08-gpt.md`. When the validation loss stops following the training loss down, the model has started
to memorise its training text.

The learning rate warms up linearly, then follows a cosine down to `min_lr`
(`gpt::learning_rate`); the gradient norm is measured before clipping (`--grad-clip 1`).'''),
code('''step = np.array([r["step"] for r in train]); loss = np.array([r["loss"] for r in train])
def smooth(y, k=25):
    k = max(1, min(k, len(y) // 4 or 1))
    return np.convolve(y, np.ones(k) / k, mode="valid"), k
fig, axes = plt.subplots(2, 2, figsize=(11, 7))
ax = axes[0][0]
ax.plot(step, loss, color="0.75", lw=0.8, label="train, per step")
s, k = smooth(loss)
ax.plot(step[k - 1:], s, color="C0", label=f"train, mean of {k} steps")
ax.plot([r["step"] for r in evals], [r["train_loss"] for r in evals], "o-", color="C1", label="eval: train split")
ax.plot([r["step"] for r in evals], [r["val_loss"] for r in evals], "s-", color="C3", label="eval: val split")
ax.set_xlabel("step"); ax.set_ylabel("cross-entropy (nats/char)"); ax.grid(alpha=0.3); ax.legend(fontsize=8)
ax.set_title("loss")
axes[0][1].plot(step, [r["lr"] for r in train]); axes[0][1].set_title("learning rate (warm-up, cosine)")
axes[0][1].set_xlabel("step"); axes[0][1].grid(alpha=0.3)
axes[1][0].semilogy(step, [r["grad_norm"] for r in train], lw=0.8); axes[1][0].axhline(1.0, color="k", ls=":", lw=1)
axes[1][0].set_title("gradient norm before clipping (dotted: the clip)"); axes[1][0].set_xlabel("step")
axes[1][0].grid(alpha=0.3, which="both")
axes[1][1].plot(step, [100 * r["mfu"] for r in train], lw=0.8)
axes[1][1].set_title("MFU (%): FLOPs/token x tokens/s / measured peak"); axes[1][1].set_xlabel("step")
axes[1][1].grid(alpha=0.3)
plt.tight_layout(); plt.show()
best = min(evals, key=lambda r: r["val_loss"])
print(f"best val loss {best['val_loss']:.4f} at step {best['step']}; median {np.median([r['ms'] for r in train]):.1f} ms/step, "
      f"median MFU {100 * np.median([r['mfu'] for r in train]):.1f}%")'''),
md('''## 2. Samples

`nnlab gpt sample` loads the checkpoint (weights, config, vocabulary) and draws one character
at a time from `softmax(logits / temperature)`, feeding each back in. Same seed for each:
low temperatures pick the likeliest characters (safe, repetitive), 1.0 is the model's own
distribution, and top-k removes the long tail of unlikely characters where the typos live.'''),
code('''n = 150 if quick else 400
for t, k in [("0.5", 0), ("0.8", 0), ("1.0", 0), ("1.0", 10)]:
    out = subprocess.run([nnlab, "gpt", "sample", "--checkpoint", ckpt, "--tokens", str(n), "--temperature", t,
                          "--top-k", str(k)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    print(f"---- temperature {t}" + (f", top-k {k}" if k else "") + " ----" + out.stdout)'''),
md('''## 3. Attention maps

`nnlab gpt dump` runs the checkpoint on one line of text and writes every named activation to a
safetensors file; `h.<l>.att` is layer `l`'s attention, shaped `(1, NH, T, T)`. Row `t` is the
softmax over positions `0..t` that position `t` uses to mix the values: the upper triangle is 0
(the causal mask). Look for heads that attend to the previous character (a bright first
sub-diagonal), to the start of the current word or line, or to the same letter earlier on.
`notebooks/gpt_helpers.py` reads the file with numpy and draws the grid.'''),
code('''ck_tensors, meta = read_safetensors(ckpt)
T = int(meta["block_size"])
vocab = set(bytes.fromhex(meta["vocab_hex"]).decode("latin-1"))
# a real line from the end of the training text (the validation split), at most T + 1 characters
text = None
try:
    corpus_text = open(meta["corpus"], encoding="latin-1").read()
    start = corpus_text.index("\\n", int(len(corpus_text) * 0.95)) + 1
    while corpus_text[start] == "\\n":
        start += 1
    text = corpus_text[start:start + T + 1]
except (OSError, ValueError):
    pass
if not text or not text.isascii() or not set(text) <= vocab:
    text = "".join(c for c in "ROMEO:\\nBut soft, what light through yonder window breaks?\\n" if c in vocab)[:T + 1]
print(repr(text))
dump = os.path.abspath("lesson08-attention.safetensors")
run("gpt", "dump", "--checkpoint", ckpt, "--text", text, "--out", dump)
acts, _ = read_safetensors(dump)
L = sum(1 for name in acts if name.endswith(".att"))
print({f"h.{l}.att": acts[f"h.{l}.att"].shape for l in range(L)})
fig = plot_attention_grid(acts, text, size=3.2 if T <= 32 else 4.2)
plt.show()'''),
code('''# Where does each head look, on average? The mean distance back (t - t2) weighted by att[t, t2]:
# ~1 is a previous-character head; large values look far back.
for l in range(L):
    att = acts[f"h.{l}.att"][0]                     # (NH, T, T)
    Tn = att.shape[-1]
    dist = np.arange(Tn)[:, None] - np.arange(Tn)[None, :]   # t - t2
    mean_back = (att * np.maximum(dist, 0)).sum(-1).mean(-1)  # per head
    print(f"layer {l}: mean distance back per head " + ", ".join(f"{d:5.1f}" for d in mean_back))'''),
md('''## Questions

1. How far apart are the train and validation losses at the end? What would dropout
   (`--dropout 0.2`) do to each curve, and why does nanoGPT use it on the GPU config but not
   the CPU one?
2. The MFU curve is flat after the first steps. Which parts of a step does the `6N` count
   leave out, and would counting them raise or lower the MFU?
3. Find a head whose map is a bright sub-diagonal. What does it let the next layer compute?
   Does it appear in layer 0, or only higher up?
4. Sample at temperature 0.5 and 1.0 with the same seed. Why does the first character
   already differ? (Hint: what does the temperature do to the uniform draw's interval?)'''),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "08-gpt.ipynb"))
