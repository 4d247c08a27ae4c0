"""Nodes a fused pointwise kernel has claimed while it is being planned stay its own.

Planning a pointwise chain claims each node it considers (Compiler::set_pending)
and asks for the values that node reads; asking lowers their producers. A lowering
that takes the nodes after its own (a softmax's NaN guard, an RMSNorm's chain, a
quantized linear's scale and bias) must leave the claimed ones alone: taking two of
them binds only the last one's value, and the planner, reading the first, found it
never written ('IsNaN did not produce output 0'), so the whole model fell back to
ONNX Runtime. Each graph here makes such a chain reachable from both sides: an Add
reads a Tanh's result (the chain the planner grows from) and the last node of a
pattern another lowering takes.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")

ROWS, D = 4, 64


def scalar(name, v):
    return numpy_helper.from_array(np.array(v, np.float32), name)


def rms_norm():
    """y = tanh(b) + w * x / sqrt(mean(x^2) + eps): the planner growing from the
    Tanh claims the weight's Mul, the normalizing Mul, the Reciprocal, the Sqrt and
    the Add of eps, then asks for the mean, whose lowering finds the RMSNorm."""
    nodes = [helper.make_node("Tanh", ["b"], ["h"]),
             helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Reciprocal", ["rms"], ["inv"]),
             helper.make_node("Mul", ["x", "inv"], ["nx"]),
             helper.make_node("Mul", ["nx", "w"], ["wx"]),
             helper.make_node("Add", ["h", "wx"], ["y"])]
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, D).astype(np.float32), "w")
    return nodes, [w, scalar("two", 2.0), scalar("eps", 1e-6)]


def nan_guarded_softmax():
    """y = tanh(b) + where(isnan(s), 0, s), s = softmax(x): the planner claims the
    Where and the IsNaN, then asks for s, whose lowering finds the guard."""
    nodes = [helper.make_node("Tanh", ["b"], ["h"]),
             helper.make_node("Softmax", ["x"], ["s"], axis=-1),
             helper.make_node("IsNaN", ["s"], ["nan"]),
             helper.make_node("Where", ["nan", "zero", "s"], ["g"]),
             helper.make_node("Add", ["h", "g"], ["y"])]
    return nodes, [scalar("zero", 0.0)]


@pytest.mark.parametrize("build", [rms_norm, nan_guarded_softmax])
def test_claimed_chain_runs_natively(build, tmp_path):
    nodes, inits = build()
    spec = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [ROWS, D]) for n in ("x", "b")]
    g = helper.make_graph(nodes, build.__name__, spec, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, D])],
                          inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((ROWS, D)).astype(np.float32) for n in ("x", "b")}
    np.savez(tmp_path / "in.npz", **feeds)
    for threads in ("1", "2"):
        p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--no-onnxruntime", "--threads",
                            threads, "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-5, atol=1e-5)
