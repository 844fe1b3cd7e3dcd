#!/usr/bin/env python3
"""tests/python/test_bpe_hf.py: nnlab's byte-level BPE (io/bpe.h, run through
`lesson11 --part bpe`) against Hugging Face `tokenizers` set up the same way (scripts/bpe_hf.py).

    python3 tests/python/test_bpe_hf.py [--corpus small|tinyshakespeare|both]

On each corpus, with the same vocabulary size and the special token <|endoftext|>:
  1. both trainers learn the same merges, in the same order, and the same vocabulary (ids);
  2. both encode the whole corpus to the same ids (each with its own tokenizer);
  3. the tokenizer.json HF wrote loads in ours and encodes to the same ids;
  4. the tokenizer.json ours wrote loads in HF and encodes to the same ids (and HF decodes
     them back to the corpus).
"small" is a made-up corpus (contractions, numbers, Unicode letters, runs of spaces and
newlines, many equal counts, so the tie-break matters) written to a temporary folder;
"tinyshakespeare" is ../shared/data/tinyshakespeare.txt (or $NNLAB_DATA, <repo>/data).
SKIP (exit 0, a line starting "SKIP:") without `tokenizers` (the line says how to install it),
without the lesson11 program, or without the corpus.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = os.environ.get("NNLAB_BIN_DIR", os.path.join(REPO, "build", "release", "bin"))
VENV_PY = os.path.join(REPO, ".venv", "bin", "python")
sys.path.insert(0, os.path.join(REPO, "scripts"))

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import tokenizers  # noqa: F401
except ImportError:
    # The pinned copy lives in <repo>/.venv (scripts/setup.sh): run there if this is another Python.
    # (Compare prefixes, not executables: the venv's python is a symlink to the system's.)
    if os.path.exists(VENV_PY) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv")) \
            and not os.environ.get("NNLAB_BPE_HF_REEXEC"):
        os.environ["NNLAB_BPE_HF_REEXEC"] = "1"
        os.execv(VENV_PY, [VENV_PY] + sys.argv)
    import bpe_hf  # noqa: E402
    print("SKIP: Hugging Face tokenizers is not installed; install it with:\n  " + bpe_hf.INSTALL_HINT)
    sys.exit(0)

import bpe_hf  # noqa: E402

VOCAB = 1024
SPECIAL = "<|endoftext|>"


def small_corpus():
    rng = random.Random(11)
    words = ["the", "The", "they're", "I'll", "we've", "don't", "it's", "hello", "world", "cat", "sat", "mat",
             "naïve", "café", "über", "слово", "日本語", "1999", "42", "3.14", "?!", "...", "--", "(a)", "x²"]
    syll = ["ka", "to", "ri", "men", "str", "ou", "ing", "ed", "lo", "qu", "é", "ß", "aa", "aaa"]
    parts = []
    for i in range(6000):
        if rng.random() < 0.3:
            parts.append("".join(rng.choice(syll) for _ in range(rng.randint(1, 4))))
        else:
            parts.append(words[min(int(rng.random() ** 3 * len(words)), len(words) - 1)])
        parts.append(rng.choice([" ", " ", " ", " ", "  ", "\n", "\n\n", ",\n", "   \n  ", "\t"]))
    return "".join(parts)


def find_tinyshakespeare():
    dirs = []
    if os.environ.get("NNLAB_DATA"):
        dirs.append(os.environ["NNLAB_DATA"])
    for base in (REPO, os.getcwd()):
        dirs += [os.path.join(base, "data"), os.path.join(base, "..", "shared", "data"),
                 os.path.join(base, "..", "..", "shared", "data")]
    for d in dirs:
        for rel in ("tinyshakespeare.txt", os.path.join("tinyshakespeare", "input.txt")):
            p = os.path.join(d, rel)
            if os.path.isfile(p):
                return p
    return None


def ours(args):
    exe = os.path.join(BIN_DIR, "lesson11")
    r = subprocess.run([exe, "--part", "bpe", "--repeats", "1"] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"lesson11 {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at {i}: {x!r} vs {y!r}"
    return f"lengths {len(a)} vs {len(b)}"


def check_corpus(name, path, tmp):
    print(f"== {name}: {path} ({os.path.getsize(path)} bytes), vocab {VOCAB}")
    text = bpe_hf.read_corpus(path)
    f = lambda n: os.path.join(tmp, f"{name}-{n}")  # noqa: E731

    # 1. the same merges and vocabulary
    hf = bpe_hf.train(text, VOCAB, [SPECIAL])
    hf.save(f("hf.json"))
    ours(["--data", path, "--vocab-size", str(VOCAB), "--save-tokenizer", f("ours.json"), "--write-ids", f("ours-ids.json")])
    hf_model = json.load(open(f("hf.json"), encoding="utf-8"))["model"]
    our_model = json.load(open(f("ours.json"), encoding="utf-8"))["model"]
    hf_merges = [tuple(m) for m in hf_model["merges"]]
    our_merges = [tuple(m) for m in our_model["merges"]]
    assert hf_merges == our_merges, f"merges differ: {len(hf_merges)} vs {len(our_merges)}, " + first_difference(hf_merges, our_merges)
    assert hf_model["vocab"] == our_model["vocab"], "vocabularies differ"
    print(f"  same {len(our_merges)} merges and {len(our_model['vocab'])} vocabulary ids")

    # 2. the same ids for the whole corpus
    hf_ids = hf.encode(text).ids
    our_ids = json.load(open(f("ours-ids.json")))
    assert hf_ids == our_ids, "ids differ: " + first_difference(hf_ids, our_ids)
    print(f"  same {len(our_ids)} ids for the whole corpus")

    # 3. HF's tokenizer.json in ours
    ours(["--data", path, "--load-tokenizer", f("hf.json"), "--write-ids", f("ours-on-hf.json")])
    ids3 = json.load(open(f("ours-on-hf.json")))
    assert ids3 == hf_ids, "ours with HF's tokenizer.json: " + first_difference(ids3, hf_ids)
    print("  HF's tokenizer.json loads in ours: same ids")

    # 4. ours in HF
    theirs = bpe_hf.load(f("ours.json"))
    ids4 = theirs.encode(text).ids
    assert ids4 == our_ids, "HF with our tokenizer.json: " + first_difference(ids4, our_ids)
    assert theirs.decode(ids4) == text, "HF does not decode our ids back to the corpus"
    print("  our tokenizer.json loads in HF: same ids, decodes back to the corpus")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", choices=["small", "tinyshakespeare", "both"], default="both")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(BIN_DIR, "lesson11")):
        print(f"SKIP: {BIN_DIR}/lesson11 is not built (cmake --build build/release --target lesson11)")
        return 0
    with tempfile.TemporaryDirectory(prefix="nnlab-bpe-hf-") as tmp:
        if args.corpus in ("small", "both"):
            path = os.path.join(tmp, "small.txt")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(small_corpus())
            check_corpus("small", path, tmp)
        if args.corpus in ("tinyshakespeare", "both"):
            path = find_tinyshakespeare()
            if path is None:
                print("SKIP: Tiny Shakespeare not found (python3 scripts/fetch_data.py tinyshakespeare)")
                return 0
            check_corpus("tinyshakespeare", path, tmp)
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
