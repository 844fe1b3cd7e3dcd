#!/usr/bin/env python3
"""scripts/check_layers.py: the layers of docs/ARCHITECTURE.md, enforced.

    python3 scripts/check_layers.py --root . --build build/release   # the tree and its link graph
    python3 scripts/check_layers.py --root .                         # the #includes only
    python3 scripts/check_layers.py --self-test                      # injects violations, must catch each

The layers, lowest first. A file may include, and a target may link, only its own layer
and the layers below it:

    0 kernels   kernels/ (kernels/cuda/, its emulator and the bench folders included)
    1 base      nn/check.h, nn/numbers.h, nn/rng.h: nn's header-only base (errors, number
                parsing, the RNG), which io/ needs as much as nn/ does; they include only
                the standard library and kernels/
    2 io        io/: file formats and data (IDX, text, safetensors, progress, file reading)
    3 nn        the rest of nn/: tensors, ops, layers, optimizers, datasets, checkpoints
    4 gpt       gpt/
    5 lessons   lessons/ (lessons/common/ included: the CLI start-up, the plant simulator), and
                exercises/manifest.h (the exercises' table, which app/ lists like the lessons)
    6 app       app/
    7 beside    tests/, exercises/, notebooks/, fuzz/, cmake/, scripts/ (the stand-alone
                timing programs), teacher/ (the answer keys' tools): may use everything

Benchmark code is a leaf for timing, not a library to build on: a file under a bench/
folder (kernels/bench/, kernels/cuda/bench/) may be included, and a target defined there
linked, only from another bench folder, lessons/, app/ or the layers beside. So nn/ or gpt/
linking nnlab_cuda_bench is a violation even though kernels/ is below them.

What is scanned: every #include "..." (and #include <...> naming one of our folders) in
every C/C++/CUDA source and header under --root (build folders, data/, out/ and hidden folders
skipped). A quoted include is resolved against the including file's folder, then the root;
one that resolves to no file of ours is an error (a typo, or a new folder this script does
not know: add it to LAYERS). With --build, the link graph is read from
<build>/nnlab_link_graph.txt (written at configure time by cmake/NnlabLinkGraph.cmake: every
target of ours, the folder that defines it, its direct dependencies), and every dependency is
checked the same way, a target placed by its folder.

KNOWN lists violations that exist on purpose for a while, each with the reason and who
removes it: the check fails when one is no longer there (so the list cannot go stale).
Exit status: 0 when nothing points upward, 1 when something does, 2 when the check could
not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# ---- the layers ---------------------------------------------------------------------------

KERNELS, BASE, IO, NN, GPT, LESSONS, APP, BESIDE = range(8)
LAYER_NAMES = ["kernels", "base", "io", "nn", "gpt", "lessons", "app", "beside"]

# Longest prefix wins. Paths are relative to the root, with '/'.
LAYERS = {
    "kernels/": KERNELS,
    "nn/check.h": BASE,
    "nn/numbers.h": BASE,
    "nn/rng.h": BASE,
    "io/": IO,
    "nn/": NN,
    "gpt/": GPT,
    "lessons/": LESSONS,
    "app/": APP,
    # The table of exercises: course content that the front door's `nnlab check` lists, as
    # it lists the lessons (it includes nn/check.h only).
    "exercises/manifest.h": LESSONS,
    "tests/": BESIDE,
    "exercises/": BESIDE,
    "notebooks/": BESIDE,
    "fuzz/": BESIDE,
    "cmake/": BESIDE,
    "scripts/": BESIDE,
    "teacher/": BESIDE,
}
# Who may use benchmark code (besides other bench folders).
BENCH_USERS = {LESSONS, APP, BESIDE}

SOURCE_SUFFIXES = {".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".inl"}
# out/: what the programs write (git-ignored), e.g. lesson 13's exported C files, which are
# generated outputs, not the project's sources.
SKIP_DIRS = {"data", "out", "node_modules", "__pycache__"}

# Violations that exist on purpose for now: (kind, from, to) -> why, and who removes it.
# kind "include": from = the including file, to = the included file (root-relative paths).
# kind "link": from / to = CMake target names.
KNOWN: dict[tuple[str, str, str], str] = {
}


def layer_of(rel: str) -> int | None:
    best = None
    for prefix, layer in LAYERS.items():
        if (rel == prefix or rel.startswith(prefix) if prefix.endswith("/") else rel == prefix):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def is_bench(rel: str) -> bool:
    return "/bench/" in "/" + rel


def may_use(user: str, used: str) -> str | None:
    """None when `user` (a root-relative path) may use `used`; else why not."""
    lu, ld = layer_of(user), layer_of(used)
    if lu is None or ld is None:
        return f"{user if lu is None else used}: in no layer (add its folder to LAYERS in scripts/check_layers.py)"
    if ld > lu:
        return f"{LAYER_NAMES[lu]} uses {LAYER_NAMES[ld]}, a higher layer"
    if lu == BASE and ld not in (KERNELS, BASE):
        return "nn's base headers may include only the standard library, kernels/ and each other"
    if is_bench(used) and not is_bench(user) and lu not in BENCH_USERS:
        return f"{LAYER_NAMES[lu]} uses benchmark code ({used}): only benches, lessons, app and the layers beside may"
    return None


# ---- includes -----------------------------------------------------------------------------

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)


def source_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(
            d for d in dirnames
            if not d.startswith(".") and not d.startswith("build") and not (rel_dir == Path(".") and d in SKIP_DIRS)
            and d not in ("__pycache__",)
        )
        for f in sorted(filenames):
            if Path(f).suffix in SOURCE_SUFFIXES:
                out.append(Path(dirpath) / f)
    return out


def our_top_dirs() -> set[str]:
    return {p.split("/")[0] for p in LAYERS}


def check_includes(root: Path) -> tuple[list[tuple[str, str, str]], list[str], int]:
    """(violations as (from, to, why), unresolved, number of includes checked)."""
    violations, unresolved, n = [], [], 0
    tops = our_top_dirs()
    for path in source_files(root):
        rel = path.relative_to(root).as_posix()
        if layer_of(rel) is None:
            violations.append((rel, "", "a source file in no layer (add its folder to LAYERS in scripts/check_layers.py)"))
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in INCLUDE_RE.finditer(text):
            quote, name = m.group(1), m.group(2).strip()
            first = name.split("/")[0]
            target = None
            if quote == '"':
                for base in (path.parent, root):
                    cand = (base / name).resolve()
                    if cand.is_file():
                        target = cand
                        break
                if target is None:
                    line = text.count("\n", 0, m.start()) + 1
                    unresolved.append(f'{rel}:{line}: #include "{name}" names no file of this tree')
                    continue
            elif first in tops and (root / name).is_file():
                target = (root / name).resolve()
            else:
                continue  # the standard library, CLI11, Catch2, zlib, CUDA...
            try:
                trel = target.relative_to(root.resolve()).as_posix()
            except ValueError:
                unresolved.append(f'{rel}: #include "{name}" resolves outside the tree ({target})')
                continue
            n += 1
            why = may_use(rel, trel)
            if why:
                violations.append((rel, trel, why))
    return violations, unresolved, n


# ---- the link graph ------------------------------------------------------------------------

@dataclass
class Target:
    name: str
    source_dir: str  # its place, relative to the root: the folder of its sources ('' for the root)
    deps: list[str]


def read_link_graph(build: Path) -> list[Target]:
    """<build>/nnlab_link_graph.txt, written at configure time by cmake/NnlabLinkGraph.cmake."""
    path = build / "nnlab_link_graph.txt"
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: configure the build again (cmake/NnlabLinkGraph.cmake writes it)")
    targets = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        name, src, deps, folders = (line.split("\t") + ["", "", ""])[:4]
        place = "" if src in (".", "") else src
        folders = [f for f in folders.split(";") if f]
        if folders:
            # The deepest folder holding all its sources: nnlab_cuda_bench is defined in
            # kernels/cuda/CMakeLists.txt but built from kernels/cuda/bench/.
            place = os.path.commonpath(folders)
        targets.append(Target(name, "" if place == "." else place, [d for d in deps.split(";") if d]))
    if not targets:
        raise RuntimeError(f"{path} lists no target")
    return targets


def check_links(targets: list[Target]) -> list[tuple[str, str, str]]:
    where = {t.name: t.source_dir for t in targets}
    violations = []
    for t in targets:
        if t.source_dir is None or t.source_dir == "":
            continue  # the root's own targets (nnlab_options) are in no layer
        for dep in t.deps:
            d = where.get(dep)
            if d is None or d == "":
                continue  # the root's interface targets, utilities: anyone may depend on them
            why = may_use(t.source_dir + "/", d + "/")
            if why:
                violations.append((t.name, dep, f"{why} (target {t.name} in {t.source_dir}/ -> {dep} in {d}/)"))
    return violations


# ---- the check ----------------------------------------------------------------------------

def run_check(root: Path, build: Path | None, out=sys.stdout) -> int:
    inc, unresolved, n_inc = check_includes(root)
    found: list[tuple[str, str, str, str]] = [("include", a, b, why) for a, b, why in inc]
    n_links = None
    if build is not None:
        targets = read_link_graph(build)
        n_links = sum(len(t.deps) for t in targets)
        found += [("link", a, b, why) for a, b, why in check_links(targets)]
    bad, known_seen = [], set()
    for kind, a, b, why in found:
        if (kind, a, b) in KNOWN:
            known_seen.add((kind, a, b))
            print(f"known  {kind}: {a} -> {b}: {KNOWN[(kind, a, b)]}", file=out)
        else:
            bad.append(f"{kind}: {a} -> {b}: {why}")
    stale = [k for k in KNOWN if k not in known_seen and (k[0] == "include" or build is not None)]
    for s in stale:
        bad.append(f"stale KNOWN entry {s[0]}: {s[1]} -> {s[2]}: it no longer happens; remove it from "
                   "scripts/check_layers.py")
    bad += [f"unresolved: {u}" for u in unresolved]
    for b in bad:
        print(f"LAYER VIOLATION  {b}", file=out)
    links = f", {n_links} direct target dependencies" if n_links is not None else " (link graph not checked: no --build)"
    print(f"check_layers: {n_inc} includes of our own files{links}; "
          f"{len(bad)} violation(s), {len(known_seen)} known", file=out)
    return 1 if bad else 0


# ---- the self-test: every rule must catch an injected violation ----------------------------

def self_test() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="check_layers_"))
    failures = []
    try:
        def write(rel, text):
            p = tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)

        # A small tree that obeys every rule.
        write("kernels/matmul.h", "#pragma once\n#include <vector>\n")
        write("kernels/bench/run.h", '#include "kernels/matmul.h"\n')
        write("kernels/cuda/emu/emu.h", '#include "../../matmul.h"\n')
        write("nn/check.h", "#include <string>\n")
        write("nn/rng.h", '#include "kernels/matmul.h"\n')
        write("io/idx.h", '#include "nn/check.h"\n#include "nn/rng.h"\n')
        write("nn/tensor.h", '#include "nn/check.h"\n#include "io/idx.h"\n#include "kernels/matmul.h"\n')
        write("gpt/model.h", '#include "nn/tensor.h"\n')
        write("lessons/03/lesson.cpp", '#include "kernels/bench/run.h"\n#include "local.h"\n#include "gpt/model.h"\n')
        write("lessons/03/local.h", "\n")
        write("app/main.cpp", '#include "lessons/03/local.h"\n#include <CLI/CLI.hpp>\n')
        write("tests/t.cpp", '#include "app/main.cpp"\n#include "kernels/bench/run.h"\n')

        def violations_of(root):
            inc, unresolved, _ = check_includes(root)
            return {(a, b) for a, b, _ in inc}, unresolved

        got, unresolved = violations_of(tmp)
        if got or unresolved:
            failures.append(f"a clean tree reported {sorted(got)} {unresolved}")

        # Each injection must be reported as exactly that violation.
        injections = [
            ("kernels/softmax.cpp", '#include "nn/tensor.h"\n', ("kernels/softmax.cpp", "nn/tensor.h")),
            ("kernels/cuda/x.cu", '#include "io/idx.h"\n', ("kernels/cuda/x.cu", "io/idx.h")),
            ("io/text.cpp", '#include "nn/tensor.h"\n', ("io/text.cpp", "nn/tensor.h")),
            ("nn/check.h", '#include "io/idx.h"\n', ("nn/check.h", "io/idx.h")),
            ("nn/ops.cpp", '#include "gpt/model.h"\n', ("nn/ops.cpp", "gpt/model.h")),
            ("gpt/train.cpp", '#include "lessons/03/local.h"\n', ("gpt/train.cpp", "lessons/03/local.h")),
            ("gpt/cli.cpp", '#include "kernels/bench/run.h"\n', ("gpt/cli.cpp", "kernels/bench/run.h")),
            ("lessons/05/x.cpp", '#include "app/main.cpp"\n', ("lessons/05/x.cpp", "app/main.cpp")),
            ("nn/layers.cpp", '#include "tests/t.cpp"\n', ("nn/layers.cpp", "tests/t.cpp")),
            ("kernels/cuda/emu/y.h", '#include "../../../nn/tensor.h"\n', ("kernels/cuda/emu/y.h", "nn/tensor.h")),
        ]
        for rel, text, expected in injections:
            p = tmp / rel
            old = p.read_text() if p.exists() else None
            write(rel, (old or "") + text)
            got, unresolved = violations_of(tmp)
            if got != {expected}:
                failures.append(f"injected {expected[0]} -> {expected[1]}: reported {sorted(got)}")
            if old is None:
                p.unlink()
            else:
                p.write_text(old)
        # An include of a file that is not there, and a file outside every layer.
        write("nn/ops.cpp", '#include "nn/tensr.h"\n')
        _, unresolved = violations_of(tmp)
        if len(unresolved) != 1:
            failures.append(f"a misspelt include gave {unresolved}")
        (tmp / "nn/ops.cpp").unlink()
        write("newdir/x.cpp", "\n")
        got, _ = violations_of(tmp)
        if got != {("newdir/x.cpp", "")}:
            failures.append(f"a file outside every layer gave {sorted(got)}")
        (tmp / "newdir/x.cpp").unlink()

        # The link graph.
        def links(edges):
            dirs = {"nnlab_kernels": "kernels", "nnlab_cuda_bench": "kernels/cuda/bench", "nnlab_io": "io",
                    "nnlab_nn": "nn", "nnlab_gpt": "gpt", "lesson09_lib": "lessons", "nnlab": "app",
                    "nnlab_tests": "tests", "nnlab_options": ""}
            deps: dict[str, list[str]] = {n: [] for n in dirs}
            for a, b in edges:
                deps[a].append(b)
            return {(a, b) for a, b, _ in check_links([Target(n, d, deps[n]) for n, d in dirs.items()])}

        clean = [("nnlab_io", "nnlab_options"), ("nnlab_nn", "nnlab_io"), ("nnlab_nn", "nnlab_kernels"),
                 ("nnlab_gpt", "nnlab_nn"), ("lesson09_lib", "nnlab_cuda_bench"), ("lesson09_lib", "nnlab_gpt"),
                 ("nnlab", "lesson09_lib"), ("nnlab_tests", "nnlab"), ("nnlab_tests", "nnlab_cuda_bench"),
                 ("nnlab_cuda_bench", "nnlab_kernels")]
        if links(clean):
            failures.append(f"a clean link graph reported {sorted(links(clean))}")
        for edge in [("nnlab_gpt", "nnlab_cuda_bench"), ("nnlab_io", "nnlab_nn"), ("nnlab_kernels", "nnlab_nn"),
                     ("nnlab_nn", "nnlab_gpt"), ("lesson09_lib", "nnlab"), ("nnlab_gpt", "nnlab_tests")]:
            got = links(clean + [edge])
            if got != {edge}:
                failures.append(f"injected link {edge[0]} -> {edge[1]}: reported {sorted(got)}")

        # The graph file as cmake/NnlabLinkGraph.cmake writes it: a target is placed by its
        # sources' folder, so a bench library defined in kernels/cuda/ is still a bench.
        graph = tmp / "build" / "nnlab_link_graph.txt"
        graph.parent.mkdir(parents=True, exist_ok=True)
        graph.write_text("nnlab_options\t\t\t\n"
                         "nnlab_cuda\tkernels/cuda\tnnlab_options\tkernels/cuda;kernels/cuda/emu\n"
                         "nnlab_cuda_bench\tkernels/cuda\tnnlab_cuda\tkernels/cuda/bench\n"
                         "nnlab_nn\tnn\tnnlab_options\tnn\n"
                         "nnlab_gpt\tgpt\tnnlab_nn;nnlab_cuda;nnlab_cuda_bench\tgpt\n"
                         "lesson09_lib\tlessons\tnnlab_cuda_bench\tlessons/09-cuda\n")
        got = {(a, b) for a, b, _ in check_links(read_link_graph(graph.parent))}
        if got != {("nnlab_gpt", "nnlab_cuda_bench")}:
            failures.append(f"the graph file: reported {sorted(got)}, expected only nnlab_gpt -> nnlab_cuda_bench")
        shutil.rmtree(graph.parent)

        # And the whole check: an injected violation turns the exit status to 1.
        write("kernels/softmax.cpp", '#include "gpt/model.h"\n')
        saved = dict(KNOWN)
        KNOWN.clear()
        try:
            with open(os.devnull, "w") as sink:
                if run_check(tmp, None, out=sink) != 1:
                    failures.append("run_check did not fail on an injected violation")
                (tmp / "kernels/softmax.cpp").unlink()
                if run_check(tmp, None, out=sink) != 0:
                    failures.append("run_check failed on the clean tree")
        finally:
            KNOWN.update(saved)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"SELF-TEST FAILED  {f}")
    print(f"check_layers self-test: {'FAILED' if failures else 'every injected violation caught'}")
    return 1 if failures else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="the source tree (default: this script's repository)")
    ap.add_argument("--build", type=Path, help="a configured build folder: also check its link graph")
    ap.add_argument("--self-test", action="store_true", help="check the checker on injected violations")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    try:
        return run_check(args.root.resolve(), args.build.resolve() if args.build else None)
    except (RuntimeError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"check_layers: cannot check: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
