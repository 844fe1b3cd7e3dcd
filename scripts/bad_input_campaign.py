#!/usr/bin/env python3
"""scripts/bad_input_campaign.py: the bad-input campaign, replayable.

Runs the real programs of a build on bad input, class by class, and says what each case
got. What every case must get (docs/reliability.md): a clear error (a non-zero exit, no
signal, and a message that names the file, key or flag), or a correct result; never a
crash, a hang, a memory blow-up, a silent wrong result, or lost work.

    python3 scripts/bad_input_campaign.py --bin build/release/bin            # quick (CI)
    python3 scripts/bad_input_campaign.py --bin build/release/bin --full     # every case
    python3 scripts/bad_input_campaign.py --bin B --only 'checkpoint-metadata/.*step' --keep -v
    python3 scripts/bad_input_campaign.py --bin B --list                     # the cases
    python3 scripts/bad_input_campaign.py --bin B --json r.json --markdown r.md

Exit status: 0 when every case ended in a clear error or a correct result, 1 otherwise,
2 when the campaign itself could not run (no binary, a fixture that could not be made).

How a case is judged, most severe first (the first that applies is its outcome):
  crash         killed by a signal we did not send, or a sanitizer / std::terminate report
  hang          still running at the case's time limit (for a flag case: see below)
  memory        peak RSS above the case's allowance over the program's own baseline, an
                allocation failure ("out of memory", bad_alloc), or killed by the watchdog
  lost-work     a file that was there before the run and must survive it (a checkpoint,
                the log, a user's file) is changed, removed, or no longer finite
  silent-wrong  exit 0 where an error was expected; a bad value accepted and run with (a
                flag case still running at its limit); a non-finite checkpoint written; a
                message naming a checkpoint that does not exist or holds NaN; output that
                disagrees with what is known to be right (the case's own check)
  bad-error     a non-zero exit whose message names none of the file, key or flag at
                fault, or that comes after the bad input made the work useless
  refused-good  a non-zero exit on input that is valid (a correct result was expected)
  clear-error   the expected outcome for bad input
  correct       the expected outcome for good input (exit 0, and the case's check holds)

The expected outcome of every case is written from issue 17's text (what each class must
get), not from what the programs do today. Fixtures (a corpus, IDX datasets, checkpoints)
are made at run time with the real binaries (2-step trainings) and a small safetensors
writer; nothing here depends on a download.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Callable, Optional

# ---- the safetensors format (io/safetensors.h) ----------------------------------------------
# 8-byte little-endian header length N, N bytes of JSON, then the raw little-endian float32
# data. nnlab adds "nnlab.checksum", 64-bit FNV-1a of the data section, and (since issue 17)
# "nnlab.header_checksum", FNV-1a of the rest of the header as io/safetensors.h spells it out.
CHECKSUM_KEYS = ("nnlab.checksum", "nnlab.header_checksum")


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def st_split(raw: bytes):
    """(header dict, header bytes, data bytes) of a safetensors file's bytes; ValueError if malformed."""
    if len(raw) < 8:
        raise ValueError("shorter than 8 bytes")
    n = struct.unpack("<Q", raw[:8])[0]
    if n > len(raw) - 8:
        raise ValueError("header length past the end")
    header = raw[8:8 + n]
    return json.loads(header.decode("utf-8")), header, raw[8 + n:]


def st_tensors(raw: bytes) -> dict:
    """name -> (shape, list of floats); ValueError if malformed or not F32."""
    head, _, data = st_split(raw)
    out = {}
    for name, e in head.items():
        if name == "__metadata__":
            continue
        if e.get("dtype") != "F32":
            raise ValueError(f"tensor {name} is {e.get('dtype')}")
        b, end = e["data_offsets"]
        if end > len(data) or (end - b) % 4:
            raise ValueError(f"tensor {name} offsets")
        out[name] = (e["shape"], struct.unpack(f"<{(end - b) // 4}f", data[b:end]))
    return out


def st_problem(path: Path) -> Optional[str]:
    """Why the file at `path` is not a readable, all-finite checkpoint, or None."""
    try:
        raw = path.read_bytes()
        for name, (_, values) in st_tensors(raw).items():
            for i, v in enumerate(values):
                if not math.isfinite(v):
                    return f"tensor '{name}'[{i}] is {v}"
    except FileNotFoundError:
        return "does not exist"
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError, struct.error) as e:
        return f"unreadable ({e})"
    return None


def header_checksum(meta: dict, entries: dict) -> int:
    """nnlab.header_checksum (io/safetensors.h): FNV-1a over length-prefixed fields: every
    metadata key and value in key order (the checksums left out), "__tensors__", then per
    tensor in name order its name, its dtype, its dims each followed by ',' and "begin,end"."""
    def field(text: str) -> bytes:
        b = text.encode("utf-8", "surrogatepass")
        return struct.pack("<Q", len(b)) + b
    buf = b"".join(field(k) + field(v) for k, v in sorted(meta.items()) if k not in CHECKSUM_KEYS)
    buf += field("__tensors__")
    for name in sorted(entries):
        e = entries[name]
        buf += field(name) + field(e["dtype"]) + field("".join(f"{d}," for d in e["shape"]))
        buf += field("%d,%d" % tuple(e["data_offsets"]))
    return fnv1a64(buf)


def checksum_scheme(raw: bytes) -> str:
    """How a file of the build under test is signed: 'data+header' (both checksums, as
    io/safetensors.h documents them), 'data' (the data checksum only: format nnlab-gpt-1 before
    issue 17), or 'unknown' (then the campaign writes its files unsigned, as another writer
    would)."""
    head, _, data = st_split(raw)
    meta = head.get("__metadata__", {})
    entries = {k: v for k, v in head.items() if k != "__metadata__"}
    if meta.get("nnlab.checksum") != f"{fnv1a64(data):016x}":
        return "unknown"
    if "nnlab.header_checksum" not in meta:
        return "data"
    return "data+header" if meta["nnlab.header_checksum"] == f"{header_checksum(meta, entries):016x}" else "unknown"


def st_build(tensors: list, metadata: dict, scheme: str = "data", header_text: Optional[str] = None) -> bytes:
    """Bytes of a safetensors file. tensors: [(name, shape, floats, dtype='F32')]. With scheme
    'data' or 'data+header' the file is signed as the build under test signs its own (so it
    passes the integrity check and reaches the checks behind it); with any other scheme it is
    unsigned (a writer that is not nnlab's). header_text replaces the JSON header verbatim
    (for malformed headers)."""
    data = bytearray()
    entries = {}
    for t in tensors:
        name, shape, values = t[0], t[1], t[2]
        dtype = t[3] if len(t) > 3 else "F32"
        if dtype == "F32":
            blob = struct.pack(f"<{len(values)}f", *values)
        else:
            width = {"F16": 2, "BF16": 2, "F64": 8, "I32": 4}[dtype]
            blob = bytes(width * len(values))
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    meta = {k: v for k, v in metadata.items() if k not in CHECKSUM_KEYS}
    if scheme in ("data", "data+header"):
        meta["nnlab.checksum"] = f"{fnv1a64(bytes(data)):016x}"
    if scheme == "data+header":
        meta["nnlab.header_checksum"] = f"{header_checksum(meta, entries):016x}"
    if header_text is None:
        head = {"__metadata__": dict(sorted(meta.items()))}
        head.update(entries)
        header_text = json.dumps(head, separators=(",", ":"))
    hb = header_text.encode("utf-8", "surrogatepass")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    return struct.pack("<Q", len(hb)) + hb + bytes(data)


# ---- IDX files (io/idx.h) -----------------------------------------------------------------


def idx_bytes(dims, data: bytes, type_byte: int = 0x08, ndims: Optional[int] = None, zero=(0, 0)) -> bytes:
    head = bytes([zero[0], zero[1], type_byte, len(dims) if ndims is None else ndims])
    for d in dims:
        head += struct.pack(">I", d)
    return head + data


def gz(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


# ---- discovering the programs' flags from --help ----------------------------------------------


@dataclasses.dataclass
class Flag:
    names: list          # ["-t", "--threads"]
    long: str            # "--threads" (or the only name)
    kind: str            # FLOAT, INT, UINT, TEXT, BOOLEAN, or "" for a switch
    lo: Optional[float] = None
    hi: Optional[float] = None
    vector: bool = False


HELP_LINE = re.compile(r"^\s{2}(-[\w-]+(?:,\s*-[\w-]+)*)(?:\s+(\S+))?")
RANGE = re.compile(r"in \[\s*([-+0-9.eE]+)\s*-\s*([-+0-9.eE]+)\s*\]")


def parse_help(text: str):
    """(flags, subcommands) of one CLI11 --help text."""
    flags, subs, section = [], [], ""
    for line in text.splitlines():
        if re.match(r"^\S.*:\s*$", line):
            section = line.strip().rstrip(":")
            continue
        if section == "Subcommands":
            m = re.match(r"^\s{2}(\w[\w-]*)\s", line)
            if m:
                subs.append(m.group(1))
            continue
        m = HELP_LINE.match(line)
        if not m:
            continue
        names = [n.strip() for n in m.group(1).split(",")]
        if "--help" in names:
            continue
        spec = m.group(2) or ""
        if spec.startswith("{") or not re.match(r"^[A-Z]", spec):
            spec = ""  # a switch (no value): --quick, --no-python{false}
        kind = spec.split(":")[0].split("=")[0] if spec else ""
        long = next((n for n in names if n.startswith("--")), names[-1])
        f = Flag(names=names, long=long, kind=kind, vector=line.rstrip().endswith("..."))
        r = RANGE.search(line)
        if r:
            try:
                f.lo, f.hi = float(r.group(1)), float(r.group(2))
            except ValueError:
                pass
        flags.append(f)
    return flags, subs


# ---- running one program: limits, measurements --------------------------------------------


@dataclasses.dataclass
class Run:
    rc: int = 0                 # exit status, or -signal
    timed_out: bool = False
    mem_killed: bool = False
    peak_rss_mb: float = 0.0
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""


def vm_rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_program(argv: list, cwd: Path, env: dict, timeout: float, as_limit_mb: int, rss_kill_mb: int) -> Run:
    """Runs argv in its own session with an address-space limit (prlimit, 0: none) and an RSS
    watchdog; measures the peak RSS (wait4's ru_maxrss) and the wall time."""
    import subprocess
    cmd = list(argv)
    if as_limit_mb > 0 and shutil.which("prlimit"):
        cmd = ["prlimit", f"--as={as_limit_mb * 1024 * 1024}", "--"] + cmd
    out_path, err_path = cwd / ".stdout", cwd / ".stderr"
    r = Run()
    t0 = time.monotonic()
    with open(out_path, "wb") as fo, open(err_path, "wb") as fe:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                             start_new_session=True)
        status, ru = None, None
        delay = 0.002
        while True:
            pid, st, rusage = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                status, ru = st, rusage
                break
            elapsed = time.monotonic() - t0
            if elapsed > timeout:
                r.timed_out = True
            elif rss_kill_mb > 0 and vm_rss_kb(p.pid) > rss_kill_mb * 1024:
                r.mem_killed = True
            if r.timed_out or r.mem_killed:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(delay)
            delay = min(delay * 1.5, 0.05)
        p.returncode = 0  # reaped above; keeps subprocess from waiting again
    r.wall_s = time.monotonic() - t0
    r.rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    r.peak_rss_mb = ru.ru_maxrss / 1024.0
    r.stdout = out_path.read_bytes().decode("utf-8", "replace")
    r.stderr = err_path.read_bytes().decode("utf-8", "replace")
    out_path.unlink()
    err_path.unlink()
    return r


# ---- cases ------------------------------------------------------------------------------


@dataclasses.dataclass
class Case:
    id: str                      # class/what: stable, for --only
    cls: str
    desc: str
    argv: list                   # argv[0] is a program of the build ("nnlab", "lesson02")
    expect: str                  # "error", "ok" or "either"
    names: list = dataclasses.field(default_factory=list)  # a clear error names one of these
    setup: Optional[Callable] = None      # setup(case_dir): writes the case's inputs
    check: Optional[Callable] = None      # check(run, case_dir) -> problem or None, after exit 0
    late: Optional[Callable] = None       # late(run, case_dir) -> problem or None, after exit != 0
    keep: list = dataclasses.field(default_factory=list)         # must stay byte-identical
    keep_finite: list = dataclasses.field(default_factory=list)  # checkpoints: must stay finite
    out_dir: Optional[str] = None  # checkpoints in it must be finite; messages naming one must be true
    timeout: float = 20.0
    timeout_means: str = "hang"   # or "accepted" (a flag case: the value was taken)
    mem_mb: float = 256.0         # allowance over the program's baseline peak RSS
    as_limit: bool = True         # address-space limit (off for thread cases)
    exclusive: bool = False       # run alone (threads, memory)
    quick: bool = False           # in the quick (CI) subset
    env: dict = dataclasses.field(default_factory=dict)
    context: str = ""             # the baseline context this case builds on ("" none)


FAILING = ["crash", "hang", "memory", "lost-work", "silent-wrong", "bad-error", "refused-good"]
PASSING = ["clear-error", "correct"]
OUTCOMES = FAILING + PASSING

CRASH_TEXT = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:|terminate called|Segmentation fault|"
                        r"core dumped|Floating point exception|stack smashing|double free|free\(\): invalid")
