"""The bench's summary (geomeans per column and per family, the worst model) and its
printed table."""
import math

CONVENTION = ("speedup = ONNX Runtime's latency on the original model / the engine's latency (median over rounds "
              "of the ratio within each round); above 1 is faster than ONNX Runtime on the original. "
              "isomer_opt_gain = isomer runtime on the original / on isomer's output (above 1: the output runs "
              "faster). prediction error_pct = (predicted - measured) / measured * 100, isomer runtime, original.")

# Speedup columns: (key in the row, table header, description).
COLUMNS = [
    ("isomer", "isomer", "isomer runtime, original"),
    ("isomer_opt", "iso(opt)", "isomer runtime, isomer optimize --search templates output"),
    ("isomer_eqsat", "iso(eqs)", "isomer runtime, isomer optimize output (--search eqsat, the default)"),
    ("ort_isomer", "ORT(opt)", "ONNX Runtime, isomer optimize --search templates output"),
    ("ort_eqsat", "ORT(eqs)", "ONNX Runtime, isomer optimize --search eqsat --target onnxruntime output"),
    ("ort_onnxsim", "ORT(sim)", "ONNX Runtime, onnxsim output"),
    ("openvino", "OpenVINO", "OpenVINO CPU, original"),
    ("torch_compile", "torch.c", "torch.compile (Inductor, CPU), original translated to torch"),
    ("isomer_opt_gain", "opt gain", "isomer runtime: original / templates output"),
    ("eqsat_gain", "eqs gain", "isomer runtime: templates output / default (eqsat) output"),
    ("eqsat_ort_gain", "eqs/ORT", "ONNX Runtime: optimize output / --search eqsat output (both --target onnxruntime)"),
]


def value(row, key):
    if key in ("isomer_opt_gain", "eqsat_gain", "eqsat_ort_gain"):
        return row.get(key)
    return row.get("speedup", {}).get(key)


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(rows):
    """Per thread count: for every column the geomean, the count and the worst model, the
    same per family; for the cost model the mean and worst absolute error."""
    out = {}
    for t in sorted({r["threads"] for r in rows}):
        rs = [r for r in rows if r["threads"] == t]
        s = {"models": len(rs), "columns": {}, "families": {}, "errors": {}}
        for key, _, desc in COLUMNS:
            vals = [(r["model"], value(r, key)) for r in rs if value(r, key) is not None]
            col = {"description": desc, "n": len(vals), "geomean": geomean([v for _, v in vals])}
            if vals:
                worst = min(vals, key=lambda mv: mv[1])
                col["worst"] = {"model": worst[0], "value": worst[1]}
                col["below_0.9"] = sorted(m for m, v in vals if v < 0.9)
            s["columns"][key] = col
        for fam in sorted({r["family"] for r in rs}):
            fr = [r for r in rs if r["family"] == fam]
            s["families"][fam] = {"n": len(fr), **{key: geomean([value(r, key) for r in fr]) for key, _, _ in COLUMNS}}
        errs = [(r["model"], r["prediction"]["error_pct"]) for r in rs
                if r.get("prediction", {}).get("error_pct") is not None]
        if errs:
            worst = max(errs, key=lambda me: abs(me[1]))
            s["prediction"] = {"n": len(errs), "mean_abs_error_pct": sum(abs(e) for _, e in errs) / len(errs),
                               "within_10pct": sum(1 for _, e in errs if abs(e) <= 10),
                               "worst": {"model": worst[0], "error_pct": worst[1]}}
        for r in rs:
            for k in r.get("errors", {}):
                s["errors"].setdefault(k, []).append(r["model"])
        out[str(t)] = s
    return out


def _fmt(x, width=8, spec=".2f"):
    return f"{'-':>{width}s}" if x is None else f"{x:{width}{spec}}"


def row_line(r):
    """One progress line for a finished row."""
    if "latency_ms" not in r:
        return f"  {r['model']:16s} t={r['threads']} ERROR {r['errors']}"
    parts = [f"ORT {r['latency_ms']['ort']:.2f} ms"]
    for key, head, _ in COLUMNS:
        v = value(r, key)
        if v is not None:
            parts.append(f"{head} {v:.2f}x")
        elif key in r.get("errors", {}):
            parts.append(f"{head} ERR")
    pe = r.get("prediction", {}).get("error_pct")
    if pe is not None:
        parts.append(f"pred {pe:+.0f}%")
    la, lb = r["load_average_start"][0], r["load_average_end"][0]
    return f"  {r['model']:16s} t={r['threads']} " + "  ".join(parts) + f"  load {la:.1f}-{lb:.1f}"


