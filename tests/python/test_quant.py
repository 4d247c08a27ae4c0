"""Quantized models, made in the test with onnxruntime.quantization from small seeded
float models: QDQ (quantize_static), QOperator (QLinearConv, QLinearMatMul, and
com.microsoft operators, typed by ONNX Runtime's inference) and dynamic (DynamicQuantizeLinear,
MatMulInteger). isomer's runtime must run the quantization natively, agree with ONNX
Runtime (all optimizations on: its integer kernels) up to rounding flips, and
`isomer optimize` must succeed with the check passed and the model still quantized.
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
QUANT_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "QLinearConv",
             "QLinearMatMul", "ConvInteger"}


def init(rng, name, *shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def cnn_shape(rank):
    return (1, 3) + (24 if rank < 3 else 8,) * rank


def cnn(seed, rank=2):
    """Conv-Relu twice with a residual Add, a strided Conv, pooling and a Gemm; `rank`
    spatial axes (Conv1d of a TCN, Conv3d of a video model)."""
    rng = np.random.default_rng(seed)
    k = (3,) * rank
    inits = [init(rng, "w1", 16, 3, *k), init(rng, "b1", 16), init(rng, "w2", 16, 16, *k, scale=0.1),
             init(rng, "b2", 16), init(rng, "w3", 32, 16, *k, scale=0.1), init(rng, "b3", 32),
             init(rng, "wf", 10, 32), init(rng, "bf", 10)]
    pads = [1] * (2 * rank)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=pads),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=pads),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Add", ["r1", "r2"], ["a"]),
             helper.make_node("Conv", ["a", "w3", "b3"], ["c3"], pads=pads, strides=[2] * rank),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("GlobalAveragePool", ["r3"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(cnn_shape(rank)))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def mlp(seed):
    """A transformer's feed-forward block: MatMul, Add, Relu, MatMul, Add, residual."""
    rng = np.random.default_rng(seed)
    inits = [init(rng, "w1", 64, 128, scale=0.1), init(rng, "b1", 128), init(rng, "w2", 128, 64, scale=0.1),
             init(rng, "b2", 64)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["m2"]),
             helper.make_node("Add", ["m2", "b2"], ["a2"]), helper.make_node("Add", ["a2", "x"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 64])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


class Reader(oq.CalibrationDataReader):
    def __init__(self, shape, seed, n=4):
        rng = np.random.default_rng(seed)
        self.data = [{"x": rng.random(shape, dtype=np.float32) * 2 - 0.5} for _ in range(n)]

    def get_next(self):
        return self.data.pop() if self.data else None


def make(kind, tmp_path):
    """`kind`: qdq, qoperator or dynamic, with _1d or _3d for a CNN of that rank (dynamic: ConvInteger;
    dynamic_u8: with u8 weights)."""
    src, dst = str(tmp_path / f"{kind}_float.onnx"), str(tmp_path / f"{kind}.onnx")
    rank = 1 if kind.endswith("_1d") else 3 if kind.endswith("_3d") else 2  # _2d: the default
    if kind == "dynamic":
        onnx.save(mlp(1), src)
        oq.quantize_dynamic(src, dst, weight_type=oq.QuantType.QInt8)
        return dst, (2, 8, 64)
    onnx.save(cnn(2, rank), src)
    if kind.startswith("dynamic"):  # dynamic_u8: u8 weights with a zero point, which oneDNN's convolutions lack
        wt = oq.QuantType.QUInt8 if kind.startswith("dynamic_u8") else oq.QuantType.QInt8
        oq.quantize_dynamic(src, dst, weight_type=wt)
        return dst, cnn_shape(rank)
    fmt = oq.QuantFormat.QDQ if kind.startswith("qdq") else oq.QuantFormat.QOperator
    # qoperator_u8: u8 weights with zero points of their own (QUInt8), as older quantized models have.
    wt = oq.QuantType.QUInt8 if "_u8" in kind else oq.QuantType.QInt8
    oq.quantize_static(src, dst, Reader(cnn_shape(rank), 3), quant_format=fmt, per_channel=kind.startswith("qdq"),
                       weight_type=wt, activation_type=oq.QuantType.QUInt8)
    return dst, cnn_shape(rank)


def feeds(shape, seed=5):
    return {"x": (np.random.default_rng(seed).random(shape, dtype=np.float32) * 2 - 0.5)}


def ort_run(path, x, optimized=True):
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, x)


def output_step(path):
    """The scale of the DequantizeLinear that gives the output, or None."""
    m = onnx.load(path)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    out = m.graph.output[0].name
    for n in m.graph.node:
        if out in n.output and n.op_type == "DequantizeLinear":
            return float(inits[n.input[1]])
    return None


