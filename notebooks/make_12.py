#!/usr/bin/env python3
"""Writes notebooks/12-real-models.ipynb (cells only, no outputs): edit the cells here, then run
    /usr/bin/python3 notebooks/make_12.py
(ctest executes the notebook with NNLAB_QUICK=1; see notebooks/CMakeLists.txt.)

Lesson 12 by hand, in numpy, offline (no model is downloaded, no Hugging Face package needed):
  - a safetensors file written and read byte by byte, then the header of a checkpoint our own
    C++ code wrote (`nnlab gpt train`, a few milliseconds at a tiny size);
  - GPT-2's Conv1D transpose and the fused c_attn split, checked by computing y both ways (and
    the square-matrix trap);
  - the LoRA update: forward, backward against finite differences, B = 0, merging, and the
    parameter counts of section 12 as formulas;
  - the bandwidth law's predictions from the shapes (section 9);
  - `lesson12 --part <each> --quick --json` and the committed records
    (docs/benchmarks/lesson12-*.json), plotted when they exist and reported as not measured yet
    when they do not.
"""
import os

import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

setup = '''import json, os, struct, subprocess
import numpy as np
import matplotlib.pyplot as plt

src = os.environ.get("NNLAB_SOURCE_DIR", os.path.abspath(".."))
# Opened in Jupyter from notebooks/, everything this notebook writes goes to notebooks/out/,
# which git ignores; run_notebook.py runs it in a scratch folder instead.
if os.path.exists("run_notebook.py"):
    os.makedirs("out", exist_ok=True)
    os.chdir("out")
bin_dir = os.environ.get("NNLAB_BIN_DIR", os.path.join(src, "build", "release", "bin"))
quick = os.environ.get("NNLAB_QUICK") == "1"
nnlab = os.path.join(bin_dir, "nnlab")
# the stand-alone program when it is built, else the front door's subcommand (same flags)
if os.path.exists(os.path.join(bin_dir, "lesson12")):
    lesson12 = [os.path.join(bin_dir, "lesson12")]
else:
    lesson12 = [nnlab, "lesson12"]
SCHEMA = "nnlab-lesson12/1"
rng = np.random.default_rng(12)

def machine_title(rec):
    m = rec.get("machine", {})
    t = f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, {m.get('omp_max_threads', '?')} threads, {m.get('date', '')}"
    if m.get("quick") or rec.get("quick"):
        t += "  [QUICK: tiny sizes: a pipeline check, not a measurement]"
    return t

def print_table(header, rows):
    """Plain aligned columns (no pandas)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for j, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if j == 0:
            print("  ".join("-" * w for w in widths))

print("lesson 12:", " ".join(lesson12), "| quick" if quick else "")'''

write_st = '''# A safetensors file by hand: 8 bytes of header length, the JSON header, the data.
def f32_to_bf16_bits(a):
    """fp32 -> bf16 by rounding to nearest even on the top 16 bits (what kernels::float_to_bf16 does)."""
    a = np.asarray(a, dtype=np.float32)
    u = np.atleast_1d(a).view(np.uint32).astype(np.uint64)
    u = (u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return u.astype(np.uint16).reshape(a.shape)

def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> (dtype string, numpy array of the stored bytes' type)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # pad so the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

wte = np.array([[1.0, -2.0], [0.5, 3.140625]], dtype=np.float32)
write_safetensors("tiny.safetensors", {"wte": ("BF16", f32_to_bf16_bits(wte))})
data = open("tiny.safetensors", "rb").read()
for i in range(0, len(data), 16):  # the README's hex dump, made here
    chunk = data[i:i + 16]
    print(f"{i:08x}  " + " ".join(f"{b:02x}" for b in chunk).ljust(48) + "  "
          + "".join(chr(b) if 32 <= b < 127 else "." for b in chunk))'''

