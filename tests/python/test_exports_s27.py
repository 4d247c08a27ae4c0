"""Exports that earlier rounds did not try (models27), each case built with onnx.helper.

A detector's region proposals take the best k scores, k = min(pre_nms_top_n, the
anchors' count), the count read from a Shape deep behind the image's resize and
padding: the import decides values like it only a few operators deep, so it kept the
TopK opaque, and the split run cut there even after folding made k a constant.
isomer.run(engine="runtime") had no split run at all: such a model raised. Col2Im
(nn.Fold: MobileViTV2) was an operator isomer did not know.
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


def proposals_model(n=40, depth=24):
    """The best min(5, n) of x's scores (TopK, its k computed from Shape(x) through
    `depth` additions of zero), then those above 0 (NonZero: the tail's)."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    inits = [c("i1", np.array(1, np.int64)), c("zero", np.array(0, np.int64)), c("ax0", np.array([0], np.int64)),
             c("five", np.array([5], np.int64)), c("thr", np.array(0.0, np.float32))]
    nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "i1"], ["c0"], name="count", axis=0)]
    for i in range(depth):
        nodes.append(helper.make_node("Add", [f"c{i}", "zero"], [f"c{i + 1}"], name=f"add{i}"))
    nodes += [helper.make_node("Unsqueeze", [f"c{depth}", "ax0"], ["cnt"], name="unsq"),
              helper.make_node("Min", ["five", "cnt"], ["k"], name="k"),
              helper.make_node("TopK", ["x", "k"], ["top", "top_i"], name="topk", axis=1),
              helper.make_node("Greater", ["top", "thr"], ["mask"], name="above"),
              helper.make_node("NonZero", ["mask"], ["kept"], name="nonzero")]
    graph = helper.make_graph(nodes, "proposals", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                              [helper.make_tensor_value_info("top", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("kept", TensorProto.INT64, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def ort_outputs(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def run_isomer(tmp_path, model, feeds, *flags):
    """`isomer run` of `model` on `feeds`, 1 thread; the process and its outputs' path."""
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(model, path)
    np.savez(inp, **feeds)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1", *flags],
                       capture_output=True, text=True, timeout=300)
    return p, out


def test_split_run_imports_a_topk_again_once_folding_made_its_k_constant(tmp_path):
    model = proposals_model()
    x = np.random.default_rng(0).standard_normal((1, 40)).astype(np.float32)
    p, out = run_isomer(tmp_path, model, {"x": x}, "--print-steps")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "from node 'nonzero' (NonZero) on" in p.stdout, p.stdout
    steps = [l.split() for l in p.stdout.split("split where", 1)[1].splitlines() if l.startswith("  ")]
    assert any(s[0] != "onnxruntime" and "TopK" in s[1] for s in steps if len(s) > 1), p.stdout
    got = np.load(out)
    for name, want in zip(["top", "kept"], ort_outputs(model, {"x": x})):
        np.testing.assert_array_equal(got[name], want)


def test_python_run_splits_a_model_whose_later_shapes_depend_on_the_data():
    isomer = pytest.importorskip("isomer")
    model = proposals_model()
    x = np.random.default_rng(1).standard_normal((1, 40)).astype(np.float32)
    got = isomer.run(model, {"x": x}, engine="runtime", threads=1)
    want = ort_outputs(model, {"x": x})
    assert len(got) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def dynamo_prefill_model(hidden=8, vocab=16):
    """A dynamo export's dims: input_ids [s33, s50] into an embedding, then a MatMul
    over [s33, s50, hidden]."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((vocab, hidden)).astype(np.float32), "emb"),
             numpy_helper.from_array(rng.standard_normal((hidden, hidden)).astype(np.float32), "w")]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["h"], name="embed", axis=0),
             helper.make_node("MatMul", ["h", "w"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, "prefill", [helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                                                               ["s33", "s50"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["s33", "s50", hidden])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_drawn_inputs_give_a_dynamo_token_axis_a_prefills_length(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(dynamo_prefill_model(), path)
    p = subprocess.run([ISOMER, "run", str(path), "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "open dims at s33=1, s50=64" in p.stdout, p.stdout
    p = subprocess.run([ISOMER, "run", str(path), "--threads", "1", "--input-shape", "input_ids:2,5"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "s50=64" not in p.stdout, p.stdout


def col2im_model(c, image, block, x_shape, **attrs):
    """Col2Im of x [N, c * prod(block), L] (MobileViTV2 folds its patches back with it)."""
    inits = [numpy_helper.from_array(np.array(image, np.int64), "image"),
             numpy_helper.from_array(np.array(block, np.int64), "block")]
    node = helper.make_node("Col2Im", ["x", "image", "block"], ["y"], name="fold", **attrs)
    graph = helper.make_graph([node], "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("image,block,attrs", [
    ([8, 8], [2, 2], dict(strides=[2, 2])),                                          # patches, no overlap
    ([7, 9], [3, 2], {}),                                                            # overlapping, summed
    ([6, 7], [2, 3], dict(pads=[1, 0, 2, 1], dilations=[2, 1], strides=[1, 2])),     # padded, dilated
    ([10], [3], dict(strides=[2], pads=[1, 1])),                                     # one spatial axis
])
def test_col2im_runs_natively_and_matches_onnxruntime(tmp_path, image, block, attrs):
    c = 3
    k = len(image)
    pads = attrs.get("pads", [0] * 2 * k)
    dil, st = attrs.get("dilations", [1] * k), attrs.get("strides", [1] * k)
    L = int(np.prod([(image[d] + pads[d] + pads[d + k] - dil[d] * (block[d] - 1) - 1) // st[d] + 1 for d in range(k)]))
    x = np.random.default_rng(len(image) + L).standard_normal((2, c * int(np.prod(block)), L)).astype(np.float32)
    model = col2im_model(c, image, block, list(x.shape), **attrs)
    p, out = run_isomer(tmp_path, model, {"x": x}, "--no-onnxruntime", "--print-steps")
    assert p.returncode == 0, p.stdout + p.stderr
    want = ort_outputs(model, {"x": x})[0]
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-5, atol=1e-5)


def test_col2im_whose_blocks_do_not_match_is_refused_in_one_line(tmp_path):
    model = col2im_model(3, [8, 8], [2, 2], [1, 12, 15], strides=[2, 2])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    p = subprocess.run([ISOMER, "run", str(path), "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "Col2Im" in p.stderr and "16" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "terminate" not in p.stderr


def test_an_input_of_unknown_rank_takes_the_given_arrays_dims(tmp_path):
    """onnx.helper's make_tensor_value_info(name, type, None) declares no shape: ONNX
    Runtime runs such a model on arrays of any rank; `run --inputs` refused them."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ReduceSum", ["r"], ["y"], name="sum", keepdims=0)]
    graph = helper.make_graph(nodes, "unranked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    p, out = run_isomer(tmp_path, model, {"x": x}, "--no-onnxruntime")
    assert p.returncode == 0, p.stdout + p.stderr
    np.testing.assert_allclose(np.load(out)["y"], ort_outputs(model, {"x": x})[0], rtol=1e-6)


def test_batchnorm_of_rows_runs_channels_last(tmp_path):
    """LeViT's BatchNorm1d over a Linear's output [tokens, features]: oneDNN's plain
    2-D kernel walks each channel down the rows; the step reads [N, C] as [N, C, 1, 1]
    channels-last, the same memory."""
    import json
    n, c = 64, 320
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "bias"),
             numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.uniform(0.5, 2, c).astype(np.float32), "var")]
    node = helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], name="bn")
    graph = helper.make_graph([node], "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, c])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    x = rng.standard_normal((n, c)).astype(np.float32)
    rep = tmp_path / "r.json"
    p, out = run_isomer(tmp_path, model, {"x": x}, "--no-onnxruntime", "--profile", "--report-json", str(rep))
    assert p.returncode == 0, p.stdout + p.stderr
    steps = [s for s in json.load(open(rep))["profile"] if s["kind"] == "batchnorm"]
    assert len(steps) == 1 and f"{n}x{c}x1x1" in steps[0]["signature"], steps
    np.testing.assert_allclose(np.load(out)["y"], ort_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
