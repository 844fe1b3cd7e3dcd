"""Helpers the GPT notebooks share (lessons 07 and 08): read a safetensors file with numpy,
read the trainer's JSON-lines log, and draw attention maps with the characters on the axes.

    import sys; sys.path.insert(0, os.path.join(src, "notebooks"))
    from gpt_helpers import read_safetensors, read_jsonl, plot_attention, plot_attention_grid

A safetensors file is: 8 bytes (little-endian u64) giving the header's length, the header
(JSON: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
"__metadata__": {...}}), then the raw data; offsets count from the end of the header.
`nnlab gpt dump --checkpoint C --text "..." --out F.safetensors` writes the attention maps of
layer l as "h.<l>.att", shaped (1, NH, T, T): row t is what position t looks at.
"""
import json

import numpy as np


def read_safetensors(path):
    """Returns ({name: float32 array}, metadata {str: str}). F32 only (all nnlab writes)."""
    with open(path, "rb") as f:
        blob = f.read()
    header_len = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    metadata = header.pop("__metadata__", {}) or {}
    data = blob[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} is {entry['dtype']}, only F32 is read here")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").astype(np.float32).reshape(shape)
    return tensors, metadata


def read_jsonl(path):
    """One dict per line: the trainer's log (<out-dir>/log.jsonl)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def char_labels(text):
    """Characters as tick labels: newline and space made visible."""
    return ["\u23ce" if c == "\n" else "\u2423" if c == " " else c for c in text]


def attention_layers(tensors):
    """Number of layers with an "h.<l>.att" map in a dump."""
    n = 0
    while f"h.{n}.att" in tensors:
        n += 1
    return n


def plot_attention(ax, att, text=None, title=None, cmap="viridis"):
    """One head's (T, T) map: rows are queries (the position that looks), columns keys."""
    T = att.shape[-1]
    ax.imshow(att, cmap=cmap, vmin=0.0, vmax=max(float(att.max()), 1e-6), interpolation="nearest")
    if text is not None:
        labels = char_labels(text[:T])
        ax.set_xticks(range(T))
        ax.set_xticklabels(labels, fontsize=6, fontfamily="monospace")
        ax.set_yticks(range(T))
        ax.set_yticklabels(labels, fontsize=6, fontfamily="monospace")
        ax.tick_params(length=0, pad=1)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if title:
        ax.set_title(title, fontsize=8)


def plot_attention_grid(tensors, text, layers=None, heads=None, size=2.6, batch=0):
    """A grid of attention maps from a dump: one row per layer, one column per head.
    `text` is the dumped text (its first T characters label the axes)."""
    import matplotlib.pyplot as plt

    layers = list(range(attention_layers(tensors))) if layers is None else list(layers)
    if not layers:
        raise ValueError("no h.<l>.att tensors in this file: was it written by `nnlab gpt dump`?")
    NH = tensors[f"h.{layers[0]}.att"].shape[1]
    heads = list(range(NH)) if heads is None else list(heads)
    fig, axes = plt.subplots(len(layers), len(heads), figsize=(size * len(heads), size * len(layers)),
                             squeeze=False)
    for i, l in enumerate(layers):
        att = tensors[f"h.{l}.att"][batch]  # (NH, T, T)
        for j, h in enumerate(heads):
            plot_attention(axes[i][j], att[h], text, title=f"layer {l}, head {h}")
    fig.tight_layout()
    return fig
