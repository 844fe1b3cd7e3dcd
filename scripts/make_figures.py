#!/usr/bin/python3
"""Renders the PNG figures the lesson texts show, into docs/figures/lessonNN-<name>.png.

    /usr/bin/python3 scripts/make_figures.py                 # every figure, full runs
    /usr/bin/python3 scripts/make_figures.py --only lesson03-ladder
    /usr/bin/python3 scripts/make_figures.py --quick         # short runs; titles say "quick run"
    /usr/bin/python3 scripts/make_figures.py --check         # what ctest runs (no plotting)
    /usr/bin/python3 scripts/make_figures.py --list

Two kinds of source, and every figure's title names its own:
- a measured record committed in docs/benchmarks/ (the lesson 03 ladder, lesson 10's parts,
  ...): the figure plots what the record says, with the machine the record names;
- a run of a program (`nnlab lesson01 --csv ...`, `nnlab lesson07 --out-dir ...`), where no
  record exists: the script runs it under `nice -n 19` into --runs DIR (default
  out/figures-runs) and plots what it wrote. A run already in --runs DIR is reused when it was
  made in the same mode (full or quick); `--rerun` makes it again.

Figures made with --quick say "QUICK RUN" in their title and go to RUNS/figures/, not
docs/figures/: they check the pipeline, they are not what the lesson texts show. The texts embed
full-run figures only.

Deterministic output: fixed figure sizes and dpi, the Agg backend, and no "Software" or date
entry in the PNG metadata, so an unchanged source gives the same bytes with the same matplotlib.
"""
import argparse
import csv
import glob
import json
import os
import re
import struct
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "docs", "benchmarks")
OUT = os.path.join(REPO, "docs", "figures")
DPI = 110
MAX_BYTES = 150 * 1024

# Set by main(): where the programs live, where their runs go, quick or full.
CFG = {"bin": os.path.join(REPO, "build", "release", "bin"),
       "runs": os.path.join(REPO, "out", "figures-runs"), "quick": False, "rerun": False,
       "out": None}


# ------------------------------------------------------------------------------------------
# helpers
def plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as p
    p.rcParams.update({"font.size": 8, "axes.titlesize": 9, "figure.titlesize": 10,
                       "svg.hashsalt": "nnlab", "path.simplify": True})
    return p


def rel(path):
    return os.path.relpath(path, REPO)


def load_json(name):
    with open(os.path.join(BENCH, name)) as f:
        return json.load(f)


def read_md(name):
    with open(os.path.join(BENCH, name)) as f:
        return f.read()


def machine(rec):
    """One line naming the machine a timing record was measured on."""
    m = rec.get("machine") or rec.get("host") or {}
    return f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('date', '?')}"


def md_machine(name):
    """'AMD EPYC, 2 cores, 2026-11-21' from a Markdown record's "- machine:" and "Produced by ...
    on DATE" lines (the records in docs/benchmarks/*.md all have both)."""
    text = read_md(name)
    m = re.search(r"^- machine: ([^,\n]+, [^,\n]+)", text, re.M)
    d = re.search(r"^Produced by .* on (\d{4}-\d{2}-\d{2})", text, re.M)
    return f"{m.group(1) if m else '?'}, {d.group(1) if d else '?'}"


def mode_tag():
    return "\n[QUICK RUN: not the lesson's figure]" if CFG["quick"] else ""


def save(fig, name, source):
    """Writes docs/figures/<name>.png with a source line at the bottom; returns the path."""
    fig.text(0.01, 0.005, "source: " + source, fontsize=6.5, color="0.35", ha="left", va="bottom")
    out = CFG["out"] or (os.path.join(CFG["runs"], "figures") if CFG["quick"] else OUT)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name + ".png")
    # metadata: matplotlib writes "Software: matplotlib version..." by default; None drops it,
    # so the bytes depend on the data and the plotting code only.
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt().close(fig)
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise SystemExit(f"{rel(path)} is {size} bytes, more than {MAX_BYTES}: simplify the figure")
    print(f"wrote {rel(path)} ({size // 1024} KB)")
    return path


