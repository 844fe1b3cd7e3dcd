#!/usr/bin/env python3
"""scripts/bpe_hf.py: Hugging Face `tokenizers` set up as nnlab's byte-level BPE (io/bpe.h),
the reference it is checked against (tests/python/test_bpe_hf.py) and timed beside
(scripts/bench_bpe.py).

    .venv/bin/python scripts/bpe_hf.py train  CORPUS VOCAB_SIZE OUT.json [--special S ...]
    .venv/bin/python scripts/bpe_hf.py encode TOKENIZER.json CORPUS OUT_IDS.json
    .venv/bin/python scripts/bpe_hf.py bench  TOKENIZER.json CORPUS [--repeats N] [--mode whole|lines]

`tokenizers` is pinned in scripts/requirements-hf.txt; scripts/setup.sh installs it into
<repo>/.venv. Without it: exit status 3 and the command to install it.

The settings that make HF's BpeTrainer the textbook algorithm (and ours):
  - pre_tokenizer ByteLevel(add_prefix_space=False, use_regex=True): GPT-2's regex, no space
    added before the text (the default, True, would turn "Hello" into " Hello");
  - initial_alphabet = ByteLevel.alphabet(): all 256 byte characters are tokens whether or
    not the corpus has them (any input encodes); limit_alphabet unset;
  - min_frequency=0 (a merge needs only a count >= 1, as in the textbook loop; training
    stops when no pair is left), no continuing_subword_prefix / end_of_word_suffix, no
    max_token_length;
  - the corpus is given as ONE string (train_from_iterator([text])), not as a file: train()
    on a file pre-tokenises line by line, and the regex's \\s+(?!\\S) branch cuts "  \\n"
    differently at a line end than inside the text;
  - ties (pairs of equal count): HF's trainer takes the pair with the smallest (left id,
    right id), ids numbered specials first, then the 256 byte characters sorted by code
    point, then merges in order. Ours does the same (io/bpe.h); nothing else was needed.
  - a merge whose result string already is a token reuses its id (the vocab does not grow).
Training is deterministic: word counting runs on rayon threads, but the merge choice
depends only on the counts and that tie-break.
"""

import argparse
import json
import os
import statistics
import sys
import time

INSTALL_HINT = ("python3 -m venv --system-site-packages .venv && "
                ".venv/bin/pip install --require-hashes -r scripts/requirements-hf.txt   (or: bash scripts/setup.sh)")


def import_tokenizers():
    # One thread: the speed comparison is per core, and results must not depend on it.
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print(f"bpe_hf.py: Hugging Face tokenizers is not installed; install it with:\n  {INSTALL_HINT}", file=sys.stderr)
        sys.exit(3)
    return tokenizers


def read_corpus(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")  # HF takes str: the corpus must be valid UTF-8


def train(corpus, vocab_size, specials):
    tk = import_tokenizers()
    from tokenizers import decoders, models, pre_tokenizers, trainers
    tok = tk.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=0, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([corpus], trainer=trainer)
    return tok


def load(path):
    tk = import_tokenizers()
    return tk.Tokenizer.from_file(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("corpus")
    t.add_argument("vocab_size", type=int)
    t.add_argument("out")
    t.add_argument("--special", action="append", default=[])
    e = sub.add_parser("encode")
    e.add_argument("tokenizer")
    e.add_argument("corpus")
    e.add_argument("out")
    b = sub.add_parser("bench")
    b.add_argument("tokenizer")
    b.add_argument("corpus")
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--mode", choices=["whole", "lines"], default="whole",
                   help="whole: encode(corpus) as one string (what ours does); lines: encode_batch of its "
                        "lines (how HF is usually fed; one thread here)")
    args = ap.parse_args()

    if args.cmd == "train":
        t0 = time.perf_counter()
        tok = train(read_corpus(args.corpus), args.vocab_size, args.special)
        print(f"trained: {tok.get_vocab_size()} tokens in {time.perf_counter() - t0:.3f} s")
        tok.save(args.out)
    elif args.cmd == "encode":
        ids = load(args.tokenizer).encode(read_corpus(args.corpus)).ids
        with open(args.out, "w") as f:
            json.dump(ids, f)
        print(f"encoded: {len(ids)} tokens")
    else:
        tok = load(args.tokenizer)
        text = read_corpus(args.corpus)
        lines = text.splitlines(keepends=True)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            if args.mode == "whole":
                n = len(tok.encode(text).ids)
            else:
                n = sum(len(e.ids) for e in tok.encode_batch(lines))
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        nbytes = len(text.encode("utf-8"))
        print(f"{args.mode}: {n} tokens; {med:.4f} s median of {args.repeats} ({nbytes / 1e6 / med:.2f} MB/s, one thread)")
        print(f"BPE_ENCODE_SECONDS {med:.6f}")


if __name__ == "__main__":
    main()
