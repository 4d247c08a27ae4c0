"""Checks and times the CUDA kernels of `isomer mugraph emit-cuda` on a GPU against PyTorch.

Input: a directory with one sub-directory per region model (made by
scripts/cuda_emit_regions.py: each holds manifest.json, the .cu files and the
constant inputs as raw float32). For each region:
  - nvcc -O3 -arch=sm_90a (--arch) builds the .cu into a shared library (all in
    parallel), loaded with ctypes;
  - inputs: the model's constants from the .bin files, the rest torch.randn (seed 0);
  - reference: the region's PyTorch program (the ONNX model's operators, by region
    kind) in float64 on the GPU; the kernel and PyTorch eager in float32 are both
    compared with it (max |x - ref| / max |ref|);
  - timing: CUDA events around batches of `--inner` calls, median of `--reps`
    batches after warm-up, for the kernel, PyTorch eager (the exporter's operator
    chain), the fused PyTorch operator where one exists (scaled_dot_product_attention,
    F.rms_norm) and torch.compile (default mode); each also replayed from a CUDA graph
    (no launch overhead), where capture works.
Writes OUT/cuda_bench.txt and OUT/cuda_bench.json as it goes (torch.compile last,
within --compile-budget seconds in all), so a run stopped early leaves results."""
import argparse
import concurrent.futures as cf
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


# --- the regions' programs in PyTorch (scripts/mugraph_regions.py's ONNX models) ---

def ref_rmsnorm(t):
    x, g = t["x"], t["gamma"]
    return g * (x * torch.reciprocal(torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)))


def ref_layernorm_gelu(t):
    x = t["x"]
    y = F.layer_norm(x, (x.shape[-1],), t["s"], t["b"], 1e-5)
    return y * (torch.erf(y / 1.4142135623730951) + 1) * 0.5


def ref_softmax(t):
    return torch.softmax(t["x"] * 0.125 + t["mask"], dim=-1)


def _expand_kv(t):
    q, k, v = t["q"], t["k"], t["v"]
    rep = q.shape[1] // k.shape[1]
    return q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)


def ref_attention(t):
    q, k, v = _expand_kv(t)
    c = float(q.shape[-1]) ** -0.25
    s = (q * c) @ (k.transpose(-1, -2) * c)
    if "mask" in t:
        s = s + t["mask"]
    return torch.softmax(s, dim=-1) @ v


def sdpa(t):
    return F.scaled_dot_product_attention(t["q"], t["k"], t["v"], is_causal="mask" in t, enable_gqa=True)


def rms_norm_op(t):
    return F.rms_norm(t["x"], (t["x"].shape[-1],), t["gamma"], 1e-6)


KINDS = [("attention_decode", ref_attention, ("sdpa", sdpa)), ("attention", ref_attention, ("sdpa", sdpa)),
         ("rmsnorm", ref_rmsnorm, ("F.rms_norm", rms_norm_op)), ("layernorm_gelu", ref_layernorm_gelu, None),
         ("softmax", ref_softmax, None)]


def kind_of(name):
    for k, ref, fused in KINDS:
        if name.startswith(k):
            return ref, fused
    raise SystemExit(f"no PyTorch program for region {name}")


# --- timing ---

def time_fn(fn, reps, inner, graph):
    """Median ms per call over `reps` batches of `inner` calls (CUDA events)."""
    if graph:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            for _ in range(inner):
                fn()
        run = g.replay
        per = inner
    else:
        run = fn
        per = 1
        for _ in range(5):
            fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        if graph:
            run()
        else:
            for _ in range(inner):
                run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / (per if graph else inner))
    return statistics.median(times)


def timings(fn, reps, inner):
    out = {"launch_ms": time_fn(fn, reps, inner, False)}
    try:
        out["graph_ms"] = time_fn(fn, reps, inner, True)
    except Exception as e:  # noqa: BLE001 - a capture failure is reported, not fatal
        out["graph_error"] = f"{type(e).__name__}: {e}"[:200]
    return out


