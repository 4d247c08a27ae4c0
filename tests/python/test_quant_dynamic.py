"""Dynamically quantized linears (onnxruntime.quantization.quantize_dynamic):
DynamicQuantizeLinear of the activation, MatMulInteger with the weights and zero
points, Cast to float, Mul by the product of the two scales, Add of the bias. Each
linear must run as one int8-matmul step (the scale product and the zero point's s32
form written by the quantization step), for u8 and s8 weights, per-tensor and
per-column scales, and agree with ONNX Runtime's own integer kernels.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
oq = pytest.importorskip("onnxruntime.quantization")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
K, N = 37, 29  # odd sizes: no multiple of a vector's width
SHAPE = (2, 5, K)


def linears(seed, act):
    """Three linears reading x (a layer's query, key and value), the first followed by `act`."""
    rng = np.random.default_rng(seed)
    inits, nodes, outs = [], [], []
    for i in range(3):
        inits += [numpy_helper.from_array((rng.standard_normal((K, N)) * 0.2).astype(np.float32), f"w{i}"),
                  numpy_helper.from_array((rng.standard_normal(N) * 0.1).astype(np.float32), f"b{i}")]
        nodes += [helper.make_node("MatMul", ["x", f"w{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"y{i}" if i or act is None else "a0"])]
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [SHAPE[0], SHAPE[1], N]))
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["a0"], ["y0"]))
    elif act == "Gelu":  # the erf form torch writes
        inits += [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in
                  (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5))]
        nodes += [helper.make_node("Div", ["a0", "sqrt2"], ["g0"]), helper.make_node("Erf", ["g0"], ["g1"]),
                  helper.make_node("Add", ["g1", "one"], ["g2"]), helper.make_node("Mul", ["a0", "g2"], ["g3"]),
                  helper.make_node("Mul", ["g3", "half"], ["y0"])]
    g = helper.make_graph(nodes, "linears", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def gated(seed):
    """A gated MLP (LLaMA's, Qwen's): silu(x W_gate) * (x W_up), the product's Mul
    a pointwise chain that reads the up projection's result."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal((K, N)) * 0.2).astype(np.float32), w) for w in ("wg", "wu")]
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"]), helper.make_node("Sigmoid", ["g"], ["sg"]),
             helper.make_node("Mul", ["g", "sg"], ["silu"]), helper.make_node("MatMul", ["x", "wu"], ["u"]),
             helper.make_node("Mul", ["silu", "u"], ["y"])]
    g = helper.make_graph(nodes, "gated", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [SHAPE[0], SHAPE[1], N])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def quantized(tmp_path, weights, per_channel, act=None):
    src, dst = str(tmp_path / "float.onnx"), str(tmp_path / "dynamic.onnx")
    onnx.save(gated(3) if act == "gated" else linears(3, act), src)
    wt = oq.QuantType.QUInt8 if weights == "u8" else oq.QuantType.QInt8
    oq.quantize_dynamic(src, dst, weight_type=wt, per_channel=per_channel)
    return dst


def feeds(seed=7):
    return {"x": np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)}


def ort_run(path, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, x)


def steps_of(path):
    p = subprocess.run([ISOMER, "run", path, "--threads", "1", "--no-onnxruntime", "--print-steps"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [line.split() for line in (p.stdout + p.stderr).splitlines()
            if line.startswith("  ") and not line.startswith("   ") and line.split() and line.split()[0] != "output"]


def assert_matches(path, x):
    want = ort_run(path, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.abs(w).max()))


VARIANTS = [("s8", False), ("u8", False), ("s8", True), ("u8", True)]


@pytest.mark.parametrize("weights,per_channel", VARIANTS)
@pytest.mark.parametrize("act", [None, "Relu", "Gelu", "gated"])
def test_dynamic_linears_match_onnxruntime(weights, per_channel, act, tmp_path):
    path = quantized(tmp_path, weights, per_channel, act)
    assert_matches(path, feeds())


@pytest.mark.parametrize("weights,per_channel", VARIANTS)
@pytest.mark.parametrize("act", [None, "Relu"])
def test_each_dynamic_linear_is_one_step(weights, per_channel, act, tmp_path):
    steps = steps_of(quantized(tmp_path, weights, per_channel, act))
    kinds = [s[0] for s in steps]
    assert kinds.count("dynamic-quantize") == 1, steps
    assert kinds.count("int8-matmul") == 3, steps
    if weights == "u8" and per_channel:
        # A zero point per column (oneDNN's matmul takes one for all): one native
        # step after each product subtracts it, scales and adds the bias.
        assert kinds.count("zero-point") == 3 and len(steps) == 7 + (act is not None), steps
    else:
        assert len(steps) == 4, steps  # no scale Mul, no zero-point widening, no bias Add, Relu a post-op


def test_matmul_integer_without_the_float_tail(tmp_path):
    """MatMulInteger's int32 result read as it is, s8 activations from a QuantizeLinear,
    u8 weights with a zero point (or one per column), and a run-time u8 zero point
    shared by three products."""
    rng = np.random.default_rng(4)
    w = rng.integers(0, 256, (K, N), dtype=np.uint8)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(131, np.uint8), "wz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             numpy_helper.from_array(np.array(-3, np.int8), "z"),
             numpy_helper.from_array(rng.integers(0, 256, N, dtype=np.uint8), "wzc")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["y"]),
             helper.make_node("DynamicQuantizeLinear", ["x"], ["d", "ds", "dz"]),
             helper.make_node("MatMulInteger", ["d", "w", "dz", "wz"], ["y1"]),
             helper.make_node("MatMulInteger", ["d", "w", "dz"], ["y2"]),
             helper.make_node("MatMulInteger", ["d", "w", "dz", "wzc"], ["y3"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.INT32, [SHAPE[0], SHAPE[1], N])
            for n in ("y", "y1", "y2", "y3")]
    g = helper.make_graph(nodes, "mmi", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))], outs,
                          inits)
    path = str(tmp_path / "mmi.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    x = feeds()
    want = ort_run(path, x)
    got = isomer.run(path, x, engine="runtime", threads=1)
    for g_, w_ in zip(got, want):
        np.testing.assert_array_equal(g_, w_)
    kinds = [s[0] for s in steps_of(path)]
    assert kinds.count("int8-matmul") == 4 and kinds.count("zero-point") == 1, kinds  # y3's column zero points
