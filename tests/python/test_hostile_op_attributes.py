"""Every operator of isomer's table, driven with bad attributes from real ONNX models.

For each operator in the registry (isomer.operators()), one of ONNX's own node test cases
(Debian's libonnx-testdata) is the baseline; each of the operator's attributes is set, in
turn, to values ONNX forbids or no input can satisfy (negative, zero, huge, empty or
overlong lists, unknown strings). ONNX Runtime is the reference: a mutant it refuses
(when it loads the model or runs it on the case's own inputs) must be refused by isomer's
import too, with one "isomer: error:" line that names the file and the node, never kept
(as an opaque node `optimize` would pass through unchecked), and never a crash. A mutant
ONNX Runtime runs must not be refused by isomer.

Where isomer's verdict differs from ONNX Runtime's for a reason ONNX's specification
leaves open, differs() says why and the mutant is not held to ONNX Runtime's verdict.
"""
import concurrent.futures
import glob
import math
import os
import subprocess
import sys
import threading

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
NODE_DIR = "/usr/share/libonnx-testdata/data/node"

BAD = {"int": [-1, 0, 1 << 40, -(1 << 40)],
       "ints": ["empty", "negative", "zero", "huge", "long"],
       "string": [b"BOGUS"],
       "float": [math.nan, -math.inf]}

FLAGS = {"keepdims", "noop_with_empty_axes", "select_last_index", "ceil_mode", "count_include_pad", "transA",
         "transB", "exclusive", "reverse", "largest", "sorted", "upper", "align_corners", "onesided", "inverse"}


_REGISTRY = {}


def differs(op, attr, value):
    """Why isomer's verdict may differ from ONNX Runtime's on this mutant, or None."""
    if attr in FLAGS and value not in (0, 1):
        return ("a 0/1 flag of another value: engines read it differently (ONNX Runtime keeps dims only for "
                "keepdims == 1, others read any nonzero as true), so isomer refuses it (import.cpp)")
    if attr == "axis" and abs(value) >= 1 << 31:
        return ("an axis past int32: ONNX bounds it by the rank; ONNX Runtime truncates it to 32 bits "
                "(2^40 reads as 0) and runs it, isomer refuses it")
    if kind_of(op, attr) == "ints" and value == "empty":
        return ("an INTS attribute with no values: ONNX's checker refuses it ('expected to have field ints'), "
                "ONNX Runtime reads it as absent")
    if (op, attr) in {("Gather", "axis"), ("Reshape", "allowzero"), ("ScatterElements", "axis")} and value in (-1, 0):
        return ("a valid attribute under which the case's own inputs fail when the node runs (an index or a "
                "0 dim that no longer fits): `run` refuses those inputs; import has nothing to refuse")
    if op == "LRN" and attr == "size" and isinstance(value, int) and value > 0 and value % 2 == 0:
        return ("an even LRN size: ONNX defines its window (floor and ceil of (size - 1) / 2 either side); "
                "ONNX Runtime takes only odd sizes, isomer computes what ONNX defines")
    return None


def kind_of(op, attr):
    return (_REGISTRY.get(op) or {}).get(attr)


def _registry():
    try:
        import isomer
    except ImportError:
        return {}
    return {name: isomer.operator_schema(name)["attributes"] for name in isomer.operators()}


def _baselines(registry):
    """op -> the libonnx-testdata case whose single node sets the most of its attributes."""
    best = {}
    for path in sorted(glob.glob(os.path.join(NODE_DIR, "test_*", "model.onnx"))):
        try:
            m = onnx.load(path)
        except Exception:
            continue
        if len(m.graph.node) != 1 or m.graph.node[0].domain not in ("", "ai.onnx"):
            continue
        op = m.graph.node[0].op_type
        if op not in registry or not registry[op]:
            continue
        if not os.path.exists(os.path.join(os.path.dirname(path), "test_data_set_0", "input_0.pb")) and m.graph.input:
            continue
        score = len(m.graph.node[0].attribute)
        if op not in best or score > best[op][0]:
            best[op] = (score, path)
    return {op: p for op, (_, p) in best.items()}


def _mutants():
    registry = _registry()
    _REGISTRY.update(registry)
    if not registry or not os.path.isdir(NODE_DIR):
        return []
    out = []
    for op, path in sorted(_baselines(registry).items()):
        for attr, kind in sorted(registry[op].items()):
            for value in BAD.get(kind, []):
                out.append((op, attr, kind, value, path))
    return out


def _bad_attribute(name, kind, value, old):
    if kind != "ints":
        return helper.make_attribute(name, value)
    n = max(len(old.ints) if old is not None else 0, 1)
    ints = {"empty": [], "negative": [-1] * n, "zero": [0] * n, "huge": [1 << 40] * n,
            "long": [1] * (n + 5)}[value]
    a = onnx.AttributeProto()
    a.name, a.type = name, onnx.AttributeProto.INTS
    a.ints.extend(ints)
    return a


