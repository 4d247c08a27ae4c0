"""Shape inputs that constants and static shapes decide, read as constants on import.

TorchScript writes `x.expand(n, ...)` with a dynamic n as
Expand(v, Where(Equal(s, -1), ConstantOfShape(Shape(s)), s)): `s` has a static
shape, so ConstantOfShape(Shape(s)) has known extents even though neither is a
constant in the file. isomer must type it so (not i64[?]), so the Expand has a
shape of known length and runs natively instead of being delegated node by node.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args):
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=300)


def expand_model(path):
    """y[b, 4] = x[b, 4] + v[1] expanded to (b,) through TorchScript's shape pattern, then unsqueezed to (b, 1).
    The shape has one element, so broadcasting in Where does not fix its length either."""
    c = lambda name, vals: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(vals, np.int64), name))
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        c("zero", 0), helper.make_node("Gather", ["sx", "zero"], ["b"]),
        c("ax0", [0]), helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Concat", ["b1"], ["cat"], axis=0),
        c("flat", [-1]), helper.make_node("Reshape", ["cat", "flat"], ["s"]),
        helper.make_node("Shape", ["s"], ["ss"]),
        helper.make_node("ConstantOfShape", ["ss"], ["ones"], value=numpy_helper.from_array(np.array([1], np.int64))),
        c("neg", -1), helper.make_node("Mul", ["ones", "neg"], ["negs"]),
        helper.make_node("Equal", ["s", "negs"], ["eq"]),
        helper.make_node("Where", ["eq", "ones", "s"], ["shape"]),
        helper.make_node("Expand", ["v", "shape"], ["ve"]),
        c("ax1", [1]), helper.make_node("Unsqueeze", ["ve", "ax1"], ["vu"]),
        helper.make_node("Add", ["x", "vu"], ["y"]),
    ]
    v = numpy_helper.from_array(np.random.default_rng(3).standard_normal((1,)).astype(np.float32), "v")
    graph = helper.make_graph(nodes, "ts_expand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])], [v])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def test_torchscript_expand_runs_natively_and_matches_ort(tmp_path):
    model = str(tmp_path / "expand.onnx")
    expand_model(model)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    # --no-onnxruntime fails on a model with a node the isomer runtime cannot run.
    r = isomer("run", model, "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"),
               "--outputs", str(tmp_path / "out.npz"))
    assert r.returncode == 0, r.stderr
    want = ort.InferenceSession(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-6, atol=1e-6)


def test_optimized_torchscript_expand_keeps_its_dynamic_batch(tmp_path):
    model, out = str(tmp_path / "expand.onnx"), str(tmp_path / "expand.opt.onnx")
    expand_model(model)
    r = isomer("optimize", model, "-o", out)
    assert r.returncode == 0, r.stderr
    a, b = ort.InferenceSession(model), ort.InferenceSession(out)
    for batch in (1, 2, 7):
        x = np.random.default_rng(batch).standard_normal((batch, 4)).astype(np.float32)
        np.testing.assert_allclose(b.run(None, {"x": x})[0], a.run(None, {"x": x})[0], rtol=1e-6, atol=1e-6)
