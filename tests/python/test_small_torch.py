#!/usr/bin/env python3
"""tests/python/test_small_torch.py: the PyTorch twins of lessons 05 and 06
(scripts/small_torch.py) compute what ours computes, so the timing ratios compare the same work.

    /usr/bin/python3 tests/python/test_small_torch.py     (exit status 0 = all passed)

For the RNN and the LSTM (hidden 32, to keep it quick) on Tiny Shakespeare:
  1. ours trains one step (`nnlab lesson0N --part chars --iters 1`) and saves its weights W1;
  2. ours trains one step from W1 (`--load W1`) on the same first chunk and saves W2; its log
     holds the loss at W1;
  3. the twin loads W1 into nn.RNN / nn.LSTM + nn.Linear, builds the same first chunk with its
     StreamBatcher, and computes the loss: it must equal ours to float rounding. Then it
     takes the same step (clip_grad_norm_ 1, a fresh Adam at lr 3e-3): Adam's first update is
     lr g / (|g| + eps), so every parameter of W2 checks the sign (and, where |g| < eps
     scale, the size) of one gradient element. Parameters whose gradient is exactly 0 (the
     one-hot columns of characters absent from the chunk) must not move on either side.
Skipped (exit 0, with a message) without PyTorch, without Tiny Shakespeare, or without the
built nnlab binary. Downloads nothing.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("NNLAB_BIN", os.path.join(REPO, "build", "release", "bin", "nnlab"))
sys.path.insert(0, os.path.join(REPO, "scripts"))

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    print("test_small_torch.py: skipped (needs numpy and PyTorch: Debian python3-torch, /usr/bin/python3)")
    sys.exit(0)

import gpt_torch  # noqa: E402  read_safetensors
import small_torch as st  # noqa: E402

H, B, T, LR = 32, 32, 64, 3e-3


def run_ours(lesson, out, load=None):
    cmd = [BIN, lesson, "--part", "chars", "--iters", "1", "--eval-every", "1", "--hidden", str(H),
           "--sample-len", "1", "--out-dir", out]
    if load:
        cmd += ["--load", load]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p.stdout


def first_loss(jsonl):
    with open(jsonl) as f:
        for line in f:
            r = json.loads(line)
            if "train_loss" in r:
                return r["train_loss"]
    raise AssertionError(f"{jsonl} has no train_loss record")


class SeqTwin(unittest.TestCase):
    def check(self, cell, lesson):
        with tempfile.TemporaryDirectory() as tmp:
            d1, d2 = os.path.join(tmp, "a"), os.path.join(tmp, "b")
            run_ours(lesson, d1)
            w1_path = os.path.join(d1, f"char_{cell}.safetensors")
            run_ours(lesson, d2, load=w1_path)
            w1, _ = gpt_torch.read_safetensors(w1_path)
            w2, _ = gpt_torch.read_safetensors(os.path.join(d2, f"char_{cell}.safetensors"))
            loss_ours = first_loss(os.path.join(d2, f"char_{cell}.jsonl"))

        ids, V = st.load_chars(st.shakespeare_path())
        model = st.make_seq(cell, V, H)
        rnn, head = model.rnn, model.head
        with torch.no_grad():  # ours: z = x Wx^T + h Wh^T + b; torch: + b_ih + b_hh
            rnn.weight_ih_l0.copy_(torch.from_numpy(w1["rnn.Wx"]))
            rnn.weight_hh_l0.copy_(torch.from_numpy(w1["rnn.Wh"]))
            rnn.bias_ih_l0.copy_(torch.from_numpy(w1["rnn.b"]))
            rnn.bias_hh_l0.zero_()
            head.weight.copy_(torch.from_numpy(w1["head.weight"]))
            head.bias.copy_(torch.from_numpy(w1["head.bias"]))
        x, y = st.StreamBatcher(ids[:st.train_size(len(ids))], B, T).next()
        logits, _ = model(F.one_hot(x, V).float(), None)
        loss = F.cross_entropy(logits.reshape(T * B, V), y.reshape(T * B))
        self.assertAlmostEqual(float(loss), loss_ours, delta=2e-5 * abs(loss_ours),
                               msg=f"{cell}: the loss at the same weights and chunk differs")

        loss.backward()
        params = [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0, head.weight, head.bias]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        grads = {"rnn.Wx": rnn.weight_ih_l0.grad, "rnn.Wh": rnn.weight_hh_l0.grad,
                 "rnn.b": rnn.bias_ih_l0.grad, "head.weight": head.weight.grad, "head.bias": head.bias.grad}
        for name, g in grads.items():
            g = g.double().numpy()
            update_twin = LR * g / (np.abs(g) + 1e-8)  # Adam's first step, bias-corrected
            update_ours = w1[name].astype(np.float64) - w2[name].astype(np.float64)
            # where |g| is far above eps the update is +-lr whatever the rounding: a sign test;
            # below that, its size depends on |g| itself. float32 weights round the difference
            # to ~ulp(|w|) ~ 6e-8 * |w|.
            tol = 1e-3 * LR + 1.2e-7 * np.abs(w1[name])
            big = np.abs(g) > 1e-6
            bad = np.abs(update_ours - update_twin) > tol
            self.assertFalse(np.any(bad & big), f"{cell} {name}: {int(np.sum(bad & big))} of {g.size} gradient "
                             f"signs differ, first at {np.argwhere(bad & big)[:3].tolist()}")
            zero = g == 0
            self.assertTrue(np.all(np.abs(update_ours[zero]) <= 1.2e-7 * np.abs(w1[name][zero])),
                            f"{cell} {name}: ours moved parameters whose gradient is 0 in the twin")
            self.assertGreater(int(np.sum(big)), g.size // 4, f"{cell} {name}: too few non-zero gradients to test")

    def test_rnn(self):
        self.check("rnn", "lesson05")

    def test_lstm(self):
        self.check("lstm", "lesson06")


if __name__ == "__main__":
    try:
        st.shakespeare_path()
    except SystemExit as e:
        print(f"test_small_torch.py: skipped ({e})")
        sys.exit(0)
    if not os.path.exists(BIN):
        print(f"test_small_torch.py: skipped (no {BIN}: build it with cmake --build build/release --target nnlab)")
        sys.exit(0)
    unittest.main()
