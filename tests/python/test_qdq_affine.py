"""A constant Add or Mul between a DequantizeLinear and a QuantizeLinear
(quantize_static's float bias after an integer MatMul, attention's 1/sqrt(d) on the
query) runs as one step in the three operators' roundings: its outputs are those of
ONNX Runtime running the three as written, bit for bit."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")


def bias_then_scale(xtype, ytype, rows):
    """q [2, rows, 13] (a MatMul's requantized output; 13 columns, no multiple of 16):
    Q(DQ(q) + b) with b per column, then transposed by a QDQ'd view and
    Q(DQ(.) * k), the two steps apart from a plain dequantization at the end."""
    rng = np.random.default_rng(11)
    xz = np.uint8(140) if xtype == TensorProto.UINT8 else np.int8(-7)
    yz = np.uint8(121) if ytype == TensorProto.UINT8 else np.int8(5)
    t = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    inits = [t("sx", np.float32(0.0173)), t("zx", xz), t("b", (rng.standard_normal(13) * 0.4).astype(np.float32)),
             t("sy", np.float32(0.0131)), t("zy", yz), t("k", np.float32(0.353553)),
             t("sz", np.float32(0.0047)), t("zz", yz)]
    nodes = [helper.make_node("DequantizeLinear", ["q", "sx", "zx"], ["d"]),
             helper.make_node("Add", ["d", "b"], ["a"]),
             helper.make_node("QuantizeLinear", ["a", "sy", "zy"], ["qa"]),
             helper.make_node("DequantizeLinear", ["qa", "sy", "zy"], ["da"]),
             helper.make_node("Transpose", ["da"], ["tr"], perm=[0, 2, 1]),
             helper.make_node("QuantizeLinear", ["tr", "sy", "zy"], ["qt"]),
             helper.make_node("DequantizeLinear", ["qt", "sy", "zy"], ["dt"]),
             helper.make_node("Mul", ["k", "dt"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "sz", "zz"], ["qm"]),
             helper.make_node("DequantizeLinear", ["qm", "sz", "zz"], ["y"])]
    g = helper.make_graph(nodes, "bias_then_scale", [helper.make_tensor_value_info("q", xtype, [2, rows, 13])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 13, rows])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("xtype", [TensorProto.UINT8, TensorProto.INT8])
@pytest.mark.parametrize("ytype", [TensorProto.UINT8, TensorProto.INT8])
@pytest.mark.parametrize("rows", [3, 4001])  # 4001: blocks split between two threads
def test_constant_add_and_mul_between_qdq_pairs_are_one_step(xtype, ytype, rows, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(bias_then_scale(xtype, ytype, rows), path)
    lo, hi = (0, 256) if xtype == TensorProto.UINT8 else (-128, 128)
    q = np.random.default_rng(2).integers(lo, hi, (2, rows, 13)).astype(np.uint8 if lo == 0 else np.int8)
    np.savez(tmp_path / "in.npz", q=q)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--print-steps",
                        "--no-onnxruntime"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    kinds = [line.split()[0] for line in p.stdout.splitlines()
             if line.startswith("  ") and not line.strip().startswith("output")]
    # (the output, transposed, is then made row-major: a reorder)
    assert [k for k in kinds if k != "reorder"] == ["quantize-affine", "quantize-affine", "dequantize"], kinds
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"q": q})[0]
    for threads in (1, 2):
        np.testing.assert_array_equal(isomer.run(path, {"q": q}, engine="runtime", threads=threads)[0], want)
