#!/usr/bin/env python3
"""One printable page with every lesson: the course handout.

    python3 scripts/make_handout.py                      # out/handout/nnlab-lessons.html
    python3 scripts/make_handout.py --out FILE --lessons 01 02 03

Reads README.md of each lessons/NN-*/ folder in order and writes ONE self-contained HTML
file: the figures are embedded (base64), links between lessons jump inside the page, links
to code name the file (the handout is read on paper or offline, away from the repository),
and each lesson starts on a new page when printed (the browser's Print -> Save as PDF makes
the PDF). Needs Python-Markdown (Debian: python3-markdown; scripts/setup.sh installs it).

A lesson text that references a missing image is an error (exit 1), not a blank in the
handout.
"""
import argparse
import base64
import html
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import markdown
except ImportError:  # pragma: no cover - tells the user what to install
    print(f"error: {sys.executable} cannot import markdown (Python-Markdown). On Debian: "
          "bash scripts/setup.sh (python3-markdown, for /usr/bin/python3); elsewhere: "
          f"{sys.executable} -m pip install markdown", file=sys.stderr)
    sys.exit(2)

CSS = """
body { font-family: Georgia, 'DejaVu Serif', serif; max-width: 46em; margin: 2em auto; padding: 0 1em;
       line-height: 1.45; color: #111; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h1.lesson { page-break-before: always; break-before: page; }
pre, code { font-family: 'DejaVu Sans Mono', Menlo, monospace; font-size: .86em; }
pre { background: #f4f4f4; padding: .6em; overflow-x: auto; white-space: pre-wrap; }
table { border-collapse: collapse; font-size: .9em; margin: .8em 0; }
th, td { border: 1px solid #bbb; padding: .25em .5em; vertical-align: top; }
img { max-width: 100%; }
.path { font-family: 'DejaVu Sans Mono', monospace; font-size: .86em; color: #333; }
nav li { margin: .15em 0; }
@media print { pre { page-break-inside: avoid; } a { color: #111; text-decoration: none; } }
"""


def lesson_folders(wanted):
    folders = sorted(d for d in os.listdir(os.path.join(ROOT, "lessons"))
                     if re.match(r"^\d\d-", d) and os.path.isfile(os.path.join(ROOT, "lessons", d, "README.md")))
    if wanted:
        unknown = [w for w in wanted if not any(f.startswith(w + "-") for f in folders)]
        if unknown:
            raise SystemExit(f"error: no lesson {', '.join(unknown)} (there are: {', '.join(f[:2] for f in folders)})")
        folders = [f for f in folders if f[:2] in wanted]
    return folders


def anchor(folder):
    return "lesson-" + folder[:2]


def embed_images(body, base, errors):
    """<img src="relative.png"> -> a data: URI; a missing file is recorded in errors."""
    def repl(m):
        src = html.unescape(m.group(2))
        if re.match(r"^[a-z]+:", src):
            return m.group(0)
        path = os.path.normpath(os.path.join(base, src))
        if not os.path.isfile(path):
            errors.append(f"{os.path.relpath(base, ROOT)}/README.md: image {src} does not exist")
            return m.group(0)
        kind = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}.get(
            os.path.splitext(path)[1].lower(), "application/octet-stream")
        with open(path, "rb") as f:
            data = base64.b64encode(f.read()).decode("ascii")
        return f'{m.group(1)}data:{kind};base64,{data}{m.group(3)}'
    return re.sub(r'(<img[^>]*?src=")([^"]+)(")', repl, body)


def rewrite_links(body, base, folders):
    """Links to another lesson's README jump inside the page; links to other local files
    become their repository path in monospace (there is no repository on paper)."""
    def repl(m):
        href, text = html.unescape(m.group(1)), m.group(2)
        if re.match(r"^[a-z]+:", href) or href.startswith("#"):
            return m.group(0)
        path = os.path.normpath(os.path.join(base, href.split("#")[0]))
        rel = os.path.relpath(path, ROOT)
        for folder in folders:
            if rel == os.path.join("lessons", folder, "README.md") or rel == os.path.join("lessons", folder):
                return f'<a href="#{anchor(folder)}">{text}</a>'
        return f'{text} <span class="path">[{html.escape(rel)}]</span>' if text.strip() != html.escape(rel) else \
            f'<span class="path">{text}</span>'
    return re.sub(r'<a href="([^"]+)">(.*?)</a>', repl, body, flags=re.S)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "out", "handout", "nnlab-lessons.html"))
    ap.add_argument("--lessons", nargs="*", help="lesson numbers (default: all)")
    args = ap.parse_args()

    folders = lesson_folders(args.lessons)
    errors = []
    parts, toc = [], []
    for folder in folders:
        base = os.path.join(ROOT, "lessons", folder)
        with open(os.path.join(base, "README.md"), encoding="utf-8") as f:
            text = f.read()
        md = markdown.Markdown(extensions=["tables", "fenced_code", "sane_lists"])
        body = md.convert(text)
        body = embed_images(body, base, errors)
        body = rewrite_links(body, base, folders)
        # The lesson's first heading carries the anchor and the page break.
        body = re.sub(r"^<h1>", f'<h1 class="lesson" id="{anchor(folder)}">', body, count=1)
        title = re.search(r"^#\s+(.*)$", text, re.M)
        toc.append(f'<li><a href="#{anchor(folder)}">{html.escape(title.group(1) if title else folder)}</a></li>')
        parts.append(f"<section>{body}</section>")
    if errors:
        print("error: the handout would have holes:\n  " + "\n  ".join(errors), file=sys.stderr)
        return 1

    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>nnlab: the lessons</title><style>{CSS}</style></head><body>\n"
            f"<h1>nnlab: neural networks from scratch, the lessons</h1>\n"
            f"<p>Made by <code>python3 scripts/make_handout.py</code> from lessons/*/README.md. "
            f"Print it (each lesson starts a new page) or save it as PDF from the browser.</p>\n"
            f"<nav><ol>{''.join(toc)}</ol></nav>\n" + "\n".join(parts) + "\n</body></html>\n")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(page)
    print(f"wrote {args.out}: {len(folders)} lessons, {len(page) / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
