#!/usr/bin/env python3
"""Writes notebooks/04-cnn.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_04_cnn.py
The test suite executes the written notebook (notebooks/CMakeLists.txt)."""
import os
import nbformat as nbf
nb = nbf.v4.new_notebook()
md = lambda s: nbf.v4.new_markdown_cell(s.strip("\n"))
code = lambda s: nbf.v4.new_code_cell(s.strip("\n"))
cells = []
cells.append(md(r'''
# Lesson 04: a convolutional network on Fashion-MNIST

This notebook runs the lesson-04 programs, then reads what they wrote and looks at it:

1. the loss and accuracy curves, from `log.jsonl`;
2. the 32 learned first-layer filters, read from the checkpoint `cnn.safetensors` with numpy;
3. the feature maps of one test image after each conv block, from `features.safetensors`;
4. translation equivariance: the first layer's maps of an image and of the same image shifted;
5. the confusion matrix and per-class accuracy, from `confusion.csv`;
6. naive loops vs im2col + sgemm, from `bench.json` (`--part bench`).

Under the test suite (`NNLAB_QUICK=1`) it trains one epoch on a small slice and times a
small batch; run it yourself for the full default run (6 epochs: about 7 minutes on 2 idle
cores, see `docs/benchmarks/lesson04-cnn.md`).
'''))
cells.append(code(r'''
import json, os, struct, subprocess
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
out_dir = os.path.abspath("lesson04-run")

# Passive OpenMP waiting: on a machine shared with other jobs, spinning threads waste whole
# time slices (README section 7). Set OMP_WAIT_POLICY yourself to override.
env = dict(os.environ)
env.setdefault("OMP_WAIT_POLICY", "passive")

def run(args):
    print(" ".join(args))
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    print(r.stdout[-2500:])
    if r.returncode != 0:
        print(r.stderr)
        raise RuntimeError(f"{args[1]} failed with exit status {r.returncode}")

train_args = [nnlab, "lesson04", "--part", "train", "--out-dir", out_dir]
bench_args = [nnlab, "lesson04", "--part", "bench", "--out-dir", out_dir]
if quick:
    train_args += ["--epochs", "1", "--limit-train", "3000", "--limit-test", "1000"]
    bench_args += ["--bench-batch", "8", "--repeats", "3"]
else:
    bench_args += ["--bench-batch", "64"]
run(train_args)
run(bench_args)
'''))
cells.append(md(r'''
## Loss and accuracy

A `step` record every 50 steps (that mini-batch's loss), an `epoch` record per pass (mean
training loss and accuracy, test loss and accuracy). With dropout on, the training
accuracy is measured on a handicapped network: it can sit *below* the test accuracy early on.
'''))
cells.append(code(r'''
records = [json.loads(line) for line in open(os.path.join(out_dir, "log.jsonl"))]
steps = [r for r in records if r["kind"] == "step"]
epochs = [r for r in records if r["kind"] == "epoch"]
assert epochs, "the log has no epoch records"
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
ax1.plot([r["step"] for r in steps], [r["loss"] for r in steps], lw=0.8, label="mini-batch loss")
ax1.plot([r["step"] for r in epochs], [r["train_loss"] for r in epochs], "o-", label="train loss (epoch mean)")
ax1.plot([r["step"] for r in epochs], [r["test_loss"] for r in epochs], "s-", label="test loss")
ax1.set_xlabel("step"); ax1.set_ylabel("cross-entropy"); ax1.legend(); ax1.grid(alpha=0.3)
ax2.plot([r["epoch"] for r in epochs], [100 * r["train_acc"] for r in epochs], "o-", label="train")
ax2.plot([r["epoch"] for r in epochs], [100 * r["test_acc"] for r in epochs], "s-", label="test")
ax2.set_xlabel("epoch"); ax2.set_ylabel("accuracy (%)"); ax2.legend(); ax2.grid(alpha=0.3)
plt.tight_layout(); plt.show()
last = epochs[-1]
print(f"final test accuracy {100 * last['test_acc']:.2f}% after {last['epoch']} epochs, "
      f"{last['images_per_s']:.0f} images/s in the last epoch")
'''))
cells.append(md(r'''
## The learned first-layer filters

`conv1.weight` is (32, 1, 3, 3): 32 filters of 3x3, each applied at every position of the
image. Read from the safetensors checkpoint with a few lines of numpy. After training many
look like small edge and blob detectors: a bright-dark step in some direction, a centre
brighter than its surround. (After the quick run they are still close to their random start.)
'''))
cells.append(code(r'''
def load_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"])
    return tensors, header.get("__metadata__", {})

params, meta = load_safetensors(os.path.join(out_dir, "cnn.safetensors"))
print({k: v.shape for k, v in params.items()})
print(meta)
w1 = params["conv1.weight"]
assert w1.shape[1:] == (1, 3, 3)
fig, axes = plt.subplots(4, 8, figsize=(10, 5.2))
for ax, f in zip(axes.flat, w1[:, 0]):
    lim = np.abs(f).max()
    ax.imshow(f, cmap="RdBu", vmin=-lim, vmax=lim)
    ax.axis("off")
plt.suptitle("conv1's 32 filters (red -, blue +)")
plt.tight_layout(); plt.show()
'''))
cells.append(md(r'''
## Feature maps of one test image

`features.safetensors` holds test image 0 (standardised) and what every conv block made of
it: `conv1.act` (32 maps of 28x28 after ReLU), `conv2.act` (64 maps of 14x14). Each conv1
map is the image seen through one filter above: edges of one orientation lit, the rest dark.
conv2's maps are coarser and harder to name: they combine conv1's.
'''))
cells.append(code(r'''
classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
feats, fmeta = load_safetensors(os.path.join(out_dir, "features.safetensors"))
image = feats["image"][0]
label, pred = int(fmeta["label"]), int(fmeta["prediction"])
print(f"test image {fmeta['index']}: {classes[label]}, predicted {classes[pred]}")
for name, count in [("conv1.act", 16), ("conv2.act", 16)]:
    maps = feats[name]
    fig, axes = plt.subplots(2, count // 2 + 1, figsize=(13, 3.4))
    axes[0, 0].imshow(image, cmap="gray_r"); axes[0, 0].set_title("input", fontsize=8)
    axes[1, 0].axis("off")
    for i, ax in enumerate(axes[:, 1:].T.flat):
        ax.imshow(maps[i], cmap="viridis"); ax.set_title(f"{name.split('.')[0]} #{i}", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([]); ax.set_yticks([])
    plt.suptitle(f"{name}: {maps.shape[0]} maps of {maps.shape[1]}x{maps.shape[2]} (first {count})")
    plt.tight_layout(); plt.show()
'''))
cells.append(md(r'''
## Translation equivariance, checked with numpy

A convolution commutes with shifts: conv(shift(x)) = shift(conv(x)), away from the border.
Below, conv1 is recomputed in numpy from the checkpoint's weights (sliding windows: the
same sum as `conv2d_forward_loops`, zero padding) on the image and on the image moved 3
pixels right. (The padding's zeros are zeros of the *standardised* image, i.e. the mean
pixel, not black: one reason the maps near the border differ.)
'''))
cells.append(code(r'''
from numpy.lib.stride_tricks import sliding_window_view
def conv1_numpy(img):
    padded = np.pad(img, 1)                                 # zero padding, as conv2d_forward_* does
    windows = sliding_window_view(padded, (3, 3))           # (28, 28, 3, 3)
    return np.einsum("hwij,oij->ohw", windows, w1[:, 0]) + params["conv1.bias"][:, None, None]
shifted = np.roll(image, 3, axis=1)
a, b = conv1_numpy(image), conv1_numpy(shifted)
err = np.abs(np.roll(a, 3, axis=2)[:, :, 4:-4] - b[:, :, 4:-4]).max()
print(f"max |shift(conv(x)) - conv(shift(x))| away from the border: {err:.2e}")
assert err < 1e-4
np.testing.assert_allclose(np.maximum(a, 0), feats["conv1.act"], atol=1e-3)  # numpy agrees with the C++ run
k = int(np.argmax(feats["conv1.act"].reshape(32, -1).std(axis=1)))
fig, axes = plt.subplots(1, 4, figsize=(10, 2.8))
for ax, m, t in zip(axes, [image, np.maximum(a[k], 0), shifted, np.maximum(b[k], 0)],
                    ["image", f"conv1 #{k}", "shifted 3 px", f"conv1 #{k} of shifted"]):
    ax.imshow(m, cmap="gray_r" if "image" in t or "shifted 3" in t else "viridis"); ax.set_title(t, fontsize=9); ax.axis("off")
plt.tight_layout(); plt.show()
'''))
cells.append(md(r'''
## Confusion matrix

Row = true class, column = predicted class, from `confusion.csv`. The diagonal is what the
model gets right. The classic confusions survive the CNN: Shirt vs T-shirt/top, Pullover
and Coat; footwear is almost never confused with clothing.
'''))
cells.append(code(r'''
conf = np.loadtxt(os.path.join(out_dir, "confusion.csv"), delimiter=",", skiprows=1, dtype=int)[:, 1:]
assert conf.shape == (10, 10)
per_class = conf.diagonal() / np.maximum(conf.sum(axis=1), 1)
fig, ax = plt.subplots(figsize=(7.5, 6.5))
ax.imshow(np.log1p(conf), cmap="Blues")
for t in range(10):
    for p in range(10):
        ax.text(p, t, conf[t, p], ha="center", va="center", fontsize=7,
                color="white" if conf[t, p] > conf.max() / 2 else "black")
ax.set_xticks(range(10)); ax.set_xticklabels(classes, rotation=45, ha="right")
ax.set_yticks(range(10)); ax.set_yticklabels([f"{c} ({100 * a:.1f}%)" for c, a in zip(classes, per_class)])
ax.set_xlabel("predicted"); ax.set_ylabel("true (per-class accuracy)")
plt.tight_layout(); plt.show()
print(f"overall accuracy from the matrix: {100 * conf.trace() / conf.sum():.2f}% of {conf.sum()} images")
'''))
cells.append(md(r'''
## Naive loops vs im2col + sgemm

`--part bench` validates the im2col path against the loops, then times both on this
lesson's two conv layers (median of several runs). The loops run on one thread at about
one GFLOP/s whatever the layer; im2col + sgemm turns the second layer (288 x 3,136 per 16
images) into a product the matmul handles well, and helps the first (only 9 rows) much less.
'''))
cells.append(code(r'''
bench = json.load(open(os.path.join(out_dir, "bench.json")))
rows = bench["layers"]
labels = [f"{r['layer']}\n{r['pass']}" for r in rows]
x = np.arange(len(rows))
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
ax1.bar(x - 0.2, [1e3 * r["loops_s"] for r in rows], 0.4, label="naive loops")
ax1.bar(x + 0.2, [1e3 * r["im2col_s"] for r in rows], 0.4, label="im2col + sgemm")
ax1.set_yscale("log"); ax1.set_xticks(x); ax1.set_xticklabels(labels); ax1.set_ylabel("ms per call (log)")
ax1.set_title(f"batch {bench['batch']}, {bench['threads']} threads"); ax1.legend()
ax2.bar(x - 0.2, [r["flops"] / r["loops_s"] * 1e-9 for r in rows], 0.4, label="naive loops")
ax2.bar(x + 0.2, [r["flops"] / r["im2col_s"] * 1e-9 for r in rows], 0.4, label="im2col + sgemm")
ax2.set_xticks(x); ax2.set_xticklabels(labels); ax2.set_ylabel("GFLOP/s"); ax2.legend()
plt.tight_layout(); plt.show()
for r in rows:
    print(f"{r['layer']} {r['pass']:8s} {r['shape']:22s} loops {1e3 * r['loops_s']:8.2f} ms, "
          f"im2col {1e3 * r['im2col_s']:7.2f} ms: {r['loops_s'] / r['im2col_s']:5.1f}x; "
          f"im2col matrix {r['col_bytes'] / 1e6:.1f} MB vs input {r['inp_bytes'] / 1e6:.2f} MB")
'''))
nb.cells = cells
nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb.metadata["language_info"] = {"name": "python"}
nbf.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "04-cnn.ipynb"))
print("ok")