def table(result):
    lines = [f"Speedup over ONNX Runtime {result['versions'].get('onnxruntime', '')} on the original model "
             "(ORT ms / engine ms, median of per-round ratios; >1 = faster than ORT). "
             "opt gain = isomer runtime original/output; pred err = isomer cost vs measured.",
             f"machine: {result['machine']['cpu']}, {result['machine']['cpus']} cpus; load average "
             f"{result['load_average_start'][0]:.1f} at start, {result['load_average_end'][0]:.1f} at end"]
    cpus = result["machine"]["cpus"]
    busiest = max([result["load_average_start"][0], result["load_average_end"][0]]
                  + [r["load_average_end"][0] for r in result["rows"] if "load_average_end" in r])
    if busiest > cpus:
        lines.append(f"WARNING: the machine was busy (load average up to {busiest:.1f} on {cpus} cpus): the ratios are "
                     "noisy, those at more than one thread most (spinning pool threads lose their cores)")
    heads = "".join(f"{h:>9s}" for _, h, _ in COLUMNS)
    header = f"{'model':16s} {'family':11s} {'ORT ms':>8s}{heads} {'pred err':>8s} {'load':>9s} {'max rel err':>11s}"
    note = "max rel err: the worst engine's outputs against ONNX Runtime's on the original (named above 1e-3)"
    for t, s in result["summary"].items():
        rows = [r for r in result["rows"] if str(r["threads"]) == t]
        lines += ["", f"threads {t}; {note}", header, "-" * len(header)]
        for r in rows:
            if "latency_ms" not in r:
                lines.append(f"{r['model']:16s} {r['family']:11s} baseline failed: {r['errors']}")
                continue
            cells = ""
            for key, _, _ in COLUMNS:
                v = value(r, key)
                cells += f"{'ERR':>9s}" if v is None and _errored(r, key) else f" {_fmt(v)}"
            pe = r.get("prediction", {}).get("error_pct")
            pe_s = f"{pe:+7.1f}%" if pe is not None else ("     ERR" if "cost" in r["errors"] else "       -")
            errs = r.get("max_rel_error", {})
            worst = max(errs.items(), key=lambda kv: kv[1]) if errs else None
            err_s = f"{worst[1]:11.1e}" if worst else f"{'-':>11s}"
            if worst and worst[1] > 1e-3:
                err_s += f" ({worst[0]})"
            load = f"{r['load_average_start'][0]:4.1f}-{r['load_average_end'][0]:<4.1f}"
            lines.append(f"{r['model']:16s} {r['family']:11s} {r['latency_ms']['ort']:8.2f}{cells} {pe_s} {load:>9s} "
                         f"{err_s}")
        lines.append("-" * len(header))
        lines.append(_summary_line(f"geomean ({s['models']})", s["columns"]))
        for fam, f in s["families"].items():
            lines.append(_summary_line(f"  {fam} ({f['n']})", {k: {"geomean": f[k]} for k, _, _ in COLUMNS}))
        worst = "".join(f"{(c['worst']['model'][:8] if 'worst' in c else '-'):>9s}" for c in s["columns"].values())
        lines.append(f"{'worst model':16s} {'':11s} {'':8s}{worst}")
        worst_v = "".join(f" {_fmt(c['worst']['value'] if 'worst' in c else None)}" for c in s["columns"].values())
        lines.append(f"{'worst value':16s} {'':11s} {'':8s}{worst_v}")
        if "prediction" in s:
            p = s["prediction"]
            lines.append(f"prediction: mean |error| {p['mean_abs_error_pct']:.1f}%, {p['within_10pct']}/{p['n']} "
                         f"within 10%, worst {p['worst']['model']} {p['worst']['error_pct']:+.1f}%")
        errors = [(r["model"], k, v) for r in rows for k, v in r.get("errors", {}).items()]
        if errors:
            lines.append("errors:")
            seen = set()
            for m, k, v in errors:
                msg = " | ".join(v.splitlines())
                if (m, k, msg) in seen:
                    continue
                seen.add((m, k, msg))
                lines.append(f"  {m} {k}: {msg[:400]}")
    lines += eqsat_table(result)
    return "\n".join(lines)


def eqsat_table(result):
    """Per model, `--search eqsat`'s search (once per model: the first thread count's row)."""
    rows, seen = [], set()
    for r in result["rows"]:
        if r.get("eqsat") and r["model"] not in seen:
            seen.add(r["model"])
            rows.append(r)
    if not rows:
        return []
    head = (f"{'model':16s} {'search s':>8s} {'warm s':>7s} {'cpu s':>7s} {'satur s':>8s} {'price s':>8s} {'extr s':>7s} "
            f"{'nodes':>6s} {'gap':>6s} {'stop':>12s}  rules in the result")
    lines = ["", "--search eqsat (search s = saturation + pricing + extraction, wall clock, as the bench's eqsat run "
                 "took it, with the cost database only the templates run had filled; warm s = the same search "
                 "repeated on the filled database; cpu s = the search's processor time; pricing times new shapes "
                 "on this machine)", head, "-" * len(head)]
    for r in rows:
        e = r["eqsat"]

        def num(k, fmt):
            v = e.get(k)
            return format(v, fmt) if isinstance(v, (int, float)) and v is not None and v >= 0 else "-"
        gap = e.get("search_extraction_gap")
        gap_s = f"{100 * gap:5.1f}%" if isinstance(gap, (int, float)) and gap >= 0 else "-"
        rules = ", ".join(f"{k} {v}" for k, v in sorted((e.get("rules_applied") or {}).items()))
        lines.append(f"{r['model']:16s} {num('search_seconds', '8.2f'):>8s} {num('warm_search_seconds', '7.2f'):>7s} "
                     f"{num('search_cpu_seconds', '7.2f'):>7s} "
                     f"{num('search_saturation_seconds', '8.2f'):>8s} "
                     f"{num('search_pricing_seconds', '8.2f'):>8s} {num('search_extraction_seconds', '7.2f'):>7s} "
                     f"{num('search_egraph_nodes', 'd'):>6s} {gap_s:>6s} {str(e.get('search_stop_reason') or '-'):>12s}  "
                     f"{rules[:120] or '(input kept)'}")
    return lines


def _errored(r, key):
    errs = r.get("errors", {})
    if key == "isomer_opt_gain":
        return "isomer" in errs or "isomer_opt" in errs
    if key == "eqsat_gain":
        return "isomer_opt" in errs or "isomer_eqsat" in errs
    if key == "eqsat_ort_gain":
        return "ort_isomer" in errs or "ort_eqsat" in errs
    return key in errs


def _summary_line(label, cols):
    cells = "".join(f" {_fmt(cols[k].get('geomean'))}" for k, _, _ in COLUMNS)
    return f"{label:16s} {'':11s} {'':8s}{cells}"
