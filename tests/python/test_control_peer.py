#!/usr/bin/env python3
"""tests/python/test_control_peer.py: lesson 13's PI loop and MPC against python-control, CasADi
and do-mpc (scripts/control_peer.py).

    python3 tests/python/test_control_peer.py     (exit status 0 = all passed)

1. The C++ record: `nnlab lesson13 --part mpc --quick --linear-check FILE` writes the linearised
   tank, our PI's step response on it with its metrics, and one MPC problem with our solver's
   moves; control_peer.py reproduces them with the real tools (its tolerances are stated in its
   docstring) and must exit 0.
2. The checker itself: a record made by its own plain-Python reference (the PI loop as a
   recursion, the MPC by scipy's SLSQP, not CasADi) agrees, also for a step large enough for the
   PI's anti-windup to act (python-control's linear loop then compared only before it); the
   first record spoiled (one move off by 0.01, one level sample by 1e-3, the settling time by 3
   samples) is refused with those rows named; a record without its parts is a clear error (exit 2).
The nnlab program is found in $NNLAB_BIN_DIR, else <repo>/build/release/bin. SKIP (exit 0, a line
starting "SKIP:") without python-control or CasADi (pinned in scripts/requirements-control.txt,
installed into <repo>/.venv by scripts/setup.sh; this script re-runs itself with the .venv's
Python when the running one lacks them), or without the program.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
PEER = os.path.join(REPO, "scripts", "control_peer.py")
INSTALL_HINT = ("/usr/bin/python3 -m venv --system-site-packages .venv && "
                ".venv/bin/pip install --require-hashes -r scripts/requirements-control.txt   (or: bash scripts/setup.sh)")

try:
    import control  # noqa: F401
    import casadi  # noqa: F401
except ImportError as e:
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv")) \
            and not os.environ.get("NNLAB_CONTROL_PEER_TEST_REEXEC"):
        os.environ["NNLAB_CONTROL_PEER_TEST_REEXEC"] = "1"
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    print(f"SKIP: {e} (Python {sys.executable}): the control cross-checks need python-control and CasADi; "
          f"install them with:\n  {INSTALL_HINT}")
    sys.exit(0)

BIN_DIR = os.environ.get("NNLAB_BIN_DIR") or os.path.join(REPO, "build", "release", "bin")
NNLAB = os.path.join(BIN_DIR, "nnlab")
if not os.path.exists(NNLAB):
    print(f"SKIP: no nnlab program at {NNLAB}: build it first (cmake --build build/release --target nnlab)")
    sys.exit(0)


def peer(*args):
    return subprocess.run([sys.executable, PEER, *map(str, args)], capture_output=True, text=True)


class ControlPeer(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def test_cpp_record_agrees_with_python_control_and_casadi(self):
        record = os.path.join(self.tmp, "linear_check.json")
        r = subprocess.run([NNLAB, "lesson13", "--part", "mpc", "--quick", "--linear-check", record,
                            "--out-dir", os.path.join(self.tmp, "out")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, f"nnlab lesson13 --part mpc --quick --linear-check failed:\n{r.stdout}\n{r.stderr}")
        self.assertTrue(os.path.exists(record), f"nnlab lesson13 --linear-check wrote no {record}:\n{r.stdout}")
        p = peer(record)
        print(p.stdout)
        self.assertEqual(p.returncode, 0, f"control_peer.py disagrees with the C++ record:\n{p.stdout}\n{p.stderr}")
        self.assertIn("checks agree", p.stdout)
        self.assertIn("MPC moves, record vs qpOASES", p.stdout)

    def test_reference_record_agrees_and_spoiled_one_is_refused(self):
        good = os.path.join(self.tmp, "reference.json")
        r = peer(good, "--make-reference")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = peer(good)
        self.assertEqual(p.returncode, 0, f"the checker refuses its own reference:\n{p.stdout}\n{p.stderr}")
        self.assertIn("checks agree", p.stdout)

        with open(good) as f:
            rec = json.load(f)
        rec["mpc"]["moves"][3] += 0.01
        rec["pi_response"]["y"][50] += 1e-3
        rec["pi_metrics"]["settling_time"] += 3
        bad = os.path.join(self.tmp, "spoiled.json")
        with open(bad, "w") as f:
            json.dump(rec, f)
        p = peer(bad)
        self.assertEqual(p.returncode, 1, f"a spoiled record passed:\n{p.stdout}\n{p.stderr}")
        differ = [line for line in p.stdout.splitlines() if "DIFFERS" in line]
        for row in ("MPC moves, record vs qpOASES", "PI y, recursion", "PI settling_time"):
            self.assertTrue(any(line.startswith(row) for line in differ), f"no DIFFERS row '{row}' in:\n{p.stdout}")

        # A large step (0.5 -> 0.9 m): the anti-windup acts, so python-control's linear loop is
        # compared only before that (the table says from when) and the recursion everywhere.
        big = os.path.join(self.tmp, "saturating.json")
        r = peer(big, "--make-reference", "--reference-step", "0.9")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        p = peer(big)
        self.assertEqual(p.returncode, 0, f"the checker refuses its own saturating reference:\n{p.stdout}\n{p.stderr}")
        self.assertIn("anti-windup/clamp from t = ", p.stdout)
        self.assertIn("PI iae (from recursion y (not linear))", p.stdout)

        empty = os.path.join(self.tmp, "empty.json")
        with open(empty, "w") as f:
            f.write("{}")
        p = peer(empty)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertIn("no 'plant' object", p.stderr)


if __name__ == "__main__":
    print(f"python-control {control.__version__}, CasADi {casadi.__version__}, nnlab {NNLAB}")
    unittest.main(verbosity=2)