def run_program(key, args, outputs):
    """Runs `nnlab <args>` (nice'd) into runs/<key>/ unless an earlier run of the same mode left
    all of `outputs` there. Returns the run directory. Fails loudly with the program's output."""
    d = os.path.join(CFG["runs"], key)
    mode = "quick" if CFG["quick"] else "full"
    stamp = os.path.join(d, "mode.txt")
    have = all(os.path.exists(os.path.join(d, o)) for o in outputs)
    if have and not CFG["rerun"] and os.path.exists(stamp) and open(stamp).read().strip() == mode:
        return d
    os.makedirs(d, exist_ok=True)
    if os.path.exists(stamp):
        os.remove(stamp)
    cmd = ["nice", "-n", "19", os.path.join(CFG["bin"], "nnlab")] + args
    print("running (" + mode + "): " + " ".join(cmd), flush=True)
    with open(os.path.join(d, "stdout.txt"), "w") as log:
        r = subprocess.run(cmd, cwd=d, stdout=log, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = open(os.path.join(d, "stdout.txt")).read()[-2000:]
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{tail}")
    missing = [o for o in outputs if not os.path.exists(os.path.join(d, o))]
    if missing:
        raise SystemExit(f"{' '.join(cmd)} succeeded but wrote no {missing} in {d}")
    with open(stamp, "w") as f:
        f.write(mode + "\n")
    return d


def shakespeare():
    """Tiny Shakespeare where the programs look for it (data/, ../shared/data, ../../shared/data
    from the repository), as an absolute path: the runs happen in their own folder, where the
    programs' relative search would miss it and fall back to the licence texts. None if absent."""
    for d in ("data", os.path.join("..", "shared", "data"), os.path.join("..", "..", "shared", "data")):
        for name in ("tinyshakespeare.txt", os.path.join("tinyshakespeare", "input.txt")):
            path = os.path.normpath(os.path.join(REPO, d, name))
            if os.path.exists(path):
                return path
    return None


def corpus_args(flag):
    path = shakespeare()
    if path is None:
        raise SystemExit("Tiny Shakespeare not found (python3 scripts/fetch_data.py tinyshakespeare): "
                         "the lesson figures are made on it")
    return [flag, path]


def md_table(text, header_start):
    """Rows (lists of cells) of the markdown table whose header line starts with header_start."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise SystemExit(f"no table starting {header_start!r} in the record")


def num(cell):
    """'89.56%' -> 89.56, '3.3 s' -> 3.3, '27.2 ms' -> 27.2."""
    return float(re.match(r"[-+0-9.eE]+", cell.strip()).group(0))


# ------------------------------------------------------------------------------------------
# lesson 01: runs of `nnlab lesson01 --csv --grid`
def lesson01_args():
    return ["lesson01", "--csv", "curves.csv", "--grid", "grid.csv"] + \
        (["--steps", "500", "--seeds", "2"] if CFG["quick"] else [])


def fig_lesson01_curves():
    d = run_program("lesson01", lesson01_args(), ["curves.csv", "grid.csv"])
    curves = {}
    with open(os.path.join(d, "curves.csv")) as f:
        for r in csv.DictReader(f):
            curves.setdefault(r["method"], ([], []))
            curves[r["method"]][0].append(int(r["evaluations"]))
            curves[r["method"]][1].append(float(r["loss"]))
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    for m, color in (("nudge", "tab:orange"), ("gradient", "tab:blue")):
        if m in curves:
            ax.plot(*curves[m], label=m, color=color, lw=1.2)
    ax.set_xlabel("loss evaluations (the work both methods are charged for)")
    ax.set_ylabel("mean squared error on XOR")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Lesson 01: random nudges vs the gradient, same budget of loss evaluations" + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson01-nudge-vs-gradient",
                "nnlab lesson01 --csv curves.csv --grid grid.csv (seed 11, default steps)")


def fig_lesson01_boundaries():
    d = run_program("lesson01", lesson01_args(), ["curves.csv", "grid.csv"])
    import numpy as np
    nets = {}
    with open(os.path.join(d, "grid.csv")) as f:
        for r in csv.DictReader(f):
            nets.setdefault(r["network"], []).append((float(r["x1"]), float(r["x2"]), float(r["output"])))
    p = plt()
    fig, axes = p.subplots(1, len(nets), figsize=(3.0 * len(nets), 3.3), squeeze=False)
    for ax, (name, pts) in zip(axes[0], nets.items()):
        a = np.array(pts)
        xs, ys = np.unique(a[:, 0]), np.unique(a[:, 1])
        z = np.full((len(ys), len(xs)), np.nan)
        for x1, x2, o in pts:
            z[np.searchsorted(ys, x2), np.searchsorted(xs, x1)] = o
        im = ax.imshow(z, origin="lower", extent=(xs[0], xs[-1], ys[0], ys[-1]),
                       vmin=0, vmax=1, cmap="coolwarm")
        ax.contour(xs, ys, z, levels=[0.5], colors="k", linewidths=1)
        for (x1, x2), t in (((0, 0), 0), ((0, 1), 1), ((1, 0), 1), ((1, 1), 0)):
            ax.scatter([x1], [x2], c="white" if t == 0 else "black", edgecolors="k", s=40, zorder=3)
        ax.set_title(name.replace("_", "-") + " network")
        ax.set_xlabel("x1")
        ax.set_ylabel("x2")
    fig.subplots_adjust(left=0.06, right=0.88, bottom=0.2, top=0.8, wspace=0.35)
    fig.colorbar(im, cax=fig.add_axes((0.91, 0.2, 0.015, 0.6)), label="output")
    fig.suptitle("Lesson 01: XOR decision boundaries (black line: output 0.5; dots: the 4 inputs, "
                 "black = target 1)" + mode_tag())
    return save(fig, "lesson01-xor-boundaries", "nnlab lesson01 --grid grid.csv (41x41 grid, seed 11)")


# ------------------------------------------------------------------------------------------
# lesson 02: the record's per-epoch table (a full default run)
def fig_lesson02_curves():
    rows = md_table(read_md("lesson02-mlp.md"), "| epoch |")
    ep = [int(r[0]) for r in rows]
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(8, 3.3))
    a1.plot(ep, [num(r[1]) for r in rows], "o-", label="train", ms=3)
    a1.plot(ep, [num(r[3]) for r in rows], "o-", label="test", ms=3)
    a1.set_ylabel("cross-entropy loss")
    a2.plot(ep, [num(r[2]) for r in rows], "o-", label="train", ms=3)
    a2.plot(ep, [num(r[4]) for r in rows], "o-", label="test", ms=3)
    a2.set_ylabel("accuracy (%)")
    for a in (a1, a2):
        a.set_xlabel("epoch")
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle("Lesson 02: MLP 784-256-128-10 on Fashion-MNIST, default run (15 epochs)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson02-training-curves",
                f"docs/benchmarks/lesson02-mlp.md (nnlab lesson02 --part train, seed 42; {md_machine('lesson02-mlp.md')})")


# ------------------------------------------------------------------------------------------
# lesson 03: docs/benchmarks/lesson03-{matmul,fusion,layers}.json
def fig_lesson03_ladder():
    rec = load_json("lesson03-matmul.json")
    res = [r for r in rec["results"] if r["op"] == "matmul"]
    shapes = list(dict.fromkeys(r["shape"] for r in res))
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(9, 3.8), sharey=True)
    for ax, th in zip(axes, (1, 2)):
        for s, marker in zip(shapes, "osD^"):
            rows = [r for r in res if r["shape"] == s and r["threads"] == th and r["timed"]]
            ax.plot([r["variant"] for r in rows], [r["gflops"] for r in rows], marker + "-", label=s, ms=4)
        c = rec["ceilings"]["gflops_1t" if th == 1 else "gflops_all"]
        ax.axhline(c, color="k", ls="--", lw=0.8)
        ax.text(0, c * 1.08, f"FMA peak, {th} thread{'s' * (th > 1)}: {c:.0f} GFLOP/s", fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{th} thread{'s' * (th > 1)}")
        ax.set_xlabel("rung (openblas = the peer)")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("GFLOP/s (log)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Lesson 03: the matmul ladder v1..v6 against OpenBLAS (v1 not timed at 2048: too slow)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson03-ladder",
                f"docs/benchmarks/lesson03-matmul.json (nnlab lesson03 --part ladder; {machine(rec)})")


def fig_lesson03_roofline():
    import numpy as np
    rec = load_json("lesson03-matmul.json")
    fus = load_json("lesson03-fusion.json")
    c = rec["ceilings"]
    p = plt()
    fig, ax = p.subplots(figsize=(7.5, 4.2))
    x = np.logspace(-2, 3, 200)
    for peak, bw, ls, lab in ((c["gflops_1t"], c["gbs_1t"], "--", "1 thread"),
                              (c["gflops_all"], c["gbs_all"], "-", f"{c['threads_all']} threads")):
        ax.plot(x, np.minimum(peak, bw * x), "k" + ls, lw=1,
                label=f"roof, {lab}: {peak:.0f} GFLOP/s, {bw:.1f} GB/s")
    best = {}
    for r in rec["results"]:
        if r["timed"] and r["op"] == "matmul":
            k = (r["variant"], r["shape"])
            if k not in best or r["gflops"] > best[k]["gflops"]:
                best[k] = r
    for v, color in zip(["v1", "v2", "v3", "v4", "v5", "v6", "openblas"], p.cm.viridis(np.linspace(0, 0.95, 7))):
        pts = [r for (vv, _), r in best.items() if vv == v]
        ax.scatter([r["intensity"] for r in pts], [r["gflops"] for r in pts], color=color, s=18,
                   label=f"matmul {v}", zorder=3)
    ln = [r for r in fus["results"] if r["op"] == "layernorm" and r["timed"] and r["intensity"] > 0]
    ax.scatter([r["intensity"] for r in ln], [r["gflops"] for r in ln], marker="x", color="tab:red",
               s=20, label="layernorm v1..v3 (lesson03-fusion.json)", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte of compulsory traffic)")
    ax.set_ylabel("GFLOP/s")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6.5, loc="lower right", ncol=2)
    ax.set_title("Lesson 03: the roofline with the measured ceilings; best of 1 and 2 threads per point")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson03-roofline",
                f"docs/benchmarks/lesson03-matmul.json, lesson03-fusion.json (--part ceilings, ladder, fusion; {machine(rec)})")


def _elements(shape):
    m = re.match(r"n=(\d+)([KM]?)", shape)
    return int(m.group(1)) * {"": 1, "K": 1024, "M": 1024 * 1024}[m.group(2)]


def fig_lesson03_fusion():
    rec = load_json("lesson03-fusion.json")
    rows = [r for r in rec["results"] if r["op"] == "cos2" and r["timed"] and not r["peer"]]
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, th in zip(axes, (1, 2)):
        for v in dict.fromkeys(r["variant"] for r in rows):
            pts = sorted((_elements(r["shape"]), r) for r in rows if r["variant"] == v and r["threads"] == th)
            ax.plot([n for n, _ in pts], [r["median_s"] / n * 1e9 for n, r in pts], "o-", ms=3,
                    label=f"{v} {pts[0][1]['name']}")
        ax.set_xscale("log", base=2)
        ax.set_title(f"{th} thread{'s' * (th > 1)}")
        ax.set_xlabel("elements n (4 bytes each; the last level cache is 32 MiB)")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("ns per element (median)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Lesson 03: cos2, y = cos(cos(x)), unfused (two passes) vs fused (one), in and out of cache")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson03-fusion",
                f"docs/benchmarks/lesson03-fusion.json (nnlab lesson03 --part fusion; {machine(rec)})")


def fig_lesson03_layers():
    import numpy as np
    rec = load_json("lesson03-layers.json")
    res = [r for r in rec["results"] if r["timed"]]
    shapes = list(dict.fromkeys(r["shape"] for r in res))
    variants = list(dict.fromkeys(r["variant"] for r in res))
    p = plt()
    fig, ax = p.subplots(figsize=(8.5, 3.8))
    w = 0.8 / len(variants)
    for i, v in enumerate(variants):
        ys = []
        for s in shapes:
            g = [r["gflops"] for r in res if r["variant"] == v and r["shape"] == s]
            ys.append(max(g) if g else 0)
        ax.bar(np.arange(len(shapes)) + i * w - 0.4 + w / 2, ys, w, label=v)
    ax.set_xticks(np.arange(len(shapes)))
    ax.set_xticklabels([s.replace(" A", "\nA") for s in shapes], fontsize=7)
    ax.set_ylabel("GFLOP/s (best of 1 and 2 threads)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, ncol=len(variants))
    ax.set_title("Lesson 03: the ladder on the MLP's own layer shapes (lesson 02, batch 128)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson03-layer-shapes",
                f"docs/benchmarks/lesson03-layers.json (scripts/check_layers.py / bench_lesson03.sh; {machine(rec)})")


# ------------------------------------------------------------------------------------------
# lesson 04: lesson04-conv-bench.json and the training table of lesson04-cnn.md
def fig_lesson04_conv():
    import numpy as np
    rec = load_json("lesson04-conv-bench.json")
    L = rec["layers"]
    versions = sorted(L[0]["seconds"])  # v1 (the loops) .. vN, as lesson04 --part bench wrote them
    labels = [f"{r['layer']} {r['pass']}\n{r['shape']}" for r in L]
    p = plt()
    fig, ax = p.subplots(figsize=(8, 3.8))
    x = np.arange(len(L))
    width = 0.8 / len(versions)
    for j, v in enumerate(versions):
        ms = [r["seconds"][v] * 1e3 for r in L]
        ax.bar(x + (j - (len(versions) - 1) / 2) * width, ms, width,
               label=f"{v}" + (" (the loops, 1 thread)" if v == "v1" else f" ({rec['threads']} threads)"))
    for i, r in enumerate(L):  # the speed-up of the fastest rung over the loops
        best = min(r["seconds"][v] for v in versions)
        ax.text(i, r["seconds"]["v1"] * 1e3 * 1.15, f"{r['seconds']['v1'] / best:.0f}x", ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel(f"ms per batch of {rec['batch']} (median of {rec['repeats']}, log)")
    ax.grid(alpha=0.3, axis="y", which="both")
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("Lesson 04: the convolution ladder per layer (labels: fastest rung vs the loops)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson04-conv-timings",
                "docs/benchmarks/lesson04-conv-bench.json (lesson04 --part bench --bench-batch 64 --repeats 5; "
                "2-core AMD EPYC Zen 4 VM, idle, 2026-11-26)")


def fig_lesson04_curves():
    rows = md_table(read_md("lesson04-cnn.md"), "| epoch |")
    ep = [int(r[0]) for r in rows]
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(8, 3.3))
    a1.plot(ep, [num(r[1]) for r in rows], "o-", label="train", ms=3)
    a1.plot(ep, [num(r[3]) for r in rows], "o-", label="test", ms=3)
    a1.set_ylabel("cross-entropy loss")
    a2.plot(ep, [num(r[2]) for r in rows], "o-", label="train", ms=3)
    a2.plot(ep, [num(r[4]) for r in rows], "o-", label="test", ms=3)
    a2.axhline(92, color="k", ls=":", lw=0.8)
    a2.text(ep[0], 92.2, "goal 92%", fontsize=7)
    a2.set_ylabel("accuracy (%)")
    for a in (a1, a2):
        a.set_xlabel("epoch")
        a.grid(alpha=0.3)
        a.legend()
    fig.suptitle("Lesson 04: the CNN on Fashion-MNIST, default run (6 epochs)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson04-training-curves",
                f"docs/benchmarks/lesson04-cnn.md (nnlab lesson04 --part train, seed 42; {md_machine('lesson04-cnn.md')})")


# ------------------------------------------------------------------------------------------
# lessons 05/06: docs/benchmarks/lesson05-06-rnn-lstm.md
def _block_after(text, marker):
    """The indented lines of the first code block after the line containing marker."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if marker in l)
    out = []
    for l in lines[start + 1:]:
        if l.startswith("    "):
            out.append(l[4:])
        elif out:
            break
    return out


def fig_lesson05_plant():
    text = read_md("lesson05-06-rnn-lstm.md")
    block = _block_after(text, "## The plant at several dead times")
    hdr = None
    rows = []
    for l in block:
        if l.strip().startswith("dead time"):
            hdr = ["persistence", "ARX short", "ARX long", "RNN", "LSTM"]
        elif hdr and re.match(r"\s*\d", l):
            rows.append([float(x) for x in l.split()])
    if not rows:
        raise SystemExit("lesson05-06-rnn-lstm.md: no dead-time table")
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    dts = [r[0] for r in rows]
    for j, name in enumerate(hdr):
        ax.plot(dts, [r[j + 1] for r in rows], "o-", ms=4, label=name)
    ax.set_xlabel("dead time (steps between the valve and the level seeing it)")
    ax.set_ylabel("level RMSE on the validation run (mm)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Lessons 05/06: one-step-ahead level prediction vs dead time")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson05-plant-rmse-vs-dead-time",
                "docs/benchmarks/lesson05-06-rnn-lstm.md (nnlab lesson06 --part compare; bench_lesson05_06.sh)")


def fig_lesson06_gradients():
    text = read_md("lesson05-06-rnn-lstm.md")
    block = _block_after(text, "## Gradient vs distance in time")
    ds = None
    series = []
    for l in block:
        if "d=1" in l:
            ds = [int(x) for x in re.findall(r"d=(\d+)", l)]
        elif ds and re.match(r"\s*(rnn|lstm)\s", l):
            parts = l.split()
            series.append((f"{parts[0]}, Wh x {parts[1]}", [float(x) for x in parts[2:2 + len(ds)]]))
    if not series:
        raise SystemExit("lesson05-06-rnn-lstm.md: no gradient-vs-distance table")
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    for (name, ys), ls in zip(series, ["-", "--", "-", "--"]):
        ax.plot(ds, ys, "o" + ls, ms=4, label=name,
                color="tab:blue" if name.startswith("rnn") else "tab:green")
    ax.set_yscale("log")
    ax.set_xlabel("distance d in time steps (last - t)")
    ax.set_ylabel("||dL/dh_t|| / ||dL/dh_last||")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title("Lesson 06: how much gradient reaches d steps back (fresh layers, H = 64)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson06-gradient-vs-distance",
                "docs/benchmarks/lesson05-06-rnn-lstm.md (nnlab lesson06 --part compare, gradients.csv)")


