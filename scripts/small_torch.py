#!/usr/bin/env python3
"""scripts/small_torch.py: the PyTorch twins of the course's small models, for side-by-side timing.

The same models, batches, optimizers and data as the lessons, written the way PyTorch users
write them:

    mlp   lesson 02: Fashion-MNIST (standardised), MLP 784-256-128-10 with ReLU (nn.Sequential
          of nn.Linear), softmax cross-entropy, Adam lr 1e-3 cosine-decayed to 5%, batch 128,
          shuffled each epoch. Timed: one epoch of training (60000 images), images/s.
    rnn   lesson 05: Tiny Shakespeare as 32 streams x 64 characters (time-major, state carried
          from chunk to chunk and detached: truncated BPTT), one-hot(65) -> nn.RNN(tanh, 256)
          -> nn.Linear(256, 65), cross-entropy over all 2048 positions, clip_grad_norm_(1.0),
          Adam lr 3e-3 cosine-decayed to 10%. Timed: ms per training step.
    lstm  lesson 06: the same with nn.LSTM(65, 256).

nn.RNN / nn.LSTM over the whole chunk is what a PyTorch user writes, and the fastest on CPU
(the alternative, an nn.LSTMCell loop in Python, pays the interpreter per step: --cell-loop
times it).

    /usr/bin/python3 scripts/small_torch.py bench {mlp,rnn,lstm} [--settings all|"intra=1,blas=2"]
        [--iters 30 --warmup 5] [--epochs 1] [--json OUT.json]

runs one subprocess per thread setting (OpenBLAS fixes its thread count when it is loaded),
with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from its environment (this workplace sets
them and they slow OpenBLAS), and prints one line per setting and the best. "all" is torch
intra-op threads 1 and 2 times OpenBLAS threads 1 and 2.

Needs numpy and PyTorch (Debian: python3-numpy python3-torch; run with /usr/bin/python3).
Downloads nothing.
"""

import argparse
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_file(candidates, what):
    for c in candidates:
        if c and os.path.exists(c):
            return c
    sys.exit(f"small_torch.py: {what} not found (looked in {', '.join(c for c in candidates if c)})")


def shakespeare_path():
    return find_file([os.environ.get("NNLAB_CORPUS"), os.path.join(ROOT, "..", "shared", "data", "tinyshakespeare.txt"),
                      os.path.join(ROOT, "..", "..", "shared", "data", "tinyshakespeare.txt"),
                      os.path.join(ROOT, "data", "tinyshakespeare.txt"), "/work/shared/data/tinyshakespeare.txt"],
                     "Tiny Shakespeare (python3 scripts/fetch_data.py tinyshakespeare)")


def fashion_dir():
    return os.path.dirname(find_file([os.path.join(d, "train-images-idx3-ubyte.gz") for d in
                                      [os.environ.get("NNLAB_FASHION", ""), "/usr/share/datasets/fashion-mnist",
                                       os.path.join(ROOT, "data", "fashion-mnist")]], "Fashion-MNIST"))


# ---- the models, as a PyTorch user writes them --------------------------------------------------
def make_seq(kind, V, H):
    import torch.nn as nn

    class CharModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(V, H) if kind == "lstm" else nn.RNN(V, H, nonlinearity="tanh")
            self.head = nn.Linear(H, V)

        def forward(self, x, state):  # x (T, B, V) one-hot, time-major as ours
            hs, state = self.rnn(x, state)
            return self.head(hs), state

    return CharModel()


class StreamBatcher:
    """Our io/text.h StreamBatcher: B streams, each a contiguous slice of the text; chunk k of
    stream s is tokens[s * stream_len + k * T ...]; x and y (T, B) time-major."""

    def __init__(self, tokens, B, T):
        self.tokens, self.B, self.T = tokens, B, T
        self.stream_len = (len(tokens) - 1) // B
        self.chunks = self.stream_len // T
        self.k = 0

    def next(self):
        import torch
        if self.k >= self.chunks:
            self.k = 0
            return None
        starts = torch.arange(self.B) * self.stream_len + self.k * self.T
        idx = starts[None, :] + torch.arange(self.T)[:, None]  # (T, B)
        self.k += 1
        return self.tokens[idx], self.tokens[idx + 1]


def load_chars(path):
    """The text as byte ids and the vocabulary size, as io/text.h builds them: the bytes that
    occur, sorted by value."""
    import torch
    with open(path, "rb") as f:
        data = f.read()
    chars = sorted(set(data))
    lookup = {c: i for i, c in enumerate(chars)}
    return torch.tensor([lookup[c] for c in data], dtype=torch.long), len(chars)


def train_size(n, val_fraction=0.1):
    """io/text.h's split by position: the last int(n * val_fraction) characters are validation."""
    return n - int(n * val_fraction)


