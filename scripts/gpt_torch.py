#!/usr/bin/env python3
"""scripts/gpt_torch.py: the PyTorch reference of gpt/model.h, read next to the C++.

The same GPT-2-style character model as gpt/model.h, written the nanoGPT way (one
nn.Module per part), with the parameter names of the C++ checkpoints, so that both sides
load one safetensors file and can be compared number by number:

    tokens (B,T) -> wte[tok] + wpe[t] -> [ L x block ] -> LayerNorm -> x wte^T -> logits (B,T,V)
    block: x = x + drop(c_proj(attention(ln_1(x))))
           x = x + drop(mlp.c_proj(gelu_tanh(mlp.c_fc(ln_2(x)))))

Subcommands:

    /usr/bin/python3 scripts/gpt_torch.py parity --weights W.safetensors --batch BATCH.safetensors \\
        --out OUT.safetensors [--steps 10 --lr 1e-3 --weight-decay 0.1 --beta1 0.9 --beta2 0.99 \\
        --eps 1e-8 --grad-clip 1.0]
        One forward + backward on the batch (fp32, one thread), then --steps AdamW steps
        on the same batch from the same weights. OUT holds "logits", "loss", the named
        activations ("encoded", "h.0.ln1", ..., "lnf", "probs"), "grad.<param>" for every
        parameter, "adamw_losses" (the loss before each step) and "adamw_grad_norms".

    /usr/bin/python3 scripts/gpt_torch.py bench [--n-layer 4 --n-head 4 --n-embd 128 --block-size 64
        --batch-size 12 --vocab-size 65 --iters 30 --warmup 5] [--settings all|"intra=2,blas=1"]
        [--json OUT.json]
        ms per training iteration in eager mode of nanoGPT's model and loop
        (scripts/nanogpt_model.py: the peer is the code people train with, not the parity
        model above), one subprocess per thread setting (the BLAS library fixes its thread
        count when it is loaded), OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from its
        environment, and which BLAS library torch really calls. OMP_WAIT_POLICY passes through: on a loaded machine torch's OpenMP
        threads spinning at barriers (the default) make intra=2 several times slower than
        with OMP_WAIT_POLICY=passive (what scripts/test.sh sets); try both.

    /usr/bin/python3 scripts/gpt_torch.py init --out-weights W.safetensors --out-batch BATCH.safetensors
        [--vocab-size 65 --block-size 64 --n-layer 4 --n-head 4 --n-embd 128 --batch-size 4
        --seq-len 64 --seed 1]
        GPT-2-initialised weights and a random batch, to try `parity` without the C++ side.

The weights file is a safetensors file (see io/safetensors.h) whose "__metadata__" holds the
configuration as strings: "vocab_size", "block_size", "n_layer", "n_head", "n_embd". The
batch file holds "inputs" and "targets", each (B,T) float32 holding integer token ids.

Needs numpy and PyTorch (Debian: python3-numpy python3-torch, run with /usr/bin/python3).
Downloads nothing. Any bad input ends in a message and exit status 1.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"gpt_torch.py: {e} (Python {sys.executable}).\n"
             f"hint: the PyTorch reference needs numpy and PyTorch: on Debian/Ubuntu run "
             f"`sudo apt-get install python3-torch python3-numpy` (or bash scripts/setup.sh) and "
             f"run this script with /usr/bin/python3; elsewhere `python3 -m pip install torch numpy`")


class GPTTorchError(Exception):
    """A problem the user can act on (a bad file, a bad flag); main() prints it, exits 1."""


# ---- safetensors: 8-byte little-endian header length, JSON header, raw little-endian data ----
#
# {"__metadata__": {"key": "value"}, "name": {"dtype": "F32", "shape": [..],
#  "data_offsets": [begin, end]}, ...} then the tensors' bytes back to back. F32 only, as
# io/safetensors.h writes. The C++ writer adds "nnlab.checksum" (64-bit FNV-1a of the data
# section) to the metadata; we check it when present and write none (it is optional).

MAX_HEADER_BYTES = 100_000_000  # the same limit as io/safetensors.cpp and the reference
CHECKSUM_KEY = "nnlab.checksum"


def fnv1a64(data):
    """64-bit FNV-1a, byte by byte: h = (h XOR byte) * prime. About 0.3 s per MB in Python."""
    h = 0xcbf29ce484222325  # offset basis
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF  # FNV prime, mod 2^64
    return h


def read_safetensors(path):
    """Returns (tensors {name: float32 ndarray}, metadata {str: str}); GPTTorchError if bad."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise GPTTorchError(f"cannot read {path}: {e.strerror}") from e
    if len(blob) < 8:
        raise GPTTorchError(f"{path}: {len(blob)} bytes, too short for a safetensors file (8-byte header length)")
    header_len = int.from_bytes(blob[:8], "little")
    if header_len > MAX_HEADER_BYTES or 8 + header_len > len(blob):
        raise GPTTorchError(f"{path}: header length {header_len} does not fit in the file's {len(blob)} bytes: "
                            f"not a safetensors file, or truncated")
    try:
        header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GPTTorchError(f"{path}: the header is not valid JSON ({e})") from e
    if not isinstance(header, dict):
        raise GPTTorchError(f"{path}: the header is not a JSON object")

    metadata = header.pop("__metadata__", {}) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise GPTTorchError(f"{path}: __metadata__ must map strings to strings")
    data = memoryview(blob)[8 + header_len:]
    if CHECKSUM_KEY in metadata:
        got = f"{fnv1a64(data):016x}"
        if got != metadata[CHECKSUM_KEY]:
            raise GPTTorchError(f"{path} is corrupt: checksum mismatch (the header says {metadata[CHECKSUM_KEY]}, "
                                f"the data hashes to {got})")

    tensors = {}
    for name, entry in header.items():
        if not isinstance(entry, dict) or entry.get("dtype") != "F32":
            got = entry.get("dtype") if isinstance(entry, dict) else entry
            raise GPTTorchError(f"{path}: tensor '{name}' has dtype {got!r}; only F32 is supported")
        shape = entry.get("shape")
        offsets = entry.get("data_offsets")
        if (not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
                or not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(o, int) for o in offsets)):
            raise GPTTorchError(f"{path}: tensor '{name}' has a malformed shape or data_offsets: {entry}")
        begin, end = offsets
        numel = math.prod(shape)
        if not 0 <= begin <= end <= len(data) or end - begin != 4 * numel:
            raise GPTTorchError(f"{path}: tensor '{name}' shape {shape} data_offsets {offsets} do not fit "
                                f"the {len(data)}-byte data section: the file is corrupt")
        array = np.frombuffer(data, dtype="<f4", count=numel, offset=begin)
        tensors[name] = array.astype(np.float32).reshape(tuple(shape))  # a copy, native byte order
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: array} as F32 plus metadata {str: str}; <path>.tmp then a rename."""
    names = sorted(tensors)  # header and data in name order, as the C++ writer does
    arrays = [np.array(tensors[name], dtype="<f4", order="C") for name in names]  # 0-d stays 0-d
    header = {"__metadata__": {str(k): str(v) for k, v in (metadata or {}).items()}}
    offset = 0
    for name, array in zip(names, arrays):
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * ((8 - len(header_bytes) % 8) % 8)  # data 8-byte aligned
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(len(header_bytes).to_bytes(8, "little"))
            f.write(header_bytes)
            for array in arrays:
                f.write(array.tobytes())
        os.replace(tmp, path)
    except OSError as e:
        raise GPTTorchError(f"cannot write {path}: {e.strerror}") from e


# ---- the model (gpt/model.h), nanoGPT style ------------------------------------------------

class GPTConfig:
    def __init__(self, vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, dropout=0.0, bias=True):
        self.bias = bias              # biases in Linear and LayerNorm (nanoGPT's Shakespeare config: no)
        self.vocab_size = vocab_size  # V
        self.block_size = block_size  # maxT: rows of wpe
        self.n_layer = n_layer        # L
        self.n_head = n_head          # NH
        self.n_embd = n_embd          # C; head size hs = C / NH
        self.dropout = dropout        # p, train mode only
        for key in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            if getattr(self, key) < 1:
                raise GPTTorchError(f"config: {key} = {getattr(self, key)} must be >= 1")
        if n_embd % n_head != 0:
            raise GPTTorchError(f"config: n_embd {n_embd} is not a multiple of n_head {n_head}")
        if not 0.0 <= dropout < 1.0:
            raise GPTTorchError(f"config: dropout {dropout} must be in [0, 1)")

    def as_metadata(self):
        meta = {k: str(getattr(self, k)) for k in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd")}
        meta["bias"] = "1" if self.bias else "0"
        return meta

    def __repr__(self):
        return (f"V={self.vocab_size} maxT={self.block_size} L={self.n_layer} NH={self.n_head} "
                f"C={self.n_embd} dropout={self.dropout}")


# LayerNorm with an optional bias (torch 1.13's nn.LayerNorm has both or neither), eps 1e-5,
# biased variance: nanoGPT's, one definition in the bench's peer model.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import LayerNorm  # noqa: E402


def record(acts, name, tensor):
    """Keeps a copy of an activation under the C++ name (gpt::activation_views) when asked."""
    if acts is not None:
        acts[name] = tensor.detach().clone()


# bench-gpu sets this: attention through F.scaled_dot_product_attention (flash attention on a
# GPU, what nanoGPT uses) instead of the explicit T x T matrices the other commands compare.
USE_SDPA = False


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # weight (3C, C): rows q, k, v
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)      # weight (C, C)
        # mask[t, s] = True where s > t: position t must not see the future. Not a parameter
        # and not saved (persistent=False), so the state dict holds only the C++ names.
        future = torch.triu(torch.ones(config.block_size, config.block_size, dtype=torch.bool), diagonal=1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, x, acts=None, prefix=""):
        B, T, C = x.size()
        hs = C // self.n_head
        qkv = self.c_attn(x)                     # (B, T, 3C)
        record(acts, prefix + "qkv", qkv)
        q, k, v = qkv.split(C, dim=2)            # columns [0,C) q, [C,2C) k, [2C,3C) v
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if USE_SDPA and acts is None:
            # the GPU bench's peer, as nanoGPT runs it: PyTorch's fused (flash) attention
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        # scores = q k^T / sqrt(hs); -inf above the diagonal, so softmax gives the future 0
        preatt = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))          # (B, NH, T, T)
        preatt = preatt.masked_fill(self.future[:T, :T], float("-inf"))
        att = F.softmax(preatt, dim=-1)          # no dropout on the probabilities (gpt/model.h)
        record(acts, prefix + "att", att)
        y = att @ v                              # (B, NH, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again: (B, T, C)
        record(acts, prefix + "atty", y)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)    # weight (4C, C)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)  # weight (C, 4C)

    def forward(self, x, acts=None, prefix=""):
        fch = self.c_fc(x)                                 # (B, T, 4C)
        record(acts, prefix + "fch", fch)
        fch_gelu = F.gelu(fch, approximate="tanh")         # GPT-2's tanh approximation
        record(acts, prefix + "fch_gelu", fch_gelu)
        return self.c_proj(fch_gelu)                       # (B, T, C)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, config.bias)
        self.mlp = MLP(config)
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x, acts=None, prefix=""):
        ln1 = self.ln_1(x)
        record(acts, prefix + "ln1", ln1)
        attproj = self.drop(self.attn(ln1, acts, prefix))
        record(acts, prefix + "attproj", attproj)
        residual2 = x + attproj
        record(acts, prefix + "residual2", residual2)
        ln2 = self.ln_2(residual2)
        record(acts, prefix + "ln2", ln2)
        fcproj = self.drop(self.mlp(ln2, acts, prefix))
        record(acts, prefix + "fcproj", fcproj)
        residual3 = residual2 + fcproj
        record(acts, prefix + "residual3", residual3)
        return residual3


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        # nn.Parameter rather than nn.Embedding, so the names are "wte" and "wpe" as in C++
        self.wte = nn.Parameter(torch.zeros(config.vocab_size, config.n_embd))  # (V, C), also the head
        self.wpe = nn.Parameter(torch.zeros(config.block_size, config.n_embd))  # (maxT, C)
        self.drop = nn.Dropout(config.dropout)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, config.bias)

    def init_weights(self, seed):
        """GPT-2's initialisation: N(0, 0.02), the residual projections (c_proj) N(0, 0.02 /
        sqrt(2 L)), biases 0, LayerNorm weight 1, bias 0. The numbers differ from the C++
        gpt_init_weights (another random generator); the distribution is the same."""
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1 and "ln_" in name and name.endswith(".weight"):
                    p.fill_(1.0)  # LayerNorm gain
                elif p.dim() == 1:
                    p.zero_()     # biases, LayerNorm bias
                elif name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * self.config.n_layer), generator=gen)
                else:
                    p.normal_(0.0, 0.02, generator=gen)  # wte, wpe, c_attn, c_fc

    def forward(self, idx, targets=None, acts=None):
        """idx (B,T) int64 token ids; targets (B,T) or None. Returns (logits (B,T,V), mean loss
        or None). With acts a dict, fills it with the named activations."""
        B, T = idx.size()
        if T > self.config.block_size:
            raise GPTTorchError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte[idx] + self.wpe[pos])    # (B, T, C)
        record(acts, "encoded", x)
        for l, block in enumerate(self.h):
            x = block(x, acts, f"h.{l}.")
        x = self.ln_f(x)
        record(acts, "lnf", x)
        logits = F.linear(x, self.wte)                  # x wte^T: the head is tied to wte
        record(acts, "logits", logits)
        if targets is None:
            return logits, None
        V = self.config.vocab_size
        if acts is not None:
            record(acts, "probs", F.softmax(logits, dim=-1))
            losses = F.cross_entropy(logits.view(-1, V), targets.reshape(-1), reduction="none")
            record(acts, "losses", losses.view(B, T))
        loss = F.cross_entropy(logits.view(-1, V), targets.reshape(-1))  # mean over B*T
        return logits, loss


def adamw_for(model, lr, betas, eps, weight_decay, foreach=False):
    """torch.optim.AdamW with weight decay on the matrices and embeddings (2-D) only, as
    gpt::ParamSlice::decay; biases and LayerNorm parameters get none."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=foreach)