def fig_lesson06_chars():
    rows = md_table(read_md("lesson05-06-rnn-lstm.md"), "| cell | iterations |")
    p = plt()
    fig, ax = p.subplots(figsize=(6, 3.2))
    names = [r[0] for r in rows]
    val = [float(r[4]) for r in rows]
    bars = ax.bar(names, val, color=["tab:blue", "tab:green"][:len(rows)])
    for b, r in zip(bars, rows):
        ax.text(b.get_x() + b.get_width() / 2, b.get_height() + 0.02,
                f"{r[1]} iterations in {r[2]} s", ha="center", fontsize=7)
    ax.set_ylabel("validation loss (nats/char)")
    ax.set_ylim(0, max(val) * 1.2)
    ax.set_title("Lesson 06: RNN vs LSTM on characters, the same 120 s budget")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save(fig, "lesson06-same-budget",
                f"docs/benchmarks/lesson05-06-rnn-lstm.md (nnlab lesson06 --part compare; {md_machine('lesson05-06-rnn-lstm.md')})")


def _jsonl(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def fig_lesson06_char_curves():
    """Training curves of the default character runs of both cells (lesson05 --part chars,
    lesson06 --part chars: no record holds them). Against iterations only: the runs are nice'd
    on a shared machine, so their seconds are not a measurement."""
    quick = ["--quick"] if CFG["quick"] else []
    d5 = run_program("lesson05-chars", ["lesson05", "--part", "chars", "--out-dir", "."] + quick +
                     corpus_args("--corpus"), ["char_rnn.jsonl"])
    d6 = run_program("lesson06-chars", ["lesson06", "--part", "chars", "--out-dir", "."] + quick +
                     corpus_args("--corpus"), ["char_lstm.jsonl"])
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    for path, name, color in ((os.path.join(d5, "char_rnn.jsonl"), "RNN", "tab:blue"),
                              (os.path.join(d6, "char_lstm.jsonl"), "LSTM", "tab:green")):
        rows = [r for r in _jsonl(path) if "val_loss" in r]
        ax.plot([r["iter"] for r in rows], [r["train_loss"] for r in rows], "-", color=color, lw=1,
                alpha=0.6, label=f"{name} train")
        ax.plot([r["iter"] for r in rows], [r["val_loss"] for r in rows], "o-", color=color, ms=3,
                label=f"{name} validation")
    ax.set_xlabel("iteration (32 streams x 64 characters)")
    ax.set_ylabel("loss (nats/char)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Lessons 05/06: RNN vs LSTM on Tiny Shakespeare, the same iterations" + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson06-char-curves",
                "nnlab lesson05 --part chars, nnlab lesson06 --part chars (defaults, seed 42; logs char_rnn.jsonl, char_lstm.jsonl)")


# ------------------------------------------------------------------------------------------
# lesson 07: a run of `nnlab lesson07 --out-dir` (multihead.json, scale.csv)
def lesson07_run():
    return run_program("lesson07", ["lesson07", "--out-dir", "."] + (["--quick"] if CFG["quick"] else []),
                       ["multihead.json", "scale.csv"])


def fig_lesson07_attention():
    d = lesson07_run()
    with open(os.path.join(d, "multihead.json")) as f:
        rec = json.load(f)
    toks = rec["tokens"]
    runs = rec["runs"]
    ncol = max(len(r["att"]) for r in runs)
    p = plt()
    fig, axes = p.subplots(len(runs), ncol, figsize=(1.9 * ncol + 1, 1.9 * len(runs) + 0.6), squeeze=False)
    for i, r in enumerate(runs):
        for j in range(ncol):
            ax = axes[i][j]
            if j >= len(r["att"]):
                ax.axis("off")
                continue
            im = ax.imshow(r["att"][j], vmin=0, vmax=1, cmap="viridis")
            ax.set_xticks(range(len(toks)))
            ax.set_yticks(range(len(toks)))
            ax.set_xticklabels(toks, fontsize=6)
            ax.set_yticklabels(toks, fontsize=6)
            ax.set_title(f"NH={r['NH']} hs={r['hs']}, head {j}", fontsize=7)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="attention weight")
    fig.suptitle("Lesson 07: attention rows of the 5 hand-made tokens (row = query, column = key; "
                 "causal: nothing right of the diagonal)" + mode_tag(), fontsize=8)
    return save(fig, "lesson07-attention-rows", "nnlab lesson07 --out-dir DIR (multihead.json)")


def fig_lesson07_scale():
    d = lesson07_run()
    with open(os.path.join(d, "scale.csv")) as f:
        rows = list(csv.DictReader(f))
    hs = [int(r["hs"]) for r in rows]
    p = plt()
    fig, axes = p.subplots(1, 3, figsize=(9, 3.0))
    for ax, key, lab in ((axes[0], "var", "variance of the scores"),
                         (axes[1], "maxp", "largest attention weight"),
                         (axes[2], "entropy", "entropy of the row (nats)")):
        ax.plot(hs, [float(r[key + "_raw"]) for r in rows], "o-", ms=3, label="q.k")
        ax.plot(hs, [float(r[key + "_scaled"]) for r in rows], "o-", ms=3, label="q.k / sqrt(hs)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("head size hs")
        ax.set_title(lab)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle("Lesson 07: why divide by sqrt(hs): random q, k with unit-variance entries" + mode_tag())
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return save(fig, "lesson07-scale", "nnlab lesson07 --out-dir DIR (scale.csv, seed 42)")


# ------------------------------------------------------------------------------------------
# lesson 08: the record's evaluation lines (loss curve) and a run for the attention maps
def fig_lesson08_loss():
    text = read_md("lesson08-gpt.md")
    block = _block_after(text, "## Quality: nanoGPT's CPU run, 2000 steps")
    pts = [tuple(float(x) for x in m.groups()) for m in
           (re.search(r"step (\d+): train loss ([0-9.]+), val loss ([0-9.]+)", l) for l in block) if m]
    if not pts:
        raise SystemExit("lesson08-gpt.md: no evaluation lines in the 2000-step run")
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    ax.plot([s for s, _, _ in pts], [t for _, t, _ in pts], "o-", ms=3, label="train")
    ax.plot([s for s, _, _ in pts], [v for _, _, v in pts], "o-", ms=3, label="validation")
    ax.axhline(4.174, color="0.5", ls=":", lw=0.8)
    ax.text(pts[-1][0], 4.05, "ln 65 = 4.17: a uniform guess", ha="right", fontsize=7)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (nats/char, 20 batches per split)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title("Lesson 08: the GPT (4 layers, 4 heads, 128 wide) on Tiny Shakespeare, 2000 steps")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson08-loss-curve",
                "docs/benchmarks/lesson08-gpt.md (nnlab gpt train, defaults = nnlab lesson08 --part train; "
                f"{md_machine('lesson08-gpt.md')})")


ATT_TEXT = "ROMEO:\nBut soft, what light through yonder window"


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", f"{k}: dtype {v['dtype']}"
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype="<f4").reshape(v["shape"])
    return out


