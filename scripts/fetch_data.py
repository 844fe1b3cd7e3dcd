#!/usr/bin/env python3
"""scripts/fetch_data.py: download a dataset nnlab uses, checking every file's MD5.

    python3 scripts/fetch_data.py fashion-mnist            into <repo>/data/fashion-mnist
    python3 scripts/fetch_data.py mnist --dir /tmp/data    into /tmp/data/mnist
    python3 scripts/fetch_data.py mnist --base-url URL     from a mirror (http://, https://, file://)
    python3 scripts/fetch_data.py tinyshakespeare          into <repo>/data/tinyshakespeare/input.txt

Each file is downloaded to <file>.part, its MD5 checked against the table below, and only
then renamed to <file>: an interrupted or corrupt download never looks like a finished
one. Files already present with the right checksum are skipped. Any failure (no network,
a missing file on the server, a checksum mismatch) prints what went wrong, removes the
partial file, and exits with status 1.

Fashion-MNIST needs no download on Debian/Ubuntu: `sudo apt-get install
dataset-fashion-mnist` puts it in /usr/share/datasets/fashion-mnist, where nnlab looks.
Debian's package ships the same images recompressed, so its .gz files have other
checksums than the upstream ones below; nnlab's IDX reader validates the content either
way (magic, sizes, exact length), so both are fine to use.

Tiny Shakespeare (lessons 05-06, character models) keeps its upstream name, input.txt, in
data/tinyshakespeare/, which is one of the places nn::load_corpus looks (io/text.h). A
copy named tinyshakespeare.txt directly in a data folder ($NNLAB_DATA, data/) is found
too. Without it the lessons train on the licence texts in /usr/share/common-licenses
instead, and say so.

Python 3 standard library only.
"""

import argparse
import hashlib
import os
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# One entry per dataset: where it lives upstream, its files and their MD5s, and a hint
# for when the download fails. To add a dataset, add an entry (files may be any format:
# the script only downloads and checks them).
DATASETS = {
    "fashion-mnist": {
        "base_url": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
        "files": {
            "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
            "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
            "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
            "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
        },
        "offline_hint": "on Debian/Ubuntu, install it instead: sudo apt-get install dataset-fashion-mnist "
                        "(no download needed; nnlab finds it in /usr/share/datasets/fashion-mnist)",
    },
    "mnist": {
        "base_url": "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "files": {
            "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
            "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
            "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
            "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
        },
        "offline_hint": "check your network, or copy the four files from another machine into {dest}",
    },
    # Karpathy's char-rnn corpus: 1115394 bytes, SHA-256
    # 86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed.
    "tinyshakespeare": {
        "base_url": "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/",
        "files": {
            "input.txt": "6fb458f1232090904fb40fe944165e91",
        },
        "offline_hint": "check your network, or copy input.txt (1115394 bytes) from another machine into "
                        "{dest}. Until then, lessons 05-06 fall back to the Debian licence texts in "
                        "/usr/share/common-licenses (and say so)",
    },
}

CHUNK = 1 << 20  # read and hash 1 MiB at a time


class FetchError(Exception):
    """A failure the user can act on; main() prints it and exits 1."""


def md5_of(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def download(url, part, timeout):
    """Streams url into part; returns (bytes, md5). Raises FetchError on any failure."""
    h = hashlib.md5()
    size = 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(part, "wb") as out:
            for block in iter(lambda: response.read(CHUNK), b""):
                out.write(block)
                h.update(block)
                size += len(block)
    except urllib.error.HTTPError as e:
        raise FetchError(f"{url}: the server answered HTTP {e.code} {e.reason}") from e
    except urllib.error.URLError as e:
        raise FetchError(f"{url}: cannot download it ({e.reason})") from e
    except (socket.timeout, TimeoutError) as e:
        raise FetchError(f"{url}: no answer within {timeout} s (timed out)") from e
    except OSError as e:
        raise FetchError(f"{url}: {e}") from e
    return size, h.hexdigest()


def fetch_file(name, md5, base_url, dest, timeout):
    """Makes dest/name exist with the right MD5. Returns True if it downloaded."""
    target = dest / name
    if target.is_file():
        got = md5_of(target)
        if got == md5:
            print(f"  {name}: already present, checksum ok")
            return False
        print(f"  {name}: present but its MD5 is {got}, expected {md5}: downloading it again")

    url = base_url + name
    part = dest / (name + ".part")
    print(f"  {name}: downloading {url}", flush=True)
    try:
        size, got = download(url, part, timeout)
        if got != md5:
            raise FetchError(
                f"{name}: checksum mismatch: MD5 of the download is {got}, expected {md5} "
                f"({size} bytes from {url}). The download is corrupt or the mirror serves "
                f"other files: try again, or another --base-url")
        os.replace(part, target)  # atomic: target is either absent/old or complete
    finally:
        if part.exists():
            part.unlink()
    print(f"  {name}: {size / 1e6:.1f} MB, checksum ok")
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Download a dataset for nnlab and verify its checksums.")
    parser.add_argument("dataset", choices=sorted(DATASETS), help="which dataset")
    parser.add_argument("--dir", default=str(REPO / "data"),
                        help="data root; files go into DIR/<dataset> (default: %(default)s)")
    parser.add_argument("--base-url", default=None,
                        help="download from this URL prefix instead of the upstream one "
                             "(http://, https:// or file:// ending in /)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds to wait for the server before giving up (default: %(default)s)")
    args = parser.parse_args(argv)

    spec = DATASETS[args.dataset]
    base_url = args.base_url or spec["base_url"]
    if not base_url.endswith("/"):
        base_url += "/"
    dest = Path(args.dir) / args.dataset
    created = not dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    print(f"{args.dataset} -> {dest}")

    try:
        for name, md5 in spec["files"].items():
            fetch_file(name, md5, base_url, dest, args.timeout)
    except (FetchError, OSError, KeyboardInterrupt) as e:
        # Leave no empty directory behind that could look like a dataset location.
        if created and not any(dest.iterdir()):
            dest.rmdir()
        if isinstance(e, KeyboardInterrupt):
            print("\ninterrupted: partial file removed", file=sys.stderr)
            return 1
        print(f"error: {e}", file=sys.stderr)
        print("hint: " + spec["offline_hint"].format(dest=dest), file=sys.stderr)
        return 1
    print(f"done: {args.dataset} is in {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
