"""Models with ONNX Runtime's com.microsoft operators, written as its quantizer and
transformer optimizer write them: without value_info for what those operators
compute. ONNX's shape inference has no schemas for them, so isomer types them at
import with its own hooks (src/onnx/vendor_shapes.cpp), then asks ONNX Runtime for
what is still open (src/onnx/vendor_types.cpp); the standard
operators after them then run natively, and SkipLayerNormalization, the Gelu
forms, QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QGemm, QLinearConcat,
QLinearSigmoid and QLinearLeakyRelu run as isomer's own steps
(src/runtime/lower_vendor.cpp). Outputs are held to ONNX Runtime's.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
MS = "com.microsoft"


def save(nodes, inputs, output, inits, path):
    g = helper.make_graph(nodes, "vendor", inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)], ir_version=8)
    onnx.save(m, path)
    return path


def skip_layernorm_model(path):
    """Two residual blocks as the transformer optimizer writes them: MatMul, then
    SkipLayerNormalization (bias, and its sum output feeding the next block)."""
    rng = np.random.default_rng(4)
    f = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)
    inits = [f("w1", 32, 32), f("w2", 32, 32), f("g", 32), f("b", 32), f("bias", 32)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]),
             helper.make_node("SkipLayerNormalization", ["m1", "x", "g", "b", "bias"], ["n1", "", "", "s1"],
                              domain=MS, epsilon=1e-5),
             helper.make_node("MatMul", ["n1", "w2"], ["m2"]),
             helper.make_node("SkipLayerNormalization", ["m2", "s1", "g", "b"], ["n2"], domain=MS, epsilon=1e-5),
             helper.make_node("Relu", ["n2"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 32])], "y", inits, path)


def gelu_model(path):
    """The feed-forward activations the transformer optimizer writes below opset 20:
    Gelu, BiasGelu, FastGelu with and without a bias, QuickGelu."""
    rng = np.random.default_rng(5)
    f = lambda name, *shape: numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
    inits = [f("w", 16, 16), f("b", 16)]
    nodes = [helper.make_node("Gelu", ["x"], ["g1"], domain=MS),
             helper.make_node("BiasGelu", ["g1", "b"], ["g2"], domain=MS),
             helper.make_node("MatMul", ["g2", "w"], ["m"]),
             helper.make_node("FastGelu", ["m", "b"], ["g3"], domain=MS),
             helper.make_node("FastGelu", ["g3"], ["g4"], domain=MS),
             helper.make_node("QuickGelu", ["g4"], ["y"], domain=MS, alpha=1.5)]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5, 16])], "y", inits, path)


def qlinear_model(path, channels_last):
    """u8 activations: a residual QLinearAdd, a squeeze-excitation gate as QLinearMul by
    a per-channel [1, C, 1, 1] tensor (and by a scalar), QLinearGlobalAveragePool."""
    rng = np.random.default_rng(6)
    u8 = lambda name, *shape: numpy_helper.from_array(rng.integers(0, 256, shape).astype(np.uint8), name)
    s = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    z = lambda name, v: numpy_helper.from_array(np.array(v, np.uint8), name)
    inits = [u8("gate", 1, 8, 1, 1), u8("one", 1), s("sx", 0.05), z("zx", 120), s("sg", 0.004), z("zg", 0),
             s("sa", 0.07), z("za", 128), s("sm", 0.03), z("zm", 100), s("sp", 0.02), z("zp", 90)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["q"]),
             helper.make_node("QLinearAdd", ["q", "sx", "zx", "q", "sx", "zx", "sa", "za"], ["a"], domain=MS),
             helper.make_node("QLinearMul", ["a", "sa", "za", "gate", "sg", "zg", "sm", "zm"], ["m"], domain=MS),
             helper.make_node("QLinearMul", ["one", "sg", "zg", "m", "sm", "zm", "sm", "zm"], ["m2"], domain=MS)]
    pool_in = "m2"
    if channels_last:
        nodes.append(helper.make_node("Transpose", ["m2"], ["t"], perm=[0, 2, 3, 1]))
        pool_in = "t"
    nodes += [helper.make_node("QLinearGlobalAveragePool", [pool_in, "sm", "zm", "sp", "zp"], ["p"], domain=MS,
                               channels_last=int(channels_last)),
              helper.make_node("DequantizeLinear", ["p", "sp", "zp"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 6, 5])], "y", inits, path)


def qgemm_model(path, per_column):
    """The classifier of a per-channel QOperator model: QGemm with u8 weights [N, K]
    (transB) whose zero points differ by column, an int32 bias, a u8 output."""
    rng = np.random.default_rng(8)
    t = lambda name, v: numpy_helper.from_array(v, name)
    n, k = 10, 24
    zb = rng.integers(100, 150, n).astype(np.uint8) if per_column else np.array(128, np.uint8)
    sb = (rng.random(n) * 0.01 + 0.002).astype(np.float32) if per_column else np.array(0.005, np.float32)
    inits = [t("w", rng.integers(0, 256, (n, k)).astype(np.uint8)), t("sa", np.array(0.05, np.float32)),
             t("za", np.array(110, np.uint8)), t("sb", sb), t("zb", zb),
             t("bias", rng.integers(-3000, 3000, n).astype(np.int32)), t("sy", np.array(0.2, np.float32)),
             t("zy", np.array(120, np.uint8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sa", "za"], ["q"]),
             helper.make_node("QGemm", ["q", "sa", "za", "w", "sb", "zb", "bias", "sy", "zy"], ["g"], domain=MS,
                              transB=1),
             helper.make_node("DequantizeLinear", ["g", "sy", "zy"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, k])], "y", inits, path)


def qlinear_cnn_model(path):
    """What ONNX Runtime's quantizer writes for EfficientNet, DenseNet and ShuffleNet
    (u8): SiLU as QLinearMul(x, QLinearSigmoid(x)), QLinearLeakyRelu, QLinearConcat of
    parts with their own scales on the channel axis (integer convolutions' channels-last
    outputs) and on a spatial one, a squeeze-excitation gate QLinearMul by [1, C, 1, 1], and
    QLinearAveragePool counting the padding (ceil mode) and not."""
    rng = np.random.default_rng(9)
    t = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    f32, u8 = np.float32, np.uint8
    inits = [t("w", rng.integers(-60, 60, (8, 4, 3, 3)).astype(np.int8)), t("sw", f32(0.01)), t("zw", np.int8(0)),
             t("sx", f32(0.05)), t("zx", u8(120)), t("sc", f32(0.08)), t("zc", u8(100)), t("ss", f32(1 / 256)),
             t("zs", u8(0)), t("sm", f32(0.06)), t("zm", u8(90)), t("sl", f32(0.03)), t("zl", u8(140)),
             t("sy", f32(0.07)), t("zy", u8(110)), t("gate", rng.integers(0, 256, (1, 16, 1, 1)).astype(u8)),
             t("sg", f32(0.004)), t("zg", u8(0)), t("sp", f32(0.05)), t("zp", u8(105))]
    conv = lambda out: helper.make_node("QLinearConv", ["q", "sx", "zx", "w", "sw", "zw", "sc", "zc"], [out], pads=[1, 1, 1, 1])
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["q"]), conv("c1"), conv("c2"),
             helper.make_node("QLinearSigmoid", ["c1", "sc", "zc", "ss", "zs"], ["sig"], domain=MS),
             helper.make_node("QLinearMul", ["c1", "sc", "zc", "sig", "ss", "zs", "sm", "zm"], ["silu"], domain=MS),
             helper.make_node("QLinearLeakyRelu", ["c2", "sc", "zc", "sl", "zl"], ["lr"], domain=MS, alpha=0.2),
             helper.make_node("QLinearConcat", ["sy", "zy", "silu", "sm", "zm", "lr", "sl", "zl"], ["cat"], domain=MS,
                              axis=1),
             helper.make_node("QLinearMul", ["gate", "sg", "zg", "cat", "sy", "zy", "sy", "zy"], ["gated"], domain=MS),
             helper.make_node("QLinearAveragePool", ["gated", "sy", "zy", "sp", "zp"], ["p1"], domain=MS,
                              kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
             helper.make_node("QLinearConcat", ["sp", "zp", "p1", "sp", "zp", "p1", "sp", "zp"], ["tall"],
                              domain=MS, axis=-2),
             helper.make_node("QLinearAveragePool", ["tall", "sp", "zp", "sy", "zy"], ["p2"], domain=MS,
                              kernel_shape=[2, 2], pads=[0, 1, 1, 0]),
             helper.make_node("DequantizeLinear", ["p2", "sy", "zy"], ["y"])]
    return save(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 7, 6])], "y", inits, path)


def test_qlinear_lookup_and_concat_operators_run_natively_and_match_onnxruntime(tmp_path):
    path = qlinear_cnn_model(str(tmp_path / "qcnn.onnx"))
    steps = steps_of(path)
    assert not any(s[0] == "onnxruntime" for s in steps), steps
    kinds = [s[0] for s in steps]
    assert kinds.count("concat") == 2 and kinds.count("pool") == 2, steps
    # The sigmoid and its product are one table; the mul read the convolution in place.
    assert sum(s[1] == "QLinearSigmoid+QLinearMul" for s in steps) == 1, steps
    x = {"x": (np.random.default_rng(5).random((2, 4, 7, 6)) * 6 - 3).astype(np.float32)}
    want = ort_run(path, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)[0]
        assert np.abs(got - want).max() <= 0.07 + 1e-6  # at most a rounding flip of one output step
        assert (np.abs(got - want) > 1e-6).mean() <= 0.05


def steps_of(path):
    p = subprocess.run([ISOMER, "run", path, "--threads", "1", "--print-steps"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    # Step lines: two spaces, the step's kind, its operators (the lines above them name opaque nodes).
    return [line.split() for line in (p.stdout + p.stderr).splitlines()
            if line.startswith("  ") and not line.startswith("   ") and line.split()]


def ort_run(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, x)[0]


def test_skip_layernorm_runs_natively_and_matches_onnxruntime(tmp_path):
    path = skip_layernorm_model(str(tmp_path / "skip.onnx"))
    steps = steps_of(path)
    assert not any(s[0] == "onnxruntime" for s in steps), steps
    assert sum(s[0] == "layernorm" for s in steps) == 2, steps
    x = {"x": np.random.default_rng(1).standard_normal((2, 7, 32)).astype(np.float32)}
    want = ort_run(path, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_gelu_forms_run_natively_and_match_onnxruntime(tmp_path):
    path = gelu_model(str(tmp_path / "gelu.onnx"))
    steps = steps_of(path)
    assert not any(s[0] == "onnxruntime" for s in steps), steps
    x = {"x": np.random.default_rng(3).standard_normal((3, 5, 16)).astype(np.float32) * 2}
    want = ort_run(path, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels_last", [False, True])
def test_qlinear_vendor_operators_run_natively_and_match_onnxruntime(channels_last, tmp_path):
    path = qlinear_model(str(tmp_path / "q.onnx"), channels_last)
    steps = steps_of(path)
    assert not any(s[0] == "onnxruntime" for s in steps), steps
    x = {"x": (np.random.default_rng(2).random((2, 8, 6, 5)) * 4 - 1).astype(np.float32)}
    want = ort_run(path, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)[0]
        # The same float32 arithmetic as ONNX Runtime's: at most a rounding flip (one output step, 0.02).
        assert np.abs(got - want).max() <= 0.02 + 1e-6
        assert (np.abs(got - want) > 1e-6).mean() <= 0.1


@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm_runs_natively_and_matches_onnxruntime(per_column, tmp_path):
    path = qgemm_model(str(tmp_path / "qgemm.onnx"), per_column)
    steps = steps_of(path)
    assert not any(s[0] == "onnxruntime" for s in steps), steps
    x = {"x": (np.random.default_rng(4).random((3, 24)) * 4 - 2).astype(np.float32)}
    want = ort_run(path, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)[0]
        assert np.abs(got - want).max() <= 0.2 + 1e-6  # at most a rounding flip of one output step
        assert (np.abs(got - want) > 1e-6).mean() <= 0.1


@pytest.mark.parametrize("model", ["qlinear", "qlinear_last", "qgemm", "qgemm_pc", "qcnn", "skip", "gelu"])
def test_vendor_outputs_declared_without_shape_are_typed_by_isomer_itself(model, tmp_path):
    """Every value made a graph output declared with no type or shape, no value_info,
    and no ONNX Runtime to ask (its interpreter missing): isomer's own hooks
    (src/onnx/vendor_shapes.cpp) type what the vendor operators compute, so the model
    runs whole on the runtime with each value of ONNX Runtime's dtype and shape."""
    build = {"qlinear": lambda p: qlinear_model(p, False), "qlinear_last": lambda p: qlinear_model(p, True),
             "qgemm": lambda p: qgemm_model(p, False), "qgemm_pc": lambda p: qgemm_model(p, True),
             "qcnn": qlinear_cnn_model, "skip": skip_layernorm_model, "gelu": gelu_model}[model]
    path = build(str(tmp_path / "m.onnx"))
    m = onnx.load(path)
    names = [o for n in m.graph.node for o in n.output if o and o != m.graph.output[0].name]
    m.graph.output.extend(helper.make_empty_tensor_value_info(o) for o in names)
    inter = str(tmp_path / "inter.onnx")
    onnx.save(m, inter)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    x = {"x": (np.random.default_rng(7).random(shape) * 4 - 2).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **x)
    env = dict(os.environ, ISOMER_PYTHON=str(tmp_path / "no-python"))
    p = subprocess.run([ISOMER, "run", inter, "--inputs", str(tmp_path / "in.npz"), "--no-onnxruntime", "--threads", "1",
                        "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "out.npz")
    s = ort.InferenceSession(inter, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in s.get_outputs()], s.run(None, x)))
    for name in names:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
