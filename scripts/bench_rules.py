#!/usr/bin/env python3
"""The rule generator's figures: `isomer rules generate --max-ops N` for each N asked
for, with the count and time of every stage, the verdicts, wall time and peak
memory, and whether the output is byte-identical to a second run with --jobs 1
(--determinism; doubles the time). Prints a table and writes build/bench_rules.json.

The reference point (issue #3): TASO's generator needs 2 min 13 s and 7.1 GB for
graphs of up to 3 operators; isomer's targets on 2 cores are N=3 under 30 s and
1 GB, N=4 under 30 minutes.

    .venv/bin/python scripts/bench_rules.py --isomer build/isomer --max-ops 3,4
"""
import argparse
import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from bench import load_average  # scripts/bench.py

STAGES = ["enumerated", "distinct", "candidate_pairs", "rechecked", "loaded", "after_implied", "proved", "tested",
          "refuted", "unknown", "written"]


def generate(isomer, n, jobs, out, report):
    cmd = [isomer, "rules", "generate", "--max-ops", str(n), "-o", out, "--report-json", report, "--quiet"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(" ".join(cmd) + ":\n" + p.stderr.strip())
    with open(out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return wall, digest, json.load(open(report))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--isomer", default="build/isomer")
    ap.add_argument("--max-ops", default="3", help="comma-separated N (4 takes minutes)")
    ap.add_argument("--determinism", action="store_true", help="run again with --jobs 1 and compare the files")
    ap.add_argument("--json", default="build/bench_rules.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.max_ops.split(",")]:
            load_start = load_average()
            out, report = os.path.join(tmp, f"n{n}.rules"), os.path.join(tmp, f"n{n}.json")
            wall, digest, r = generate(args.isomer, n, 0, out, report)
            row = {"max_ops": n, "wall_seconds": wall, "peak_rss_mib": r["peak_rss_mib"], "counts": r["counts"],
                   "stage_seconds": r["seconds"], "sha256": digest, "cpus": len(os.sched_getaffinity(0)),
                   "load_average_start": load_start, "load_average_end": load_average()}
            unknown = [x for x in r["rules"] if x["verdict"] == "unknown"]
            # Reasons without the instance they came from, with how many rules gave each.
            reasons = collections.Counter(re.sub(r"at verify-shapes \d+: ", "", x["reason"]) for x in unknown)
            row["unknown_reasons"] = dict(reasons.most_common())
            if args.determinism:
                _, digest1, _ = generate(args.isomer, n, 1, out + ".j1", report + ".j1")
                row["identical_with_jobs_1"] = digest1 == digest
            rows.append(row)
            c, s = r["counts"], r["seconds"]
            print(f"N={n}: {wall:.1f} s wall, peak RSS {r['peak_rss_mib']:.0f} MiB, "
                  f"load {row['load_average_start']:.1f}-{row['load_average_end']:.1f}", flush=True)
            for stage in STAGES:
                if stage in c:
                    print(f"  {stage:16s} {c[stage]:>12,}")
            print("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in s.items()))
            if unknown:
                print(f"  unknown ({len(unknown)}):")
                for reason, k in row["unknown_reasons"].items():
                    print(f"    {k:>6,}  {reason}")
            if args.determinism:
                print(f"  byte-identical with --jobs 1: {row['identical_with_jobs_1']}")
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"rows": rows}, f, indent=2)
    print(f"wrote {args.json}")
    if args.determinism and not all(r["identical_with_jobs_1"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