read_st = '''# ... and read back by hand, with the checks a reader of outside files must make.
DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}

def read_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    assert 8 + n <= len(data), "header longer than the file"
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    out, spans = {}, []
    for name, t in header.items():
        np_type, size = DTYPES[t["dtype"]]
        begin, end = t["data_offsets"]
        assert 0 <= begin <= end <= len(body), f"{name}: offsets outside the data"
        assert end - begin == int(np.prod(t["shape"], dtype=np.int64)) * size, f"{name}: size != shape x dtype"
        spans.append((begin, end, name))
        a = np.frombuffer(body[begin:end], dtype=np.dtype(np_type).newbyteorder("<")).reshape(t["shape"])
        if t["dtype"] == "BF16":  # bf16 -> fp32 exactly: the 16 bits become fp32's top 16
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np.float32)
    spans.sort()
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        assert e0 <= b1, f"{n0} and {n1} overlap"
    return out, meta, n

t, meta, n = read_safetensors("tiny.safetensors")
print("header bytes:", n, "| wte =", t["wte"].tolist())
assert np.array_equal(t["wte"], wte), "these four values are exact in bf16"
# bf16 keeps 8 significant bits: pi is not one of its numbers
pi_bf16 = (f32_to_bf16_bits(np.array([np.pi], dtype=np.float32)).astype(np.uint32) << np.uint32(16)).view(np.float32)
print("pi stored as bf16 reads back as", float(pi_bf16[0]), "(8 significant bits; fp32 holds 3.1415927)")'''

read_ours = '''# The same reader on a checkpoint our C++ code wrote (lesson 08's format is safetensors too):
# a GPT trained for 2 steps at a tiny size, a fraction of a second.
ckdir = os.path.abspath("tiny-gpt")
cmd = [nnlab, "gpt", "train", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8",
       "--max-iters", "2", "--batch-size", "2", "--eval-interval", "2", "--eval-iters", "1",
       "--out-dir", ckdir, "--overwrite", "--log", "none"]
r = subprocess.run(cmd, capture_output=True, text=True)
if r.returncode != 0:
    raise RuntimeError("nnlab gpt train failed: " + (r.stderr.strip().splitlines() or ["no message"])[-1])
ck, meta, n = read_safetensors(os.path.join(ckdir, "last.safetensors"))
print(f"{len(ck)} tensors, header {n} bytes; metadata keys: {sorted(meta)[:8]} ...")
print_table(["tensor", "shape"], [[k, tuple(v.shape)] for k, v in sorted(ck.items()) if not k.startswith("adam")][:10])
# Our c_attn is (3C, C) = (out, in): GPT-2's file would hold it as (C, 3C).
print("our h.0.attn.c_attn.weight:", ck["h.0.attn.c_attn.weight"].shape, "(out, in)")'''

conv1d = '''# GPT-2's Conv1D: y = x @ W + b with W (in, out). Ours: y = W' x + b with W' (out, in) = W^T.
C = 8
x = rng.standard_normal(C).astype(np.float32)
c_fc = rng.standard_normal((C, 4 * C)).astype(np.float32)        # as stored in GPT-2's file
b_fc = rng.standard_normal(4 * C).astype(np.float32)
ours = np.ascontiguousarray(c_fc.T)                               # (4C, C): exercise 25's map
print("c_fc: GPT-2", c_fc.shape, "-> ours", ours.shape, "| max |diff| of y:",
      np.abs((x @ c_fc + b_fc) - (ours @ x + b_fc)).max())

# The fused c_attn (C, 3C): columns [q | k | v]. Transposed, its rows are [q | k | v]: our layout.
c_attn = rng.standard_normal((C, 3 * C)).astype(np.float32)
b_attn = rng.standard_normal(3 * C).astype(np.float32)
qkv_ours = c_attn.T
q = c_attn[:, 0:C].T                                              # column block, transposed
q_wrong = c_attn.reshape(3 * C, C)[0:C]                           # rows of the file: the trap
y_hf = (x @ c_attn + b_attn)[0:C]
print("q from the column block: max |diff|", np.abs(q @ x + b_attn[:C] - y_hf).max(),
      "| from the first C rows of the file:", np.abs(q_wrong @ x + b_attn[:C] - y_hf).max())

# The square trap: attn.c_proj is (C, C), so forgetting the transpose still "loads".
c_proj = rng.standard_normal((C, C)).astype(np.float32)
print("c_proj without the transpose: same shape", c_proj.shape, "but max |diff| of y",
      np.abs(c_proj @ x - x @ c_proj).max(), "(only comparing outputs catches it)")'''