def fig_lesson08_attention():
    args = ["lesson08", "--part", "train", "--out-dir", ".", "--overwrite", "--sample-tokens", "0"] + \
        corpus_args("--data")
    if CFG["quick"]:
        args += ["--max-iters", "100", "--eval-interval", "50", "--eval-iters", "2"]
    d = run_program("lesson08", args, ["best.safetensors", "log.jsonl"])
    dump = os.path.join(d, "attention.safetensors")
    r = subprocess.run(["nice", "-n", "19", os.path.join(CFG["bin"], "nnlab"), "gpt", "dump",
                        "--checkpoint", os.path.join(d, "best.safetensors"), "--text", ATT_TEXT,
                        "--out", dump], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("nnlab gpt dump failed:\n" + r.stdout[-1500:] + r.stderr[-1500:])
    t = read_safetensors(dump)
    layers = sorted((k for k in t if re.fullmatch(r"h\.\d+\.att", k)), key=lambda k: int(k.split(".")[1]))
    if not layers:
        raise SystemExit(f"{dump}: no h.<l>.att tensors (names: {sorted(t)[:10]}...)")
    att0 = t[layers[0]]
    while att0.ndim > 3:  # (B, NH, T, T) -> (NH, T, T)
        att0 = att0[0]
    nh, T = att0.shape[0], att0.shape[-1]
    chars = [c if c not in "\n " else {"\n": "\\n", " ": "_"}[c] for c in ATT_TEXT[:T]]
    p = plt()
    from matplotlib.colors import PowerNorm
    norm = PowerNorm(0.5, vmin=0, vmax=1)  # square-root colours: the small weights stay visible
    fig, axes = p.subplots(len(layers), nh, figsize=(2.1 * nh, 2.1 * len(layers) + 0.5), squeeze=False)
    for i, k in enumerate(layers):
        a = t[k]
        while a.ndim > 3:
            a = a[0]
        for j in range(nh):
            ax = axes[i][j]
            ax.imshow(a[j], norm=norm, cmap="viridis", interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == len(layers) - 1:
                ax.set_xticks(range(0, T, 4))
                ax.set_xticklabels(chars[::4], fontsize=6)
            if j == 0:
                ax.set_ylabel(f"layer {i}", fontsize=7)
            if i == 0:
                ax.set_title(f"head {j}", fontsize=7)
    steps = max(r.get("step", 0) for r in _jsonl(os.path.join(d, "log.jsonl")))  # what the run did
    fig.suptitle(f"Lesson 08: attention maps of the trained GPT ({steps} steps), every layer and head" + mode_tag()
                 + f"\non {ATT_TEXT!r}: row = query, column = key, colour = sqrt(weight)", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    return save(fig, "lesson08-attention-maps",
                "nnlab lesson08 --part train (defaults), then nnlab gpt dump --checkpoint best.safetensors --text ...")


# ------------------------------------------------------------------------------------------
# lesson 09: the emulator's ladder (no GPU record exists)
def fig_lesson09_ladder():
    args = ["lesson09", "--part", "ladder", "--device", "emu", "--json", "ladder.json"] + \
        (["--quick"] if CFG["quick"] else [])
    d = run_program("lesson09", args, ["ladder.json"])
    with open(os.path.join(d, "ladder.json")) as f:
        rec = json.load(f)
    rows = [r for r in rec["results"] if r["op"] == "matmul" and not r.get("skipped")]
    names = [f"{r['variant']} {r['name']}" for r in rows]
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9, 0.28 * len(rows) + 1.6), sharey=True)
    a1.barh(names, [max(r["max_abs_err"], 1e-9) for r in rows],
            color=["tab:green" if r["valid"] else "tab:red" for r in rows])
    a1.set_xscale("log")
    a1.set_xlabel("max |error| vs the CPU reference (green: valid)")
    a1.invert_yaxis()
    a2.barh(names, [r["median_ms"] for r in rows], color="0.6")
    a2.set_xlabel("EMULATOR CPU ms (says nothing about a GPU)")
    for a in (a1, a2):
        a.grid(alpha=0.3, axis="x")
    shape = rows[0]["shape"] if rows else "?"
    fig.suptitle(f"Lesson 09: the CUDA matmul ladder, EMULATED ({shape}): validation is real, times are not"
                 + mode_tag(), fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    h = rec.get("host", {})
    return save(fig, "lesson09-ladder-emulated",
                f"nnlab lesson09 --part ladder --device emu --json ladder.json (emulated on {h.get('cpu', '?')}, "
                f"{h.get('cores', '?')} cores, {h.get('date', '?')})")


# ------------------------------------------------------------------------------------------
# lesson 10: docs/benchmarks/lesson10-*.json
def fig_lesson10_kv():
    rec = load_json("lesson10-kv.json")
    rows = rec["rows"]
    ctx = [r["context"] for r in rows]
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    ax.plot(ctx, [r["ms_per_token_nocache"] for r in rows], "o-", ms=4, label="no cache: recompute the prefix")
    ax.plot(ctx, [r["ms_per_token_cache"] for r in rows], "o-", ms=4, label="KV cache: one new row")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (tokens already generated)")
    ax.set_ylabel("ms per generated token (log)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    c = rec["config"]
    ax.set_title(f"Lesson 10: decoding with and without the KV cache "
                 f"(L={c['n_layer']}, C={c['n_embd']}; same logits to {rec['max_logit_diff']:.0e})")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson10-kv-cache",
                f"docs/benchmarks/lesson10-kv.json (nnlab lesson10 --part kv; {machine(rec)})")


def fig_lesson10_law():
    rec = load_json("lesson10-law.json")
    rows = rec["rows"]
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9.5, 3.8))
    fmts = list(dict.fromkeys(r["format"] for r in rows))
    for f_, m in zip(fmts, "osD^v"):
        rr = [r for r in rows if r["format"] == f_]
        a1.scatter([r["bytes_per_token"] / 1e6 for r in rr], [r["tokens_per_s"] for r in rr], marker=m,
                   label=f_, s=20, zorder=3)
    import numpy as np
    x = np.logspace(np.log10(min(r["bytes_per_token"] for r in rows) / 1e6 / 1.5),
                    np.log10(max(r["bytes_per_token"] for r in rows) / 1e6 * 1.5), 50)
    a1.plot(x, rec["bandwidth_gbs"] * 1e3 / x, "k--", lw=0.8,
            label=f"law: {rec['bandwidth_gbs']:.1f} GB/s / bytes per token")
    a1.axvline(rec["llc_bytes"] / 1e6, color="0.6", ls=":", lw=0.8)
    a1.text(rec["llc_bytes"] / 1e6 * 1.1, 0.03, f"last level cache ({rec['llc_bytes'] >> 20} MiB)",
            fontsize=6.5, transform=a1.get_xaxis_transform())
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("weight bytes read per token (MB)")
    a1.set_ylabel("tokens/s, batch 1")
    a1.grid(alpha=0.3, which="both")
    a1.legend(fontsize=6.5)
    a1.set_title("the bandwidth law")
    br = rec.get("batch_rows", [])
    for f_ in dict.fromkeys(r["format"] for r in br):
        rr = [r for r in br if r["format"] == f_]
        a2.plot([r["batch"] for r in rr], [r["tokens_per_s"] for r in rr], "o-", ms=3,
                label=f"{rr[0]['model']} {f_}")
    a2.set_xscale("log", base=2)
    a2.set_xlabel("batch (sequences decoded together)")
    a2.set_ylabel("tokens/s")
    a2.grid(alpha=0.3, which="both")
    a2.legend(fontsize=7)
    a2.set_title("batch > 1: the same bytes serve more tokens")
    fig.suptitle("Lesson 10: decoding speed against the bytes each token reads")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson10-bandwidth-law",
                f"docs/benchmarks/lesson10-law.json (nnlab lesson10 --part law; {machine(rec)})")


def fig_lesson10_quant():
    rec = load_json("lesson10-quant.json")
    rows = rec["rows"]
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9, 3.4))
    names = [r["format"] for r in rows]
    a1.bar(names, [r["tokens_per_s"] for r in rows], color="tab:blue")
    for i, r in enumerate(rows):
        a1.text(i, r["tokens_per_s"], f"{r['bytes_per_token'] / 1e6:.1f} MB", ha="center", va="bottom", fontsize=7)
    a1.set_ylabel("tokens/s, batch 1 (labels: bytes per token)")
    a2.bar(names, [r["val_loss_change"] for r in rows], color="tab:orange")
    a2.set_ylabel("validation loss change vs fp32 (nats/char)")
    a2.axhline(0, color="k", lw=0.6)
    for a in (a1, a2):
        a.grid(alpha=0.3, axis="y")
        a.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"Lesson 10: quantised weights, speed and quality ({rec['params'] / 1e6:.1f}M parameters)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson10-quantisation",
                f"docs/benchmarks/lesson10-quant.json (nnlab lesson10 --part quant; {machine(rec)})")


def fig_lesson10_speculative():
    rec = load_json("lesson10-speculative.json")
    rows = rec["rows"]
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9, 3.5))
    for d_ in dict.fromkeys(r["draft"] for r in rows):
        rr = sorted((r for r in rows if r["draft"] == d_), key=lambda r: r["k"])
        ks = [r["k"] for r in rr]
        l, = a1.plot(ks, [r["acceptance"] for r in rr], "o-", ms=4,
                     label=f"{d_} ({rr[0]['draft_params'] / 1e3:.0f}k params)")
        a2.plot(ks, [r["speedup"] for r in rr], "o-", ms=4, color=l.get_color(), label=f"{d_} measured")
        a2.plot(ks, [r["expected_speedup"] for r in rr], "x:", ms=4, color=l.get_color(), label=f"{d_} expected")
    a1.set_ylabel("acceptance rate (drafted tokens kept)")
    a1.set_ylim(0, 1)
    a2.axhline(1, color="k", lw=0.6)
    a2.set_ylabel("speed-up over the target alone")
    for a in (a1, a2):
        a.set_xlabel("k (tokens drafted per round)")
        a.grid(alpha=0.3)
        a.legend(fontsize=6.5)
    fig.suptitle(f"Lesson 10: speculative decoding, temperature {rec['temperature']}, "
                 f"target {rec['target']['params'] / 1e6:.1f}M parameters")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson10-speculative",
                f"docs/benchmarks/lesson10-speculative.json (nnlab lesson10 --part speculative; {machine(rec)})")


def fig_lesson10_prune():
    rec = load_json("lesson10-prune.json")
    rows = rec["rows"]
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    for k in dict.fromkeys(r["kind"] for r in rows):
        rr = sorted((r for r in rows if r["kind"] == k), key=lambda r: r["measured_sparsity"])
        sp = [100 * r["measured_sparsity"] for r in rr]
        l, = ax.plot(sp, [r["val_loss_pruned"] for r in rr], "o-", ms=4, label=f"{k}: pruned")
        ax.plot(sp, [r["val_loss_finetuned"] for r in rr], "s--", ms=4, color=l.get_color(),
                label=f"{k}: + {rec['finetune_steps']} fine-tuning steps")
    ax.axhline(rec["val_loss_dense"], color="k", ls=":", lw=0.8)
    ax.text(0, rec["val_loss_dense"] - 0.02, "dense", fontsize=7, va="top")
    ax.set_xlabel("sparsity (% of the prunable weights set to zero)")
    ax.set_ylabel("validation loss (nats/char)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(f"Lesson 10: pruning, quality against sparsity ({rec['params'] / 1e6:.1f}M parameters)")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson10-prune-sparsity",
                f"docs/benchmarks/lesson10-prune.json (nnlab lesson10 --part prune; {machine(rec)})")


# ------------------------------------------------------------------------------------------
# lesson 11: docs/benchmarks/flash-attention-cpu.md (bench_flash_attention, the idle record)
# and lesson11-bpe.json (nnlab lesson11 --part bpe --bpe-sweep)
def _flash_machine():
    text = read_md("flash-attention-cpu.md")
    m = re.search(r"^Machine: ([^,\n]+, [^,\n]+),.*?(\d{4}-\d{2}-\d{2})\.?$", text, re.M)
    return f"{m.group(1)}, {m.group(2)}" if m else "?"


def fig_lesson11_flash():
    text = read_md("flash-attention-cpu.md")
    mem = md_table(text, "| T | unfused counted |")
    spd = md_table(text, "| T | unfused (ms) |")
    T = [int(num(r[0])) for r in mem]
    unf = [num(r[1]) for r in mem]      # MiB, counted
    unf_m = [num(r[2]) for r in mem]    # MiB, measured (peak RSS growth)
    fl = [num(r[3]) for r in mem]
    fl_m = [num(r[4]) for r in mem]
    Ts = [int(num(r[0])) for r in spd]
    p = plt()
    fig, (a, b) = p.subplots(1, 2, figsize=(9, 3.6))
    a.plot(T, unf, "o-", ms=4, label="full attention: (B,NH,T,T) maps, counted")
    a.plot(T, unf_m, "x", ms=6, color="C0", label="full, measured (peak RSS)")
    a.plot(T, fl, "o-", ms=4, label="flash: lse (B,NH,T) + tiles, counted")
    a.plot(T, fl_m, "x", ms=6, color="C1", label="flash, measured (peak RSS)")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("sequence length T")
    a.set_ylabel("extra memory, MiB (log)")
    a.set_title("memory beyond qkv, out, dout, dqkv")
    a.grid(alpha=0.3, which="both")
    a.legend(fontsize=6.5)
    b.plot(Ts, [num(r[1]) for r in spd], "o-", ms=4, label="full (attention v4)")
    b.plot(Ts, [num(r[2]) for r in spd], "o-", ms=4, label="flash (flash_attention v3)")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("sequence length T")
    b.set_ylabel("forward + backward, ms (log)")
    b.set_title("time, medians of alternating rounds")
    b.grid(alpha=0.3, which="both")
    b.legend(fontsize=7)
    fig.suptitle("Lesson 11: flash vs full attention on the CPU (B=1, 6 heads of 64, causal)" + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson11-flash-attention",
                f"docs/benchmarks/flash-attention-cpu.md (bench_flash_attention --B 1 --NH 6 --hs 64 --rounds 3; "
                f"{_flash_machine()}, 2 threads)")