# ---- loading the C++ side's files ------------------------------------------------------------

def config_from_metadata(metadata, path):
    arch = metadata.get("arch", "gpt2")  # files from before lesson 11 are gpt2
    if arch != "gpt2":
        raise GPTTorchError(f"{path}: metadata 'arch' = {arch!r}: this script builds nanoGPT's gpt2 model only "
                            f"(a llama checkpoint's reference is scripts/llama_torch.py)")
    values = {}
    for key in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
        if key not in metadata:
            raise GPTTorchError(f"{path}: the metadata has no '{key}' (it holds: {sorted(metadata)}); "
                                f"the weights file must carry the model configuration")
        try:
            values[key] = int(metadata[key])
        except ValueError as e:
            raise GPTTorchError(f"{path}: metadata '{key}' = {metadata[key]!r} is not an integer") from e
    bias = metadata.get("bias", "1")  # files from before the option had biases
    if bias not in ("0", "1"):
        raise GPTTorchError(f"{path}: metadata 'bias' = {bias!r} must be 0 or 1")
    return GPTConfig(**values, bias=bias == "1")


def load_model(path):
    """A GPT with the weights of a safetensors file (config from its metadata), dropout 0."""
    tensors, metadata = read_safetensors(path)
    config = config_from_metadata(metadata, path)
    model = GPT(config)
    expected = dict(model.named_parameters())
    missing = [n for n in expected if n not in tensors]
    unexpected = [n for n in tensors if n not in expected]
    if missing or unexpected:
        raise GPTTorchError(f"{path}: the tensors do not match a GPT with {config}: "
                            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}")
    with torch.no_grad():
        for name, p in expected.items():
            if tuple(tensors[name].shape) != tuple(p.shape):
                raise GPTTorchError(f"{path}: '{name}' has shape {list(tensors[name].shape)}, "
                                    f"expected {list(p.shape)} for {config}")
            p.copy_(torch.from_numpy(tensors[name]))
    return model