lora = '''# LoRA in numpy: y = x W^T + b + s (x A^T) B^T, s = alpha / r (exercise 26), in double.
N, IN, OUT, r, alpha = 3, 12, 10, 4, 8.0
s = alpha / r
xl = rng.standard_normal((N, IN)); W = rng.standard_normal((OUT, IN)); b = rng.standard_normal(OUT)
A = rng.uniform(-1, 1, (r, IN)) / np.sqrt(IN)                      # PEFT's Kaiming-uniform
B = np.zeros((OUT, r))                                             # B = 0: the base model exactly

def forward(x, A, B):
    h = x @ A.T                                                    # (N, r): never form B A
    return x @ W.T + b + s * h @ B.T, h

y0, _ = forward(xl, A, B)
print("B = 0: adapted == base:", np.array_equal(y0, xl @ W.T + b))

B = rng.standard_normal((OUT, r)) * 0.1                            # as if trained for a while
dy = rng.standard_normal((N, OUT))                                 # L = sum(dy * y)
y, h = forward(xl, A, B)
dB = s * dy.T @ h; dh = s * dy @ B; dA = dh.T @ xl; dx = dy @ W + dh @ A

def numeric(f, v, eps=1e-6):
    g = np.zeros_like(v)
    for i in np.ndindex(v.shape):
        keep = v[i]; v[i] = keep + eps; up = f(); v[i] = keep - eps; down = f(); v[i] = keep
        g[i] = (up - down) / (2 * eps)
    return g

L = lambda: float(np.sum(dy * forward(xl, A, B)[0]))
for name, ana, var in [("dA", dA, A), ("dB", dB, B), ("dx", dx, xl)]:
    num = numeric(L, var)
    print(f"{name}: max relative error against finite differences {np.abs(ana - num).max() / np.abs(num).max():.1e}")

# Merging (exercise 27): x (W + s B A)^T + b computes the same y.
W_merged = W + s * B @ A
print("merged Linear vs base + adapter: max |diff|", np.abs(xl @ W_merged.T + b - y).max())
# And with B = 0, A's gradient is exactly zero on the first step, B's is not:
B0 = np.zeros((OUT, r)); _, h0 = forward(xl, A, B0)
print("first step: |dA| =", np.abs((s * dy @ B0).T @ xl).max(), "| |dB| =", np.abs(s * dy.T @ h0).max())'''

counts = '''# Section 12's counts as formulas: GPT-2 (L, C) on all four projections, 16 r C per layer.
def lora_params(L, C, r):
    return L * r * ((C + 3 * C) + (C + C) + (C + 4 * C) + (4 * C + C))

def gpt2_params(L, C, V=50257, T=1024):
    return L * (12 * C * C + 13 * C) + 2 * C + V * C + T * C

ranks = [1, 2, 4, 8, 16, 32, 64]
rows = []
for name, L, C in [("GPT-2 124M", 12, 768), ("GPT-2 355M", 24, 1024)]:
    full = gpt2_params(L, C)
    for rr in ranks:
        p = lora_params(L, C, rr)
        rows.append([name, rr, f"{p:,}", f"{100 * p / full:.2f}%", f"{8 * p / 1e6:.1f} MB", f"{8 * full / 1e6:.0f} MB"])
print_table(["model", "r", "LoRA trainable", "of the model", "AdamW m+v", "full FT m+v"], rows)
assert lora_params(12, 768, 8) == 1_179_648 and gpt2_params(12, 768) == 124_439_808

fig, ax = plt.subplots(figsize=(6.5, 3.8))
for name, L, C in [("GPT-2 124M", 12, 768), ("GPT-2 355M", 24, 1024)]:
    line, = ax.plot(ranks, [lora_params(L, C, rr) for rr in ranks], "o-", label=f"{name}: LoRA, 16 r C L")
    ax.axhline(gpt2_params(L, C), color=line.get_color(), ls="--", lw=0.8, label=f"{name}: full fine-tuning")
ax.set_xscale("log", base=2); ax.set_yscale("log")
ax.set_xlabel("rank r"); ax.set_ylabel("trainable parameters")
ax.set_title("trainable parameters, computed from the shapes (not measured)", fontsize=9)
ax.grid(alpha=0.3, which="both"); ax.legend(fontsize=7)
plt.tight_layout(); plt.show()'''

