#!/usr/bin/env python3
"""isomer's runtime step by step next to ONNX Runtime running the same nodes.

`isomer run MODEL --profile` times every step of isomer's compiled plan inside whole
runs and says which graph nodes each step computes (a fused step covers several).
This script runs the same nodes on ONNX Runtime (all graph optimizations, the same
thread count), each step's nodes as a model of their own fed with the intermediate
values of a real run, and prints the steps where isomer is slower, worst first,
then the same by step class (what kind of step, which operators). Nodes isomer runs
without a step (views: Reshape, Transpose, Slice, ...; values known when it
compiles) are timed on ONNX Runtime together and shown as one line.

    .venv/bin/python scripts/profile.py MODEL.onnx [--inputs IN.npz] [--threads 1] [--json OUT.json]
    make profile MODEL=MODEL.onnx [THREADS=1]

The ratio is isomer / ONNX Runtime (below 1: isomer is faster). Timings of small
models-of-one-step carry ONNX Runtime's per-call overhead (a few microseconds); the
end-to-end comparison is `isomer run MODEL --bench`.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

NP_TYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64}


def session(model_bytes, threads, optimize=True):
    so = ort.SessionOptions()
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])


# ISOMER_PROFILE_CLOCK=cpu: both sides in processor time (a busy machine preempts whichever
# step is running; processor time does not count the wait)
CLOCK = time.process_time if os.environ.get("ISOMER_PROFILE_CLOCK") == "cpu" else time.perf_counter


def time_session(sess, feeds, warmup, repeat):
    for _ in range(warmup):
        sess.run(None, feeds)
    ms = []
    for _ in range(repeat):
        t0 = CLOCK()
        sess.run(None, feeds)
        ms.append((CLOCK() - t0) * 1e3)
    return statistics.median(ms)


def random_inputs(model, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    inits = {i.name for i in model.graph.initializer}
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim]
        dtype = NP_TYPES.get(t.elem_type, np.float32)
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[i.name] = np.zeros(shape, dtype)  # indices and masks: 0 is valid everywhere
    return feeds


def intermediates(model, feeds, threads):
    """Every tensor of one run of the model as written (ONNX Runtime, optimizations off)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in known:
                m.graph.output.append(helper.make_empty_tensor_value_info(o))
                known.add(o)
    sess = session(m.SerializeToString(), threads, optimize=False)
    names = [o.name for o in sess.get_outputs()]
    values = dict(zip(names, sess.run(None, feeds)))
    values.update(feeds)
    return values