def fig_lesson11_bpe():
    rec = load_json("lesson11-bpe.json")
    part = rec["parts"]["bpe"]
    sw = part["sweep"]
    p = plt()
    fig, ax = p.subplots(figsize=(7, 3.6))
    ax.plot([r["merges"] for r in sw], [r["bytes_per_token"] for r in sw], "o-", ms=4)
    for r in sw:
        if r["vocab_size"] in (257, 1024, 4096):
            ax.annotate(f"{r['vocab_size']} tokens: {r['bytes_per_token']:.2f} B/token",
                        (r["merges"], r["bytes_per_token"]), textcoords="offset points", fontsize=7,
                        xytext=(6, 6) if r["vocab_size"] == 257 else (-130, 0) if r["vocab_size"] == 4096 else (6, -12))
    ax.set_xscale("symlog", linthresh=16)
    ax.set_xlabel("merges learned (vocabulary = 1 special + 256 bytes + merges)")
    ax.set_ylabel("bytes per token (corpus bytes / tokens)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"Lesson 11: byte-level BPE on {part['corpus'].split(',')[0]} "
                 f"({part['corpus_bytes']} bytes): each merge shortens the text" + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson11-bpe-bytes-per-token",
                "docs/benchmarks/lesson11-bpe.json (nnlab lesson11 --part bpe --vocab-size 4096 --bpe-sweep ...; "
                f"{machine(rec)})")


# ------------------------------------------------------------------------------------------
# Lesson 12 (issue 22): real models. Three records, written by the commands below; each figure
# reads only the fields listed here (the parts' headers, lessons/12-real-models/*_part.h, document
# the same fields). A record or a field that is missing is an error naming the command that
# makes it: never a silently empty plot.
#
#   lesson12-speed.json   nnlab lesson12 --part speed --json docs/benchmarks/lesson12-speed.json
#       {"schema": "nnlab-lesson12/1", "machine": {...}, "parts": {"speed": {
#          "bandwidth_gbs": 26.3,
#          "models": [{"name": "gpt2-124m", "random_weights": true,
#                      "rows": [{"format": "fp32", "bytes_per_token": 494619648,
#                                "tokens_per_s": ..., "law_tokens_per_s": ...}, ...]}, ...],
#          ...}}}   (lessons/12-real-models/speed_part.h lists every field)
#   lesson12-vs-transformers.json   the transformers generate() peer (H3's script)
#       {"machine": {...}, "rows": [{"model": "gpt2-124M", "format": "fp32",
#          "ours_tokens_per_s": ..., "transformers_tokens_per_s": ...}, ...]}
#       (transformers_tokens_per_s is null for a format transformers does not run)
#   lesson12-lora.json    nnlab lesson12 --part lora --json docs/benchmarks/lesson12-lora.json
#       {"schema": "nnlab-lesson12/1", "machine": {...}, "parts": {"lora": {
#          "rows": [{"method": "lora", "rank": 8, "trainable_params": ..., "optimizer_bytes": ...,
#                    "step_ms": ..., "val_loss": ...}, ...,
#                   {"method": "full", "rank": null, ...}]}}}
L12_COMMANDS = {
    "lesson12-speed.json": "nnlab lesson12 --part speed --json docs/benchmarks/lesson12-speed.json",
    "lesson12-vs-transformers.json": "NNLAB_HF_PYTHON=.venv/bin/python PARTS=peer scripts/bench_lesson12.sh",
    "lesson12-lora.json": "nnlab lesson12 --part lora --json docs/benchmarks/lesson12-lora.json",
}


def _l12_record(name, part=None):
    """The record docs/benchmarks/<name> (its parts[part] when part is given), or a clear error."""
    path = os.path.join(BENCH, name)
    if not os.path.exists(path):
        raise SystemExit(f"docs/benchmarks/{name} does not exist: make it with `{L12_COMMANDS[name]}`")
    rec = load_json(name)
    if part is None:
        return rec, rec
    parts = rec.get("parts")
    if not isinstance(parts, dict) or part not in parts:
        raise SystemExit(f"docs/benchmarks/{name} has no parts.{part}: make it with `{L12_COMMANDS[name]}`")
    return rec, parts[part]


def _l12_rows(name, obj, key, fields):
    """obj[key], a non-empty list of objects that each have `fields`, or a clear error."""
    rows = obj.get(key)
    if not isinstance(rows, list) or not rows:
        raise SystemExit(f"docs/benchmarks/{name}: no '{key}' rows (remake it: `{L12_COMMANDS[name]}`)")
    for i, r in enumerate(rows):
        missing = [f for f in fields if f not in r]
        if missing:
            raise SystemExit(f"docs/benchmarks/{name}: {key}[{i}] lacks {', '.join(missing)} "
                             f"(the fields listed in scripts/make_figures.py; remake it: `{L12_COMMANDS[name]}`)")
    return rows


def _l12_grouped_bars(ax, models, formats, value, label_of, hatch_of=None):
    """Bars grouped by model, one per format; value(model, format) -> number or None (no bar)."""
    import numpy as np
    width = 0.8 / len(formats)
    for k, f_ in enumerate(formats):
        xs, ys = [], []
        for i, m in enumerate(models):
            v = value(m, f_)
            if v is not None:
                xs.append(i + (k - (len(formats) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width * 0.95, label=label_of(f_), hatch=hatch_of(f_) if hatch_of else None,
               edgecolor="0.2", lw=0.4)
    ax.set_xticks(np.arange(len(models)))
    ax.set_xticklabels(models)


def fig_lesson12_speed():
    name = "lesson12-speed.json"
    rec, speed = _l12_record(name, "speed")
    rows = []
    for m in _l12_rows(name, speed, "models", ["name", "rows"]):
        for r in _l12_rows(name, m, "rows", ["format", "bytes_per_token", "tokens_per_s", "law_tokens_per_s"]):
            rows.append(dict(r, model=m["name"] + (" (random weights)" if m.get("random_weights") else "")))
    models = list(dict.fromkeys(r["model"] for r in rows))
    formats = list(dict.fromkeys(r["format"] for r in rows))
    at = {(r["model"], r["format"]): r for r in rows}
    p = plt()
    fig, ax = p.subplots(figsize=(8.0, 3.8))
    import numpy as np
    width = 0.8 / len(formats)
    colors = p.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, f_ in enumerate(formats):
        for i, m in enumerate(models):
            r = at.get((m, f_))
            if r is None:
                continue
            x = i + (k - (len(formats) - 1) / 2) * width
            ax.bar(x, r["tokens_per_s"], width * 0.9, color=colors[k % len(colors)], edgecolor="0.2", lw=0.4,
                   label=f_ if i == 0 else None)
            # the law's ceiling for the same bytes: a black tick above (or through) the bar
            ax.plot([x - width * 0.45, x + width * 0.45], [r["law_tokens_per_s"]] * 2, "k-", lw=1.2,
                    label="law: bandwidth / bytes per token" if (i == 0 and k == 0) else None)
            ax.text(x, r["tokens_per_s"], f"{r['tokens_per_s'] / r['law_tokens_per_s']:.2f}", ha="center",
                    va="bottom", fontsize=6)
    ax.set_xticks(np.arange(len(models)))
    ax.set_xticklabels(models)
    ax.set_ylabel("decode tokens/s, batch 1")
    bw = speed.get("bandwidth_gbs")
    ax.set_title("measured bars, the law's ceiling as a black tick, the fraction of it on each bar"
                 + (f" ({bw:.1f} GB/s)" if isinstance(bw, (int, float)) else ""))
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    fig.suptitle("Lesson 12: GPT-2 shapes decoded by our kernels, per weight format, against the bandwidth law"
                 + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson12-speed-law", f"docs/benchmarks/{name} ({L12_COMMANDS[name]}; {machine(rec)})")


def fig_lesson12_vs_transformers():
    name = "lesson12-vs-transformers.json"
    rec, top = _l12_record(name)
    # scripts/bench_lesson12.sh writes shapes[]: {shape, transformers: {tokens_per_s},
    # ours: {format: {tokens_per_s, ratio}}}; one bar row per (shape, format), transformers in fp32 only
    shapes = _l12_rows(name, top, "shapes", ["shape", "transformers", "ours"])
    rows = [{"model": sh["shape"], "format": f_, "ours_tokens_per_s": o["tokens_per_s"],
             "transformers_tokens_per_s": sh["transformers"]["tokens_per_s"] if f_ == "fp32" else None}
            for sh in shapes for f_, o in sh["ours"].items()]
    models = list(dict.fromkeys(r["model"] for r in rows))
    formats = list(dict.fromkeys(r["format"] for r in rows))
    at = {(r["model"], r["format"]): r for r in rows}
    series = [("ours", f_) for f_ in formats] + [("transformers", f_) for f_ in formats
                                                 if any(at.get((m, f_), {}).get("transformers_tokens_per_s")
                                                        is not None for m in models)]
    p = plt()
    fig, ax = p.subplots(figsize=(8.0, 3.8))

    def value(m, s):
        r = at.get((m, s[1]))
        if r is None:
            return None
        return r["ours_tokens_per_s"] if s[0] == "ours" else r["transformers_tokens_per_s"]

    _l12_grouped_bars(ax, models, series, value, lambda s: f"{s[0]} {s[1]}",
                      lambda s: "//" if s[0] == "transformers" else None)
    ax.set_ylabel("decode tokens/s, batch 1, CPU")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=6.5, ncol=2)
    ax.set_title("same machine, same shapes, random weights (speed does not depend on their values)")
    fig.suptitle("Lesson 12: our decoder against transformers' generate()" + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson12-vs-transformers", f"docs/benchmarks/{name} ({machine(rec)})")


def fig_lesson12_lora():
    # lessons/12-real-models/lora_part.h: parts.lora.runs[] with method ("full" | "lora"),
    # rank (0 for full), trainable_params, val_new_before/after (the new domain),
    # val_old_before/after (the old one: forgetting)
    name = "lesson12-lora.json"
    rec, lora = _l12_record(name, "lora")
    rows = _l12_rows(name, lora, "runs", ["method", "rank", "trainable_params", "val_new_before", "val_new_after",
                                          "val_old_after"])
    ranked = sorted((r for r in rows if r["method"] == "lora"), key=lambda r: r["rank"])
    full = [r for r in rows if r["method"] == "full"]
    if not ranked:
        raise SystemExit(f"docs/benchmarks/{name}: no runs with method 'lora' (remake it: `{L12_COMMANDS[name]}`)")
    p = plt()
    fig, (a1, a2) = p.subplots(1, 2, figsize=(9.5, 3.6))
    ranks = [r["rank"] for r in ranked]
    a1.plot(ranks, [r["val_new_after"] for r in ranked], "o-", ms=4, label="LoRA: new domain")
    a1.plot(ranks, [r["val_old_after"] for r in ranked], "s--", ms=4, label="LoRA: old domain (forgetting)")
    a2.plot(ranks, [r["trainable_params"] for r in ranked], "o-", ms=4, label="LoRA")
    for r in full:
        a1.axhline(r["val_new_after"], color="k", ls="--", lw=0.8, label="full fine-tuning: new domain")
        a1.axhline(r["val_old_after"], color="k", ls=":", lw=0.8, label="full fine-tuning: old domain")
        a2.axhline(r["trainable_params"], color="k", ls="--", lw=0.8, label="full fine-tuning")
    a1.axhline(ranked[0]["val_new_before"], color="0.6", ls="-.", lw=0.8, label="new domain before fine-tuning")
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xticks(ranks)
        a.set_xticklabels([str(r) for r in ranks])
        a.set_xlabel("rank r")
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=6.5)
    a1.set_ylabel("validation loss (nats/char)")
    a1.set_title("after the same steps and batches")
    a2.set_yscale("log")
    a2.set_ylabel("trainable parameters")
    a2.set_title("what is trained: r (in + out) per adapted matrix")
    fig.suptitle("Lesson 12: LoRA against full fine-tuning" + mode_tag())
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return save(fig, "lesson12-lora", f"docs/benchmarks/{name} ({L12_COMMANDS[name]}; {machine(rec)})")



# ------------------------------------------------------------------------------------------
# lesson 13: a network in the control loop. The records (scripts/bench_lesson13.sh writes them;
# their fields are documented in lessons/13-control/*_part.h):
#   lesson13-<part>.json   nnlab lesson13 --part <part> --json docs/benchmarks/lesson13-<part>.json
#       {"schema": "nnlab-lesson13/1", "machine": {...}, "parts": {"<part>": {...}}}
#   lesson13/mpc_<scenario>.csv   the mpc part's step logs (t, setpoint, drain, dead_time,
#       level_pi, u_pi, level_mpc, u_mpc)
#   lesson13/soft_sensor_test.csv   the soft-sensor part's estimates on the test log
L13_COMMAND = "scripts/bench_lesson13.sh"


def _l13_part(part):
    name = f"lesson13-{part}.json"
    rec = load_json(name)
    return name, rec, rec["parts"][part]


def _l13_csv(name):
    path = os.path.join(BENCH, "lesson13", name)
    with open(path, newline="") as f:
        rows = list(csv.reader(line for line in f if not line.startswith("#")))
    head = rows[0]
    return {h: [float(r[i]) if r[i] != "" else float("nan") for r in rows[1:]] for i, h in enumerate(head)}


def fig_lesson13_mpc():
    name, rec, part = _l13_part("mpc")
    scenarios = [s["name"] for s in part["scenarios"]]
    p = plt()
    fig, axes = p.subplots(2, len(scenarios), figsize=(10, 4.4), sharex="col",
                           gridspec_kw={"height_ratios": [2, 1]})
    for j, sc in enumerate(scenarios):
        d = _l13_csv(f"mpc_{sc}.csv")
        every = max(1, len(d["t"]) // 300)  # a point per pixel or so: the PNG stays small
        d = {k: v[::every] for k, v in d.items()}
        ax, au = axes[0][j], axes[1][j]
        ax.plot(d["t"], d["setpoint"], "k--", lw=0.9, label="setpoint")
        ax.plot(d["t"], d["level_pi"], color="tab:blue", lw=1.0, label="PI")
        ax.plot(d["t"], d["level_mpc"], color="tab:red", lw=1.0, label="MPC (learned model)")
        ax.set_title(sc, fontsize=9)
        au.plot(d["t"], d["u_pi"], color="tab:blue", lw=0.8)
        au.plot(d["t"], d["u_mpc"], color="tab:red", lw=0.8)
        if any(v > 0 for v in d["drain"]):
            au2 = au.twinx()
            au2.fill_between(d["t"], d["drain"], color="0.6", alpha=0.35, step="post")
            au2.set_yticks([])
        dts = sorted(set(int(v) for v in d["dead_time"]))
        if len(dts) > 1:
            ax.text(0.02, 0.03, f"dead time {dts[0]} -> {dts[-1]} steps", transform=ax.transAxes, fontsize=7)
        au.set_xlabel("control period (s)")
        if j == 0:
            ax.set_ylabel("true level (m)")
            au.set_ylabel("pump command u")
            ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Lesson 13: the tuned PI against an MPC on the learned model, same plant and noise "
                 "(grey: the unmeasured drain)" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.02, 1, 0.96))
    return save(fig, "lesson13-mpc-steps",
                f"docs/benchmarks/{name}, lesson13/mpc_*.csv ({L13_COMMAND}; {machine(rec)})")


def fig_lesson13_mpc_metrics():
    name, rec, part = _l13_part("mpc")
    sc = part["scenarios"]
    p = plt()
    fig, axes = p.subplots(1, 3, figsize=(12, 3.6))
    xs = range(len(sc))
    for ax, key, label in ((axes[0], "iae", "IAE (m s)"), (axes[1], "overshoot_pct", "largest overshoot (%)"),
                           (axes[2], "effort_du", "actuator travel, sum |du|")):
        for k, (ctrl, color) in enumerate((("pi", "tab:blue"), ("mpc", "tab:red"))):
            vals = [s[ctrl][key] if s[ctrl][key] is not None else 0.0 for s in sc]
            ax.bar([x + (k - 0.5) * 0.38 for x in xs], vals, width=0.38, color=color, label=ctrl.upper())
        ax.set_xticks(list(xs))
        ax.set_xticklabels([s["name"] for s in sc], fontsize=7, rotation=15)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8)
    ms = [s["mpc"]["compute_ms_median"] for s in sc]
    fig.suptitle(f"Lesson 13: PI against MPC per scenario (lower is better; the MPC's median solve "
                 f"{min(ms):.2g}-{max(ms):.2g} ms per step)" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.93))
    return save(fig, "lesson13-mpc-metrics", f"docs/benchmarks/{name} ({L13_COMMAND}; {machine(rec)})")


