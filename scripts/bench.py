#!/usr/bin/env python3
"""isomer next to ONNX Runtime, onnxsim and OpenVINO on the benchmark corpus.

For every corpus model (build/corpus, `make corpus`) and thread count, in one run:
  ort          ONNX Runtime 1.32 on the original (all graph optimizations, intra-op
               threads = t, inter-op 1): the baseline of every ratio;
  ort_isomer   ONNX Runtime on `isomer optimize --search templates`'s output (with
               --target onnxruntime when the CLI offers it): the template passes alone;
  ort_onnxsim  ONNX Runtime on onnxsim's output (its defaults);
  openvino     OpenVINO's CPU plugin on the original (INFERENCE_NUM_THREADS = t, f32);
  torch_compile  torch.compile (Inductor, CPU) on the original translated node by node
               into a torch module (scripts/torch_compile_onnx.py), under --torch-python
               (a Python with torch >= 2; skipped without one), compiled once per model;
  isomer       `isomer run --bench --no-onnxruntime` on the original;
  isomer_opt   the same on `isomer optimize --search templates`'s output (default target);
  isomer_eqsat the same on `isomer optimize --search eqsat`'s output (the default search);
               the row's "eqsat" has the search's time, e-graph size, stop reason,
               extraction gap and rules, and `eqsat_gain` = isomer runtime on isomer_opt's
               output / on this one (the search's gain over the template passes alone);
               its search seconds are as this run took them, after the templates run
               only filled the cost database, and "warm" as the same search repeated
               on the filled database takes them (--no-check --no-guard; off with
               --no-eqsat-warm);
  ort_eqsat    ONNX Runtime on `isomer optimize --search eqsat --target onnxruntime`'s
               output (the default search); `eqsat_ort_gain` = ONNX Runtime on
               ort_isomer's model / on this one;
  cost         `isomer cost`'s prediction against the isomer latency measured in the
               same round (signed error, %).
Engines alternate in rounds (the order rotates every round) with the same inputs (valid
per the manifest: token ids within the vocabulary). Each ratio is the median over rounds
of the ratio within the round, so that the machine's drift over minutes cancels.

Convention: SPEEDUP = ORT latency on the original / the engine's latency; above 1 is
faster than ONNX Runtime on the original. `isomer_opt_gain` = isomer runtime on the
original / on isomer's output (above 1: the optimized model runs faster on isomer).

Every engine's outputs are compared with ONNX Runtime's on the original (max relative
error, reported, never asserted). A model that isomer cannot optimize, run or price is
a finding: the exact message goes into that row's "errors", and the bench carries on.
Prints a table, writes build/bench.json (machine, CPU, versions, load averages, every
row) and draws build/bench.png.

    .venv/bin/python scripts/bench.py --isomer build/isomer --corpus build/corpus
    .venv/bin/python scripts/bench.py --only nasrnn_b16,llama_block --threads 1 --quick
"""
import argparse
import datetime
import functools
import json
import os
import platform
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

from benchlib import engines as E  # noqa: E402
from benchlib import report  # noqa: E402
from corpus.inputs import load_manifest, make_inputs  # noqa: E402

ENGINES = ["ort_isomer", "ort_eqsat", "ort_onnxsim", "openvino", "torch_compile", "isomer", "isomer_opt", "isomer_eqsat", "cost"]
# What the bench keeps of an eqsat search's report (the report's search_* fields).
EQSAT_FIELDS = ["search_seconds", "search_cpu_seconds", "search_stop_reason", "search_egraph_nodes", "search_egraph_classes",
                "search_extraction_gap", "search_extraction_optimal", "search_pricing_seconds", "search_timed_runs",
                "search_graphs_compiled",
                "search_saturation_seconds", "search_extraction_seconds", "search_greedy_cost_ms", "search_greedy_plain_cost_ms",
                "search_greedy_seconds", "search_ilp_cost_ms",
                "search_rule_counts",
                "search_cost_before_ms", "search_cost_after_ms", "search_kept_input", "rules_applied"]


