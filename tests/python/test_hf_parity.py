#!/usr/bin/env python3
"""tests/python/test_hf_parity.py: Hugging Face models in our kernels, and ours in transformers.

On small random models built by transformers from configs (gpt2/gpt/hf.h's two architectures):
  GPT2LMHeadModel (4 heads, 2 layers); LlamaForCausalLM with grouped-query heads (4 query, 2
  key/value), tied and untied head; each saved with save_pretrained (model.safetensors), the
  GPT-2 one also in float16 and bfloat16 (torch_dtype), one Llama sharded (an index and two files):
  1. logits: `nnlab generate --model DIR --prompt-ids .. --dump-logits F` (the KV-cache decoder's
     prefill, fp32) against the transformers model's, on a batch of sequences of several lengths:
     within 1e-5 of the logits' largest magnitude (measured: ~1e-6; fp32 both sides; a
     half-precision file is compared with the same weights upcast, which is what we load);
  2. greedy generation: 50 tokens of `nnlab generate --temperature 0 --ids` are the ids of
     transformers' generate(do_sample=False);
  3. text: a byte-level BPE tokenizer.json trained by `tokenizers` beside the GPT-2 model, so
     `--prompt TEXT` goes through our BpeTokenizer: the same prompt ids, the same greedy ids,
     the same decoded text;
  4. ours -> transformers: tiny checkpoints trained by `nnlab gpt train` (gpt2 arch, and llama with
     GQA and an untied head) exported by `nnlab export-hf` load with from_pretrained, and their
     logits agree with ours (the checkpoint file through `nnlab generate --model CKPT`).

    python3 tests/python/test_hf_parity.py     (exit status 0 = all passed)

The nnlab program is found in $NNLAB_BIN_DIR, else <repo>/build/release/bin. SKIP (exit 0, a line
starting "SKIP:") without PyTorch, transformers or tokenizers (pinned in
scripts/requirements-hf.txt, installed into <repo>/.venv by scripts/setup.sh; this script re-runs
itself with the .venv's Python when the running one lacks them), or without the program.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
INSTALL_HINT = ("/usr/bin/python3 -m venv --system-site-packages .venv && "
                ".venv/bin/pip install --require-hashes -r scripts/requirements-hf.txt   (or: bash scripts/setup.sh)")

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
except ImportError as e:
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv")) \
            and not os.environ.get("NNLAB_HF_PARITY_REEXEC"):
        os.environ["NNLAB_HF_PARITY_REEXEC"] = "1"
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    print(f"SKIP: {e} (Python {sys.executable}): the Hugging Face parity tests need PyTorch, transformers and "
          f"tokenizers; install them with:\n  {INSTALL_HINT}")
    sys.exit(0)

BIN_DIR = os.environ.get("NNLAB_BIN_DIR") or os.path.join(REPO, "build", "release", "bin")
NNLAB = os.path.join(BIN_DIR, "nnlab")
if not os.path.exists(NNLAB):
    print(f"SKIP: no nnlab program at {NNLAB}: build it first (cmake --build build/release --target nnlab)")
    sys.exit(0)

torch.set_num_threads(1)
TOL = 1e-5  # of the logits' largest magnitude: fp32 on both sides, different summation orders
VOCAB = 300
TEXT = ("First Citizen: Before we proceed any further, hear me speak. All: Speak, speak. First Citizen: "
        "You are all resolved rather to die than to famish? All: Resolved. resolved. First Citizen: First, "
        "you know Caius Marcius is chief enemy to the people. ") * 4


def nnlab(*args, check=True, text=True):
    r = subprocess.run([NNLAB, *map(str, args)], capture_output=True, text=text)
    if check and r.returncode != 0:
        raise AssertionError(f"nnlab {' '.join(map(str, args))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def our_logits(model_dir, ids, tmp):
    path = os.path.join(tmp, "logits.safetensors")
    nnlab("generate", "--model", model_dir, "--prompt-ids", " ".join(map(str, ids)), "--tokens", "0",
          "--dump-logits", path, "--ids")
    return load_file(path)["logits"]


def our_greedy(model_dir, ids, n):
    r = nnlab("generate", "--model", model_dir, "--prompt-ids", ",".join(map(str, ids)), "--tokens", n,
              "--temperature", "0", "--ids", "--no-eos")
    return [int(x) for x in r.stdout.split()]


def hf_greedy(model, ids, n):
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=n, min_new_tokens=n,
                             pad_token_id=0, eos_token_id=None, num_beams=1, top_k=None, top_p=None,
                             temperature=None, synced_gpus=False)  # synced_gpus given: no torch.distributed
                             # import (torch 1.13's fsdp module fails to import under Python 3.11)
    return out[0, len(ids):].tolist()


def gpt2_config(**kw):
    return GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                      initializer_range=0.3, bos_token_id=None, eos_token_id=None, **kw)


def llama_config(tied, **kw):
    return LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                       rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=tied, initializer_range=0.3,
                       bos_token_id=None, eos_token_id=None, **kw)


def random_model(cls, config, seed):
    torch.manual_seed(seed)
    return cls(config).eval()


def batch(seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, size=n).tolist() for n in (16, 9, 31)]


def byte_decoder():
    """GPT-2's byte-level alphabet backwards: token character -> byte (a random model's text is
    any bytes, not always UTF-8, so the comparison is of bytes)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def train_bpe(text, vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text], trainer)
    return tok


