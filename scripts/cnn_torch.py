#!/usr/bin/env python3
"""Lesson 04's CNN in PyTorch: the twin that `scripts/bench_lesson04.sh` times side by side
with `lesson04 --part speed`, and that tests/python/test_cnn_torch.py checks against ours.

Same model as lessons/04-cnn/model.h (1x28x28 -> [conv3x3 pad 1, relu, maxpool 2] x (32, 64)
-> flatten 3136 -> fc 128, relu, dropout 0.25 -> fc 10), same loss (cross-entropy), optimizer
(Adam, lr 1e-3, betas 0.9/0.999, eps 1e-8), batch (64), data (Fashion-MNIST, standardised
with the training set's pixel mean and std) and evaluation batch (250).

  bench  --threads T --format contiguous|channels_last --steps N --repeats R
         prints "speed     torch threads T format F train_img_s X infer_img_s Y (...)", the
         median of R rounds of N training steps and N inference batches, the line format of
         `lesson04 --part speed`.
  eval   --checkpoint out/lesson04/cnn.safetensors: loads OUR checkpoint into the twin and
         prints the test loss and accuracy in the format of `lesson04 --part eval`.
  grads  --checkpoint ... --out FILE: one forward + backward (eval mode: no dropout) of the
         first 64 training images on our weights; writes the loss and every gradient
         (.npz) for the parity test to compare with ours.

Run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (this workplace sets them, and they
slow OpenBLAS); the bench script does.
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import sys
import time

import numpy as np


def load_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    sys.exit(f"cnn_torch.py: {stem} not found in {data_dir}")


def load_data(data_dir):
    xtr = load_idx(find(data_dir, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    ytr = load_idx(find(data_dir, "train-labels-idx1-ubyte")).astype(np.int64)
    xte = load_idx(find(data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    yte = load_idx(find(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    return xtr, ytr, xte, yte


def build(torch, channels=(32, 64), hidden=128, classes=10, dropout=0.25):
    nn = torch.nn
    layers, c, hw = [], 1, 28
    for oc in channels:
        layers += [nn.Conv2d(c, oc, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        c, hw = oc, hw // 2
    layers += [nn.Flatten(), nn.Linear(c * hw * hw, hidden), nn.ReLU(), nn.Dropout(dropout),
               nn.Linear(hidden, classes)]
    return nn.Sequential(*layers)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        tensors[name] = np.frombuffer(blob[a:b], dtype=np.float32).reshape(t["shape"]).copy()
    return tensors, meta


# ours -> the Sequential's indices: conv blocks are 3 modules each, then flatten, fc1, relu,
# dropout, fc2.
def load_ours(torch, model, path):
    tensors, meta = read_safetensors(path)
    convs = [m for m in model if isinstance(m, torch.nn.Conv2d)]
    fcs = [m for m in model if isinstance(m, torch.nn.Linear)]
    names = [(f"conv{i + 1}", m) for i, m in enumerate(convs)] + [("fc1", fcs[0]), ("fc2", fcs[1])]
    with torch.no_grad():
        for name, m in names:
            m.weight.copy_(torch.from_numpy(tensors[name + ".weight"]).reshape(m.weight.shape))
            m.bias.copy_(torch.from_numpy(tensors[name + ".bias"]))
    return meta, names


def standardise(x, mean, std):
    return ((x - mean) / std).reshape(-1, 1, 28, 28).astype(np.float32)


def cmd_bench(args):
    import torch
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    xtr, ytr, xte, _ = load_data(args.data_dir)
    mean, std = float(xtr.mean()), float(xtr.std())
    xtr = torch.from_numpy(standardise(xtr, mean, std))
    ytr = torch.from_numpy(ytr)
    xte = torch.from_numpy(standardise(xte[:250], mean, std))
    fmt = torch.channels_last if args.format == "channels_last" else torch.contiguous_format
    model = build(torch).to(memory_format=fmt)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = torch.nn.CrossEntropyLoss()
    xte = xte.contiguous(memory_format=fmt)
    g = torch.Generator().manual_seed(args.seed)
    perm = torch.randperm(xtr.shape[0], generator=g)
    pos = [0]

    def train_step():
        nonlocal perm
        if pos[0] + args.batch > xtr.shape[0]:
            perm = torch.randperm(xtr.shape[0], generator=g)
            pos[0] = 0
        idx = perm[pos[0]:pos[0] + args.batch]
        pos[0] += args.batch
        x = xtr[idx].contiguous(memory_format=fmt)  # the batch gather is part of a step, as ours
        y = ytr[idx]
        model.train()
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return x.shape[0]

    for _ in range(5):
        train_step()
    model.eval()
    with torch.no_grad():
        model(xte)
    train_ips, infer_ips = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        n = sum(train_step() for _ in range(args.steps))
        train_ips.append(n / (time.perf_counter() - t0))
        model.eval()
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(args.steps):
                model(xte)
            infer_ips.append(xte.shape[0] * args.steps / (time.perf_counter() - t0))
    print(f"speed     torch threads {args.threads} format {args.format} "
          f"train_img_s {statistics.median(train_ips):.0f} infer_img_s {statistics.median(infer_ips):.0f} "
          f"(batch {args.batch} / {xte.shape[0]}, median of {args.repeats} x {args.steps} steps, torch "
          f"{torch.__version__}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}, "
          f"mkldnn {torch.backends.mkldnn.is_available()})")


def cmd_eval(args):
    import torch
    torch.set_num_threads(args.threads)
    model = build(torch)
    meta, _ = load_ours(torch, model, args.checkpoint)
    xtr, _, xte, yte = load_data(args.data_dir)
    mean = float(meta.get("pixel_mean", xtr.mean()))
    std = float(meta.get("pixel_std", xtr.std()))
    x = torch.from_numpy(standardise(xte, mean, std))
    y = torch.from_numpy(yte)
    model.eval()
    total, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 250):
            logits = model(x[i:i + 250])
            total += torch.nn.functional.cross_entropy(logits, y[i:i + 250], reduction="sum").item()
            correct += (logits.argmax(1) == y[i:i + 250]).sum().item()
    print(f"result    test accuracy {100.0 * correct / x.shape[0]:.2f}% ({x.shape[0]} images), "
          f"test loss {total / x.shape[0]:.4f}")


def cmd_grads(args):
    import torch
    torch.set_num_threads(1)
    model = build(torch).double()
    meta, names = load_ours(torch, model, args.checkpoint)
    xtr, ytr, _, _ = load_data(args.data_dir)
    mean = float(meta.get("pixel_mean", xtr.mean()))
    std = float(meta.get("pixel_std", xtr.std()))
    x = torch.from_numpy(standardise(xtr[:args.batch], mean, std)).double()
    y = torch.from_numpy(ytr[:args.batch])
    model.eval()  # no dropout: the comparison needs the same function on both sides
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    out = {"loss": np.array(loss.item())}
    for name, m in names:
        out[name + ".weight"] = m.weight.grad.numpy()
        out[name + ".bias"] = m.bias.grad.numpy()
    np.savez(args.out, **out)
    print(f"loss {loss.item():.9f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("bench")
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--format", choices=["contiguous", "channels_last"], default="channels_last")
    b.add_argument("--steps", type=int, default=50)
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--batch", type=int, default=64)
    b.add_argument("--seed", type=int, default=42)
    e = sub.add_parser("eval")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--threads", type=int, default=1)
    g = sub.add_parser("grads")
    g.add_argument("--checkpoint", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    {"bench": cmd_bench, "eval": cmd_eval, "grads": cmd_grads}[args.cmd](args)


if __name__ == "__main__":
    main()