def load_average():
    """The 1-minute load average (scripts/bench_rules.py reads it from here)."""
    return E.load_average()[0]


# --- preparing the models each engine runs (once per model) ----------------------------
def prepare(entry, args, caps):
    name = entry["name"]
    d = os.path.join(args.work, name)
    os.makedirs(d, exist_ok=True)
    prep = {"dir": d, "errors": {}, "inputs": os.path.join(d, "inputs.npz"), "model_path": entry["path"]}
    prep["feeds"] = make_inputs(entry, seed=args.seed)
    np.savez(prep["inputs"], **prep["feeds"])
    extra = shlex.split(args.optimize_args)
    # optimize prices with the bench's cost database (not the user's, whose rows may
    # come from another load), guards on the bench's inputs, and at the bench's thread
    # count when it measures one; --optimize-args overrides each.
    if "--cost-db" not in extra:
        extra += ["--cost-db", args.cost_db]
    if "--inputs" not in extra:
        extra += ["--inputs", prep["inputs"]]
    threads = [t for t in str(args.threads).split(",") if t]
    if "--threads" not in extra and len(threads) == 1:
        extra += ["--threads", threads[0]]

    def optimize(key, path_key, stem, flags):
        """`isomer optimize` with `flags` into prep[key] and prep[path_key], or the error."""
        label = " ".join(["isomer optimize"] + flags)
        try:
            prep[key] = E.isomer_optimize(args.isomer, entry["path"], os.path.join(d, stem + ".onnx"),
                                          os.path.join(d, stem + ".report.json"), extra + flags, args.timeout)
            prep[path_key] = os.path.join(d, stem + ".onnx")
            _progress(name, label, _optimize_summary(prep[key]))
        except E.CommandFailed as e:
            prep["errors"][key] = str(e)
            _progress(name, label, "FAILED " + str(e).replace("\n", " | "))

    if {"isomer_opt", "ort_isomer"} & args.engines:
        optimize("optimize", "opt_path", "opt", ["--search", "templates"])
    if "isomer_eqsat" in args.engines:
        optimize("eqsat", "eqsat_path", "opt_eqsat", ["--search", "eqsat"])
        if "eqsat" in prep and args.eqsat_warm:
            eqsat_warm(prep, d, extra, args)
    if "ort_isomer" in args.engines:
        if caps["target"]:
            optimize("optimize_onnxruntime", "ort_isomer_path", "opt_ort", ["--search", "templates", "--target", "onnxruntime"])
        elif "opt_path" in prep:
            prep["ort_isomer_path"] = prep["opt_path"]
    if "ort_eqsat" in args.engines and caps["target"]:
        optimize("ort_eqsat", "ort_eqsat_path", "opt_eqsat_ort", ["--search", "eqsat", "--target", "onnxruntime"])
    if "ort_onnxsim" in args.engines:
        try:
            prep["onnxsim"] = E.onnxsim_simplify(entry["path"], os.path.join(d, "onnxsim.onnx"), args.timeout)
            prep["onnxsim_path"] = os.path.join(d, "onnxsim.onnx")
            s = prep["onnxsim"]
            _progress(name, "onnxsim", f"{s['nodes_before']} -> {s['nodes_after']} nodes, {s['seconds']:.1f} s")
        except E.CommandFailed as e:
            prep["errors"]["onnxsim"] = str(e)
            _progress(name, "onnxsim", "FAILED " + str(e).replace("\n", " | "))
    return prep


# What the bench keeps of the warm repeat of the eqsat search.
EQSAT_WARM_FIELDS = ["search_seconds", "search_cpu_seconds", "search_pricing_seconds", "search_priced_alone",
                     "search_timed_runs"]


