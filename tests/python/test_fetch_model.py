#!/usr/bin/env python3
"""scripts/fetch_model.py offline: a local HTTP server on 127.0.0.1 serves fake model files at
the hub's URL layout (/<repo>/resolve/<revision>/<file>, with HTTP Range support), and a pin
table (--pins) names their hashes. Checked:
  - a good file is fetched, verified and renamed (no .part left); a second run skips it;
  - a corrupted file (bytes other than the pinned hash) fails with status 1 and is deleted;
  - an interrupted download (a .part holding the first half) resumes with a Range request;
  - a present file with the wrong bytes is downloaded again;
  - unpinned files are refused without --allow-unpinned, fetched with it (printing the hash),
    and --revision other than the pinned one makes every file unpinned;
  - no server (a closed port) gives the offline message and status 2;
  - the built-in table: every revision 40 hex digits, every SHA-256 64, the three models of
    lesson 12 present with the files the loader needs.
Standard library only.
"""

import hashlib
import http.server
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "fetch_model.py"
REPO_ID = "org/tiny-model"
REV = "0123456789abcdef0123456789abcdef01234567"

FILES = {
    "config.json": b'{"model_type": "gpt2"}\n',
    "model.safetensors": bytes(range(256)) * 64,  # 16 KiB
    "tokenizer.json": b'{"model": {}}\n',
    "bad.bin": b"these bytes are not what the pin says\n",
    "extra.txt": b"unpinned but served\n",
}


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Handler(http.server.BaseHTTPRequestHandler):
    requests = []  # (path, range header)

    def log_message(self, *a):
        pass

    def do_GET(self):
        Handler.requests.append((self.path, self.headers.get("Range")))
        m = re.fullmatch(r"/(.+)/resolve/([0-9a-f]+)/(.+)", self.path)
        if not m or m.group(1) != REPO_ID or m.group(3) not in FILES:
            self.send_error(404)
            return
        body = FILES[m.group(3)]
        rng = self.headers.get("Range")
        start = 0
        if rng:
            start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1))
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        self.wfile.write(body[start:])


