#!/usr/bin/env python3
"""Lesson 11, part gqa's figure: docs/figures/lesson11-gqa-kv-cache.png from its record.

    ./build/release/bin/lesson11 --part gqa --gqa-json docs/benchmarks/gqa-kv-cache.json   # measure
    /usr/bin/python3 scripts/plot_gqa.py                                               # plot

Left: microseconds per token (one layer's decode attention, B = 1 solid, larger B dashed)
against the context, one line per KV head count, log-log; the bandwidth law's line (cache
bytes per token / the measured triad bandwidth, for the largest batch, whose caches outgrow the
last-level cache first) dotted in the same colour. Right: KV-cache
bytes per token of the whole model (2 L NKV hs 4) for each NKV. Same conventions as
scripts/make_figures.py (110 dpi, no software stamp, a source line, at most 150 KB).
"""
import argparse
import json
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPI = 110
MAX_BYTES = 150 * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=os.path.join(REPO, "docs", "benchmarks", "gqa-kv-cache.json"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "figures", "lesson11-gqa-kv-cache.png"))
    a = ap.parse_args()
    with open(a.json) as f:
        rec = json.load(f)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "figure.titlesize": 10, "path.simplify": True})

    pts = rec["points"]
    bw = rec["bandwidth_gb_s"] * 1e9
    m = rec["model"]
    kvs = sorted({p["kv_heads"] for p in pts}, reverse=True)
    batches = sorted({p["batch"] for p in pts})
    colours = plt.cm.viridis([i / max(1, len(kvs) - 1) * 0.9 for i in range(len(kvs))])

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9.6, 3.9), gridspec_kw={"width_ratios": [1.6, 1]})
    for kv, col in zip(kvs, colours):
        for b in batches:
            row = sorted((p for p in pts if p["kv_heads"] == kv and p["batch"] == b), key=lambda p: p["context"])
            if not row:
                continue
            xs = [p["context"] for p in row]
            ax.plot(xs, [p["us_per_token"] for p in row], "-" if b == batches[0] else "--", marker="o", ms=2.5,
                    color=col, label=f"NKV {kv}" if b == batches[0] else None)
            if b == batches[-1]:
                ax.plot(xs, [p["cache_bytes"] / p["batch"] / bw * 1e6 for p in row], ":", color=col, lw=0.9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context T (positions in the cache)")
    ax.set_ylabel("microseconds per token, one layer")
    styles = ", ".join(f"B = {b} {'solid' if b == batches[0] else 'dashed'}" for b in batches)
    ax.set_title(f"decode attention ({rec['kernel']}): {styles};\n"
                 f"dotted: the law, cache bytes / {rec['bandwidth_gb_s']:.1f} GB/s (triad), B = {batches[-1]}")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)

    bpt = sorted(rec["bytes_per_token"], key=lambda r: -r["kv_heads"])
    names = [f"{r['kv_heads']}" for r in bpt]
    vals = [r["bytes"] / 1024 for r in bpt]
    bars = bx.bar(names, vals, color="0.45")
    for bar, v in zip(bars, vals):
        bx.text(bar.get_x() + bar.get_width() / 2, v, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
    bx.set_xlabel("KV heads NKV (NH = %d: MHA ... 1: MQA)" % m["n_head"])
    bx.set_ylabel("KiB per token (fp32)")
    bx.set_title(f"KV-cache bytes per token = 2 L NKV hs 4\n(L {m['n_layer']}, NH {m['n_head']}, "
                 f"C {m['n_embd']}, hs {m['head_size']})")
    mc = rec["machine"]
    fig.text(0.01, 0.005, f"source: {os.path.relpath(a.json, REPO)} (lesson11 --part gqa; {mc['cpu']}, "
             f"{mc['cores']} cores, {mc['date']}, load {mc['load_before']:.1f})", fontsize=6.5, color="0.35")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    fig.savefig(a.out, dpi=DPI, metadata={"Software": None})
    size = os.path.getsize(a.out)
    if size > MAX_BYTES:
        raise SystemExit(f"{a.out} is {size} bytes, more than {MAX_BYTES}: simplify the figure")
    print(f"wrote {os.path.relpath(a.out, REPO)} ({size // 1024} KB)")


if __name__ == "__main__":
    main()
