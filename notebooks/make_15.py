#!/usr/bin/env python3
"""Writes notebooks/15-compression.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_15.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)

Lesson 15 (compression that changes the arithmetic): the quality, speed and energy plots of
issue 25, from lesson 15's record docs/benchmarks/lesson15.json (scripts/bench_lesson15.sh writes
it; schema "nnlab-lesson15/1", fields in lessons/15-compression/compression_lesson.h and its
*_part.cpp). When that record is missing the notebook makes one with `lesson15 --json` (--quick
under NNLAB_QUICK=1); NNLAB_LESSON15_JSON names another record. Each idea is first done by hand
in numpy on small synthetic data, then the record's numbers are plotted:
  - the int8 GEMM ladder against the fp32 sgemm, the measured peaks, int8 / fp32 at n = 1024;
  - symmetric per-token int8 and SmoothQuant's s = xmax^a / wmax^(1-a) on an outlier channel,
    the W8A8 error against alpha; the record's W8A8 losses and outlier table;
  - GPTQ's column loop with the Cholesky factor of H^-1 against round-to-nearest at 4 and 3 bits;
    the record's GPTQ rows;
  - BitNet b1.58's absmean ternary rule; the record's three training curves;
  - the int8 KV cache's bytes per token (recomputed for the named models) and loss by context;
  - the energy roofline recomputed from the stated model (Horowitz, ISSCC 2014) and checked
    against the record's, as stacked bars labelled ESTIMATE; the joules per token of lesson 10's
    model (measured or estimated: the record's joules_kind says which).
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import json, os, subprocess, textwrap
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
# Opened in Jupyter from notebooks/, whatever this notebook writes goes to notebooks/out/
# (git ignores it); run_notebook.py runs it in a scratch folder instead.
if os.path.exists("run_notebook.py"):
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
quick = os.environ.get("NNLAB_QUICK") == "1"
# the stand-alone program when it is built, else the front door's subcommand (same flags)
if os.path.exists(os.path.join(bin_dir, "lesson15")):
    lesson15 = [os.path.join(bin_dir, "lesson15")]
else:
    lesson15 = [os.path.join(bin_dir, "nnlab"), "lesson15"]

def print_table(header, rows):
    """Plain aligned columns (no pandas)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))'''

load_cell = '''# Lesson 15's record: docs/benchmarks/lesson15.json, written by
#     scripts/bench_lesson15.sh        (every part at full size, ~15 minutes on 2 idle cores)
# (QUICK=1 scripts/bench_lesson15.sh makes a small one, marked "quick"). NNLAB_LESSON15_JSON
# names another record. With none, the program is run here (--quick under NNLAB_QUICK=1).
record = os.environ.get("NNLAB_LESSON15_JSON", os.path.join(src, "docs", "benchmarks", "lesson15.json"))
if not os.path.exists(record):
    record = os.path.abspath("lesson15.json")
    cmd = lesson15 + (["--quick"] if quick else []) + ["--json", record, "--out-dir", "lesson10-target",
                                                       "--bitnet-dir", "lesson15-bitnet"]
    print("no recorded run: running", " ".join(cmd))
    res = subprocess.run(cmd, capture_output=True, text=True)
    print(res.stdout[-2000:])
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
rec = json.load(open(record))
assert rec["schema"] == "nnlab-lesson15/1", rec.get("schema")
parts = rec["parts"]
m = rec["machine"]
print("record:", record)
print(f"machine: {m['cpu']}, {m['cores']} cores, {m['simd']}, {m['compiler']} {m['flags']}, {m['date']}")
print("energy counters readable:", m["energy"]["readable"], "" if m["energy"]["readable"] else "(" + m["energy"]["reason"][:120] + " ...)")
if rec["quick"]:
    print("QUICK record: small models and short timings, a pipeline check, not a measurement")
