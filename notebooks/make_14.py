#!/usr/bin/env python3
"""Writes notebooks/14-distributed.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_14.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)

Lesson 14 (beyond one machine):
  - the ring all-reduce on N simulated ranks in numpy: reduce-scatter, all-gather, the bytes
    each rank sends, checked against the plain sum (exercise 31's step, all of them);
  - ZeRO-1's shard bounds and the moments per rank (exercise 32);
  - `lesson14 --json` (every part; --quick under NNLAB_QUICK=1): the all-reduce times with the
    latency-bandwidth fit redone here by least squares, the scaling runs (tokens/s, the step's
    compute, wait and all-reduce), recomputation's memory against time, and the model's
    predictions for N ranks on named links, recomputed by hand from the formula and compared
    with the program's.
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import json, os, subprocess
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
if os.path.exists("run_notebook.py"):  # opened from notebooks/: write into notebooks/out/
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
quick = os.environ.get("NNLAB_QUICK") == "1"
nnlab = os.path.join(bin_dir, "nnlab")
lesson14 = [os.path.join(bin_dir, "lesson14")] if os.path.exists(os.path.join(bin_dir, "lesson14")) else [nnlab, "lesson14"]'''

ring = '''# The ring all-reduce on N ranks, each rank's buffer a numpy array. Chunk c of rank r is
# buf[r][bounds[c]:bounds[c+1]]; the first n % N chunks hold one float more.
def bounds(n, N):
    sizes = [n // N + (1 if c < n % N else 0) for c in range(N)]
    return np.concatenate([[0], np.cumsum(sizes)])

def ring_allreduce(bufs):
    N, n = len(bufs), len(bufs[0])
    b = bounds(n, N)
    chunk = lambda r, c: slice(b[c % N], b[c % N + 1])
    sent = np.zeros(N)
    # reduce-scatter: at step s rank r sends chunk (r - s) to r + 1, which adds it into its copy
    for s in range(N - 1):
        msgs = [(r, (r - s) % N, bufs[r][chunk(r, r - s)].copy()) for r in range(N)]  # all send at once
        for r, c, data in msgs:
            bufs[(r + 1) % N][chunk(0, c)] += data
            sent[r] += data.nbytes
    # now rank r holds the full sum of chunk (r + 1) % N; all-gather: pass the sums on, copied
    for s in range(N - 1):
        msgs = [(r, (r + 1 - s) % N, bufs[r][chunk(r, r + 1 - s)].copy()) for r in range(N)]
        for r, c, data in msgs:
            bufs[(r + 1) % N][chunk(0, c)] = data
            sent[r] += data.nbytes
    return sent

rng = np.random.default_rng(14)
for N in (2, 3, 5, 8):
    n = 1000
    bufs = [rng.standard_normal(n).astype(np.float32) for _ in range(N)]
    want = np.sum(np.array(bufs, dtype=np.float64), axis=0)
    sent = ring_allreduce(bufs)
    same = all(np.array_equal(bufs[0], x) for x in bufs)
    print(f"N={N}: max |ring - sum| {np.max(np.abs(bufs[0] - want)):.2e}, every rank the same bits: {same}, "
          f"each rank sent {sent.max() / (4 * n):.3f} buffers (2 (N-1)/N = {2 * (N - 1) / N:.3f})")
    assert same and np.max(np.abs(bufs[0] - want)) < 1e-4'''

zero = '''# ZeRO-1: rank r's moments cover the chunk the reduce-scatter left summed on it, (r + 1) % N
P = 809856  # nanoGPT's CPU configuration's parameters (lesson 14's zero part)
for N in (1, 2, 3, 4, 8):
    b = bounds(P, N)
    sizes = [b[(r + 1) % N + 1] - b[(r + 1) % N] for r in range(N)]
    print(f"N={N}: moments per rank {8 * max(sizes) / 1e6:.3f} MB (8 P / N = {8 * P / N / 1e6:.3f} MB), "
          f"all parameters covered once: {sum(sizes) == P}")'''

run_cell = '''out_json = "lesson14.json"
cmd = lesson14 + (["--quick"] if quick else []) + ["--json", out_json, "--out-dir", "lesson14-runs"]
print(" ".join(cmd))
res = subprocess.run(cmd, capture_output=True, text=True)
print(res.stdout[-3000:])
assert res.returncode == 0, res.stdout + res.stderr
rec = json.load(open(out_json))
assert rec["schema"] == "nnlab-lesson14/1"
parts = rec["parts"]
print("parts measured:", ", ".join(parts))'''

link_cell = '''# The latency-bandwidth fit, redone here: t = x / bw + y * lat with x = 2 (N-1)/N bytes and
# y = 2 (N-1), least squares on the RELATIVE error (each row divided by t), as gpt/plan.h does.
link = parts["link"]
if "transports" not in link:
    print("skipped:", link.get("skipped"))
else:
    fig, ax = plt.subplots(figsize=(7, 4))
    for t in link["transports"]:
        b = np.array([s["bytes"] for s in t["sizes"]]); ms = np.array([s["ring_ms"] for s in t["sizes"]])
        x, y, tt = 2 * (2 - 1) / 2 * b, np.full_like(b, 2.0), ms / 1e3
        A = np.stack([x / tt, y / tt], axis=1)
        inv_bw, lat = np.linalg.lstsq(A, np.ones_like(tt), rcond=None)[0]
        print(f"{t['transport']:12s} here: latency {lat * 1e6:7.2f} us, bandwidth {1 / inv_bw / 1e9:6.2f} GB/s;"
              f"  the program: {t['latency_s'] * 1e6:7.2f} us, {t['bandwidth_Bps'] / 1e9:6.2f} GB/s")
        ax.loglog(b, ms, "o", label=t["transport"] + " measured")
        ax.loglog(b, 1e3 * (x * inv_bw + y * max(lat, 0)), "-", lw=1, label=t["transport"] + " fit")
    ax.set_xlabel("bytes"); ax.set_ylabel("ms"); ax.legend(fontsize=7); plt.show()'''

scaling_cell = '''s = parts["scaling"]
runs = s["runs"]
fig, ax = plt.subplots(figsize=(9, 3.5))
xs = np.arange(len(runs))
compute = [r["ms"] - r["wait_ms"] - r["comm_ms"] for r in runs]
ax.bar(xs, compute, label="compute", color="0.6")
ax.bar(xs, [r["wait_ms"] for r in runs], bottom=compute, label="wait", color="tab:orange")
ax.bar(xs, [r["comm_ms"] for r in runs], bottom=[r["ms"] - r["comm_ms"] for r in runs], label="all-reduce", color="tab:red")
ax.set_xticks(xs); ax.set_xticklabels([r["name"].replace(", ", "\\n") for r in runs], fontsize=7)
ax.set_ylabel("ms per step"); ax.legend(fontsize=7); plt.show()
for r in runs:
    print(f"{r['name']:36s} {r['tok_s']:9.0f} tok/s")
if "efficiency_vs_1x2" in s:
    print(f"2 ranks x 1 thread / 1 rank x 2 threads: {100 * s['efficiency_vs_1x2']:.0f}% (goal 85%)"
          + ("  (--quick: a few steps, not a measurement)" if quick else ""))'''

predict_cell = '''# The prediction by hand: step = compute + 2 (N-1)/N grad_bytes / bw + 2 (N-1) latency,
# speed-up = N compute / step. Compare with the program's numbers for each case and link.
pr = parts["predict"]
for case in pr["cases"]:
    for link in case["links"]:
        mine = []
        for N in pr["ranks"]:
            comm = 0 if N == 1 else 2 * (N - 1) / N * case["grad_bytes"] / link["bandwidth_Bps"] + 2 * (N - 1) * link["latency_s"]
            mine.append(N * case["compute_s"] / (case["compute_s"] + comm))
        assert np.allclose(mine, link["speedup"], rtol=1e-3), (case["name"], link["link"], mine, link["speedup"])
    print(f"{case['name']}: the program's predictions = the formula by hand, for every link and N")
fig, axes = plt.subplots(1, len(pr["cases"]), figsize=(6 * len(pr["cases"]), 3.5), squeeze=False)
for ax, case in zip(axes[0], pr["cases"]):
    ax.loglog(pr["ranks"], pr["ranks"], "k--", lw=0.8, label="ideal")
    for link in case["links"]:
        ax.loglog(pr["ranks"], link["speedup"], "o-", ms=3, label=link["link"])
    ax.set_title(case["name"], fontsize=8); ax.set_xlabel("N"); ax.legend(fontsize=7)
plt.show()'''

recompute_cell = '''rows = parts["recompute"]["rows"]
for r in rows:
    print(f"L={r['layers']:2d} {'recompute' if r['recompute'] else 'store':9s} "
          f"{r['activation_bytes'] / 1e6:8.2f} MB {r['ms']:8.2f} ms/step")'''

nb = new_notebook()
nb.cells = [
    md('''# Lesson 14: beyond one machine

The ring all-reduce by hand, ZeRO's shards, then lesson 14's program: the link fitted, the
trainer on ranks, recomputation, and the model's predictions checked against the formula.
Run it from `notebooks/` after building (`cmake --build --preset release`); with
`NNLAB_QUICK=1` the program's parts are short (and their timings are not measurements).'''),
    code(setup),
    md('''## The ring all-reduce on N simulated ranks'''),
    code(ring),
    md('''## ZeRO-1: who holds which moments'''),
    code(zero),
    md('''## Lesson 14's parts'''),
    code(run_cell),
    md('''## The link: latency and bandwidth'''),
    code(link_cell),
    md('''## The trainer on 1 and 2 ranks'''),
    code(scaling_cell),
    md('''## Recomputation: memory against time'''),
    code(recompute_cell),
    md('''## Extrapolation: N ranks on named links'''),
    code(predict_cell),
    md('''## Questions

1. In the ring cell, make one rank's buffer 10x larger than the others' values: are the ranks
   still bit-identical? Why does that matter more than being equal to the exact sum?
2. Fit the link on the three largest sizes only, then on the three smallest: which parameter
   does each end determine?
3. Double `compute_s` in the prediction cell: at which N does 10 Gb/s Ethernet reach 50%
   efficiency now?'''),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"lesson14-{i:02d}"
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "14-distributed.ipynb"))
