#!/usr/bin/env python3
"""Execute a notebook headlessly, the way the test suite does: a failing cell fails the run.

    python3 notebooks/run_notebook.py notebooks/02-backprop.ipynb --bin build/release/bin

The notebook finds the course's programs through the environment:
    NNLAB_BIN_DIR   directory holding nnlab, lesson01, ... (set from --bin)
    NNLAB_QUICK=1   run the programs on a short budget (tests set it)
It runs in a scratch directory (--workdir, default a fresh temporary one), so it never
writes into the source tree. With --output the executed notebook (with its plots) is saved.
"""
import argparse
import os
import sys
import tempfile

try:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
except ImportError as e:  # pragma: no cover - tells the user what to install
    print(f"error: {e}. Install the notebook tools: bash scripts/setup.sh "
          "(or python3 -m pip install -r notebooks/requirements.txt)", file=sys.stderr)
    sys.exit(2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebook")
    ap.add_argument("--bin", required=True, help="directory with the built programs")
    ap.add_argument("--workdir", help="where the notebook runs (default: a new temporary directory)")
    ap.add_argument("--output", help="save the executed notebook here")
    ap.add_argument("--quick", action="store_true", help="set NNLAB_QUICK=1 (short budgets)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = ap.parse_args()

    nb_path = os.path.abspath(args.notebook)
    os.environ["NNLAB_BIN_DIR"] = os.path.abspath(args.bin)
    os.environ["NNLAB_SOURCE_DIR"] = os.path.dirname(os.path.dirname(nb_path))
    if args.quick:
        os.environ["NNLAB_QUICK"] = "1"
    workdir = args.workdir or tempfile.mkdtemp(prefix="nnlab-notebook-")
    os.makedirs(workdir, exist_ok=True)

    nb = nbformat.read(nb_path, as_version=4)
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": workdir}})
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"FAILED: {args.notebook}: a cell raised an error\n{e}", file=sys.stderr)
        return 1
    finally:
        if args.output:
            nbformat.write(nb, args.output)
    print(f"ok: {args.notebook} executed in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
