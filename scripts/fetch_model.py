#!/usr/bin/env python3
"""scripts/fetch_model.py: download a model directory from the Hugging Face hub, every file
checked against a pinned SHA-256 (lesson 12).

    python3 scripts/fetch_model.py gpt2                     into <repo>/models/gpt2
    python3 scripts/fetch_model.py gpt2-medium --out DIR    into DIR
    python3 scripts/fetch_model.py HuggingFaceTB/SmolLM-135M   (or: smollm-135m)
    python3 scripts/fetch_model.py --list                   the models and their pins

Then the programs read the directory, offline: `nnlab generate --model models/gpt2 ...`.
This script is the ONLY part of nnlab that downloads a model; nothing downloads at run time.

What it guarantees:
  - the revision is PINNED (a commit of the hub repository, not "main"), so the same
    command gets the same bytes next year;
  - every file is fetched over HTTPS from
        https://huggingface.co/<repo>/resolve/<revision>/<file>
    into <file>.part, its SHA-256 compared with the table below, and only then renamed to
    <file>: an interrupted or corrupt download never looks like a finished one. A hash
    mismatch deletes the .part file and fails;
  - an interrupted download resumes: a .part file left behind is continued with an HTTP
    Range request (a server that ignores Range sends the whole file again);
  - a file already present with the right hash is skipped;
  - no network: it says so, and what to do, and exits with status 2.

Where the pins come from. Each SHA-256 below is stated by at least one public source (their
repositories' pin tables, quoted in PINS' "source" fields); this script's author could not
download the files to hash them. A file no public source gave a hash for is listed as
UNPINNED: it is refused unless you pass --allow-unpinned, which downloads it anyway and
prints the hash it got (check it and add it here). The loader (gpt/hf.h) needs config.json,
model.safetensors and tokenizer.json, all pinned for the three models.

--revision REV fetches another revision: the pins then do not apply, so every file is
unpinned and needs --allow-unpinned. --pins FILE reads the table from a JSON file of the
same shape instead (a model not listed here; the offline tests use it). --base-url replaces
https://huggingface.co (a mirror; the tests' local server).

Exit status: 0 all files verified; 1 a file failed (hash mismatch, HTTP error, refused
unpinned file); 2 no network. Python 3 standard library only.
"""

import argparse
import hashlib
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HUB = "https://huggingface.co"

# The table. "files": name -> {"sha256", "bytes" (or None when no source gave it)};
# "unpinned": files the repository has whose hash no source stated (fetched only with
# --allow-unpinned). Sources are repositories found with a code search, quoted so a reader
# can check them.
_GPT2_SRC = ("ALLPROTO/core-lm-cross-model-lab blind_v1/model-assets.draft.json (config, model, tokenizer.json, "
             "with bytes); the GPT-2 pin tables of several other repositories (every file of this revision, "
             "e.g. 'GPT2 = {model_id: gpt2, revision: 607a30d7..., files_sha256: ...}')")