# What a failed allocation prints (run_guarded's bad_alloc handler, gpt's host memory, libstdc++),
# not any message that mentions memory: a loader's cap may well say why it refuses.
MEMORY_TEXT = re.compile(r"error: out of memory|out of host memory|bad_alloc|Cannot allocate memory|"
                         r"cannot create std::vector|vector::_M_default_append|vector::reserve")
CLAIMED_CKPT = re.compile(r"([\w./#+-]*[\w#+-]\.safetensors)(?![\w.])")


def sha(path: Path) -> Optional[str]:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def judge(case: Case, r: Run, d: Path, before: dict, baseline_mb: float) -> tuple:
    """(outcome, detail) of a finished case: the most severe finding."""
    text = r.stdout + "\n" + r.stderr
    found = []  # (outcome, detail)
    if r.rc < 0 and not r.timed_out and not r.mem_killed:
        found.append(("crash", f"killed by signal {-r.rc} ({signal.Signals(-r.rc).name})"))
    m = CRASH_TEXT.search(text)
    if m:
        found.append(("crash", f"'{m.group(0)}' in the output"))
    if r.timed_out:
        if case.timeout_means == "accepted":
            found.append(("silent-wrong", f"the bad value was accepted: still running after {case.timeout:.0f} s"))
        else:
            found.append(("hang", f"still running after {case.timeout:.0f} s"))
    cap = baseline_mb + case.mem_mb
    if r.mem_killed:
        found.append(("memory", f"killed by the watchdog at {r.peak_rss_mb:.0f} MB RSS ({cap:.0f} MB allowed)"))
    elif r.peak_rss_mb > cap:
        found.append(("memory", f"peak RSS {r.peak_rss_mb:.0f} MB > {cap:.0f} MB allowed "
                                f"(baseline {baseline_mb:.0f} + {case.mem_mb:.0f})"))
    m = MEMORY_TEXT.search(text)
    if m and not r.timed_out:
        found.append(("memory", f"'{m.group(0)}' in the output (peak RSS {r.peak_rss_mb:.0f} MB)"))
    for rel, digest in before.items():
        if rel in case.keep and sha(d / rel) != digest:
            found.append(("lost-work", f"{rel} was there before the run and is "
                                       f"{'gone' if not (d / rel).exists() else 'changed'}"))
    for rel in case.keep_finite:
        problem = st_problem(d / rel)
        if problem:
            found.append(("lost-work", f"{rel} was a good checkpoint before the run; now it {problem}"))
    if case.out_dir is not None:
        out = d / case.out_dir
        if out.is_dir():
            for p in sorted(out.rglob("*.safetensors")):
                problem = st_problem(p)
                if problem and str(p.relative_to(d)) not in case.keep_finite:
                    found.append(("silent-wrong", f"wrote {p.relative_to(d)}: {problem}"))
        for claimed in sorted(set(CLAIMED_CKPT.findall(text))):
            p = (d / claimed) if not claimed.startswith("/") else Path(claimed)
            try:
                inside = p.resolve().is_relative_to(out.resolve())
            except (OSError, ValueError):
                inside = False
            if inside:
                problem = st_problem(p)
                if problem:
                    found.append(("silent-wrong", f"the output names {claimed}, which {problem}"))
    if r.rc == 0 and not r.timed_out:
        if case.expect == "error":
            found.append(("silent-wrong", "exit 0 where an error was expected"))
        elif case.check:
            problem = case.check(r, d)  # a text (a silent wrong result) or (outcome, text)
            if problem:
                found.append(problem if isinstance(problem, tuple) else ("silent-wrong", problem))
    elif r.rc > 0:
        if case.expect == "ok":
            found.append(("refused-good", "exit %d on valid input: %s" % (r.rc, first_error(text))))
        else:
            # The message is what the program writes to stderr ("error: ...", CLI11's errors): a
            # file name in a progress line on stdout does not make an unrelated error clear.
            forms = [f for n in case.names for f in (flag_forms(n) if n.startswith("--") else [n])]
            named = [n for n in forms if n and names_in(r.stderr, n)]
            if case.names and not named:
                found.append(("bad-error", "exit %d, but the message names none of %s: %s"
                              % (r.rc, case.names, first_error(r.stderr))))
            elif case.late:
                problem = case.late(r, d)
                if problem:
                    found.append(("bad-error", problem))
    if not found:
        if r.rc == 0:
            return "correct", ""
        return "clear-error", first_error(text)
    found.sort(key=lambda f: OUTCOMES.index(f[0]))
    return found[0][0], "; ".join(dict.fromkeys(f"{o}: {t}" if i else t for i, (o, t) in enumerate(found)))


def names_in(text: str, name: str) -> bool:
    """Whether `text` names `name` as a whole: "--lr" is not found in "--lr-decay-iters", nor
    "lr" in "min_lr"; a path is found after a "/" and before a ":"."""
    pat = re.escape(name)
    if re.match(r"\w", name):
        pat = r"(?<![\w])" + pat
    if re.search(r"\w$", name):
        pat += r"(?![\w-])"
    return re.search(pat, text) is not None


def flag_forms(flag: str) -> list:
    """A flag as a message may write it: --min-lr, min-lr, min_lr."""
    key = flag.lstrip("-")
    return list(dict.fromkeys([flag, key, key.replace("-", "_")]))


def flag_names(f: "Flag") -> list:
    return flag_forms(f.long)


def first_error(text: str) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if "error" in l.lower() or l.startswith("--") or ": " in l and l.split(": ")[0].startswith("-"):
            return l[:300]
    return (lines[-1] if lines else "(no output)")[:300]


# ---- fixtures ----------------------------------------------------------------------------
# Made once per campaign in <work>/fixtures, with the real binaries; cases copy what they change.

TINY_GPT = ["--n-layer", "1", "--n-head", "1", "--n-embd", "8", "--block-size", "8", "--batch-size", "2",
            "--max-iters", "2", "--eval-interval", "1", "--eval-iters", "1", "--sample-tokens", "0",
            "--warmup-iters", "1"]


class Fixtures:
    def __init__(self, root: Path, bindir: Path, env: dict):
        self.root, self.bindir, self.env = root, bindir, env
        root.mkdir(parents=True, exist_ok=True)
        rng = random.Random(17)
        words = "the quick brown fox jumps over a lazy dog and then some more words follow here".split()
        lines = ["ROMEO:"] + [" ".join(rng.choice(words) for _ in range(8)) for _ in range(200)]
        self.corpus = root / "corpus.txt"
        self.corpus.write_text("\n".join(lines) + "\n")
        (root / "empty-data").mkdir(exist_ok=True)
        # A Fashion-MNIST-shaped dataset: 64 training and 32 test images, 28 x 28, ten classes.
        self.ds = root / "ds"
        self.ds_files = self.dataset_files(rng)
        self.write_dataset(self.ds, self.ds_files)
        self.gptrun = root / "gptrun"
        self.program("nnlab", "gpt", "train", *TINY_GPT, "--data", str(self.corpus), "--out-dir", str(self.gptrun))
        self.ck = self.gptrun / "last.safetensors"
        self.ck_raw = self.ck.read_bytes()
        self.ck_meta = st_split(self.ck_raw)[0]["__metadata__"]
        self.ck_tensors = st_tensors(self.ck_raw)
        self.scheme = checksum_scheme(self.ck_raw)
        self.l04 = root / "l04"
        self.program("nnlab", "lesson04", "--part", "train", "--data-dir", str(self.ds), "--epochs", "1",
                     "--channels", "2", "--hidden", "8", "--batch-size", "16", "--out-dir", str(self.l04))
        self.l04_ck = self.l04 / "cnn.safetensors"
        self.l02 = root / "l02"
        self.program("nnlab", "lesson02", "--part", "train", "--data-dir", str(self.ds), "--epochs", "1",
                     "--hidden", "8", "--batch-size", "16", "--out-dir", str(self.l02))
        self.l02_ck = self.l02 / "mlp.safetensors"
        self.l05 = root / "l05"
        self.program("nnlab", "lesson05", "--part", "chars", "--quick", "--corpus", str(self.corpus),
                     "--out-dir", str(self.l05))
        self.l05_ck = self.l05 / "char_rnn.safetensors"
        self.dumps = root / "dumps"
        for name in ("a", "b"):
            self.program("nnlab", "gpt", "dump", "--checkpoint", str(self.ck), "--text", "ROMEO: the",
                         "--out", str(self.dumps / f"{name}.safetensors"))

    def program(self, *argv):
        import subprocess
        cmd = [str(self.bindir / argv[0])] + list(argv[1:])
        p = subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise RuntimeError("making a fixture failed: %s\n%s%s" % (" ".join(cmd), p.stdout[-2000:], p.stderr[-2000:]))

    @staticmethod
    def dataset_files(rng, n_train=64, n_test=32, rows=28, cols=28):
        def images(n):
            return idx_bytes([n, rows, cols], bytes(rng.randrange(256) for _ in range(n * rows * cols)))

        def labels(n):
            return idx_bytes([n], bytes(rng.randrange(10) for _ in range(n)))
        return {"train-images-idx3-ubyte": images(n_train), "train-labels-idx1-ubyte": labels(n_train),
                "t10k-images-idx3-ubyte": images(n_test), "t10k-labels-idx1-ubyte": labels(n_test)}

    @staticmethod
    def write_dataset(d: Path, files: dict):
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            if data is None:
                continue
            if isinstance(data, str):  # "dir": a directory in the file's place
                (d / name).mkdir()
            else:
                (d / name).write_bytes(data)


# ---- the cases, class by class ------------------------------------------------------------