def eqsat_warm(prep, d, extra, args):
    """The eqsat search again, with the cost database the bench's runs so far filled:
    its search time is the warm one (every step priced from the database), where the
    bench's own eqsat run comes after the templates run only and times the shapes that
    one did not run. Without the check and the guard, which are not the search."""
    flags = ["--search", "eqsat"] + [f for f in ("--no-check", "--no-guard") if f not in extra]
    try:
        o = E.isomer_optimize(args.isomer, prep["model_path"], os.path.join(d, "opt_eqsat_warm.onnx"),
                              os.path.join(d, "opt_eqsat_warm.report.json"), extra + flags, args.timeout)
        prep["eqsat_warm"] = {k: o.get(k) for k in EQSAT_WARM_FIELDS}
        _progress(os.path.basename(d), "isomer optimize --search eqsat (warm cost database)",
                  f"search {o.get('search_seconds', float('nan')):.2f} s")
    except E.CommandFailed as e:
        prep["errors"]["eqsat_warm"] = str(e)
        _progress(os.path.basename(d), "isomer optimize --search eqsat (warm)", "FAILED " + str(e).replace("\n", " | "))


def _optimize_summary(o):
    parts = [f"{o.get('nodes_before', '?')} -> {o.get('nodes_after', '?')} nodes", f"{o['seconds']:.1f} s",
             f"check {o.get('check', '?')}"]
    if "kept" in o:
        parts.append(f"kept {o['kept']}")
    if o.get("latency_before_ms") is not None and o.get("latency_after_ms") is not None:
        parts.append(f"guard {o['latency_before_ms']:.2f} -> {o['latency_after_ms']:.2f} ms")
    return ", ".join(parts)


def _progress(model, what, text):
    print(f"  {model:16s} {what}: {text}", flush=True)


# --- measuring one model at one thread count --------------------------------------------
def _engine_error(prep, key):
    if key == "ort_isomer":
        return prep["errors"].get("optimize_onnxruntime") or prep["errors"].get("optimize")
    if key == "isomer_opt":
        return prep["errors"].get("optimize")
    if key == "isomer_eqsat":
        return prep["errors"].get("eqsat")
    if key == "ort_eqsat":
        return prep["errors"].get("ort_eqsat")
    if key == "ort_onnxsim":
        return prep["errors"].get("onnxsim")
    return None


