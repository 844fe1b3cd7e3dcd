#!/usr/bin/env python3
"""scripts/llama_torch.py: the PyTorch reference of the llama-style GPT (gpt/model.h, arch = llama),
written the way Hugging Face's Llama is (transformers' modeling_llama.py), read next to the C++.

    tokens (B,T) -> embed_tokens[tok] -> [ L x decoder layer ] -> RMSNorm -> lm_head -> logits (B,T,V)
    layer: x = x + o_proj(attention(rope(q_proj(h)), rope(k_proj(h)), v_proj(h)))   h = RMSNorm(x)
           x = x + down_proj(silu(gate_proj(h)) * up_proj(h))                        h = RMSNorm(x)

The modules and their names are Hugging Face's (LlamaForCausalLM: model.embed_tokens,
model.layers.<l>.input_layernorm, .self_attn.{q,k,v,o}_proj, .post_attention_layernorm,
.mlp.{gate,up,down}_proj, model.norm, lm_head), so this model's state_dict loads into
transformers' LlamaForCausalLM as it is, and the reverse (tests/python/test_llama_torch.py
proves the two compute the same numbers). The C++ side stacks some of these matrices; the
checkpoint it writes (gpt::save_checkpoint) names them the nnlab way:

    wte (V, C)                          model.embed_tokens.weight (and the head when tied)
    h.<l>.ln_1.weight (C)               model.layers.<l>.input_layernorm.weight
    h.<l>.attn.c_attn.weight (C+2KVC, C)  rows [q_proj (C) | k_proj (KVC) | v_proj (KVC)]
    h.<l>.attn.c_proj.weight (C, C)     o_proj
    h.<l>.ln_2.weight (C)               post_attention_layernorm
    h.<l>.mlp.c_fc.weight (2H, C)       rows [gate_proj (H) | up_proj (H)]
    h.<l>.mlp.c_proj.weight (C, H)      down_proj
    ln_f.weight (C)                     model.norm.weight
    lm_head.weight (V, C)               lm_head.weight, only when tie_embeddings = 0
  (hs = n_embd / n_head, KVC = n_kv_head * hs, H = ffn_hidden)

and the metadata: vocab_size, block_size, n_layer, n_head, n_embd, bias ("0"), arch ("llama"),
n_kv_head, ffn_hidden, rope_theta, norm_eps, tie_embeddings ("1"/"0"), attention
("auto"/"full"/"flash": how the C++ side runs attention; the same mathematics).

Subcommands:

    /usr/bin/python3 scripts/llama_torch.py parity --weights W.safetensors --batch BATCH.safetensors \\
        --out OUT.safetensors [--steps 10 --lr 1e-3 --weight-decay 0.1 --beta1 0.9 --beta2 0.99 \\
        --eps 1e-8 --grad-clip 1.0]
        As scripts/gpt_torch.py parity: one forward + backward (fp32, one thread) writing the
        activations under the C++ dump's names ("encoded", "h.<l>.ln1", "h.<l>.qkv" with RoPE
        applied to q and k, "h.<l>.atty", ..., "h.<l>.fch" = [gate | up] before the activation,
        "h.<l>.fch_swiglu", ..., "lnf", "logits", "probs", "losses", "loss"), "grad.<name>" for
        every checkpoint tensor (c_attn's and c_fc's in their stacked layouts), then --steps
        AdamW steps on the batch: "adamw_losses" (the loss before each step), "adamw_grad_norms".

    /usr/bin/python3 scripts/llama_torch.py init --out-weights W.safetensors --out-batch BATCH.safetensors
        [--vocab-size 65 --block-size 64 --n-layer 2 --n-head 4 --n-kv-head 2 --n-embd 64
         --ffn-hidden 0 --rope-theta 10000 --norm-eps 1e-5 --tie-embeddings 1
         --batch-size 4 --seq-len 64 --seed 1]
        Random weights (N(0, 0.02), RMSNorm gains near 1) in the checkpoint's layout and a
        random batch, to try `parity` without the C++ side.

    /usr/bin/python3 scripts/llama_torch.py export-hf --weights W.safetensors --out-dir DIR
    /usr/bin/python3 scripts/llama_torch.py import-hf --hf-dir DIR --out W.safetensors
        A checkpoint to a Hugging Face model folder (config.json + model.safetensors, F32, what
        LlamaForCausalLM.from_pretrained reads) and back. Needs neither transformers nor a network.

The batch file holds "inputs" and "targets", each (B,T) float32 integer token ids (as for
gpt_torch.py). Needs numpy and PyTorch (run with /usr/bin/python3 on Debian); transformers is
only needed by the test that compares with it. Any bad input ends in a message and exit status 1.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# the safetensors reader/writer, the batch loader, the AdamW groups and the error type are
# gpt_torch.py's: one definition of each (it also reports a missing numpy/torch)
from gpt_torch import GPTTorchError, adamw_for, load_batch, read_safetensors, write_parity, write_safetensors  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ---- the configuration (the checkpoint's metadata) ------------------------------------------

INT_KEYS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "n_kv_head", "ffn_hidden")
ATTENTION_KINDS = ("auto", "full", "flash")


class LlamaConfig:
    """The C++ GPTConfig's llama fields, resolved (n_kv_head and ffn_hidden are never 0 here)."""

    def __init__(self, vocab_size=65, block_size=64, n_layer=2, n_head=4, n_embd=64, n_kv_head=None,
                 ffn_hidden=None, rope_theta=10000.0, norm_eps=1e-5, tie_embeddings=True, attention="auto"):
        self.vocab_size = vocab_size    # V
        self.block_size = block_size    # maxT: the longest context (RoPE's table rows)
        self.n_layer = n_layer          # L
        self.n_head = n_head            # NH query heads
        self.n_embd = n_embd            # C; head size hs = C / NH
        self.n_kv_head = n_head if not n_kv_head else n_kv_head    # NKV key/value heads
        self.ffn_hidden = ffn_hidden if ffn_hidden else default_ffn_hidden(n_embd)  # H
        self.rope_theta = rope_theta
        self.norm_eps = norm_eps
        self.tie_embeddings = tie_embeddings
        self.attention = attention      # how the C++ side runs it; here always the plain matrices
        for key in INT_KEYS:
            if getattr(self, key) < 1:
                raise GPTTorchError(f"config: {key} = {getattr(self, key)} must be >= 1")
        if n_embd % n_head != 0:
            raise GPTTorchError(f"config: n_embd {n_embd} is not a multiple of n_head {n_head}")
        if self.n_kv_head > n_head or n_head % self.n_kv_head != 0:
            raise GPTTorchError(f"config: n_kv_head {self.n_kv_head} must divide n_head {n_head}")
        if (n_embd // n_head) % 2 != 0:
            raise GPTTorchError(f"config: head size {n_embd // n_head} is odd: RoPE rotates pairs (i, i + hs/2)")
        if not (math.isfinite(rope_theta) and rope_theta > 1.0):
            raise GPTTorchError(f"config: rope_theta {rope_theta} must be a finite number > 1")
        if not (math.isfinite(norm_eps) and norm_eps > 0.0):
            raise GPTTorchError(f"config: norm_eps {norm_eps} must be a finite number > 0")
        if attention not in ATTENTION_KINDS:
            raise GPTTorchError(f"config: attention {attention!r} must be one of {', '.join(ATTENTION_KINDS)}")

    @property
    def head_size(self):
        return self.n_embd // self.n_head

    def as_metadata(self):
        meta = {k: str(getattr(self, k)) for k in INT_KEYS}
        meta.update({"bias": "0", "arch": "llama", "rope_theta": repr(float(self.rope_theta)),
                     "norm_eps": repr(float(self.norm_eps)), "tie_embeddings": "1" if self.tie_embeddings else "0",
                     "attention": self.attention})
        return meta

    def __repr__(self):
        return (f"llama V={self.vocab_size} maxT={self.block_size} L={self.n_layer} NH={self.n_head} "
                f"NKV={self.n_kv_head} C={self.n_embd} H={self.ffn_hidden} theta={self.rope_theta:g} "
                f"eps={self.norm_eps:g} tied={int(self.tie_embeddings)}")


def default_ffn_hidden(n_embd):
    """gpt::default_ffn_hidden: 8C/3 rounded up to a multiple of 32 (a 4C GELU MLP's parameters
    in three matrices). The C++ checkpoint writes the resolved H; this serves `init` only."""
    return (8 * n_embd // 3 + 31) // 32 * 32


def config_from_metadata(metadata, path):
    """LlamaConfig from a checkpoint's metadata; GPTTorchError naming the key when one is
    missing, not a number, or out of range."""
    arch = metadata.get("arch")
    if arch != "llama":
        raise GPTTorchError(f"{path}: metadata 'arch' = {arch!r}: this reference is the llama-style model "
                            f"(arch 'llama'); a GPT-2 checkpoint goes to scripts/gpt_torch.py")
    if metadata.get("bias", "0") != "0":
        raise GPTTorchError(f"{path}: metadata 'bias' = {metadata['bias']!r}: the llama-style model has no biases (0)")
    values = {}
    for key in INT_KEYS:
        if key not in metadata:
            raise GPTTorchError(f"{path}: the metadata has no '{key}' (it holds: {sorted(metadata)}); "
                                f"the weights file must carry the model configuration")
        try:
            values[key] = int(metadata[key])
        except ValueError as e:
            raise GPTTorchError(f"{path}: metadata '{key}' = {metadata[key]!r} is not an integer") from e
        # n_kv_head 0 and ffn_hidden 0 mean "the default" in the C++ GPTConfig; the checkpoint
        # should hold the resolved sizes, and a tensor of the wrong size is caught by its shape
        if values[key] < (0 if key in ("n_kv_head", "ffn_hidden") else 1):
            raise GPTTorchError(f"{path}: metadata '{key}' = {values[key]} is out of range (must be >= 1)")
    for key in ("rope_theta", "norm_eps"):
        if key not in metadata:
            raise GPTTorchError(f"{path}: the metadata has no '{key}' (it holds: {sorted(metadata)})")
        try:
            values[key] = float(metadata[key])
        except ValueError as e:
            raise GPTTorchError(f"{path}: metadata '{key}' = {metadata[key]!r} is not a number") from e
    tie = metadata.get("tie_embeddings")
    if tie not in ("0", "1"):
        raise GPTTorchError(f"{path}: metadata 'tie_embeddings' = {tie!r} must be 0 or 1")
    values["tie_embeddings"] = tie == "1"
    values["attention"] = metadata.get("attention", "auto")
    try:
        return LlamaConfig(**values)
    except GPTTorchError as e:
        raise GPTTorchError(f"{path}: {e}") from e


# ---- the model, Hugging Face's modeling_llama.py shape -------------------------------------

def record(acts, name, tensor):
    """Keeps a copy of an activation under the C++ dump's name when asked."""
    if acts is not None:
        acts[name] = tensor.detach().clone()


class LlamaRMSNorm(nn.Module):
    """x * rsqrt(mean(x^2) + eps) * weight, in fp32 (HF's LlamaRMSNorm, T5's LayerNorm): no
    mean subtracted, no bias."""

    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    """cos and sin of angle t * inv_freq[i], inv_freq[i] = theta^(-2i/hs) for i < hs/2, each
    repeated for both halves of the head (HF's default rope type): channel i pairs with
    channel i + hs/2 (rotate_half), not with its neighbour (the original RoFormer pairing)."""

    def __init__(self, config):
        super().__init__()
        dim = config.head_size
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # not a checkpoint tensor

    @torch.no_grad()
    def forward(self, x, position_ids):
        # (B, hs/2, 1) @ (B, 1, T) -> (B, hs/2, T) -> (B, T, hs/2), then both halves
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the two halves of the last dimension."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """q, k (B, heads, T, hs); cos, sin (B, T, hs): each pair (i, i + hs/2) rotated by its angle."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    """(B, NKV, T, hs) -> (B, NKV * n_rep, T, hs): query head h reads KV head h // n_rep."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.head_dim = config.head_size
        self.num_heads = config.n_head
        self.num_key_value_heads = config.n_kv_head
        self.num_key_value_groups = config.n_head // config.n_kv_head
        self.scaling = self.head_dim ** -0.5
        C, KVC = config.n_embd, config.n_kv_head * config.head_size
        self.q_proj = nn.Linear(C, C, bias=False)
        self.k_proj = nn.Linear(C, KVC, bias=False)
        self.v_proj = nn.Linear(C, KVC, bias=False)
        self.o_proj = nn.Linear(C, C, bias=False)

    def forward(self, hidden_states, position_embeddings, acts=None, prefix=""):
        B, T, _ = hidden_states.shape
        hidden_shape = (B, T, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, NH, T, hs)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)    # (B, NKV, T, hs)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, NKV, T, hs)
        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if acts is not None:  # the C++ qkv buffer: [q | k | v] per position, q and k rotated
            record(acts, prefix + "qkv", torch.cat([s.transpose(1, 2).reshape(B, T, -1)
                                                    for s in (query_states, key_states, value_states)], dim=-1))

        # HF's eager_attention_forward: repeat_kv, scores, an additive causal mask, softmax in fp32
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling  # (B, NH, T, T)
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=attn_weights.device), diagonal=1)
        attn_weights = attn_weights.masked_fill(future, torch.finfo(attn_weights.dtype).min)
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)                              # (B, NH, T, hs)
        attn_output = attn_output.transpose(1, 2).reshape(B, T, -1).contiguous()            # heads side by side
        record(acts, prefix + "atty", attn_output)
        return self.o_proj(attn_output)


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.n_embd, config.ffn_hidden, bias=False)
        self.up_proj = nn.Linear(config.n_embd, config.ffn_hidden, bias=False)
        self.down_proj = nn.Linear(config.ffn_hidden, config.n_embd, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x, acts=None, prefix=""):
        gate, up = self.gate_proj(x), self.up_proj(x)
        record(acts, prefix + "fch", torch.cat([gate, up], dim=-1))   # the C++ (B, T, 2H) [gate | up]
        swiglu = self.act_fn(gate) * up                                # silu(gate) * up
        record(acts, prefix + "fch_swiglu", swiglu)
        return self.down_proj(swiglu)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = LlamaAttention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.n_embd, eps=config.norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.n_embd, eps=config.norm_eps)

    def forward(self, hidden_states, position_embeddings, acts=None, prefix=""):
        residual = hidden_states
        ln1 = self.input_layernorm(hidden_states)
        record(acts, prefix + "ln1", ln1)
        attproj = self.self_attn(ln1, position_embeddings, acts, prefix)
        record(acts, prefix + "attproj", attproj)
        residual2 = residual + attproj
        record(acts, prefix + "residual2", residual2)
        ln2 = self.post_attention_layernorm(residual2)
        record(acts, prefix + "ln2", ln2)
        fcproj = self.mlp(ln2, acts, prefix)
        record(acts, prefix + "fcproj", fcproj)
        residual3 = residual2 + fcproj
        record(acts, prefix + "residual3", residual3)
        return residual3


class LlamaModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.n_embd)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config) for _ in range(config.n_layer)])
        self.norm = LlamaRMSNorm(config.n_embd, eps=config.norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config)

    def forward(self, input_ids, acts=None):
        B, T = input_ids.shape
        hidden_states = self.embed_tokens(input_ids)
        record(acts, "encoded", hidden_states)
        position_ids = torch.arange(T, device=input_ids.device).unsqueeze(0).expand(B, T)  # 0..T-1
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for l, layer in enumerate(self.layers):
            hidden_states = layer(hidden_states, position_embeddings, acts, f"h.{l}.")
        hidden_states = self.norm(hidden_states)
        record(acts, "lnf", hidden_states)
        return hidden_states


class LlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_embeddings:  # HF's tie_weights: one Parameter, both uses add to its gradient
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, idx, targets=None, acts=None):
        """idx (B,T) int64 ids; targets (B,T) or None (already shifted: the C++ batch's targets,
        not HF's labels). Returns (logits (B,T,V), mean cross-entropy or None)."""
        B, T = idx.size()
        if T > self.config.block_size:
            raise GPTTorchError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        logits = self.lm_head(self.model(idx, acts))
        record(acts, "logits", logits)
        if targets is None:
            return logits, None
        V = self.config.vocab_size
        if acts is not None:
            record(acts, "probs", F.softmax(logits, dim=-1))
            losses = F.cross_entropy(logits.view(-1, V), targets.reshape(-1), reduction="none")
            record(acts, "losses", losses.view(B, T))
        return logits, F.cross_entropy(logits.view(-1, V), targets.reshape(-1))