class Builder:
    def __init__(self, fx: Fixtures, commands: dict, full: bool):
        self.fx, self.commands, self.full = fx, commands, full
        self.cases: list = []
        self.contexts = self.make_contexts()

    def add(self, case: Case):
        if self.full or case.quick:
            self.cases.append(case)

    # The run each command's flag cases build on: quick, valid, with the fixtures.
    def make_contexts(self) -> dict:
        fx = self.fx
        ds, corpus, ck = str(fx.ds), str(fx.corpus), str(fx.ck)
        tiny_train = TINY_GPT + ["--data", corpus, "--out-dir", "out"]
        return {
            ("lesson01",): ["--part", "inference"],
            ("lesson02",): ["--part", "train", "--data-dir", ds, "--epochs", "1", "--hidden", "8",
                            "--batch-size", "16", "--out-dir", "out"],
            ("lesson03",): ["--part", "ceilings", "--quick", "--out-dir", "out"],
            ("lesson04",): ["--part", "train", "--data-dir", ds, "--epochs", "1", "--channels", "2", "--hidden", "8",
                            "--batch-size", "16", "--out-dir", "out"],
            ("lesson05",): ["--part", "chars", "--quick", "--corpus", corpus, "--out-dir", "out"],
            ("lesson06",): ["--part", "chars", "--quick", "--corpus", corpus, "--out-dir", "out"],
            ("lesson07",): ["--part", "loops", "--out-dir", "out"],
            ("lesson08",): ["--part", "train"] + tiny_train,
            ("lesson09",): ["--part", "info"],
            ("lesson10",): ["--part", "kv", "--quick", "--data", corpus, "--out-dir", "out"],
            ("gpt", "train"): tiny_train,
            ("gpt", "sample"): ["--checkpoint", ck, "--prompt", "ROMEO:", "--tokens", "5"],
            ("gpt", "eval"): ["--checkpoint", ck, "--data", corpus, "--eval-iters", "1", "--batch-size", "2"],
            ("gpt", "bench"): TINY_GPT + ["--iters", "1", "--warmup", "0", "--no-torch", "--backends", "cpu"],
            ("gpt", "dump"): ["--checkpoint", ck, "--text", "ROMEO:", "--out", "out/dump.safetensors"],
            ("gpt", "diff"): [str(fx.dumps / "a.safetensors"), str(fx.dumps / "b.safetensors")],
            ("bench",): ["matmul", "--quick", "-v", "v1", "-s", "32", "--repeats", "1", "--out", "out"],
            ("cuda", "info"): [],
            ("cuda", "bench"): ["matmul", "--device", "emu", "--quick", "-v", "v1", "--json", "out/cuda.json"],
            ("check",): ["--list"],
            ("info",): [],
        }

    def context_argv(self, path: tuple, drop: list = ()) -> list:
        """nnlab <path> <context> without the flags named in drop (and their values)."""
        ctx = list(self.contexts.get(path, []))
        out, i = [], 0
        while i < len(ctx):
            a = ctx[i]
            name = a.split("=")[0]
            if name in drop:
                takes_value = "=" not in a and i + 1 < len(ctx) and not ctx[i + 1].startswith("-")
                i += 2 if takes_value else 1
                continue
            out.append(a)
            i += 1
        return ["nnlab", *path, *out]

    # -- float flags, int flags, thread counts ----------------------------------------------

    def flag_cases(self):
        quick_values = ["nan", "inf", "abc"]
        values = ["nan", "inf", "-inf", "1e999", "abc", "1.5x", ""]
        for path, flags in sorted(self.commands.items()):
            cmd = " ".join(path)
            for f in flags:
                if f.kind == "FLOAT":
                    vals = list(values)
                    if f.hi is not None and math.isfinite(f.hi):
                        vals.append(repr(f.hi * 1.5 + 1))
                    if f.lo is not None and math.isfinite(f.lo):
                        vals.append(repr(f.lo - abs(f.lo) * 0.5 - 1))
                    for v in vals:
                        self.add(Case(
                            id=f"float-flags/{cmd.replace(' ', '-')}/{f.long}={v}", cls="float-flags",
                            desc=f"nnlab {cmd} {f.long}={v!r}: a float flag given something that is not a finite "
                                 f"number in its range", argv=self.context_argv(path, f.names) + [f"{f.long}={v}"],
                            expect="error", names=flag_names(f), timeout=15, timeout_means="accepted",
                            out_dir="out", quick=v in quick_values, context=cmd))
                elif f.kind in ("INT", "UINT"):
                    vals = ["abc", "99999999999999999999"]
                    if f.hi is not None:
                        vals.append(str(int(f.hi) + 1))
                    elif f.lo is not None:
                        vals.append(str(int(f.lo) - 1))
                    for v in vals:
                        if "threads" in f.long and v == str(int(f.hi or 0) + 1):
                            continue  # thread counts: their own class
                        self.add(Case(
                            id=f"int-flags/{cmd.replace(' ', '-')}/{f.long}={v}", cls="int-flags",
                            desc=f"nnlab {cmd} {f.long}={v}: an integer flag given a non-integer, an overflow or "
                                 f"a value outside its range", argv=self.context_argv(path, f.names) + [f"{f.long}={v}"],
                            expect="error", names=flag_names(f), timeout=15, timeout_means="accepted", out_dir="out",
                            context=cmd))
                elif f.kind == "BOOLEAN":
                    for v in ("maybe", "ture"):
                        self.add(Case(
                            id=f"int-flags/{cmd.replace(' ', '-')}/{f.long}={v}", cls="int-flags",
                            desc=f"nnlab {cmd} {f.long}={v}: a boolean flag given something else",
                            argv=self.context_argv(path, f.names) + [f"{f.long}={v}"], expect="error",
                            names=flag_names(f), timeout=15, timeout_means="accepted", out_dir="out", context=cmd))
        # The stand-alone lesson programs (lessons/NN-*/main.cpp): the same flags, their own main().
        for prog in sorted(p.name for p in self.fx.bindir.glob("lesson[0-9][0-9]")):
            for f in self.commands.get((prog,), []):
                if f.kind != "FLOAT":
                    continue
                argv = self.context_argv((prog,), f.names)[1:]
                argv[0] = prog
                self.add(Case(
                    id=f"float-flags/{prog}(program)/{f.long}=nan", cls="float-flags",
                    desc=f"the stand-alone program {prog} {f.long}=nan", argv=argv + [f"{f.long}=nan"],
                    expect="error", names=flag_names(f), timeout=15, timeout_means="accepted", out_dir="out",
                    context=prog))

    def thread_cases(self):
        for path, flags in sorted(self.commands.items()):
            cmd = " ".join(path)
            for f in flags:
                if "--threads" not in f.names:
                    continue
                value = "4096"

                def says_threads(r, d):
                    if not re.search(r"thread", r.stdout + r.stderr, re.I):
                        return "ran with --threads 4096 on a small machine and said nothing about the thread count"
                    return None
                self.add(Case(
                    id=f"thread-counts/{cmd.replace(' ', '-')}/--threads={value}", cls="thread-counts",
                    desc=f"nnlab {cmd} --threads 4096 on a {os.cpu_count()}-core machine: refuse, or clamp and say so",
                    argv=self.context_argv(path, f.names) + [f"--threads={value}"], expect="either",
                    # (4096 threads' stacks take ~900 MB before anything runs: the question here is time)
                    names=["--threads", "threads", "thread"], check=says_threads, timeout=30, as_limit=False,
                    mem_mb=2048, exclusive=True,
                    out_dir="out", quick=path == ("gpt", "train"), context=cmd))

    # -- config files ------------------------------------------------------------------------

    def config_cases(self):
        fx = self.fx
        flags = self.commands.get(("gpt", "train"), [])

        def cfg_case(name, text, expect, names, quick=False, check=None, binary=None, desc=None, keys=None,
                     extra_files=None):
            raw = binary if binary is not None else text.encode("utf-8", "surrogateescape")
            keys = keys if keys is not None else re.findall(r"^\s*\[?([A-Za-z][\w-]*)\s*=", text, re.M)
            drop = set()
            for k in keys:
                drop.add("--" + k.replace("_", "-"))

            def setup(d, raw=raw, extra=extra_files):
                (d / "run.toml").write_bytes(raw)
                for rel, data in (extra or {}).items():
                    (d / rel).write_bytes(data)
            self.add(Case(
                id=f"config-files/{name}", cls="config-files",
                desc=desc or f"nnlab gpt train --config run.toml holding {text.strip()[:60]!r}",
                argv=self.context_argv(("gpt", "train"), sorted(drop)) + ["--config", "run.toml"],
                expect=expect, names=names, setup=setup, check=check, out_dir="out", quick=quick,
                context="gpt train"))

        for f in flags:
            key = f.long.lstrip("-")
            ukey = key.replace("-", "_")
            if f.kind == "FLOAT":
                for v in ("nan", "inf", "-inf", "abc", "1e999", "1.5x"):
                    cfg_case(f"{ukey}={v}", f"{ukey} = {v}\n", "error", [key, ukey, "run.toml"],
                             quick=v in ("nan", "abc"))
            elif f.kind in ("INT", "UINT"):
                for v in ("abc", "1.5", "99999999999999999999"):
                    cfg_case(f"{ukey}={v}", f"{ukey} = {v}\n", "error", [key, ukey, "run.toml"])
            elif f.kind == "BOOLEAN":
                for v in ("maybe", "ture"):
                    cfg_case(f"{ukey}={v}", f"{ukey} = {v}\n", "error", [key, ukey, "run.toml"], quick=v == "maybe")

        def max_step(d):
            steps = []
            try:
                for line in (d / "out" / "log.jsonl").read_text().splitlines():
                    steps.append(json.loads(line).get("step", 0))
            except (OSError, ValueError):
                return None
            return max(steps) if steps else None

        def ran_steps(n):
            def check(r, d):
                got = max_step(d)
                return None if got == n else f"the log's last step is {got}, the options said {n}"
            return check

        corpus = fx.corpus.read_bytes()
        hash_name = "cor#pus.txt"
        uses_hash_file = lambda r, d: None if hash_name in r.stdout + r.stderr else \
            f"the run did not use {hash_name} (a '#' inside quotes was taken as a comment?)"
        cfg_case("duplicate-key", "lr = 0.001\nlr = 0.002\n", "error", ["lr", "run.toml"], quick=True,
                 desc="a key given twice with different values: which one wins is ambiguous")
        cfg_case("duplicate-key-spellings", "max_iters = 2\nmax-iters = 3\n", "error",
                 ["max_iters", "max-iters", "run.toml"], quick=True,
                 desc="the same key twice, once with '_' and once with '-'")
        cfg_case("duplicate-key-same-value", "lr = 0.001\nlr = 0.001\n", "either", ["lr", "run.toml"],
                 desc="a key given twice with the same value")
        cfg_case("hash-in-double-quotes", f'data = "{hash_name}"\n', "ok", [], quick=True, check=uses_hash_file,
                 extra_files={hash_name: corpus}, desc="a '#' inside a double-quoted value is part of the value")
        cfg_case("hash-in-single-quotes", f"data = '{hash_name}'\n", "ok", [], check=uses_hash_file,
                 extra_files={hash_name: corpus}, desc="a '#' inside a single-quoted value is part of the value")
        cfg_case("hash-in-quotes-then-comment", f'data = "{hash_name}"  # the corpus\n', "ok", [],
                 check=uses_hash_file, extra_files={hash_name: corpus},
                 desc="a quoted value with a '#', then a real comment")
        cfg_case("unknown-key", "learning_rate = 0.001\n", "error", ["learning_rate", "learning-rate"], quick=True)
        cfg_case("key-config", "config = other.toml\n", "error", ["config", "run.toml"], keys=[])
        cfg_case("key-help", "help = true\n", "error", ["help", "run.toml"], keys=[])
        cfg_case("no-equals", "max_iters 2\n", "error", ["run.toml"], keys=[])
        cfg_case("empty-key", "= 5\n", "error", ["run.toml"], keys=[])
        cfg_case("empty-value", "lr =\n", "error", ["lr", "run.toml"], quick=True)
        # ("data" is too common a word to count as naming the key: these must name the file)
        cfg_case("unterminated-quote", f'data = "{fx.corpus}\n', "error", ["run.toml"])
        cfg_case("mismatched-quotes", f"data = \"{fx.corpus}'\n", "error", ["run.toml"])
        cfg_case("crlf", "max_iters = 2\r\nlr = 0.001\r\n", "ok", [], check=ran_steps(2),
                 desc="a valid file with Windows line endings")
        cfg_case("utf8-bom", "\ufeffmax_iters = 2\n", "either", ["run.toml", "max_iters"], keys=["max_iters"])
        cfg_case("sections-and-comments", "# a run\n[train]\nmax_iters = 2   # two steps\n\nlr = 0.001\n", "ok", [],
                 check=ran_steps(2), quick=True, desc="sections, comments and blank lines around valid keys")
        cfg_case("tabs", "max_iters\t=\t2\n", "ok", [], check=ran_steps(2))
        cfg_case("nul-byte", "", "either", ["run.toml"], binary=b"max_iters = 2\x00\nlr = 0.001\n", keys=["max_iters", "lr"],
                 desc="a NUL byte inside a line")
        rng = random.Random(5)
        cfg_case("binary-garbage", "", "error", ["run.toml"], binary=bytes(rng.randrange(256) for _ in range(300)),
                 keys=[], desc="300 random bytes", quick=True)
        cfg_case("file-wins-over-nothing", "max_iters = 3\n", "ok", [], check=ran_steps(3), quick=True,
                 desc="a value from the file is used when the command line does not give it")

        # the command line wins: the file says 50000 steps, the flag 2
        def setup_cli_wins(d):
            (d / "run.toml").write_text("max_iters = 50000\n")
        self.add(Case(id="config-files/command-line-wins", cls="config-files",
                      desc="max_iters = 50000 in the file, --max-iters 2 on the command line: the command line wins",
                      argv=self.context_argv(("gpt", "train")) + ["--config", "run.toml"], expect="ok",
                      setup=setup_cli_wins, check=ran_steps(2), out_dir="out", quick=True, context="gpt train"))
        for name, argv_cfg in (("directory", "cfgdir"), ("missing", "no-such.toml")):
            self.add(Case(id=f"config-files/config-is-{name}", cls="config-files",
                          desc=f"--config {argv_cfg}: a {name}", setup=lambda d: (d / "cfgdir").mkdir(),
                          argv=self.context_argv(("gpt", "train")) + ["--config", argv_cfg], expect="error",
                          names=[argv_cfg, "--config"], out_dir="out", context="gpt train"))

    # -- IDX datasets -----------------------------------------------------------------------

    def dataset_case(self, cls, name, desc, files: dict, expect, names, quick=False, programs=("lesson02", "lesson04"),
                     mem_mb=256.0, timeout=20.0, exclusive=False, extra_argv=(), check=None):
        for prog in programs:
            path = (prog,)

            def setup(d, files=files):
                Fixtures.write_dataset(d / "idxset", files() if callable(files) else files)
            argv = self.context_argv(path, ["--data-dir"]) + ["--data-dir", "idxset", *extra_argv]
            self.add(Case(id=f"{cls}/{prog}/{name}", cls=cls, desc=f"nnlab {prog} --part train: {desc}", argv=argv,
                          expect=expect, names=names, setup=setup, out_dir="out", quick=quick and prog == "lesson02",
                          mem_mb=mem_mb, timeout=timeout, exclusive=exclusive, check=check or no_nan_loss,
                          context=prog))

    def idx_cases(self):
        fx = self.fx
        base = fx.ds_files
        TI, TL, EI, EL = "train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
        rng = random.Random(3)

        def imgs(n, rows, cols):
            return idx_bytes([n, rows, cols], bytes(rng.randrange(256) for _ in range(n * rows * cols)))

        def labs(n, top=10):
            return idx_bytes([n], bytes(rng.randrange(top) for _ in range(n)))

        def with_(**over):
            f = dict(base)
            for k, v in over.items():
                f[{"TI": TI, "TL": TL, "EI": EI, "EL": EL}[k]] = v
            return f

        pairs = [
            ("test-1x1", "test images 1x1, training images 28x28", with_(EI=imgs(32, 1, 1)), [EI, TI], True),
            ("train-256x256-test-1x1", "training images 256x256, test images 1x1",
             with_(TI=imgs(64, 256, 256), EI=imgs(32, 1, 1)), [EI, TI], True),
            ("test-27x28", "test images 27x28", with_(EI=imgs(32, 27, 28)), [EI, TI], False),
            ("test-28x27", "test images 28x27", with_(EI=imgs(32, 28, 27)), [EI, TI], False),
            ("test-29x28", "test images larger (29x28) than the training images", with_(EI=imgs(32, 29, 28)),
             [EI, TI], True),
            ("test-56x14", "test images 56x14: as many pixels as 28x28, another shape", with_(EI=imgs(32, 56, 14)),
             [EI, TI], True),
            ("train-labels-63", "64 training images, 63 labels", with_(TL=labs(63)), [TL, TI], True),
            ("test-labels-33", "32 test images, 33 labels", with_(EL=labs(33)), [EL, EI], False),
            ("test-images-31", "31 test images, 32 labels", with_(EI=imgs(31, 28, 28)), [EL, EI], False),
            ("train-label-10", "a training label of 10 (classes are 0-9)",
             with_(TL=idx_bytes([64], bytes([10] + [1] * 63))), [TL], True),
            ("test-label-255", "a test label of 255", with_(EL=idx_bytes([32], bytes([255] + [1] * 31))), [EL], False),
            ("train-labels-2d", "training labels as a (64, 1) array", with_(TL=idx_bytes([64, 1], bytes(64))), [TL], False),
            ("train-images-2d", "training images as a (64, 784) array", with_(TI=idx_bytes([64, 784], bytes(64 * 784))),
             [TI], False),
            ("train-images-4d", "training images as (64, 1, 28, 28)",
             with_(TI=idx_bytes([64, 1, 28, 28], bytes(64 * 784))), [TI], False),
            ("images-labels-swapped", "the training image and label files swapped", with_(TI=base[TL], TL=base[TI]),
             [TI, TL], False),
        ]
        for name, desc, files, names, quick in pairs:
            self.dataset_case("dataset-pairs", name, desc, files, "error", names, quick=quick)
        self.dataset_case("dataset-pairs", "ok-one-test-image", "a valid dataset with a single test image",
                          with_(EI=imgs(1, 28, 28), EL=labs(1)), "ok", [], quick=True)
        self.dataset_case("dataset-pairs", "constant-images", "every pixel 0 (a standard deviation of 0)",
                          with_(TI=idx_bytes([64, 28, 28], bytes(64 * 784))), "either", [TI, "pixel"], quick=True)

        ti = base[TI]
        cuts = [0, 1, 3, 4, 8, 15, 16, 17, len(ti) // 2, len(ti) - 1]
        for n in cuts:
            self.dataset_case("idx-files", f"train-images-cut-{n}", f"training images cut to {n} bytes",
                              with_(TI=ti[:n]), "error", [TI], quick=n in (0, 15, len(ti) - 1))
        self.dataset_case("idx-files", "train-images-plus-1", "one byte appended to the training images",
                          with_(TI=ti + b"\0"), "error", [TI], quick=True)
        self.dataset_case("idx-files", "train-images-plus-1000", "1000 bytes appended", with_(TI=ti + bytes(1000)),
                          "error", [TI])
        headers = [("magic-byte0", idx_bytes([64, 28, 28], ti[16:], zero=(1, 0))),
                   ("magic-byte1", idx_bytes([64, 28, 28], ti[16:], zero=(0, 8))),
                   ("type-int8", idx_bytes([64, 28, 28], ti[16:], type_byte=0x09)),
                   ("type-float32", idx_bytes([64, 28, 28], ti[16:], type_byte=0x0D)),
                   ("type-0", idx_bytes([64, 28, 28], ti[16:], type_byte=0x00)),
                   ("ndims-0", idx_bytes([], ti[4:], ndims=0)),
                   ("ndims-1", idx_bytes([64, 28, 28], ti[16:], ndims=1)),
                   ("ndims-5", idx_bytes([64, 28, 28], ti[16:], ndims=5)),
                   ("ndims-255", idx_bytes([64, 28, 28], ti[16:], ndims=255)),
                   ("dim-4G", idx_bytes([0xFFFFFFFF, 28, 28], ti[16:])),
                   ("dims-over-1GiB", idx_bytes([65536, 65536, 1], ti[16:])),
                   ("dims-overflow-64bit", idx_bytes([0xFFFFFFFF] * 4, ti[16:])),
                   ("dim-zero", idx_bytes([0, 28, 28], b"")),
                   ("plain-but-gzip-magic", b"\x1f\x8b" + ti[2:])]
        for name, data in headers:
            self.dataset_case("idx-files", f"train-images-{name}", f"training images with header problem {name}",
                              with_(TI=data), "error", [TI],
                              quick=name in ("magic-byte0", "type-float32", "ndims-255", "dims-overflow-64bit", "dim-zero"))
        tl = base[TL]
        self.dataset_case("idx-files", "train-labels-cut-6", "training labels cut inside the header", with_(TL=tl[:6]),
                          "error", [TL])
        self.dataset_case("idx-files", "train-labels-cut-end", "training labels one byte short", with_(TL=tl[:-1]),
                          "error", [TL], quick=True)
        self.dataset_case("idx-files", "train-labels-type-int32", "training labels of element type int32",
                          with_(TL=idx_bytes([64], tl[8:], type_byte=0x0C)), "error", [TL])
        self.dataset_case("idx-files", "test-images-missing", "no test image file",
                          with_(EI=None), "error", [EI, "t10k"], quick=True)
        self.dataset_case("idx-files", "train-labels-missing", "no training label file", with_(TL=None), "error",
                          [TL, "train-labels"])
        self.dataset_case("idx-files", "train-images-is-a-directory", "a directory where the training images should be",
                          with_(TI="dir"), "error", [TI], quick=True)
        self.dataset_case("idx-files", "empty-directory", "an empty data directory",
                          {}, "error", ["idxset"])

        # gzip: every file compressed, then one file broken
        gzf = {k + ".gz": gz(v) for k, v in base.items()}
        tig = gzf[TI + ".gz"]

        def with_gz(**over):
            f = dict(gzf)
            for k, v in over.items():
                f[{"TI": TI, "TL": TL, "EI": EI, "EL": EL}[k] + ".gz"] = v
            return f
        G = TI + ".gz"
        self.dataset_case("gzip-files", "ok-all-gz", "a valid dataset, every file gzip-compressed", gzf, "ok", [],
                          quick=True)
        half = len(ti) // 2
        self.dataset_case("gzip-files", "ok-two-members", "training images as two concatenated gzip members "
                          "(cat a.gz b.gz): valid gzip", with_gz(TI=gz(ti[:half]) + gz(ti[half:])), "ok", [])
        for n in (0, 1, 10, len(tig) // 2, len(tig) - 8, len(tig) - 4, len(tig) - 1):
            self.dataset_case("gzip-files", f"train-images-gz-cut-{n}", f"training images .gz cut to {n} bytes",
                              with_gz(TI=tig[:n]), "error", [G], quick=n in (10, len(tig) - 8))

        def flip(b: bytes, i: int, x: int = 0x55) -> bytes:
            return b[:i] + bytes([b[i] ^ x]) + b[i + 1:]
        self.dataset_case("gzip-files", "train-images-gz-flip-deflate", "a flipped byte inside the deflate stream",
                          with_gz(TI=flip(tig, len(tig) // 2)), "error", [G], quick=True)
        self.dataset_case("gzip-files", "train-images-gz-flip-crc", "a flipped byte in the CRC-32 trailer",
                          with_gz(TI=flip(tig, len(tig) - 6)), "error", [G])
        self.dataset_case("gzip-files", "train-images-gz-flip-isize", "a flipped byte in the size trailer",
                          with_gz(TI=flip(tig, len(tig) - 2)), "error", [G])
        self.dataset_case("gzip-files", "train-images-gz-not-gzip", "a plain IDX file named .gz", with_gz(TI=ti),
                          "error", [G], quick=True)
        self.dataset_case("gzip-files", "train-images-gz-trailing-garbage", "garbage after the gzip stream",
                          with_gz(TI=tig + b"garbage!"), "error", [G])
        self.dataset_case("gzip-files", "train-images-gz-of-gz", "compressed twice", with_gz(TI=gz(tig)), "error", [G])
        self.dataset_case("gzip-files", "train-images-gz-truncated-idx", "a valid gzip of a truncated IDX file",
                          with_gz(TI=gz(ti[:-100])), "error", [G])
        self.dataset_case("gzip-files", "train-images-gz-empty", "an empty .gz file", with_gz(TI=b""), "error", [G])

        # A 1 MB .gz of 1.3 million 28x28 images (1.02 GB of pixels, under the 1 GiB IDX cap):
        # loading may take what the pixels take, not several times that.
        n_big = 1_300_000

        def bomb():
            f = dict(gzf)
            f[G] = gz_zeros(idx_bytes([n_big, 28, 28], b"")[:16], n_big * 784)
            f[TL + ".gz"] = gz_zeros(idx_bytes([n_big], b"")[:8], n_big)
            return f
        pixels_mb = n_big * 784 / 2**20
        self.dataset_case("gzip-files", "gzip-bomb-1GB-pixels", "a 1 MB .gz holding 1.02 GB of pixels "
                          "(1.3M images), with --limit-train 64: memory may grow by the pixels, not by 4x them",
                          bomb, "either", [G], programs=("lesson02",), mem_mb=pixels_mb + 256, timeout=120,
                          exclusive=True, extra_argv=("--limit-train", "64", "--limit-test", "32"))

    # -- text corpora -------------------------------------------------------------------------

    def corpus_cases(self):
        fx = self.fx
        corpus = fx.corpus.read_bytes()
        rng = random.Random(9)
        variants = [
            ("missing", None, "error", True),
            ("directory", "dir", "error", True),
            ("empty", b"", "error", True),
            ("one-byte", b"a", "error", True),
            ("shorter-than-context", b"abcdefg\n", "error", False),
            ("random-bytes", bytes(rng.randrange(256) for _ in range(4096)), "either", True),
            ("all-nul", bytes(4096), "either", False),
            ("one-character", b"a" * 4096, "either", False),
            ("utf8", ("Grüße, Zoë! Ça va? " * 200 + "\n").encode(), "either", False),
            ("crlf", corpus.replace(b"\n", b"\r\n"), "ok", False),
        ]
        # A text too short for a batch: naming the flags that set the batch is as clear as the file.
        short, short_names = ("one-byte", "shorter-than-context"), ["--block-size", "--seq-len", "--batch-size"]
        consumers = {
            "gpt-train": lambda p: self.context_argv(("gpt", "train"), ["--data"]) + ["--data", p],
            "lesson05": lambda p: self.context_argv(("lesson05",), ["--corpus"]) + ["--corpus", p],
            "gpt-eval": lambda p: self.context_argv(("gpt", "eval"), ["--data"]) + ["--data", p],
        }
        for cname, argv_of in consumers.items():
            for name, data, expect, quick in variants:
                if cname == "gpt-eval" and name not in ("missing", "empty", "random-bytes", "one-byte"):
                    continue

                def setup(d, data=data):
                    if data == "dir":
                        (d / "text.txt").mkdir()
                    elif data is not None:
                        (d / "text.txt").write_bytes(data)
                self.add(Case(id=f"text-corpora/{cname}/{name}", cls="text-corpora",
                              desc=f"{cname} on a corpus that is {name.replace('-', ' ')}", argv=argv_of("text.txt"),
                              expect=expect, names=["text.txt"] + (short_names if name in short else ["--prompt"]),
                              setup=setup, out_dir="out",
                              quick=quick and cname == "gpt-train", check=no_nan_loss, late=no_late_failure,
                              context=cname.replace("-", " ")))
        for dev in ("/dev/null", "/dev/zero"):
            self.add(Case(id=f"text-corpora/gpt-train/{dev.strip('/').replace('/', '-')}", cls="text-corpora",
                          desc=f"gpt train --data {dev}", argv=self.context_argv(("gpt", "train"), ["--data"]) +
                          ["--data", dev], expect="error", names=[dev], out_dir="out", quick=dev == "/dev/zero",
                          timeout=20, context="gpt train"))

        no_newline = corpus.replace(b"\n", b" ")
        argv = [a for a in self.context_argv(("gpt", "train"), ["--data", "--sample-tokens"])]
        self.add(Case(id="text-corpora/gpt-train/no-newline-default-prompt", cls="text-corpora",
                      desc="a corpus without a newline, sampling with the default prompt ('\\n'): refuse before "
                           "training, or train and sample", argv=argv + ["--data", "text.txt", "--sample-tokens", "5"],
                      expect="either", names=["text.txt", "prompt", "'\\n'"], late=no_late_failure,
                      setup=lambda d: (d / "text.txt").write_bytes(no_newline), out_dir="out", quick=True,
                      context="gpt train"))
        self.add(Case(id="text-corpora/gpt-train/prompt-not-in-vocabulary", cls="text-corpora",
                      desc="--prompt 'ZQ' whose letters the corpus lacks: refuse before training, or train and sample",
                      argv=argv + ["--data", str(fx.corpus), "--sample-tokens", "5", "--prompt", "ZQ"],
                      expect="either", names=["prompt", "'Z'", "ZQ"], late=no_late_failure, out_dir="out",
                      context="gpt train"))
        self.add(Case(id="text-corpora/gpt-sample/prompt-not-in-vocabulary", cls="text-corpora",
                      desc="gpt sample --prompt 'ZQ' (not in the checkpoint's vocabulary)",
                      argv=self.context_argv(("gpt", "sample"), ["--prompt"]) + ["--prompt", "ZQ"], expect="error",
                      names=["'Z'", "ZQ", "prompt"], quick=True, context="gpt sample"))
        # Sizes: 1 GiB + 1 byte (over the reader's cap), and exactly 1 GiB of NUL bytes.
        for name, size, quick in (("over-1GiB", 2**30 + 1, True), ("1GiB", 2**30, False)):
            def setup(d, size=size):
                with open(d / "text.txt", "wb") as f:
                    f.truncate(size)
            self.add(Case(id=f"text-corpora/gpt-train/{name}", cls="text-corpora",
                          desc=f"a {size}-byte text: refuse, or use at most about twice its size in memory",
                          argv=self.context_argv(("gpt", "train"), ["--data"]) + ["--data", "text.txt"], expect="either",
                          names=["text.txt"], setup=setup, out_dir="out", mem_mb=2 * size / 2**20 + 256, timeout=120,
                          exclusive=True, quick=quick, context="gpt train"))

    # -- checkpoints ---------------------------------------------------------------------------

    def ck_consumers(self, which=("sample", "resume", "eval")):
        """name -> (argv builder for a checkpoint path, context)."""
        out = {}
        if "sample" in which:
            out["gpt-sample"] = (lambda p: self.context_argv(("gpt", "sample"), ["--checkpoint"]) + ["--checkpoint", p],
                                 "gpt sample")
        if "resume" in which:
            out["gpt-train-resume"] = (lambda p: self.context_argv(("gpt", "train"), ["--max-iters"]) +
                                       ["--max-iters", "4", "--resume", p], "gpt train")
        if "eval" in which:
            out["gpt-eval"] = (lambda p: self.context_argv(("gpt", "eval"), ["--checkpoint"]) + ["--checkpoint", p],
                               "gpt eval")
        if "dump" in which:
            out["gpt-dump"] = (lambda p: self.context_argv(("gpt", "dump"), ["--checkpoint"]) + ["--checkpoint", p],
                               "gpt dump")
        return out

    def ck_case(self, cls, name, desc, data: Callable, consumers: dict, expect="error", quick_consumers=(),
                names_extra=(), mem_mb=256.0, quick=True):
        for cname, (argv_of, ctx) in consumers.items():
            def setup(d, data=data):
                (d / "in").mkdir()
                (d / "in" / "ck.safetensors").write_bytes(data())
            self.add(Case(id=f"{cls}/{cname}/{name}", cls=cls, desc=f"{cname}: {desc}",
                          argv=argv_of("in/ck.safetensors"), expect=expect,
                          names=["ck.safetensors", *names_extra], setup=setup, out_dir="out", mem_mb=mem_mb,
                          quick=quick and cname in quick_consumers, context=ctx))

    def edit_metadata(self, raw: bytes, key: str, value: Optional[str], unsigned: bool = False) -> bytes:
        """The file with one metadata value replaced in the header text (None: the entry removed);
        nothing else changes: the data section and the checksums stay as they were (unsigned:
        the checksums are removed, as in a file another writer made)."""
        head, hb, data = st_split(raw)
        meta = dict(head["__metadata__"])
        if value is None:
            meta.pop(key)
        else:
            meta[key] = value
        if unsigned:
            for k in CHECKSUM_KEYS:
                meta.pop(k, None)
        head["__metadata__"] = meta
        text = json.dumps(head, separators=(",", ":"))
        hb2 = text.encode()
        hb2 += b" " * ((8 - len(hb2) % 8) % 8)
        return struct.pack("<Q", len(hb2)) + hb2 + data

    def checkpoint_metadata_cases(self):
        fx = self.fx
        keys = sorted(k for k in fx.ck_meta if k != "nnlab.checksum")  # (a header checksum is edited too)
        values = ["abc", "-5", "nan", "inf", "", "1.5", "99999999999999999999", "<digit>", "<removed>"]
        for key in keys:
            orig = fx.ck_meta[key]
            for v in values:
                if v == "<digit>":
                    m = re.search(r"\d", orig)
                    if not m:
                        continue
                    new = orig[:m.start()] + str((int(m.group(0)) + 1) % 10) + orig[m.end():]
                elif v == "<removed>":
                    new = None
                else:
                    new = v
                label = {"<digit>": "one-digit-changed", "<removed>": "removed"}.get(v, v or "empty")
                which = ["sample"] + (["resume"] if v in ("abc", "-5", "nan", "<digit>", "<removed>") else []) + \
                    (["eval"] if v in ("abc", "nan") else [])
                # Without its header checksum a file reads as the format before it (the data
                # checksum only), which loads: either outcome is right.
                old_format = key == "nnlab.header_checksum" and new is None
                self.ck_case("checkpoint-metadata", f"{key}={label}",
                             f"metadata '{key}' = {new!r} (was {orig!r}), the data untouched",
                             lambda key=key, new=new: self.edit_metadata(fx.ck_raw, key, new), self.ck_consumers(which),
                             expect="either" if old_format else "error",
                             names_extra=[key], quick_consumers=("gpt-sample",) if v in ("abc", "-5", "nan", "<digit>")
                             else (), quick=True)
        # The same edits in a file without checksums (as PyTorch or numpy would write it, which
        # loads): past no integrity check, each value must be refused on its own, naming its key.
        # Only values that are wrong for the key whatever the file held (a free-text key like
        # corpus takes any text; a plausible number cannot be told from the right one).
        unsigned_values = ["abc", "-5", "nan", "inf", "", "99999999999999999999", "<removed>"]
        for key in keys:
            if key in CHECKSUM_KEYS or key == "corpus":
                continue
            for v in unsigned_values:
                if key == "best_val_loss" and v == "99999999999999999999":
                    continue  # 1e20 is a float; a loss that large is odd, not impossible
                new = None if v == "<removed>" else v
                label = {"<removed>": "removed"}.get(v, v or "empty")
                which = ["sample"] + (["resume"] if v in ("-5", "nan", "<removed>") else [])
                self.ck_case("checkpoint-metadata", f"{key}={label},unsigned",
                             f"metadata '{key}' = {new!r} in a file without checksums (another writer's)",
                             lambda key=key, new=new: self.edit_metadata(fx.ck_raw, key, new, unsigned=True),
                             self.ck_consumers(which), names_extra=[key],
                             quick_consumers=("gpt-sample",) if v == "nan" else (), quick=True)
        # the vocabulary: one hex digit changed, at several places; odd length; upper case
        vh = fx.ck_meta["vocab_hex"]
        edits = {
            "first-digit": "1" + vh[1:] if vh[0] != "1" else "2" + vh[1:],
            "second-char-low-nibble": vh[:3] + ("1" if vh[3] != "1" else "2") + vh[4:],
            "middle": vh[:len(vh) // 2] + ("0" if vh[len(vh) // 2] != "0" else "1") + vh[len(vh) // 2 + 1:],
            "last": vh[:-1] + ("0" if vh[-1] != "0" else "1"),
            "odd-length": vh[:-1],
            "upper-case": vh.upper(),
            "swapped-pair": vh[2:4] + vh[0:2] + vh[4:],
        }
        for name, new in edits.items():
            self.ck_case("checkpoint-metadata", f"vocab_hex-{name}", f"vocab_hex with {name.replace('-', ' ')}",
                         lambda new=new: self.edit_metadata(fx.ck_raw, "vocab_hex", new),
                         self.ck_consumers(("sample", "resume")), names_extra=["vocab_hex", "vocab"],
                         quick_consumers=("gpt-sample",), quick=name in ("middle", "swapped-pair"))
        self.ck_case("checkpoint-metadata", "unknown-key", "an extra metadata entry 'surprise'",
                     lambda: self.edit_metadata(fx.ck_raw, "surprise", "1"), self.ck_consumers(("sample",)),
                     expect="error", names_extra=["surprise"])
        # lesson 04 and lesson 05 checkpoints: their own metadata
        l04 = fx.l04_ck.read_bytes()
        l04_meta = st_split(l04)[0]["__metadata__"]
        for key in sorted(k for k in l04_meta if k != "nnlab.checksum"):
            for v in ("nan", "abc", "-5", "inf", "0", "<removed>"):
                new = None if v == "<removed>" else v
                self.add_l04_case(f"checkpoint-metadata/lesson04-eval/{key}={v.strip('<>')}",
                                  f"lesson04 --part eval: metadata '{key}' = {new!r}",
                                  lambda key=key, new=new: self.edit_metadata(l04, key, new), [key],
                                  quick=(key, v) in (("pixel_mean", "nan"), ("pixel_std", "0"), ("channels", "abc")),
                                  expect="either" if (key, new) == ("nnlab.header_checksum", None) else "error")
        l05 = fx.l05_ck.read_bytes()
        l05_meta = st_split(l05)[0]["__metadata__"]
        for key in sorted(k for k in l05_meta if k != "nnlab.checksum"):
            for v in ("abc", "<digit>", "<removed>"):
                orig = l05_meta[key]
                if v == "<digit>":
                    m = re.search(r"\d", orig)
                    if not m:
                        continue
                    new = orig[:m.start()] + str((int(m.group(0)) + 1) % 10) + orig[m.end():]
                else:
                    new = None if v == "<removed>" else v

                def setup(d, key=key, new=new):
                    (d / "in").mkdir()
                    (d / "in" / "ck.safetensors").write_bytes(self.edit_metadata(l05, key, new))
                self.add(Case(id=f"checkpoint-metadata/lesson05-load/{key}={v.strip('<>')}", cls="checkpoint-metadata",
                              desc=f"lesson05 --load: metadata '{key}' = {new!r}",
                              argv=self.context_argv(("lesson05",)) + ["--load", "in/ck.safetensors"],
                              expect="either" if (key, new) == ("nnlab.header_checksum", None) else "error",
                              names=["ck.safetensors", key], setup=setup, out_dir="out",
                              quick=(key, v) == ("vocab", "<digit>"), context="lesson05"))

    def add_l04_case(self, cid, desc, data, names_extra, quick=False, expect="error"):
        def setup(d, data=data):
            (d / "in").mkdir()
            (d / "in" / "ck.safetensors").write_bytes(data())
        self.add(Case(id=cid, cls=cid.split("/")[0], desc=desc,
                      argv=self.context_argv(("lesson04",), ["--part"]) + ["--part", "eval", "--checkpoint",
                                                                           "in/ck.safetensors"],
                      expect=expect, names=["ck.safetensors", *names_extra], setup=setup, out_dir="out", quick=quick,
                      context="lesson04"))

    def checkpoint_bytes_cases(self):
        fx = self.fx
        raw = fx.ck_raw
        hlen = struct.unpack("<Q", raw[:8])[0]
        size = len(raw)

        def flip(i, x):
            return lambda: raw[:i] + bytes([raw[i] ^ x]) + raw[i + 1:]
        sample = self.ck_consumers(("sample",))
        for i in range(8):
            self.ck_case("checkpoint-bytes", f"flip-length-byte-{i}", f"byte {i} of the header length flipped",
                         flip(i, 0x40), sample, quick_consumers=("gpt-sample",), quick=i in (0, 7))
        positions = sorted(set(8 + (hlen * k) // 16 for k in range(16)))
        for p in positions:
            ch = chr(raw[p])
            x = 0x01 if ch.isdigit() else 0x20
            self.ck_case("checkpoint-bytes", f"flip-header-byte-{p}", f"header byte {p} ({ch!r}) flipped",
                         flip(p, x), sample, quick_consumers=("gpt-sample",), quick=p in positions[::4])
        data0 = 8 + hlen
        for name, p in (("first", data0), ("quarter", data0 + (size - data0) // 4), ("middle", data0 + (size - data0) // 2),
                        ("last", size - 1)):
            self.ck_case("checkpoint-bytes", f"flip-data-{name}", f"data byte {p} ({name} of the data) flipped",
                         flip(p, 0x01), self.ck_consumers(("sample", "resume")), quick_consumers=("gpt-sample",),
                         quick=name == "middle")
        cuts = {"0": 0, "1": 1, "7": 7, "8": 8, "9": 9, "half-header": 8 + hlen // 2, "header-minus-1": 8 + hlen - 1,
                "header-end": 8 + hlen, "header-plus-1": 8 + hlen + 1, "half-data": data0 + (size - data0) // 2,
                "minus-1": size - 1}
        for name, n in cuts.items():
            self.ck_case("checkpoint-bytes", f"cut-{name}", f"cut to {n} of {size} bytes", lambda n=n: raw[:n],
                         self.ck_consumers(("sample", "resume")), quick_consumers=("gpt-sample", "gpt-train-resume"),
                         quick=name in ("0", "half-header", "half-data", "minus-1"))
        self.ck_case("checkpoint-bytes", "plus-1", "one byte appended", lambda: raw + b"\0",
                     self.ck_consumers(("sample", "resume")), quick_consumers=("gpt-sample",))
        self.ck_case("checkpoint-bytes", "plus-4096", "4096 bytes appended", lambda: raw + bytes(4096),
                     self.ck_consumers(("sample",)))
        # lesson 04's loader: the same corruptions
        l04 = fx.l04_ck.read_bytes()
        h4 = struct.unpack("<Q", l04[:8])[0]
        for name, data in (("cut-half-data", l04[:(8 + h4 + len(l04)) // 2]), ("cut-header", l04[:8 + h4 // 2]),
                           ("flip-data", l04[:-5] + bytes([l04[-5] ^ 1]) + l04[-4:]),
                           ("flip-header", l04[:8 + h4 // 3] + bytes([l04[8 + h4 // 3] ^ 0x20]) + l04[8 + h4 // 3 + 1:])):
            self.add_l04_case(f"checkpoint-bytes/lesson04-eval/{name}", f"lesson04 --part eval: checkpoint {name}",
                              lambda data=data: data, [], quick=name == "flip-data")

    def checkpoint_structure_cases(self):
        fx = self.fx
        meta = dict(fx.ck_meta)
        tensors = [(n, shape, list(vals)) for n, (shape, vals) in sorted(fx.ck_tensors.items())]
        scheme = fx.scheme
        sample = self.ck_consumers(("sample",))

        def build(ts=None, md=None, header_text=None, sch=scheme):
            return lambda: st_build(tensors if ts is None else ts, meta if md is None else md, sch, header_text)

        def retyped(dtype):
            ts = [t if t[0] != "wte" else (t[0], t[1], t[2], dtype) for t in tensors]
            return build(ts)
        for dt in ("F16", "BF16", "F64", "I32"):
            self.ck_case("checkpoint-structure", f"dtype-{dt}", f"tensor wte stored as {dt}", retyped(dt), sample,
                         quick_consumers=("gpt-sample",), quick=dt == "F16")
        head = st_split(st_build(tensors, meta, scheme))[0]

        def header_edit(fn):
            h = json.loads(json.dumps(head))
            fn(h)
            return json.dumps(h, separators=(",", ":"))
        edits = {
            "negative-shape": lambda h: h["wte"].__setitem__("shape", [-1, 8]),
            "float-in-shape": None,
            "offsets-overlap": lambda h: h["wpe"].__setitem__("data_offsets",
                                                              [h["wpe"]["data_offsets"][0] - 4, h["wpe"]["data_offsets"][1] - 4]),
            "offsets-past-end": lambda h: h["wte"].__setitem__("data_offsets",
                                                               [h["wte"]["data_offsets"][0] + 10**6, h["wte"]["data_offsets"][1] + 10**6]),
            "huge-shape-small-data": lambda h: h["wte"].__setitem__("shape", [2**31, 2**31]),
            "metadata-not-strings": lambda h: h["__metadata__"].__setitem__("n_layer", 1),
        }
        for name, fn in edits.items():
            if fn is None:
                text = json.dumps(head, separators=(",", ":")).replace('"shape":[33,8]', '"shape":[33.0,8]', 1)
            else:
                text = header_edit(fn)
            self.ck_case("checkpoint-structure", name, f"header: {name.replace('-', ' ')}", build(header_text=text),
                         sample, quick_consumers=("gpt-sample",), quick=name in ("negative-shape", "offsets-overlap"))
        deep = b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}"
        self.ck_case("checkpoint-structure", "nesting-100000", "a header of 100000 nested '['",
                     lambda: struct.pack("<Q", len(deep)) + deep, sample, quick_consumers=("gpt-sample",))
        self.ck_case("checkpoint-structure", "header-not-utf8", "a header with invalid UTF-8",
                     lambda: st_build(tensors, meta, scheme).replace(b'"format"', b'"\xff\xfermat"', 1), sample)
        self.ck_case("checkpoint-structure", "header-length-2^63", "a header length of 2^63",
                     lambda: struct.pack("<Q", 2**63) + st_build(tensors, meta, scheme)[8:], sample)
        self.ck_case("checkpoint-structure", "empty-json", "the header '{}': no tensors, no metadata",
                     lambda: st_build([], {}, "none"), sample, quick_consumers=("gpt-sample",))
        self.ck_case("checkpoint-structure", "metadata-only", "the right metadata and no tensors",
                     lambda: st_build([], meta, scheme), self.ck_consumers(("sample", "resume")))
        self.ck_case("checkpoint-structure", "missing-tensor", "tensor wpe left out",
                     build([t for t in tensors if t[0] != "wpe"]), self.ck_consumers(("sample", "resume")),
                     names_extra=["wpe"], quick_consumers=("gpt-sample",))
        self.ck_case("checkpoint-structure", "extra-tensor", "an extra tensor 'surprise'",
                     build(tensors + [("surprise", [2], [1.0, 2.0])]), sample, names_extra=["surprise"])
        self.ck_case("checkpoint-structure", "wrong-shape", "wte of shape (33, 9) in a model 8 wide",
                     build([t if t[0] != "wte" else ("wte", [33, 9], [0.01] * 297) for t in tensors]), sample,
                     names_extra=["wte"], quick_consumers=("gpt-sample",))
        no_bias = [t for t in tensors if not t[0].endswith(".bias")]
        self.ck_case("checkpoint-structure", "bias-0-with-bias-tensors", "metadata bias '0' in a checkpoint that "
                     "holds the bias tensors", build(md={**meta, "bias": "0"}), self.ck_consumers(("sample", "resume")),
                     names_extra=["bias"], quick_consumers=("gpt-train-resume",))
        self.ck_case("checkpoint-structure", "bias-1-without-bias-tensors", "metadata bias '1' in a checkpoint "
                     "without bias tensors", build(no_bias), sample, names_extra=["bias"])
        self.ck_case("checkpoint-structure", "no-checksum", "a valid checkpoint without nnlab.checksum (another "
                     "writer's)", build(sch="none"), sample, expect="either")
        # another program's checkpoints, and things that are not files
        for name, path in (("lesson04-checkpoint", fx.l04_ck), ("lesson05-checkpoint", fx.l05_ck),
                           ("dump", fx.dumps / "a.safetensors")):
            self.ck_case("checkpoint-structure", f"from-{name}", f"a {name.replace('-', ' ')} given as a GPT checkpoint",
                         lambda path=path: path.read_bytes(), self.ck_consumers(("sample", "resume")),
                         quick_consumers=("gpt-sample",), quick=name == "lesson04-checkpoint")
        self.add_l04_case("checkpoint-structure/lesson04-eval/from-gpt", "lesson04 --part eval on a GPT checkpoint",
                          lambda: fx.ck_raw, [], quick=True)
        self.add_l04_case("checkpoint-structure/lesson04-eval/from-lesson02", "lesson04 --part eval on lesson 02's MLP",
                          lambda: fx.l02_ck.read_bytes(), [])
        for name, path in (("directory", "in"), ("missing", "no-such.safetensors"), ("dev-null", "/dev/null"),
                           ("dev-zero", "/dev/zero")):
            for cname, (argv_of, ctx) in self.ck_consumers(("sample", "resume")).items():
                self.add(Case(id=f"checkpoint-structure/{cname}/{name}", cls="checkpoint-structure",
                              desc=f"{cname}: the checkpoint is {path}", argv=argv_of(path), expect="error",
                              names=[path], setup=lambda d: (d / "in").mkdir(), out_dir="out",
                              quick=name in ("dev-zero", "directory") and cname == "gpt-sample", context=ctx))

    def checkpoint_values_cases(self):
        fx = self.fx
        meta = dict(fx.ck_meta)
        tensors = [(n, shape, list(vals)) for n, (shape, vals) in sorted(fx.ck_tensors.items())]
        scheme = fx.scheme

        def poisoned(name, value):
            return lambda: st_build([(n, s, [value] * len(v)) if n == name else (n, s, v) for n, s, v in tensors],
                                    meta, scheme)
        both = self.ck_consumers(("sample", "resume", "eval"))
        self.ck_case("checkpoint-values", "nan-weights", "every element of wte is NaN", poisoned("wte", float("nan")),
                     both, quick_consumers=("gpt-sample", "gpt-train-resume"))
        self.ck_case("checkpoint-values", "inf-weight", "every element of h.0.mlp.c_fc.weight is inf",
                     poisoned("h.0.mlp.c_fc.weight", float("inf")), self.ck_consumers(("sample", "dump")),
                     quick_consumers=("gpt-sample",))
        self.ck_case("checkpoint-values", "nan-adam-v", "AdamW's v of wte is NaN (resuming must not train on it)",
                     poisoned("adam.v.wte", float("nan")), self.ck_consumers(("resume",)),
                     quick_consumers=("gpt-train-resume",))
        self.ck_case("checkpoint-values", "nan-adam-m", "AdamW's m of wpe is NaN", poisoned("adam.m.wpe", float("nan")),
                     self.ck_consumers(("resume",)))
        self.ck_case("checkpoint-values", "nan-adam-v-sample", "AdamW's v is NaN, sampling (which does not use it)",
                     poisoned("adam.v.wte", float("nan")), self.ck_consumers(("sample",)), expect="either")
        # metadata that claims a much larger model than the tensors hold: check before allocating
        claims = {"n_embd-2048-n_layer-2": {"n_embd": "2048", "n_layer": "2"}, "vocab_size-100M": {"vocab_size": "100000000"},
                  "block_size-100M": {"block_size": "100000000"}, "n_layer-100000": {"n_layer": "100000"},
                  "n_head-0": {"n_head": "0"}, "n_embd-0": {"n_embd": "0"}}
        for name, over in claims.items():
            self.ck_case("checkpoint-values", f"claims-{name}", f"metadata {over} over the 1-layer, 8-wide tensors: "
                         "the shapes must be checked before anything is allocated", 
                         lambda over=over: st_build(tensors, {**meta, **over}, scheme),
                         self.ck_consumers(("sample", "resume")), names_extra=list(over),
                         quick_consumers=("gpt-sample",), quick=name in ("n_embd-2048-n_layer-2", "vocab_size-100M"))
        l04 = fx.l04_ck.read_bytes()
        l04_meta = st_split(l04)[0]["__metadata__"]
        l04_t = [(n, s, list(v)) for n, (s, v) in sorted(st_tensors(l04).items())]
        self.add_l04_case("checkpoint-values/lesson04-eval/nan-weights", "lesson04 --part eval: NaN in fc1.weight",
                          lambda: st_build([(n, s, [float("nan")] * len(v)) if n == "fc1.weight" else (n, s, v)
                                            for n, s, v in l04_t], l04_meta, scheme), ["fc1.weight"], quick=True)

    # -- training that goes non-finite, resume, out-dir, log -----------------------------------

    def seeded_outdir(self, d: Path, name="out"):
        shutil.copytree(self.fx.gptrun, d / name)

    def training_cases(self):
        fx = self.fx
        keep_all = ["out/best.safetensors", "out/last.safetensors"]
        resume = self.context_argv(("gpt", "train"), ["--max-iters"]) + ["--max-iters", "6", "--resume",
                                                                         "out/last.safetensors"]

        def seeded(d):
            self.seeded_outdir(d)
        cases = [
            ("resume-eps0-beta2-0", "resume a good run with --eps 0 --beta2 0 (0/0 in AdamW)", resume + ["--eps", "0",
             "--beta2", "0"], "either", ["--eps", "--beta2", "non-finite", "NaN", "nan"], True),
            ("resume-eps-nan", "resume with --eps nan", resume + ["--eps=nan"], "error", ["--eps"], True),
            ("fresh-eps0-beta2-0", "a fresh run with --eps 0 --beta2 0", self.context_argv(("gpt", "train"), ["--max-iters"])
             + ["--max-iters", "6", "--eps", "0", "--beta2", "0"], "either",
             ["--eps", "--beta2", "non-finite", "NaN", "nan"], False),
            ("resume-lr-10", "resume with --lr 10 (may diverge)",
             self.context_argv(("gpt", "train"), ["--max-iters", "--warmup-iters", "--lr"]) +
             ["--max-iters", "6", "--resume", "out/last.safetensors", "--lr", "10", "--warmup-iters", "0"],
             "either", ["non-finite", "NaN", "nan", "--lr"], False),
        ]
        for name, desc, argv, expect, names, quick in cases:
            fresh = name.startswith("fresh")
            self.add(Case(id=f"non-finite-training/{name}", cls="non-finite-training", desc=desc, argv=argv,
                          expect=expect, names=names, setup=None if fresh else seeded,
                          keep_finite=[] if fresh else keep_all, out_dir="out", quick=quick, check=no_nan_loss,
                          context="gpt train"))

        def seeded_cfg(d):
            self.seeded_outdir(d)
            (d / "run.toml").write_text("eps = nan\n")
        self.add(Case(id="non-finite-training/resume-config-eps-nan", cls="non-finite-training",
                      desc="resume with eps = nan in a config file", argv=resume + ["--config", "run.toml"],
                      expect="error", names=["eps", "run.toml"], setup=seeded_cfg, keep_finite=keep_all, out_dir="out",
                      quick=True, context="gpt train"))

        def seeded_nan_v(d):
            self.seeded_outdir(d)
            (d / "in").mkdir()
            t = [(n, s, [float("nan")] * len(v)) if n == "adam.v.wte" else (n, s, list(v))
                 for n, (s, v) in sorted(fx.ck_tensors.items())]
            (d / "in" / "ck.safetensors").write_bytes(st_build(t, fx.ck_meta, fx.scheme))
        self.add(Case(id="non-finite-training/resume-nan-adam-v-into-good-run", cls="non-finite-training",
                      desc="resume from a checkpoint whose adam.v is NaN, into an out-dir holding a good run",
                      argv=self.context_argv(("gpt", "train"), ["--max-iters"]) + ["--max-iters", "6", "--resume",
                                                                                   "in/ck.safetensors"],
                      expect="error", names=["ck.safetensors", "adam", "non-finite", "NaN"], setup=seeded_nan_v,
                      keep_finite=keep_all, out_dir="out", quick=True, context="gpt train"))
        for prog, ck in (("lesson02", "mlp.safetensors"), ("lesson04", "cnn.safetensors")):
            src = fx.l02 if prog == "lesson02" else fx.l04

            def seeded_lesson(d, src=src):
                shutil.copytree(src, d / "out")
            self.add(Case(id=f"non-finite-training/{prog}-lr-nan", cls="non-finite-training",
                          desc=f"{prog} --lr nan into an out-dir holding a good {ck}",
                          argv=self.context_argv((prog,), ["--lr"]) + ["--lr=nan"], expect="error", names=["--lr"],
                          setup=seeded_lesson, keep=[f"out/{ck}"], out_dir="out", quick=prog == "lesson02",
                          context=prog))
            self.add(Case(id=f"non-finite-training/{prog}-lr-huge", cls="non-finite-training",
                          desc=f"{prog} --lr at its maximum (training may diverge): an error naming a good "
                               f"checkpoint, or a finite one", argv=self.context_argv((prog,), ["--lr"]) +
                          ["--lr", "1" if prog == "lesson04" else "10"], expect="either",
                          names=["non-finite", "NaN", "nan", "--lr", "diverge"], setup=seeded_lesson,
                          keep_finite=[f"out/{ck}"], out_dir="out", check=no_nan_loss, context=prog))

    def outdir_cases(self):
        fx = self.fx
        train = lambda drop=(): self.context_argv(("gpt", "train"), list(drop))

        def seeded(d):
            self.seeded_outdir(d)
        old_log = (fx.gptrun / "log.jsonl").read_text()

        def log_appended(r, d):
            try:
                new = (d / "out" / "log.jsonl").read_text()
            except OSError:
                return ("lost-work", "log.jsonl is gone after the resume")
            if not new.startswith(old_log):
                return ("lost-work", "log.jsonl lost the history before the resume (it was truncated, not appended to)")
            return None
        # resume keeps the history: a truncated log is lost work
        self.add(Case(id="resume-outdir-log/resume-appends-log", cls="resume-outdir-log",
                      desc="--resume continues log.jsonl (the history before the resume stays)",
                      argv=train(["--max-iters"]) + ["--max-iters", "4", "--resume", "out/last.safetensors"], expect="ok",
                      setup=seeded, check=log_appended, keep_finite=["out/best.safetensors"],
                      out_dir="out", quick=True, context="gpt train"))
        # A full disk is /dev/full, reached through a link in the case's folder: a program that
        # writes a file by renaming a temporary over its path then replaces the link, never the
        # device (as root, a rename over /dev/full itself replaces the machine's device node).
        def full_link(d, name="full.log"):
            os.symlink("/dev/full", d / name)

        def seeded_full(d):
            self.seeded_outdir(d)
            full_link(d)
        self.add(Case(id="resume-outdir-log/log-dev-full", cls="resume-outdir-log",
                      desc="--log to /dev/full (a link to it): every write fails, as on a full disk",
                      argv=train() + ["--log", "full.log"], setup=full_link, expect="error",
                      names=["full.log", "/dev/full"], out_dir="out", quick=True, context="gpt train"))
        self.add(Case(id="resume-outdir-log/resume-log-dev-full", cls="resume-outdir-log",
                      desc="--resume with --log to /dev/full", argv=train(["--max-iters"]) +
                      ["--max-iters", "4", "--resume", "out/last.safetensors", "--log", "full.log"],
                      expect="error", names=["full.log", "/dev/full"], setup=seeded_full,
                      keep_finite=["out/best.safetensors", "out/last.safetensors"], out_dir="out",
                      context="gpt train"))
        self.add(Case(id="resume-outdir-log/log-is-directory", cls="resume-outdir-log",
                      desc="--log names a directory", argv=train() + ["--log", "logdir"], expect="error",
                      names=["logdir"], setup=lambda d: (d / "logdir").mkdir(), out_dir="out", context="gpt train"))
        self.add(Case(id="resume-outdir-log/log-none", cls="resume-outdir-log", desc="--log none: no log",
                      argv=train() + ["--log", "none"], expect="ok", out_dir="out",
                      check=lambda r, d: "wrote a log although --log none" if (d / "out" / "log.jsonl").exists() else None,
                      context="gpt train"))
        # a fresh run into an out-dir that holds a run: refuse unless told
        for prog, path in (("gpt-train", ("gpt", "train")), ("lesson08-train", ("lesson08",))):
            self.add(Case(id=f"resume-outdir-log/{prog}-fresh-into-used-out-dir", cls="resume-outdir-log",
                          desc="a fresh run into an out-dir holding best/last checkpoints and a log: refuse "
                               "(or be told: --resume, an overwrite flag)",
                          argv=self.context_argv(path, ["--out-dir"]) + ["--out-dir", "used-run"], expect="error",
                          names=["used-run", "--out-dir"], setup=lambda d: self.seeded_outdir(d, "used-run"),
                          keep=["used-run/best.safetensors", "used-run/last.safetensors", "used-run/log.jsonl"],
                          out_dir="used-run", quick=prog == "gpt-train", context=" ".join(path)))
        self.add(Case(id="resume-outdir-log/fresh-into-out-dir-with-other-files", cls="resume-outdir-log",
                      desc="a fresh run into an out-dir holding only a user's notes.txt", argv=train(), expect="ok",
                      setup=lambda d: ((d / "out").mkdir(), (d / "out" / "notes.txt").write_text("mine\n")),
                      keep=["out/notes.txt"], out_dir="out", context="gpt train"))
        self.add(Case(id="resume-outdir-log/out-dir-is-a-file", cls="resume-outdir-log",
                      desc="--out-dir names a regular file", argv=train(["--out-dir"]) + ["--out-dir", "outfile"],
                      expect="error", names=["outfile"], setup=lambda d: (d / "outfile").write_text("x\n"),
                      keep=["outfile"], out_dir="outfile", quick=True, context="gpt train"))
        self.add(Case(id="resume-outdir-log/out-dir-under-dev-full", cls="resume-outdir-log",
                      desc="--out-dir /dev/full/run", argv=train(["--out-dir"]) + ["--out-dir", "/dev/full/run"],
                      expect="error", names=["/dev/full"], context="gpt train"))

        def seeded_orphan(d):
            self.seeded_outdir(d)
            (d / "out" / "last.safetensors.tmp").write_bytes(b"half a checkpoint from a killed run")

        def no_orphan(r, d):
            left = sorted(p.name for p in (d / "out").glob("*.tmp"))
            return f"the orphan {', '.join(left)} from a killed run is still there" if left else None
        self.add(Case(id="resume-outdir-log/orphan-tmp-cleaned", cls="resume-outdir-log",
                      desc="resume into an out-dir holding last.safetensors.tmp from a killed run: it gets cleaned up",
                      argv=train(["--max-iters"]) + ["--max-iters", "4", "--resume", "out/last.safetensors"],
                      expect="ok", setup=seeded_orphan, check=no_orphan, out_dir="out", context="gpt train"))
        # --resume and model flags that disagree with the checkpoint
        for flag, value in (("--n-layer", "2"), ("--n-embd", "16"), ("--n-head", "2"), ("--block-size", "16"),
                            ("--dropout", "0.1"), ("--bias", "false")):
            self.add(Case(id=f"resume-outdir-log/resume-conflict{flag}", cls="resume-outdir-log",
                          desc=f"--resume a 1-layer, 8-wide, context-8, biased checkpoint with {flag} {value}",
                          argv=train(["--max-iters", flag]) + ["--max-iters", "4", "--resume", str(fx.ck), flag, value],
                          expect="error", names=[flag], out_dir="out", quick=flag in ("--n-layer", "--bias"),
                          context="gpt train"))
        self.add(Case(id="resume-outdir-log/resume-same-model-flags", cls="resume-outdir-log",
                      desc="--resume with model flags equal to the checkpoint's", expect="ok",
                      argv=train(["--max-iters"]) + ["--max-iters", "4", "--resume", str(fx.ck)], out_dir="out",
                      context="gpt train"))
        for name, path in (("missing", "no-such.safetensors"), ("directory", "ckdir")):
            self.add(Case(id=f"resume-outdir-log/resume-{name}", cls="resume-outdir-log",
                          desc=f"--resume {path} ({name})", argv=train() + ["--resume", path], expect="error",
                          names=[path], setup=lambda d: (d / "ckdir").mkdir(), out_dir="out", context="gpt train"))
        # --max-iters 0 and other short runs: no number that was never computed, no file never written
        def no_phantom_loss(r, d):
            m = re.search(r"1e\+?30|1000000015047466219876688855040", r.stdout + r.stderr)
            return f"prints a best val loss of {m.group(0)} (nothing was evaluated)" if m else None
        self.add(Case(id="resume-outdir-log/max-iters-0", cls="resume-outdir-log",
                      desc="--max-iters 0: no best loss that was never measured, no checkpoint that was never written",
                      argv=train(["--max-iters"]) + ["--max-iters", "0"], expect="either", names=["--max-iters"],
                      check=no_phantom_loss, out_dir="out", quick=True, context="gpt train"))
        self.add(Case(id="resume-outdir-log/resume-past-max-iters", cls="resume-outdir-log",
                      desc="--resume a step-2 checkpoint with --max-iters 1", expect="either", names=["--max-iters"],
                      argv=train(["--max-iters"]) + ["--max-iters", "1", "--resume", str(fx.ck)],
                      check=no_phantom_loss, out_dir="out", context="gpt train"))
        self.add(Case(id="resume-outdir-log/dump-step-without-path", cls="resume-outdir-log",
                      desc="--dump-step 1 without --dump-path", argv=train() + ["--dump-step", "1"], expect="error",
                      names=["--dump-path", "--dump-step"], out_dir="out", quick=True, context="gpt train"))
        self.add(Case(id="resume-outdir-log/dump-step-with-path", cls="resume-outdir-log",
                      desc="--dump-step 1 --dump-path d.safetensors", argv=train() + ["--dump-step", "1", "--dump-path",
                                                                                   "out/d.safetensors"],
                      expect="ok", out_dir="out", check=lambda r, d: None if (d / "out" / "d.safetensors").exists()
                      else "no dump written", context="gpt train"))
        self.add(Case(id="resume-outdir-log/dump-step-past-the-run", cls="resume-outdir-log",
                      desc="--dump-step 99 in a 2-step run, with --dump-path: refuse, or say no dump was written",
                      argv=train() + ["--dump-step", "99", "--dump-path", "out/d.safetensors"], expect="either",
                      names=["--dump-step"], out_dir="out",
                      check=lambda r, d: None if re.search(r"dump", r.stdout + r.stderr, re.I) else
                      "--dump-step 99 never came in a 2-step run, and nothing said so", context="gpt train"))
        self.add(Case(id="resume-outdir-log/dump-path-dev-full", cls="resume-outdir-log",
                      desc="--dump-path to /dev/full (a link to it)", setup=lambda d: full_link(d, "full.dump"),
                      argv=train() + ["--dump-step", "1", "--dump-path", "full.dump"],
                      check=lambda r, d: None if (d / "full.dump").is_symlink() else
                      "exit 0, and full.dump, a link to /dev/full, was replaced by a file",
                      expect="either", names=["full.dump", "/dev/full"], out_dir="out", context="gpt train"))

    # -- the smaller ones ----------------------------------------------------------------------

    def smaller_cases(self):
        def no_overflow(r, d):
            m = re.search(r"(?<![\w.])-\d[\d,]*(?:\.\d+)?\s*(?:B|KiB|MiB|GiB|TiB|%)(?!\w)|(?<![\d.,])0 B\b",
                          r.stdout + r.stderr)
            return f"an overflowed size in the table: '{m.group(0)}'" if m else None
        for name, over in (("largest", {"--n-layer": "1024", "--n-embd": "65536", "--block-size": "65536",
                                        "--batch-size": "65536"}),
                           ("wide", {"--n-embd": "65536"}), ("long", {"--block-size": "65536", "--batch-size": "65536"}),
                           ("deep", {"--n-layer": "1024", "--n-embd": "4096"})):
            argv = ["nnlab", "lesson08", "--part", "memory"]
            for k, v in over.items():
                argv += [k, v]
            self.add(Case(id=f"smaller/lesson08-memory-{name}", cls="smaller",
                          desc=f"lesson08 --part memory at {over}: every size positive and right, or an error",
                          argv=argv, expect="either", names=list(over), check=no_overflow, quick=name == "largest",
                          context="lesson08"))
        self.add(Case(id="smaller/gpt-train-n-head-not-dividing", cls="smaller",
                      desc="--n-head 3 with --n-embd 8", argv=self.context_argv(("gpt", "train"), ["--n-head"]) +
                      ["--n-head", "3"], expect="error", names=["--n-head", "n_head"], out_dir="out",
                      context="gpt train"))
        for v in ("0.9", "-1", "2"):
            self.add(Case(id=f"smaller/gpt-eval-val-fraction-{v}", cls="smaller",
                          desc=f"gpt eval --val-fraction {v} (training accepts 0.01 to 0.5)",
                          argv=self.context_argv(("gpt", "eval"), ["--val-fraction"]) + [f"--val-fraction={v}"],
                          expect="either" if v == "0.9" else "error", names=["--val-fraction"], quick=v == "2",
                          context="gpt eval"))
        self.add(Case(id="smaller/gpt-sample-zero-tokens", cls="smaller", desc="gpt sample --tokens 0",
                      argv=self.context_argv(("gpt", "sample"), ["--tokens"]) + ["--tokens", "0"], expect="ok",
                      context="gpt sample"))


# A gzip stream of `head` followed by n zero bytes, without holding n bytes in memory.
def gz_zeros(head: bytes, n: int) -> bytes:
    c = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [c.compress(head)]
    chunk = bytes(1 << 20)
    left = n
    while left > 0:
        k = min(left, len(chunk))
        out.append(c.compress(chunk[:k]))
        left -= k
    out.append(c.flush())
    return b"".join(out)


def no_late_failure(r: Run, d: Path) -> Optional[str]:
    """An error about the input must come before the work: not after training and saving."""
    out = d / "out"
    written = sorted(str(p.relative_to(d)) for p in out.rglob("*.safetensors")) if out.is_dir() else []
    if written:
        return f"trained and saved {', '.join(written)}, then failed: the input can be checked before training"
    return None


def no_nan_loss(r: Run, d: Path) -> Optional[str]:
    """A run that exits 0 must not have printed a non-finite loss or accuracy."""
    m = re.search(r"(loss|acc\w*)\s*[:=]?\s*(-?nan|-?inf)\b", r.stdout + r.stderr, re.I)
    return f"exit 0 after printing '{m.group(0)}'" if m else None


# ---- the campaign ---------------------------------------------------------------------------------


def discover(bindir: Path, env: dict) -> dict:
    import subprocess

    def helptext(path):
        p = subprocess.run([str(bindir / "nnlab"), *path, "--help"], capture_output=True, text=True, env=env,
                           timeout=60)
        return p.stdout
    commands = {}
    todo = [()]
    while todo:
        path = todo.pop()
        flags, subs = parse_help(helptext(path))
        if path:
            commands[path] = flags
        for s in subs:
            todo.append(path + (s,))
    return commands


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="build/release/bin", help="the build's bin/ folder (nnlab, lesson02, ...)")
    ap.add_argument("--full", action="store_true", help="every case (default: the quick CI subset)")
    ap.add_argument("--only", help="run only the cases whose id matches this regular expression")
    ap.add_argument("--jobs", type=int, default=2, help="cases run in parallel (exclusive ones run alone)")
    ap.add_argument("--json", help="write the record of every case here")
    ap.add_argument("--markdown", help="write a summary table and the failing cases here")
    ap.add_argument("--work", help="working folder (default: a temporary one, removed unless --keep)")
    ap.add_argument("--keep", action="store_true", help="keep the working folder (every case's inputs and outputs)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case as it ends")
    args = ap.parse_args()

    # Cases read /dev/null and /dev/zero and write to /dev/full: they must be the devices. (A
    # program that writes a checkpoint by renaming over its path, run as root, replaces them.)
    devices = {"/dev/null": (1, 3), "/dev/zero": (1, 5), "/dev/full": (1, 7)}
    broken = [p for p in devices if not stat_is_char_device(p)]
    if broken:
        print(f"error: {', '.join(broken)} is not the character device it should be (a program replaced it?): "
              f"the cases that use it would be judged wrong. Restore it as root, e.g. "
              f"`rm /dev/full && mknod -m 666 /dev/full c 1 7` (null: c 1 3, zero: c 1 5)", file=sys.stderr)
        return 2
    bindir = Path(args.bin).resolve()
    if not (bindir / "nnlab").is_file():
        print(f"error: no nnlab in {bindir}: build it first (cmake --build build/release --target nnlab) "
              f"or pass --bin", file=sys.stderr)
        return 2
    work = Path(args.work).resolve() if args.work else Path(tempfile.mkdtemp(prefix="nnlab-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        return campaign(args, bindir, work, devices)
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print(f"cases kept in {work}/cases (numbered in list order; replay a case with the command shown, "
                  f"from its folder)", file=sys.stderr)


def campaign(args, bindir: Path, work: Path, devices: dict) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NNLAB_", "OMP_"))}
    env.update({"OMP_NUM_THREADS": "1", "NNLAB_DATA": str(work / "fixtures" / "empty-data"), "LC_ALL": "C"})
    t_start = time.monotonic()
    try:
        commands = discover(bindir, env)
        fx = Fixtures(work / "fixtures", bindir, env)
    except (RuntimeError, OSError, KeyError, ValueError) as e:
        print(f"error: the campaign could not set up its fixtures: {e}", file=sys.stderr)
        return 2
    b = Builder(fx, commands, args.full)
    for gen in (b.flag_cases, b.thread_cases, b.config_cases, b.idx_cases, b.corpus_cases,
                b.checkpoint_metadata_cases, b.checkpoint_bytes_cases, b.checkpoint_structure_cases,
                b.checkpoint_values_cases, b.training_cases, b.outdir_cases, b.smaller_cases):
        gen()
    cases = b.cases
    ids = [c.id for c in cases]
    dups = {i for i in ids if ids.count(i) > 1}
    if dups:
        print(f"error: duplicate case ids: {sorted(dups)[:5]}", file=sys.stderr)
        return 2
    if args.only:
        rx = re.compile(args.only)
        cases = [c for c in cases if rx.search(c.id)]
    if args.list:
        for c in cases:
            print(f"{c.id}\t{c.expect}\t{c.desc}")
        print(f"{len(cases)} cases", file=sys.stderr)
        return 0

    # Baselines: every context the cases build on, run once with valid input. A context that
    # does not run here (no GPU, ...) makes its cases inconclusive: they are skipped, and said so.
    needed = sorted({c.context for c in cases if c.context})
    baselines, base_mb = {}, {}
    context_argv = {" ".join(p): b.context_argv(p) for p in b.contexts}
    info = run_program([str(bindir / "nnlab"), "info"], work, env, 60, 0, 0)
    floor_mb = info.peak_rss_mb
    for ctx in needed:
        argv = context_argv.get(ctx)
        d = work / "baselines" / re.sub(r"\W+", "-", ctx)
        d.mkdir(parents=True, exist_ok=True)
        if argv is None:
            baselines[ctx] = (None, "no context run defined")
            base_mb[ctx] = floor_mb
            continue
        r = run_program([str(bindir / argv[0])] + argv[1:], d, env, 120, 0, 0)
        ok = r.rc == 0 and not r.timed_out
        baselines[ctx] = (r, "" if ok else f"exit {r.rc}{' (timed out)' if r.timed_out else ''}: "
                          f"{first_error(r.stdout + r.stderr)}")
        base_mb[ctx] = max(floor_mb, r.peak_rss_mb)

    results = {}
    lock = threading.Lock()
    done = [0]

    def run_one(i_case):
        i, c = i_case
        base = baselines.get(c.context)
        if c.context and base and base[1]:
            res = {"outcome": "skipped", "detail": f"the context run ({c.context}) fails here: {base[1]}"}
        else:
            d = work / "cases" / f"{i:05d}"
            if d.exists():
                shutil.rmtree(d)
            d.mkdir(parents=True)
            if c.setup:
                c.setup(d)
            before = {rel: sha(d / rel) for rel in c.keep}
            argv = [str(bindir / c.argv[0])] + [str(a) for a in c.argv[1:]]
            baseline_mb = base_mb.get(c.context, floor_mb)
            # The address-space limit and the RSS watchdog protect the machine (and the other cases
            # running beside); the judgement is made on the peak RSS against the allowance.
            vm_limit = int(baseline_mb + c.mem_mb + 4096) if c.as_limit else 0
            rss_kill = int((baseline_mb + c.mem_mb) * 1.25 + 256)
            r = run_program(argv, d, {**env, **c.env}, c.timeout, vm_limit, rss_kill)
            outcome, detail = judge(c, r, d, before, baseline_mb)
            res = {"outcome": outcome, "detail": detail, "rc": r.rc, "wall_s": round(r.wall_s, 3),
                   "peak_rss_mb": round(r.peak_rss_mb, 1), "dir": str(d),
                   "output_tail": (r.stdout + r.stderr)[-1500:]}
            if not args.keep:
                shutil.rmtree(d, ignore_errors=True)
        res["cmd"] = " ".join(shell_quote(a) for a in c.argv)
        with lock:
            results[c.id] = res
            done[0] += 1
            if args.verbose:
                print(f"[{done[0]}/{len(cases)}] {res['outcome']:13} {c.id}  {res.get('detail', '')[:200]}",
                      file=sys.stderr)
            elif done[0] % 50 == 0:
                print(f"  ... {done[0]}/{len(cases)} cases", file=sys.stderr)

    shared = [(i, c) for i, c in enumerate(cases) if not c.exclusive]
    alone = [(i, c) for i, c in enumerate(cases) if c.exclusive]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(run_one, shared))
    for item in alone:
        run_one(item)
    elapsed = time.monotonic() - t_start

    # A device a case replaced is a finding of its own, whatever the cases' outcomes said.
    replaced = [p for p in devices if not stat_is_char_device(p)]

    # ---- the report
    classes = sorted({c.cls for c in cases}, key=lambda k: [c.cls for c in cases].index(k))
    cols = OUTCOMES + ["skipped"]
    table = {k: {o: 0 for o in cols} for k in classes}
    for c in cases:
        table[c.cls][results[c.id]["outcome"]] += 1
    totals = {o: sum(table[k][o] for k in classes) for o in cols}
    failing = [c for c in cases if results[c.id]["outcome"] in FAILING]
    skipped = [c for c in cases if results[c.id]["outcome"] == "skipped"]
    short = {"clear-error": "clear", "silent-wrong": "silent", "refused-good": "refused", "lost-work": "lost",
             "bad-error": "bad-err"}
    header = ["class", "cases"] + [short.get(o, o) for o in cols]
    rows = [[k, str(sum(table[k].values()))] + [str(table[k][o]) for o in cols] for k in classes]
    rows.append(["total", str(len(cases))] + [str(totals[o]) for o in cols])
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    fmt = lambda r: "  ".join(s.ljust(widths[0]) if i == 0 else s.rjust(widths[i]) for i, s in enumerate(r))
    mode = "full" if args.full else "quick"
    print(f"\nbad-input campaign ({mode}): {len(cases)} cases against {bindir} in {elapsed:.0f} s")
    print(fmt(header))
    for r in rows:
        print(fmt(r))
    bad_baselines = {k: v[1] for k, v in baselines.items() if v[1]}
    if bad_baselines:
        print("\ncontexts that do not run here (their cases are skipped, not passed):")
        for k, why in bad_baselines.items():
            print(f"  {k}: {why}")
    if failing:
        print(f"\n{len(failing)} cases did not end in a clear error or a correct result:")
        for c in failing:
            res = results[c.id]
            print(f"  {res['outcome']:13} {c.id}\n                {res['detail'][:300]}\n                $ {res['cmd'][:300]}")
    if replaced:
        print(f"\nDEVICE REPLACED: {', '.join(replaced)} is no longer a character device after the run: a "
              f"program wrote a file over it. Restore it (see --help) before trusting any other run.")
    print(f"\ncrashes {totals['crash']}, hangs {totals['hang']}, memory blow-ups {totals['memory']}, "
          f"silent wrong results {totals['silent-wrong']}, work lost {totals['lost-work']}, "
          f"bad errors {totals['bad-error']}, good input refused {totals['refused-good']}; "
          f"clear errors {totals['clear-error']}, correct {totals['correct']}, skipped {totals['skipped']}")
    record = {
        "schema": "nnlab-bad-input-campaign/1", "mode": mode, "bin": str(bindir),
        "date": datetime.datetime.now().isoformat(timespec="seconds"), "seconds": round(elapsed, 1),
        "machine": {"cpus": os.cpu_count()}, "nnlab_info": info.stdout.splitlines()[:12],
        "checksum_scheme": fx.scheme,
        "baselines": {k: {"ok": not v[1], "why": v[1], "peak_rss_mb": base_mb.get(k)} for k, v in baselines.items()},
        "counts": {"by_class": table, "total": totals},
        "cases": [{"id": c.id, "class": c.cls, "desc": c.desc, "expect": c.expect, **results[c.id]} for c in cases],
    }
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    if args.markdown:
        md = [f"# Bad-input campaign ({mode})", "",
              f"{len(cases)} cases, `{bindir}`, {record['date']}, {elapsed:.0f} s, {os.cpu_count()} CPUs.", "",
              "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        md += ["| " + " | ".join(r) + " |" for r in rows]
        if failing:
            md += ["", "## Cases that did not end in a clear error or a correct result", "",
                   "| outcome | case | what happened |", "|---|---|---|"]
            md += [f"| {results[c.id]['outcome']} | `{c.id}` | {results[c.id]['detail'][:200].replace('|', '/')} |"
                   for c in failing]
        if skipped:
            md += ["", f"{len(skipped)} cases skipped: " + "; ".join(f"{k}: {v}" for k, v in bad_baselines.items())]
        Path(args.markdown).write_text("\n".join(md) + "\n")
    return 1 if failing or replaced else 0


def stat_is_char_device(path: str) -> bool:
    import stat
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def shell_quote(s: str) -> str:
    return s if re.match(r"^[\w./:=,+@%-]+$", s) else "'" + s.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(main())