def assert_close_in_steps(got, want, step, max_steps=1, max_fraction=0.1):
    d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / step
    assert d.max() <= max_steps + 1e-6, f"{d.max()} steps off"
    assert (d >= 0.5).mean() <= max_fraction, f"{(d >= 0.5).sum()} of {d.size} elements off by a step"


CONV_RANKS = ["qdq_1d", "qdq_3d", "qoperator_1d", "qoperator_u8_2d", "dynamic_1d", "dynamic_3d", "dynamic_u8_2d",
              "dynamic_u8_1d"]


@pytest.mark.parametrize("kind", ["qdq", "qoperator", "dynamic"] + CONV_RANKS)
def test_runtime_matches_onnxruntime(kind, tmp_path):
    path, shape = make(kind, tmp_path)
    x = feeds(shape)
    want = ort_run(path, x)[0]
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)[0]
        step = output_step(path)
        if step is not None:
            assert_close_in_steps(got, want, step)
        else:  # dynamic quantization: the same integers, then float arithmetic
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("kind", ["qdq", "dynamic"])  # QOperator has com.microsoft nodes: no reference
def test_reference_matches_onnxruntime_as_written(kind, tmp_path):
    path, shape = make(kind, tmp_path)
    x = feeds(shape)
    want = ort_run(path, x, optimized=False)[0]
    got = isomer.run(path, x, engine="reference")[0]
    step = output_step(path)
    if step is not None:
        assert_close_in_steps(got, want, step, max_steps=2)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("kind", ["qdq", "qoperator", "dynamic"] + CONV_RANKS)
def test_quantization_runs_on_native_steps(kind, tmp_path):
    path, shape = make(kind, tmp_path)
    np.savez(tmp_path / "in.npz", **feeds(shape))
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--print-steps"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    steps = p.stdout + p.stderr
    want = "int8-matmul" if kind == "dynamic" else "int8-conv"
    assert want in steps, steps
    for line in steps.splitlines():
        if "reference" in line or "delegate" in line:
            assert not any(op in line for op in QUANT_OPS), line
        # The QOperator format's com.microsoft operators (QLinearAdd, QLinearGlobalAveragePool, QGemm), which ONNX
        # shape inference cannot type, run natively too, and so do the convolutions after them.
        assert not line.strip().startswith("onnxruntime"), line


@pytest.mark.parametrize("kind", ["dynamic_2d", "dynamic_u8_2d", "dynamic_1d"])
def test_dynamic_quantization_keeps_the_convolutions_layout(kind, tmp_path):
    """DynamicQuantizeLinear has one scale for the whole tensor: it quantizes the
    channels-last result of an integer convolution (scaled, its bias added and its
    Relu applied) as it lies, and the next convolution reads that: no reorder
    between them."""
    path, shape = make(kind, tmp_path)
    np.savez(tmp_path / "in.npz", **feeds(shape))
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--print-steps"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    kinds = [line.split()[0] for line in p.stdout.splitlines()
             if line.startswith("  ") and not line.strip().startswith("output")]
    convs = [i for i, k in enumerate(kinds) if k == "int8-conv"]
    assert len(convs) == 3, kinds
    for a, b in zip(convs, convs[1:]):
        assert "dynamic-quantize" in kinds[a:b] and "reorder" not in kinds[a:b], kinds