print("parts:", ", ".join(parts))'''

int8_cell = '''# The int8 ladder (kernels/int8_gemm.h) against the fp32 sgemm: C (n, n) = A B^T, 2 ops per
# multiply-add. Every int8 rung was checked equal to v1's int32 sums before it was timed.
i8 = parts["int8"]
pk = i8["peaks"]
fig, axes = plt.subplots(1, len(i8["gemm"]), figsize=(5.5 * len(i8["gemm"]), 4), squeeze=False)
for ax, g in zip(axes[0], i8["gemm"]):
    labels = [f"int8 {r['version']}\\n{r['name']}" if r["op"] == "int8_gemm" else "fp32\\nsgemm" for r in g["rows"]]
    vals = [r["gops"] if r["op"] == "int8_gemm" else r["gflops"] for r in g["rows"]]
    colors = ["tab:blue" if r["op"] == "int8_gemm" else "tab:orange" for r in g["rows"]]
    ax.bar(labels, vals, color=colors)
    ax.axhline(pk["int8_all"] / 1e9, ls="--", color="tab:blue", lw=1, label=f"int8 peak ({pk['int8_method']})")
    ax.axhline(pk["fp32_all"] / 1e9, ls="--", color="tab:orange", lw=1, label="fp32 FMA peak")
    ax.set_title(f"n = {g['n']}, {i8['threads']} threads")
    ax.set_ylabel("GOP/s (fp32: GFLOP/s)")
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=7)
fig.suptitle("int8 GEMM ladder vs fp32 sgemm (measured)")
plt.tight_layout(); plt.show()

print(f"peaks: fp32 {pk['fp32_all'] / 1e9:.1f} GFLOP/s, int8 {pk['int8_all'] / 1e9:.1f} GOP/s "
      f"= {pk['int8_all'] / pk['fp32_all']:.2f}x (one thread: {pk['int8_1t'] / pk['fp32_1t']:.2f}x)")
# int8 / fp32 at n = 1024 (a quick record has smaller n only: then its largest)
g = next((g for g in i8["gemm"] if g["n"] == 1024), i8["gemm"][-1])
best_int8 = max(r["gops"] for r in g["rows"] if r["op"] == "int8_gemm")
fp32 = next(r["gflops"] for r in g["rows"] if r["op"] == "sgemm")
# the table's two single measurements, and the goal's ratio: the median of alternating rounds
# (int8 then fp32, fp32 then int8, ...) timed side by side, robust to a noisy machine
rounds = g["int8_over_fp32_rounds"]
assert np.isclose(np.median(rounds), g["int8_over_fp32"], rtol=1e-3), (rounds, g["int8_over_fp32"])
print(f"n = {g['n']}: best int8 {best_int8:.1f} GOP/s / fp32 {fp32:.1f} GFLOP/s = {best_int8 / fp32:.2f}x in the table; "
      f"side by side over {len(rounds)} rounds: median {np.median(rounds):.2f}x, range {min(rounds):.2f}-{max(rounds):.2f}x "
      f"(the goal at n = 1024: >= 2.5x{'' if g['n'] == 1024 else '; this record has no n = 1024'})")

# One token is a matvec: bytes, not arithmetic, set the time (lesson 10's law: bytes / bandwidth)
print(f"\\nmatvec, us per call (the law: weight bytes / {i8['bandwidth_gbs']:.1f} GB/s)")
print_table(["W", "format", "MB", "us", "law us", "law / measured"],
            [[f"{r['rows']}x{r['cols']}", r["format"], f"{r['bytes'] / 1e6:.3g}", f"{r['us']:.1f}", f"{r['law_us']:.1f}",
              f"{100 * r['law_us'] / r['us']:.0f}%"] for r in i8["matvec"]])
if any(r["law_us"] > r["us"] for r in i8["matvec"]):
    print("(above 100%: that matrix stayed in the caches between the timed calls, so DRAM did not bound it)")'''

smooth_cell = '''# W8A8 by hand. Activations: symmetric int8 per token (each row of X its own scale, max |x| / 127).
# Weights: symmetric int8 per output channel (each row of W its own scale).
def quant_rows(A, bits=8):
    qmax = 2 ** (bits - 1) - 1
    s = np.abs(A).max(axis=1, keepdims=True) / qmax
    s[s == 0] = 1.0
    return np.clip(np.round(A / s), -qmax, qmax) * s  # dequantised: what the integer product equals

def rel_err(Y, Yref):
    return np.linalg.norm(Y - Yref) / np.linalg.norm(Yref)