def load_batch(path, config):
    """(inputs, targets) as (B,T) int64 tensors from float32 token ids, checked."""
    tensors, _ = read_safetensors(path)
    out = []
    for key in ("inputs", "targets"):
        if key not in tensors:
            raise GPTTorchError(f"{path}: no tensor '{key}' (it holds: {sorted(tensors)})")
        a = tensors[key]
        if a.ndim != 2 or a.size == 0:
            raise GPTTorchError(f"{path}: '{key}' has shape {list(a.shape)}, expected (B, T) with B, T >= 1")
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise GPTTorchError(f"{path}: '{key}' holds values that are not integer token ids")
        if a.min() < 0 or a.max() >= config.vocab_size:
            raise GPTTorchError(f"{path}: '{key}' holds token ids in [{int(a.min())}, {int(a.max())}], "
                                f"outside [0, {config.vocab_size}) (vocab_size)")
        out.append(torch.from_numpy(a.astype(np.int64)))
    inputs, targets = out
    if inputs.shape != targets.shape:
        raise GPTTorchError(f"{path}: inputs {list(inputs.shape)} and targets {list(targets.shape)} differ in shape")
    if inputs.shape[1] > config.block_size:
        raise GPTTorchError(f"{path}: T = {inputs.shape[1]} exceeds block_size {config.block_size}")
    return inputs, targets