def bench_seq(kind, iters, warmup, H=256, B=32, T=64, lr=3e-3, clip=1.0, cell_loop=False):
    import torch
    import torch.nn.functional as F
    ids, V = load_chars(shakespeare_path())
    batcher = StreamBatcher(ids[:train_size(len(ids))], B, T)
    torch.manual_seed(42)
    model = make_seq(kind, V, H)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    total = warmup + iters
    state = None
    cell = None
    if cell_loop:  # the alternative: nn.LSTMCell / nn.RNNCell stepped in Python
        cell = torch.nn.LSTMCell(V, H) if kind == "lstm" else torch.nn.RNNCell(V, H)
        opt = torch.optim.Adam(list(cell.parameters()) + list(model.head.parameters()), lr=lr)
    times = []
    for it in range(total):
        t0 = time.perf_counter()
        for g in opt.param_groups:  # cosine to 10%, as ours
            g["lr"] = lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * it / total)))
        batch = batcher.next()
        if batch is None:
            state = None
            batch = batcher.next()
        x, y = batch
        xs = F.one_hot(x, V).float()  # (T, B, V)
        if state is not None:  # truncated BPTT: the carried state is a constant
            state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
        if cell is None:
            logits, state = model(xs, state)
        else:
            if state is None:
                z = torch.zeros(B, H)
                state = (z, z) if kind == "lstm" else z
            outs = []
            for t in range(T):
                state = cell(xs[t], state)
                outs.append(state[0] if kind == "lstm" else state)
            logits = model.head(torch.stack(outs))
        loss = F.cross_entropy(logits.reshape(T * B, V), y.reshape(T * B))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters() if cell is None else
                                       list(cell.parameters()) + list(model.head.parameters()), clip)
        opt.step()
        times.append(time.perf_counter() - t0)
    ms = 1000 * statistics.median(times[warmup:])
    return {"ms_per_step": ms, "loss": float(loss)}


def load_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def bench_mlp(epochs, B=128, lr=1e-3):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    d = fashion_dir()
    x = torch.from_numpy(load_idx(os.path.join(d, "train-images-idx3-ubyte.gz")).reshape(-1, 784).astype("float32") / 255)
    y = torch.from_numpy(load_idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype("int64"))
    mean, std = x.mean(), x.std()
    x = (x - mean) / std
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8)
    N = x.shape[0]
    steps_per_epoch = (N + B - 1) // B
    total = steps_per_epoch * epochs
    step = 0
    rates = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        perm = torch.randperm(N)
        for s in range(0, N, B):
            idx = perm[s:s + B]
            for g in opt.param_groups:  # cosine to 5%, as ours
                g["lr"] = lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * step / total)))
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
        rates.append(N / (time.perf_counter() - t0))
    return {"img_per_s": max(rates), "loss": float(loss)}


# ---- one setting, in this process -----------------------------------------------------------------
def run_one(a):
    import torch
    torch.set_num_threads(a.intra)
    if a.model == "mlp":
        r = bench_mlp(a.epochs)
    else:
        r = bench_seq(a.model, a.iters, a.warmup, cell_loop=a.cell_loop)
    r.update({"model": a.model, "intra": a.intra, "blas": int(os.environ.get("OPENBLAS_NUM_THREADS", "0")),
              "torch": torch.__version__, "cell_loop": a.cell_loop})
    print(json.dumps(r))


def parse_settings(s):
    if s == "all":
        return [(i, b) for i in (1, 2) for b in (1, 2)]
    out = []
    for part in s.split(";"):
        kv = dict(p.split("=") for p in part.split(","))
        out.append((int(kv["intra"]), int(kv["blas"])))
    return out


def bench(a):
    results = []
    for intra, blas in parse_settings(a.settings):
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
        env["OPENBLAS_NUM_THREADS"] = str(blas)
        cmd = [sys.executable, os.path.abspath(__file__), "one", a.model, "--intra", str(intra), "--iters", str(a.iters),
               "--warmup", str(a.warmup), "--epochs", str(a.epochs)] + (["--cell-loop"] if a.cell_loop else [])
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"small_torch.py: the {a.model} run (intra={intra}, blas={blas}) failed:\n{p.stderr[-2000:]}")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        r["blas"] = blas
        results.append(r)
        fig = f"{r['img_per_s']:.0f} img/s" if a.model == "mlp" else f"{r['ms_per_step']:.2f} ms/step"
        print(f"torch {a.model} intra={intra} blas={blas}: {fig}", flush=True)
    key = (lambda r: -r["img_per_s"]) if a.model == "mlp" else (lambda r: r["ms_per_step"])
    best = min(results, key=key)
    print(json.dumps({"best": best, "all": results}))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"best": best, "all": results}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("bench", "one"):
        p = sub.add_parser(name)
        p.add_argument("model", choices=["mlp", "rnn", "lstm"])
        p.add_argument("--iters", type=int, default=30)
        p.add_argument("--warmup", type=int, default=5)
        p.add_argument("--epochs", type=int, default=1)
        p.add_argument("--cell-loop", action="store_true", help="nn.LSTMCell / nn.RNNCell stepped in Python")
        if name == "bench":
            p.add_argument("--settings", default="all")
            p.add_argument("--json")
        else:
            p.add_argument("--intra", type=int, default=1)
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("small_torch.py: needs PyTorch (Debian: python3-torch; run with /usr/bin/python3)")
    run_one(a) if a.cmd == "one" else bench(a)


if __name__ == "__main__":
    main()