def measure(entry, prep, threads, args):
    name = entry["name"]
    row = {"model": name, "family": entry["family"], "suites": entry["suites"], "threads": threads,
           "load_average_start": E.load_average(), "errors": {}, "max_rel_error": {}}
    feeds = prep["feeds"]
    inproc = {"ort": E.OrtEngine(entry["path"], threads, feeds)}
    reference = inproc["ort"].run()
    names = inproc["ort"].output_names

    for key, path_key, cls in [("ort_isomer", "ort_isomer_path", E.OrtEngine),
                               ("ort_eqsat", "ort_eqsat_path", E.OrtEngine),
                               ("ort_onnxsim", "onnxsim_path", E.OrtEngine),
                               ("openvino", None, E.OpenVinoEngine),
                               ("torch_compile", None, functools.partial(E.TorchCompileEngine,
                                                                         python=args.torch_python))]:
        if key not in args.engines:
            continue
        path = entry["path"] if path_key is None else prep.get(path_key)
        if path is None:
            row["errors"][key] = _engine_error(prep, key) or "no model"
            continue
        try:
            eng = cls(path, threads, feeds)
            row["max_rel_error"][key] = E.max_rel_error(eng.run(), reference)
            inproc[key] = eng
        except Exception as e:  # an engine that cannot load or run the model: reported
            row["errors"][key] = f"{type(e).__name__}: {str(e).strip()[:600]}"

    subproc = {}
    if "isomer" in args.engines:
        subproc["isomer"] = entry["path"]
    if "isomer_opt" in args.engines:
        if prep.get("opt_path"):
            subproc["isomer_opt"] = prep["opt_path"]
        else:
            row["errors"]["isomer_opt"] = _engine_error(prep, "isomer_opt")
    if "isomer_eqsat" in args.engines:
        if prep.get("eqsat_path"):
            subproc["isomer_eqsat"] = prep["eqsat_path"]
            row["eqsat"] = {k: prep["eqsat"].get(k) for k in EQSAT_FIELDS}
            row["eqsat"]["optimize_seconds"] = prep["eqsat"]["seconds"]
            # The same search again on the filled cost database (eqsat_warm above).
            for k, v in (prep.get("eqsat_warm") or {}).items():
                row["eqsat"]["warm_" + k] = v
        else:
            row["errors"]["isomer_eqsat"] = _engine_error(prep, "isomer_eqsat")

    # Timed runs per round: about --round-seconds per engine, from each engine's own
    # latency (an engine 50x slower than ORT must not take 50x the time): its warm-up runs
    # in the first round for an in-process engine, and for `isomer run` its previous
    # round (the fewest runs in the first).
    def repeats(ms):
        return max(args.min_repeat, min(args.repeat, int(args.round_seconds * 1e3 / max(ms, 1e-3))))

    row["rounds"] = args.rounds
    rounds_ms = {k: [None] * args.rounds for k in list(inproc) + list(subproc)}
    isomer_info = {}
    predict_round = args.rounds // 2
    keys = list(inproc) + list(subproc)
    reps = {k: args.min_repeat for k in keys}
    row["repeats"] = {k: [] for k in keys}
    for r in range(args.rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for key in order:
            if key in inproc:
                E.settle()
                # In-process sessions stay warm between rounds: --warmup untimed runs in the first
                # round, one in later rounds (the other engines ran in between).
                warm = inproc[key].time(0, max(1, args.warmup if r == 0 else 1))
                if r == 0:
                    reps[key] = repeats(E.median(warm))
                rounds_ms[key][r] = E.median(inproc[key].time(0, reps[key]))
                row["repeats"][key].append(reps[key])
                reps[key] = repeats(rounds_ms[key][r])
                continue
            if key not in subproc:
                continue  # failed in an earlier round
            d = prep["dir"]
            if key == "isomer" and r == predict_round and "cost" in args.engines and "cost" not in row["errors"]:
                try:
                    row["prediction"] = E.isomer_cost(args.isomer, entry["path"], threads,
                                                      os.path.join(d, f"cost.t{threads}.json"), args.cost_db,
                                                      args.timeout)
                except E.CommandFailed as e:
                    row["errors"]["cost"] = str(e)
            E.settle()
            out_npz = os.path.join(d, f"{key}.t{threads}.out.npz") if r == 0 else None
            try:
                rep, wall = E.isomer_run(args.isomer, subproc[key], prep["inputs"], threads, args.warmup, reps[key],
                                         os.path.join(d, f"{key}.t{threads}.run.json"), out_npz, args.timeout)
            except E.CommandFailed as e:
                row["errors"][key] = str(e)
                del subproc[key]
                continue
            rounds_ms[key][r] = rep["latency_ms_median"]
            row["repeats"][key].append(reps[key])
            reps[key] = repeats(rounds_ms[key][r])
            info = isomer_info.setdefault(key, {"wall_seconds": []})
            info["wall_seconds"].append(round(wall, 2))
            for k in ("reference_steps", "openmp_waits", "steps", "onnxruntime_steps"):
                if k in rep:
                    info[k] = rep[k]
            if out_npz:
                row["max_rel_error"][key] = E.max_rel_error(E.load_npz_outputs(out_npz, names), reference)
        _progress(name, f"t={threads} round {r + 1}/{args.rounds}",
                  "  ".join(f"{k} {rounds_ms[k][r]:.2f}" for k in keys if rounds_ms[k][r] is not None) + " ms")

    row["latency_ms"] = {k: E.median([x for x in v if x is not None]) for k, v in rounds_ms.items()
                         if any(x is not None for x in v)}
    row["round_ms"] = rounds_ms
    row["speedup"], row["speedup_range"] = {}, {}
    for k in rounds_ms:
        if k == "ort":
            continue
        ratios = [o / e for o, e in zip(rounds_ms["ort"], rounds_ms[k]) if o is not None and e]
        if ratios:
            row["speedup"][k] = E.median(ratios)
            row["speedup_range"][k] = [min(ratios), max(ratios)]
    gains = [a / b for a, b in zip(rounds_ms.get("isomer", []), rounds_ms.get("isomer_opt", [])) if a and b]
    if gains:
        row["isomer_opt_gain"] = E.median(gains)
    gains = [a / b for a, b in zip(rounds_ms.get("isomer_opt", []), rounds_ms.get("isomer_eqsat", [])) if a and b]
    if gains:
        row["eqsat_gain"] = E.median(gains)
    gains = [a / b for a, b in zip(rounds_ms.get("ort_isomer", []), rounds_ms.get("ort_eqsat", [])) if a and b]
    if gains:
        row["eqsat_ort_gain"] = E.median(gains)
    pred = row.get("prediction")
    if pred is not None:
        measured = (rounds_ms.get("isomer") or [None] * args.rounds)[predict_round]
        pred["measured_ms"] = measured
        if measured and "total_ms" in pred:
            pred["error_pct"] = 100.0 * (pred["total_ms"] - measured) / measured
    row["isomer_run"] = isomer_info
    row["load_average_end"] = E.load_average()
    return row


# --- the run --------------------------------------------------------------------------
def machine_info():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "cpus": len(os.sched_getaffinity(0)), "memory_gib": mem, "kernel": platform.release(),
            "python": platform.python_version()}


