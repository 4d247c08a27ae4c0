# ONNX Runtime for isomer: the Python side of the one bridge (bridge/bridge.h).
#
# isomer starts this script once per process with the project's Python
# (find_python()), its stdin and stdout a socket to isomer, its stderr a log file.
# The build embeds this file into the library, so the CLI, the Python module and
# the tests all speak to the same script, wherever isomer is installed.
#
# Frames, both ways: a 4-byte little-endian length, a JSON header of that length,
# then the binary blobs whose byte counts the header lists in "lens". Tensors are
# raw row-major bytes with a dtype code (ONNX TensorProto.DataType, which isomer's
# DType follows) and dims. Every request gets one reply; a failure is a reply
# {"ok": false, "error": "<last line of the message>"}, never a dead process.
#
# Requests:
#   load  {model_path_hex (the path's bytes) | one blob, threads, optimization, spinning, probe?}
#         -> {id, inputs: [[name, dtype, dims]], outputs: [name], output_types, probes?}
#         output_types: per output [dtype, dims], dims null where unranked, each an
#         extent, a symbol's name or null (ONNX Runtime's own type inference)
#   run   {id, names?, dtypes, dims, lens} + input blobs
#         -> {names, dtypes, dims, lens} + output blobs (the header encoded once per
#         session and output types)
#   time  {id, names?, dtypes, dims, lens, warmup, repeats, clock?} + input blobs -> {ms: [...], clock}
#         clock "wall" (the default) or "processor": at 1 intra-op thread the calling
#         thread's CPU time (the run computes in it), else this process's; the reply
#         names the clock read ("wall", "thread" or "process")
#   free  {id} -> {}
#   operators {domain} -> {operators: [[name, since_version]]}: the schemas ONNX Runtime
#         registers in that domain (its contrib operators, for com.microsoft)
import json
import os
import struct
import sys
import time

sock_in = os.fdopen(os.dup(0), "rb")
sock_out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)  # stdout is the protocol's: whatever a library prints goes to the log

try:
    import numpy as np
    import onnxruntime as ort
    import_error = None
except Exception as e:  # reported in the hello reply: isomer says why ONNX Runtime is unavailable
    import_error = "%s: %s" % (type(e).__name__, e)

# ONNX element type codes -> numpy dtypes (what .npz holds; bfloat16 and strings
# have no numpy type and are refused by isomer before they get here).
TYPES = {}
if import_error is None:
    TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
             9: np.bool_, 10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64}
CODES = {np.dtype(v): k for k, v in TYPES.items()}
ORT_TYPES = {"tensor(float)": 1, "tensor(uint8)": 2, "tensor(int8)": 3, "tensor(uint16)": 4, "tensor(int16)": 5,
             "tensor(int32)": 6, "tensor(int64)": 7, "tensor(string)": 8, "tensor(bool)": 9, "tensor(float16)": 10,
             "tensor(double)": 11, "tensor(uint32)": 12, "tensor(uint64)": 13, "tensor(bfloat16)": 16}


def read(n):
    b = bytearray()
    while len(b) < n:
        c = sock_in.read(n - len(b))
        if not c:
            sys.exit(0)  # isomer closed the socket: it is done with us
        b += c
    return bytes(b)


def reply(header, blobs=()):
    data = header if isinstance(header, bytes) else json.dumps(header).encode()
    sock_out.write(struct.pack("<I", len(data)) + data)
    for b in blobs:
        sock_out.write(b)
    sock_out.flush()


def session_options(h):
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[h.get("optimization", "all")]
    if h.get("threads", 0) > 0:
        so.intra_op_num_threads = h["threads"]
        so.inter_op_num_threads = 1
    if not h.get("spinning", True):
        # isomer's own threads run right after a delegated node: ours must not spin.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return so


def dims_of(shape):
    return [d if isinstance(d, int) else -1 for d in shape]


def code_of(o, r):
    """The type code of output `o`'s value `r`, or 0 where numpy's type is not what the
    session declares: ONNX Runtime hands float8 and int4 tensors to Python as uint8 and
    int8 arrays, whose bytes mean other numbers."""
    code = CODES.get(r.dtype, 0)
    return code if ORT_TYPES.get(o.type, 0) == code else 0


def probe(s, h):
    """Output types from runs on inputs of the given types: all zeros, all ones, and
    distinct values in [0, 1) (integers: 0, 1, 2, 0, ...). A later run that fails
    (ones as indices, say) is left out; the first must succeed."""
    probes = []
    for fill in ("zeros", "ones", "distinct"):
        feeds = {}
        for i, t, d in zip(s.get_inputs(), h["dtypes"], h["dims"]):
            n = int(np.prod(d))
            v = {"zeros": np.zeros(n), "ones": np.ones(n),
                 "distinct": (np.arange(n) % 3 if np.dtype(TYPES[t]).kind in "iub" else
                              np.random.default_rng(n).permutation(n) / max(n, 1))}[fill]
            feeds[i.name] = v.astype(TYPES[t]).reshape(d)
        try:
            probes.append([[code_of(o, np.asarray(r)), list(np.shape(r))]
                           for o, r in zip(s.get_outputs(), s.run(None, feeds))])
        except Exception:
            if not probes:
                raise
    return probes