law = '''# Section 9's bytes per token from the shapes (gpt::InferenceModel::weight_bytes_per_token's count).
def bytes_per_token(L, C, V, fmt):
    mats = [(3 * C, C), (C, C), (4 * C, C), (C, 4 * C)] * L + [(V, C)]     # the head: wte, tied
    b = 0
    for rows_, cols in mats:
        n = rows_ * cols
        b += {"fp32": 4 * n, "bf16": 2 * n, "int8": n + 4 * rows_, "int4": n // 2 + 4 * rows_ * (cols // 32)}[fmt]
    return b + 4 * (13 * C * L + 2 * C) + 4 * 2 * C                         # vectors, one wte + wpe row

bw = 26.3e9  # lesson 10's recording machine's triad; part speed measures yours
fmts = ["fp32", "bf16", "int8", "int4"]
rows = []
for name, L, C in [("GPT-2 124M", 12, 768), ("GPT-2 355M", 24, 1024)]:
    rows.append([name] + [f"{bytes_per_token(L, C, 50257, f) / 1e6:.1f} MB, {bw / bytes_per_token(L, C, 50257, f):.1f}/s" for f in fmts])
print_table(["model (at 26.3 GB/s)"] + fmts, rows)
assert bytes_per_token(12, 768, 50257, "fp32") == 494_619_648'''

run_cell = '''# Each part in its quick mode, each with its own record; a failing part stops the notebook.
parts = {}
for part in ("hf", "speed", "lora"):
    path = os.path.abspath(f"lesson12-{part}.json")
    if os.path.exists(path):
        os.remove(path)  # never plot a record from an earlier run
    cmd = [*lesson12, "--part", part, "--json", path] + (["--quick"] if quick else [])
    print(" ".join(cmd))
    r = subprocess.run(cmd, capture_output=True, text=True)
    print(r.stdout[-4000:])
    if r.returncode != 0:
        print(r.stderr[-4000:])
        raise RuntimeError(f"lesson12 --part {part} failed (exit status {r.returncode}): "
                           + (r.stderr.strip().splitlines() or ["no message"])[-1])
    with open(path) as f:
        rec = json.load(f)
    if rec.get("schema") != SCHEMA:
        raise RuntimeError(f"{path}: schema {rec.get('schema')!r}, this notebook reads {SCHEMA!r}")
    parts[part] = rec["parts"][part]
    print(machine_title(rec), "\\n")'''

speed_plot = '''def plot_speed(speed, title):
    models = speed["models"]
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(len(m["rows"]) for m in models)
    for i, m in enumerate(models):
        for k, row in enumerate(m["rows"]):
            xpos = i + (k - (len(m["rows"]) - 1) / 2) * width
            ax.bar(xpos, row["tokens_per_s"], width * 0.9, color=f"C{k}", label=row["format"] if i == 0 else None)
            ax.plot([xpos - width * 0.45, xpos + width * 0.45], [row["law_tokens_per_s"]] * 2, "k-", lw=1.2)
    ax.set_xticks(range(len(models))); ax.set_xticklabels([m["name"] for m in models])
    ax.set_ylabel("decode tokens/s (bars); the law's ceiling (black ticks)")
    ax.set_title(title, fontsize=9); ax.grid(alpha=0.3, axis="y"); ax.legend(fontsize=7)
    plt.tight_layout(); plt.show()
    print_table(["model", "format", "MB/token", "tokens/s", "law", "fraction"],
                [[m["name"], row["format"], f"{row['bytes_per_token'] / 1e6:.1f}", f"{row['tokens_per_s']:.1f}",
                  f"{row['law_tokens_per_s']:.1f}", f"{row['tokens_per_s'] / row['law_tokens_per_s']:.2f}"]
                 for m in models for row in m["rows"]])

if "speed" in parts:
    plot_speed(parts["speed"], "this run (quick sizes under NNLAB_QUICK=1)")
else:
    print("part speed did not run")'''

records_cell = '''# The committed records (full runs, on the machines named in them), when they exist.
bench = os.path.join(src, "docs", "benchmarks")
made_by = {"lesson12-speed.json": "nnlab lesson12 --part speed --json docs/benchmarks/lesson12-speed.json",
           "lesson12-lora.json": "nnlab lesson12 --part lora --json docs/benchmarks/lesson12-lora.json",
           "lesson12-vs-transformers.json": "the transformers generate() peer (the lesson's 'What to run')"}
for name, cmd in made_by.items():
    p = os.path.join(bench, name)
    if not os.path.exists(p):
        print(f"NOT MEASURED YET: docs/benchmarks/{name} does not exist; `{cmd}` writes it.")
        continue
    with open(p) as f:
        rec = json.load(f)
    print(f"{name}: {machine_title(rec)}")
    if name == "lesson12-speed.json":
        plot_speed(rec["parts"]["speed"], "docs/benchmarks/lesson12-speed.json")
    elif name == "lesson12-vs-transformers.json":
        # scripts/bench_lesson12.sh: shapes[] with transformers' fp32 tokens/s and ours per format
        print_table(["model", "format", "ours tok/s", "transformers fp32 tok/s", "ours / theirs"],
                    [[sh["shape"], f, round(o["tokens_per_s"], 2), round(sh["transformers"]["tokens_per_s"], 2),
                      f"{o['ratio']:.2f}x"] for sh in rec["shapes"] for f, o in sh["ours"].items()])
    else:
        # lessons/12-real-models/lora_part.h: parts.lora.runs[]
        print_table(["method", "rank", "trainable", "AdamW bytes", "ms/step", "val new", "val old"],
                    [[r["method"], r["rank"], r["trainable_params"], r["optimizer_bytes"], round(r["ms_per_step"], 1),
                      round(r["val_new_after"], 4), round(r["val_old_after"], 4)] for r in rec["parts"]["lora"]["runs"]])
# the figures made from them: /usr/bin/python3 scripts/make_figures.py --only lesson12'''