# ---- parity: what the C++ side is compared with ---------------------------------------------

def cmd_parity(args):
    torch.set_num_threads(1)  # one fixed reduction order: the same numbers run after run
    model = load_model(args.weights)
    inputs, targets = load_batch(args.batch, model.config)
    model.train()  # dropout is 0: train and eval compute the same

    # 1. one forward + backward, everything named
    acts = {}
    logits, loss = model(inputs, targets, acts)
    loss.backward()
    out = {name: t.numpy() for name, t in acts.items()}
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.numpy().copy()

    # 2. --steps AdamW steps on the same batch, from the same weights (a fresh model)
    model = load_model(args.weights)
    model.train()
    optimizer = adamw_for(model, args.lr, (args.beta1, args.beta2), args.eps, args.weight_decay)
    losses, norms = [], []
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()  # constant lr
        losses.append(loss.item())  # the loss before this step's update
        norms.append(norm.item())   # the norm before clipping
    return write_parity(args, model.config, inputs, out, losses, norms)


def write_parity(args, config, inputs, out, losses, norms):
    """The parity file: `out` (activations, loss, gradients) plus the AdamW run's losses and
    norms, with the config and the run's settings as metadata (scripts/llama_torch.py too)."""
    out["adamw_losses"] = np.array(losses, dtype=np.float32)
    out["adamw_grad_norms"] = np.array(norms, dtype=np.float32)
    metadata = dict(config.as_metadata())
    metadata.update({"torch_version": torch.__version__, "steps": str(args.steps), "lr": repr(args.lr),
                     "weight_decay": repr(args.weight_decay), "beta1": repr(args.beta1),
                     "beta2": repr(args.beta2), "eps": repr(args.eps), "grad_clip": repr(args.grad_clip)})
    write_safetensors(args.out, out, metadata)
    B, T = inputs.shape
    print(f"parity: {config}, B={B} T={T}: loss {out['loss'][0]:.6f} "
          f"(log V = {math.log(config.vocab_size):.6f}), {len(out)} tensors -> {args.out}")
    if losses:
        print(f"parity: AdamW losses {losses[0]:.6f} -> {losses[-1]:.6f} over {args.steps} steps")
    return 0


