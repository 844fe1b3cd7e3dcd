#!/usr/bin/env python3
"""Writes notebooks/09-gpu-training.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_09_training.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import glob, json, os, subprocess, sys
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
from gpt_helpers import read_jsonl

def run(*args, env=None, tail=2500):
    """Runs `nnlab <args>` (with extra environment variables), shows the end of its output,
    fails loudly if it failed."""
    cmd = [nnlab, *map(str, args)]
    print(" ".join((f"{k}={v} " for k, v in (env or {}).items())) + " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    print(r.stdout[-tail:])
    if r.returncode != 0:
        print(r.stderr)
        raise RuntimeError(f"exit status {r.returncode}")
    return r.stdout
'''

device_cell = '''# Is there a GPU? `nnlab cuda info` with NNLAB_DEVICE=gpu fails, saying why, when there is none.
probe = subprocess.run([nnlab, "cuda", "info"], capture_output=True, text=True,
                       env={**os.environ, "NNLAB_DEVICE": "gpu"})
on_gpu = probe.returncode == 0
if on_gpu:
    cuda_env = {}
    print(probe.stdout.strip().splitlines()[0] if probe.stdout.strip() else "a GPU")
    # a small model, big enough that a GPU has some work (nanoGPT's CPU config when not quick)
    model = (["--n-layer", 2, "--n-head", 2, "--n-embd", 64, "--block-size", 64, "--batch-size", 16] if quick else
             ["--n-layer", 4, "--n-head", 4, "--n-embd", 128, "--block-size", 64, "--batch-size", 12])
    steps = 60 if quick else 500
else:
    cuda_env = {"NNLAB_DEVICE": "emu"}
    why = (probe.stdout + probe.stderr).strip().splitlines()
    print("=" * 78)
    print("NO GPU HERE:", why[-1] if why else "")
    print("The cuda backend runs on the CUDA EMULATOR (NNLAB_DEVICE=emu): the same kernels,")
    print("every GPU thread a fiber on the CPU. Correct, and thousands of times slower than a GPU,")
    print("so the model below is TINY and the run SHORT, and its tokens/s say nothing about a GPU.")
    print("=" * 78)
    model = (["--n-layer", 1, "--n-head", 2, "--n-embd", 32, "--block-size", 16, "--batch-size", 4] if quick else
             ["--n-layer", 2, "--n-head", 2, "--n-embd", 32, "--block-size", 32, "--batch-size", 4])
    steps = 12 if quick else 40
print("model flags:", " ".join(map(str, model)), f"| {steps} steps")'''

train_cell = '''# A slice of real text, the same file for every run: Tiny Shakespeare if it is here, else a Debian licence.
work = os.path.abspath("lesson09-training")
os.makedirs(work, exist_ok=True)
candidates = [os.path.join(d, f) for d in [os.environ.get("NNLAB_DATA", ""), os.path.join(src, "data"),
                                           os.path.join(src, "..", "shared", "data")]
              for f in ["tinyshakespeare.txt", os.path.join("tinyshakespeare", "input.txt")]]
candidates.append("/usr/share/common-licenses/GPL-3")
source = next(p for p in candidates if p and os.path.isfile(p))
corpus = os.path.join(work, "text.txt")
with open(source, encoding="utf-8", errors="replace") as f:
    open(corpus, "w").write(f.read()[:100000])
print("text: the first 100,000 characters of", source)

# Everything that decides the numbers is the same for every run: text, model, seed, schedule,
# dropout (so the dropout masks are the same too: a hash of (seed, i) on both backends).
common = ["--data", corpus, *model, "--dropout", 0.1, "--seed", 1337, "--max-iters", steps,
          "--warmup-iters", max(1, steps // 10), "--lr", 3e-3, "--eval-interval", max(1, steps // 2),
          "--eval-iters", 2, "--sample-tokens", 0]

def train(name, backend, precision="fp32", env=None):
    out = os.path.join(work, name)
    text = run("gpt", "train", *common, "--backend", backend, "--precision", precision, "--out-dir", out,
               "--overwrite", env=env)  # the notebook's scratch runs start over each time
    line = next((l for l in text.splitlines() if l.startswith("backend:")), "backend: " + backend)
    return {"name": name, "backend": line[len("backend:"):].split(",")[0].strip(),
            "log": read_jsonl(os.path.join(out, "log.jsonl")), "emulated": env is not None and env.get("NNLAB_DEVICE") == "emu"}

runs = [train("cpu", "cpu"), train("cuda-fp32", "cuda", "fp32", cuda_env)]
if on_gpu:
    runs.append(train("cuda-auto", "cuda", "auto", cuda_env))  # bf16 tensor cores on compute capability 8.0+
for r in runs:
    print(f"{r['name']:10s} {r['backend']}" + ("   <- EMULATED" if r["emulated"] else ""))'''

loss_md = '''## 1. The same run on two backends

Both runs start from the same weights (drawn on the host, then copied to the device), see the
same batches (a pure function of seed and step) and the same dropout masks (a hash of
`(seed, i)`, computed bit for bit the same by the CPU and the `dropout_forward` kernel). In fp32
the only difference is the order of the sums (tiles on the device, SIMD panels on the CPU), so
the curves should lie on top of each other: the lower plot shows how far apart they are,
step by step. A bf16 run (on a GPU of compute capability 8.0 or newer) rounds every matmul
operand to 8 significant bits: its curve follows the others, a little apart.'''

loss_cell = '''fig, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
ref = [r for r in runs[0]["log"] if r["split"] == "train"]
ref_loss = np.array([r["loss"] for r in ref])
styles = ["-", "--", ":"]
for i, run_ in enumerate(runs):
    tr = [r for r in run_["log"] if r["split"] == "train"]
    ev = [r for r in run_["log"] if r["split"] == "eval"]
    label = run_["backend"] + (" (EMULATED)" if run_["emulated"] else "")
    axes[0].plot([r["step"] for r in tr], [r["loss"] for r in tr], styles[i % 3], lw=1.5, color=f"C{i}", label=label)
    axes[0].plot([r["step"] for r in ev], [r["val_loss"] for r in ev], "o", color=f"C{i}", ms=6, alpha=0.7)
    if i > 0:
        loss = np.array([r["loss"] for r in tr])
        n = min(len(loss), len(ref_loss))
        axes[1].semilogy(np.arange(1, n + 1), np.abs(loss[:n] - ref_loss[:n]) + 1e-9, styles[i % 3], color=f"C{i}",
                         label=f"|{run_['name']} - cpu|")
        print(f"{run_['name']:10s} largest |loss - cpu loss| over {n} steps: {np.max(np.abs(loss[:n] - ref_loss[:n])):.2e}"
              f"   (final train loss {loss[n - 1]:.4f} vs {ref_loss[n - 1]:.4f})")
axes[0].set_ylabel("training loss (nats/char); dots: val loss"); axes[0].grid(alpha=0.3); axes[0].legend(fontsize=8)
axes[0].set_title("the same run on the cpu backend and on the cuda kernels")
axes[1].set_ylabel("|difference| + 1e-9 (log)"); axes[1].set_xlabel("step"); axes[1].grid(alpha=0.3, which="both")
axes[1].legend(fontsize=8)
plt.tight_layout(); plt.show()

# fp32 on both sides: rounding only. The test suite's bound for 2-4 steps is 1e-4
# (tests/test_gpt_cuda.cpp); over more steps tiny differences may grow, but not to this.
fp32 = next(r for r in runs if r["name"] == "cuda-fp32")
loss = np.array([r["loss"] for r in fp32["log"] if r["split"] == "train"])
gap = np.max(np.abs(loss - ref_loss[:len(loss)]))
assert gap < 1e-2, f"the fp32 cuda run left the cpu run by {gap}: a kernel disagrees with the CPU"'''

speed_md = '''## 2. Tokens per second

Each step logs `tok_s` (tokens in the step / the step's wall-clock time, host side) and `mfu`.
Read the cuda bar **only on a GPU**: on the emulator it is the speed of a CPU pretending to be
one, thread by thread, and the log's MFU is 0 (no peak is measured on the emulator). Even on a
GPU, a model this small is mostly launch overhead and the host's waits (lesson 09, section 10);
the figures that mean something are the nanoGPT config's, below.'''

speed_cell = '''fig, ax = plt.subplots(figsize=(8, 0.6 * len(runs) + 1.5))
names, tok = [], []
for run_ in runs:
    tr = [r for r in run_["log"] if r["split"] == "train"][1:] or [r for r in run_["log"] if r["split"] == "train"]
    names.append(run_["backend"] + ("\\n(EMULATED: CPU time)" if run_["emulated"] else ""))
    tok.append(float(np.median([r["tok_s"] for r in tr])))
    mfu = float(np.median([r["mfu"] for r in tr]))
    print(f"{run_['name']:10s} median {tok[-1]:12,.0f} tokens/s, MFU {100 * mfu:5.1f}%"
          + ("   (EMULATOR: says nothing about a GPU)" if run_["emulated"] else ""))
colors = ["tab:red" if r["emulated"] else "tab:blue" for r in runs]
ax.barh(names, tok, color=colors); ax.set_xscale("log"); ax.invert_yaxis()
ax.set_xlabel("tokens/s (median over steps, log scale)")
ax.set_title("this notebook's runs" + ("" if on_gpu else ": the red bar is the EMULATOR, not a GPU"), fontsize=10)
plt.tight_layout(); plt.show()'''

record_md = '''## 3. Recorded GPU runs

`bash scripts/gpu_gpt.sh`, on a machine with an NVIDIA GPU, trains and benchmarks nanoGPT's
Shakespeare GPU config (`L=6 NH=6 C=384 T=256 B=64`) with our kernels and with PyTorch (eager
and `torch.compile`) on the same GPU, into `docs/benchmarks/gpt-cuda-<gpu>.json` and `.md`, then
trains it for 5000 steps at bf16 and fp32 (logs in `out/gpu-gpt/<precision>/`). Every such record
in the tree is plotted here.'''

record_cell = '''def tokens_per_step(rec):
    c = rec.get("config", {})
    return c.get("batch_size", 0) * c.get("block_size", 0) or None

def bars_of(rec):
    """(label, tokens/s) pairs from a record: rows with a name and tok_s, or ms_per_step."""
    rows = rec.get("rows") or rec.get("results") or []
    out = []
    for r in rows:
        name = r.get("name") or r.get("implementation") or r.get("backend") or "?"
        if r.get("precision") and r["precision"] not in name:
            name += " " + r["precision"]
        tok = r.get("tok_s") or r.get("tokens_per_s")
        if tok is None and r.get("ms_per_step") and tokens_per_step(rec):
            tok = tokens_per_step(rec) / (r["ms_per_step"] / 1e3)
        if tok:
            out.append((name, float(tok)))
    return out

records = sorted(glob.glob(os.path.join(src, "docs", "benchmarks", "gpt-cuda-*.json")))
shown = 0
for path in records:
    with open(path) as f:
        rec = json.load(f)
    if rec.get("emulated"):
        continue
    bars = bars_of(rec)
    if not bars:
        print(f"{os.path.relpath(path, src)}: no tokens/s rows this notebook can read")
        continue
    shown += 1
    device = rec.get("device")
    device = device.get("name", "?") if isinstance(device, dict) else (device or os.path.basename(path)[9:-5])
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(bars) + 1.5))
    ax.barh([b[0] for b in bars], [b[1] for b in bars],
            color=["tab:gray" if "torch" in b[0].lower() else "tab:blue" for b in bars])
    ax.invert_yaxis(); ax.set_xlabel("tokens/s (gray: PyTorch)")
    ax.set_title(f"{device}: {os.path.relpath(path, src)}", fontsize=10)
    plt.tight_layout(); plt.show()
    for name, tok in bars:
        print(f"  {name:32s} {tok:14,.0f} tokens/s")
if not shown:
    print("No GPU training record has been recorded yet (docs/benchmarks/gpt-cuda-<gpu>.json).")
    print("`bash scripts/gpu_gpt.sh` on a machine with an NVIDIA GPU writes one: our kernels vs")
    print("PyTorch eager and torch.compile, tokens/s and MFU. Until then no GPU speed is known.")'''

train_logs_cell = '''# The 5000-step runs of scripts/gpu_gpt.sh (out/gpu-gpt/<precision>/log.jsonl; the table is in
# docs/benchmarks/gpt-cuda-train-<gpu>.md). nanoGPT reaches a best val loss of 1.4697 on an A100.
logs = sorted(glob.glob(os.path.join(src, "out", "gpu-gpt", "*", "log.jsonl")))
if logs:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for i, path in enumerate(logs):
        prec = os.path.basename(os.path.dirname(path))
        log = read_jsonl(path)
        tr = [r for r in log if r["split"] == "train"]
        ev = [r for r in log if r["split"] == "eval" and r["step"] > 0]
        axes[0].plot([r["step"] for r in tr], [r["loss"] for r in tr], color=f"C{i}", lw=0.5, alpha=0.4)
        axes[0].plot([r["step"] for r in ev], [r["val_loss"] for r in ev], "o-", color=f"C{i}", ms=3, label=f"{prec}: val")
        axes[1].plot([r["step"] for r in tr], [r["tok_s"] for r in tr], color=f"C{i}", lw=0.8, label=prec)
        best = min((r["val_loss"] for r in ev), default=float("nan"))
        print(f"{prec:6s} {len(tr)} steps, best val loss {best:.4f}, median {np.median([r['tok_s'] for r in tr]):,.0f} tokens/s, "
              f"median MFU {100 * np.median([r['mfu'] for r in tr]):.1f}%")
    axes[0].axhline(1.4697, color="k", ls=":", lw=1, label="nanoGPT (A100)")
    axes[0].set_ylim(top=3.0); axes[0].set_xlabel("step"); axes[0].set_ylabel("loss"); axes[0].legend(fontsize=8)
    axes[1].set_xlabel("step"); axes[1].set_ylabel("tokens/s"); axes[1].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    plt.tight_layout(); plt.show()
else:
    print("No GPU training run here (out/gpu-gpt/<precision>/log.jsonl, written by `bash scripts/gpu_gpt.sh`).")'''

nb = new_notebook()
nb.cells = [
md('''# Lesson 09, part 2: a training step on the GPU

`nnlab gpt train --backend cuda` trains lesson 08's GPT with every tensor in device memory and
every op a kernel of lesson 09 (the same functions `nnlab cuda bench` validates and times). This
notebook trains the same small model twice, with the same weights, batches and dropout masks:

1. on the **cpu** backend, and on the **cuda** backend in fp32 (and, on a GPU with tensor
   cores, with `--precision auto`: bf16 matmul operands): the loss curves, one on top of the
   other, and their difference step by step;
2. the **tokens per second** of each run;
3. the **recorded GPU runs** of nanoGPT's GPU config against PyTorch, if
   `scripts/gpu_gpt.sh` has written any.

**Without a GPU** (CI, most laptops) the cuda backend runs on the CUDA **emulator**
(`NNLAB_DEVICE=emu`), which is correct but thousands of times slower: the model is then tiny,
the run a few steps, and its speed meaningless. The notebook says so wherever it matters.
Under the test suite (`NNLAB_QUICK=1`) every run is short.'''),
code(setup),
md('''## The device'''),
code(device_cell),
md('''## Train the same model on both backends

`log.jsonl` of each run: one `"split": "train"` record per step (`step`, `loss`, `lr`,
`grad_norm`, `ms`, `tok_s`, `mfu`) and one `"split": "eval"` record per evaluation
(`train_loss`, `val_loss`).'''),
code(train_cell),
md(loss_md),
code(loss_cell),
md(speed_md),
code(speed_cell),
md(record_md),
code(record_cell),
code(train_logs_cell),
md('''## Questions

1. The fp32 curves agree to about 1e-6 at first. Why does the difference grow over the steps,
   and why does it not grow without bound?
2. Set `--dropout 0` in `common` and run again. Does the cpu/cuda gap change? What would it
   mean if the gap were large *only* with dropout?
3. On a GPU: how does the bf16 curve's gap compare with the fp32 one, and with lesson 09's
   tolerance table (section 16)?
4. The tokens/s of the small model on a GPU is far below nanoGPT's config's. Using section 10
   (the host's waits, launches per step), explain why a small model cannot keep a GPU busy.'''),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "09-gpu-training.ipynb"))