rng = np.random.default_rng(15)
T, C, N = 256, 64, 128                 # tokens, input channels, output channels
X = rng.standard_normal((T, C))
X[:, 7] *= 40.0                        # an outlier channel: large in every token, as in LLMs
W = 0.1 * rng.standard_normal((N, C))
Y = X @ W.T

def smooth_scales(X, W, alpha):
    """SmoothQuant: s_j = max|X_j|^alpha / max|W_j|^(1-alpha) for each input channel j."""
    xmax, wmax = np.abs(X).max(axis=0), np.abs(W).max(axis=0)
    return xmax ** alpha / wmax ** (1 - alpha)

s = smooth_scales(X, W, 0.5)
assert np.allclose((X / s) @ (W * s).T, Y)  # X diag(s)^-1 diag(s) W^T: the same product in exact arithmetic
print(f"no smoothing: W8A8 error {rel_err(quant_rows(X) @ quant_rows(W).T, Y):.4f}, "
      f"weights only int8 {rel_err(X @ quant_rows(W).T, Y):.4f}")

alphas = np.linspace(0, 1, 21)
both, acts, wts = [], [], []
for a in alphas:
    s = smooth_scales(X, W, a)
    Xs, Ws = X / s, W * s
    both.append(rel_err(quant_rows(Xs) @ quant_rows(Ws).T, Y))
    acts.append(rel_err(quant_rows(Xs) @ Ws.T, Y))   # only the activations rounded
    wts.append(rel_err(Xs @ quant_rows(Ws).T, Y))    # only the weights rounded
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(alphas, both, "o-", ms=3, label="W8A8 (both int8)")
ax.plot(alphas, acts, "--", label="activations int8 only")
ax.plot(alphas, wts, ":", label="weights int8 only")
ax.axhline(rel_err(quant_rows(X) @ quant_rows(W).T, Y), color="k", lw=0.8, label="W8A8, no smoothing")
ax.set_yscale("log"); ax.set_xlabel("SmoothQuant alpha"); ax.set_ylabel("relative error of X W^T")
ax.set_title("Synthetic X with one outlier channel: smoothing moves the difficulty into W")
ax.legend(fontsize=7); plt.show()
print(f"best alpha here: {alphas[int(np.argmin(both))]:.2f} (W8A8 error {min(both):.4f})")'''

w8a8_cell = '''# The record: lesson 10's trained model with its Linear layers in W8A8 (gpt/compress.h)
w = parts["w8a8"]
loss = w["loss"]
fp32_loss = next(r["val_loss"] for r in loss if r["what"] == "fp32")
fig, ax = plt.subplots(figsize=(8, 3.8))
vals = [r["val_loss"] for r in loss]
ax.bar([textwrap.fill(r["what"], 16) for r in loss], vals, color="tab:green")
ax.axhline(fp32_loss, color="k", lw=0.8, ls="--", label="fp32")
pad = max(0.002, 0.5 * (max(vals) - min(vals)))
ax.set_ylim(min(vals) - pad, max(vals) + pad)  # the differences are small: zoomed in
ax.set_ylabel("validation loss (nats/char)"); ax.tick_params(axis="x", labelsize=7)
ax.set_title(f"W8A8 on lesson 10's model ({w['params']} parameters, measured)")
ax.legend(fontsize=7); plt.show()
for r in loss:
    print(f"{r['what']:34s} {r['val_loss']:.4f}  ({r['val_loss'] - fp32_loss:+.4f} vs fp32)")
print(f"best alpha: {w['best_alpha']:.2f}")

print("\\nThe outliers of each Linear's input (calibration activations):")
print_table(["layer", "linear", "max/median", "kurtosis", "frac > 6 sigma"],
            [[o["layer"], o["linear"], f"{o['max_over_median']:.2f}", f"{o['kurtosis']:.2f}", f"{o['frac_6sigma']:.4f}"]
             for o in w["outliers"]])
print("\\ndecoding at batch 1:")
print_table(["format", "tokens/s", "weights read per token"],
            [[d["format"], f"{d['tokens_per_s']:.0f}", f"{d['bytes_per_token'] / 1e6:.3g} MB"] for d in w["decode"]])