def fig_lesson13_soft_sensor():
    name, rec, part = _l13_part("soft-sensor")
    d = _l13_csv("soft_sensor_test.csv")
    p = plt()
    fig, (ax, ab) = p.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
    n = min(len(d["time"]), 1500)
    t = d["time"][:n]
    ax.plot(t, d["drain_true_lpm"][:n], "k", lw=1.2, label="true drain (simulator)")
    for key, color, label in (("drain_network_lpm", "tab:red", "network (MLP)"),
                              ("drain_linear_lpm", "tab:blue", "linear (least squares)"),
                              ("drain_physics_lpm", "tab:green", "physics q - k sqrt(y), k known")):
        ax.plot(t, d[key][:n], color=color, lw=0.7, alpha=0.85, label=label)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("drain flow (l/min)")
    ax.legend(fontsize=7, loc="upper right")
    ests = part["estimators"]
    regimes = [r for r in ("all", "drain_open", "drain_closed", "level_low", "level_high", "drain_beyond_train")
               if any(r in e["regimes"] and e["regimes"][r]["rows"] for e in ests)]
    colors = {"network": "tab:red", "linear": "tab:blue", "physics": "tab:green"}
    w = 0.8 / len(ests)
    for k, e in enumerate(ests):
        vals = [e["regimes"][r]["rmse"] * 60000 if r in e["regimes"] and e["regimes"][r]["rmse"] is not None
                else 0 for r in regimes]
        ab.bar([i + (k - (len(ests) - 1) / 2) * w for i in range(len(regimes))], vals, width=w,
               color=colors.get(e["name"], "0.5"), label=e["name"])
    ab.set_xticks(range(len(regimes)))
    ab.set_xticklabels([r.replace("_", "\n") for r in regimes], fontsize=6.5)
    ab.set_ylabel("RMSE (l/min)")
    ab.legend(fontsize=7)
    fig.suptitle("Lesson 13: estimating the unmeasured drain from pump, level and outflow (test log)" + mode_tag(),
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.93))
    return save(fig, "lesson13-soft-sensor",
                f"docs/benchmarks/{name}, lesson13/soft_sensor_test.csv ({L13_COMMAND}; {machine(rec)})")


def fig_lesson13_faults():
    name, rec, part = _l13_part("faults")
    dets = part["detectors"]
    p = plt()
    fig, axes = p.subplots(1, 3, figsize=(12, 3.6))
    xs = range(len(dets))
    axes[0].bar(xs, [d["false_alarms_per_hour"] for d in dets], color="0.5")
    axes[0].axhline(part["target_per_hour"], color="k", ls="--", lw=0.8, label="target (chosen on other runs)")
    axes[0].set_ylabel("false alarms per hour")
    axes[0].legend(fontsize=7)
    for k, (kind, color) in enumerate((("stuck", "tab:purple"), ("drift", "tab:orange"))):
        axes[1].bar([x + (k - 0.5) * 0.38 for x in xs],
                    [d["faults"][kind]["detected"] / max(1, d["faults"][kind]["onsets"]) for d in dets],
                    width=0.38, color=color, label=kind)
        axes[2].bar([x + (k - 0.5) * 0.38 for x in xs],
                    [d["faults"][kind]["delay_s_median"] or 0 for d in dets], width=0.38, color=color, label=kind)
    axes[1].set_ylabel(f"share found within {part['within']} periods")
    axes[1].set_ylim(0, 1.05)
    axes[2].set_ylabel("median detection delay (s)")
    for ax in axes:
        ax.set_xticks(list(xs))
        ax.set_xticklabels([d["name"] for d in dets], fontsize=8)
    axes[1].legend(fontsize=7)
    fig.suptitle("Lesson 13: a stuck and a drifting level transmitter under PI control, found from residuals"
                 + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.93))
    return save(fig, "lesson13-faults", f"docs/benchmarks/{name} ({L13_COMMAND}; {machine(rec)})")


# lesson 14: beyond one machine. One record (scripts/bench_lesson14.sh writes it; the parts'
# fields are described in lessons/14-distributed/distributed_lesson.h):
#   lesson14.json   nnlab lesson14 --json docs/benchmarks/lesson14.json
#       {"schema": "nnlab-lesson14/1", "machine": {...}, "parts": {"link", "scaling", "predict", "zero", "recompute"}}
L14_COMMAND = "scripts/bench_lesson14.sh"


def _l14():
    rec = load_json("lesson14.json")
    return rec, rec["parts"]