# ---- the checkpoint's stacked layout <-> Hugging Face's names ---------------------------------

def layout(config):
    """[(checkpoint name, [(HF name, rows)...])]: each checkpoint tensor is its HF tensors'
    rows stacked in this order (one HF tensor for most)."""
    C, KVC, H = config.n_embd, config.n_kv_head * config.head_size, config.ffn_hidden
    rows = [("wte", [("model.embed_tokens.weight", config.vocab_size)])]
    for l in range(config.n_layer):
        p = f"model.layers.{l}."
        rows += [(f"h.{l}.ln_1.weight", [(p + "input_layernorm.weight", C)]),
                 (f"h.{l}.attn.c_attn.weight", [(p + "self_attn.q_proj.weight", C), (p + "self_attn.k_proj.weight", KVC),
                                                (p + "self_attn.v_proj.weight", KVC)]),
                 (f"h.{l}.attn.c_proj.weight", [(p + "self_attn.o_proj.weight", C)]),
                 (f"h.{l}.ln_2.weight", [(p + "post_attention_layernorm.weight", C)]),
                 (f"h.{l}.mlp.c_fc.weight", [(p + "mlp.gate_proj.weight", H), (p + "mlp.up_proj.weight", H)]),
                 (f"h.{l}.mlp.c_proj.weight", [(p + "mlp.down_proj.weight", C)])]
    rows.append(("ln_f.weight", [("model.norm.weight", C)]))
    if not config.tie_embeddings:
        rows.append(("lm_head.weight", [("lm_head.weight", config.vocab_size)]))
    return rows


