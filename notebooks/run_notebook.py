#!/usr/bin/env python3
"""Execute a notebook headlessly, the way the test suite does: a failing cell fails the run.

    python3 notebooks/run_notebook.py notebooks/02-backprop.ipynb --bin build/release/bin
    python3 notebooks/run_notebook.py notebooks/02-backprop.ipynb --bin build/release/bin --html
        (also writes notebooks/out/02-backprop.html: the notebook with its plots, for a browser)

The notebook finds the course's programs through the environment:
    NNLAB_BIN_DIR   directory holding nnlab, lesson01, ... (set from --bin)
    NNLAB_QUICK=1   run the programs on a short budget (tests set it)
It runs in a scratch directory (--workdir, default a fresh temporary one), so it never
writes into the source tree. --output saves the executed notebook, --html an HTML copy;
given without a path, both go to notebooks/out/ (git ignores it).

It needs a Python with nbclient, nbformat, ipykernel, numpy and matplotlib (nbconvert too for
--html). scripts/setup.sh installs them for Debian's /usr/bin/python3; run with another
python3 that lacks them, this script starts itself again with /usr/bin/python3 when that one
has them, and otherwise names the interpreter it ran with and how to install them there.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

NEEDED = ("nbclient", "nbformat", "ipykernel", "numpy", "matplotlib")
DEBIAN_PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "out")


def missing_modules(python: str, modules) -> list:
    """The modules `python` cannot import (all of them if it cannot run)."""
    code = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    try:
        r = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return list(modules)
    return r.stdout.split() if r.returncode == 0 else list(modules)


def ensure_interpreter(modules) -> None:
    """Re-executes with Debian's Python when this one lacks the notebook tools and it has them;
    exits with a message naming this interpreter otherwise. (Before, a python3 from elsewhere
    first on PATH said "run setup.sh", and setup.sh said everything was installed: a loop.)"""
    # Asked of this very process (its flags and path decide what it can import).
    lacking = [m for m in modules if importlib.util.find_spec(m) is None]
    if not lacking:
        return
    me = os.path.realpath(sys.executable)
    if (os.path.exists(DEBIAN_PYTHON) and os.path.realpath(DEBIAN_PYTHON) != me
            and not os.environ.get("NNLAB_NOTEBOOK_REEXEC")
            and not missing_modules(DEBIAN_PYTHON, modules)):
        print(f"note: {sys.executable} lacks {', '.join(lacking)}; running with {DEBIAN_PYTHON}, "
              "which has them", file=sys.stderr)
        os.environ["NNLAB_NOTEBOOK_REEXEC"] = "1"
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
    print(f"error: the Python running this script ({sys.executable}) cannot import "
          f"{', '.join(lacking)}.\n"
          f"  - on Debian, scripts/setup.sh installs them for {DEBIAN_PYTHON}: run "
          f"`bash scripts/setup.sh`, then `{DEBIAN_PYTHON} notebooks/run_notebook.py ...`;\n"
          f"  - for this interpreter: `{sys.executable} -m pip install -r notebooks/requirements.txt`.",
          file=sys.stderr)
    sys.exit(2)


def default_path(given: str, notebook: str, extension: str) -> str:
    """--output/--html without a value: notebooks/out/<name><extension>."""
    if given:
        return given
    os.makedirs(OUT_DIR, exist_ok=True)
    stem = os.path.splitext(os.path.basename(notebook))[0]
    return os.path.join(OUT_DIR, stem + extension)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook")
    ap.add_argument("--bin", required=True, help="directory with the built programs")
    ap.add_argument("--workdir", help="where the notebook runs (default: a new temporary directory)")
    ap.add_argument("--output", nargs="?", const="", default=None,
                    help="save the executed notebook here (no value: notebooks/out/<name>.ipynb)")
    ap.add_argument("--html", nargs="?", const="", default=None,
                    help="save an HTML copy of the executed notebook (no value: notebooks/out/<name>.html)")
    ap.add_argument("--quick", action="store_true", help="set NNLAB_QUICK=1 (short budgets)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = ap.parse_args()

    ensure_interpreter(NEEDED + (("nbconvert",) if args.html is not None else ()))
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb_path = os.path.abspath(args.notebook)
    if not os.path.isfile(nb_path):
        print(f"error: {args.notebook}: no such notebook", file=sys.stderr)
        return 2
    if not os.path.isdir(args.bin):
        print(f"error: --bin {args.bin}: not a directory (build first: cmake --preset release && "
              "cmake --build --preset release)", file=sys.stderr)
        return 2
    os.environ["NNLAB_BIN_DIR"] = os.path.abspath(args.bin)
    os.environ["NNLAB_SOURCE_DIR"] = os.path.dirname(os.path.dirname(nb_path))
    if args.quick:
        os.environ["NNLAB_QUICK"] = "1"
    workdir = args.workdir or tempfile.mkdtemp(prefix="nnlab-notebook-")
    os.makedirs(workdir, exist_ok=True)

    nb = nbformat.read(nb_path, as_version=4)
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": workdir}})
    failed = None
    try:
        client.execute()
    except CellExecutionError as e:
        failed = e
    # The copies are written also when a cell failed: the traceback is in them.
    if args.output is not None:
        out = default_path(args.output, nb_path, ".ipynb")
        nbformat.write(nb, out)
        print(f"wrote {out}")
    if args.html is not None:
        from nbconvert import HTMLExporter
        body, _ = HTMLExporter().from_notebook_node(nb)
        out = default_path(args.html, nb_path, ".html")
        with open(out, "w", encoding="utf-8") as f:
            f.write(body)
        print(f"wrote {out}")
    if failed is not None:
        print(f"FAILED: {args.notebook}: a cell raised an error\n{failed}", file=sys.stderr)
        return 1
    print(f"ok: {args.notebook} executed in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
