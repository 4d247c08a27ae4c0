#!/usr/bin/env python3
"""Draws build/bench.json as build/bench.png: per model, grouped bars of the speedups
over ONNX Runtime on the original (log scale, a line at 1.0), one panel per thread count.
A cross marks an engine that failed on the model.

    .venv/bin/python scripts/bench_plot.py build/bench.json -o build/bench.png
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib.report import COLUMNS, value  # noqa: E402

FLOOR = 0.25  # lowest speedup the axis shows
WRONG = 1e-3  # max relative error against ONNX Runtime above which a bar is marked
COLORS = ["#1f77b4", "#aec7e8", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    threads = sorted({r["threads"] for r in result["rows"]})
    models = list(dict.fromkeys(r["model"] for r in result["rows"]))
    fig, axes = plt.subplots(len(threads), 1, figsize=(max(10, 1.0 * len(models) + 3), 5.6 * len(threads)),
                             squeeze=False)
    width = 0.8 / len(COLUMNS)
    vals = [value(r, k) for r in result["rows"] for k, _, _ in COLUMNS if value(r, k)]
    # The axis keeps 0.25x..4x readable; a bar beyond it is drawn to the edge with its value.
    lo = max(FLOOR, min([0.5] + vals) / 1.3)
    hi = max([2.0] + vals) * 1.3
    for ax, t in zip(axes[:, 0], threads):
        rows = {r["model"]: r for r in result["rows"] if r["threads"] == t}
        summary = result.get("summary", {}).get(str(t), {}).get("columns", {})
        for j, (key, head, desc) in enumerate(COLUMNS):
            xs, ys, fails, wrong = [], [], [], []
            for i, m in enumerate(models):
                r = rows.get(m)
                x = i + (j - (len(COLUMNS) - 1) / 2) * width
                v = value(r, key) if r else None
                if v is not None:
                    xs.append(x)
                    ys.append(v)
                    if r.get("max_rel_error", {}).get(key, 0) > WRONG:
                        wrong.append((x, v))
                elif r and key in r.get("errors", {}):
                    fails.append(x)
            gm = summary.get(key, {}).get("geomean")
            label = f"{desc}" + (f" (geomean {gm:.2f}x)" if gm else "")
            ax.bar(xs, [max(y, lo * 1.05) for y in ys], width, label=label, color=COLORS[j % len(COLORS)])
            for x, y in zip(xs, ys):
                if y < lo * 1.05:
                    ax.text(x, lo * 1.08, f"{y:.2f}x", rotation=90, ha="center", va="bottom", fontsize=7)
            if fails:
                ax.plot(fails, [lo * 1.15] * len(fails), "x", color=COLORS[j % len(COLORS)], markersize=7,
                        markeredgewidth=2)
            for x, v in wrong:
                ax.text(x, v * 1.03, "!", ha="center", va="bottom", color="red", fontweight="bold")
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        ticks = [x for x in (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1, 1.5, 2, 3, 5, 10) if lo <= x <= hi]
        ax.set_yticks(ticks)
        ax.set_yticklabels([f"{x:g}x" for x in ticks])
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels(models, rotation=30, ha="right")
        ax.set_xlim(-0.6, len(models) - 0.4)
        load = [r["load_average_start"][0] for r in rows.values() if "load_average_start" in r]
        ax.set_title(f"{t} thread{'s' if t > 1 else ''}: speedup over ONNX Runtime on the original "
                     f"(above 1 = faster; x = failed, ! = outputs differ)"
                     + (f"; load {min(load):.1f}-{max(load):.1f}" if load else ""), fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False)
    m = result.get("machine", {})
    fig.suptitle(f"isomer bench, {result.get('started', '')[:16]}, {m.get('cpu', '')}, {m.get('cpus', '?')} cpus",
                 fontsize=11)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="?", default="build/bench.json")
    ap.add_argument("-o", "--output", default="build/bench.png")
    args = ap.parse_args()
    with open(args.json) as f:
        result = json.load(f)
    plot(result, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
