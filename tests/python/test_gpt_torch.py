#!/usr/bin/env python3
"""tests/python/test_gpt_torch.py: checks of scripts/gpt_torch.py, the PyTorch reference
the C++ GPT is compared with. A reference is only worth comparing with once it is itself
checked against something independent: here, plain numpy loops in float64.

    /usr/bin/python3 tests/python/test_gpt_torch.py        (exit status 0 = all passed)

What is checked:
  - safetensors: round trip, 8-byte alignment, the FNV-1a checksum, corrupt files refused;
  - attention against a loop over (b, t, s) for each head, and the whole forward against
    a numpy float64 model; gradients against central finite differences (float64);
  - one AdamW step and the gradient clipping against the formulas gpt/backend.h states;
  - `parity` end to end on a tiny random model: loss near log V, finite gradients, the
    AdamW losses decrease on the fixed batch, bit-identical reruns, clear errors.
Needs numpy and PyTorch (Debian: python3-torch); downloads nothing.
"""

import math
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "gpt_torch.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import gpt_torch as gt  # noqa: E402  (exits with a hint when torch is missing)
import torch  # noqa: E402

CONFIG = dict(vocab_size=11, block_size=12, n_layer=2, n_head=3, n_embd=12)  # hs = 4, T < maxT
B, T = 3, 9


def random_weights(config, seed, std=0.02):
    """{name: float32 array} with the C++ names and shapes: small N(0, std) weights, LayerNorm
    gains near 1 and biases near 0 (random, so no term can pass by being exactly 0 or 1)."""
    rng = np.random.default_rng(seed)
    V, maxT, L, C = config["vocab_size"], config["block_size"], config["n_layer"], config["n_embd"]
    shapes = {"wte": (V, C), "wpe": (maxT, C), "ln_f.weight": (C,), "ln_f.bias": (C,)}
    for l in range(L):
        p = f"h.{l}."
        shapes.update({p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
                       p + "attn.c_attn.weight": (3 * C, C), p + "attn.c_attn.bias": (3 * C,),
                       p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
                       p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
                       p + "mlp.c_fc.weight": (4 * C, C), p + "mlp.c_fc.bias": (4 * C,),
                       p + "mlp.c_proj.weight": (C, 4 * C), p + "mlp.c_proj.bias": (C,)})
    weights = {}
    for name, shape in shapes.items():
        w = rng.normal(0.0, std, size=shape)
        if "ln_" in name and name.endswith(".weight"):
            w += 1.0
        weights[name] = w.astype(np.float32)
    return weights


def random_batch(config, seed):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, config["vocab_size"], size=(B, T + 1))
    return {"inputs": tokens[:, :-1].astype(np.float32), "targets": tokens[:, 1:].astype(np.float32)}


def model_from(weights, config, dtype=torch.float32):
    model = gt.GPT(gt.GPTConfig(**config))
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[name]))
    return model.to(dtype)