def checkpoint_shapes(config):
    """{checkpoint name: shape} of a llama checkpoint with this config."""
    C, KVC, H, V = config.n_embd, config.n_kv_head * config.head_size, config.ffn_hidden, config.vocab_size
    shapes = {"wte": (V, C), "ln_f.weight": (C,)}
    for l in range(config.n_layer):
        shapes.update({f"h.{l}.ln_1.weight": (C,), f"h.{l}.attn.c_attn.weight": (C + 2 * KVC, C),
                       f"h.{l}.attn.c_proj.weight": (C, C), f"h.{l}.ln_2.weight": (C,),
                       f"h.{l}.mlp.c_fc.weight": (2 * H, C), f"h.{l}.mlp.c_proj.weight": (C, H)})
    if not config.tie_embeddings:
        shapes["lm_head.weight"] = (V, C)
    return shapes


def to_checkpoint(hf, config):
    """{HF name: array} (weights or their gradients) -> {checkpoint name: array}, rows stacked."""
    out = {}
    for name, parts in layout(config):
        arrays = [np.asarray(hf[n], dtype=np.float32) for n, _ in parts]
        out[name] = arrays[0].copy() if len(arrays) == 1 else np.concatenate(arrays, axis=0)
    return out


def from_checkpoint(tensors, config, path="checkpoint"):
    """{checkpoint name: array} -> {HF name: array}, checked: a missing or extra tensor or a
    wrong shape is a GPTTorchError naming it. With a tied head, lm_head.weight is wte."""
    shapes = checkpoint_shapes(config)
    missing = [n for n in shapes if n not in tensors]
    extra = [n for n in tensors if n not in shapes]
    if missing or extra:
        hint = ""
        if "lm_head.weight" in extra and config.tie_embeddings:
            hint = " (lm_head.weight is there but tie_embeddings = 1: the head is wte)"
        elif "lm_head.weight" in missing:
            hint = " (tie_embeddings = 0: an untied checkpoint carries its own lm_head.weight)"
        raise GPTTorchError(f"{path}: the tensors do not match a {config}: "
                            f"missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                            f"unexpected {extra[:5]}{'...' if len(extra) > 5 else ''}{hint}")
    hf = {}
    for name, parts in layout(config):
        a = tensors[name]
        if tuple(a.shape) != shapes[name]:
            raise GPTTorchError(f"{path}: '{name}' has shape {list(a.shape)}, expected {list(shapes[name])} "
                                f"for {config}")
        at = 0
        for hf_name, nrows in parts:
            hf[hf_name] = a[at:at + nrows]
            at += nrows
    if config.tie_embeddings:
        hf["lm_head.weight"] = hf["model.embed_tokens.weight"]
    return hf


def model_from_checkpoint(tensors, config, path="checkpoint"):
    model = LlamaForCausalLM(config)
    hf = from_checkpoint(tensors, config, path)
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)) for k, v in hf.items()}
    model.load_state_dict(state, strict=True)  # the same names as transformers' LlamaForCausalLM
    return model


