"""CNN layers of current torchvision / audio exports that earlier rounds did not try.

Strided ConvTranspose (every decoder's and vocoder's upsampling: kernel 4, stride 2,
padding 1, in 1-D, 2-D and 3-D) ran on oneDNN's deconvolution at 16-25 times ONNX
Runtime's time with a ReLU after it (1.7-1.9 times without: oneDNN's deconvolution
with an activation fused runs 6-9 times slower, and none is fused into it now); it runs as a 1x1 convolution to the kernel taps and a scatter of
them into the output. InstanceNormalization (RAFT's encoders) of a convolution's
output, in channel blocks or channels last, read one float per position per
channel three times (2 ms for [2, 32, 64, 64]); it reads whole blocks of lanes.
TopK of int64 or int32 data (torch's pack_padded_sequence sorts the lengths with
one) ran on the reference kernel. Each case is built with onnx.helper, run natively (no ONNX Runtime, no reference
kernel) and compared with ONNX Runtime; where the fix was speed, the case checks the
plan that gives it (which kernel, which steps), not a time.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def deconv_model(x_shape, c_out, kernel, group=1, bias=True, relu=False, **attrs):
    rng = np.random.default_rng(sum(x_shape) + len(kernel))
    w = rng.standard_normal((x_shape[1], c_out // group, *kernel)).astype(np.float32) * 0.2
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(c_out).astype(np.float32), "b"))
        inputs.append("b")
    nodes = [helper.make_node("ConvTranspose", inputs, ["t" if relu else "y"], name="up", group=group, **attrs)]
    if relu == "leaky":  # then a ReLU: two slopes in turn
        nodes += [helper.make_node("LeakyRelu", ["t"], ["t2"], name="leaky", alpha=0.2),
                  helper.make_node("Relu", ["t2"], ["y"], name="relu")]
    elif relu:
        nodes.append(helper.make_node("Relu", ["t"], ["y"], name="relu"))
    graph = helper.make_graph(nodes, "deconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_instance_norm_model(shape, c_mid, groups=None):
    """Conv (3x3, so the runtime picks a blocked or channel-last layout) then
    InstanceNormalization, or GroupNormalization with `groups` groups."""
    rng = np.random.default_rng(c_mid)
    n, c, h, w = shape
    inits = [numpy_helper.from_array(rng.standard_normal((c_mid, c, 3, 3)).astype(np.float32) * 0.3, "w"),
             numpy_helper.from_array(rng.standard_normal(c_mid).astype(np.float32), "cb"),
             numpy_helper.from_array(rng.uniform(0.5, 2, c_mid).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(c_mid).astype(np.float32), "b")]
    norm = (helper.make_node("InstanceNormalization", ["t", "s", "b"], ["y"], name="norm", epsilon=1e-5)
            if groups is None else
            helper.make_node("GroupNormalization", ["t", "s", "b"], ["y"], name="norm", num_groups=groups, epsilon=1e-5))
    nodes = [helper.make_node("Conv", ["x", "w", "cb"], ["t"], name="conv", pads=[1, 1, 1, 1]), norm]
    graph = helper.make_graph(nodes, "norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21 if groups else 17)])


def run_native(tmp_path, model, x, threads=1):
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(model, path)
    np.savez(inp, x=x)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads",
                        str(threads), "--no-onnxruntime", "--print-steps"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "reference" not in p.stdout, p.stdout
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    got = np.load(out)
    for o, want in zip(session.get_outputs(), session.run(None, {"x": x})):
        assert got[o.name].shape == want.shape and got[o.name].dtype == want.dtype, o.name
        np.testing.assert_allclose(got[o.name], want, rtol=1e-4, atol=1e-4)
    return p.stdout


def steps_of(stdout, label):
    """The kinds of the printed steps labelled `label`."""
    kinds = []
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[-1] == label:
            kinds.append(parts[0])
    return kinds


def step_signatures(tmp_path, model, x):
    """(kind, signature) of every step of one profiled run at one thread."""
    path, inp, rep = tmp_path / "p.onnx", tmp_path / "p.npz", tmp_path / "p.json"
    onnx.save(model, path)
    np.savez(inp, x=x)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--threads", "1", "--no-onnxruntime", "--bench",
                        "--repeat", "1", "--profile", "--report-json", str(rep)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return [(s["kind"], s["signature"]) for s in json.load(open(rep))["profile"]]


# name: (input shape, output channels, kernel, attributes)
DECONVS = {
    "1d_k4_s2_p1": ((2, 6, 37), 5, [4], dict(strides=[2], pads=[1, 1])),
    "1d_k5_s3_dilated": ((1, 4, 19), 3, [5], dict(strides=[3], pads=[2, 1], dilations=[2])),
    "2d_k3_s2_p1_op1": ((1, 6, 7, 9), 4, [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    "2d_k4_s2_p1_relu_nobias": ((2, 8, 6, 5), 8, [4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1], relu=True,
                                                               bias=False)),
    "2d_s21_asym_dil": ((1, 5, 6, 7), 3, [3, 3], dict(strides=[2, 1], pads=[1, 0, 2, 1], dilations=[2, 1])),
    "2d_output_shape": ((1, 3, 5, 6), 4, [3, 3], dict(strides=[2, 2], output_shape=[12, 13])),
    "2d_k2_s3_gaps": ((1, 3, 4, 4), 2, [2, 2], dict(strides=[3, 3])),
    "3d_k3_s2_p1": ((1, 4, 3, 5, 4), 3, [3, 3, 3], dict(strides=[2, 2, 2], pads=[1, 1, 1, 1, 1, 1])),
    "2d_groups_s2": ((1, 6, 5, 5), 4, [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1], group=2)),
    # large enough for a team of two threads over the output rows
    "2d_batch2_team": ((2, 16, 40, 40), 16, [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
    "1d_long_team": ((1, 16, 3000), 16, [4], dict(strides=[2], pads=[1, 1], relu=True)),
    "2d_s1_k3_p1_relu": ((2, 6, 9, 8), 5, [3, 3], dict(strides=[1, 1], pads=[1, 1, 1, 1], relu=True)),
    "1d_s1_dilated": ((1, 4, 23), 6, [5], dict(strides=[1], pads=[3, 1], dilations=[2])),
    "3d_s1_groups_asym": ((1, 6, 4, 5, 6), 4, [3, 2, 3], dict(strides=[1, 1, 1], pads=[0, 1, 2, 2, 0, 1], group=2)),
    "2d_s1_pad_past_kernel": ((1, 3, 9, 9), 4, [3, 3], dict(strides=[1, 1], pads=[3, 1, 1, 3])),
    "2d_same_upper": ((1, 3, 5, 6), 4, [3, 3], dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "2d_same_lower_s1": ((1, 3, 5, 6), 4, [4, 3], dict(strides=[1, 1], auto_pad="SAME_LOWER")),
    "2d_leaky_relu": ((1, 4, 6, 7), 6, [4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1], relu="leaky")),
    "2d_leaky_team": ((2, 16, 40, 40), 16, [4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1], relu="leaky")),
}


@pytest.mark.parametrize("name", sorted(DECONVS))
def test_strided_conv_transpose_matches_onnxruntime(tmp_path, name):
    shape, c_out, kernel, attrs = DECONVS[name]
    attrs = dict(attrs)
    relu, bias, group = attrs.pop("relu", False), attrs.pop("bias", True), attrs.get("group", 1)
    model = deconv_model(list(shape), c_out, kernel, bias=bias, relu=relu, **attrs)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    # A strided depthwise one, and one padded past its kernel's reach, stay on
    # oneDNN's deconvolution; the others run as convolutions.
    on_onednn = (group > 1 and c_out // group < 2 and max(attrs["strides"]) > 1) or name == "2d_s1_pad_past_kernel"
    for threads in (1, 2):
        out = run_native(tmp_path, model, x, threads)
        assert ("deconv" in steps_of(out, "up")) == on_onednn, out


@pytest.mark.parametrize("shape", [(1, 32, 4000), (1, 32, 64, 64)])
def test_strided_conv_transpose_runs_as_taps_and_a_scatter(tmp_path, shape):
    """Kernel 4, stride 2, padding 1, 32 to 16 channels, then ReLU: 16-25x ONNX
    Runtime's time on oneDNN's deconvolution with the ReLU as its post-op (1.7-1.9x
    without it), about 1x as a product and a scatter (docs/runtime.md; timed by
    scripts/bench_rnn_probes.py-style A/B runs, not here)."""
    k = [4] * (len(shape) - 2)
    model = deconv_model(list(shape), 16, k, relu=True, strides=[2] * len(k), pads=[1] * 2 * len(k))
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = run_native(tmp_path, model, x)
    assert "deconv" not in steps_of(out, "up"), out


@pytest.mark.parametrize("kernel,stride,group,pad", [(3, 1, 1, 1), (4, 2, 2, 1), (3, 1, 2, 3)])
def test_conv_transpose_fuses_no_activation_into_a_deconvolution(tmp_path, kernel, stride, group, pad):
    """On oneDNN's deconvolution a ConvTranspose ran 6-9 times slower with the ReLU
    fused as its post-op (8.5x and 35x ONNX Runtime's time): the ReLU runs as a
    step of its own there (padded past its kernel's reach); a stride-1 one is a
    convolution with the kernel flipped (1.5x ONNX Runtime's time as a
    deconvolution) and a strided one taps and a scatter, both with the ReLU fused."""
    model = deconv_model([1, 32, 64, 64], 16, [kernel, kernel], group=group, relu=True, strides=[stride] * 2,
                         pads=[pad] * 4)
    x = np.random.default_rng(0).standard_normal((1, 32, 64, 64)).astype(np.float32)
    out = run_native(tmp_path, model, x)
    on_onednn = pad >= kernel
    assert ("deconv" in steps_of(out, "up")) == on_onednn, out
    assert bool(steps_of(out, "relu")) == on_onednn, out
    sigs = [sig for kind, sig in step_signatures(tmp_path, model, x) if "deconv" in sig and "flipped" not in sig]
    assert all("elt" not in sig for sig in sigs), sigs


@pytest.mark.parametrize("shape,c_mid,groups", [((2, 3, 17, 19), 32, None), ((1, 3, 9, 8), 24, None),
                                                ((1, 3, 9, 8), 48, None), ((2, 3, 10, 11), 32, 8),
                                                ((1, 3, 8, 8), 64, 16), ((1, 3, 8, 8), 40, 20)])
def test_norm_inside_channel_blocks_matches_onnxruntime(tmp_path, shape, c_mid, groups):
    model = conv_instance_norm_model(shape, c_mid, groups)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32) * 3 + 1
    for threads in (1, 2):
        out = run_native(tmp_path, model, x, threads)
        assert "groupnorm" in steps_of(out, "norm"), out


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("axis,k,largest", [(-1, 3, 1), (0, 2, 0), (1, 7, 1), (-1, 1, 0)])
def test_integer_top_k_matches_onnxruntime(tmp_path, dtype, axis, k, largest):
    """Values with ties (the lower index first, as ONNX Runtime orders them) and
    extremes of the type, sorted along either axis."""
    tp = TensorProto.INT64 if dtype == np.int64 else TensorProto.INT32
    node = helper.make_node("TopK", ["x", "k"], ["y", "i"], name="topk", axis=axis, largest=largest)
    graph = helper.make_graph([node], "topk", [helper.make_tensor_value_info("x", tp, [5, 7])],
                              [helper.make_tensor_value_info("y", tp, None),
                               helper.make_tensor_value_info("i", TensorProto.INT64, None)],
                              [numpy_helper.from_array(np.array([k], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(k).integers(-3, 4, (5, 7)).astype(dtype)
    x[0, 0], x[1, 1] = np.iinfo(dtype).max, np.iinfo(dtype).min
    out = run_native(tmp_path, model, x)
    assert steps_of(out, "topk") == ["topk"], out


def pool_model(op, x_shape, kernel, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="pool", kernel_shape=kernel, **attrs)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# 1-D and 3-D pools of a plain input (audio nets' MaxPool1d, video nets' pooling):
# oneDNN's jit kernels take no plain layout there and its "simple_nchw" kernel ran
# 20-60 times slower than a reorder to channels last and the jit kernel.
POOLS = {
    "max1d_k3_s2_p1": ("MaxPool", (2, 12, 301), [3], dict(strides=[2], pads=[1, 1])),
    "avg1d_ceil": ("AveragePool", (1, 8, 50), [4], dict(strides=[3], ceil_mode=1)),
    "max3d_mvit_skip": ("MaxPool", (1, 16, 4, 15, 14), [1, 3, 3], dict(strides=[1, 2, 2], pads=[0, 1, 1, 0, 1, 1])),
    "avg3d_include_pad": ("AveragePool", (2, 8, 5, 9, 8), [3, 3, 3], dict(strides=[2, 2, 2], pads=[1] * 6,
                                                                          count_include_pad=1)),
    "max3d_dilated": ("MaxPool", (1, 8, 6, 9, 9), [2, 3, 3], dict(strides=[1, 2, 2], dilations=[2, 1, 2])),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_plain_1d_3d_pools_match_onnxruntime(tmp_path, name):
    op, shape, kernel, attrs = POOLS[name]
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    for threads in (1, 2):
        run_native(tmp_path, pool_model(op, list(shape), kernel, **attrs), x, threads)


@pytest.mark.parametrize("op,shape,kernel,attrs", [
    ("MaxPool", (1, 192, 3000), [3], dict(strides=[2], pads=[1, 1])),
    ("AveragePool", (1, 64, 8, 56, 56), [1, 3, 3], dict(strides=[1, 2, 2], pads=[0, 1, 1, 0, 1, 1])),
])
def test_plain_1d_3d_pools_take_a_fast_kernel(tmp_path, op, shape, kernel, attrs):
    """oneDNN's fast pooling kernels take no plain 1-D or 3-D layout: MaxPool1d of
    192 x 3000 ran 6.3 ms on its simple kernel, 0.3 ms after a channel-last copy."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    pools = [sig for kind, sig in step_signatures(tmp_path, pool_model(op, list(shape), kernel, **attrs), x)
             if kind == "pool"]
    assert pools and all("impl ref" not in sig and "impl simple" not in sig for sig in pools), pools