# ---- init: weights and a batch to try parity with -------------------------------------------

def cmd_init(args):
    config = GPTConfig(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd)
    if not 1 <= args.seq_len <= config.block_size:
        raise GPTTorchError(f"--seq-len {args.seq_len} must be in [1, block_size = {config.block_size}]")
    model = GPT(config)
    model.init_weights(args.seed)
    params = {name: p.detach().numpy() for name, p in model.named_parameters()}
    write_safetensors(args.out_weights, params, config.as_metadata())
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, config.vocab_size, size=(args.batch_size, args.seq_len + 1))
    batch = {"inputs": tokens[:, :-1].astype(np.float32), "targets": tokens[:, 1:].astype(np.float32)}
    write_safetensors(args.out_batch, batch)
    print(f"init: {config}, {sum(p.size for p in params.values())} parameters -> {args.out_weights}; "
          f"batch B={args.batch_size} T={args.seq_len} -> {args.out_batch}")
    return 0


# ---- bench: ms per training iteration, thread settings as subprocesses ----------------------

def blas_in_use():
    """(description, library path, its thread count or 0) of the BLAS this process has loaded. torch on Debian says
    BLAS_INFO=generic: it calls libblas.so.3, which the alternatives system resolves to
    OpenBLAS or to the reference BLAS. /proc/self/maps shows the real file after a matmul."""
    a = torch.randn(64, 64)
    (a @ a).sum().item()
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if ("blas" in base or "mkl" in base) and path not in paths:
                    paths.append(path)
    except OSError:
        return "unknown (no /proc/self/maps)", "", 0
    if not paths:
        return "unknown (no BLAS library mapped: torch may use its own kernels)", "", 0
    import ctypes
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "openblas_get_config"):
            lib.openblas_get_config.restype = ctypes.c_char_p
            config = lib.openblas_get_config().decode()
            threads = lib.openblas_get_num_threads() if hasattr(lib, "openblas_get_num_threads") else 0
            return f"OpenBLAS ({config})", path, threads
    if any("/blas/" in p for p in paths):
        return "reference BLAS (netlib libblas3: slow; install libopenblas0)", paths[0], 0
    return "other BLAS", paths[0], 0