def assert_close(test, got, ref, atol, rtol, what):
    """|got - ref| <= atol + rtol |ref| everywhere; reports the first mismatches; NaN fails."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    test.assertEqual(got.shape, ref.shape, f"{what}: shape")
    bad = ~(np.abs(got - ref) <= atol + rtol * np.abs(ref))  # NaN compares False: bad
    if bad.any():
        idx = np.argwhere(bad)[:5]
        lines = [f"  {tuple(i)}: got {got[tuple(i)]!r}, expected {ref[tuple(i)]!r}" for i in idx]
        test.fail(f"{what}: {bad.sum()} of {bad.size} values differ (atol {atol}, rtol {rtol}):\n" + "\n".join(lines))


# ---- numpy float64 references: loops, written from gpt/model.h, not from the torch code ----

def np_layernorm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)  # biased variance, as torch and nn/
    return (x - mean) / np.sqrt(var + eps) * w + b


def np_gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_attention_loops(qkv, n_head):
    """qkv (B,T,3C) -> out (B,T,C): for each b, head h, position t, softmax over s <= t."""
    Bq, Tq, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    out = np.zeros((Bq, Tq, C))
    for b in range(Bq):
        for h in range(n_head):
            for t in range(Tq):
                q = qkv[b, t, h * hs:(h + 1) * hs]
                scores = np.array([q @ qkv[b, s, C + h * hs:C + (h + 1) * hs] / math.sqrt(hs) for s in range(t + 1)])
                e = np.exp(scores - scores.max())
                p = e / e.sum()
                for s in range(t + 1):
                    out[b, t, h * hs:(h + 1) * hs] += p[s] * qkv[b, s, 2 * C + h * hs:2 * C + (h + 1) * hs]
    return out


def np_gpt_forward(w, inputs, targets, config):
    """The whole model in float64 numpy: (logits (B,T,V), mean loss)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    Tn = inputs.shape[1]
    x = w["wte"][inputs] + w["wpe"][np.arange(Tn)]
    for l in range(config["n_layer"]):
        p = f"h.{l}."
        ln1 = np_layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = ln1 @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
        y = np_attention_loops(qkv, config["n_head"])
        x = x + y @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        ln2 = np_layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = np_gelu_tanh(ln2 @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"])
        x = x + h @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
    logits = np_layernorm(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte"].T
    m = logits.max(-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
    loss = -np.take_along_axis(logp, targets[..., None], -1).mean()
    return logits, loss


# ---- safetensors ---------------------------------------------------------------------------

class SafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "t.safetensors")

    def tearDown(self):
        self.dir.cleanup()

    def test_round_trip(self):
        rng = np.random.default_rng(0)
        tensors = {"b": rng.normal(size=(3, 5)).astype(np.float32), "a": rng.normal(size=(7,)).astype(np.float32),
                   "scalar": np.array(3.5, dtype=np.float32), "empty": np.zeros((0, 4), dtype=np.float32),
                   "h.0.attn.c_attn.weight": rng.normal(size=(2, 3, 4)).astype(np.float32)}
        gt.write_safetensors(self.path, tensors, {"n_layer": "2", "note": "é \"quoted\""})
        got, meta = gt.read_safetensors(self.path)
        self.assertEqual(meta, {"n_layer": "2", "note": "é \"quoted\""})
        self.assertEqual(sorted(got), sorted(tensors))
        for name in tensors:
            self.assertEqual(got[name].dtype, np.float32)
            self.assertEqual(got[name].shape, tensors[name].shape, name)
            self.assertTrue(np.array_equal(got[name], tensors[name]), name)  # bit for bit
        with open(self.path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
        self.assertEqual(header_len % 8, 0, "data section 8-byte aligned, as the C++ writer")
        self.assertFalse(os.path.exists(self.path + ".tmp"))

    def test_fnv1a64_known_vectors(self):
        self.assertEqual(gt.fnv1a64(b""), 0xcbf29ce484222325)
        self.assertEqual(gt.fnv1a64(b"a"), 0xaf63dc4c8601ec8c)
        self.assertEqual(gt.fnv1a64(b"foobar"), 0x85944171f73967e8)

    def write_with_checksum(self, data_bytes, checksum):
        """A file as the C++ writer makes it: one tensor "x" and "nnlab.checksum"."""
        import json
        header = {"__metadata__": {"nnlab.checksum": checksum},
                  "x": {"dtype": "F32", "shape": [len(data_bytes) // 4], "data_offsets": [0, len(data_bytes)]}}
        h = json.dumps(header).encode()
        h += b" " * ((8 - len(h) % 8) % 8)
        with open(self.path, "wb") as f:
            f.write(len(h).to_bytes(8, "little") + h + data_bytes)

    def test_checksum_checked(self):
        data = np.arange(6, dtype="<f4").tobytes()
        self.write_with_checksum(data, f"{gt.fnv1a64(data):016x}")
        got, _ = gt.read_safetensors(self.path)
        self.assertTrue(np.array_equal(got["x"], np.arange(6, dtype=np.float32)))
        corrupt = bytearray(data)
        corrupt[5] ^= 0x10
        self.write_with_checksum(bytes(corrupt), f"{gt.fnv1a64(data):016x}")
        with self.assertRaisesRegex(gt.GPTTorchError, "checksum mismatch"):
            gt.read_safetensors(self.path)

    def test_bad_files_refused(self):
        gt.write_safetensors(self.path, {"x": np.ones((4, 4), dtype=np.float32)})
        with open(self.path, "rb") as f:
            good = f.read()
        cases = {
            "truncated": (good[:-3], "do not fit"),
            "too short": (good[:5], "too short"),
            "huge header length": ((10 ** 9).to_bytes(8, "little") + good[8:], "header length"),
            "bad json": (good[:8] + b"x" + good[9:], "not valid JSON"),
            "F16": (good.replace(b'"F32"', b'"F16"'), "only F32"),
        }
        for what, (blob, message) in cases.items():
            with self.subTest(what):
                with open(self.path, "wb") as f:
                    f.write(blob)
                with self.assertRaisesRegex(gt.GPTTorchError, message):
                    gt.read_safetensors(self.path)
        with self.assertRaisesRegex(gt.GPTTorchError, "cannot read"):
            gt.read_safetensors(os.path.join(self.dir.name, "absent.safetensors"))


# ---- the model against numpy ----------------------------------------------------------------

class ModelTest(unittest.TestCase):
    def test_parameter_names_and_shapes(self):
        model = gt.GPT(gt.GPTConfig(**CONFIG))
        weights = random_weights(CONFIG, 1)
        state = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        self.assertEqual(state, {k: v.shape for k, v in weights.items()}, "state dict = the C++ names, nothing else")

    def test_attention_matches_loops(self):
        torch.manual_seed(0)
        config = gt.GPTConfig(**CONFIG)
        attn = gt.CausalSelfAttention(config)
        x = torch.randn(B, T, config.n_embd)
        acts = {}
        with torch.no_grad():
            attn(x, acts, "")
        qkv = acts["qkv"].double().numpy()
        ref = np_attention_loops(qkv, config.n_head)
        hs = config.n_embd // config.n_head
        for h in range(config.n_head):  # one head at a time: a wrong head order shows by name
            assert_close(self, acts["atty"].numpy()[:, :, h * hs:(h + 1) * hs], ref[:, :, h * hs:(h + 1) * hs],
                         1e-6, 1e-5, f"attention head {h}")
        att = acts["att"].numpy()
        self.assertTrue(np.all(np.triu(att, k=1) == 0.0), "no weight on the future")
        assert_close(self, att.sum(-1), np.ones(att.shape[:-1]), 1e-6, 0, "probabilities sum to 1")

    def test_forward_matches_numpy(self):
        weights = random_weights(CONFIG, 2, std=0.3)  # large enough that every path matters
        batch = random_batch(CONFIG, 3)
        inputs = batch["inputs"].astype(np.int64)
        targets = batch["targets"].astype(np.int64)
        model = model_from(weights, CONFIG)
        acts = {}
        with torch.no_grad():
            logits, loss = model(torch.from_numpy(inputs), torch.from_numpy(targets), acts)
        ref_logits, ref_loss = np_gpt_forward(weights, inputs, targets, CONFIG)
        assert_close(self, logits.numpy(), ref_logits, 1e-5, 1e-4, "logits")
        assert_close(self, loss.item(), ref_loss, 1e-6, 1e-5, "loss")
        # the named activations tie together the way gpt/model.h says
        L = CONFIG["n_layer"]
        assert_close(self, acts[f"h.{L - 1}.residual3"].numpy(),
                     acts[f"h.{L - 1}.residual2"].numpy() + acts[f"h.{L - 1}.fcproj"].numpy(), 1e-6, 0, "residual3")
        assert_close(self, acts["logits"].numpy(), acts["lnf"].numpy() @ weights["wte"].T, 1e-5, 1e-5, "tied head")
        assert_close(self, acts["losses"].numpy().mean(), loss.item(), 1e-6, 1e-6, "mean of losses")

    def test_gradients_match_finite_differences(self):
        weights = random_weights(CONFIG, 4, std=0.3)
        batch = random_batch(CONFIG, 5)
        inputs = torch.from_numpy(batch["inputs"].astype(np.int64))
        targets = torch.from_numpy(batch["targets"].astype(np.int64))
        model = model_from(weights, CONFIG, torch.float64)
        _, loss = model(inputs, targets)
        loss.backward()
        params = dict(model.named_parameters())
        C = CONFIG["n_embd"]
        # a few entries of each kind, the tied wte and a k-column of c_attn among them
        probes = [("wte", (int(batch["targets"][0, 0]), 1)), ("wte", (int(batch["inputs"][1, 2]), 5)),
                  ("wpe", (2, 0)), ("h.0.attn.c_attn.weight", (C + 2, 1)), ("h.0.attn.c_attn.weight", (2 * C + 3, 7)),
                  ("h.1.attn.c_proj.bias", (4,)), ("h.0.ln_1.weight", (3,)), ("h.1.ln_2.bias", (0,)),
                  ("h.1.mlp.c_fc.weight", (10, 2)), ("h.0.mlp.c_proj.weight", (1, 40)), ("ln_f.weight", (6,))]
        eps = 1e-6
        for name, index in probes:
            p = params[name]
            with torch.no_grad():
                saved = p[index].item()
                p[index] = saved + eps
                up = model(inputs, targets)[1].item()
                p[index] = saved - eps
                down = model(inputs, targets)[1].item()
                p[index] = saved
            numeric = (up - down) / (2 * eps)
            assert_close(self, p.grad[index].item(), numeric, 1e-8, 1e-5, f"d loss / d {name}{list(index)}")

    def test_adamw_and_clip_follow_backend_formula(self):
        """One step of the reference's optimizer = gpt/backend.h's adamw_update, decay on 2-D only."""
        weights = random_weights(CONFIG, 6)
        batch = random_batch(CONFIG, 7)
        inputs = torch.from_numpy(batch["inputs"].astype(np.int64))
        targets = torch.from_numpy(batch["targets"].astype(np.int64))
        model = model_from(weights, CONFIG, torch.float64)
        lr, b1, b2, eps, wd, max_norm = 1e-2, 0.9, 0.99, 1e-8, 0.1, 0.5
        opt = gt.adamw_for(model, lr, (b1, b2), eps, wd)
        for t in (1, 2):  # two steps: the bias corrections change with t
            before = {n: p.detach().clone().numpy() for n, p in model.named_parameters()}
            m_before = {n: (opt.state[p]["exp_avg"].clone().numpy() if p in opt.state else np.zeros_like(before[n]))
                        for n, p in model.named_parameters()}
            v_before = {n: (opt.state[p]["exp_avg_sq"].clone().numpy() if p in opt.state else np.zeros_like(before[n]))
                        for n, p in model.named_parameters()}
            opt.zero_grad(set_to_none=True)
            model(inputs, targets)[1].backward()
            grads = {n: p.grad.clone().numpy() for n, p in model.named_parameters()}
            norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads.values()))
            got_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item()
            assert_close(self, got_norm, norm, 1e-12, 1e-9, "grad norm")
            scale = min(1.0, max_norm / (norm + 1e-6))
            opt.step()
            for n, p in model.named_parameters():
                g = grads[n] * scale
                decay = wd if before[n].ndim >= 2 else 0.0
                x = before[n] - lr * decay * before[n]
                m = b1 * m_before[n] + (1 - b1) * g
                v = b2 * v_before[n] + (1 - b2) * g * g
                x = x - (lr / (1 - b1 ** t)) * m / (np.sqrt(v) / math.sqrt(1 - b2 ** t) + eps)
                assert_close(self, p.detach().numpy(), x, 1e-12, 1e-9, f"AdamW step {t}: {n}")


# ---- the speed peer (scripts/nanogpt_model.py) -------------------------------------------------

class NanoGPTPeerTest(unittest.TestCase):
    """The bench's peer must be the same model, or its speed says nothing about ours: with the
    parity model's weights copied in (and its tanh GELU: nanoGPT's exact one is the only
    difference), it gives the same logits, loss, gradients and AdamW step."""

    def peer_from(self, weights):
        import nanogpt_model as ng
        c = CONFIG
        peer = ng.GPT(c["vocab_size"], c["block_size"], c["n_layer"], c["n_head"], c["n_embd"]).double()
        with torch.no_grad():
            for name, p in peer.named_parameters():
                ours = name.replace("transformer.", "")
                ours = {"wte.weight": "wte", "wpe.weight": "wpe"}.get(ours, ours)
                p.copy_(torch.from_numpy(weights[ours]).double())
        for block in peer.transformer.h:
            block.mlp.gelu = torch.nn.GELU(approximate="tanh")
        return peer

    def test_same_model_as_the_parity_reference(self):
        import nanogpt_model as ng
        weights = random_weights(CONFIG, 21, std=0.3)
        batch = random_batch(CONFIG, 22)
        inputs = torch.from_numpy(batch["inputs"].astype(np.int64))
        targets = torch.from_numpy(batch["targets"].astype(np.int64))
        ours = model_from(weights, CONFIG, torch.float64)
        peer = self.peer_from(weights)
        self.assertIs(peer.lm_head.weight, peer.transformer.wte.weight, "the head is tied to the embedding")
        self.assertEqual(sum(p.numel() for p in peer.parameters()), sum(p.numel() for p in ours.parameters()))
        logits, loss = ours(inputs, targets)
        plogits, ploss = peer(inputs, targets)
        assert_close(self, plogits.detach().numpy(), logits.detach().numpy(), 1e-12, 1e-9, "peer logits")
        assert_close(self, ploss.item(), loss.item(), 1e-12, 1e-9, "peer loss")
        # one nanoGPT iteration (clip + AdamW with two groups) = one step of ours
        opt = gt.adamw_for(ours, 1e-2, (0.9, 0.99), 1e-8, 0.1)
        opt.zero_grad(set_to_none=True)
        ours(inputs, targets)[1].backward()
        torch.nn.utils.clip_grad_norm_(ours.parameters(), 0.5)
        opt.step()
        popt = peer.configure_optimizers(0.1, 1e-2, (0.9, 0.99), "cpu")
        ng.train_iteration(peer, popt, inputs, targets, grad_clip=0.5)
        after = dict(ours.named_parameters())
        for name, p in peer.named_parameters():
            key = name.replace("transformer.", "")
            key = {"wte.weight": "wte", "wpe.weight": "wpe"}.get(key, key)
            assert_close(self, p.detach().numpy(), after[key].detach().numpy(), 1e-12, 1e-9, f"after a step: {name}")

    def test_exact_gelu_by_default(self):
        import nanogpt_model as ng
        peer = ng.GPT(11, 8, 1, 2, 8).double()
        gelu = peer.transformer.h[0].mlp.gelu
        x = torch.tensor([-2.0, -0.5, 0.5, 2.0], dtype=torch.float64)  # tanh differs by 1e-4 at -2
        assert_close(self, gelu(x).numpy(), (0.5 * x * (1 + torch.erf(x / math.sqrt(2)))).numpy(), 1e-7, 1e-6,
                     "nanoGPT's nn.GELU() is the erf one")


# ---- the parity subcommand, end to end -------------------------------------------------------

class ParityCommandTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        cls.weights = os.path.join(d, "w.safetensors")
        cls.batch = os.path.join(d, "batch.safetensors")
        cls.out = os.path.join(d, "out.safetensors")
        meta = {k: str(v) for k, v in CONFIG.items()}
        gt.write_safetensors(cls.weights, random_weights(CONFIG, 8), meta)
        gt.write_safetensors(cls.batch, random_batch(CONFIG, 9))
        cls.proc = run_script("parity", "--weights", cls.weights, "--batch", cls.batch, "--out", cls.out)
        cls.result = gt.read_safetensors(cls.out)[0] if cls.proc.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)

    def test_outputs(self):
        r = self.result
        V, C, L, NH = CONFIG["vocab_size"], CONFIG["n_embd"], CONFIG["n_layer"], CONFIG["n_head"]
        self.assertEqual(r["logits"].shape, (B, T, V))
        self.assertEqual(r["probs"].shape, (B, T, V))
        self.assertEqual(r["loss"].shape, (1,))
        self.assertEqual(r["encoded"].shape, (B, T, C))
        self.assertEqual(r["lnf"].shape, (B, T, C))
        for l in range(L):
            for name, width in (("ln1", C), ("qkv", 3 * C), ("atty", C), ("attproj", C), ("residual2", C),
                                ("ln2", C), ("fch", 4 * C), ("fch_gelu", 4 * C), ("fcproj", C), ("residual3", C)):
                self.assertEqual(r[f"h.{l}.{name}"].shape, (B, T, width), f"h.{l}.{name}")
            self.assertEqual(r[f"h.{l}.att"].shape, (B, NH, T, T))
        # small init: every token about equally likely, loss about log V
        self.assertLess(abs(r["loss"][0] - math.log(V)), 0.1, f"loss {r['loss'][0]} vs log V {math.log(V)}")
        assert_close(self, r["probs"].sum(-1), np.ones((B, T)), 1e-5, 0, "probs sum to 1")

    def test_gradients(self):
        weights = random_weights(CONFIG, 8)
        for name, w in weights.items():
            g = self.result["grad." + name]
            self.assertEqual(g.shape, w.shape, name)
            self.assertTrue(np.all(np.isfinite(g)), f"grad.{name} not finite")
        # wpe rows past T get no gradient; every other tensor does
        self.assertTrue(np.all(self.result["grad.wpe"][T:] == 0.0))
        for name in weights:
            self.assertGreater(np.abs(self.result["grad." + name]).max(), 0.0, f"grad.{name} all zero")

    def test_adamw_losses_decrease(self):
        losses = self.result["adamw_losses"]
        self.assertEqual(losses.shape, (10,))
        self.assertEqual(losses[0], self.result["loss"][0], "entry 0 is the loss before any update")
        self.assertTrue(np.all(np.diff(losses) < 0), f"AdamW on one fixed batch must lower the loss: {losses}")
        self.assertTrue(np.all(self.result["adamw_grad_norms"] > 0))

    def test_bit_identical_rerun(self):
        out2 = os.path.join(self.dir.name, "out2.safetensors")
        proc = run_script("parity", "--weights", self.weights, "--batch", self.batch, "--out", out2, "--steps", "3")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        again = gt.read_safetensors(out2)[0]
        for name in ("logits", "loss", "grad.wte", "h.1.att"):
            self.assertTrue(np.array_equal(again[name], self.result[name]), name)
        self.assertTrue(np.array_equal(again["adamw_losses"], self.result["adamw_losses"][:3]))

    def test_errors_exit_nonzero(self):
        d = self.dir.name
        bad_batch = os.path.join(d, "bad_batch.safetensors")
        batch = random_batch(CONFIG, 10)
        batch["targets"][1, 2] = CONFIG["vocab_size"]  # one id past the vocabulary
        gt.write_safetensors(bad_batch, batch)
        no_config = os.path.join(d, "no_config.safetensors")
        gt.write_safetensors(no_config, random_weights(CONFIG, 8))
        missing = os.path.join(d, "missing.safetensors")
        w = random_weights(CONFIG, 8)
        del w["h.1.mlp.c_fc.bias"]
        gt.write_safetensors(missing, w, {k: str(v) for k, v in CONFIG.items()})
        garbage = os.path.join(d, "garbage.safetensors")
        with open(garbage, "wb") as f:
            f.write(b"not a safetensors file at all")
        cases = [(self.weights, bad_batch, "outside \\[0, 11\\)"), (no_config, self.batch, "no 'vocab_size'"),
                 (missing, self.batch, "missing \\['h.1.mlp.c_fc.bias'\\]"), (garbage, self.batch, "header length"),
                 (os.path.join(d, "absent"), self.batch, "cannot read")]
        for weights, batch_path, message in cases:
            with self.subTest(message):
                proc = run_script("parity", "--weights", weights, "--batch", batch_path,
                                  "--out", os.path.join(d, "never.safetensors"), "--steps", "1")
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertRegex(proc.stderr, message)
                self.assertNotIn("Traceback", proc.stderr)


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
