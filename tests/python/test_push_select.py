"""A classifier that selects one token before its head (ViT's class token, BERT's
pooler, GPT's last position): `isomer optimize` moves the selection above the per-token
work after the last attention, so the out-projection, the residual Adds, the
LayerNorms and the FFN run on one row. The model is built with onnx.helper (random
weights, fixed seed); what comes out must compute what the original computes under
ONNX Runtime and need fewer multiply-adds. Where the whole hidden state is an output
too, nothing may move.
"""
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))

T, D, H, F, CLASSES = 17, 32, 4, 64, 10


def _vit_tail(hidden_output):
    """One pre-norm encoder block (attention, FFN with erf-GELU), the final LayerNorm,
    the class token (Gather axis 1, index 0) and the head."""
    rng = np.random.default_rng(7)
    inits, nodes = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def w(name, *shape):
        return const(name, (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32))

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    ones, zeros = const("ln_s", np.ones(D, np.float32)), const("ln_b", np.zeros(D, np.float32))
    dh = D // H
    n1 = node("LayerNormalization", ["x", ones, zeros], "n1", axis=-1, epsilon=1e-6)
    heads = const("heads", np.array([1, T, H, dh], np.int64))
    qkv = []
    for k in "qkv":
        p = node("Add", [node("MatMul", [n1, w("w" + k, D, D)], k + "_mm"), w("b" + k, D)], k + "_p")
        qkv.append(node("Transpose", [node("Reshape", [p, heads], k + "_r")], k + "_t", perm=[0, 2, 1, 3]))
    kt = node("Transpose", [qkv[1]], "kt", perm=[0, 1, 3, 2])
    scores = node("Mul", [node("MatMul", [qkv[0], kt], "qk"), const("scale", np.float32(dh ** -0.5))], "scores")
    pv = node("MatMul", [node("Softmax", [scores], "p", axis=-1), qkv[2]], "pv")
    merged = node("Reshape", [node("Transpose", [pv], "pv_t", perm=[0, 2, 1, 3]),
                              const("merge", np.array([1, T, D], np.int64))], "merged")
    o = node("Add", [node("MatMul", [merged, w("wo", D, D)], "o_mm"), w("bo", D)], "o")
    r = node("Add", ["x", o], "r")
    n2 = node("LayerNormalization", [r, ones, zeros], "n2", axis=-1, epsilon=1e-6)
    f1 = node("Add", [node("MatMul", [n2, w("w1", D, F)], "f1_mm"), w("b1", F)], "f1")
    erf = node("Erf", [node("Div", [f1, const("sqrt2", np.float32(np.sqrt(2)))], "f1_d")], "erf")
    gelu = node("Mul", [node("Mul", [f1, node("Add", [erf, const("one", np.float32(1))], "erf1")], "g0"),
                        const("half", np.float32(0.5))], "gelu")
    f2 = node("Add", [node("MatMul", [gelu, w("w2", F, D)], "f2_mm"), w("b2", D)], "f2")
    y = node("Add", [r, f2], "y")
    z = node("LayerNormalization", [y, ones, zeros], "hidden", axis=-1, epsilon=1e-6)
    cls = node("Gather", [z, const("zero", np.array(0, np.int64))], "cls", axis=1)
    node("Add", [node("MatMul", [cls, w("wh", D, CLASSES)], "head_mm"), w("bh", CLASSES)], "logits")

    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, CLASSES])]
    if hidden_output:
        outputs.append(helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, T, D]))
    graph = helper.make_graph(nodes, "vit_tail", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, T, D])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _matmul_macs(path):
    """Multiply-adds of the model's MatMuls, from ONNX's own shape inference."""
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    shapes = {}
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    for t in model.graph.initializer:
        shapes[t.name] = list(t.dims)
    total = 0
    for n in model.graph.node:
        if n.op_type in ("MatMul", "Gemm"):
            out, a = shapes[n.output[0]], shapes[n.input[0]]
            total += int(np.prod(out)) * (a[-1] if n.op_type == "MatMul" or not any(
                x.name == "transA" and x.i for x in n.attribute) else a[0])
    return total


def _optimize(tmp_path, hidden_output):
    src, out = str(tmp_path / "vit_tail.onnx"), str(tmp_path / "vit_tail.opt.onnx")
    onnx.save(_vit_tail(hidden_output), src)
    proc = subprocess.run([ISOMER, "optimize", src, "-o", out, "--cost", "none", "--no-guard"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "check: passed" in proc.stdout, proc.stdout
    onnx.checker.check_model(onnx.load(out))
    feeds = {"x": np.random.default_rng(3).standard_normal((1, T, D)).astype(np.float32)}
    run = lambda p: ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds)
    for want, got in zip(run(src), run(out)):
        assert want.shape == got.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return src, out


def test_class_token_selection_moves_up_to_the_attention(tmp_path):
    src, out = _optimize(tmp_path, hidden_output=False)
    before, after = _matmul_macs(src), _matmul_macs(out)
    # Out-projection and FFN on one row instead of T: (D*D + 2*D*F) * (T - 1) fewer.
    assert before - after >= (D * D + 2 * D * F) * (T - 1), (before, after)
    model = onnx.load(out)
    for n in model.graph.node:
        if n.op_type == "LayerNormalization" and n.input[0] != "x":
            shape = [d.dim_value for d in next(v for v in onnx.shape_inference.infer_shapes(model).graph.value_info
                                                if v.name == n.output[0]).type.tensor_type.shape.dim]
            assert T not in shape, f"{n.name} still normalizes every token: {shape}"


def test_nothing_moves_where_the_hidden_state_is_an_output(tmp_path):
    src, out = _optimize(tmp_path, hidden_output=True)
    assert _matmul_macs(out) == _matmul_macs(src)