def parse_settings(text, ncpu):
    """'all' -> intra x blas threads in {1, ncpu}; else 'intra=2,blas=1;intra=1,blas=1'."""
    if text == "all":
        counts = sorted({1, ncpu})
        return [(intra, blas) for intra in counts for blas in counts]
    settings = []
    for item in text.split(";"):
        fields = dict(kv.split("=", 1) for kv in item.replace(" ", "").split(",") if "=" in kv)
        try:
            settings.append((int(fields["intra"]), int(fields["blas"])))
        except (KeyError, ValueError) as e:
            raise GPTTorchError(f"--settings: {item!r} is not 'intra=N,blas=M' (or 'all')") from e
    return settings


def bench_one(args):
    """In a subprocess whose environment already fixed the BLAS threads: time and print JSON.
    The model and the iteration are nanoGPT's (scripts/nanogpt_model.py), not this file's
    parity model: the peer is the code people train with."""
    import nanogpt_model
    intra = args.child_intra
    torch.set_num_threads(intra)
    torch.manual_seed(args.seed)
    model = nanogpt_model.GPT(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd,
                              dropout=0.0, bias=True)
    model.train()
    optimizer = model.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    gen = torch.Generator().manual_seed(args.seed)
    n = args.warmup + args.iters
    data = torch.randint(0, args.vocab_size, (n, args.batch_size, args.block_size + 1), generator=gen)
    times, cpu_times = [], []
    for i in range(n):
        x, y = data[i, :, :-1].contiguous(), data[i, :, 1:].contiguous()
        t0, c0 = time.perf_counter(), time.process_time()
        loss = nanogpt_model.train_iteration(model, optimizer, x, y, grad_clip=1.0)
        times.append(time.perf_counter() - t0)
        # CPU time of the whole process (every thread): on a machine other jobs share, the
        # 1-thread setting's CPU time is its work, where the wall time is not.
        cpu_times.append(time.process_time() - c0)
    blas, blas_path, blas_threads_seen = blas_in_use()
    print(json.dumps({"intra": intra, "blas_threads": int(os.environ.get("OPENBLAS_NUM_THREADS", "0")),
                      "blas_threads_seen": blas_threads_seen, "torch_threads_seen": torch.get_num_threads(),
                      "ms_per_iter": 1000.0 * statistics.median(times[args.warmup:]),
                      "cpu_ms_per_iter": 1000.0 * statistics.median(cpu_times[args.warmup:]),
                      "final_loss": loss.item(), "blas": blas, "blas_library": blas_path}))
    return 0


# Variables some machines set that slow OpenBLAS down (a core type and an L2 size for another
# CPU than this one): the peer runs without them, and the report says which were removed.
OPENBLAS_THROTTLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def cmd_bench(args):
    if args.child_intra is not None:
        return bench_one(args)
    ncpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    settings = parse_settings(args.settings, ncpu)
    config = {"n_layer": args.n_layer, "n_head": args.n_head, "n_embd": args.n_embd,
              "block_size": args.block_size, "batch_size": args.batch_size, "vocab_size": args.vocab_size,
              "iters": args.iters, "warmup": args.warmup, "dropout": 0.0, "cpus": ncpu,
              "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", ""),
              "model": "scripts/nanogpt_model.py (nanoGPT's model.py design)",
              "unset": [v for v in OPENBLAS_THROTTLES if v in os.environ]}
    print(f"bench: PyTorch {torch.__version__} eager, CPU ({ncpu} cores), nanoGPT's model and iteration "
          f"(scripts/nanogpt_model.py): forward, loss, backward, clip_grad_norm_(1.0), AdamW step, zero_grad")
    if config["unset"]:
        print(f"bench: {', '.join(config['unset'])} removed from the peer's environment (they slow OpenBLAS)")
    print(f"bench: L={args.n_layer} NH={args.n_head} C={args.n_embd} T={args.block_size} B={args.batch_size} "
          f"V={args.vocab_size}; median of {args.iters} iterations after {args.warmup} warm-up; "
          f"OMP_WAIT_POLICY={config['OMP_WAIT_POLICY'] or '(unset: spin)'}", flush=True)

    results = []
    blas = blas_path = ""
    for intra, blas_threads in settings:
        # OpenBLAS reads OPENBLAS_NUM_THREADS once, when it is loaded: hence one process
        # per setting. OMP_NUM_THREADS sizes torch's own OpenMP pool (intra-op).
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas_threads), OMP_NUM_THREADS=str(intra))
        for var in OPENBLAS_THROTTLES:
            env.pop(var, None)
        cmd = [sys.executable, os.path.abspath(__file__), "bench", "--child-intra", str(intra)]
        for key in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "vocab_size", "iters",
                    "warmup", "seed"):
            cmd += ["--" + key.replace("_", "-"), str(getattr(args, key))]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise GPTTorchError(f"bench intra={intra} blas={blas_threads} failed:\n{proc.stderr.strip()}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        blas, blas_path = r.pop("blas"), r.pop("blas_library")
        r.pop("final_loss")
        r["tokens_per_s"] = args.batch_size * args.block_size / (r["ms_per_iter"] / 1000.0)
        results.append(r)
        print(f"  intra={intra} blas={blas_threads}: {r['ms_per_iter']:.2f} ms/iter "
              f"(CPU time {r['cpu_ms_per_iter']:.2f} ms/iter) (threads seen: torch {r['torch_threads_seen']}, BLAS {r['blas_threads_seen']})", flush=True)

    best = min(results, key=lambda r: r["ms_per_iter"])
    print(f"\nBLAS: {blas}\n      {blas_path} (what libblas.so.3 resolved to in the process)")
    print(f"\n{'intra':>6} {'blas':>5} {'ms/iter':>9} {'tokens/s':>9}")
    for r in results:
        mark = "  <- best" if r is best else ""
        print(f"{r['intra']:>6} {r['blas_threads']:>5} {r['ms_per_iter']:>9.2f} {r['tokens_per_s']:>9.0f}{mark}")
    if args.json:
        report = {"torch_version": torch.__version__, "blas": blas, "blas_library": blas_path,
                  "settings": results, "best": best, "config": config}
        try:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=2)
                f.write("\n")
        except OSError as e:
            raise GPTTorchError(f"cannot write {args.json}: {e.strerror}") from e
        print(f"\nbench: wrote {args.json}")
    return 0