def feeds_of(s, h, blobs):
    names = h.get("names") or [i.name for i in s.get_inputs()]
    return {n: np.frombuffer(b, dtype=TYPES[t]).reshape(d) for n, b, t, d in zip(names, blobs, h["dtypes"], h["dims"])}


# Per session, the reply headers of its runs by the outputs' types, encoded once:
# json.dumps of a run's header took 6.5 us, a fifth of a delegated node's round trip.
run_replies = {}
# Per session, the intra-op threads it was loaded with (0: ONNX Runtime's default).
session_threads = {}

# What a "processor" timing reads: time taken from the run by other processes on a
# busy machine does not count there, as it does on the wall clock (inception v3 at
# load 13-20 on 2 cores: a band of +-8% around a 3% slowdown on the wall clock).
CLOCKS = {"wall": time.perf_counter_ns, "thread": time.thread_time_ns, "process": time.process_time_ns}


def load_session(h, blobs):
    if "model_path_hex" not in h:
        return ort.InferenceSession(blobs[0], session_options(h), providers=["CPUExecutionProvider"])
    path = bytes.fromhex(h["model_path_hex"])
    try:
        return ort.InferenceSession(path.decode("utf-8"), session_options(h), providers=["CPUExecutionProvider"])
    except UnicodeDecodeError:
        pass
    # A path that is not UTF-8 (Linux file names are bytes) is no str ONNX Runtime's
    # binding takes: the model goes as bytes, loaded from its directory, which is named
    # (as ".") where ONNX Runtime looks for its external data.
    with open(path, "rb") as f:
        model = f.read()
    so = session_options(h)
    so.add_session_config_entry("session.model_external_initializers_file_folder_path", ".")
    here = os.getcwd()
    os.chdir(os.path.dirname(path) or b".")
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    finally:
        os.chdir(here)


def handle(h, blobs, sessions):
    op = h["op"]
    if op == "load":
        s = load_session(h, blobs)
        sid = max(sessions, default=-1) + 1
        sessions[sid] = s
        session_threads[sid] = h.get("threads", 0)
        run_replies[sid] = {}
        out = {"id": sid, "inputs": [[i.name, ORT_TYPES.get(i.type, 0), dims_of(i.shape)] for i in s.get_inputs()],
               "outputs": [o.name for o in s.get_outputs()],
               "output_types": [[ORT_TYPES.get(o.type, 0), None if o.shape is None else
                                 [d if isinstance(d, (int, str)) else None for d in o.shape]]
                                for o in s.get_outputs()]}
        if "probe" in h:
            out["probes"] = probe(s, h["probe"])
        return out, []
    if op == "free":
        sessions.pop(h["id"], None)
        session_threads.pop(h["id"], None)
        run_replies.pop(h["id"], None)
        return {}, []
    if op == "operators":
        from onnxruntime.capi import onnxruntime_pybind11_state as C
        return {"operators": [[o.name, o.since_version] for o in C.get_all_operator_schema()
                              if o.domain == h["domain"]]}, []
    s = sessions[h["id"]]
    feeds = feeds_of(s, h, blobs)
    if op == "run":
        res = [np.asarray(r, order="C") for r in s.run(None, feeds)]  # 0-d stays 0-d
        replies = run_replies[h["id"]]
        key = tuple((r.dtype, r.shape) for r in res)
        if key not in replies:
            for o, r in zip(s.get_outputs(), res):
                if not code_of(o, r):
                    raise TypeError("output '%s' has type %s, which isomer cannot take" % (o.name, o.type))
            if len(replies) > 64:  # outputs whose shapes follow the data: keep a few
                replies.clear()
            replies[key] = json.dumps({"names": [o.name for o in s.get_outputs()],
                                       "dtypes": [CODES[r.dtype] for r in res], "dims": [list(r.shape) for r in res],
                                       "lens": [r.nbytes for r in res], "ok": True}).encode()
        return replies[key], [r.tobytes() for r in res]
    if op == "time":
        for _ in range(h["warmup"]):
            s.run(None, feeds)
        clock = "wall" if h.get("clock", "wall") == "wall" else "thread" if session_threads[h["id"]] == 1 else "process"
        now = CLOCKS[clock]
        ms = []
        for _ in range(max(h["repeats"], 1)):
            t0 = now()
            s.run(None, feeds)
            ms.append((now() - t0) * 1e-6)
        return {"ms": ms, "clock": clock}, []
    raise ValueError("unknown request '%s'" % op)


def main():
    if import_error is not None:
        reply({"ok": False, "error": import_error})
        return
    reply({"ok": True, "version": ort.__version__, "python": sys.version.split()[0]})
    sessions = {}
    while True:
        h = json.loads(read(struct.unpack("<I", read(4))[0]))
        blobs = [read(n) for n in h.get("lens", [])]
        try:
            header, out = handle(h, blobs, sessions)
            if isinstance(header, dict):
                header["ok"] = True
            reply(header, out)
        except Exception as e:
            lines = [line for line in str(e).splitlines() if line.strip()]
            reply({"ok": False, "error": lines[-1] if lines else type(e).__name__})


main()
