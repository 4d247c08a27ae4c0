"""The engines the bench runs side by side, and the steps that prepare their models.

In-process (timed with perf_counter around run()): ONNX Runtime and OpenVINO.
As subprocesses (the CLI a user runs): `isomer run --bench`, `isomer optimize`,
`isomer cost`, and onnxsim (isolated: a crash or hang in it must not end the bench).
"""
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def load_average():
    """The 1-, 5- and 15-minute load averages: every number is only as good as the
    machine was quiet."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return [float("nan")] * 3


def settle(timeout_s=1.0):
    """Waits until no other thread of this process is running. ONNX Runtime's and
    OpenVINO's pool threads spin for a while after each run; `isomer run` started while
    they spin shares its cores with them (and sees a busy machine). Other processes'
    load is recorded, not waited for: on a shared machine it may never end."""
    end = time.monotonic() + timeout_s
    me = str(os.getpid())
    while time.monotonic() < end:
        busy = False
        try:
            for tid in os.listdir("/proc/self/task"):
                if tid == me:
                    continue
                with open(f"/proc/self/task/{tid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "R":
                        busy = True
                        break
        except OSError:
            return
        if not busy:
            return
        time.sleep(0.005)


def max_rel_error(got, want):
    """max |got - want| / max |want| over every output (by position); inf on a shape
    mismatch or a missing output."""
    worst = 0.0
    if len(got) != len(want):
        return float("inf")
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return float("inf")
        if g.size == 0:
            continue
        err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
        scale = max(float(np.max(np.abs(w.astype(np.float64)))), 1e-30)
        worst = max(worst, err / scale)
    return worst


def time_calls(fn, warmup, repeat):
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


# --- ONNX Runtime ------------------------------------------------------------------
class OrtEngine:
    """ONNX Runtime, CPU, all graph optimizations, intra-op threads = t, inter-op 1."""

    def __init__(self, path, threads, feeds):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        names = {i.name for i in self.sess.get_inputs()}
        self.feeds = {k: v for k, v in feeds.items() if k in names}
        self.output_names = [o.name for o in self.sess.get_outputs()]

    def run(self):
        return self.sess.run(None, self.feeds)

    def time(self, warmup, repeat):
        return time_calls(self.run, warmup, repeat)


# --- OpenVINO ------------------------------------------------------------------------
class OpenVinoEngine:
    """OpenVINO's CPU plugin with INFERENCE_NUM_THREADS = t, the latency hint, and f32
    inference precision (it would otherwise pick bf16 where the CPU has it). A model
    with dynamic dimensions is reshaped to the bench's input shapes first."""

    def __init__(self, path, threads, feeds):
        import openvino as ov

        core = ov.Core()
        model = core.read_model(path)
        if any(p.get_partial_shape().is_dynamic for p in model.inputs):
            model.reshape({p.get_any_name(): list(feeds[p.get_any_name()].shape) for p in model.inputs})
        config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                  "INFERENCE_PRECISION_HINT": "f32"}
        self.compiled = core.compile_model(model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.feeds = {p.get_any_name(): feeds[p.get_any_name()] for p in self.compiled.inputs}

    def run(self):
        self.request.infer(self.feeds)
        return [self.request.get_output_tensor(i).data.copy() for i in range(len(self.compiled.outputs))]

    def _infer(self):
        self.request.infer(self.feeds)

    def time(self, warmup, repeat):
        return time_calls(self._infer, warmup, repeat)


# --- torch.compile ---------------------------------------------------------------
TORCH_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "torch_compile_onnx.py")


def torch_version(python):
    """torch's version under `python` if it is 2 or later, else None."""
    if not python:
        return None
    try:
        out = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, timeout=120).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out if out and out.split(".")[0].isdigit() and int(out.split(".")[0]) >= 2 else None