class HfParity(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="nnlab_hf_parity_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def check_logits(self, model, model_dir, seed, what):
        for ids in batch(seed):
            with torch.no_grad():
                want = model(torch.tensor([ids])).logits[0].float().numpy()
            got = our_logits(model_dir, ids, self.tmp)
            self.assertEqual(got.shape, want.shape, what)
            err = float(np.max(np.abs(got - want)))
            scale = float(np.max(np.abs(want)))
            self.assertLessEqual(err, TOL * max(scale, 1.0), f"{what}: logits of {len(ids)} tokens differ by {err} "
                                                              f"(largest {scale})")

    def check_greedy(self, model, model_dir, what, n=50):
        prompt = batch(7)[1]
        want = hf_greedy(model, prompt, n)
        # weights N(0, 0.3) (initializer_range): a random model that does not just repeat a token
        self.assertGreaterEqual(len(set(want)), 10, f"{what}: transformers' greedy ids {want} are too repetitive "
                                                    "to compare")
        self.assertEqual(our_greedy(model_dir, prompt, n), want, what)

    def test_gpt2_fp32(self):
        model = random_model(GPT2LMHeadModel, gpt2_config(), 1)
        d = os.path.join(self.tmp, "gpt2")
        model.save_pretrained(d)
        self.check_logits(model, d, 1, "gpt2 fp32")
        self.check_greedy(model, d, "gpt2 fp32 greedy")

    def test_gpt2_half_precision_files(self):
        for dtype, name in ((torch.float16, "F16"), (torch.bfloat16, "BF16")):
            model = random_model(GPT2LMHeadModel, gpt2_config(), 2)
            d = os.path.join(self.tmp, "gpt2_" + name)
            model.to(dtype).save_pretrained(d)
            with open(os.path.join(d, "model.safetensors"), "rb") as f:
                header = f.read(8 + int.from_bytes(f.read(8), "little"))
            self.assertIn(f'"dtype":"{name}"'.encode(), header.replace(b" ", b""))
            # what we load: the half-precision weights, exactly, as float32
            ref = GPT2LMHeadModel.from_pretrained(d, torch_dtype=torch.float32).eval()
            self.check_logits(ref, d, 2, f"gpt2 {name}")
            r = nnlab("generate", "--model", d, "--prompt-ids", "1 2 3", "--tokens", "1", "--ids")
            self.assertIn(f"({name})", r.stderr)

    def test_llama_gqa_tied_and_untied(self):
        for tied in (True, False):
            model = random_model(LlamaForCausalLM, llama_config(tied), 3)
            d = os.path.join(self.tmp, f"llama_{tied}")
            model.save_pretrained(d)
            what = f"llama GQA 4/2 {'tied' if tied else 'untied'}"
            self.check_logits(model, d, 3, what)
            self.check_greedy(model, d, what + " greedy")

    def test_llama_sharded(self):
        model = random_model(LlamaForCausalLM, llama_config(False), 4)
        d = os.path.join(self.tmp, "llama_sharded")
        model.save_pretrained(d, max_shard_size="100KB")
        self.assertTrue(os.path.exists(os.path.join(d, "model.safetensors.index.json")))
        self.assertFalse(os.path.exists(os.path.join(d, "model.safetensors")))
        self.check_logits(model, d, 4, "llama sharded")

    def test_tokenizer_text(self):
        tok = train_bpe(TEXT, VOCAB)
        self.assertEqual(tok.get_vocab_size(), VOCAB)
        model = random_model(GPT2LMHeadModel, gpt2_config(), 5)
        d = os.path.join(self.tmp, "gpt2_tok")
        model.save_pretrained(d)
        tok.save(os.path.join(d, "tokenizer.json"))
        prompt = "First Citizen: you are all resolved"
        ids = tok.encode(prompt).ids
        # our tokenizer gives the same prompt: the logits file has one row per prompt token
        path = os.path.join(self.tmp, "tok_logits.safetensors")
        nnlab("generate", "--model", d, "--prompt", prompt, "--tokens", "0", "--dump-logits", path)
        self.assertEqual(load_file(path)["logits"].shape[0], len(ids))
        ours = nnlab("generate", "--model", d, "--prompt", prompt, "--tokens", 20, "--temperature", 0, "--ids",
                     "--no-eos").stdout.split()
        want = hf_greedy(model, ids, 20)
        self.assertEqual([int(x) for x in ours], want)
        text = nnlab("generate", "--model", d, "--prompt", prompt, "--tokens", 20, "--temperature", 0,
                     "--no-eos", text=False).stdout
        dec = byte_decoder()
        want_bytes = prompt.encode() + b"".join(bytes(dec[ch] for ch in tok.id_to_token(i)) for i in want) + b"\n"
        self.assertEqual(text, want_bytes)

    def test_our_exports_load_in_transformers(self):
        data = os.path.join(self.tmp, "text.txt")
        with open(data, "w") as f:
            f.write(TEXT * 3)
        for arch, extra, cls in (("gpt2", [], GPT2LMHeadModel),
                                 ("llama", ["--n-kv-head", "2", "--untied-head"], LlamaForCausalLM)):
            out = os.path.join(self.tmp, "run_" + arch)
            nnlab("gpt", "train", "--data", data, "--arch", arch, *extra, "--n-layer", 2, "--n-head", 4, "--n-embd", 32,
                  "--block-size", 32, "--batch-size", 4, "--max-iters", 20, "--eval-interval", 10, "--eval-iters", 1,
                  "--sample-tokens", 0, "--out-dir", out, "--log", "none", "--threads", 1)
            ckpt = os.path.join(out, "last.safetensors")
            hf_dir = os.path.join(self.tmp, "export_" + arch)
            r = nnlab("export-hf", "--checkpoint", ckpt, "--out", hf_dir)
            self.assertIn("no tokenizer.json", r.stdout)
            with open(os.path.join(hf_dir, "config.json")) as f:
                self.assertEqual(json.load(f)["torch_dtype"], "float32")
            model = cls.from_pretrained(hf_dir).eval()
            vocab = model.config.vocab_size
            rng = np.random.default_rng(11)
            for n in (5, 32):
                ids = rng.integers(0, vocab, size=n).tolist()
                with torch.no_grad():
                    want = model(torch.tensor([ids])).logits[0].numpy()
                for source in (ckpt, hf_dir):  # the checkpoint itself, and its export read back
                    got = our_logits(source, ids, self.tmp)
                    err = float(np.max(np.abs(got - want)))
                    self.assertLessEqual(err, TOL * max(float(np.max(np.abs(want))), 1.0),
                                         f"{arch} export from {source}: logits differ by {err}")


if __name__ == "__main__":
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, nnlab {NNLAB}")
    unittest.main(verbosity=2)
