"""Models of old opsets (the ONNX model zoo's CNNs are opsets 7 to 12) run natively
and are written back valid at their own opset: Upsample (opsets 7 to 9, as Resize-10),
Resize-10, LRN, and Gather and Flatten before opset 11, which were kept opaque and
sent node by node to ONNX Runtime; Scatter (opsets 9 and 10, ScatterElements' older
name), which was kept opaque too.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")


def cli(*args):
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=300)


def save(tmp_path, name, nodes, inits, opset, in_shape=(1, 4, 6, 6)):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 4 if opset <= 9 else 6
    path = str(tmp_path / f"{name}.onnx")
    onnx.save(model, path)
    return path


def ort_run(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def scales(*s):
    return numpy_helper.from_array(np.array(s, np.float32), "s")


def scatter_operands(axis_extent=4, picked=2):
    """Indices along axis 1 that are distinct at every other position (a scatter with a
    repeated index leaves the order of its writes open), and updates of their shape."""
    rng = np.random.default_rng(11)
    idx = np.stack([rng.permutation(axis_extent)[:picked] for _ in range(36)], axis=1).reshape(1, picked, 6, 6)
    upd = rng.standard_normal((1, picked, 6, 6)).astype(np.float32)
    return [numpy_helper.from_array(idx.astype(np.int64), "i"), numpy_helper.from_array(upd, "v")]


CASES = {
    # name: (opset, nodes, initializers)
    "upsample7_nearest": (7, [helper.make_node("Upsample", ["x"], ["u"], mode="nearest", scales=[1.0, 1.0, 2.0, 3.0])], []),
    "upsample8_linear": (8, [helper.make_node("Upsample", ["x"], ["u"], mode="linear", scales=[1.0, 1.0, 2.0, 2.0])], []),
    "upsample9_nearest": (9, [helper.make_node("Upsample", ["x", "s"], ["u"], mode="nearest")], [scales(1, 1, 2, 2)]),
    "upsample9_linear": (9, [helper.make_node("Upsample", ["x", "s"], ["u"], mode="linear")], [scales(1, 1, 1.5, 2)]),
    "resize10_linear": (10, [helper.make_node("Resize", ["x", "s"], ["u"], mode="linear")], [scales(1, 1, 2, 1.5)]),
    "lrn5": (9, [helper.make_node("LRN", ["x"], ["u"], size=5, alpha=1e-3, beta=0.75, bias=1.0)], []),
    "lrn7_beta_half": (11, [helper.make_node("LRN", ["x"], ["u"], size=7, alpha=0.5, beta=0.5, bias=2.0)], []),
    "lrn3_defaults": (13, [helper.make_node("LRN", ["x"], ["u"], size=3)], []),
    "flatten9": (9, [helper.make_node("Flatten", ["x"], ["u"], axis=2)], []),
    "gather9": (9, [helper.make_node("Gather", ["x", "i"], ["u"], axis=1)],
                [numpy_helper.from_array(np.array([3, 0, 2], np.int64), "i")]),
    "scatter9": (9, [helper.make_node("Scatter", ["x", "i", "v"], ["u"], axis=1)], scatter_operands()),
    "scatter10_negative_axis": (10, [helper.make_node("Scatter", ["x", "i", "v"], ["u"], axis=-3)], scatter_operands()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_form_runs_natively_and_round_trips_at_its_opset(tmp_path, name):
    opset, nodes, inits = CASES[name]
    # A Relu after it, so that optimize has a graph around the node to write.
    path = save(tmp_path, name, nodes + [helper.make_node("Relu", ["u"], ["y"])], inits, opset)
    x = np.random.default_rng(3).standard_normal((1, 4, 6, 6)).astype(np.float32) * 3
    np.save(tmp_path / "x.npy", x)

    # Native: no step left to ONNX Runtime or the reference kernel, outputs as ONNX Runtime's.
    p = cli("run", path, "--no-onnxruntime", "--print-steps")
    assert p.returncode == 0, p.stderr
    assert "onnxruntime" not in p.stdout and "reference" not in p.stdout, p.stdout
    p = cli("run", path, "--bench", "--repeat", "2", "--threads", "1")
    assert p.returncode == 0 and "outputs match" in p.stdout, p.stdout + p.stderr

    # Written back valid at the model's own opset, computing the same.
    out = str(tmp_path / "out.onnx")
    p = cli("convert", path, "-o", out)
    assert p.returncode == 0, p.stderr
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert [o.version for o in written.opset_import if o.domain in ("", "ai.onnx")] == [opset]
    assert nodes[0].op_type in [n.op_type for n in written.graph.node]
    np.testing.assert_allclose(ort_run(out, x), ort_run(path, x), rtol=1e-5, atol=1e-6)

    p = cli("optimize", path, "-o", out, "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    assert json.load(open(tmp_path / "r.json"))["check"] == "passed"
    onnx.checker.check_model(onnx.load(out), full_check=True)

