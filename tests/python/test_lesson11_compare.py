#!/usr/bin/env python3
"""Smoke test of `lesson11 --part compare` at tiny sizes (seconds).

Runs the part twice on a small text this script writes (so it needs no corpus download), with
a fixed number of steps (--iters: no timing in the result), on 1 and on 2 threads, and checks:
  - the JSON record has the schema the notebook reads (docs/benchmarks/lesson11-compare.json):
    machine, budget, runs[name, seed, params, tokens_per_s, train_bytes, final_val_bpc,
    curve[step, seconds, val_bpc]], one run per model per seed;
  - bits per character is normalised right: at step 0 a freshly initialised model predicts
    about uniformly, so its loss is ~ln V nats per token, i.e. log2(V) * tokens / bytes bits
    per character, for the character model and for the BPE models alike;
  - every model scored the same validation bytes, and the figures are finite and positive;
  - 1 and 2 threads give bit-identical losses (the course's determinism rule), so the same
    final bpc and curves;
  - the markdown record was written, with its computed conclusion.
Standard library only. Exit 0 on success, 1 with the reasons on failure.
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

BIN_DIR = os.environ.get("NNLAB_BIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "release", "bin"))
MODELS = ["char-gpt2", "bpe-gpt2", "bpe-llama"]
RUN_KEYS = {"name": str, "seed": int, "params": int, "tokens_per_s": (int, float), "train_bytes": int,
            "final_val_bpc": (int, float), "curve": list}
POINT_KEYS = {"step": int, "seconds": (int, float), "val_bpc": (int, float)}


def write_corpus(path):
    # a made-up English-like text: words from a fixed list, seeded, in lines and sentences
    words = ("the king and queen of england shall come to the castle tonight with all their men "
             "but what is this that i hear from thee my lord it is nothing but the wind upon the sea").split()
    rng = random.Random(11)
    lines = []
    while sum(len(l) + 1 for l in lines) < 40000:
        n = rng.randint(4, 12)
        line = " ".join(rng.choice(words) for _ in range(n))
        lines.append(line[0].upper() + line[1:] + rng.choice([".", ",", "?", "!", ";"]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def run(corpus, out_dir, threads):
    js = os.path.join(out_dir, f"compare-{threads}.json")
    md = os.path.join(out_dir, f"compare-{threads}.md")
    cmd = [os.path.join(BIN_DIR, "lesson11"), "--part", "compare", "--data", corpus, "--vocab-size", "320",
           "--iters", "4", "--seeds", "1,2", "--n-layer", "1", "--n-head", "2", "--n-embd", "32",
           "--char-context", "32", "--batch-size", "4", "--val-bytes", "1500", "--curve-bytes", "0",
           "--curve-points", "2", "--compare-threads", str(threads), "--compare-json", js, "--compare-md", md]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    with open(js) as f:
        record = json.load(f)
    with open(md) as f:
        markdown = f.read()
    return record, markdown, p.stdout


def check_schema(record, errors):
    if not isinstance(record.get("machine"), str) or not record["machine"]:
        errors.append("machine is not a non-empty string")
    if not isinstance(record.get("budget"), dict):
        errors.append("budget is not an object")
    runs = record.get("runs")
    if not isinstance(runs, list):
        errors.append("runs is not a list")
        return
    got = sorted((r.get("name"), r.get("seed")) for r in runs)
    want = sorted((m, s) for m in MODELS for s in (1, 2))
    if got != want:
        errors.append(f"runs are {got}, expected one per model per seed: {want}")
    for r in runs:
        for key, typ in RUN_KEYS.items():
            if not isinstance(r.get(key), typ) or isinstance(r.get(key), bool):
                errors.append(f"{r.get('name')} seed {r.get('seed')}: '{key}' missing or not {typ}")
        for p in r.get("curve", []):
            for key, typ in POINT_KEYS.items():
                if not isinstance(p.get(key), typ):
                    errors.append(f"{r.get('name')}: a curve point's '{key}' missing or not {typ}")


def check_values(record, errors):
    budget = record["budget"]
    # every run scores the same validation text (val_text_bytes) but its first token, which is
    # only an input: one byte for the character model, one BPE token (a few bytes) for the others
    text_bytes = budget.get("val_text_bytes")
    if text_bytes != 1500:
        errors.append(f"budget's val_text_bytes is {text_bytes}, --val-bytes asked for 1500")
    for r in record["runs"]:
        scored = r.get("val_bytes_scored")
        if not isinstance(scored, int) or not text_bytes or not (text_bytes - 16 <= scored <= text_bytes - 1):
            errors.append(f"{r.get('name')} seed {r.get('seed')}: scored {scored} bytes of the {text_bytes} validated")
    for r in record["runs"]:
        name = f"{r['name']} seed {r['seed']}"
        if not (math.isfinite(r["final_val_bpc"]) and r["final_val_bpc"] > 0):
            errors.append(f"{name}: final_val_bpc {r['final_val_bpc']}")
        if r["params"] <= 0 or r["tokens_per_s"] <= 0 or r["train_bytes"] <= 0:
            errors.append(f"{name}: params {r['params']}, tokens/s {r['tokens_per_s']}, train_bytes {r['train_bytes']}")
        curve = r["curve"]
        if len(curve) < 2 or curve[0]["step"] != 0 or curve[-1]["step"] != r.get("steps") or r.get("steps") != 4:
            errors.append(f"{name}: curve steps {[p['step'] for p in curve]}, run steps {r.get('steps')} (want 0 .. 4)")
            continue
        if curve[-1]["val_bpc"] != r["final_val_bpc"]:
            errors.append(f"{name}: the curve's last point {curve[-1]['val_bpc']} is not the final figure {r['final_val_bpc']}")
        # at initialisation: ~ln V nats per token -> log2(V) * tokens / bytes bits per character
        V = r.get("vocab_size")
        tokens, nbytes = r.get("val_tokens_scored"), r.get("val_bytes_scored")
        if not (V and tokens and nbytes):
            errors.append(f"{name}: vocab_size / val_tokens_scored / val_bytes_scored missing")
            continue
        expect = math.log2(V) * tokens / nbytes
        if abs(curve[0]["val_bpc"] - expect) > 0.03 * expect:
            errors.append(f"{name}: bpc at step 0 is {curve[0]['val_bpc']:.4f}, uniform guessing gives {expect:.4f}"
                          " (log2 V x tokens / bytes): the normalisation is off")


def main():
    errors = []
    with tempfile.TemporaryDirectory(prefix="nnlab-compare-") as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        write_corpus(corpus)
        rec1, md1, _ = run(corpus, tmp, 1)
        rec2, md2, out2 = run(corpus, tmp, 2)
    check_schema(rec1, errors)
    if not errors:
        check_values(rec1, errors)
    if not errors:
        a = {(r["name"], r["seed"]): (r["final_val_bpc"], [p["val_bpc"] for p in r["curve"]]) for r in rec1["runs"]}
        b = {(r["name"], r["seed"]): (r["final_val_bpc"], [p["val_bpc"] for p in r["curve"]]) for r in rec2["runs"]}
        if a != b:
            errors.append(f"1 and 2 threads differ:\n  1: {a}\n  2: {b}")
    for needed in ("## Conclusion (computed from the numbers above)", "wins with", "What BPE buys",
                   "What the llama block buys"):
        if needed not in md1:
            errors.append(f"the markdown record lacks '{needed}'")
    if errors:
        print("FAIL:\n  " + "\n  ".join(errors))
        return 1
    print("ok: schema, bpc normalisation at step 0, same validation bytes, 1 vs 2 threads bit-identical")
    print(out2[-1500:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