class TorchCompileEngine:
    """torch.compile (Inductor, CPU) on the model translated node by node into a torch
    module (scripts/torch_compile_onnx.py), in a server process under `python`, a
    Python with torch >= 2 (not isomer's venv: torch with its wheels is gigabytes).
    It compiles once; each time() asks the server for timed runs, so the engine
    interleaves with the others like an in-process one."""

    def __init__(self, path, threads, feeds, python, timeout=900):
        self._dir = tempfile.mkdtemp(prefix="isomer-torch-")
        inputs, self._outputs = os.path.join(self._dir, "in.npz"), os.path.join(self._dir, "out.npz")
        np.savez(inputs, **feeds)
        self._log = os.path.join(self._dir, "stderr.txt")  # a file: torch's warnings must not fill a pipe
        with open(self._log, "w") as log:
            self.proc = subprocess.Popen([python, TORCH_SCRIPT, path, "--inputs", inputs, "--threads", str(threads),
                                          "--outputs", self._outputs, "--serve"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True)
        self._timeout = timeout
        line = self._read()
        if not line:
            self.proc.kill()
            with open(self._log) as f:
                lines = [x for x in f.read().splitlines() if x.strip() and "CUDA" not in x]
            raise RuntimeError("torch.compile: " + (lines[-1] if lines else "no answer"))
        self.info = json.loads(line)
        with np.load(self._outputs) as z:
            self._result = [z[k] for k in z.files]

    def _read(self):
        ready, _, _ = select.select([self.proc.stdout], [], [], self._timeout)
        return self.proc.stdout.readline() if ready else ""

    def run(self):
        return self._result

    def time(self, warmup, repeat):
        self.proc.stdin.write(f"time {warmup} {repeat}\n")
        self.proc.stdin.flush()
        line = self._read()
        if not line:
            raise RuntimeError("torch.compile server stopped answering")
        return json.loads(line)

    def __del__(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
        shutil.rmtree(self._dir, ignore_errors=True)


# --- isomer's CLI --------------------------------------------------------------------
class CommandFailed(RuntimeError):
    pass


def _last_lines(text, n=6):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def run_command(cmd, timeout):
    """Runs cmd; returns (stdout, seconds). Raises CommandFailed with the exit status and
    the last lines of its output (the message a user would see)."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
    seconds = time.time() - t0
    if p.returncode != 0:
        msg = _last_lines(p.stderr) or _last_lines(p.stdout)
        raise CommandFailed(f"exit {p.returncode}: {msg}")
    return p.stdout, seconds


def isomer_has_option(isomer, command, option):
    try:
        p = subprocess.run([isomer, command, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in p.stdout


# Fields of `isomer optimize --report-json` the bench reads when the build writes them
# (the never-slower guard's); every other field is carried into the bench JSON as well,
# less these bulky or path-like ones.
GUARD_FIELDS = ["target", "latency_before_ms", "latency_after_ms", "kept", "reverted", "phase_seconds"]
OPTIMIZE_SKIP = {"input", "output", "op_types_before", "op_types_after"}


def isomer_optimize(isomer, model, out, report, extra_args, timeout):
    """`isomer optimize model -o out --report-json report [extra]`: returns a dict with the
    wall seconds, the report's fields and the printed time line."""
    stdout, seconds = run_command([isomer, "optimize", model, "-o", out, "--report-json", report] + extra_args,
                                  timeout)
    with open(report) as f:
        rep = json.load(f)
    result = {"seconds": round(seconds, 2), "args": extra_args}
    result.update({k: v for k, v in rep.items() if k not in OPTIMIZE_SKIP})
    result["guard_fields_missing"] = [k for k in GUARD_FIELDS if k not in rep]
    result["printed"] = [line.strip() for line in stdout.splitlines()
                         if line.startswith(("time", "check", "kept", "guard", "wrote", "target"))]
    return result


def isomer_run(isomer, model, inputs, threads, warmup, repeat, report, outputs, timeout):
    """`isomer run --bench` on isomer's runtime only; returns (report dict, wall seconds)."""
    cmd = [isomer, "run", model, "--inputs", inputs, "--bench", "--no-onnxruntime", "--threads", str(threads),
           "--repeat", str(repeat), "--warmup", str(warmup), "--report-json", report]
    if outputs:
        cmd += ["--outputs", outputs]
    _, seconds = run_command(cmd, timeout)
    with open(report) as f:
        return json.load(f), seconds


def isomer_cost(isomer, model, threads, report, cost_db, timeout):
    _, seconds = run_command([isomer, "cost", model, "--threads", str(threads), "--report-json", report, "-q",
                              "--cost-db", cost_db], timeout)
    with open(report) as f:
        rep = json.load(f)
    rep["seconds"] = round(seconds, 2)
    return rep


def load_npz_outputs(path, names):
    """Outputs written by `isomer run --outputs`, in the order of `names` (the original's
    output names; isomer keeps them)."""
    with np.load(path) as z:
        if all(n in z.files for n in names):
            return [z[n] for n in names]
        return [z[k] for k in z.files]


# --- onnxsim ---------------------------------------------------------------------------
_SIMPLIFY = r"""
import os, sys, onnx, onnxsim
src, dst = sys.argv[1], sys.argv[2]
model = onnx.load(src)
out, ok = onnxsim.simplify(model)
if not ok:
    sys.exit("onnxsim: the simplified model failed its own check")
external = os.path.exists(src + ".data") or out.ByteSize() > 1_500_000_000
for f in (dst, dst + ".data"):
    if os.path.exists(f):
        os.remove(f)
if external:
    onnx.save_model(out, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=os.path.basename(dst) + ".data", size_threshold=1024)
else:
    onnx.save_model(out, dst)
print(len(model.graph.node), len(out.graph.node))
"""


def onnxsim_simplify(model, out, timeout):
    """onnxsim with its defaults (what `onnxsim in.onnx out.onnx` does), in a child
    process; returns a dict with seconds and node counts."""
    stdout, seconds = run_command([sys.executable, "-c", _SIMPLIFY, model, out], timeout)
    before, after = (int(x) for x in stdout.split()[-2:])
    return {"seconds": round(seconds, 2), "nodes_before": before, "nodes_after": after}


def median(xs):
    return statistics.median(xs) if xs else float("nan")