def fig_lesson14_link():
    rec, parts = _l14()
    p = plt()
    fig, ax = p.subplots(figsize=(7, 4.2))
    for t, color in zip(parts["link"]["transports"], ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        b = [s["bytes"] for s in t["sizes"]]
        ax.loglog(b, [s["ring_ms"] for s in t["sizes"]], "o", color=color, label=f"{t['transport']}: ring, measured")
        ax.loglog(b, [s["library_ms"] for s in t["sizes"]], "x", color=color, label=f"{t['transport']}: MPI_Allreduce")
        ax.loglog(b, [s["model_ms"] for s in t["sizes"]], "-", color=color, lw=1,
                  label=f"{t['transport']}: fit, {t['latency_s'] * 1e6:.1f} us + bytes / {t['bandwidth_Bps'] / 1e9:.2f} GB/s")
    ax.set_xlabel("bytes all-reduced")
    ax.set_ylabel("ms (median)")
    ax.legend(fontsize=7)
    ax.set_title("Lesson 14: the all-reduce between 2 ranks (tcp-limited: loopback held to "
                 + ", ".join(f"{t['limit_gbit']:g} Gbit/s" for t in parts["link"]["transports"] if "limit_gbit" in t)
                 + ") and the latency-bandwidth fit" + mode_tag(), fontsize=9)
    fig.tight_layout()
    return save(fig, "lesson14-link", f"docs/benchmarks/lesson14.json ({L14_COMMAND}; {machine(rec)})")


def fig_lesson14_scaling():
    rec, parts = _l14()
    runs = parts["scaling"]["runs"]
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(12, 4))
    names = [r["name"].replace(", ", "\n") for r in runs]
    xs = range(len(runs))
    axes[0].bar(xs, [r["tok_s"] for r in runs], color=["0.6" if r["ranks"] == 1 else "tab:blue" for r in runs])
    axes[0].set_ylabel("tokens/s (all ranks)")
    compute = [r["ms"] - r["wait_ms"] - r["comm_ms"] for r in runs]
    axes[1].bar(xs, compute, color="0.6", label="compute")
    axes[1].bar(xs, [r["wait_ms"] for r in runs], bottom=compute, color="tab:orange", label="waiting for the slower rank")
    axes[1].bar(xs, [r["comm_ms"] for r in runs], bottom=[r["ms"] - r["comm_ms"] for r in runs], color="tab:red",
                label="all-reduce")
    axes[1].set_ylabel("ms per step")
    axes[1].legend(fontsize=7)
    for ax in axes:
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, fontsize=7)
    s = parts["scaling"]
    fig.suptitle(f"Lesson 14: nanoGPT's CPU configuration on ranks; 2 ranks x 1 thread = "
                 f"{100 * s.get('efficiency_vs_1x2', float('nan')):.0f}% of 1 rank x 2 threads" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return save(fig, "lesson14-scaling", f"docs/benchmarks/lesson14.json ({L14_COMMAND}; {machine(rec)})")


def fig_lesson14_predict():
    rec, parts = _l14()
    pr = parts["predict"]
    p = plt()
    fig, axes = p.subplots(1, len(pr["cases"]), figsize=(6 * len(pr["cases"]), 4), squeeze=False)
    for ax, case in zip(axes[0], pr["cases"]):
        ns = pr["ranks"]
        ax.loglog(ns, ns, "k--", lw=0.8, label="ideal")
        for link in case["links"]:
            ax.loglog(ns, link["speedup"], "o-", ms=3, label=f"{link['link']} ({link['bandwidth_Bps'] / 1e9:.1f} GB/s)")
        ax.set_xlabel("ranks N")
        ax.set_ylabel("speed-up over one rank")
        ax.set_title(case["name"], fontsize=8)
        ax.legend(fontsize=7)
    fig.suptitle("Lesson 14: the fitted model extrapolated (gradients all-reduced after the backward, no overlap)"
                 + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return save(fig, "lesson14-predict", f"docs/benchmarks/lesson14.json ({L14_COMMAND}; {machine(rec)})")


def fig_lesson14_memory():
    rec, parts = _l14()
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(12, 4))
    z = parts["zero"]["rows"]
    axes[0].plot([r["ranks"] for r in z], [r["max_bytes"] / 1e6 for r in z], "o", label="measured (largest rank)")
    axes[0].plot([r["ranks"] for r in z], [r["plan_bytes"] / 1e6 for r in z], "-", lw=1, label="plan: 8 P / N")
    axes[0].set_xlabel("ranks N")
    axes[0].set_ylabel("AdamW moments per rank (MB)")
    axes[0].set_title("ZeRO stage 1", fontsize=9)
    axes[0].legend(fontsize=7)
    rows = parts["recompute"]["rows"]
    for mode, marker in ((False, "o"), (True, "s")):
        pts = [r for r in rows if r["recompute"] == mode]
        axes[1].plot([r["activation_bytes"] / 1e6 for r in pts], [r["ms"] for r in pts], marker + "-",
                     label="recompute" if mode else "store")
        for r in pts:
            axes[1].annotate(f"L={r['layers']}", (r["activation_bytes"] / 1e6, r["ms"]), fontsize=7)
    axes[1].set_xlabel("activation memory (MB)")
    axes[1].set_ylabel("ms per training step")
    axes[1].set_title("activation recomputation, per block", fontsize=9)
    axes[1].legend(fontsize=7)
    fig.suptitle("Lesson 14: memory against N and against time" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return save(fig, "lesson14-memory", f"docs/benchmarks/lesson14.json ({L14_COMMAND}; {machine(rec)})")


# lesson 15: compression that changes the arithmetic. One record (scripts/bench_lesson15.sh
# writes it; the parts are described in lessons/15-compression/compression_lesson.h):
#   lesson15.json   nnlab lesson15 --json docs/benchmarks/lesson15.json
#       {"schema": "nnlab-lesson15/1", "machine": {...}, "parts": {"int8", "w8a8", "gptq", "bitnet", "kv", "energy"}}
L15_COMMAND = "scripts/bench_lesson15.sh"


def _l15():
    rec = load_json("lesson15.json")
    return rec, rec["parts"]


def fig_lesson15_int8():
    rec, parts = _l15()
    d = parts["int8"]
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(12, 4.2))
    g = d["gemm"][-1]
    names = [r["version"] + " " + r.get("name", "") if r["op"] == "int8_gemm" else "fp32 sgemm" for r in g["rows"]]
    vals = [r.get("gops", r.get("gflops")) for r in g["rows"]]
    colors = ["tab:blue" if r["op"] == "int8_gemm" else "0.5" for r in g["rows"]]
    axes[0].barh(range(len(vals)), vals, color=colors)
    axes[0].set_yticks(range(len(vals)))
    axes[0].set_yticklabels(names, fontsize=7)
    pk = d["peaks"]
    axes[0].axvline(pk["int8_all"] / 1e9, color="tab:blue", ls="--", lw=1, label=f"int8 peak ({pk['int8_method']})")
    axes[0].axvline(pk["fp32_all"] / 1e9, color="0.4", ls="--", lw=1, label="fp32 FMA peak (as measured in this run)")
    axes[0].set_xlabel("GOP/s (2 per multiply-add), all threads")
    axes[0].set_title(f"C = A B^T at n = {g['n']}: int8 / fp32 = {g['int8_over_fp32']:.2f}x (median of alternating rounds)", fontsize=9)
    axes[0].legend(fontsize=7)
    shapes = sorted({(r["rows"], r["cols"]) for r in d["matvec"]}, key=lambda s: s[0] * s[1])
    width = 0.8 / max(1, len(shapes))
    formats = []
    for r in d["matvec"]:
        if r["format"] not in formats:
            formats.append(r["format"])
    for k, (rows, cols) in enumerate(shapes):
        pts = {r["format"]: r for r in d["matvec"] if (r["rows"], r["cols"]) == (rows, cols)}
        xs = [i + k * width for i in range(len(formats))]
        axes[1].bar(xs, [pts[f]["us"] if f in pts else 0 for f in formats], width, label=f"{rows} x {cols}: measured" + (", from DRAM" if rows * cols >= 4096 * 4096 else ", in cache"))
        axes[1].plot(xs, [pts[f]["law_us"] if f in pts else float("nan") for f in formats], "k_", ms=14,
                     label="bytes / bandwidth" if k == 0 else None)
    axes[1].set_xticks([i + width * (len(shapes) - 1) / 2 for i in range(len(formats))])
    axes[1].set_xticklabels(formats)
    axes[1].set_yscale("log")
    axes[1].set_ylabel("us per token (matvec, median)")
    axes[1].set_title(f"one token: y = x W^T; STREAM {d['bandwidth_gbs']:.1f} GB/s", fontsize=9)
    axes[1].legend(fontsize=7)
    fig.suptitle("Lesson 15: integer arithmetic on this CPU" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.02, 1, 0.93))
    return save(fig, "lesson15-int8", f"docs/benchmarks/lesson15.json ({L15_COMMAND}; {machine(rec)})")


def fig_lesson15_quality():
    rec, parts = _l15()
    p = plt()
    fig, axes = p.subplots(1, 3, figsize=(15, 4.2))
    w = parts["w8a8"]
    kinds = []
    for o in w["outliers"]:
        if o["linear"] not in kinds:
            kinds.append(o["linear"])
    for kind in kinds:
        pts = [o for o in w["outliers"] if o["linear"] == kind]
        axes[0].plot([o["layer"] for o in pts], [o["max_over_median"] for o in pts], "o-", label=kind)
    axes[0].set_xlabel("layer")
    axes[0].set_ylabel("largest channel's max |x| / median channel's")
    axes[0].set_title("the Linear layers' input outliers", fontsize=9)
    axes[0].legend(fontsize=7)
    loss = w["loss"]
    fp32 = loss[0]["val_loss"]
    axes[1].barh(range(len(loss)), [r["val_loss"] - fp32 for r in loss], color="tab:blue")
    axes[1].set_yticks(range(len(loss)))
    axes[1].set_yticklabels([r["what"] for r in loss], fontsize=7)
    axes[1].axvline(0, color="k", lw=0.6)
    axes[1].set_xlabel("validation loss - fp32's")
    axes[1].set_title("W8A8 (integer kernels) and SmoothQuant", fontsize=9)
    g = parts["gptq"]
    for method, color in (("rtn", "0.5"), ("gptq", "tab:green")):
        pts = [r for r in g["rows"] if r["method"] == method]
        axes[2].plot([r["bits"] for r in pts], [r["val_loss"] - g["fp32_val_loss"] for r in pts], "o-", color=color,
                     label=method.upper())
    axes[2].set_xlabel("bits per weight (groups of 32)")
    axes[2].set_ylabel("validation loss - fp32's")
    axes[2].set_xticks(sorted({r["bits"] for r in g["rows"]}))
    axes[2].set_title("GPTQ against round-to-nearest", fontsize=9)
    axes[2].legend(fontsize=7)
    fig.suptitle("Lesson 15: what the arithmetic costs in quality (lesson 10's model)" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.02, 1, 0.93))
    return save(fig, "lesson15-quality", f"docs/benchmarks/lesson15.json ({L15_COMMAND}; {machine(rec)})")


