"""Exports that earlier rounds did not try (models30), each case built with onnx.helper.

onnxscript's ort_fusions (optimize_for_ort) and ONNX Runtime's transformer optimizer
write a Llama-family model's RMSNorms as SimplifiedLayerNormalization, which ONNX
Runtime registers in the ONNX domain, and its residual RMSNorms as com.microsoft
SkipSimplifiedLayerNormalization. isomer refused the first ("domain 'ai.onnx' has no
operator SimplifiedLayerNormalization") and ran the second on ONNX Runtime. Both are
now kept verbatim and run as isomer's own layernorm steps.
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
MS = "com.microsoft"


def rmsnorm_fusions_model(axis):
    """SimplifiedLayerNormalization over the axes from `axis`, then two residual blocks
    of MatMul and SkipSimplifiedLayerNormalization (with a bias and its sum output feeding
    the next block; without). Outputs and intermediates carry no value_info."""
    rng = np.random.default_rng(30)
    f = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.5, name)
    norm_shape = (7, 32) if axis == 1 else (32,)
    inits = [f("s", *norm_shape), f("w1", 32, 32), f("w2", 32, 32), f("g", 32), f("bias", 32)]
    nodes = [helper.make_node("SimplifiedLayerNormalization", ["x", "s"], ["n0"], axis=axis, epsilon=1e-6,
                              stash_type=1, name="rms0"),
             helper.make_node("MatMul", ["n0", "w1"], ["m1"]),
             helper.make_node("SkipSimplifiedLayerNormalization", ["m1", "x", "g", "bias"], ["n1", "", "", "s1"],
                              domain=MS, epsilon=1e-6, name="skip1"),
             helper.make_node("MatMul", ["n1", "w2"], ["m2"]),
             helper.make_node("SkipSimplifiedLayerNormalization", ["m2", "s1", "g"], ["n2"], domain=MS, epsilon=1e-5,
                              name="skip2"),
             helper.make_node("Relu", ["n2"], ["y"])]
    g = helper.make_graph(nodes, "rms_fusions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(MS, 1)], ir_version=10)


def ort_run(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("axis", [-1, 1])
def test_ort_rmsnorm_fusions_run_natively_and_optimize(axis, tmp_path):
    path, inp, out, opt = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz", tmp_path / "o.onnx"
    onnx.save(rmsnorm_fusions_model(axis), path)
    x = np.random.default_rng(1).standard_normal((2, 7, 32)).astype(np.float32)
    np.savez(inp, x=x)
    want = ort_run(path, {"x": x})[0]
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime", "--print-steps"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    steps = [line.split() for line in p.stdout.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert not any(s[0] == "onnxruntime" for s in steps), p.stdout
    assert sum(s[0] == "layernorm" for s in steps) == 3, p.stdout
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-4, atol=1e-4)
    p = subprocess.run([ISOMER, "optimize", str(path), "-o", str(opt), "--inputs", str(inp), "--threads", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    kept = [(n.domain, n.op_type) for n in onnx.load(opt).graph.node if "Simplified" in n.op_type]
    assert sorted(kept) == [("", "SimplifiedLayerNormalization")] + [(MS, "SkipSimplifiedLayerNormalization")] * 2
    np.testing.assert_allclose(ort_run(opt, {"x": x})[0], want, rtol=1e-4, atol=1e-4)


def test_ort_layernorm_below_opset_17_runs_natively_and_optimizes(tmp_path):
    """ONNX Runtime's transformer optimizer writes a BERT's embedding LayerNorm as
    LayerNormalization at the model's opset (14 from a TorchScript export), an operator
    ONNX has from opset 17 and ONNX Runtime registers in the ONNX domain before: isomer
    refused the model ("domain 'ai.onnx' has no operator LayerNormalization at opset 14")."""
    rng = np.random.default_rng(32)
    f = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-12, name="ln"),
             helper.make_node("MatMul", ["n", "w"], ["y"])]
    g = helper.make_graph(nodes, "ln14", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [f("g", 16), f("b", 16), f("w", 16, 8)])
    path, inp, out, opt = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz", tmp_path / "o.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=7), path)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    np.savez(inp, x=x)
    want = ort_run(path, {"x": x})[0]
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime", "--print-steps"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "reference kernel" not in p.stdout and "\n  onnxruntime" not in p.stdout, p.stdout
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-4, atol=1e-4)
    p = subprocess.run([ISOMER, "optimize", str(path), "-o", str(opt), "--inputs", str(inp), "--threads", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    np.testing.assert_allclose(ort_run(opt, {"x": x})[0], want, rtol=1e-4, atol=1e-4)


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
          "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"]


@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_over_axes_apart_runs_natively(keepdims, tmp_path):
    """The dynamo exporter writes AdaptiveAvgPool2d of a non-square output (UperNet's
    pyramid pooling) as a gather and a ReduceMean over axes -3 and -1: axes apart ran
    on the reference kernel. Every reduction over axes 0 and 2 of [3, 4, 5, 6], and
    over 1 and 3 (given as an input)."""
    nodes, outs = [], []
    for i, op in enumerate(REDUCE):
        for j, axes in enumerate(([0, 2], [-3, -1])):
            name = f"y{i}_{j}"
            nodes.append(helper.make_node(op, ["x", f"axes{j}"], [name], keepdims=keepdims, name=name))
            outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    inits = [numpy_helper.from_array(np.array(a, np.int64), f"axes{j}") for j, a in enumerate(([0, 2], [-3, -1]))]
    g = helper.make_graph(nodes, "reduce_apart", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5, 6])],
                          outs, inits)
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    x = np.random.default_rng(2).uniform(0.5, 1.5, (3, 4, 5, 6)).astype(np.float32)
    np.savez(inp, x=x)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime", "--print-steps"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "reference kernel" not in p.stdout, p.stdout
    got = np.load(out)
    for o, want in zip(outs, ort_run(path, {"x": x})):
        np.testing.assert_allclose(got[o.name], want, rtol=1e-5, atol=1e-6, err_msg=o.name)


def ms_attention_model(mask_kind, scale=None):
    """BERT self-attention as ONNX Runtime's fusions write it: com.microsoft Attention
    of input [2, 6, 32] with packed weights [32, 96] and bias, 4 heads, qkv_hidden_sizes,
    and `mask_kind`: none, a raw [B, S] int32 key mask, key lengths [B], or a float
    attention_bias [B, 1, S, S]; then a MatMul. Outputs carry no value_info."""
    rng = np.random.default_rng(31)
    f = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.4, name)
    inits = [f("w", 32, 96), f("b", 96), f("wo", 32, 32)]
    ins = ["x", "w", "b"]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 32])]
    if mask_kind == "raw":
        ins.append("mask")
        graph_inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [2, 6]))
    elif mask_kind == "lengths":
        ins.append("mask")
        graph_inputs.append(helper.make_tensor_value_info("mask", TensorProto.INT32, [2]))
    elif mask_kind == "bias":
        ins += ["", "", "ab"]
        bias = np.where(np.tril(np.ones((6, 6))) > 0, 0.0, -1e4)[None, None].repeat(2, 0).astype(np.float32)
        inits.append(numpy_helper.from_array(bias, "ab"))
    attrs = {"num_heads": 4, "qkv_hidden_sizes": [32, 32, 32]}
    if scale is not None:
        attrs["scale"] = scale
    nodes = [helper.make_node("Attention", ins, ["a"], domain=MS, name="attn", **attrs),
             helper.make_node("MatMul", ["a", "wo"], ["y"])]
    g = helper.make_graph(nodes, "ms_attention", graph_inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)], ir_version=8)


@pytest.mark.parametrize("mask_kind,scale", [("none", None), ("raw", None), ("lengths", 0.3), ("bias", None)])
def test_ms_attention_runs_natively_and_matches_onnxruntime(mask_kind, scale, tmp_path):
    """com.microsoft Attention ran on ONNX Runtime, a round trip per layer of a BERT
    that onnxscript's ort_fusions or ONNX Runtime's transformer optimizer wrote."""
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(ms_attention_model(mask_kind, scale), path)
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, 6, 32)).astype(np.float32)}
    if mask_kind == "raw":
        feeds["mask"] = np.array([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0]], np.int32)
    elif mask_kind == "lengths":
        feeds["mask"] = np.array([6, 3], np.int32)
    np.savez(inp, **feeds)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime", "--print-steps"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    steps = [line.split() for line in p.stdout.splitlines() if line.startswith("  ") and not line.startswith("   ")]
    assert ["attention", "Attention", "attn"] in steps, p.stdout
    np.testing.assert_allclose(np.load(out)["y"], ort_run(path, feeds)[0], rtol=1e-4, atol=1e-4)


def layernorm14_model():
    rng = np.random.default_rng(33)
    f = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, name="ln"),
             helper.make_node("Relu", ["n"], ["y"])]
    g = helper.make_graph(nodes, "ln14", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [f("g", 32), f("b", 32)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=7)


@pytest.mark.parametrize("build", ["rms", "attention", "layernorm14"])
def test_ort_fusions_are_typed_without_onnxruntime(build, tmp_path):
    """No ONNX Runtime to ask for types (its interpreter missing): isomer's own shape
    hooks type SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization and
    Attention (LayerNormalization below opset 17 is typed as ONNX's), so the model
    still runs whole."""
    model = {"rms": lambda: rmsnorm_fusions_model(-1), "attention": lambda: ms_attention_model("bias"),
             "layernorm14": layernorm14_model}[build]()
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(model, path)
    x = np.random.default_rng(4).standard_normal((2, 6 if build != "rms" else 7, 32)).astype(np.float32)
    np.savez(inp, x=x)
    env = dict(os.environ, ISOMER_PYTHON=str(tmp_path / "no-python"))
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime"], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    np.testing.assert_allclose(np.load(out)["y"], ort_run(path, {"x": x})[0], rtol=1e-4, atol=1e-4)
