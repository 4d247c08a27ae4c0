#!/usr/bin/env python3
"""isomer's runtime against ONNX Runtime on the recurrent probes (export_rnn_probes.py).

Each model, at each thread count, is timed by `isomer run --bench` (isomer, then ONNX
Runtime, in one process) `--rounds` times, the rounds of all models and thread counts
interleaved; a cell is the median of its rounds' isomer/ONNX Runtime ratios (each a
ratio of medians). With --vs a second isomer binary (the baseline) runs right after
each round of the first, and its ratios fill a second column. The load average is
printed before and after.

    .venv/bin/python scripts/bench_rnn_probes.py --dir build/rnn_probes [--vs /tmp/isomer_base]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import tempfile


def ratio(binary, model, threads, repeat):
    # A nonzero exit may only say the outputs differ (a quantized model's roundings): the timings stand.
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "run", model, "--bench", "--threads", str(threads), "--repeat", str(repeat),
                        "--report-json", f.name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = json.load(open(f.name))
    return r["latency_ms_median"], r["onnxruntime"]["latency_ms_median"]


def load():
    return open("/proc/loadavg").read().split()[:3]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--bin", default="build/isomer")
    ap.add_argument("--vs", default="", help="a baseline isomer binary")
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    models = [m for m in sorted(glob.glob(os.path.join(args.dir, "*.onnx")))
              if not only or os.path.basename(m)[:-5] in only]
    threads = [int(t) for t in args.threads.split(",")]
    bins = [args.bin] + ([args.vs] if args.vs else [])
    results = {}  # (model, threads, binary) -> [(isomer ms, ort ms)]
    print("load average before:", " ".join(load()))
    for _ in range(args.rounds):
        for m in models:
            for t in threads:
                for b in bins:
                    results.setdefault((m, t, b), []).append(ratio(b, m, t, args.repeat))
    print("load average after:", " ".join(load()))
    head = "| model | threads | isomer ms | ORT ms | isomer/ORT |" + (" baseline/ORT |" if args.vs else "")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for m in models:
        for t in threads:
            row = results[(m, t, bins[0])]
            cells = [os.path.basename(m)[:-5], str(t), f"{statistics.median(r[0] for r in row):.3f}",
                     f"{statistics.median(r[1] for r in row):.3f}", f"{statistics.median(r[0] / r[1] for r in row):.2f}"]
            if args.vs:
                base = results[(m, t, bins[1])]
                cells.append(f"{statistics.median(r[0] / r[1] for r in base):.2f}")
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