print(f"W8A8 / weight-only int8 speed: {w['w8a8_over_int8']:.2f}x")'''

gptq_cell = '''# GPTQ by hand on one small layer whose inputs are correlated (a few latent factors + noise).
# The weights are rounded one column at a time; the rounding error of column i is spread over
# the columns not yet rounded, through the Cholesky factor U of H^-1 (H = X^T X / n, damped).
rng = np.random.default_rng(25)
n, d_in, d_out = 2048, 64, 32
Xg = rng.standard_normal((n, 8)) @ rng.standard_normal((8, d_in)) + 0.1 * rng.standard_normal((n, d_in))
Wg = rng.standard_normal((d_out, d_in)) / np.sqrt(d_in)

def row_scales(W, bits):
    """One symmetric scale per output row, from the ORIGINAL weights (fixed before the sweep)."""
    return np.abs(W).max(axis=1) / (2 ** (bits - 1) - 1)

def rtn(W, bits):
    s, qmax = row_scales(W, bits), 2 ** (bits - 1) - 1
    return np.clip(np.round(W / s[:, None]), -qmax, qmax) * s[:, None]

def gptq(W, X, bits, damp=0.01):
    W = W.copy()
    s, qmax = row_scales(W, bits), 2 ** (bits - 1) - 1
    H = X.T @ X / len(X)
    H += damp * np.mean(np.diag(H)) * np.eye(len(H))
    U = np.linalg.cholesky(np.linalg.inv(H)).T      # upper: H^-1 = U^T U
    Q = np.zeros_like(W)
    for i in range(W.shape[1]):
        Q[:, i] = np.clip(np.round(W[:, i] / s), -qmax, qmax) * s
        err = (W[:, i] - Q[:, i]) / U[i, i]
        W[:, i:] -= np.outer(err, U[i, i:])           # column i becomes Q[:, i]; the rest compensate
    return Q

Yg = Xg @ Wg.T
rows = []
for bits in (4, 3):
    e_rtn = rel_err(Xg @ rtn(Wg, bits).T, Yg)
    e_gptq = rel_err(Xg @ gptq(Wg, Xg, bits).T, Yg)
    rows.append([bits, f"{e_rtn:.4f}", f"{e_gptq:.4f}", f"{e_rtn / e_gptq:.2f}x"])
    assert e_gptq < e_rtn, (bits, e_rtn, e_gptq)
print("relative output error |X (W - Q)^T| / |X W^T| on the calibration inputs")
print_table(["bits", "RTN", "GPTQ", "RTN / GPTQ"], rows)'''

gptq_rec_cell = '''# The record: every block Linear of lesson 10's model, RTN against GPTQ (gpt/compress.h, group 32)
gq = parts["gptq"]
print_table(["bits", "method", "val loss", "vs fp32", "seconds"],
            [[r["bits"], r["method"], f"{r['val_loss']:.4f}", f"{r['val_loss'] - gq['fp32_val_loss']:+.4f}",
              f"{r['seconds']:.3g}"] for r in gq["rows"]])
fig, ax = plt.subplots(figsize=(6, 3.5))
bits = sorted({r["bits"] for r in gq["rows"]}, reverse=True)
for k, method in enumerate(("rtn", "gptq")):
    d = [next(r["val_loss"] - gq["fp32_val_loss"] for r in gq["rows"] if r["bits"] == b and r["method"] == method)
         for b in bits]
    ax.bar(np.arange(len(bits)) + 0.38 * k, d, 0.38, label=method.upper())
ax.set_xticks(np.arange(len(bits)) + 0.19); ax.set_xticklabels([f"int{b}" for b in bits])
ax.axhline(0, color="k", lw=0.8)
ax.set_ylabel("validation loss - fp32's"); ax.set_title("RTN vs GPTQ on lesson 10's model (measured)")
ax.legend(fontsize=7); plt.show()'''

bitnet_cell = '''# BitNet b1.58's absmean rule: gamma = mean |W|; W_q = clamp(round(W / gamma), -1, 1) * gamma.
# Training keeps fp32 "latent" weights; the forward uses W_q, and the straight-through estimator
# passes the gradient of W_q to the latents as if the rounding were the identity.
def ternary(W):
    gamma = np.abs(W).mean()
    return np.clip(np.round(W / (gamma + 1e-5)), -1, 1), gamma

