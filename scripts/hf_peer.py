#!/usr/bin/env python3
"""scripts/hf_peer.py: the peer of lesson 12's decode speed: Hugging Face transformers'
GPT2LMHeadModel / LlamaForCausalLM of the same shape as ours (random init, fp32, eval,
torch.inference_mode), greedy generate() with its KV cache, decode tokens/s after the same
prompt length.

    .venv/bin/python scripts/hf_peer.py --shape gpt2-124m [--prompt 64 --tokens 32 --rounds 5]
                                        [--threads 1,2] [--json out.json]

Decode tokens/s, not counting the prompt: each round times generate() for 1 new token (the
prefill and the first token) and for 1 + N new tokens, and takes N / (difference); the
median over rounds. The shapes (the same names as lesson12 --speed-shapes): gpt2-124m,
gpt2-355m, smollm-135m, and the tiny ones of --quick.

Thread settings: each of --threads runs in its own process. "T" means torch.set_num_threads(T)
and OPENBLAS_NUM_THREADS=T; "TxB" torch's T threads and OpenBLAS's B (at batch 1 the weights go
through OpenBLAS's gemv, whose threads are its own: on the 2-core VM of
docs/benchmarks/lesson12-vs-transformers.md torch 1 x OpenBLAS 2 was the best at every shape,
e.g. 6.06 tokens/s at GPT-2 355M against 3.35 for "1"). The best is the peer's
figure (all are recorded). OPENBLAS_CORETYPE
and OPENBLAS_L2_SIZE are removed from the environment before torch loads (this workplace sets
them, and they slow OpenBLAS). Needs torch and transformers (<repo>/.venv, scripts/setup.sh).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SHAPES = {
    # name: (arch, V, maxT, L, NH, NKV, C, H)
    "gpt2-124m": ("gpt2", 50257, 1024, 12, 12, 12, 768, 3072),
    "gpt2-355m": ("gpt2", 50257, 1024, 24, 16, 16, 1024, 4096),
    "smollm-135m": ("llama", 49152, 2048, 30, 9, 3, 576, 1536),
    "tiny-gpt2": ("gpt2", 512, 256, 2, 2, 2, 64, 256),
    "tiny-gpt2-wide": ("gpt2", 512, 256, 3, 4, 4, 128, 512),
    "tiny-llama": ("llama", 512, 256, 2, 4, 2, 64, 160),
}
BAD_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def build(shape, seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    arch, V, maxT, L, NH, NKV, C, H = SHAPES[shape]
    torch.manual_seed(seed)
    if arch == "gpt2":
        cfg = GPT2Config(vocab_size=V, n_positions=maxT, n_embd=C, n_layer=L, n_head=NH, n_inner=H,
                         activation_function="gelu_new", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = GPT2LMHeadModel(cfg)
    else:
        cfg = LlamaConfig(vocab_size=V, hidden_size=C, intermediate_size=H, num_hidden_layers=L,
                          num_attention_heads=NH, num_key_value_heads=NKV, max_position_embeddings=maxT,
                          rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu",
                          attention_bias=False, mlp_bias=False)
        model = LlamaForCausalLM(cfg)
    return model.float().eval()


def worker(args):
    """One thread setting, in this process: prints one JSON line."""
    import torch
    torch.set_num_threads(int(args.threads_one.split("x")[0]))
    model = build(args.shape, args.seed)
    V = SHAPES[args.shape][1]
    g = torch.Generator().manual_seed(args.seed + 7)
    ids = torch.randint(0, V, (1, args.prompt), generator=g)
    mask = torch.ones_like(ids)

    def gen(n):
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             num_beams=1, use_cache=True, pad_token_id=0, eos_token_id=None,
                             synced_gpus=False)  # else generate() imports torch.distributed.fsdp, which
        # Debian's torch 1.13 cannot import under Python 3.11 (a dataclass error)
        t = time.perf_counter() - t0
        assert out.shape[1] == args.prompt + n, out.shape
        return t

    with torch.inference_mode():
        gen(min(4, args.tokens))  # warm-up
        first, full, decode = [], [], []
        for _ in range(args.rounds):
            t1 = gen(1)
            t2 = gen(1 + args.tokens)
            first.append(t1)
            full.append(t2)
            decode.append(args.tokens / max(t2 - t1, 1e-9))
    print(json.dumps({
        "threads": args.threads_one,
        "tokens_per_s": statistics.median(decode),
        "round_tokens_per_s": decode,
        "prefill_and_first_ms": 1e3 * statistics.median(first),
        "params": sum(p.numel() for p in model.parameters()),
    }), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="gpt2-124m", choices=sorted(SHAPES))
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", default="1,2,1x2,2x1",
                   help="comma-separated thread settings, T or TxB (torch T, OpenBLAS B); the best is reported")
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--json", help="write the result here")
    p.add_argument("--threads-one", help=argparse.SUPPRESS)  # the worker's setting, T or TxB
    args = p.parse_args()
    if args.threads_one is not None:
        worker(args)
        return 0

    import importlib.util
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"SKIP: hf_peer.py needs {' and '.join(missing)} (scripts/setup.sh installs transformers into "
              f"<repo>/.venv; run this script with <repo>/.venv/bin/python)", file=sys.stderr)
        return 3
    rows = []
    for t in [x.strip() for x in args.threads.split(",") if x.strip()]:
        torch_t, _, blas_t = t.partition("x")
        if not torch_t.isdigit() or not (blas_t or torch_t).isdigit() or int(torch_t) < 1 or int(blas_t or torch_t) < 1:
            print(f"--threads: '{t}' is not T or TxB (whole numbers >= 1)", file=sys.stderr)
            return 2
        env = {k: v for k, v in os.environ.items() if k not in BAD_ENV}
        env["OPENBLAS_NUM_THREADS"] = blas_t or torch_t
        env["OMP_NUM_THREADS"] = torch_t
        cmd = [sys.executable, os.path.abspath(__file__), "--shape", args.shape, "--prompt", str(args.prompt),
               "--tokens", str(args.tokens), "--rounds", str(args.rounds), "--seed", str(args.seed),
               "--threads-one", t]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout + r.stderr, file=sys.stderr)
            return 1
        row = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(f"transformers {args.shape} fp32, threads {t} (torch x OpenBLAS): {row['tokens_per_s']:.2f} tokens/s "
              f"(decode, median of {args.rounds}; prefill + first token {row['prefill_and_first_ms']:.1f} ms)",
              flush=True)
    best = max(rows, key=lambda r: r["tokens_per_s"])
    import torch
    import transformers
    result = {"shape": args.shape, "prompt": args.prompt, "tokens": args.tokens, "rounds": args.rounds,
              "torch": torch.__version__, "transformers": transformers.__version__,
              "best_threads": best["threads"], "tokens_per_s": best["tokens_per_s"], "settings": rows}
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