def cmd_bench_gpu(args):
    """The same training step on the GPU: eager and torch.compile, at fp32 (TF32 off), tf32
    (TF32 matmuls) and bf16 (torch.autocast, fp32 master weights), as nanoGPT runs it (fused
    AdamW, flash attention). Times with torch.cuda.synchronize() around each step."""
    global USE_SDPA
    if not torch.cuda.is_available():
        raise GPTTorchError("bench-gpu: PyTorch sees no CUDA device (torch.cuda.is_available() is False)")
    import contextlib
    USE_SDPA = True
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    rows = []
    print(f"bench-gpu: PyTorch {torch.__version__} on {name}; L={args.n_layer} NH={args.n_head} C={args.n_embd} "
          f"T={args.block_size} B={args.batch_size} dropout={args.dropout} bias={args.bias}; median of "
          f"{args.iters} after {args.warmup} warm-up", flush=True)
    for precision in args.precisions.split(","):
        for mode in args.modes.split(","):
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            torch.backends.cudnn.allow_tf32 = precision == "tf32"
            torch.manual_seed(args.seed)
            config = GPTConfig(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd,
                               dropout=args.dropout, bias=bool(args.bias))
            model = GPT(config)
            model.init_weights(args.seed)
            model.to(dev).train()
            decay = [p for p in model.parameters() if p.dim() >= 2]
            no_decay = [p for p in model.parameters() if p.dim() < 2]
            optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                           {"params": no_decay, "weight_decay": 0.0}],
                                          lr=1e-3, betas=(0.9, 0.99), eps=1e-8, fused=True)
            step_model = torch.compile(model) if mode == "compile" else model
            ctx = (torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16"
                   else contextlib.nullcontext())
            n = args.warmup + args.iters
            data = torch.randint(0, config.vocab_size, (n, args.batch_size, args.block_size + 1), device=dev)
            times = []
            for i in range(n):
                x, y = data[i, :, :-1].contiguous(), data[i, :, 1:].contiguous()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                optimizer.zero_grad(set_to_none=True)
                with ctx:
                    _, loss = step_model(x, y)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                loss.item()  # as our trainer: the loss comes back to the host every step
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            ms = 1000.0 * statistics.median(times[args.warmup:])
            r = {"precision": precision, "mode": mode, "ms_per_iter": ms,
                 "tokens_per_s": args.batch_size * args.block_size / (ms / 1000.0), "final_loss": loss.item()}
            rows.append(r)
            print(f"  {mode:8s} {precision}: {ms:8.2f} ms/iter  {r['tokens_per_s']:12.0f} tokens/s", flush=True)
            del model, optimizer, step_model
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch_version": torch.__version__, "device": name, "rows": rows,
                       "config": vars(args) | {"func": None}}, f, indent=2, default=str)
            f.write("\n")
    return 0


