"""Times μGraph region kernels against isomer's unfused runtime and ONNX Runtime.

For each single-region model (scripts/mugraph_regions.py, and the MLP and normalized
projection regions of scripts/mugraph_regions_mlp.py): `isomer optimize
--mugraph --mugraph-untimed` (the best verified kernel by the cost model, kept
untimed; --timed: the fastest of the best few, timed as `optimize --mugraph` does), then
`isomer run --bench --profile` on the original and on the fused model, interleaved
for --rounds rounds; reports medians of the whole-run latency, of the summed step
times (the kernels without the runtime's per-run overhead) and ONNX Runtime's
latency on the same subgraph, with the load average. Writes JSON (--json)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import onnx  # noqa: E402

import mugraph_regions  # noqa: E402
import mugraph_regions_mlp  # noqa: E402


def bench(isomer, model, threads, repeat):
    p = subprocess.run([isomer, "run", model, "--bench", "--profile", "--print-steps", "--threads", str(threads),
                        "--repeat", str(repeat)], capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    lat = re.search(r"^latency: median ([\d.]+) ms", out, re.M)
    ort = re.search(r"^ONNX Runtime [\d.]+: median ([\d.]+) ms", out, re.M)
    steps = re.search(r"^profile: ([\d.]+) ms", out, re.M)
    kernels = re.findall(r"^\s+mugraph\S*\s.*?\[(.*)\]", out, re.M)
    if not lat:
        raise RuntimeError(out[-2000:])
    return (float(lat.group(1)), float(steps.group(1)) if steps else None, float(ort.group(1)) if ort else None,
            "; ".join(kernels))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--isomer", default="build/isomer")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--timed", action="store_true",
                    help="let optimize time the best candidates and keep the fastest (the default flow of "
                         "`optimize --mugraph`) instead of keeping the cost model's first (--mugraph-untimed)")
    ap.add_argument("--json")
    ap.add_argument("--png", help="bar chart of the medians (fused, unfused, ONNX Runtime) per region")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in {**mugraph_regions.REGIONS, **mugraph_regions_mlp.PROGRAMS}.items():
            if a.only and name not in a.only:
                continue
            src, dst = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".fused.onnx")
            onnx.save(make(), src)
            cmd = [a.isomer, "optimize", src, "-o", dst, "--mugraph", "--no-guard", "--cost", "none", "--mugraph-seconds",
                   "2", "--allow-nonfinite", "--threads", str(a.threads)]
            if not a.timed:
                cmd.append("--mugraph-untimed")
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if p.returncode != 0 or "mugraph-fuse" not in p.stdout:
                print(f"{name}: not fused: {p.stdout[-600:]} {p.stderr[-600:]}", flush=True)
                continue
            r = {"region": name, "kernel": "", "unfused": [], "fused": [],
                 "unfused_steps": [], "fused_steps": [], "ort": []}
            for _ in range(a.rounds):
                lu, su, o1, _ = bench(a.isomer, src, a.threads, a.repeat)
                lf, sf, o2, r["kernel"] = bench(a.isomer, dst, a.threads, a.repeat)
                r["unfused"].append(lu)
                r["fused"].append(lf)
                r["unfused_steps"].append(su)
                r["fused_steps"].append(sf)
                r["ort"] += [x for x in (o1, o2) if x is not None]
            med = {k: statistics.median(v) for k, v in r.items() if isinstance(v, list) and v and v[0] is not None}
            r["median_ms"] = med
            r["loadavg"] = open("/proc/loadavg").read().split()[:3]
            rows.append(r)
            print(f"{name}: fused {med['fused']:.3f} ms (steps {med.get('fused_steps', 0):.3f}), unfused "
                  f"{med['unfused']:.3f} ms (steps {med.get('unfused_steps', 0):.3f}), ONNX Runtime "
                  f"{med.get('ort', float('nan')):.3f} ms; speedup vs unfused {med['unfused'] / med['fused']:.2f}x, "
                  f"vs ORT {med.get('ort', float('nan')) / med['fused']:.2f}x; load {' '.join(r['loadavg'])} "
                  f"[{r['kernel']}]", flush=True)
    if a.json:
        json.dump({"threads": a.threads, "regions": rows}, open(a.json, "w"), indent=1)
    if a.png and rows:
        plot(rows, a.threads, a.png)


def plot(rows, threads, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["region"] for r in rows]
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    for k, (key, label) in enumerate([("unfused", "isomer unfused"), ("fused", "isomer μGraph kernel"),
                                      ("ort", "ONNX Runtime")]):
        rel = [r["median_ms"].get(key, float("nan")) / r["median_ms"]["unfused"] for r in rows]
        ax.bar([i + (k - 1) * 0.27 for i in range(len(rows))], rel, 0.27, label=label)
    ax.set_xticks(range(len(rows)), names, rotation=20, ha="right", fontsize=8)
    ax.axhline(1.0, color="gray", lw=0.5)
    ax.set_ylabel("median latency / unfused (lower is faster)")
    ax.set_title(f"μGraph region kernels, {threads} thread(s), load {' '.join(rows[-1]['loadavg'])}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
