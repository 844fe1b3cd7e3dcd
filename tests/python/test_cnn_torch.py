#!/usr/bin/env python3
"""tests/python/test_cnn_torch.py: scripts/cnn_torch.py (lesson 04's PyTorch twin) is the
same model as ours: on OUR weights (a checkpoint `lesson04 --part train` wrote) and the
same Fashion-MNIST test images, the twin's test loss and accuracy equal what
`lesson04 --part eval` prints, and one forward + backward on the same batch gives the same
loss and gradients as ours (`lesson04 --part grads`).

    /usr/bin/python3 tests/python/test_cnn_torch.py [path/to/lesson04]

Skips (exit 0, "SKIP ...") when torch or the dataset is absent. Downloads nothing.
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "cnn_torch.py")
DATA = "/usr/share/datasets/fashion-mnist"
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build", "release", "bin", "lesson04")

try:
    import numpy as np
    import torch  # noqa: F401
except ImportError as e:  # pragma: no cover
    print(f"SKIP test_cnn_torch: {e}")
    sys.exit(0)
if not os.path.isdir(DATA) or not os.path.exists(BIN):
    print(f"SKIP test_cnn_torch: needs {DATA} and {BIN}")
    sys.exit(0)


def run(cmd):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


class TwinMatchesOurs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = cls.tmp.name
        run([BIN, "--part", "train", "--epochs", "1", "--limit-train", "1280", "--limit-test", "500",
             "--data-dir", DATA, "--out-dir", cls.out, "--threads", "1"])
        cls.ckpt = os.path.join(cls.out, "cnn.safetensors")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_eval_on_our_weights(self):
        ours = run([BIN, "--part", "eval", "--data-dir", DATA, "--out-dir", self.out, "--threads", "1"])
        twin = run([sys.executable, SCRIPT, "--data-dir", DATA, "eval", "--checkpoint", self.ckpt])
        pat = r"result\s+test accuracy ([0-9.]+)% \((\d+) images\), test loss ([0-9.]+)"
        a, b = re.search(pat, ours), re.search(pat, twin)
        self.assertIsNotNone(a, ours)
        self.assertIsNotNone(b, twin)
        self.assertEqual(a[2], b[2])  # the whole test set on both sides
        # 10000 float32 forwards in two summation orders: the mean loss agrees to ~1e-6;
        # printed with 4 decimals, so at most one unit in the last place apart.
        self.assertLessEqual(abs(float(a[3]) - float(b[3])), 1.5e-4, (ours, twin))
        # an image whose top two logits are within rounding may flip: allow 2 of 10000
        self.assertLessEqual(abs(float(a[1]) - float(b[1])), 0.02, (ours, twin))

    def test_one_forward_backward(self):
        npz = os.path.join(self.out, "torch_grads.npz")
        run([sys.executable, SCRIPT, "--data-dir", DATA, "grads", "--checkpoint", self.ckpt, "--out", npz])
        run([BIN, "--part", "grads", "--data-dir", DATA, "--out-dir", self.out, "--checkpoint", self.ckpt,
             "--threads", "1"])
        # ours: grads.txt ("loss X", then one "name count" line per tensor) and grads.bin
        # (the tensors' float32 values, in that order), written by --part grads
        ours = {}
        with open(os.path.join(self.out, "grads.txt")) as f:
            lines = f.read().split("\n")
        loss = float(lines[0].split()[1])
        raw = np.fromfile(os.path.join(self.out, "grads.bin"), dtype=np.float32)
        pos = 0
        for line in lines[1:]:
            if not line:
                continue
            name, n = line.split()
            ours[name] = raw[pos:pos + int(n)]
            pos += int(n)
        self.assertEqual(pos, raw.size)
        twin = np.load(npz)
        self.assertAlmostEqual(loss, float(twin["loss"]), delta=1e-5 * max(1.0, abs(loss)))
        for name in ("conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias", "fc1.weight", "fc1.bias",
                     "fc2.weight", "fc2.bias"):
            t = twin[name].reshape(-1).astype(np.float64)
            o = ours[name].astype(np.float64)
            self.assertEqual(o.shape, t.shape, name)
            # ours in float32, the twin in float64: |ours - twin| <= 1e-4 max|twin| + 1e-6
            err = np.max(np.abs(o - t))
            self.assertLessEqual(err, 1e-4 * np.max(np.abs(t)) + 1e-6, f"{name}: max error {err}")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