def cmd_train(args):
    """nanoGPT's Shakespeare-char CPU run with the same model, recipe and evaluation as
    `nnlab gpt train` + `nnlab gpt eval` (not the same random numbers: torch's generator):
    character vocabulary of the whole text, the first 90% to train on, random batches,
    AdamW (decay on 2-D parameters only), warm-up then cosine (gpt::learning_rate),
    clip_grad_norm_, then the final model on --eval-iters random batches of each split.
    What PyTorch reaches with this recipe says whether a gap to nanoGPT's figure is ours."""
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    try:
        text = open(args.data, "rb").read()
    except OSError as e:
        raise GPTTorchError(f"cannot read {args.data}: {e.strerror}") from e
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_train = int(len(data) * 0.9)
    splits = {"train": data[:n_train], "val": data[n_train:]}
    config = GPTConfig(len(chars), args.block_size, args.n_layer, args.n_head, args.n_embd, 0.0, bias=args.bias == 1)
    model = GPT(config)
    model.init_weights(args.seed)
    opt = adamw_for(model, args.lr, (0.9, 0.99), 1e-8, 0.1)
    B, T = args.batch_size, args.block_size

    def batch(split):
        d = splits[split]
        ix = torch.randint(len(d) - T, (B,))
        return torch.stack([d[i:i + T] for i in ix]), torch.stack([d[i + 1:i + 1 + T] for i in ix])

    def lr_at(it, W=100, D=args.max_iters):
        if it < W:
            return args.lr * (it + 1) / W
        ratio = (it - W) / max(D - W, 1)
        return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * min(ratio, 1.0))) * (args.lr - args.min_lr)

    t0 = time.time()
    for it in range(args.max_iters):
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        x, y = batch("train")
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (it + 1) % 250 == 0:
            print(f"step {it + 1}: loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    with torch.no_grad():
        for n in (20, args.eval_iters):
            means = {split: sum(model(*batch(split))[1].item() for _ in range(n)) / n for split in ("train", "val")}
            print(f"after {args.max_iters} steps, {n} batches per split: train loss {means['train']:.4f}, "
                  f"val loss {means['val']:.4f}")
    return 0


# ---- command line ---------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description="PyTorch reference of nnlab's GPT (gpt/model.h).")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("parity", help="forward/backward/AdamW numbers to compare the C++ GPT with")
    p.add_argument("--weights", required=True, help="safetensors weights with the config in __metadata__")
    p.add_argument("--batch", required=True, help="safetensors with 'inputs' and 'targets' (B,T)")
    p.add_argument("--out", required=True, help="safetensors to write")
    p.add_argument("--steps", type=int, default=10, help="AdamW steps on the batch (default: %(default)s)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--grad-clip", type=float, default=1.0, help="clip_grad_norm_ max_norm (default: %(default)s)")
    p.set_defaults(func=cmd_parity)

    p = sub.add_parser("bench", help="ms per training iteration, per thread setting")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--vocab-size", type=int, default=65)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--settings", default="all",
                   help="'all' (intra-op x BLAS threads in {1, cores}) or 'intra=2,blas=1[;intra=...]'")
    p.add_argument("--json", default=None, help="also write the results as JSON here")
    p.add_argument("--child-intra", type=int, default=None, help=argparse.SUPPRESS)  # one setting, internal
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("bench-gpu", help="ms per training iteration on the GPU: eager / torch.compile, fp32 / tf32 / bf16")
    p.add_argument("--n-layer", type=int, default=6)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--n-embd", type=int, default=384)
    p.add_argument("--block-size", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--vocab-size", type=int, default=65)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--bias", type=int, default=0, choices=[0, 1])
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--precisions", default="fp32,tf32,bf16", help="comma-separated: fp32, tf32, bf16")
    p.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    p.add_argument("--json", default=None, help="also write the results as JSON here")
    p.set_defaults(func=cmd_bench_gpu)

    p = sub.add_parser("train", help="the same model and recipe trained by PyTorch (the val-loss reference)")
    p.add_argument("--data", required=True, help="the text, e.g. Tiny Shakespeare")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--bias", type=int, default=1, choices=[0, 1])
    p.add_argument("--eval-iters", type=int, default=500)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1337)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("init", help="GPT-2-initialised weights and a random batch")
    p.add_argument("--out-weights", required=True)
    p.add_argument("--out-batch", required=True)
    p.add_argument("--vocab-size", type=int, default=65)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_init)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except GPTTorchError as e:
        print(f"gpt_torch.py {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
