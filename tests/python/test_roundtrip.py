"""Every libonnx-testdata model through `isomer convert` and `isomer optimize`.

For each model and each mode: `$ISOMER_BIN convert model.onnx -o out.onnx` (import and
export, no optimization) or `$ISOMER_BIN optimize model.onnx -o out.onnx` (import, the
default optimization, export; the test compares with the stored expected outputs
itself, so optimize's own check is switched off), onnx.checker on the result, and
onnxruntime on test_data_set_0 of the written model, compared with the expected outputs. A model onnxruntime cannot run
(or gets wrong) in its original form is skipped with the reason; a model isomer
cannot import is expected to fail only if tests/conformance/known_failures.txt says
why.

The models are converted and run up front on all cores (a session fixture); each
test then reports one model.
"""
import concurrent.futures
import glob
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import numpy_helper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
TESTDATA = "/usr/share/libonnx-testdata/data"
SUITES = ["node", "pytorch-converted", "pytorch-operator", "simple"]
KNOWN_FAILURES = os.path.join(REPO, "tests", "conformance", "known_failures.txt")
RTOL, ATOL = 1e-3, 1e-4


def _cases():
    out = []
    for suite in SUITES:
        for model in sorted(glob.glob(os.path.join(TESTDATA, suite, "*", "model.onnx"))):
            case_dir = os.path.dirname(model)
            out.append(f"{suite}/{os.path.basename(case_dir)}")
    return out


CASES = _cases()
MODES = {
    "convert": ["convert"],
    # Conformance data holds NaN/Inf weights on purpose (IsNaN, IsInf, ...).
    "optimize": ["optimize", "--no-check", "--cost", "none", "--allow-nonfinite"],
}


def _known_failures():
    known = {}
    if os.path.exists(KNOWN_FAILURES):
        with open(KNOWN_FAILURES) as f:
            for line in f:
                line = line.rstrip("\n")
                if not line or line.startswith("#"):
                    continue
                case, _, reason = line.partition(":")
                known[case.strip()] = reason.strip()
    return known


def _real_inputs(model):
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def _load_value(path, type_proto):
    """A test data file as onnxruntime takes it: array, list (sequence) or optional."""
    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    if kind == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return numpy_helper.to_optional(opt)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return numpy_helper.to_array(t)


def _feeds(model, data_dir):
    feeds = {}
    for i, inp in enumerate(_real_inputs(model)):
        path = os.path.join(data_dir, f"input_{i}.pb")
        if os.path.exists(path):
            feeds[inp.name] = _load_value(path, inp.type)
    return feeds


def _expected(model, data_dir):
    out = []
    for i, o in enumerate(model.graph.output):
        path = os.path.join(data_dir, f"output_{i}.pb")
        if not os.path.exists(path):
            break
        out.append(_load_value(path, o.type))
    return out


def _mismatch(got, want, where="output"):
    """None if equal within tolerance, else a description."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: sequence of {len(got) if isinstance(got, list) else type(got).__name__}, expected {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            m = _mismatch(g, w, f"{where}[{k}]")
            if m:
                return m
        return None
    if want is None or got is None:
        return None if want is None and got is None else f"{where}: optional presence differs"
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{where}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "fc":
        if not np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True):
            diff = np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))) if got.size else 0
            return f"{where}: values differ (max abs diff {diff:g})"
        return None
    if want.dtype.kind in "OSU":
        return None if list(got.ravel()) == list(want.ravel()) else f"{where}: strings differ"
    return None if np.array_equal(got, want) else f"{where}: values differ"


def _run(path, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return session.run(names, feeds)


def _compare_all(got, expected):
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for k, (g, w) in enumerate(zip(got, expected)):
        m = _mismatch(g, w, f"output {k}")
        if m:
            return m
    return None


def _check_case(case, mode, out_dir, known):
    """Returns (status, message); status is pass, skip, xfail or fail."""
    case_dir = os.path.join(TESTDATA, case)
    src = os.path.join(case_dir, "model.onnx")
    data_dir = os.path.join(case_dir, "test_data_set_0")
    model = onnx.load(src)
    # What onnxruntime does with the original decides whether the case says anything.
    try:
        feeds = _feeds(model, data_dir)
        expected = _expected(model, data_dir)
        original = _run(src, feeds)
    except Exception as e:  # noqa: BLE001 - any onnxruntime failure means: not testable here
        return "skip", "onnxruntime cannot run the original: " + str(e).splitlines()[0][:200]
    m = _compare_all(original, expected)
    if m:
        return "skip", "onnxruntime disagrees with the expected outputs on the original: " + m

    dst = os.path.join(out_dir, mode + "__" + case.replace("/", "__") + ".onnx")
    proc = subprocess.run([ISOMER_BIN, *MODES[mode], src, "-o", dst], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        msg = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        msg = msg[-1] if msg else f"exit code {proc.returncode}"
        if case in known:
            return "xfail", f"isomer {mode} fails (listed: {known[case]}): {msg}"
        return "fail", f"isomer {mode} failed: {msg}"
    try:
        onnx.checker.check_model(dst)
    except Exception as e:  # noqa: BLE001
        return "fail", f"onnx.checker rejects the model isomer {mode} wrote: " + str(e).splitlines()[0]
    try:
        written = _run(dst, feeds)
    except Exception as e:  # noqa: BLE001
        return "fail", f"onnxruntime cannot run the model isomer {mode} wrote: " + str(e).splitlines()[0][:300]
    m = _compare_all(written, expected)
    if m:
        return "fail", f"the outputs of the model isomer {mode} wrote differ: " + m
    return "pass", ""


@pytest.fixture(scope="session")
def results(tmp_path_factory):
    if not os.path.exists(ISOMER_BIN):
        pytest.skip(f"isomer binary not found at {ISOMER_BIN} (set ISOMER_BIN)")
    out_dir = str(tmp_path_factory.mktemp("roundtrip"))
    known = _known_failures()
    # Subprocesses and onnxruntime release the GIL: threads use all cores.
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        futures = {(mode, case): pool.submit(_check_case, case, mode, out_dir, known)
                   for mode in MODES for case in CASES}
        out = {}
        for key, f in futures.items():
            try:
                out[key] = f.result()
            except Exception as e:  # noqa: BLE001 - a harness problem for this case only
                out[key] = ("fail", f"harness error: {type(e).__name__}: {e}")
    for mode in MODES:
        counts = {}
        for (m, _), (status, _) in out.items():
            if m == mode:
                counts[status] = counts.get(status, 0) + 1
        print(f"\n[{mode}] {len(CASES)} models: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return out


@pytest.mark.skipif(not CASES, reason=f"no test data in {TESTDATA}")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", list(MODES))
def test_roundtrip(mode, case, results):
    status, message = results[(mode, case)]
    if status == "skip":
        pytest.skip(message)
    if status == "xfail":
        pytest.xfail(message)
    assert status == "pass", message
