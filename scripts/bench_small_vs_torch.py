#!/usr/bin/env python3
"""scripts/bench_small_vs_torch.py: lessons 02, 05 and 06 against their PyTorch twins, side by side.

For each model (mlp = lesson 02's training, rnn = lesson 05's character step, lstm = lesson
06's), ROUNDS alternating rounds of: ours at 1 thread, ours at 2 threads, the PyTorch twin
(scripts/small_torch.py) at every thread setting (torch intra-op 1/2 x OpenBLAS 1/2,
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset) keeping the round's best. Medians over the
rounds; ratio = our speed / PyTorch's best (above 1: ours is faster). Writes
docs/benchmarks/mlp-rnn-lstm-vs-pytorch.md (the tables; the analysis below them is kept) and
prints the same.

    /usr/bin/python3 scripts/bench_small_vs_torch.py [--rounds 5] [--models mlp,rnn,lstm]
        [--iters 40] [--bin build/release/bin/nnlab] [--no-write]

Ours: `nnlab lesson06 --part chars --iters N` (its "ms/iteration": training only, validation
excluded), `nnlab lesson05 --part chars ...`, `nnlab lesson02 --part train --epochs 1` (the
epoch's images/s from its log, evaluation excluded), with OMP_NUM_THREADS = 1 or 2.
Timing on a shared machine is noisy: the load average before and after each round is
recorded with the figures.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks", "mlp-rnn-lstm-vs-pytorch.md")
MARK = "<!-- tables above are written by scripts/bench_small_vs_torch.py; the text below is kept -->"


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except OSError:
        return float("nan")


def ours(model, threads, a, tmp):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    if model == "mlp":
        out = os.path.join(tmp, f"l02-{threads}")
        cmd = [a.bin, "lesson02", "--part", "train", "--epochs", "1", "--out-dir", out]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
        for line in open(os.path.join(out, "log.jsonl")):
            r = json.loads(line)
            if r["kind"] == "epoch":
                return r["images_per_s"], cmd
    lesson = "lesson05" if model == "rnn" else "lesson06"
    cmd = [a.bin, lesson, "--part", "chars", "--iters", str(a.iters), "--eval-every", "1000000", "--eval-chunks", "1",
           "--sample-len", "1",
           "--out-dir", os.path.join(tmp, lesson)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    m = re.search(r"\(([0-9.]+) ms/iteration\)", p.stdout)
    if p.returncode != 0 or not m:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stdout[-1500:]}{p.stderr[-1500:]}")
    return float(m.group(1)), cmd


def torch_best(model, a):
    cmd = [a.python, os.path.join(ROOT, "scripts", "small_torch.py"), "bench", model, "--iters", str(a.iters),
           "--warmup", "5", "--settings", a.settings]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return r["best"], r["all"], cmd


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    flags = ""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        pass
    simd = "AVX-512F" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "no AVX2")
    return f"{cpu}, {os.cpu_count()} cores, {simd}, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--models", default="lstm,rnn,mlp")
    ap.add_argument("--iters", type=int, default=40, help="training steps per run of the char models")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "release", "bin", "nnlab"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python with PyTorch")
    ap.add_argument("--settings", default="all", help="PyTorch thread settings (small_torch.py --settings)")
    ap.add_argument("--no-write", action="store_true", help="print only, leave the record alone")
    a = ap.parse_args()
    models = a.models.split(",")
    rows = {m: {"ours1": [], "ours2": [], "torch": [], "torch_setting": []} for m in models}
    loads = []
    cmds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(1, a.rounds + 1):
            for m in models:
                l0 = loadavg()
                v1, cmds[m] = ours(m, 1, a, tmp)
                v2, _ = ours(m, 2, a, tmp)
                best, _, cmds[m + "_torch"] = torch_best(m, a)
                vt = best["img_per_s"] if m == "mlp" else best["ms_per_step"]
                l1 = loadavg()
                loads += [l0, l1]
                rows[m]["ours1"].append(v1)
                rows[m]["ours2"].append(v2)
                rows[m]["torch"].append(vt)
                rows[m]["torch_setting"].append(f"intra={best['intra']},blas={best['blas']}")
                unit = "img/s" if m == "mlp" else "ms/step"
                print(f"round {rnd} {m}: ours 1 thread {v1:.2f}, 2 threads {v2:.2f}, torch best {vt:.2f} {unit} "
                      f"({rows[m]['torch_setting'][-1]}), load {l0:.2f} -> {l1:.2f}", flush=True)

    names = {"mlp": "lesson 02 MLP, training", "rnn": "lesson 05 RNN char step", "lstm": "lesson 06 LSTM char step"}
    table = ["| model | ours 1 thread | ours 2 threads (the default) | PyTorch best (setting) | ratio 1 thr / 2 thr |",
             "|---|---|---|---|---|"]
    for m in models:
        r = rows[m]
        o1, o2, t = (statistics.median(r[k]) for k in ("ours1", "ours2", "torch"))
        setting = max(set(r["torch_setting"]), key=r["torch_setting"].count)
        if m == "mlp":
            ratio = (o1 / t, o2 / t)
            fig = lambda v: f"{v / 1000:.1f}k img/s"  # noqa: E731
        else:
            ratio = (t / o1, t / o2)
            fig = lambda v: f"{v:.1f} ms"  # noqa: E731
        table.append(f"| {names[m]} | {fig(o1)} | {fig(o2)} | {fig(t)} ({setting}) | "
                     f"{ratio[0]:.2f} / **{ratio[1]:.2f}** |")
    raw = ["| model | round values: ours 1 thread; ours 2 threads; PyTorch best |", "|---|---|"]
    for m in models:
        r = rows[m]
        raw.append(f"| {m} | {', '.join(f'{v:.1f}' for v in r['ours1'])}; {', '.join(f'{v:.1f}' for v in r['ours2'])}; "
                   f"{', '.join(f'{v:.1f}' for v in r['torch'])} |")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    head = [
        "# Lessons 02, 05, 06 vs their PyTorch twins (issue 19)",
        "",
        f"Produced by `/usr/bin/python3 scripts/bench_small_vs_torch.py --rounds {a.rounds} --models {a.models} "
        f"--iters {a.iters}` on {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, commit {commit} (plus the working tree).",
        "",
        f"- machine: {machine()}",
        f"- load average during the runs: min {min(loads):.2f}, median {statistics.median(loads):.2f}, "
        f"max {max(loads):.2f} (2 cores: above ~0.5 other work shares them and the figures are noisy)",
        "- peer: PyTorch " + json.loads(subprocess.run([a.python, "-c", "import json,torch;print(json.dumps(torch.__version__))"],
                                                      capture_output=True, text=True).stdout or '"?"')
        + ", scripts/small_torch.py (nn.Sequential of nn.Linear; nn.RNN / nn.LSTM over the chunk; Adam; "
        "clip_grad_norm_), thread settings torch intra-op 1/2 x OpenBLAS 1/2 each round, "
        "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset, best kept",
        f"- ours: `{' '.join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmds.get('lstm', cmds.get(models[0])))}` "
        "and the same for lesson05 / lesson02 `--part train --epochs 1`, OMP_NUM_THREADS 1 and 2",
        f"- medians of {a.rounds} alternating rounds; ratio = our speed / PyTorch's best (> 1: ours is faster); "
        "char steps in ms per training step (lower is better), the MLP in training images/s (higher is better)",
        "",
    ] + table + ["", "Every round's value:", ""] + raw + ["", MARK]
    text = "\n".join(head) + "\n"
    print(text)
    if not a.no_write:
        kept = ""
        if os.path.exists(DOC):
            old = open(DOC).read()
            if MARK in old:
                kept = old.split(MARK, 1)[1]
        with open(DOC, "w") as f:
            f.write(text + kept)
        print(f"wrote {os.path.relpath(DOC, ROOT)}")


if __name__ == "__main__":
    main()