def fig_lesson15_bitnet():
    rec, parts = _l15()
    b = parts["bitnet"]
    p = plt()
    fig, ax = p.subplots(figsize=(7, 4.2))
    # a record from before W1.58A8 has three runs; a newer one a fourth with "int8_activations"
    # true (ternary weights and int8-rounded Linear inputs), drawn dashed beside the ternary run
    a8 = any(r.get("int8_activations") for r in b["runs"])
    for r in b["runs"]:
        xs = [(i + 0.5) * b["window"] for i in range(len(r["curve"]))]
        acts = ", int8 activations" if r.get("int8_activations") else ""
        ax.plot(xs, r["curve"], linestyle="--" if r.get("int8_activations") else "-",
                label=f"{r['name']} (C {r['n_embd']}, {r['linear_bytes'] / 1e6:.2f} MB of Linear weights{acts}): "
                f"val {r['val_loss']:.3f}")
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (mean of {b['window']} steps)")
    ax.legend(fontsize=7)
    ax.set_title("Lesson 15: BitNet b1.58 from scratch against fp32" + (" (W1.58 and W1.58A8)" if a8 else "")
                 + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return save(fig, "lesson15-bitnet", f"docs/benchmarks/lesson15.json ({L15_COMMAND}; {machine(rec)})")


def fig_lesson15_energy():
    rec, parts = _l15()
    e = parts["energy"]
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(12, 4.2))
    rows = e["roofline_7b"]
    xs = range(len(rows))
    fetch = [r["joules"] * r["fetch_share"] for r in rows]
    arith = [r["joules"] * (1 - r["fetch_share"]) for r in rows]
    axes[0].bar(xs, fetch, color="tab:orange", label="fetching the weights from DRAM")
    axes[0].bar(xs, arith, bottom=fetch, color="tab:blue", label="multiply-adds")
    axes[0].set_xticks(list(xs))
    axes[0].set_xticklabels([r["format"] for r in rows])
    axes[0].set_ylabel("J per token (ESTIMATE)")
    axes[0].set_title("a 7B decoder at batch 1: the energy roofline (estimate, Horowitz 2014)", fontsize=9)
    axes[0].legend(fontsize=7)
    pts = e["rows"]
    kinds = {r["joules_kind"] for r in pts}
    axes[1].scatter([r["bytes_per_token"] / 1e6 for r in pts], [r["tokens_per_s"] for r in pts], color="tab:blue")
    for r in pts:
        axes[1].annotate(f"{r['format']}\n{r['joules_per_token'] * 1e3:.3g} mJ/token ({r['joules_kind']})",
                         (r["bytes_per_token"] / 1e6, r["tokens_per_s"]), fontsize=6.5)
    axes[1].set_xlabel("MB of weights read per token")
    axes[1].set_ylabel("tokens/s (batch 1)")
    axes[1].set_title("lesson 10's model decoding here; joules " + "/".join(sorted(kinds)), fontsize=9)
    fig.suptitle("Lesson 15: energy per token" + mode_tag(), fontsize=10)
    fig.tight_layout(rect=(0, 0.02, 1, 0.93))
    return save(fig, "lesson15-energy", f"docs/benchmarks/lesson15.json ({L15_COMMAND}; {machine(rec)})")


# ------------------------------------------------------------------------------------------
# name -> (function, the records it reads (docs/benchmarks/...), or the program it runs (a str))
FIGURES = {
    "lesson01-nudge-vs-gradient": (fig_lesson01_curves, "nnlab lesson01 --csv --grid"),
    "lesson01-xor-boundaries": (fig_lesson01_boundaries, "nnlab lesson01 --csv --grid"),
    "lesson02-training-curves": (fig_lesson02_curves, ["lesson02-mlp.md"]),
    "lesson03-ladder": (fig_lesson03_ladder, ["lesson03-matmul.json"]),
    "lesson03-roofline": (fig_lesson03_roofline, ["lesson03-matmul.json", "lesson03-fusion.json"]),
    "lesson03-fusion": (fig_lesson03_fusion, ["lesson03-fusion.json"]),
    "lesson03-layer-shapes": (fig_lesson03_layers, ["lesson03-layers.json"]),
    "lesson04-conv-timings": (fig_lesson04_conv, ["lesson04-conv-bench.json"]),
    "lesson04-training-curves": (fig_lesson04_curves, ["lesson04-cnn.md"]),
    "lesson05-plant-rmse-vs-dead-time": (fig_lesson05_plant, ["lesson05-06-rnn-lstm.md"]),
    "lesson06-gradient-vs-distance": (fig_lesson06_gradients, ["lesson05-06-rnn-lstm.md"]),
    "lesson06-same-budget": (fig_lesson06_chars, ["lesson05-06-rnn-lstm.md"]),
    "lesson06-char-curves": (fig_lesson06_char_curves, "nnlab lesson05/06 --part chars (about 5 min idle, 2 cores)"),
    "lesson07-attention-rows": (fig_lesson07_attention, "nnlab lesson07 --out-dir"),
    "lesson07-scale": (fig_lesson07_scale, "nnlab lesson07 --out-dir"),
    "lesson08-loss-curve": (fig_lesson08_loss, ["lesson08-gpt.md"]),
    "lesson08-attention-maps": (fig_lesson08_attention, "nnlab lesson08 --part train (2000 steps: 2 min idle, far more when the cores are busy), nnlab gpt dump"),
    "lesson09-ladder-emulated": (fig_lesson09_ladder, "nnlab lesson09 --part ladder --device emu --json"),
    "lesson10-kv-cache": (fig_lesson10_kv, ["lesson10-kv.json"]),
    "lesson10-bandwidth-law": (fig_lesson10_law, ["lesson10-law.json"]),
    "lesson10-quantisation": (fig_lesson10_quant, ["lesson10-quant.json"]),
    "lesson10-speculative": (fig_lesson10_speculative, ["lesson10-speculative.json"]),
    "lesson10-prune-sparsity": (fig_lesson10_prune, ["lesson10-prune.json"]),
    "lesson11-flash-attention": (fig_lesson11_flash, ["flash-attention-cpu.md"]),
    "lesson11-bpe-bytes-per-token": (fig_lesson11_bpe, ["lesson11-bpe.json"]),
    "lesson12-speed-law": (fig_lesson12_speed, ["lesson12-speed.json"]),
    "lesson12-vs-transformers": (fig_lesson12_vs_transformers, ["lesson12-vs-transformers.json"]),
    "lesson12-lora": (fig_lesson12_lora, ["lesson12-lora.json"]),
    "lesson13-mpc-steps": (fig_lesson13_mpc, ["lesson13-mpc.json", "lesson13/mpc_setpoint-steps.csv"]),
    "lesson13-mpc-metrics": (fig_lesson13_mpc_metrics, ["lesson13-mpc.json"]),
    "lesson13-soft-sensor": (fig_lesson13_soft_sensor, ["lesson13-soft-sensor.json", "lesson13/soft_sensor_test.csv"]),
    "lesson13-faults": (fig_lesson13_faults, ["lesson13-faults.json"]),
    "lesson14-link": (fig_lesson14_link, ["lesson14.json"]),
    "lesson14-scaling": (fig_lesson14_scaling, ["lesson14.json"]),
    "lesson14-predict": (fig_lesson14_predict, ["lesson14.json"]),
    "lesson14-memory": (fig_lesson14_memory, ["lesson14.json"]),
    "lesson15-int8": (fig_lesson15_int8, ["lesson15.json"]),
    "lesson15-quality": (fig_lesson15_quality, ["lesson15.json"]),
    "lesson15-bitnet": (fig_lesson15_bitnet, ["lesson15.json"]),
    "lesson15-energy": (fig_lesson15_energy, ["lesson15.json"]),
}

# Figures whose records are still being measured (issue 22: lesson 12's records are made where a
# machine is free). --check reports them as pending instead of failing, as long as no text shows
# their PNG yet; once a record exists it is checked like any other. Empty this set when they land.
PENDING_RECORDS = set()


def texts():
    """The Markdown files the course shows: README.md, docs/**.md, lessons/*/README.md."""
    out = [os.path.join(REPO, "README.md")]
    out += sorted(glob.glob(os.path.join(REPO, "docs", "**", "*.md"), recursive=True))
    out += sorted(glob.glob(os.path.join(REPO, "lessons", "*", "README.md")))
    return [p for p in out if os.path.exists(p)]


IMG = re.compile(r"!\[[^\]]*\]\(([^)\s]+\.png)\)")


def is_png(path):
    """A PNG signature followed by an IHDR chunk with a non-zero size."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return False
    w, h = struct.unpack(">II", head[16:24])
    return w > 0 and h > 0


def check():
    """Every PNG a course text shows exists and is a PNG; every figure's record exists. Fast."""
    errors = []
    shown = 0
    for md in texts():
        with open(md, encoding="utf-8") as f:
            body = f.read()
        for target in IMG.findall(body):
            if "://" in target:
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(md), target))
            shown += 1
            if not os.path.exists(path):
                errors.append(f"{rel(md)}: shows {target}, which does not exist "
                              f"(make it: /usr/bin/python3 scripts/make_figures.py --only "
                              f"{os.path.splitext(os.path.basename(target))[0]})")
            elif not is_png(path):
                errors.append(f"{rel(md)}: {target} is not a valid PNG")
            elif os.path.getsize(path) > MAX_BYTES:
                errors.append(f"{rel(md)}: {target} is {os.path.getsize(path)} bytes (limit {MAX_BYTES})")
    for name, (_, records) in FIGURES.items():
        for r in records if isinstance(records, list) else []:
            if not os.path.exists(os.path.join(BENCH, r)):
                if r in PENDING_RECORDS:
                    print(f"pending: figure {name}: its record docs/benchmarks/{r} is not measured yet")
                    continue
                errors.append(f"figure {name}: its record docs/benchmarks/{r} is missing")
    for e in errors:
        print("error: " + e)
    print(f"make_figures --check: {shown} images shown in {len(texts())} texts, "
          f"{len(FIGURES)} figures' records: {'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="make only this figure (repeatable; a prefix such as lesson10 selects several)")
    ap.add_argument("--runs", default=CFG["runs"], help="where program runs go (default out/figures-runs)")
    ap.add_argument("--bin", default=CFG["bin"], help="directory of the nnlab program (default build/release/bin)")
    ap.add_argument("--quick", action="store_true",
                    help="short runs; titles say QUICK RUN; figures go to RUNS/figures, not docs/figures")
    ap.add_argument("--out", help="where the PNGs go (default docs/figures; RUNS/figures with --quick)")
    ap.add_argument("--rerun", action="store_true", help="run the programs again even when a run exists")
    ap.add_argument("--check", action="store_true", help="check the shown images and the records; plot nothing")
    ap.add_argument("--list", action="store_true", help="list the figures and their sources")
    a = ap.parse_args()
    if a.check:
        return check()
    if a.list:
        for name, (fn, records) in FIGURES.items():
            print(f"{name:34s} " + ("docs/benchmarks/" + ", ".join(records) if isinstance(records, list)
                                    else "runs " + records))
        return 0
    CFG.update(bin=os.path.abspath(a.bin), runs=os.path.abspath(a.runs), quick=a.quick, rerun=a.rerun,
                out=os.path.abspath(a.out) if a.out else None)
    names = list(FIGURES)
    if a.only:
        names = [n for n in names if any(n == o or n.startswith(o) for o in a.only)]
        if not names:
            ap.error(f"no figure matches {a.only}; --list shows them")
    for n in names:
        FIGURES[n][0]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