Wt = rng.standard_normal((256, 256)) * 0.05
q, gamma = ternary(Wt)
print(f"gamma {gamma:.4f}; weights -1/0/+1: " + " / ".join(f"{np.mean(q == v):.2f}" for v in (-1, 0, 1)))
print(f"relative error of W: {rel_err(q * gamma, Wt):.3f}; 2 bits per weight stored (log2 3 = 1.58 is the bound), "
      f"{32 / 2:.0f}x fewer bytes than fp32")

bn = parts["bitnet"]
fig, ax = plt.subplots(figsize=(8, 4))
for r in bn["runs"]:
    steps = bn["window"] * (np.arange(len(r["curve"])) + 0.5)  # point k: mean of steps [k w, (k+1) w)
    ax.plot(steps, r["curve"], label=f"{r['name']} (C {r['n_embd']}, {r['linear_bytes'] / 1024:.0f} KiB of Linear weights)")
ax.set_xlabel(f"training step (loss averaged over windows of {bn['window']} steps)")
ax.set_ylabel("training loss"); ax.set_title(f"BitNet b1.58 vs fp32, {bn['steps']} steps each (measured)")
ax.legend(fontsize=7); plt.show()
print_table(["run", "C", "ternary", "Linear bytes", "train loss", "val loss", "seconds"],
            [[r["name"], r["n_embd"], r["ternary"], int(r["linear_bytes"]), f"{r['train_loss']:.4f}",
              f"{r['val_loss']:.4f}", f"{r['seconds']:.1f}"] for r in bn["runs"]])'''

kv_cell = '''# The int8 KV cache: k and v of every layer and position in int8, one fp32 scale per head.
# Bytes per token: fp32 = layers x 2 x C x 4; int8 = layers x 2 x (C + 4 heads). Recomputed for
# the models the record names (this model's shape is not in the record: taken as given).
kv = parts["kv"]
shapes = {"GPT-2 124M": (12, 768, 12), "7B (32 layers, C 4096, MHA)": (32, 4096, 32)}  # layers, C, heads
for r in kv["bytes"]:
    if r["model"] in shapes:
        L, Cm, H = shapes[r["model"]]
        assert r["fp32"] == L * 2 * Cm * 4 and r["int8"] == L * 2 * (Cm + 4 * H), r
def size(b):
    return f"{b / 2**20:.3g} MiB" if b < 2**30 else f"{b / 2**30:.3g} GiB"
print_table(["model", "fp32 B/token", "int8 B/token", "fp32 / int8", "context", "cache at context, fp32 -> int8"],
            [[r["model"], int(r["fp32"]), int(r["int8"]), f"{r['fp32'] / r['int8']:.2f}x", r["context"],
              f"{size(r['fp32'] * r['context'])} -> {size(r['int8'] * r['context'])}"]
             for r in kv["bytes"]])

