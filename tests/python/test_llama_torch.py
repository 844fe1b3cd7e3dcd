#!/usr/bin/env python3
"""tests/python/test_llama_torch.py: scripts/llama_torch.py IS Hugging Face's Llama.

The C++ llama-style GPT is compared with scripts/llama_torch.py (tests/test_llama_parity.cpp);
that reference is only worth comparing with once it is shown to compute what transformers'
LlamaForCausalLM computes. Here, on random small models (hidden 32, 4 heads, 2 layers,
intermediate 96; multi-head, grouped-query with 2 KV heads and multi-query; tied and untied head):

  1. HF -> ours: a random LlamaForCausalLM's weights, stacked into the C++ checkpoint's layout
     (c_attn = [q|k|v] rows, c_fc = [gate|up] rows) and written to a safetensors file, load in
     llama_torch.py; logits, loss and every gradient (mapped back to the stacked layout)
     agree within 1e-6 of each tensor's largest magnitude (fp32 both sides);
  2. our model's state_dict loads into transformers' LlamaForCausalLM with strict=True (the
     same module names), and the reverse directions through files: export-hf's folder loads
     with LlamaForCausalLM.from_pretrained, save_pretrained's folder loads with import-hf;
  3. the dump's "h.<l>.qkv" holds q and k rotated as the contract says (pair i with i + hs/2,
     angle t * theta^(-2i/hs)), against a numpy loop;
  4. `parity` end to end: every contract name, the first AdamW loss is the forward's loss, the
     losses fall, and a rerun is bit-identical;
  5. bad checkpoints (a missing or extra tensor, a wrong shape, metadata out of range) are
     clear errors, and the command exits 1.

    python3 tests/python/test_llama_torch.py     (exit status 0 = all passed)

SKIP (exit 0, a line starting "SKIP:") without PyTorch or without transformers (pinned in
scripts/requirements-hf.txt, installed into <repo>/.venv by scripts/setup.sh; this script
re-runs itself with the .venv's Python when the running one lacks them).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "llama_torch.py")
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
INSTALL_HINT = ("/usr/bin/python3 -m venv --system-site-packages .venv && "
                ".venv/bin/pip install --require-hashes -r scripts/requirements-hf.txt   (or: bash scripts/setup.sh)")
sys.path.insert(0, os.path.join(REPO, "scripts"))

try:
    import numpy as np
    import torch
    import transformers
    from transformers import LlamaConfig as HFLlamaConfig
    from transformers import LlamaForCausalLM as HFLlamaForCausalLM
except ImportError as e:
    # The pinned transformers lives in <repo>/.venv (scripts/setup.sh): run there if this is
    # another Python. (Compare prefixes, not executables: the venv's python is a symlink.)
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv")) \
            and not os.environ.get("NNLAB_LLAMA_HF_REEXEC"):
        os.environ["NNLAB_LLAMA_HF_REEXEC"] = "1"
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    print(f"SKIP: {e} (Python {sys.executable}): the comparison with Hugging Face's Llama needs PyTorch "
          f"and transformers; install them with:\n  {INSTALL_HINT}")
    sys.exit(0)

import gpt_torch as gt  # noqa: E402
import llama_torch as lt  # noqa: E402

torch.set_num_threads(1)
B, T = 3, 11
TOL = 1e-6  # max |ours - HF| / max |HF| per tensor: the same operations in the same order


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = np.abs(b).max()
    return float(np.abs(a - b).max() / scale) if scale > 0 else float(np.abs(a - b).max())


def hf_model(n_kv_head, tied, seed):
    """A random transformers LlamaForCausalLM (eager attention, fp32) with RMSNorm gains
    away from 1, so that no term passes by being exactly 1."""
    cfg = HFLlamaConfig(vocab_size=37, hidden_size=32, intermediate_size=96, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=n_kv_head, max_position_embeddings=16,
                        rms_norm_eps=1e-6, rope_theta=500.0, tie_word_embeddings=tied, initializer_range=0.1,
                        attention_dropout=0.0, hidden_act="silu")
    cfg._attn_implementation = "eager"  # the explicit-matrix attention (torch 1.13 has no SDPA)
    torch.manual_seed(seed)
    m = HFLlamaForCausalLM(cfg).float()
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn(p.shape))
    m.train()  # dropout 0: the same numbers as eval, and the mode the C++ trainer is compared in
    return m


def batch(vocab, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (B, T), generator=g), torch.randint(0, vocab, (B, T), generator=g)


def ours_config(hf):
    c = hf.config
    return lt.LlamaConfig(vocab_size=c.vocab_size, block_size=c.max_position_embeddings, n_layer=c.num_hidden_layers,
                          n_head=c.num_attention_heads, n_embd=c.hidden_size, n_kv_head=c.num_key_value_heads,
                          ffn_hidden=c.intermediate_size, rope_theta=c.rope_theta, norm_eps=c.rms_norm_eps,
                          tie_embeddings=c.tie_word_embeddings)


def hf_forward_backward(hf, x, y):
    """HF's logits and mean cross-entropy on (x, y) (y already shifted, so not HF's labels)."""
    hf.zero_grad(set_to_none=True)
    logits = hf(input_ids=x).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    return logits.detach().numpy(), loss.item()


CASES = [(nkv, tied) for nkv in (4, 2, 1) for tied in (True, False)]  # MHA, GQA, MQA x tied, untied


class HFToOursTest(unittest.TestCase):
    """A transformers model, written as a C++ checkpoint, loaded by llama_torch.py: same numbers."""

    def test_logits_loss_and_every_gradient(self):
        for nkv, tied in CASES:
            with self.subTest(n_kv_head=nkv, tied=tied), tempfile.TemporaryDirectory() as d:
                hf = hf_model(nkv, tied, seed=10 + nkv)
                config = ours_config(hf)
                state = {n: p.detach().numpy() for n, p in hf.state_dict().items()}
                path = os.path.join(d, "w.safetensors")
                gt.write_safetensors(path, lt.to_checkpoint(state, config), config.as_metadata())
                ours = lt.load_model(path)  # the loader the parity command uses
                self.assertEqual(ours.config.n_kv_head, nkv)
                self.assertEqual(ours.config.tie_embeddings, tied)

                x, y = batch(config.vocab_size, seed=nkv)
                hf_logits, hf_loss = hf_forward_backward(hf, x, y)
                out = lt.forward_backward(ours, x, y)
                self.assertLess(rel_err(out["logits"], hf_logits), TOL)
                self.assertLess(abs(out["loss"][0] - hf_loss), TOL * abs(hf_loss))
                hf_grads = lt.to_checkpoint({n: p.grad.numpy() for n, p in hf.named_parameters()}, config)
                names = [n for n in out if n.startswith("grad.")]
                self.assertEqual(sorted(names), sorted("grad." + n for n in lt.checkpoint_shapes(config)))
                worst = 0.0
                for name, g in hf_grads.items():
                    e = rel_err(out["grad." + name], g)
                    worst = max(worst, e)
                    self.assertLess(e, TOL, f"gradient of {name}")
                    self.assertGreater(np.abs(g).max(), 0.0, f"gradient of {name} is all zero")
                print(f"  HF -> ours NKV={nkv} tied={int(tied)}: logits {rel_err(out['logits'], hf_logits):.2e}, "
                      f"loss {abs(out['loss'][0] - hf_loss):.2e}, worst gradient {worst:.2e}")

    def test_adamw_losses(self):
        """torch's AdamW on both models (decay on the matrices, clip 1.0): the same 10 losses."""
        for nkv, tied in ((2, True), (1, False)):
            with self.subTest(n_kv_head=nkv, tied=tied):
                hf = hf_model(nkv, tied, seed=20 + nkv)
                config = ours_config(hf)
                ours = lt.model_from_checkpoint(lt.to_checkpoint(
                    {n: p.detach().numpy() for n, p in hf.state_dict().items()}, config), config)
                x, y = batch(config.vocab_size, seed=5)
                ours_losses, ours_norms = lt.adamw_run(ours, x, y, 10, 1e-2, (0.9, 0.99), 1e-8, 0.1, 1.0)
                opt = gt.adamw_for(hf, 1e-2, (0.9, 0.99), 1e-8, 0.1)
                hf_losses = []
                for _ in range(10):
                    opt.zero_grad(set_to_none=True)
                    logits = hf(input_ids=x).logits
                    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(hf.parameters(), 1.0)
                    opt.step()
                    hf_losses.append(loss.item())
                self.assertLess(rel_err(ours_losses, hf_losses), 1e-5)
                self.assertLess(ours_losses[-1], ours_losses[0])