def sub_model(model, nodes, values, graph_outputs):
    """The nodes as a model: inputs are what they read from outside (fed from a
    real run), initializers the weights they use, outputs what they produce for the
    rest of the graph."""
    produced = {o for n in nodes for o in n.output if o}
    inits = {i.name: i for i in model.graph.initializer}
    consumed_outside = set(graph_outputs)
    member = {id(n) for n in nodes}
    for n in model.graph.node:
        if id(n) not in member:
            consumed_outside.update(n.input)
    inputs, init, feeds = [], [], {}
    for n in nodes:
        for i in n.input:
            if not i or i in produced or i in feeds or any(x.name == i for x in init):
                continue
            if i in inits:
                init.append(inits[i])
            else:
                v = values[i]
                feeds[i] = v
                inputs.append(helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape))
    outs = [o for n in nodes for o in n.output if o and o in consumed_outside] or [nodes[-1].output[0]]
    outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    g = helper.make_graph(list(nodes), "step", inputs, outputs, init)
    m = helper.make_model(g, opset_imports=model.opset_import, ir_version=model.ir_version)
    return m.SerializeToString(), feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--inputs", default="", help=".npz keyed by input name (default: random, seed 0)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--isomer", default=os.path.join(os.path.dirname(__file__), "..", "build", "isomer"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--top", type=int, default=20, help="steps to list")
    ap.add_argument("--json", default="", help="write every step's numbers here")
    args = ap.parse_args()

    model = onnx.load(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        npz = args.inputs or os.path.join(tmp, "inputs.npz")
        if not args.inputs:
            np.savez(npz, **random_inputs(model, 0))
        feeds = dict(np.load(npz))
        report = os.path.join(tmp, "profile.json")
        cmd = [args.isomer, "run", args.model, "--inputs", npz, "--profile", "--threads", str(args.threads),
               "--repeat", str(args.repeat), "--report-json", report, "--no-onnxruntime"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"profile: {' '.join(cmd)} failed:\n{p.stderr.strip() or p.stdout.strip()}")
        steps = json.load(open(report))["profile"]
    print(f"profile: isomer's {len(steps)} steps timed; running their nodes on ONNX Runtime {ort.__version__}...",
          file=sys.stderr)
    values = intermediates(model, feeds, args.threads)
    by_output = {}
    for n in model.graph.node:
        for o in n.output:
            if o:
                by_output[o] = n
    graph_outputs = [o.name for o in model.graph.output]
    covered = set()
    rows = []
    for k, s in enumerate(steps):
        nodes = [by_output[x] for x in s["nodes"] if x in by_output]
        nodes = list({id(n): n for n in nodes}.values())
        row = {"step": k, "kind": s["kind"], "ops": "+".join(s["ops"]), "label": s["label"], "isomer_ms": s["ms"],
               "nodes": s["nodes"]}
        if nodes:
            covered.update(id(n) for n in nodes)
            order = {id(n): i for i, n in enumerate(model.graph.node)}
            nodes.sort(key=lambda n: order[id(n)])
            try:
                data, f = sub_model(model, nodes, values, graph_outputs)
                row["ort_ms"] = time_session(session(data, args.threads), f, 3, args.repeat)
            except Exception as e:  # a node ONNX Runtime cannot run alone: said, not fatal
                row["ort_error"] = str(e).splitlines()[0][:200]
        rows.append(row)
        if k % 25 == 24:
            print(f"  {k + 1}/{len(steps)} steps", file=sys.stderr)
    rest = [n for n in model.graph.node if id(n) not in covered]
    rest_ms = None
    if rest:
        try:
            data, f = sub_model(model, rest, values, graph_outputs)
            rest_ms = time_session(session(data, args.threads), f, 3, args.repeat)
        except Exception as e:
            print(f"profile: nodes without a step not timed: {str(e).splitlines()[0][:200]}", file=sys.stderr)

    iso_total = sum(r["isomer_ms"] for r in rows)
    ort_total = sum(r.get("ort_ms", 0) for r in rows) + (rest_ms or 0)
    print(f"\n{args.model}, {args.threads} thread(s): isomer {iso_total:.3f} ms over {len(rows)} steps; "
          f"ONNX Runtime on the same nodes {ort_total:.3f} ms ({ort_total and iso_total / ort_total:.2f}x)")
    if rest:
        ops = collections.Counter(n.op_type for n in rest)
        print(f"  {len(rest)} nodes have no step of their own in isomer (views, compile-time values): "
              f"{rest_ms if rest_ms is not None else float('nan'):.3f} ms on ONNX Runtime "
              f"({', '.join(f'{o} {c}' for o, c in ops.most_common(6))})")
    slower = sorted((r for r in rows if "ort_ms" in r), key=lambda r: r["ort_ms"] - r["isomer_ms"])
    print(f"\nsteps where isomer is slower, worst first (ms lost):")
    print(f"  {'isomer ms':>9s} {'ORT ms':>9s} {'ratio':>6s}  {'kind':<10s} {'operators':<34s} nodes")
    shown = 0
    for r in slower:
        if r["isomer_ms"] <= r["ort_ms"] or shown >= args.top:
            break
        shown += 1
        print(f"  {r['isomer_ms']:9.4f} {r['ort_ms']:9.4f} {r['isomer_ms'] / max(r['ort_ms'], 1e-9):6.2f}  "
              f"{r['kind']:<10s} {r['ops'][:34]:<34s} {r['label'][:50]}")
    if not shown:
        print("  (none)")
    classes = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        if "ort_ms" in r:
            c = classes[(r["kind"], r["ops"])]
            c[0] += r["isomer_ms"]
            c[1] += r["ort_ms"]
            c[2] += 1
    print(f"\nby step class (kind, operators), slowest ratio first:")
    print(f"  {'isomer ms':>9s} {'ORT ms':>9s} {'ratio':>6s} {'steps':>5s}  class")
    for (kind, ops), (i, o, n) in sorted(classes.items(), key=lambda kv: -kv[1][0] / max(kv[1][1], 1e-9))[:args.top]:
        print(f"  {i:9.4f} {o:9.4f} {i / max(o, 1e-9):6.2f} {n:5d}  {kind} {ops}")
    errors = [r for r in rows if "ort_error" in r]
    if errors:
        print(f"\n{len(errors)} steps not timed on ONNX Runtime (e.g. {errors[0]['ops']}: {errors[0]['ort_error']})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "threads": args.threads, "onnxruntime": ort.__version__,
                       "isomer_ms": iso_total, "ort_ms": ort_total, "no_step_ort_ms": rest_ms, "steps": rows,
                       "classes": [{"kind": k, "ops": o, "isomer_ms": i, "ort_ms": t, "steps": n}
                                   for (k, o), (i, t, n) in classes.items()]}, f, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