def load_model(path):
    """A LlamaForCausalLM with the weights of a C++ llama checkpoint (config from its metadata)."""
    tensors, metadata = read_safetensors(path)
    config = config_from_metadata(metadata, path)
    return model_from_checkpoint(tensors, config, path)


def checkpoint_of(model):
    """The model's weights in the checkpoint's layout."""
    return to_checkpoint({n: p.detach().numpy() for n, p in model.state_dict().items()}, model.config)


def grads_of(model):
    """The model's gradients in the checkpoint's layout (c_attn's as [q|k|v], c_fc's as
    [gate|up]; a tied wte's holds both uses)."""
    return to_checkpoint({n: p.grad.numpy() for n, p in model.named_parameters()}, model.config)


# ---- Hugging Face model folders (config.json + model.safetensors) ---------------------------

def hf_config_dict(config):
    """transformers' LlamaConfig fields for this model (config.json)."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": config.vocab_size,
            "hidden_size": config.n_embd, "intermediate_size": config.ffn_hidden,
            "num_hidden_layers": config.n_layer, "num_attention_heads": config.n_head,
            "num_key_value_heads": config.n_kv_head, "head_dim": config.head_size, "hidden_act": "silu",
            "max_position_embeddings": config.block_size, "rms_norm_eps": config.norm_eps,
            "rope_theta": config.rope_theta, "rope_scaling": None, "attention_bias": False, "mlp_bias": False,
            "attention_dropout": 0.0, "tie_word_embeddings": config.tie_embeddings, "pretraining_tp": 1,
            "torch_dtype": "float32"}


def config_from_hf(d, path):
    """LlamaConfig from a Hugging Face config.json; what this model cannot represent is an error."""
    def need(key):
        if key not in d:
            raise GPTTorchError(f"{path}: config.json has no '{key}'")
        return d[key]
    if d.get("model_type", "llama") != "llama":
        raise GPTTorchError(f"{path}: model_type {d.get('model_type')!r} is not 'llama'")
    for key, want in (("hidden_act", "silu"), ("attention_bias", False), ("mlp_bias", False), ("rope_scaling", None),
                      ("pretraining_tp", 1)):
        if d.get(key, want) != want:
            raise GPTTorchError(f"{path}: config.json '{key}' = {d[key]!r}: this model supports only {want!r}")
    C, NH = int(need("hidden_size")), int(need("num_attention_heads"))
    if d.get("head_dim") not in (None, C // NH):
        raise GPTTorchError(f"{path}: head_dim {d['head_dim']} != hidden_size / num_attention_heads = {C // NH}")
    return LlamaConfig(vocab_size=int(need("vocab_size")), block_size=int(need("max_position_embeddings")),
                       n_layer=int(need("num_hidden_layers")), n_head=NH, n_embd=C,
                       n_kv_head=int(d.get("num_key_value_heads") or NH), ffn_hidden=int(need("intermediate_size")),
                       rope_theta=float(d.get("rope_theta", 10000.0)), norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                       tie_embeddings=bool(d.get("tie_word_embeddings", True)))


def cmd_export_hf(args):
    tensors, metadata = read_safetensors(args.weights)
    config = config_from_metadata(metadata, args.weights)
    hf = from_checkpoint(tensors, config, args.weights)
    if config.tie_embeddings:
        del hf["lm_head.weight"]  # as save_pretrained writes a tied model: the head is the embedding
    os.makedirs(args.out_dir, exist_ok=True)
    write_safetensors(os.path.join(args.out_dir, "model.safetensors"), hf, {"format": "pt"})
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(hf_config_dict(config), f, indent=2)
        f.write("\n")
    print(f"export-hf: {config} -> {args.out_dir} (config.json, model.safetensors)")
    return 0


def cmd_import_hf(args):
    cfg_path = os.path.join(args.hf_dir, "config.json")
    try:
        with open(cfg_path) as f:
            d = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise GPTTorchError(f"cannot read {cfg_path}: {e}") from e
    config = config_from_hf(d, cfg_path)
    st = os.path.join(args.hf_dir, "model.safetensors")
    hf, _ = read_safetensors(st)
    if config.tie_embeddings:
        hf.pop("lm_head.weight", None)  # a tied folder may or may not list the head
    names = {n for _, parts in layout(config) for n, _ in parts}
    extra = sorted(set(hf) - names)
    missing = sorted(names - set(hf))
    if extra or missing:
        raise GPTTorchError(f"{st}: the tensors do not match a {config}: missing {missing[:5]}, unexpected {extra[:5]}")
    tensors = to_checkpoint(hf, config)
    from_checkpoint(tensors, config, st)  # the shapes, checked
    write_safetensors(args.out, tensors, config.as_metadata())
    print(f"import-hf: {args.hf_dir} ({config}) -> {args.out}")
    return 0


# ---- parity: what the C++ side is compared with ---------------------------------------------

def forward_backward(model, inputs, targets):
    """One forward + backward with every activation named: {dump name: array}."""
    acts = {}
    model.zero_grad(set_to_none=True)
    _, loss = model(inputs, targets, acts)
    loss.backward()
    out = {name: t.numpy() for name, t in acts.items()}
    out["loss"] = np.array([loss.item()], dtype=np.float32)
    for name, g in grads_of(model).items():
        out["grad." + name] = g
    return out


def adamw_run(model, inputs, targets, steps, lr, betas, eps, weight_decay, grad_clip):
    """steps AdamW steps on one batch: (losses before each update, gradient norms before clipping)."""
    optimizer = adamw_for(model, lr, betas, eps, weight_decay)  # decay on dim >= 2 (a tied head counts once)
    losses, norms = [], []
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()  # constant lr
        losses.append(loss.item())
        norms.append(norm.item())
    return losses, norms


def cmd_parity(args):
    torch.set_num_threads(1)  # one fixed reduction order: the same numbers run after run
    model = load_model(args.weights)
    inputs, targets = load_batch(args.batch, model.config)
    out = forward_backward(model, inputs, targets)

    model = load_model(args.weights)  # the AdamW run starts from the same weights
    losses, norms = adamw_run(model, inputs, targets, args.steps, args.lr, (args.beta1, args.beta2), args.eps,
                              args.weight_decay, args.grad_clip)
    return write_parity(args, model.config, inputs, out, losses, norms)


def cmd_init(args):
    config = LlamaConfig(args.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd, args.n_kv_head,
                         args.ffn_hidden, args.rope_theta, args.norm_eps, bool(args.tie_embeddings))
    if not 1 <= args.seq_len <= config.block_size:
        raise GPTTorchError(f"--seq-len {args.seq_len} must be in [1, block_size = {config.block_size}]")
    gen = torch.Generator().manual_seed(args.seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:  # RMSNorm gains: near 1, not exactly, so their gradients matter
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.normal_(0.0, 0.02, generator=gen)
    params = checkpoint_of(model)
    write_safetensors(args.out_weights, params, config.as_metadata())
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(0, config.vocab_size, size=(args.batch_size, args.seq_len + 1))
    batch = {"inputs": tokens[:, :-1].astype(np.float32), "targets": tokens[:, 1:].astype(np.float32)}
    write_safetensors(args.out_batch, batch)
    print(f"init: {config}, {sum(p.size for p in params.values())} parameters -> {args.out_weights}; "
          f"batch B={args.batch_size} T={args.seq_len} -> {args.out_batch}")
    return 0


# ---- command line ---------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description="PyTorch reference of nnlab's llama-style GPT, "
                                                 "written as Hugging Face's Llama.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("parity", help="forward/backward/AdamW numbers to compare the C++ model with")
    p.add_argument("--weights", required=True, help="safetensors checkpoint (arch llama) with the config in __metadata__")
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

    p = sub.add_parser("init", help="random llama weights in the checkpoint layout and a random batch")
    p.add_argument("--out-weights", required=True)
    p.add_argument("--out-batch", required=True)
    p.add_argument("--vocab-size", type=int, default=65)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-kv-head", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--ffn-hidden", type=int, default=0, help="0: gpt::default_ffn_hidden(n_embd)")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--norm-eps", type=float, default=1e-5)
    p.add_argument("--tie-embeddings", type=int, default=1, choices=[0, 1])
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("export-hf", help="a checkpoint to a Hugging Face model folder")
    p.add_argument("--weights", required=True)
    p.add_argument("--out-dir", required=True)
    p.set_defaults(func=cmd_export_hf)

    p = sub.add_parser("import-hf", help="a Hugging Face Llama folder (config.json, model.safetensors F32) to a checkpoint")
    p.add_argument("--hf-dir", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_import_hf)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except GPTTorchError as e:
        print(f"llama_torch.py {args.command}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