def run(args, check_rc=None):
    # the local server is reached directly, whatever proxy the environment names
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    r = subprocess.run([sys.executable, str(SCRIPT)] + args, capture_output=True, text=True, timeout=120, env=env)
    if check_rc is not None and r.returncode != check_rc:
        raise AssertionError(f"fetch_model.py {' '.join(args)}: status {r.returncode}, expected {check_rc}\n"
                             f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def main():
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    # the built-in table
    spec = importlib.util.spec_from_file_location("fetch_model", SCRIPT)
    fm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fm)
    for key, m in fm.PINS.items():
        check(re.fullmatch(r"[0-9a-f]{40}", m["revision"]) is not None, f"{key}: revision is a full commit")
        for fname, pin in m["files"].items():
            check(re.fullmatch(r"[0-9a-f]{64}", pin["sha256"]) is not None, f"{key}/{fname}: a SHA-256")
        for need in ("config.json", "model.safetensors", "tokenizer.json"):
            check(need in m["files"], f"{key}: {need} pinned (the loader needs it)")
    for key in ("gpt2", "gpt2-medium", "smollm-135m"):
        check(key in fm.PINS, f"{key} in the table")

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = srv.server_address[1]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{port}"

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pins = {
            "tiny": {
                "repo": REPO_ID,
                "revision": REV,
                "files": {
                    "config.json": {"sha256": sha(FILES["config.json"]), "bytes": len(FILES["config.json"])},
                    "model.safetensors": {"sha256": sha(FILES["model.safetensors"]), "bytes": None},
                    "tokenizer.json": {"sha256": sha(FILES["tokenizer.json"]), "bytes": None},
                    "bad.bin": {"sha256": sha(b"the real bytes"), "bytes": None},
                },
                "unpinned": ["extra.txt"],
            }
        }
        pins_file = tmp / "pins.json"
        pins_file.write_text(json.dumps(pins))
        common = ["--pins", str(pins_file), "--base-url", base, "--timeout", "10"]

        # good files
        out = tmp / "good"
        r = run(["tiny", "--out", str(out), "--files", "config.json,model.safetensors,tokenizer.json"] + common, 0)
        for f in ("config.json", "model.safetensors", "tokenizer.json"):
            check((out / f).read_bytes() == FILES[f], f"good: {f} fetched with the served bytes")
        check(not list(out.glob("*.part")), "good: no .part file left")
        check(f"/{REPO_ID}/resolve/{REV}/config.json" in [p for p, _ in Handler.requests],
              "good: the URL is <repo>/resolve/<revision>/<file>")
        n = len(Handler.requests)
        r = run(["tiny", "--out", str(out), "--files", "config.json,model.safetensors,tokenizer.json"] + common, 0)
        check(len(Handler.requests) == n and "present, verified" in r.stdout, "good: a second run skips verified files")

        # corrupted
        r = run(["tiny", "--out", str(out), "--files", "bad.bin"] + common, 1)
        check("is not the pinned" in r.stderr, "corrupted: the mismatch is reported")
        check(not (out / "bad.bin").exists() and not (out / "bad.bin.part").exists(),
              "corrupted: the file is deleted (neither bad.bin nor bad.bin.part)")

        # resume
        out2 = tmp / "resume"
        out2.mkdir()
        half = len(FILES["model.safetensors"]) // 2
        (out2 / "model.safetensors.part").write_bytes(FILES["model.safetensors"][:half])
        Handler.requests.clear()
        r = run(["tiny", "--out", str(out2), "--files", "model.safetensors"] + common, 0)
        check((out2 / "model.safetensors").read_bytes() == FILES["model.safetensors"], "resume: complete and verified")
        check(Handler.requests and Handler.requests[-1][1] == f"bytes={half}-", "resume: continued with a Range request")

        # a present file with other bytes is fetched again
        (out2 / "config.json").write_bytes(b"stale")
        r = run(["tiny", "--out", str(out2), "--files", "config.json"] + common, 0)
        check((out2 / "config.json").read_bytes() == FILES["config.json"], "stale: a wrong present file is replaced")

        # unpinned
        r = run(["tiny", "--out", str(out2), "--files", "extra.txt"] + common, 1)
        check("--allow-unpinned" in r.stderr and not (out2 / "extra.txt").exists(), "unpinned: refused by default")
        r = run(["tiny", "--out", str(out2), "--files", "extra.txt", "--allow-unpinned"] + common, 0)
        check(sha(FILES["extra.txt"]) in r.stdout and (out2 / "extra.txt").exists(),
              "unpinned: fetched with --allow-unpinned, its hash printed")
        r = run(["tiny", "--out", str(tmp / "rev"), "--revision", "f" * 40, "--files", "config.json"] + common, 1)
        check("is not the pinned" in r.stderr or "refusing" in r.stderr, "another --revision: files are unpinned")
        r = run(["tiny", "--out", str(tmp / "all")] + common, 1)  # every file: bad.bin fails, extra.txt skipped
        check("skipping unpinned files" in r.stdout, "the whole model: unpinned files skipped with a note")

    srv.shutdown()
    srv.server_close()

    # offline: a port nothing listens on
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "p.json"
        p.write_text(json.dumps({"tiny": {"repo": REPO_ID, "revision": REV,
                                          "files": {"config.json": {"sha256": "0" * 64, "bytes": None}}}}))
        r = run(["tiny", "--out", str(Path(tmp) / "o"), "--pins", str(p), "--base-url", f"http://127.0.0.1:{dead}",
                 "--timeout", "5"], 2)
        check("offline" in r.stderr and "nothing else in nnlab downloads" in r.stderr,
              "offline: no server gives the offline message and status 2")
        check(not list((Path(tmp) / "o").glob("*")), "offline: nothing written")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all fetch_model.py checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