def rel_err(x, ref):
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x[torch.isfinite(ref)]).all():
        return float("inf")
    return float((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


# --- the kernels ---

def build(cu, arch):
    so = cu[:-3] + ".so"
    cmd = ["nvcc", "-O3", f"-arch={arch}", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-o", so, cu]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    return so, p.returncode, (p.stdout + p.stderr)[-2000:], time.time() - t0


class Kernel:
    def __init__(self, so, region):
        self.lib = ctypes.CDLL(so)
        self.fn = getattr(self.lib, region["launcher"])
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.region = region

    def __call__(self, ins, outs):
        ip = (ctypes.c_void_p * len(ins))(*[t.data_ptr() for t in ins])
        op = (ctypes.c_void_p * len(outs))(*[t.data_ptr() for t in outs])
        rc = self.fn(ip, op, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc != 0:
            raise RuntimeError(f"{self.region['launcher']} returned CUDA error {rc}")


def fmt(v):
    return "-" if v is None else f"{v:.4f}"


def write_table(path, rows, header):
    cols = ["region", "cuda_ms", "eager_ms", "fused_op", "fused_ms", "compile_ms", "cuda_launch_ms", "eager_launch_ms",
            "err_cuda", "err_eager", "blocks", "smem_KB"]
    lines = [header, "", "  ".join(f"{c:>14}" if i else f"{c:<28}" for i, c in enumerate(cols))]
    for r in rows:
        vals = [r["region"], fmt(r.get("cuda", {}).get("graph_ms")), fmt(r.get("eager", {}).get("graph_ms")),
                r.get("fused_name", "-"), fmt(r.get("fused", {}).get("graph_ms")),
                fmt(r.get("compile", {}).get("graph_ms", r.get("compile", {}).get("launch_ms"))),
                fmt(r.get("cuda", {}).get("launch_ms")), fmt(r.get("eager", {}).get("launch_ms")),
                f"{r['err_cuda']:.2e}" if "err_cuda" in r else "-", f"{r['err_eager']:.2e}" if "err_eager" in r else "-",
                str(r.get("blocks", "-")), f"{r.get('smem_bytes', 0) / 1024:.1f}"]
        lines.append("  ".join(f"{v:>14}" if i else f"{v:<28}" for i, v in enumerate(vals)))
    notes = [r["region"] + ": " + r["note"] for r in rows if r.get("note")]
    with open(path, "w") as f:
        f.write("\n".join(lines + [""] + notes) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="regions")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--compile-budget", type=float, default=150)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--no-torch", action="store_true",
                    help="time the kernels only (a tiling sweep): no PyTorch eager, fused operator or torch.compile")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()
    dev = torch.cuda.get_device_properties(0)
    header = (f"μGraph CUDA kernels vs PyTorch {torch.__version__} on {dev.name} ({dev.multi_processor_count} SMs), "
              f"fp32 (TF32 off: matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}); ms per call, median of "
              f"{a.reps} batches of {a.inner} calls after warm-up, CUDA events, L2 warm; *_ms replayed from a CUDA "
              f"graph, *_launch_ms launched one by one from Python (ctypes for the kernel); err: max|x-ref|/max|ref| "
              f"against PyTorch in float64")
    names = sorted(d for d in os.listdir(a.dir) if os.path.isdir(os.path.join(a.dir, d)))
    if a.only:
        names = [n for n in names if n in a.only]
    regions = []
    for n in names:
        m = json.load(open(os.path.join(a.dir, n, "manifest.json")))
        for r in m["regions"]:
            regions.append((n, r))
    with cf.ThreadPoolExecutor(max_workers=max(8, os.cpu_count() or 8)) as ex:
        builds = list(ex.map(lambda nr: build(os.path.join(a.dir, nr[0], nr[1]["source"]), a.arch), regions))
    print(f"built {len(builds)} kernels in {time.time() - t_start:.1f} s", flush=True)
    rows = []
    torch.manual_seed(0)
    for (n, r), (so, rc, log, secs) in zip(regions, builds):
        row = {"region": n if len(regions) == len(names) else f"{n}/{r['name']}", "kernel": r["kernel"],
               "blocks": r["blocks"], "smem_bytes": r["smem_bytes"], "nvcc_s": round(secs, 1)}
        rows.append(row)
        if rc != 0:
            row["note"] = "nvcc failed: " + log
            print(row["note"], flush=True)
            continue
        try:
            ref_fn, fused = kind_of(n)
            t32 = {}
            ins = []
            for i in r["inputs"]:
                if "constant" in i:
                    arr = np.fromfile(os.path.join(a.dir, n, i["constant"]), dtype=np.float32).reshape(i["dims"])
                    x = torch.from_numpy(arr).cuda()
                else:
                    x = torch.randn(i["dims"], device="cuda", dtype=torch.float32)
                t32[i["name"]] = x
                ins.append(x)
            outs = [torch.full(o["dims"], float("nan"), device="cuda") for o in r["outputs"]]
            k = Kernel(so, r)
            k(ins, outs)
            torch.cuda.synchronize()
            ref = ref_fn({kk: v.double() for kk, v in t32.items()})
            eager = ref_fn(t32)
            row["err_cuda"] = rel_err(outs[0], ref)
            row["err_eager"] = rel_err(eager, ref)
            row["cuda"] = timings(lambda: k(ins, outs), a.reps, a.inner)
            if not a.no_torch:
                row["eager"] = timings(lambda: ref_fn(t32), a.reps, a.inner)
                if fused:
                    row["fused_name"] = fused[0]
                    row["err_fused"] = rel_err(fused[1](t32), ref)
                    row["fused"] = timings(lambda: fused[1](t32), a.reps, a.inner)
                row["_fn"] = (ref_fn, t32, ref)
        except Exception as e:  # noqa: BLE001 - reported in the table
            row["note"] = f"{type(e).__name__}: {e}"[:300]
        print(row["region"], {kk: v for kk, v in row.items() if not kk.startswith("_")}, flush=True)
        write_table(os.path.join(a.out, "cuda_bench.txt"), rows, header)
    # torch.compile last, within the budget.
    t_c = time.time()
    for row in rows:
        if "_fn" not in row:
            continue
        if time.time() - t_c > a.compile_budget:
            row.setdefault("note", "")
            row["note"] += " torch.compile not tried: budget spent"
            continue
        ref_fn, t32, ref = row["_fn"]
        try:
            c0 = time.time()
            cf_ = torch.compile(ref_fn)
            y = cf_(t32)
            torch.cuda.synchronize()
            row["compile_s"] = round(time.time() - c0, 1)
            row["err_compile"] = rel_err(y, ref)
            row["compile"] = timings(lambda: cf_(t32), a.reps, a.inner)
        except Exception as e:  # noqa: BLE001
            row["note"] = (row.get("note", "") + f" torch.compile failed: {type(e).__name__}: {e}")[:300]
        print(row["region"], "compile", row.get("compile"), row.get("compile_s"), flush=True)
        write_table(os.path.join(a.out, "cuda_bench.txt"), rows, header)
    for row in rows:
        row.pop("_fn", None)
    write_table(os.path.join(a.out, "cuda_bench.txt"), rows, header)
    with open(os.path.join(a.out, "cuda_bench.json"), "w") as f:
        json.dump({"header": header, "device": dev.name, "torch": torch.__version__, "rows": rows}, f, indent=1)
    print(open(os.path.join(a.out, "cuda_bench.txt")).read())
    print(f"total {time.time() - t_start:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