class NamesAndFilesTest(unittest.TestCase):
    """The modules carry HF's names; the folders each side writes load in the other."""

    def test_state_dict_loads_into_transformers_strictly(self):
        for nkv, tied in CASES:
            with self.subTest(n_kv_head=nkv, tied=tied):
                hf = hf_model(nkv, tied, seed=1)
                ours = lt.LlamaForCausalLM(ours_config(hf))
                ours.load_state_dict(hf.state_dict(), strict=True)
                hf.load_state_dict(ours.state_dict(), strict=True)
                self.assertEqual(sorted(n for n, _ in ours.named_parameters()),
                                 sorted(n for n, _ in hf.named_parameters()))

    def test_export_hf_loads_with_from_pretrained(self):
        for nkv, tied in ((2, True), (1, False)):
            with self.subTest(n_kv_head=nkv, tied=tied), tempfile.TemporaryDirectory() as d:
                w, b, folder = (os.path.join(d, n) for n in ("w.safetensors", "b.safetensors", "hf"))
                run_ok(self, "init", "--out-weights", w, "--out-batch", b, "--vocab-size", "29", "--block-size", "16",
                       "--n-embd", "32", "--n-head", "4", "--n-kv-head", str(nkv), "--ffn-hidden", "48",
                       "--rope-theta", "300", "--norm-eps", "1e-6", "--tie-embeddings", str(int(tied)),
                       "--seq-len", str(T), "--batch-size", str(B))
                run_ok(self, "export-hf", "--weights", w, "--out-dir", folder)
                hf = HFLlamaForCausalLM.from_pretrained(folder, attn_implementation="eager")
                self.assertEqual(hf.config.tie_word_embeddings, tied)
                ours = lt.load_model(w)
                x, _ = batch(29, seed=3)
                with torch.no_grad():
                    self.assertLess(rel_err(ours(x)[0].numpy(), hf(input_ids=x).logits.numpy()), TOL)

    def test_save_pretrained_loads_with_import_hf(self):
        for nkv, tied in ((4, True), (2, False)):
            with self.subTest(n_kv_head=nkv, tied=tied), tempfile.TemporaryDirectory() as d:
                hf = hf_model(nkv, tied, seed=7)
                folder, w = os.path.join(d, "hf"), os.path.join(d, "w.safetensors")
                hf.save_pretrained(folder, safe_serialization=True)
                run_ok(self, "import-hf", "--hf-dir", folder, "--out", w)
                _, meta = gt.read_safetensors(w)
                self.assertEqual(meta["arch"], "llama")
                self.assertEqual(meta["n_kv_head"], str(nkv))
                self.assertEqual(meta["tie_embeddings"], str(int(tied)))
                ours = lt.load_model(w)
                x, _ = batch(37, seed=4)
                with torch.no_grad():
                    self.assertLess(rel_err(ours(x)[0].numpy(), hf(input_ids=x).logits.numpy()), TOL)