def versions(isomer):
    import onnx
    import onnxruntime

    v = {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "numpy": np.__version__}
    for mod in ("onnxsim", "openvino"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # reported, the engine is skipped
            v[mod] = f"unavailable ({type(e).__name__}: {e})"
    try:
        v["isomer_commit"] = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=HERE,
                                            capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    v["isomer"] = os.path.abspath(isomer)
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isomer", default="build/isomer")
    ap.add_argument("--corpus", default="build/corpus", help="corpus directory with manifest.json (make corpus)")
    ap.add_argument("--only", default="", help="comma-separated model names (default: every model in the manifest)")
    ap.add_argument("--suite", default="", help="only this suite's models (corpus or taso)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help=f"comma-separated subset of {','.join(ENGINES)} (ONNX Runtime on the original always runs)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of alternating engines (default 4)")
    ap.add_argument("--repeat", type=int, default=10, help="most timed runs per engine per round (default 10)")
    ap.add_argument("--min-repeat", type=int, default=3, help="fewest timed runs per engine per round (default 3)")
    ap.add_argument("--round-seconds", type=float, default=1.0,
                    help="aim for about this many seconds per engine per round (default 1.0)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed runs before timing: every isomer run, and the first round of each in-process "
                         "engine (default 2)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 rounds, 2 repeats, 1 warm-up")
    ap.add_argument("--seed", type=int, default=0, help="seed of the inputs")
    ap.add_argument("--optimize-args", default="", help="extra arguments for isomer optimize (quoted)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds any one isomer or onnxsim command may take")
    ap.add_argument("--no-eqsat-warm", dest="eqsat_warm", action="store_false",
                    help="do not repeat the eqsat search on the filled cost database (its warm search time)")
    ap.add_argument("--cost-db", default="", help="cost database to use (default: a fresh one for this bench)")
    ap.add_argument("--torch-python", default=os.environ.get("ISOMER_TORCH_PYTHON", ""),
                    help="a Python with torch >= 2 for the torch_compile engine (default $ISOMER_TORCH_PYTHON; "
                         "none: the engine is skipped)")
    ap.add_argument("--work", default="build/bench", help="optimized models, inputs and reports go here")
    ap.add_argument("--json", default="build/bench.json")
    ap.add_argument("--png", default="build/bench.png", help="the plot ('' for none)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.repeat, args.min_repeat, args.warmup = 2, 2, 1, 1
    args.engines = {e.strip() for e in args.engines.split(",") if e.strip()}
    unknown = args.engines - set(ENGINES) - {"ort"}
    if unknown:
        ap.error(f"unknown engine(s) {', '.join(sorted(unknown))}; choose from {', '.join(ENGINES)}")
    threads_list = [int(t) for t in args.threads.split(",")]
    if not os.path.exists(os.path.join(args.corpus, "manifest.json")):
        sys.exit(f"{args.corpus}/manifest.json is missing: build the corpus first (make corpus)")
    manifest = load_manifest(args.corpus)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(manifest)
    missing = [n for n in names if n not in manifest]
    if missing:
        sys.exit(f"not in {args.corpus}/manifest.json: {', '.join(missing)} (make corpus builds them)")
    if args.suite:
        names = [n for n in names if args.suite in manifest[n]["suites"]]
    os.makedirs(args.work, exist_ok=True)
    if not args.cost_db:
        args.cost_db = os.path.join(args.work, f"costs.{os.getpid()}.sqlite")
    for mod, engine in (("openvino", "openvino"), ("onnxsim", "ort_onnxsim")):
        try:
            __import__(mod)
        except ImportError:
            print(f"bench: {mod} is not installed (pip install -r requirements-bench.txt): {engine} skipped")
            args.engines.discard(engine)
    if "torch_compile" in args.engines:
        args.torch_version = E.torch_version(args.torch_python)
        if not args.torch_version:
            print("bench: no Python with torch >= 2 (--torch-python, or $ISOMER_TORCH_PYTHON): torch_compile skipped")
            args.engines.discard("torch_compile")
    caps = {"target": E.isomer_has_option(args.isomer, "optimize", "--target")}

    started = datetime.datetime.now().astimezone()
    t0 = time.time()
    load_start = E.load_average()
    print(f"bench: {len(names)} models x threads {args.threads}, {args.rounds} rounds; engines "
          f"{','.join(e for e in ENGINES if e in args.engines)}; load {load_start}; isomer optimize --target: "
          f"{'yes' if caps['target'] else 'not offered by this build'}", flush=True)
    models, rows = {}, []
    for i, name in enumerate(names):
        entry = manifest[name]
        print(f"[{i + 1}/{len(names)}] {name} ({entry['family']})", flush=True)
        prep = prepare(entry, args, caps)
        models[name] = {"family": entry["family"], "suites": entry["suites"], "made": entry["made"],
                        "nodes": entry["nodes"], "params": entry["params"],
                        "inputs": entry["inputs"], "errors": prep["errors"]}
        for k in ("optimize", "optimize_onnxruntime", "onnxsim"):
            if k in prep:
                models[name][k] = prep[k]
        for threads in threads_list:
            try:
                row = measure(entry, prep, threads, args)
            except Exception as e:  # the baseline itself failed: the row says why
                row = {"model": name, "family": entry["family"], "suites": entry["suites"], "threads": threads,
                       "errors": {"ort": f"{type(e).__name__}: {e}"}}
            rows.append(row)
            print(report.row_line(row), flush=True)
    result = {
        "convention": report.CONVENTION,
        "started": started.isoformat(timespec="seconds"),
        "wall_seconds": round(time.time() - t0, 1),
        "load_average_start": load_start,
        "load_average_end": E.load_average(),
        "machine": machine_info(),
        "versions": {**versions(args.isomer), **({"torch": args.torch_version, "torch_python": args.torch_python}
                                                  if "torch_compile" in args.engines else {})},
        "settings": {"threads": threads_list, "rounds": args.rounds, "repeat": args.repeat,
                     "min_repeat": args.min_repeat, "round_seconds": args.round_seconds, "warmup": args.warmup,
                     "seed": args.seed, "engines": sorted(args.engines), "optimize_args": args.optimize_args,
                     "isomer_optimize_target": caps["target"], "corpus": os.path.abspath(args.corpus)},
        "models": models,
        "rows": rows,
    }
    result["summary"] = report.summarize(rows)
    print()
    print(report.table(result))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1, default=float)
    print(f"wrote {args.json}")
    if args.png:
        try:
            from bench_plot import plot
            plot(result, args.png)
            print(f"wrote {args.png}")
        except ImportError as e:
            print(f"bench: no plot ({e}; pip install -r requirements-bench.txt)")
    print(f"bench: {result['wall_seconds'] / 60:.1f} min, load {load_start} -> {result['load_average_end']}")


if __name__ == "__main__":
    main()
