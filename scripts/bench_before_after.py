#!/usr/bin/env python3
"""scripts/bench_before_after.py: is a refactor slower? Two builds, side by side, one run.

Times the same workloads with two builds of nnlab in alternating rounds on this machine
(so drift of the machine's speed hits both alike) and writes a markdown record:

  gpt-step      `nnlab gpt bench`: the GPT training step (forward, backward, clip, AdamW),
                cpu backend, its default model, 2 threads, ms/step (median of 30 steps)
  gpt-nanogpt   `lesson08 --part flops`: the same at nanoGPT's CPU config, ms/step
  gemm-*        `nnlab bench matmul`: the top CPU rung (v6) and OpenBLAS (the peer,
                cblas_sgemm with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset), GFLOP/s,
                at 1024^3 and at two of the GPT step's small shapes, 2 threads
  lesson02      one epoch of lesson 02's MLP on 12000 Fashion-MNIST images, images/s
  lesson04      one epoch of lesson 04's CNN on 3000 Fashion-MNIST images, images/s
  lesson05/06   the character RNN / LSTM, 60 iterations, ms/iteration

Usage:
  python3 scripts/bench_before_after.py --before REF_OR_BINDIR [--after BINDIR] [--rounds 5]
      [--out docs/benchmarks/NAME.md] [--title TEXT]
REF_OR_BINDIR is a folder holding the `nnlab` and `lessonNN` programs, or a git revision:
then it is checked out in build/before-tree and built there (cpu-only, no tests).
--after defaults to build/release/bin (built first with the release preset).
Each workload's figure is the median over the rounds; "after/before" > 1 means faster
after for throughputs (GFLOP/s, images/s) and is given the same sense for times.
"""
import argparse
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPES = ["1024", "768x384x128", "768x128x384"]  # M x N x K: the step's qkv / fc shapes


def run(cmd, env=None, cwd=None):
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit(f"bench_before_after: `{' '.join(map(str, cmd))}` failed ({p.returncode}):\n{p.stdout[-3000:]}")
    return p.stdout


def build_ref(ref):
    tree = ROOT / "build" / "before-tree"
    if tree.exists():
        run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)])
    run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref])
    run(["cmake", "--preset", "cpu-only", "-DNNLAB_BUILD_TESTS=OFF"], cwd=tree)
    run(["cmake", "--build", "--preset", "cpu-only"], cwd=tree)
    return tree / "build" / "cpu-only" / "bin"


def peer_env():
    env = dict(os.environ)
    for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # set by this workplace; they slow OpenBLAS
        env.pop(k, None)
    return env


def measure(bindir, work, corpus):
    """One round of every workload with the programs in bindir: {workload: value}."""
    env = peer_env()
    out = {}
    j = work / "gpt.json"
    run([bindir / "nnlab", "gpt", "bench", "--no-torch", "--iters", "30", "--warmup", "5", "--json", j], env)
    out["gpt-step ms"] = json.loads(j.read_text())["rows"][0]["ms_per_step"]
    text = run([bindir / "lesson08", "--part", "flops", "--flops-iters", "30"] + corpus, env)
    m = re.search(r"([0-9.]+) ms/step", text)
    out["gpt-nanogpt ms"] = float(m.group(1))
    mm = work / "mm"
    run([bindir / "nnlab", "bench", "matmul", "-v", "v6", "openblas", "-s", *SHAPES, "-t", "2",
         "--repeats", "5", "-o", mm], env)
    for r in json.loads((mm / "matmul.json").read_text())["results"]:
        if r["valid"] and r["timed"]:
            out[f"gemm {r['shape']} {r['variant']} GFLOP/s"] = r["gflops"]
    d = work / "l02"
    run([bindir / "lesson02", "--part", "train", "--epochs", "1", "--limit-train", "12000", "--limit-test",
         "2000", "--threads", "2", "--out-dir", d], env)
    epochs = [json.loads(line) for line in (d / "log.jsonl").read_text().splitlines()]
    out["lesson02 images/s"] = [e for e in epochs if e.get("kind") == "epoch"][-1]["images_per_s"]
    d = work / "l04"
    run([bindir / "lesson04", "--part", "train", "--epochs", "1", "--limit-train", "3000", "--limit-test",
         "500", "--out-dir", d], env)
    epochs = [json.loads(line) for line in (d / "log.jsonl").read_text().splitlines()]
    out["lesson04 images/s"] = [e for e in epochs if e.get("kind") == "epoch"][-1]["images_per_s"]
    for lesson, name in (("lesson05", "rnn"), ("lesson06", "lstm")):
        text = run([bindir / lesson, "--part", "chars", "--iters", "60", "--eval-every", "60", "--out-dir",
                    work / lesson] + corpus_flag(corpus), env)
        m = re.search(r"\(([0-9.]+) ms/iteration\)", text)
        out[f"{lesson} {name} ms/iter"] = float(m.group(1))
    return out