nb = new_notebook()
nb.cells = [
    md('''# Lesson 12: real models on our kernels

Hugging Face checkpoints in and out, GPT-2's Conv1D and fused qkv, LoRA
(lessons/12-real-models/README.md). Everything here runs offline: the safetensors format and
the weight maps are shown on files made in this notebook, LoRA in numpy, and the measured parts
through `lesson12 --part ... --quick`. Under `NNLAB_QUICK=1` (what ctest does) the sizes are
tiny: the figures then check the pipeline, they are not measurements.'''),
    code(setup),
    md('''## A safetensors file, byte by byte

The README's hex dump, made here: 8 bytes of header length (little-endian), the JSON header
padded with spaces, then the tensors' bytes.'''),
    code(write_st),
    md('''Reading it back needs nothing but `struct` and `json`, and the checks that keep a damaged
or hostile file from being read out of bounds.'''),
    code(read_st),
    md('''## Our own checkpoints are the same format

A tiny model trained for two steps by `nnlab gpt train`, read with the ten lines above.'''),
    code(read_ours),
    md('''## GPT-2's Conv1D: a transpose (exercise 25)

GPT-2 stores W as (in, out) and computes x @ W; ours stores (out, in). The fused c_attn's
columns are [q | k | v]. The square attn.c_proj shows why only comparing outputs catches a
missing transpose.'''),
    code(conv1d),
    md('''## LoRA in numpy (exercises 26 and 27)

The forward through the narrow h = x A^T, the backward against finite differences, why B
starts at zero, and merging.'''),
    code(lora),
    md('''## How many parameters LoRA trains

Computed from the shapes (section 12's formulas), at GPT-2 124M and 355M; AdamW keeps 8 bytes
(m and v) per trainable parameter.'''),
    code(counts),
    md('''## The bandwidth law's predictions

Bytes per token from the shapes, and the law's ceiling at lesson 10's measured 26.3 GB/s.
Part speed measures your machine's bandwidth and the tokens/s.'''),
    code(law),
    md('''## Run the parts

`lesson12 --part hf|speed|lora --json ...`: each part's record is checked for its schema.
Without `NNLAB_QUICK=1` these are the full parts: minutes, and about 1.5 GB of memory for the
355M shape (set `NNLAB_QUICK=1` in the environment before starting Jupyter for a quick look).'''),
    code(run_cell),
    md('''## Decode speed against the law (this run)'''),
    code(speed_plot),
    md('''## The committed records

Full runs on the machines named in them. Where a record does not exist yet, the cell says which
command writes it.'''),
    code(records_cell),
    md('''## Questions

1. Change `wte` in the first cell to hold 3.14159: what does the file store, and what does the
   reader give back? Why is that not an error?
2. Make the reader refuse a file whose header says (2, 2) F32 but whose offsets give 12 bytes.
   Which assert fires?
3. In the Conv1D cell, what is the largest |diff| when c_proj is loaded without the transpose,
   compared with the size of y? Would a model with that mistake still produce words?
4. Start B random and A at zero in the LoRA cell: which gradient is zero on the first step now,
   and what does the adapted model compute at step 0?
5. From the counts table: at which rank does LoRA on GPT-2 124M train 10% of the model?'''),
]
for i, cell in enumerate(nb.cells):
    cell["id"] = f"lesson12-{i:02d}"  # stable ids: regenerating changes nothing unless a cell did
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, os.path.join(os.path.dirname(os.path.abspath(__file__)), "12-real-models.ipynb"))