def scaled_conv_integer(per_channel, weights):
    """x -> DynamicQuantizeLinear -> ConvInteger (s8 weights, or u8 with a zero point)
    -> Cast -> Mul by the activation's scale times the weights' (one, or one per
    output channel) -> Add of a bias per channel -> Relu, as quantize_dynamic writes it."""
    rng = np.random.default_rng(4)
    m = 8
    if weights == "s8":
        w, wz = rng.integers(-127, 128, (m, 3, 3, 3)).astype(np.int8), np.int8(0)
    else:
        w, wz = rng.integers(0, 256, (m, 3, 3, 3)).astype(np.uint8), np.uint8(131)
    ws = (rng.random((1, m, 1, 1) if per_channel else ()) * 0.01 + 0.002).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(wz, "wz"),
             numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array((rng.standard_normal((1, m, 1, 1)) * 0.1).astype(np.float32), "b")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("ConvInteger", ["xq", "w", "xz", "wz"], ["acc"], pads=[1, 1, 1, 1]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["accf", "s"], ["scaled"]), helper.make_node("Add", ["scaled", "b"], ["biased"]),
             helper.make_node("Relu", ["biased"], ["y"])]
    g = helper.make_graph(nodes, "conv_integer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, 12, 12])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("weights", ["s8", "u8"])
def test_conv_integer_takes_its_scale_bias_and_relu(per_channel, weights, tmp_path):
    """The Cast, the scale's Mul, the bias Add and the Relu after a ConvInteger are
    the integer convolution's post-ops (with a weight zero point: its correction
    step's), one step writing float32, and its result is ONNX Runtime's, each of
    the product and the sum rounded as there (one FMA would flip DynamicQuantizeLinear's
    steps downstream)."""
    path, x, kinds = steps_on_drawn_inputs(scaled_conv_integer(per_channel, weights), (1, 3, 12, 12), tmp_path)
    assert kinds == ["dynamic-quantize", "int8-conv"] + ([] if weights == "s8" else ["zero-point"]), kinds
    assert_runtime_is_onnxruntime(path, x)


def steps_on_drawn_inputs(model, shape, tmp_path, reorders=False):
    """`model` saved and run at 1 thread on drawn inputs of `shape`: its path, the
    inputs, and its steps' kinds but (unless `reorders`) the reorders (x's row-major
    u8 to channels-last, and y's back, it being an output)."""
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    x = feeds(shape)
    np.savez(tmp_path / "in.npz", **x)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--print-steps",
                        "--no-onnxruntime"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    kinds = [line.split()[0] for line in p.stdout.splitlines()
             if line.startswith("  ") and not line.strip().startswith("output")]
    return path, x, [k for k in kinds if reorders or k != "reorder"]


def assert_runtime_is_onnxruntime(path, x):
    want = ort_run(path, x)[0]
    for threads in (1, 2):
        np.testing.assert_array_equal(isomer.run(path, x, engine="runtime", threads=threads)[0], want)


def conv_integer_residual_block(per_channel, weights, residual_first):
    """A quantize_dynamic ResNet block at odd shapes: two scaled ConvIntegers (as
    scaled_conv_integer), the second's biased result added to the block's input h
    (as the left or the right operand), then Relu."""
    rng = np.random.default_rng(6)
    m, inits, nodes = 5, [], []

    def conv(x, c, i, relu):
        if weights == "s8":
            w, wz = rng.integers(-127, 128, (m, c, 3, 3)).astype(np.int8), np.int8(0)
        else:
            w, wz = rng.integers(0, 256, (m, c, 3, 3)).astype(np.uint8), np.uint8(127 + 2 * i)
        ws = (rng.random((1, m, 1, 1) if per_channel else ()) * 0.01 + 0.002).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(wz, f"wz{i}"),
                      numpy_helper.from_array(ws, f"ws{i}"),
                      numpy_helper.from_array((rng.standard_normal((1, m, 1, 1)) * 0.1).astype(np.float32), f"b{i}")])
        nodes.extend([helper.make_node("DynamicQuantizeLinear", [x], [f"xq{i}", f"xs{i}", f"xz{i}"]),
                      helper.make_node("Mul", [f"xs{i}", f"ws{i}"], [f"s{i}"]),
                      helper.make_node("ConvInteger", [f"xq{i}", f"w{i}", f"xz{i}", f"wz{i}"], [f"acc{i}"],
                                       pads=[1, 1, 1, 1]),
                      helper.make_node("Cast", [f"acc{i}"], [f"accf{i}"], to=TensorProto.FLOAT),
                      helper.make_node("Mul", [f"accf{i}", f"s{i}"], [f"scaled{i}"]),
                      helper.make_node("Add", [f"scaled{i}", f"b{i}"], [f"biased{i}"])])
        if relu:
            nodes.append(helper.make_node("Relu", [f"biased{i}"], [f"h{i}"]))
        return f"h{i}" if relu else f"biased{i}"

    h = conv("x", 3, 1, True)
    out = conv(h, m, 2, False)
    nodes += [helper.make_node("Add", [h, out] if residual_first else [out, h], ["sum"]),
              helper.make_node("Relu", ["sum"], ["y"])]
    g = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 11, 13])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, m, 11, 13])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("residual_first", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("weights", ["s8", "u8"])
def test_conv_integer_takes_a_residual_add(per_channel, weights, residual_first, tmp_path):
    """A residual block's Add and Relu after its second ConvInteger are that
    convolution's post-ops (with a weight zero point: its correction step's), not a
    pointwise step of their own, and its result is ONNX Runtime's, the bias and the
    residual added one after the other as there."""
    path, x, kinds = steps_on_drawn_inputs(conv_integer_residual_block(per_channel, weights, residual_first),
                                           (2, 3, 11, 13), tmp_path)
    conv = ["dynamic-quantize", "int8-conv"] + ([] if weights == "s8" else ["zero-point"])
    assert kinds == conv + conv, kinds
    assert_runtime_is_onnxruntime(path, x)


@pytest.mark.parametrize("kind", ["qdq", "dynamic"])
def test_optimize_succeeds_and_keeps_the_model_quantized(kind, tmp_path):
    path, shape = make(kind, tmp_path)
    out = str(tmp_path / f"{kind}.opt.onnx")
    p = subprocess.run([ISOMER, "optimize", path, "-o", out, "--budget", "5"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert os.path.exists(out)
    before = [n.op_type for n in onnx.load(path).graph.node]
    after = [n.op_type for n in onnx.load(out).graph.node]
    for op in QUANT_OPS:  # weights stay quantized: no DequantizeLinear folded into float
        assert after.count(op) == before.count(op), (op, before.count(op), after.count(op))
    x = feeds(shape, seed=9)
    want, got = ort_run(path, x)[0], ort_run(out, x)[0]
    step = output_step(path)
    if step is not None:
        assert_close_in_steps(got, want, step)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("op", ["QLinearConv", "QLinearMatMul"])
def test_requantization_rounds_before_adding_an_odd_zero_point(op, tmp_path):
    """x_scale 0.5 (1 + 2^-20) puts acc * scale just past a tie for odd acc: ONNX
    Runtime rounds it up, then adds the zero point 129; adding 129 in float32 first
    loses the excess and half to even rounds down."""
    rng = np.random.default_rng(5)
    t = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    f32, u8 = np.float32, np.uint8
    x = rng.integers(3, 14, (1, 3, 5, 7) if op == "QLinearConv" else (5, 3)).astype(u8)
    w = np.array([[1, 0, 0], [0, -1, 0], [1, 1, 0], [0, 0, 1], [0, 1, -1]], np.int8)
    inits = [t("sx", f32(0.5 * (1 + 2.0 ** -20))), t("zx", u8(3)), t("sw", f32(1)), t("zw", np.int8(0)),
             t("sy", f32(1)), t("zy", u8(129))]
    inits.append(t("w", w.reshape(5, 3, 1, 1) if op == "QLinearConv" else w.T.copy()))
    node = helper.make_node(op, ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"])
    g = helper.make_graph([node], "requant", [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    np.savez(tmp_path / "in.npz", x=x)
    subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--no-onnxruntime", "--outputs",
                    str(tmp_path / "out.npz")], check=True, capture_output=True)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = np.load(tmp_path / "out.npz")["y"]
    assert (want % 2 == 0).any() and (want % 2 == 1).any()
    np.testing.assert_array_equal(got, want)


def qdq_conv_after_float(channels):
    """x * 1.5 (a float step's row-major result), quantized per tensor, then a QDQ
    convolution (per-channel s8 weights, an int32 bias) and its requantized output,
    as quantize_static writes them."""
    rng = np.random.default_rng(8)
    t = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    sw = (rng.random(16) * 0.004 + 0.001).astype(np.float32)
    inits = [t("k", np.float32(1.5)), t("sx", np.float32(0.02)), t("zx", np.uint8(121)),
             t("w", rng.integers(-127, 128, (16, channels, 3, 3)).astype(np.int8)), t("sw", sw),
             t("zw", np.zeros(16, np.int8)), t("bq", rng.integers(-2000, 2000, 16).astype(np.int32)),
             t("sb", (np.float32(0.02) * sw).astype(np.float32)), t("zb", np.zeros(16, np.int32)),
             t("sy", np.float32(0.05)), t("zy", np.uint8(118))]
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "sx", "zx"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "sx", "zx"], ["dq"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "sb", "zb"], ["b"], axis=0),
             helper.make_node("Conv", ["dq", "wd", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["qy"]),
             helper.make_node("DequantizeLinear", ["qy", "sy", "zy"], ["y"])]
    shape = [2, channels, 5, 16]
    g = helper.make_graph(nodes, "qdq_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 5, 16])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), tuple(shape)


@pytest.mark.parametrize("channels", [32, 24])
def test_a_quantization_read_by_qdq_convolutions_is_written_channels_last(channels, tmp_path):
    """The QuantizeLinear before a QDQ convolution writes the channels-last layout the
    convolution reads (no reorder between them) where its channels and the positions
    come in 16s (the kernel's tiles); 24 channels keep the reorder. Either way the
    output is ONNX Runtime's but for a rounding flip."""
    model, shape = qdq_conv_after_float(channels)
    path, x, steps = steps_on_drawn_inputs(model, shape, tmp_path, reorders=True)
    between = steps[steps.index("quantize") + 1:steps.index("int8-conv")]
    assert between == ([] if channels % 16 == 0 else ["reorder"]), steps
    want = ort_run(path, x)[0]
    for threads in (1, 2):
        assert_close_in_steps(isomer.run(path, x, engine="runtime", threads=threads)[0], want, 0.05)