def corpus_flag(corpus):
    return ["--corpus", corpus[1]] if corpus else []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=None)
    ap.add_argument("--title", default="Before and after")
    a = ap.parse_args()
    before = pathlib.Path(a.before)
    before_name = a.before
    if not (before / "nnlab").exists():
        before = build_ref(a.before)
    if a.after:
        after = pathlib.Path(a.after)
    else:
        run(["cmake", "--preset", "release"], cwd=ROOT)
        run(["cmake", "--build", "--preset", "release", "--target", "nnlab", "lesson02", "lesson04", "lesson05",
             "lesson06", "lesson08"], cwd=ROOT)
        after = ROOT / "build" / "release" / "bin"
    shake = [p for p in (ROOT / "data/tinyshakespeare.txt", ROOT.parent / "shared/data/tinyshakespeare.txt")
             if p.exists()]
    corpus = ["--data", str(shake[0])] if shake else []
    rows = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, a.rounds + 1):
            for name, bindir in (("before", before), ("after", after)):
                work = pathlib.Path(tmp) / f"{name}{r}"
                work.mkdir()
                res = measure(bindir, work, corpus)
                rows[name].append(res)
                print(f"round {r} {name}: " + ", ".join(f"{k} {v:.4g}" for k, v in res.items()), flush=True)
    keys = list(rows["after"][0].keys())
    cpu = platform.processor() or ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = run([after / "nnlab", "info"])
    simd = re.search(r"SIMD level\s+(.*)", info)
    lines = [f"# {a.title}", "",
             f"Machine: {cpu}, {os.cpu_count()} cores, SIMD level {simd.group(1) if simd else '?'}. "
             f"Made by `python3 scripts/bench_before_after.py --before {before_name} --rounds {a.rounds}`: "
             f"{a.rounds} rounds alternating between the builds; medians. `before` is `{before_name}`, "
             f"`after` the working tree's release build.", "",
             "| workload | before | after | after vs before | spread of the rounds (before; after) |",
             "|---|---:|---:|---:|---|"]
    slower = []
    for k in keys:
        b = [x[k] for x in rows["before"] if k in x]
        f = [x[k] for x in rows["after"] if k in x]
        if not b or not f:
            continue
        mb, mf = statistics.median(b), statistics.median(f)
        lower_is_better = k.endswith(" ms") or k.endswith("ms/iter")
        speed = (mb / mf) if lower_is_better else (mf / mb)
        spread = f"{min(b):.4g}-{max(b):.4g}; {min(f):.4g}-{max(f):.4g}"
        lines.append(f"| {k} | {mb:.4g} | {mf:.4g} | {speed:.3f}x | {spread} |")
        if speed < 0.97:
            slower.append(f"{k} ({speed:.3f}x)")
    lines += ["", "After vs before: the speed ratio (> 1: faster after), whatever the unit. "
              + ("Slower by more than 3% after: " + ", ".join(slower) + "." if slower else
                 "No workload is more than 3% slower after.")]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text)
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
