"""Times μGraph region kernels against isomer's unfused runtime and ONNX Runtime.

For each single-region model (scripts/mugraph_regions.py, and the MLP and normalized
projection regions of scripts/mugraph_regions_mlp.py): `isomer optimize
--mugraph --mugraph-untimed` (the best verified kernel by the cost model, kept
untimed; --timed: the fastest of the best few, timed as `optimize --mugraph` does), then
`isomer run --bench --profile` on the original and on the fused model, interleaved
for --rounds rounds; reports medians of the whole-run latency, of the summed step
times (the kernels without the runtime's per-run overhead) and ONNX Runtime's
latency on the same subgraph, with the load average. With --torch-python (a Python
with torch >= 2), torch.compile (Inductor's C++ backend) on the same program too,
compiled once and timed in the same rounds (scripts/torch_compile_onnx.py).

--models M.onnx ...: whole models (the corpus's transformer blocks) as a user
optimizes them, `isomer optimize --mugraph` with its timed kernel choice and the
guard (symbolic input dims fixed at 1 with --input-shape, as `isomer run` feeds them),
then the output against the original the same way. Writes JSON (--json)
and a bar chart (--png)."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import numpy as np  # noqa: E402
import onnx  # noqa: E402

import mugraph_regions  # noqa: E402
import mugraph_regions_mlp  # noqa: E402
from benchlib import engines as E  # noqa: E402


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


def _feeds(model, seed=0):
    """Inputs for torch.compile: normal floats, token ids 0, attention masks 1."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value or 1 for d in i.type.tensor_type.shape.dim]
        if i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            feeds[i.name] = np.full(shape, 1 if "mask" in i.name else 0,
                                    onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
    return feeds


def _torch_engine(a, path):
    """torch.compile on `path` in a server process, or None (no --torch-python, or the
    model is outside the translation's operators: reported)."""
    if not a.torch_python:
        return None, None
    try:
        return E.TorchCompileEngine(path, a.threads, _feeds(onnx.load(path)), a.torch_python), None
    except Exception as e:
        return None, str(e)[:300]


def fixed_dims(path):
    """--input-shape for each graph input with a symbolic dim, those dims at 1, as
    `isomer run` feeds them: kernels are made for static shapes, and a user follows
    the report's hint to get any (BERT's batch)."""
    m = onnx.load(path, load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    args = []
    for i in m.graph.input:
        dims = i.type.tensor_type.shape.dim if i.type.HasField("tensor_type") else []
        if i.name in inits or not any(d.HasField("dim_param") or not d.HasField("dim_value") for d in dims):
            continue
        args += ["--input-shape", i.name + ":" + ",".join(str(d.dim_value) if d.HasField("dim_value") else "1"
                                                           for d in dims)]
    return args


def measure(a, name, src, dst, optimize_args, kind):
    """Optimizes `src` with --mugraph into `dst`, then times the two (and torch.compile)
    interleaved for --rounds rounds; a row, or None if nothing was fused."""
    cmd = [a.isomer, "optimize", src, "-o", dst, "--mugraph", "--threads", str(a.threads)] + optimize_args
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    optimize_s = time.time() - t0
    fused = re.findall(r"^\s+fused .*$", p.stdout, re.M)
    if p.returncode != 0 or "mugraph-fuse" not in p.stdout:
        print(f"{name}: not fused: {p.stdout[-600:]} {p.stderr[-600:]}", flush=True)
        if kind == "region" or p.returncode != 0:
            return None
    r = {kind: name, "kernel": "", "unfused": [], "fused": [], "unfused_steps": [], "fused_steps": [], "ort": [],
         "optimize_seconds": round(optimize_s, 1), "fused_regions": [f.strip()[:300] for f in fused],
         "kept": (re.search(r"^kept: (\S+)", p.stdout, re.M) or [None, None])[1]}
    torch_engine, r["torch_compile_error"] = _torch_engine(a, src)
    if torch_engine:
        r["torch_compile"], r["torch_compile_s"] = [], round(torch_engine.info["compile_s"], 1)
        torch_engine.time(3, 3)
    for _ in range(a.rounds):
        lu, su, o1, _ = bench(a.isomer, src, a.threads, a.repeat)
        lf, sf, o2, r["kernel"] = bench(a.isomer, dst, a.threads, a.repeat)
        r["unfused"].append(lu)
        r["fused"].append(lf)
        r["unfused_steps"].append(su)
        r["fused_steps"].append(sf)
        r["ort"] += [x for x in (o1, o2) if x is not None]
        if torch_engine:
            r["torch_compile"].append(statistics.median(torch_engine.time(1, a.repeat)))
    del torch_engine
    med = {k: statistics.median(v) for k, v in r.items() if isinstance(v, list) and v and isinstance(v[0], float)}
    r["median_ms"] = med
    r["loadavg"] = open("/proc/loadavg").read().split()[:3]
    tc = (f", torch.compile {med['torch_compile']:.3f} ms (vs it {med['torch_compile'] / med['fused']:.2f}x)"
          if "torch_compile" in med else "")
    print(f"{name}: fused {med['fused']:.3f} ms (steps {med.get('fused_steps') or 0:.3f}), unfused "
          f"{med['unfused']:.3f} ms (steps {med.get('unfused_steps') or 0:.3f}), ONNX Runtime "
          f"{med.get('ort', float('nan')):.3f} ms{tc}; speedup vs unfused {med['unfused'] / med['fused']:.2f}x, "
          f"vs ORT {med.get('ort', float('nan')) / med['fused']:.2f}x; load {' '.join(r['loadavg'])} "
          f"[{r['kernel']}]", flush=True)
    if kind == "model":
        print(f"  optimize --mugraph {optimize_s:.0f} s, kept {r['kept']}; " +
              ("; ".join(r["fused_regions"]) or "no region fused"), flush=True)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isomer", default="build/isomer")
    ap.add_argument("--only", nargs="*", help="regions to run (default: all; none with --models-only)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--timed", action="store_true",
                    help="let optimize time the best candidates and keep the fastest (the default flow of "
                         "`optimize --mugraph`) instead of keeping the cost model's first (--mugraph-untimed)")
    ap.add_argument("--models", nargs="*", default=[],
                    help="whole models (e.g. the corpus's transformer blocks): `optimize --mugraph` as a user "
                         "runs it (timed kernels, guard on), then the output against the original")
    ap.add_argument("--models-only", action="store_true", help="skip the single-region programs")
    ap.add_argument("--torch-python", default=os.environ.get("ISOMER_TORCH_PYTHON", ""),
                    help="a Python with torch >= 2: adds torch.compile (Inductor, CPU) on the same program "
                         "(default $ISOMER_TORCH_PYTHON)")
    ap.add_argument("--json")
    ap.add_argument("--png", help="bar chart of the medians (fused, unfused, ONNX Runtime) per region")
    a = ap.parse_args()
    if a.torch_python and not E.torch_version(a.torch_python):
        print(f"bench_mugraph: {a.torch_python} has no torch >= 2: torch.compile skipped", flush=True)
        a.torch_python = ""
    rows, models = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in {**mugraph_regions.REGIONS, **mugraph_regions_mlp.PROGRAMS}.items():
            if a.models_only or (a.only and name not in a.only):
                continue
            src, dst = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + ".fused.onnx")
            onnx.save(make(), src)
            args = ["--no-guard", "--cost", "none", "--mugraph-seconds", "2", "--allow-nonfinite"]
            row = measure(a, name, src, dst, args + ([] if a.timed else ["--mugraph-untimed"]), "region")
            if row:
                rows.append(row)
        for path in a.models:
            name = os.path.splitext(os.path.basename(path))[0]
            row = measure(a, name, path, os.path.join(tmp, name + ".fused.onnx"), fixed_dims(path), "model")
            if row:
                models.append(row)
    if a.json:
        json.dump({"threads": a.threads, "torch_python": a.torch_python, "regions": rows, "models": models},
                  open(a.json, "w"), indent=1)
    if a.png and rows + models:
        plot(rows + models, a.threads, a.png)


def plot(rows, threads, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r.get("region") or r.get("model") for r in rows]
    fig, ax = plt.subplots(figsize=(1.6 * len(rows) + 2, 4))
    bars = [("unfused", "isomer unfused"), ("fused", "isomer μGraph kernel"), ("ort", "ONNX Runtime")]
    if any("torch_compile" in r["median_ms"] for r in rows):
        bars.append(("torch_compile", "torch.compile (Inductor)"))
    width = 0.8 / len(bars)
    for k, (key, label) in enumerate(bars):
        rel = [r["median_ms"].get(key, float("nan")) / r["median_ms"]["unfused"] for r in rows]
        ax.bar([i + (k - (len(bars) - 1) / 2) * width for i in range(len(rows))], rel, width, label=label)
    ax.set_xticks(range(len(rows)), names, rotation=20, ha="right", fontsize=8)
    ax.axhline(1.0, color="gray", lw=0.5)
    ax.set_ylabel("median latency / unfused (lower is faster)")
    ax.set_title(f"μGraph region kernels, {threads} thread(s), load {' '.join(rows[-1]['loadavg'])}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
