#!/usr/bin/env python3
"""notebooks/run_notebook.py's own behaviour, without running a notebook's programs:
where the copies go, the interpreter check (the message names the interpreter; a Python
without the tools hands over to Debian's), and clear errors for a bad notebook or --bin."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "notebooks", "run_notebook.py")
sys.path.insert(0, os.path.join(ROOT, "notebooks"))
import run_notebook  # noqa: E402


def run(python, *args, env=None):
    return subprocess.run([python, TOOL, *args], capture_output=True, text=True, env=env, timeout=300)


class RunNotebookTest(unittest.TestCase):
    def test_default_paths_go_to_the_ignored_folder(self):
        self.assertEqual(run_notebook.default_path("/tmp/x.html", "nb/02-backprop.ipynb", ".html"), "/tmp/x.html")
        got = run_notebook.default_path("", "/a/notebooks/02-backprop.ipynb", ".html")
        self.assertEqual(got, os.path.join(ROOT, "notebooks", "out", "02-backprop.html"))
        ignored = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", "notebooks/out/x.html"])
        if ignored.returncode != 128:  # 128: not a git checkout (a release tarball): nothing to check
            self.assertEqual(ignored.returncode, 0, "notebooks/out/ must be git-ignored")

    def test_missing_modules_are_named(self):
        self.assertEqual(run_notebook.missing_modules(sys.executable, ["os", "no_such_module_xyz"]),
                         ["no_such_module_xyz"])
        self.assertEqual(run_notebook.missing_modules("/no/such/python", ["os"]), ["os"])

    def test_a_python_without_the_tools_gets_a_message_naming_it(self):
        with tempfile.TemporaryDirectory() as d:
            # A python3 that cannot see the installed packages (-S: no site-packages), and
            # that may not hand over (NNLAB_NOTEBOOK_REEXEC set, as after one hand-over).
            fake = os.path.join(d, "python3")
            with open(fake, "w") as f:
                f.write(f"#!/bin/sh\nexec {sys.executable} -S \"$@\"\n")
            os.chmod(fake, 0o755)
            env = dict(os.environ, NNLAB_NOTEBOOK_REEXEC="1")
            r = run(fake, os.path.join(ROOT, "notebooks", "01-neuron.ipynb"), "--bin", d, env=env)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("cannot import", r.stderr)
            self.assertIn(sys.executable, r.stderr)
            self.assertIn("pip install -r notebooks/requirements.txt", r.stderr)

    def test_bad_notebook_and_bad_bin_are_clear_errors(self):
        r = run(sys.executable, "no-such.ipynb", "--bin", ROOT)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such notebook", r.stderr)
        r = run(sys.executable, os.path.join(ROOT, "notebooks", "01-neuron.ipynb"), "--bin", "/no/such/dir")
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a directory", r.stderr)

    def test_another_python_hands_over_to_debians(self):
        # Only where this machine has a python3 other than Debian's that lacks the tools.
        other = [p for p in (shutil.which("python3"), "/usr/local/bin/python3")
                 if p and os.path.exists(p) and os.path.realpath(p) != os.path.realpath(run_notebook.DEBIAN_PYTHON)
                 and run_notebook.missing_modules(p, ["nbclient"])]
        if not other or run_notebook.missing_modules(run_notebook.DEBIAN_PYTHON, run_notebook.NEEDED):
            self.skipTest("no second python3 without the tools here (or Debian's lacks them)")
        env = {k: v for k, v in os.environ.items() if k != "NNLAB_NOTEBOOK_REEXEC"}
        r = run(other[0], "no-such.ipynb", "--bin", ROOT, env=env)
        self.assertIn("running with /usr/bin/python3", r.stderr)
        self.assertIn("no such notebook", r.stderr)  # and Debian's Python went on with the same arguments


if __name__ == "__main__":
    unittest.main(verbosity=2)
