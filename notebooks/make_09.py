#!/usr/bin/env python3
"""Writes notebooks/09-cuda.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_09.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)
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
nnlab = os.path.join(bin_dir, "nnlab")
quick = os.environ.get("NNLAB_QUICK") == "1"

def run(*args, tail=3000):
    """Runs `nnlab <args>`, shows the end of its output, fails loudly if it failed."""
    cmd = [nnlab, *map(str, args)]
    print(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-tail:])
    if r.returncode != 0:
        print(r.stderr)
        raise RuntimeError(f"exit status {r.returncode}")
    return r.stdout

def load(path):
    with open(path) as f:
        return json.load(f)

def device_title(rec):
    d = rec["device"]
    if rec["emulated"]:
        return d["name"] + " - EMULATED: CPU times, meaningless for GPU speed"
    return f"{d['name']} (sm {d['sm'] // 10}.{d['sm'] % 10}), {rec['host']['date']}"

def rows_of(rec, op, shape=None):
    """The rows of one op at one shape (default: the shape with the most bytes moved)."""
    rows = [r for r in rec["results"] if r["op"] == op]
    if not rows:
        return []
    if shape is None:
        shape = max(rows, key=lambda r: r["bytes"] or 0)["shape"]
    return [r for r in rows if r["shape"] == shape]

def label(r):
    return r["variant"] + ("*" if r["peer"] else "") + " " + r["name"]
'''

ladder_cell = '''ladder_json = os.path.abspath("lesson09-ladder.json")
fusion_json = os.path.abspath("lesson09-fusion.json")
flags = ["--quick"] if quick else []
run("lesson09", "--part", "info", *flags)
run("lesson09", "--part", "ladder", "--json", ladder_json, *flags)
run("lesson09", "--part", "fusion", "--json", fusion_json, *flags)
ladder, fusion = load(ladder_json), load(fusion_json)
print("device:", device_title(ladder))
if ladder["emulated"]:
    print(ladder["warning"])'''

plot_ladder = '''def plot_ladder(rec, op="matmul"):
    rows = [r for r in rows_of(rec, op) if r["timed"]]
    if not rows:
        print(f"{op}: nothing timed in this record (no versions yet, or none passed validation)")
        return
    names = [label(r) for r in rows]
    ms = [r["median_ms"] for r in rows]
    rate = [r["gflops"] if r["flops"] else r["gbs"] for r in rows]
    unit = "GFLOP/s" if rows[0]["flops"] else "GB/s"
    colors = ["tab:gray" if r["peer"] else "tab:blue" for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * len(rows) + 1.8))
    axes[0].barh(names, ms, color=colors)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("ms (median, log scale)")
    axes[1].barh(names, rate, color=colors)
    axes[1].set_xlabel(unit + " (* = peer)")
    for ax in axes:
        ax.invert_yaxis()
    fig.suptitle(f"{op} ladder at {rows[0]['shape']}: {device_title(rec)}", fontsize=10)
    fig.tight_layout()
    plt.show()
    for r in rows:
        ratio = f", {r['vs_peer']:.2f}x {r['peer_variant']}" if r["vs_peer"] and not r["peer"] else ""
        print(f"{label(r):32s} {r['median_ms']:10.4f} ms  {r['gflops'] if r['flops'] else r['gbs']:9.1f} {unit}{ratio}")

plot_ladder(ladder)'''

plot_fusion = '''FUSION_OPS = ["cos2", "bias_gelu", "residual_layernorm", "crossentropy", "attention"]

def plot_fusion(rec, what="both"):
    """Per op: the bytes each version must move (device-independent) and its time."""
    ops = [op for op in FUSION_OPS if rows_of(rec, op)]
    if not ops:
        print("no fusion results in this record (no versions written yet?)")
        return
    cols = 2 if what == "both" else 1
    fig, axes = plt.subplots(len(ops), cols, figsize=(6 * cols, 2.2 * len(ops) + 0.8), squeeze=False)
    for i, op in enumerate(ops):
        rows = [r for r in rows_of(rec, op) if not r["peer"]]
        names = [r["variant"] + " " + r["name"] for r in rows]
        ax = axes[i][0]
        ax.barh(names, [r["bytes"] / 1e6 for r in rows], color="tab:green")
        ax.set_title(f"{op} {rows[0]['shape']}: bytes moved (any device)", fontsize=9)
        ax.set_xlabel("MB")
        ax.invert_yaxis()
        if what == "both":
            ax = axes[i][1]
            timed = [r for r in rows if r["timed"]]
            ax.barh([r["variant"] + " " + r["name"] for r in timed], [r["median_ms"] for r in timed],
                    color="tab:red" if rec["emulated"] else "tab:blue")
            ax.set_title(f"{op}: ms" + (" (EMULATOR CPU time)" if rec["emulated"] else ""), fontsize=9)
            ax.set_xlabel("ms (median)")
            ax.invert_yaxis()
    fig.suptitle(device_title(rec), fontsize=10)
    fig.tight_layout()
    plt.show()

plot_fusion(fusion)'''

gpu_cell = '''# QUICK=1 records (test sizes, a pipeline check) are not benchmarks: left out.
records = sorted(p for p in glob.glob(os.path.join(src, "docs", "benchmarks", "cuda-*.json"))
                 if not p.endswith("-quick.json"))
gpu_records = [(p, load(p)) for p in records]
gpu_records = [(p, rec) for p, rec in gpu_records if not rec["emulated"]]
if gpu_records:
    for path, rec in gpu_records:
        print(f"{os.path.relpath(path, src)}: {device_title(rec)}")
        print(f"  copy {rec['ceilings']['copy_gbs']:.0f} GB/s, FP32 FMA {rec['ceilings']['fma_gflops']:.0f} GFLOP/s")
        plot_ladder(rec)
        plot_fusion(rec)
else:
    print("No GPU record yet (docs/benchmarks/cuda-*.json from `bash scripts/gpu_bench.sh`).")
    print("Every time above is a CPU time of the emulator: meaningless for GPU speed.")
    print("What holds on any device is the traffic each version must move:")
    plot_fusion(fusion, what="bytes")'''

goals_cell = '''for path, rec in gpu_records:
    r = subprocess.run([nnlab, "cuda", "goals", "--json", path], capture_output=True, text=True)
    print(r.stdout + r.stderr)
if not gpu_records:
    print("(no GPU record: no goals to judge)")'''

nb = new_notebook()
nb.cells = [
md('''# Lesson 09: CUDA

This notebook runs lesson 09's two measuring parts and plots what they recorded
(`nnlab lesson09 --part ladder|fusion --json FILE`, the GPU harness's record,
kernels/cuda/bench/run.h):

1. **the matmul ladder**: every version, validated against a CPU reference, then timed with
   CUDA events: time and GFLOP/s per rung, next to cuBLAS on a GPU;
2. **fusion**: cos2, bias + gelu, residual + layernorm, cross-entropy and attention, each
   unfused vs fused: the bytes each version must move, and its time;
3. **a GPU record**, if `bash scripts/gpu_bench.sh` has written one to
   `docs/benchmarks/cuda-<gpu>.json`, with the issue's goals judged from it.

Without a GPU (CI, most laptops) the kernels run through the **emulator**: the same `.cu`
source on the CPU. Validation means what it means on a GPU, and the bytes moved are the
algorithm's; but every time is a CPU time of the emulator and says nothing about a GPU.
Under the test suite (`NNLAB_QUICK=1`) each part runs at the ops' smallest test sizes.'''),
code(setup),
md('''## Run the parts'''),
code(ladder_cell),
md('''## The matmul ladder

Each bar is one rung (`*` marks a peer such as cuBLAS). On a GPU read the right plot against
the FP32 peak and cuBLAS; on the emulator, read neither: the emulator runs every thread in
turn, so a version that does less work per thread but launches more threads can look slower.'''),
code(plot_ladder),
md('''## Fusion: the same math in fewer trips to memory

Left: bytes each version must move (its compulsory traffic, extra trips of unfused versions
included). These hold on any GPU: a memory-bound kernel's time is close to bytes / bandwidth,
so the ratio of the bars is the speed-up to expect. Right: the measured time.'''),
code(plot_fusion),
md('''## A real GPU

`bash scripts/gpu_bench.sh` on a machine with a GPU validates every version there, times them,
and writes `docs/benchmarks/cuda-<gpu>.json` and `.md`. If such a record is in the tree, it is
plotted here with its device in every title.'''),
code(gpu_cell),
code(goals_cell),
md('''## Questions

1. In the fusion plots, the unfused cos2 moves twice the bytes of the fused one. On a GPU its
   time is about twice as long; why can the emulator's times not show that?
2. Attention's unfused version keeps a (B, NH, T, T) score matrix. How many bytes is that at
   B=8, NH=12, T=4096? How does the fused version avoid it, and what does it recompute instead?
3. Which rung of the matmul ladder gives the biggest step, and which resource (global memory
   traffic, shared memory, registers, instruction issue) did it stop wasting?
4. The copy bandwidth is the roof for memory-bound kernels here. Why is it a better ceiling
   than the number on the GPU's datasheet?'''),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "09-cuda.ipynb"))