def _feeds(case_dir, model):
    feeds = {}
    inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    for k, vi in enumerate(inputs):
        t = onnx.TensorProto()
        with open(os.path.join(case_dir, "test_data_set_0", f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        feeds[vi.name] = numpy_helper.to_array(t)
    return feeds


_ORT_CHILD = r"""
import sys, numpy as np, onnxruntime as ort
so = ort.SessionOptions()
so.log_severity_level = 4
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
so.intra_op_num_threads = 1
for line in sys.stdin:
    path, feeds = line.rstrip("\n").split("\t")
    try:
        ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, dict(np.load(feeds)))
        print("OK", flush=True)
    except Exception as e:
        print("ERR " + (str(e).splitlines() or ["refused"])[0][:200], flush=True)
"""
_local = threading.local()


def _ort_refuses(path, feeds):
    """ONNX Runtime's verdict, in a child process of this thread's (ONNX Runtime aborts on
    some hostile nodes: that is a refusal too, and the child is started again)."""
    feeds_path = path + ".npz"
    np.savez(feeds_path, **feeds)
    child = getattr(_local, "child", None)
    if child is None or child.poll() is not None:
        child = _local.child = subprocess.Popen([sys.executable, "-c", _ORT_CHILD], stdin=subprocess.PIPE,
                                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        child.stdin.write(f"{path}\t{feeds_path}\n")
        child.stdin.flush()
        answer = child.stdout.readline().strip()
    except BrokenPipeError:
        answer = ""
    if not answer:
        child.kill()
        _local.child = None
        return "ONNX Runtime aborted"
    return "" if answer == "OK" else answer[4:] or "refused"


_baseline_verdicts = {}


def judge(mutant, workdir):
    """'' when isomer's verdict on the mutant is right, else what is wrong with it (a
    baseline ONNX Runtime itself cannot run judges nothing)."""
    op, attr, kind, value, base = mutant
    if base not in _baseline_verdicts:
        plain = os.path.join(workdir, os.path.basename(os.path.dirname(base)) + ".onnx")
        onnx.save(onnx.load(base), plain)
        _baseline_verdicts[base] = _ort_refuses(plain, _feeds(os.path.dirname(base), onnx.load(base)))
    if _baseline_verdicts[base]:
        return ""
    m = onnx.load(base)
    node = m.graph.node[0]
    node.name = "victim"
    old = next((a for a in node.attribute if a.name == attr), None)
    if old is not None:
        node.attribute.remove(old)
    node.attribute.append(_bad_attribute(attr, kind, value, old))
    tag = f"{op}_{attr}_{value if not isinstance(value, bytes) else value.decode()}".replace("-", "m")
    path = os.path.join(workdir, f"{tag}.onnx")
    onnx.save(m, path)
    feeds = _feeds(os.path.dirname(base), m)
    ort_refusal = _ort_refuses(path, feeds)
    proc = subprocess.run([ISOMER_BIN, "show", path], capture_output=True, text=True, timeout=120)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    if proc.returncode not in (0, 1):
        return f"{tag}: isomer exit {proc.returncode}: {proc.stderr[-300:]}"
    if proc.returncode == 1:
        if len(lines) != 1 or os.path.basename(path) not in lines[0] or "'victim'" not in lines[0]:
            return f"{tag}: unclear refusal: {proc.stderr.strip()[:300]}"
        if not ort_refusal:
            return f"{tag}: refused, but ONNX Runtime runs it: {lines[0]}"
        return ""
    if ort_refusal:
        kept = [l.strip() for l in proc.stdout.splitlines() if "victim" in l]
        return f"{tag}: accepted ({'; '.join(kept) or 'native'}), ONNX Runtime refuses it: {ort_refusal}"
    return ""


MUTANTS = _mutants()


@pytest.mark.skipif(not MUTANTS, reason="no isomer module, or no libonnx-testdata node cases")
def test_every_operators_attribute_checks_refuse_what_onnx_runtime_refuses(tmp_path):
    assert os.path.exists(ISOMER_BIN), ISOMER_BIN
    assert len({m[0] for m in MUTANTS}) >= 40, "too few operators reached: the baselines went missing"
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        verdicts = list(pool.map(lambda m: judge(m, str(tmp_path)), MUTANTS))
    wrong = [v for v, m in zip(verdicts, MUTANTS) if v and not differs(m[0], m[1], m[3])]
    assert not wrong, f"{len(wrong)} of {len(MUTANTS)} mutants:\n" + "\n".join(wrong)


if __name__ == "__main__":  # the table by hand: python tests/python/test_hostile_op_attributes.py WORKDIR
    os.makedirs(sys.argv[1], exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for verdict in pool.map(lambda m: judge(m, sys.argv[1]), MUTANTS):
            if verdict:
                print(verdict, flush=True)
    print(f"# {len(MUTANTS)} mutants over {len({m[0] for m in MUTANTS})} operators")
