"""Operators and forms that current exporters and the newest opsets write, found by
running a fresh set of exports (torchvision CNNs, nn.LSTM/GRU/RNN through both of
torch's exporters, opset 23-25 models written with onnx.helper) through isomer.
Each model is built here with onnx.helper, run natively (no step on ONNX Runtime),
compared with ONNX Runtime, and optimized to valid ONNX that ONNX Runtime runs."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args):
    # ONNX Runtime's helper runs on this interpreter, which has onnxruntime and numpy.
    env = dict(os.environ, ISOMER_PYTHON=sys.executable)
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=300, env=env)


def save(tmp_path, nodes, inputs, outputs, opset, inits=(), name="m.onnx"):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def run_natively(tmp_path, path, feeds, rtol=1e-4):
    """Runs `path` on isomer with no step on ONNX Runtime and compares with ONNX Runtime."""
    np.savez(tmp_path / "in.npz", **feeds)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"),
               "--print-steps", "--threads", "1", "--no-onnxruntime")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "ONNX Runtime" not in p.stdout and "reference kernels" not in p.stdout, p.stdout
    got = np.load(tmp_path / "out.npz")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for o, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        np.testing.assert_allclose(got[o.name], want, rtol=rtol, atol=1e-5, err_msg=o.name)
    return p.stdout


def optimize_valid(tmp_path, path, feeds):
    """optimize writes valid ONNX whose outputs on ONNX Runtime equal the input's."""
    out = str(tmp_path / "o.onnx")
    p = isomer("optimize", path, "-o", out, "--threads", "1", "--no-guard")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check: passed" in p.stdout, p.stdout
    onnx.checker.check_model(onnx.load(out), full_check=True)
    a = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    b = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, feeds)
    for x, y in zip(a, b):
        np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-5)
    return out


def test_swish_of_opset_24_runs_natively(tmp_path):
    # Swish (opset 24): at alpha 1 on a convolution (SiLU, which oneDNN fuses), and at
    # another alpha on a product. It was unknown to isomer: a step on ONNX Runtime.
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Swish", ["c"], ["s"]),
             helper.make_node("Flatten", ["s"], ["f"]),
             helper.make_node("MatMul", ["f", "m"], ["p"]),
             helper.make_node("Swish", ["p"], ["y"], alpha=0.6)]
    inits = [numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32) * 0.3, "w"),
             numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((16 * 8 * 8, 10)).astype(np.float32) * 0.05, "m")]
    path = save(tmp_path, nodes, [("x", TensorProto.FLOAT, [1, 3, 8, 8])], [("y", TensorProto.FLOAT, [1, 10])], 24, inits)
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32) * 2}
    run_natively(tmp_path, path, feeds)
    out = optimize_valid(tmp_path, path, feeds)
    assert onnx.load(out).opset_import[0].version >= 24


def test_guard_times_on_onnxruntime_what_isomer_runs_there_whole(tmp_path):
    # Detection exports (SSDlite, RetinaNet through the TorchScript exporter) have
    # NonZero nodes whose output shapes depend on the data: `isomer run` hands such a
    # model to ONNX Runtime whole. The guard said "skipped" and wrote the rewrite
    # untimed; it now times it on ONNX Runtime, where it runs.
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0]),
             helper.make_node("Transpose", ["t1"], ["t2"], perm=[1, 0]),
             helper.make_node("Relu", ["t2"], ["r"]),
             helper.make_node("NonZero", ["r"], ["nz"]),
             helper.make_node("ReduceSum", ["r"], ["s"], keepdims=0)]
    path = save(tmp_path, nodes, [("x", TensorProto.FLOAT, [64, 64])],
                [("nz", TensorProto.INT64, [2, None]), ("s", TensorProto.FLOAT, [])], 21)
    out = str(tmp_path / "o.onnx")
    p = isomer("optimize", path, "-o", out, "--threads", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "guard: measured" in p.stdout, p.stdout
    assert "timed on ONNX Runtime, which runs it" in p.stdout, p.stdout
    assert "latency on ONNX Runtime:" in p.stdout, p.stdout
    onnx.checker.check_model(onnx.load(out), full_check=True)