PINS = {
    "gpt2": {
        "repo": "openai-community/gpt2",
        "revision": "607a30d783dfa663caf39e06633721c8d4cfcd7e",
        "source": _GPT2_SRC,
        "files": {
            "config.json": {"sha256": "0daed7749b4f02b8f76240d5444551d7b08712dab4d0adb8239c56ba823bb7b4", "bytes": 665},
            "generation_config.json": {"sha256": "ed0b32ac72c0f5f44a719abb2d7786ea5146c871f83717b7f2018065954de02b",
                                       "bytes": None},
            "model.safetensors": {"sha256": "248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707",
                                  "bytes": 548105171},
            "tokenizer.json": {"sha256": "8414cab924d8b9b33013f0d221c5862f365ee9be39c5c2bfae8a5a9e970478a6",
                               "bytes": 1355256},
            "tokenizer_config.json": {"sha256": "5e04eb606e3a1583530a42e36c2a6b6615c86f34fe77e44d9ddeb43ff940931f",
                                      "bytes": 26},
            "vocab.json": {"sha256": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783", "bytes": 1042301},
            "merges.txt": {"sha256": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", "bytes": 456318},
        },
        "unpinned": [],
    },
    "gpt2-medium": {
        "repo": "openai-community/gpt2-medium",
        "revision": "6dcaa7a952f72f9298047fd5137cd6e4f05f41da",
        "source": "ALLPROTO/core-lm-cross-model-lab models.json (every file, with bytes)",
        "files": {
            "config.json": {"sha256": "ef1a44d889ad1a0acc7731c78134f1b87d2d222f110e97dd10fd4117331caf22", "bytes": 718},
            "generation_config.json": {"sha256": "b90eadacf585a743a30ea51e8b5c88b8d282a2a34dc0c7e556d0987cdbd68805",
                                       "bytes": 124},
            "model.safetensors": {"sha256": "fc5a354a19255ad494f3d71549390baca1ccf61d1d822b9408971705c687c9cd",
                                  "bytes": 1519984962},
            "tokenizer.json": {"sha256": "8414cab924d8b9b33013f0d221c5862f365ee9be39c5c2bfae8a5a9e970478a6",
                               "bytes": 1355256},
            "tokenizer_config.json": {"sha256": "5e04eb606e3a1583530a42e36c2a6b6615c86f34fe77e44d9ddeb43ff940931f",
                                      "bytes": 26},
            "vocab.json": {"sha256": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783", "bytes": 1042301},
            "merges.txt": {"sha256": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", "bytes": 456318},
        },
        "unpinned": [],
    },
    "smollm-135m": {
        "repo": "HuggingFaceTB/SmolLM-135M",
        "revision": "1d461723eec654e65efdc40cf49301c89c0c92f4",
        "source": ("ALLPROTO/core-lm-cross-model-lab blind_v1/model-assets.draft.json (config, model, tokenizer.json, "
                   "with bytes); the model's hash also in other repositories' download scripts"),
        "files": {
            "config.json": {"sha256": "a1fe6f43e20f7a6c6dbc6380222af9526b5cef262446391a281c038249e3e3b7", "bytes": 724},
            "model.safetensors": {"sha256": "c7a387d6fe81ca6dd304aeb809bda3932ff1bbef3ca41c9484502f2f448dc093",
                                  "bytes": 538090408},
            "tokenizer.json": {"sha256": "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c",
                               "bytes": 2104556},
        },
        # in the repository, but no public source stated their hashes: not needed to load
        "unpinned": ["generation_config.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                     "merges.txt"],
    },
}
ALIASES = {
    "openai-community/gpt2": "gpt2",
    "openai-community/gpt2-medium": "gpt2-medium",
    "HuggingFaceTB/SmolLM-135M": "smollm-135m",
    "SmolLM-135M": "smollm-135m",
}


class Offline(Exception):
    pass


class Failed(Exception):
    pass


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def offline_message(base_url, why):
    return (f"cannot reach {base_url} ({why}): this machine looks offline.\n"
            "fetch_model.py needs the network once, to download the model; nothing else in nnlab downloads.\n"
            "  - run the same command on a machine that is online and copy the directory here (the files are\n"
            "    checked against the same hashes when you run this script again: already-verified files are kept);\n"
            "  - or, behind a proxy, set https_proxy / HTTPS_PROXY;\n"
            "  - without real weights, lesson 12 runs every measurement on random-initialised models of the same\n"
            "    shapes (lesson12 --part speed).")


def is_network_error(reason):
    # name resolution, refused or reset connections, timeouts: no network (a TLS certificate
    # problem is an OSError too, but not "offline": it is reported as it is)
    return isinstance(reason, OSError) and not isinstance(reason, ssl.SSLError)


def download(url, part, timeout, base_url, log):
    """Fetches url into part, continuing a partial part file with a Range request."""
    have = part.stat().st_size if part.exists() else 0
    req = urllib.request.Request(url, headers={"User-Agent": "nnlab-fetch_model/1"})
    if have > 0:
        req.add_header("Range", f"bytes={have}-")
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have > 0:  # the part file is already complete (or longer than the file)
            return
        raise Failed(f"{url}: HTTP {e.code} {e.reason}")
    except urllib.error.URLError as e:
        if is_network_error(e.reason):
            raise Offline(offline_message(base_url, e.reason))
        raise Failed(f"{url}: {e.reason}")
    except (socket.timeout, TimeoutError, ConnectionError) as e:
        raise Offline(offline_message(base_url, e))
    with resp:
        status = getattr(resp, "status", 200)
        mode = "ab" if (have > 0 and status == 206) else "wb"
        if have > 0:
            log(f"  resuming at {have} bytes" if mode == "ab" else "  the server ignored the Range: starting again")
        try:
            with open(part, mode) as f:
                while True:
                    block = resp.read(1 << 20)
                    if not block:
                        break
                    f.write(block)
        except (socket.timeout, TimeoutError, ConnectionError) as e:
            raise Offline(offline_message(base_url, e) + f"\n(the partial file {part} is kept: run again to resume)")


def fetch_file(name, pin, repo, revision, out, base_url, timeout, log):
    """One file: skip if present and verified; else download to .part, verify, rename.
    pin is {"sha256", "bytes"} or None (unpinned: the caller allowed it). Returns the hash."""
    final = out / name
    part = out / (name + ".part")
    url = f"{base_url}/{repo}/resolve/{revision}/{name}"
    if final.exists():
        got = sha256_of(final)
        if pin is None or got == pin["sha256"]:
            log(f"  {name}: present, {'verified' if pin else 'UNPINNED, sha256 ' + got}")
            return got
        log(f"  {name}: present but its sha256 {got} is not the pinned {pin['sha256']}: downloading again")
        final.unlink()
    log(f"  {name}: {url}")
    download(url, part, timeout, base_url, log)
    got = sha256_of(part)
    size = part.stat().st_size
    if pin is not None:
        if got != pin["sha256"] or (pin.get("bytes") is not None and size != pin["bytes"]):
            part.unlink()
            raise Failed(f"{name}: sha256 {got} ({size} bytes) is not the pinned {pin['sha256']}"
                         + (f" ({pin['bytes']} bytes)" if pin.get("bytes") is not None else "")
                         + ": the file was deleted. A corrupted download, or the server sent other bytes.")
    os.replace(part, final)
    log(f"  {name}: {size} bytes, " + ("sha256 verified" if pin else f"UNPINNED, sha256 {got} (check it and pin it)"))
    return got


def resolve_name(name, pins):
    key = ALIASES.get(name, name)
    if key not in pins:
        for k, v in pins.items():
            if v["repo"] == name:
                return k
        raise Failed(f"unknown model '{name}': known are {', '.join(sorted(pins))} "
                     "(or a JSON table of your own with --pins)")
    return key


def main(argv=None):
    p = argparse.ArgumentParser(description="Download a Hugging Face model directory, SHA-256 pinned.")
    p.add_argument("name", nargs="?", help="gpt2, gpt2-medium, smollm-135m (or their hub names)")
    p.add_argument("--out", help="the directory (default <repo>/models/<name>)")
    p.add_argument("--revision", help="another revision than the pinned one (its files are then unpinned)")
    p.add_argument("--allow-unpinned", action="store_true",
                   help="also fetch files no public source gave a hash for, printing the hash they have")
    p.add_argument("--files", help="comma-separated subset of the files")
    p.add_argument("--pins", help="a JSON pin table (same shape as PINS) instead of the built-in one")
    p.add_argument("--base-url", default=HUB, help="the hub (default %(default)s)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per network operation")
    p.add_argument("--list", action="store_true", help="print the models, revisions and pins")
    args = p.parse_args(argv)

    pins = PINS
    if args.pins:
        with open(args.pins) as f:
            pins = json.load(f)
    if args.list:
        for key, m in pins.items():
            print(f"{key}: {m['repo']} @ {m['revision']}")
            for fname, pin in m["files"].items():
                print(f"  {fname:24s} {pin['sha256']}  {pin.get('bytes') or '?'} bytes")
            for fname in m.get("unpinned", []):
                print(f"  {fname:24s} UNPINNED (no public source gave its hash)")
        return 0
    if not args.name:
        p.error("name a model (or --list)")

    def log(msg):
        print(msg, flush=True)

    try:
        key = resolve_name(args.name, pins)
        m = pins[key]
        revision = args.revision or m["revision"]
        pinned = dict(m["files"]) if revision == m["revision"] else {}
        names = list(m["files"]) + list(m.get("unpinned", []))
        if args.files:
            names = [n.strip() for n in args.files.split(",") if n.strip()]
        out = Path(args.out) if args.out else REPO / "models" / key
        out.mkdir(parents=True, exist_ok=True)
        unpinned = [n for n in names if n not in pinned]
        if unpinned and not args.allow_unpinned:
            why = (f"revision {revision} is not the pinned {m['revision']}" if revision != m["revision"]
                   else "no public source gave their SHA-256")
            skipped = ", ".join(unpinned)
            if len(unpinned) == len(names) or args.files:
                raise Failed(f"refusing unpinned files ({why}): {skipped}. Pass --allow-unpinned to fetch them and "
                             "print the hash each has.")
            log(f"skipping unpinned files ({why}): {skipped} (--allow-unpinned fetches them)")
            names = [n for n in names if n in pinned]
        log(f"{m['repo']} @ {revision} -> {out}")
        for name in names:
            fetch_file(name, pinned.get(name), m["repo"], revision, out, args.base_url.rstrip("/"), args.timeout, log)
        log(f"done: {len(names)} files in {out}" + (" (all verified)" if all(n in pinned for n in names) else ""))
        return 0
    except Offline as e:
        print(f"fetch_model.py: {e}", file=sys.stderr)
        return 2
    except Failed as e:
        print(f"fetch_model.py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