Ts = [r["T"] for r in kv["loss"]]
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.5))
a1.plot(Ts, [r["fp32"] for r in kv["loss"]], "o-", label="fp32 cache")
a1.plot(Ts, [r["int8"] for r in kv["loss"]], "s--", label="int8 cache")
a1.set_xscale("log", base=2); a1.set_xlabel("context T"); a1.set_ylabel("validation loss")
a1.set_title("loss by context (measured)"); a1.legend(fontsize=7)
a2.bar([str(t) for t in Ts], [r["int8"] - r["fp32"] for r in kv["loss"]], color="tab:red")
a2.axhline(0, color="k", lw=0.8)
a2.set_xlabel("context T"); a2.set_ylabel("int8 loss - fp32 loss"); a2.set_title("what the int8 cache costs")
plt.tight_layout(); plt.show()
# the record keeps 6 significant digits: a loss near 2 is known to 1e-5, no finer
for r in kv["loss"]:
    unit = 10.0 ** (np.floor(np.log10(abs(r["fp32"]))) - 5)  # one unit of the 6th digit
    print(f"T = {r['T']:4d}: fp32 {r['fp32']:.5f}, int8 {r['int8']:.5f}, difference {r['int8'] - r['fp32']:+.1e}"
          + ("  (at the record's rounding)" if abs(r["int8"] - r["fp32"]) <= 1.01 * unit else ""))'''

energy_cell = '''# The energy roofline, recomputed from the stated model (kernels/energy.h; M. Horowitz, ISSCC
# 2014, 45 nm): an ESTIMATE, never a measurement. A decoder with P weights at batch 1 reads every
# weight once from DRAM and does (macs per weight) x P multiply-adds per token.
PJ_MAC = {"fp32": 4.6, "bf16": 1.5, "int8": 0.3, "int4": 0.15, "ternary": 0.1}
PJ_DRAM_BYTE = 162.5                                 # 1.3 nJ per 64-bit DRAM read
FORMATS = [  # name, bits per weight (metadata included), multiply-adds per weight, precision
    ("fp32", 32, 1.0, "fp32"), ("bf16", 16, 1.0, "bf16"), ("int8", 8, 1.0, "int8"),
    ("int4", 4.125, 1.0, "int4"),            # 4 bits + a 16-bit scale per 128 weights
    ("ternary", 2, 1.0, "ternary"),          # four weights a byte
    ("sparse24", 9, 0.5, "bf16"),            # 2:4: half the bf16 values + 2-bit indices, half the MACs
]
e = parts["energy"]
P = e["roofline_7b"][0]["bytes_per_token"] / 4     # the record's fp32 row: 4 bytes per weight
print(f"P = {P / 1e9:.3g}e9 weights")
mine = []
for name, bits, macs, prec in FORMATS:
    bytes_tok = P * bits / 8
    fetch = bytes_tok * PJ_DRAM_BYTE * 1e-12
    arith = P * macs * PJ_MAC[prec] * 1e-12
    # batch at which the arithmetic costs as much as the fetch: each byte then serves `batch` tokens
    balance = PJ_DRAM_BYTE / PJ_MAC[prec] * (bits / 8) / macs
    mine.append(dict(format=name, bytes=bytes_tok, fetch=fetch, arith=arith, balance=balance))
for a, r in zip(mine, e["roofline_7b"]):
    assert a["format"] == r["format"], (a["format"], r["format"])
    assert np.isclose(a["bytes"], r["bytes_per_token"], rtol=1e-4), (a, r)
    assert np.isclose(a["fetch"] + a["arith"], r["joules"], rtol=1e-4), (a, r)
    assert np.isclose(a["fetch"] / (a["fetch"] + a["arith"]), r["fetch_share"], rtol=1e-4), (a, r)
    assert np.isclose(a["balance"], r["balance_batch"], rtol=1e-4), (a, r)
print("the record's roofline_7b = the model by hand, every format")
print_table(["format", "GB/token", "fetch J", "arith J", "total J", "fetch share", "batch at balance"],
            [[a["format"], f"{a['bytes'] / 1e9:.3g}", f"{a['fetch']:.3g}", f"{a['arith']:.3g}",
              f"{a['fetch'] + a['arith']:.3g}", f"{100 * a['fetch'] / (a['fetch'] + a['arith']):.1f}%",
              f"{a['balance']:.0f}"] for a in mine])

fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
names = [a["format"] for a in mine]
a1.bar(names, [a["fetch"] for a in mine], label="weight fetch (DRAM)", color="tab:gray")
a1.bar(names, [a["arith"] for a in mine], bottom=[a["fetch"] for a in mine], label="arithmetic", color="tab:red")
for k, a in enumerate(mine):
    a1.text(k, a["fetch"] + a["arith"], f"fetch {100 * a['fetch'] / (a['fetch'] + a['arith']):.1f}%",
            ha="center", va="bottom", fontsize=7)
a1.set_ylabel("joules per token (ESTIMATE)"); a1.legend(fontsize=7)
a1.set_title(f"ESTIMATE: {P / 1e9:.0f}B-weight decoder, batch 1 (Horowitz 45 nm model)", fontsize=9)

