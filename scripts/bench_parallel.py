#!/usr/bin/env python3
"""`make bench` for `isomer parallelize`: plan quality and search time on simulated clusters.

Clusters (training mode, a device of 100 TFLOPS / 80 GB / 2000 GB/s, 2400 Gbit/s
within a node, 200 Gbit/s between nodes, as in the issue): 1x8, 2x8 and 8x8 devices.
Models: the BERT-like encoder, the GPT-2-like blocks (2 and 12 layers), the MLP
(scripts/export_parallel_models.py) and ResNet-50 (make models); plus every model of
build/corpus/ if it is there (skipped when isomer cannot plan it). Per model and
cluster: data parallelism, the Megatron-style plan (transformer blocks and MLPs), the
FlexFlow search (MCMC from data parallelism), Unity without algebraic rules
(parallelization only) and Unity joint (rules + parallelization). Reported: step times,
speedups over data parallelism, their geomean, search seconds, the incremental
simulation against full re-simulation, and the load average around each run. Writes
a JSON and a PNG of the speedups.

    .venv/bin/python scripts/bench_parallel.py --isomer build/isomer --json build/bench_parallel.json
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import load_average  # scripts/bench.py

CLUSTERS = {"1x8": (1, 8), "2x8": (2, 8), "8x8": (8, 8)}
MODELS = [  # (name, path, batch)
    ("bert_enc2", "build/models/parallel/bert_enc2.onnx", 64),
    ("gpt2_block2", "build/models/parallel/gpt2_block2.onnx", 64),
    ("gpt2_block12", "build/models/parallel/gpt2_block12.onnx", 64),
    ("mlp4", "build/models/parallel/mlp4.onnx", 256),
    ("resnet50", "build/models/resnet50.onnx", 256),
]
SEARCHES = {
    "flexflow": ["--search", "flexflow"],
    "unity_parallel_only": ["--search", "unity", "--no-rules"],
    "unity_joint": ["--search", "unity"],
}


def cluster_file(tmp, nodes, per_node):
    path = os.path.join(tmp, f"cluster_{nodes}x{per_node}.json")
    with open(path, "w") as f:
        json.dump({"nodes": nodes, "devices_per_node": per_node,
                   "device": {"tflops": 100, "memory_gb": 80, "bandwidth_gbps": 2000},
                   "intra_node": {"bandwidth_gbps": 2400, "latency_us": 5},
                   "inter_node": {"bandwidth_gbps": 200, "latency_us": 10}}, f)
    return path


def parallelize(isomer, model, batch, cluster, extra, out, budget):
    l0 = load_average()
    t = time.time()
    r = subprocess.run([isomer, "parallelize", model, "--cluster", cluster, "--batch", str(batch), "--mode", "train",
                        "--budget", str(budget), "--skip-rank-graphs", "-q", "-o", out] + extra,
                       capture_output=True, text=True, timeout=budget * 4 + 120)
    wall = time.time() - t
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["?"])[-1]
    with open(os.path.join(out, "plan.json")) as f:
        plan = json.load(f)
    return {"step_ms": plan["predicted_step_ms"], "data_parallel_ms": plan["data_parallel_step_ms"],
            "megatron_ms": plan.get("megatron_step_ms"), "speedup": plan["speedup_vs_data_parallel"],
            "search_seconds": plan["search"]["seconds"], "wall_seconds": wall,
            "stop_reason": plan["search"]["stop_reason"], "steps": plan["search"]["steps"],
            "incremental_us": plan["search"]["incremental_simulation_us"],
            "full_us": plan["search"]["full_simulation_us"], "operators": len(plan["operators"]),
            "rules_applied": plan["rules_applied"], "fits_memory": plan["predicted"]["fits_memory"],
            "load_average_start": l0, "load_average_end": load_average()}, None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['model']}\n{r['cluster']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, len(rows) * 0.55), 4.5))
    width = 0.2
    for k, (name, key) in enumerate([("Megatron-style", "megatron"), ("FlexFlow", "flexflow"),
                                      ("Unity, parallel only", "unity_parallel_only"), ("Unity joint", "unity_joint")]):
        ys = [(r["data_parallel_ms"] / r[key]) if r.get(key) else 0 for r in rows]
        ax.bar([i + (k - 1.5) * width for i in range(len(rows))], ys, width, label=name)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("speedup over data parallelism (simulated)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isomer", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--models", default="", help="comma-separated subset of the model names")
    a = ap.parse_args()
    models = list(MODELS)
    for path in sorted(glob.glob("build/corpus/*.onnx")):
        models.append(("corpus/" + os.path.splitext(os.path.basename(path))[0], path, 32))
    if a.models:
        models = [m for m in models if m[0] in a.models.split(",")]
    rows, skipped = [], []
    tmp = tempfile.mkdtemp(prefix="isomer_bench_parallel_")
    start_load = load_average()
    for name, path, batch in models:
        if not os.path.exists(path):
            skipped.append({"model": name, "reason": f"{path} missing"})
            continue
        for cname, (nodes, per_node) in CLUSTERS.items():
            cluster = cluster_file(tmp, nodes, per_node)
            row = {"model": name, "cluster": cname, "batch": batch}
            for sname, extra in SEARCHES.items():
                res, err = parallelize(a.isomer, path, batch, cluster, extra, os.path.join(tmp, "plan"), a.budget)
                if res is None:
                    skipped.append({"model": name, "cluster": cname, "search": sname, "reason": err})
                    break
                row[sname] = res["step_ms"]
                row[sname + "_detail"] = res
                row["data_parallel_ms"] = res["data_parallel_ms"]
                row["megatron"] = res["megatron_ms"]
            if "unity_joint" not in row:
                continue
            d = row["unity_joint_detail"]
            rows.append(row)
            meg = f"{row['data_parallel_ms'] / row['megatron']:6.2f}x" if row["megatron"] else "     -"
            print(f"{name:16s} {cname:4s} ops {d['operators']:4d}  DP {row['data_parallel_ms']:9.3f} ms  Megatron {meg}  "
                  f"FlexFlow {row['data_parallel_ms'] / row['flexflow']:6.2f}x  Unity-par {row['data_parallel_ms'] / row['unity_parallel_only']:6.2f}x  "
                  f"Unity-joint {row['data_parallel_ms'] / row['unity_joint']:6.2f}x  search {d['search_seconds']:5.1f} s  "
                  f"sim {d['incremental_us']:.0f}/{d['full_us']:.0f} us  load {d['load_average_start']:.1f}", flush=True)
    speed = [r["data_parallel_ms"] / r["unity_joint"] for r in rows]
    transformers = [r for r in rows if r["megatron"] and not r["model"].startswith("mlp")]
    summary = {
        "rows": len(rows),
        "geomean_speedup_unity_joint": geomean(speed),
        "geomean_speedup_flexflow": geomean([r["data_parallel_ms"] / r["flexflow"] for r in rows]),
        "geomean_speedup_unity_parallel_only": geomean([r["data_parallel_ms"] / r["unity_parallel_only"] for r in rows]),
        "never_worse_than_data_parallel": all(s >= 1 - 1e-9 for s in speed),
        "worst_vs_megatron_on_transformers": min((r["megatron"] / r["unity_joint"] for r in transformers), default=None),
        "joint_over_parallel_only_geomean": geomean([r["unity_parallel_only"] / r["unity_joint"] for r in rows]),
        "joint_over_flexflow_geomean": geomean([r["flexflow"] / r["unity_joint"] for r in rows]),
        "max_search_seconds_64_devices": max((r["unity_joint_detail"]["search_seconds"] for r in rows
                                              if r["cluster"] == "8x8"), default=None),
        "incremental_speedup_geomean": geomean([r["unity_joint_detail"]["full_us"] / r["unity_joint_detail"]["incremental_us"]
                                                for r in rows if r["unity_joint_detail"]["incremental_us"] > 0]),
        "load_average_start": start_load, "load_average_end": load_average(),
    }
    with open(a.json, "w") as f:
        json.dump({"summary": summary, "rows": rows, "skipped": skipped}, f, indent=2)
    if rows:
        plot(rows, os.path.splitext(a.json)[0] + ".png")
    print(json.dumps(summary, indent=2))
    for s in skipped:
        print("skipped:", s)


if __name__ == "__main__":
    main()