class RopeInDumpTest(unittest.TestCase):
    def test_qkv_holds_rotated_q_and_k(self):
        """h.0.qkv = [rope(ln1 Wq^T) | rope(ln1 Wk^T) | ln1 Wv^T], with rope a numpy loop over
        pairs (i, i + hs/2) at angle t * theta^(-2i/hs): what the C++ dump must hold."""
        hf = hf_model(2, False, seed=3)
        config = ours_config(hf)
        ours = lt.model_from_checkpoint(lt.to_checkpoint(
            {n: p.detach().numpy() for n, p in hf.state_dict().items()}, config), config)
        x, y = batch(config.vocab_size, seed=8)
        out = lt.forward_backward(ours, x, y)
        ln1 = out["h.0.ln1"].astype(np.float64)
        W = lt.checkpoint_of(ours)["h.0.attn.c_attn.weight"].astype(np.float64)
        proj = ln1 @ W.T  # (B, T, C + 2 KVC) before RoPE
        hs, C, KVC = config.head_size, config.n_embd, config.n_kv_head * config.head_size
        want = proj.copy()
        for b in range(B):
            for t in range(T):
                for head_start in list(range(0, C, hs)) + list(range(C, C + KVC, hs)):  # q heads, then k heads
                    for i in range(hs // 2):
                        angle = t * config.rope_theta ** (-2.0 * i / hs)
                        a, c = proj[b, t, head_start + i], proj[b, t, head_start + i + hs // 2]
                        want[b, t, head_start + i] = a * np.cos(angle) - c * np.sin(angle)
                        want[b, t, head_start + i + hs // 2] = c * np.cos(angle) + a * np.sin(angle)
        self.assertLess(rel_err(out["h.0.qkv"], want), 1e-5)
        self.assertGreater(rel_err(proj, want), 1e-2)  # the rotation is not a no-op at these positions


CONTRACT_ACTS = ["encoded", "lnf", "logits", "probs", "losses", "loss", "adamw_losses", "adamw_grad_norms"]
CONTRACT_LAYER = ["ln1", "qkv", "atty", "attproj", "residual2", "ln2", "fch", "fch_swiglu", "fcproj", "residual3"]


class ParityCommandTest(unittest.TestCase):
    def test_end_to_end(self):
        with tempfile.TemporaryDirectory() as d:
            w, b = os.path.join(d, "w.safetensors"), os.path.join(d, "b.safetensors")
            run_ok(self, "init", "--out-weights", w, "--out-batch", b, "--vocab-size", "23", "--block-size", "12",
                   "--n-embd", "24", "--n-head", "4", "--n-kv-head", "2", "--ffn-hidden", "40",
                   "--tie-embeddings", "0", "--seq-len", "9", "--batch-size", "2")
            outs = []
            for i in range(2):
                out = os.path.join(d, f"o{i}.safetensors")
                run_ok(self, "parity", "--weights", w, "--batch", b, "--out", out, "--steps", "10")
                outs.append(gt.read_safetensors(out))
            (t, meta), (t2, _) = outs
            names = set(CONTRACT_ACTS) | {f"h.{l}.{n}" for l in range(2) for n in CONTRACT_LAYER}
            names |= {"grad." + n for n in lt.checkpoint_shapes(lt.config_from_metadata(meta, w))}
            self.assertEqual(sorted(names - set(t)), [])
            self.assertEqual(t["h.0.qkv"].shape, (2, 9, 24 + 2 * 2 * 6))
            self.assertEqual(t["h.0.fch"].shape, (2, 9, 80))
            self.assertEqual(t["h.0.fch_swiglu"].shape, (2, 9, 40))
            self.assertEqual(t["adamw_losses"].shape, (10,))
            self.assertEqual(t["adamw_losses"][0], t["loss"][0])  # the loss before the first update
            self.assertLess(t["adamw_losses"][-1], t["adamw_losses"][0])
            self.assertEqual(meta["arch"], "llama")
            for name in t:  # one thread, fixed order: bit-identical reruns
                self.assertTrue(np.array_equal(t[name], t2[name]), name)


class BadInputTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.w, self.b = os.path.join(self.dir.name, "w.safetensors"), os.path.join(self.dir.name, "b.safetensors")
        run_ok(self, "init", "--out-weights", self.w, "--out-batch", self.b, "--vocab-size", "13", "--block-size", "8",
               "--n-embd", "16", "--n-head", "4", "--n-kv-head", "2", "--ffn-hidden", "24", "--seq-len", "8",
               "--batch-size", "1")
        self.tensors, self.meta = gt.read_safetensors(self.w)

    def tearDown(self):
        self.dir.cleanup()

    def error_of(self, tensors, meta):
        path = os.path.join(self.dir.name, "bad.safetensors")
        gt.write_safetensors(path, tensors, meta)
        with self.assertRaises(gt.GPTTorchError) as ctx:
            lt.load_model(path)
        return str(ctx.exception)

    def test_tensors(self):
        t = dict(self.tensors)
        del t["h.1.ln_2.weight"]
        self.assertRegex(self.error_of(t, self.meta), r"missing \['h\.1\.ln_2\.weight'\]")
        t = dict(self.tensors, **{"h.0.attn.c_attn.bias": np.zeros(32, np.float32)})
        self.assertRegex(self.error_of(t, self.meta), r"unexpected \['h\.0\.attn\.c_attn\.bias'\]")
        t = dict(self.tensors, **{"h.0.mlp.c_fc.weight": np.zeros((24, 16), np.float32)})  # H rows, not 2H
        self.assertRegex(self.error_of(t, self.meta), r"'h\.0\.mlp\.c_fc\.weight' has shape \[24, 16\], expected \[48, 16\]")
        t = dict(self.tensors, **{"lm_head.weight": np.zeros((13, 16), np.float32)})
        self.assertIn("tie_embeddings = 1", self.error_of(t, self.meta))
        self.assertIn("own lm_head.weight", self.error_of(self.tensors, dict(self.meta, tie_embeddings="0")))

    def test_metadata(self):
        cases = [({"n_kv_head": "3"}, "n_kv_head 3 must divide n_head 4"),
                 ({"n_kv_head": "-1"}, "'n_kv_head' = -1 is out of range"),
                 ({"n_layer": "0"}, "'n_layer' = 0 is out of range"),
                 ({"n_head": "x"}, "'n_head' = 'x' is not an integer"),
                 ({"arch": "gpt2"}, "metadata 'arch' = 'gpt2'"),
                 ({"bias": "1"}, "no biases"),
                 ({"rope_theta": "abc"}, "'rope_theta' = 'abc' is not a number"),
                 ({"rope_theta": "-5"}, "rope_theta -5.0 must be a finite number > 1"),
                 ({"norm_eps": "0"}, "norm_eps 0.0 must be a finite number > 0"),
                 ({"norm_eps": "nan"}, "norm_eps nan must be"),
                 ({"tie_embeddings": "2"}, "'tie_embeddings' = '2' must be 0 or 1"),
                 ({"attention": "sparse"}, "attention 'sparse' must be one of"),
                 ({"n_embd": "12", "n_head": "4"}, "head size 3 is odd")]
        for change, message in cases:
            with self.subTest(change=change):
                self.assertIn(message, self.error_of(self.tensors, dict(self.meta, **change)))
        meta = dict(self.meta)
        del meta["rope_theta"]
        self.assertIn("no 'rope_theta'", self.error_of(self.tensors, meta))

    def test_command_exits_1_with_the_message(self):
        t = dict(self.tensors)
        del t["wte"]
        bad = os.path.join(self.dir.name, "bad.safetensors")
        gt.write_safetensors(bad, t, self.meta)
        p = subprocess.run([sys.executable, SCRIPT, "parity", "--weights", bad, "--batch", self.b, "--out",
                            os.path.join(self.dir.name, "o.safetensors")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("llama_torch.py parity: error:", p.stderr)
        self.assertIn("missing ['wte']", p.stderr)
        with open(os.path.join(self.dir.name, "config.json"), "w") as f:
            json.dump({"model_type": "llama", "hidden_act": "gelu"}, f)
        p = subprocess.run([sys.executable, SCRIPT, "import-hf", "--hf-dir", self.dir.name, "--out", bad],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("'hidden_act' = 'gelu'", p.stderr)


def run_ok(test, *args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    test.assertEqual(p.returncode, 0, f"llama_torch.py {' '.join(args)}:\n{p.stdout}{p.stderr}")
    return p.stdout


if __name__ == "__main__":
    print(f"transformers {transformers.__version__}, torch {torch.__version__} ({sys.executable})")
    unittest.main(verbosity=2)
