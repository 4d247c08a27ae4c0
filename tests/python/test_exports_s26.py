"""Exports that earlier rounds did not try (models26).

A detector's post-processing has shapes that depend on the data (NonZero over the
scores, a TopK whose k is computed, NonMaxSuppression); the runtime plans every
buffer when it compiles, so such a model ran on ONNX Runtime whole, backbone and
all. `isomer run` now splits it where the shapes stop being known: the head runs on
the isomer runtime, the tail on ONNX Runtime as one model. The padding torchvision's
detectors write before their backbone (to a multiple of 32, computed from the
image's Shape through Cast, Div and Ceil) had kept even the backbone's shapes open:
the split evaluates constant subgraphs first, so the pads become constants.
Each case is built with onnx.helper and compared with ONNX Runtime.
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


def detector_model(hw=20, stride=8, threshold=0.3, topk=False):
    """Pad x to a multiple of `stride` (pads computed from Shape), Conv, Relu, the
    channel max as scores (also an output), then the scores above `threshold`
    (NonZero, Gather): the kept scores' count depends on the data. With `topk`, the
    best min(5, count) scores first (a TopK whose k is the ReduceMin of a Concat of 5
    and a Shape, as torchvision's RPN writes it: the importer keeps it opaque)."""
    rng = np.random.default_rng(hw)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    inits = [c("w", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)),
             c("b", rng.standard_normal(8).astype(np.float32) * 0.1),
             c("i2", np.array(2, np.int64)), c("i3", np.array(3, np.int64)),
             c("stride", np.array(stride, np.float32)), c("zeros6", np.zeros(6, np.int64)),
             c("ax0", np.array([0], np.int64)), c("flat", np.array([-1], np.int64)),
             c("thr", np.array(threshold, np.float32))]
    nodes = []
    for d, idx in (("h", "i2"), ("w_", "i3")):  # padded extent - extent, per spatial dim
        nodes += [helper.make_node("Shape", ["x"], [f"{d}shape"]),
                  helper.make_node("Gather", [f"{d}shape", idx], [f"{d}n"], axis=0),
                  helper.make_node("Cast", [f"{d}n"], [f"{d}f"], to=TensorProto.FLOAT),
                  helper.make_node("Div", [f"{d}f", "stride"], [f"{d}q"]),
                  helper.make_node("Ceil", [f"{d}q"], [f"{d}c"]),
                  helper.make_node("Mul", [f"{d}c", "stride"], [f"{d}m"]),
                  helper.make_node("Cast", [f"{d}m"], [f"{d}i"], to=TensorProto.INT64),
                  helper.make_node("Sub", [f"{d}i", f"{d}n"], [f"{d}p"]),
                  helper.make_node("Unsqueeze", [f"{d}p", "ax0"], [f"{d}pad"])]
    nodes += [helper.make_node("Concat", ["zeros6", "hpad", "w_pad"], ["pads"], axis=0),
              helper.make_node("Pad", ["x", "pads"], ["xp"], name="pad"),
              helper.make_node("Conv", ["xp", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["conv"], ["feat"], name="relu"),
              helper.make_node("ReduceMax", ["feat"], ["scores"], name="max", keepdims=0, axes=[1]),
              helper.make_node("Reshape", ["scores", "flat"], ["s1"], name="flatten")]
    best = "s1"
    if topk:  # a Slice of them to an end computed from Shape (H * W, plus 0), as the RPN's per-level slices
        inits += [c("i1", np.array(1, np.int64)), c("zero1", np.array([0], np.int64))]
        nodes += [helper.make_node("Shape", ["scores"], ["sshape"]),
                  helper.make_node("Gather", ["sshape", "i1"], ["sh"], axis=0),
                  helper.make_node("Gather", ["sshape", "i2"], ["sw"], axis=0),
                  helper.make_node("Mul", ["sh", "sw"], ["area"]),
                  helper.make_node("Unsqueeze", ["area", "ax0"], ["area1"]),
                  helper.make_node("Add", ["zero1", "area1"], ["end"]),
                  helper.make_node("Slice", ["s1", "zero1", "end", "ax0"], ["s2"], name="level")]
        best = "s2"
        inits += [c("five", np.array([5], np.int64)), c("one1", np.array([1], np.int64))]
        nodes += [helper.make_node("Shape", ["s2"], ["count"], name="count"),
                  helper.make_node("Concat", ["five", "count"], ["both"], name="both", axis=0),
                  helper.make_node("ReduceMin", ["both"], ["kmin"], name="kmin", keepdims=0),
                  helper.make_node("Reshape", ["kmin", "one1"], ["k"], name="k"),
                  helper.make_node("TopK", ["s2", "k"], ["top", "top_i"], name="topk")]
        best = "top"
    nodes += [helper.make_node("Greater", [best, "thr"], ["mask"], name="above"),
              helper.make_node("NonZero", ["mask"], ["nz"], name="nonzero"),
              helper.make_node("Squeeze", ["nz", "ax0"], ["idx"], name="squeeze"),
              helper.make_node("Gather", [best, "idx"], ["kept"], name="keep", axis=0)]
    graph = helper.make_graph(nodes, "detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, hw, hw])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("kept", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def run_isomer(tmp_path, model, x, *extra):
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(model, path)
    np.savez(inp, x=x)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--print-steps", *extra], capture_output=True, text=True, timeout=300)
    return p, out


@pytest.mark.parametrize("hw,topk", [(20, False), (32, False), (20, True)])
def test_detector_backbone_runs_natively_before_the_data_dependent_tail(tmp_path, hw, topk):
    model = detector_model(hw, topk=topk)
    x = np.random.default_rng(1).standard_normal((1, 3, hw, hw)).astype(np.float32)
    p, out = run_isomer(tmp_path, model, x)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "split where the shapes start to depend on the data" in p.stdout, p.stdout
    assert "running it on ONNX Runtime" not in p.stdout
    # The padded convolution is the head's (isomer's own step), NonZero the tail's.
    head = p.stdout.split("split where", 1)[1]
    assert "from node 'nonzero' (NonZero) on" in head, p.stdout
    steps = [l.split() for l in head.splitlines() if l.startswith("  ") and not l.startswith("  output")]
    assert any(s[0] != "onnxruntime" and "Conv" in s[1] for s in steps if len(s) > 1), p.stdout
    if topk:  # its k is a constant once Shape is folded: isomer's own TopK, in the head
        assert any(s[0] != "onnxruntime" and "TopK" in s[1] for s in steps if len(s) > 1), p.stdout
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = np.load(out)
    for name, w in zip(["scores", "kept"], want):
        assert got[name].shape == w.shape, name
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5)
    assert want[1].size > 0


def test_detector_bench_compares_the_split_run_with_onnxruntime(tmp_path):
    x = np.random.default_rng(2).standard_normal((1, 3, 20, 20)).astype(np.float32)
    p, _ = run_isomer(tmp_path, detector_model(), x, "--bench", "--repeat", "3", "--warmup", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "head median" in p.stdout and "isomer / ONNX Runtime:" in p.stdout, p.stdout
    assert "outputs match ONNX Runtime's" in p.stdout, p.stdout


def test_detector_without_onnxruntime_is_refused_in_one_line(tmp_path):
    x = np.zeros((1, 3, 20, 20), np.float32)
    p, _ = run_isomer(tmp_path, detector_model(), x, "--no-onnxruntime")
    assert p.returncode != 0
    assert "nonzero" in p.stderr and "--no-onnxruntime" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "terminate" not in p.stderr


def conv_time_embedding_model(n=2, c=64, hw=16, t=32):
    """A diffusion UNet resblock's first half: Conv 3x3 of x plus a per-sample,
    per-channel vector (the time embedding through Gemm, unsqueezed to [N, C, 1, 1])."""
    rng = np.random.default_rng(c + hw)
    inits = [numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "b"),
             numpy_helper.from_array((rng.standard_normal((c, t)) * 0.2).astype(np.float32), "wt"),
             numpy_helper.from_array(np.array([2, 3], np.int64), "hw")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Gemm", ["temb", "wt"], ["e"], name="embed", transB=1),
             helper.make_node("Unsqueeze", ["e", "hw"], ["e4"], name="unsqueeze"),
             helper.make_node("Add", ["conv", "e4"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "resblock", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw]),
                                                  helper.make_tensor_value_info("temb", TensorProto.FLOAT, [n, t])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_conv_plus_time_embedding_keeps_a_direct_kernel(tmp_path):
    """oneDNN has only im2col + GEMM for a convolution with an [N, C, 1, 1] operand
    as a binary post-op (8x slower); the add then runs as its own step."""
    import json
    model = conv_time_embedding_model()
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, 64, 16, 16)).astype(np.float32),
             "temb": rng.standard_normal((2, 32)).astype(np.float32)}
    path, inp, out, rep = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz", tmp_path / "r.json"
    onnx.save(model, path)
    np.savez(inp, **feeds)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime", "--profile", "--report-json", str(rep)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    convs = [s for s in json.load(open(rep))["profile"] if s["kind"] == "conv"]
    assert convs and all(" impl " in s["signature"] for s in convs), convs
    assert not any("gemm" in s["signature"].split(" impl ")[1] for s in convs), [s["signature"] for s in convs]
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dequantize_slice", [False, True])
def test_qdq_of_a_slice_of_the_last_axis(tmp_path, dequantize_slice):
    """A quantized attention's fused projection cut into query, key and value (Slice of
    the last axis: strided views), each quantized per tensor (onnxruntime's
    quantize_static on a VAE decoder's attention). The kernel ran over the view's
    span in memory order: 128 steps off. Also DequantizeLinear of a sliced int8 view."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    inits = [c("s", np.array([64], np.int64)), c("e", np.array([128], np.int64)), c("ax", np.array([2], np.int64)),
             c("sc", np.array(0.0245, np.float32)), c("zp", np.array(-9, np.int8))]
    if dequantize_slice:  # quantize whole, then dequantize a slice of the int8 tensor
        nodes = [helper.make_node("Add", ["x", "x"], ["x2"], name="producer"),
                 helper.make_node("QuantizeLinear", ["x2", "sc", "zp"], ["q"], name="q"),
                 helper.make_node("Slice", ["q", "s", "e", "ax"], ["qs"], name="slice"),
                 helper.make_node("DequantizeLinear", ["qs", "sc", "zp"], ["y"], name="dq")]
    else:
        nodes = [helper.make_node("Add", ["x", "x"], ["x2"], name="producer"),
                 helper.make_node("Slice", ["x2", "s", "e", "ax"], ["xs"], name="slice"),
                 helper.make_node("QuantizeLinear", ["xs", "sc", "zp"], ["q"], name="q"),
                 helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"], name="dq")]
    graph = helper.make_graph(nodes, "qkv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256, 192])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(4).standard_normal((1, 256, 192)).astype(np.float32)
    p, out = run_isomer(tmp_path, model, x, "--no-onnxruntime")
    assert p.returncode == 0, p.stdout + p.stderr
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_array_equal(np.load(out)["y"], want)


@pytest.mark.parametrize("channels,groups", [(64, 4), (128, 8)])
def test_grouped_wide_conv1d_merges_groups_off_the_gemm_kernel(tmp_path, channels, groups):
    """A wav2vec2-family positional convolution (Data2VecAudio, SEW: 1-D, width 19,
    groups of 16 channels) got only oneDNN's gemm kernel, 2-3 times ONNX Runtime's
    time; merged pairs of groups (block-diagonal weights) run on a blocked kernel."""
    import json
    rng = np.random.default_rng(groups)
    w = (rng.standard_normal((channels, channels // groups, 19)) * 0.1).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="posconv", group=groups, pads=[9, 9], kernel_shape=[19])],
        "posconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 199])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(channels).astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, channels, 199)).astype(np.float32)
    rep = tmp_path / "r.json"
    p, out = run_isomer(tmp_path, model, x, "--no-onnxruntime", "--profile", "--report-json", str(rep))
    assert p.returncode == 0, p.stdout + p.stderr
    convs = [s["signature"] for s in json.load(open(rep))["profile"] if s["kind"] == "conv"]
    assert len(convs) == 1 and " impl " in convs[0], convs
    assert "gemm" not in convs[0].split(" impl ")[1], convs
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-4, atol=1e-4)
