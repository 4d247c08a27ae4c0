"""`isomer optimize` folds float32 products of weights (MatMul and Gemm whose
operands are all constants) with the runtime's float GEMM: the folded weights are
within float rounding of the exact products, and the optimized model passes the
check and computes what the original computes under ONNX Runtime.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
UNIT = 2.0 ** -24  # float's unit roundoff


def _model(rng):
    """y = x (W1 W2) + Gemm(A, B, C; transA, transB, alpha 0.5, beta -2): both products are of weights."""
    w1 = rng.standard_normal((96, 515)).astype(np.float32)
    w2 = rng.standard_normal((515, 40)).astype(np.float32)
    a = rng.standard_normal((301, 4)).astype(np.float32)  # transA: A is [K, M]
    b = rng.standard_normal((40, 301)).astype(np.float32)  # transB: B is [N, K]
    c = rng.standard_normal((40,)).astype(np.float32)
    inits = [numpy_helper.from_array(v, n) for v, n in ((w1, "w1"), (w2, "w2"), (a, "a"), (b, "b"), (c, "c"))]
    nodes = [
        helper.make_node("MatMul", ["w1", "w2"], ["w"]),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Gemm", ["a", "b", "c"], ["g"], transA=1, transB=1, alpha=0.5, beta=-2.0),
        helper.make_node("Add", ["xw", "g"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "fold_products", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 96])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 40])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, (w1, w2, a, b, c)


def _run(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_weight_products_fold_within_float_rounding(tmp_path):
    rng = np.random.default_rng(7)
    model, (w1, w2, a, b, c) = _model(rng)
    src, out, report_path = str(tmp_path / "m.onnx"), str(tmp_path / "m.opt.onnx"), str(tmp_path / "r.json")
    onnx.save(model, src)
    proc = subprocess.run([ISOMER, "optimize", src, "-o", out, "--search", "templates", "--cost", "none",
                           "--no-guard", "--report-json", report_path], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    report = json.load(open(report_path))
    assert report["check"] == "passed"
    # Both products folded: what is left reads x (x W + G, or a Gemm with G its bias).
    assert report["op_types_after"] in ({"MatMul": 1, "Add": 1}, {"Gemm": 1}), report["op_types_after"]

    folded = {tuple(t.dims): numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(out).graph.initializer}
    assert set(folded) == {(96, 40), (4, 40)}, sorted(folded)
    # Each folded element within (depth + 1) float roundings of the exact product,
    # scaled by the same product of |operands| (depth: the multiply-adds it sums).
    w1d, w2d, ad, bd, cd = (v.astype(np.float64) for v in (w1, w2, a, b, c))
    exact_w = w1d @ w2d
    assert np.all(np.abs(folded[(96, 40)] - exact_w) <= (515 + 1) * UNIT * (np.abs(w1d) @ np.abs(w2d)))
    exact_g = 0.5 * (ad.T @ bd.T) - 2.0 * cd
    scale_g = 0.5 * (np.abs(ad.T) @ np.abs(bd.T)) + 2.0 * np.abs(cd)
    assert np.all(np.abs(folded[(4, 40)] - exact_g) <= (301 + 3) * UNIT * scale_g)

    x = rng.standard_normal((4, 96)).astype(np.float32)
    want, got = _run(src, x), _run(out, x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