rows = e["rows"]
kinds = {r["joules_kind"] for r in rows}
fmt_names = [r["format"] for r in rows]
if kinds == {"estimate"}:
    # the estimate is fetch (bytes x 162.5 pJ) + arithmetic (the rest): show the two
    fetch = [r["bytes_per_token"] * PJ_DRAM_BYTE * 1e-12 for r in rows]
    arith = [r["joules_per_token"] - f for r, f in zip(rows, fetch)]
    assert min(arith) >= 0, arith
    a2.bar(fmt_names, [1e6 * f for f in fetch], label="weight fetch (DRAM)", color="tab:gray")
    a2.bar(fmt_names, [1e6 * x for x in arith], bottom=[1e6 * f for f in fetch], label="arithmetic", color="tab:red")
    a2.legend(fontsize=7)
    label = "ESTIMATE (no energy counter readable here)"
else:
    a2.bar(fmt_names, [1e6 * r["joules_per_token"] for r in rows],
           color=["tab:blue" if r["joules_kind"] == "measured" else "tab:gray" for r in rows])
    label = "MEASURED" if kinds == {"measured"} else "measured (blue) and ESTIMATE (gray)"
a2.set_ylabel("microjoules per token" + (" (ESTIMATE)" if kinds == {"estimate"} else "")); a2.set_title(f"lesson 10's model decoding: {label}", fontsize=9)
plt.tight_layout(); plt.show()
print_table(["format", "MB/token", "tokens/s", "val loss", "J/token", "kind"],
            [[r["format"], f"{r['bytes_per_token'] / 1e6:.3g}", f"{r['tokens_per_s']:.0f}", f"{r['val_loss']:.4f}",
              f"{r['joules_per_token']:.3g}", r["joules_kind"].upper()] for r in rows])'''

nb = new_notebook()
nb.cells = [
    md('''# Lesson 15: compression that changes the arithmetic

Quality, speed and energy of int8, int4, int3 and ternary arithmetic. Each idea is done by hand
in numpy first, on small synthetic data; then the measured numbers of lesson 15's record
(`docs/benchmarks/lesson15.json`, written by `scripts/bench_lesson15.sh`) are plotted.
Run it from `notebooks/` after building (`cmake --build --preset release`). Energy is
*measured* only where an energy counter can be read; otherwise it is an **estimate** from a
stated model, and every such number and plot says so.'''),
    code(setup),
    md('''## The record'''),
    code(load_cell),
    md('''## 1. The int8 GEMM ladder against fp32

AVX-512 VNNI's `vpdpbusd` does 64 int8 multiply-adds per instruction where an fp32 FMA does 16.'''),
    code(int8_cell),
    md('''## 2. W8A8 and SmoothQuant

A few input channels of a transformer's Linear layers are much larger than the rest in every
token. With one int8 scale per token, that channel sets the scale and the others round to a few
levels. SmoothQuant divides channel j of X by s_j and multiplies column j of W by it (the product
is unchanged), moving part of the range into the weights.'''),
    code(smooth_cell),
    code(w8a8_cell),
    md('''## 3. GPTQ against round-to-nearest'''),
    code(gptq_cell),
    code(gptq_rec_cell),
    md('''## 4. BitNet b1.58: ternary weights trained from scratch'''),
    code(bitnet_cell),
    md('''## 5. An int8 KV cache'''),
    code(kv_cell),
    md('''## 6. Energy per token (the roofline is an ESTIMATE)

At batch 1 every weight is fetched from DRAM once per token; a DRAM byte costs about 100 times a
bf16 multiply-add in the model below, so bytes, not arithmetic, set the energy.'''),
    code(energy_cell),
    md('''## Questions

1. In the SmoothQuant cell, make the outlier channel 4x larger: how does the best alpha move, and
   why does the "weights int8 only" curve rise with alpha?
2. In the GPTQ cell, remove the latent factors (make X pure noise): how much does GPTQ still gain
   over RTN? What does that say about where its gain comes from?
3. From the roofline table: at what batch size would int8's arithmetic cost as much energy as
   its weight fetch? Why does a server batch many users' tokens together?'''),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"lesson15-{i:02d}"
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "15-compression.ipynb"))
