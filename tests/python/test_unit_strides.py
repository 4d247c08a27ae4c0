"""Views whose extent-1 axes carry strides no oneDNN format tag gives them.

oneDNN matches a layout to its fast kernels by every stride, those of extent-1 axes
included: a channels-last view of batch 1 (SwiftFormer's x [1, H, W, C] permuted to
[1, C, H, W]) had batch stride C where nhwc has C*H*W, and a pool reordered it first
or ran on the reference kernel. Every value's extent-1 axes now get the tag's strides.
"""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_exports_s28 import ort_outputs as expect, run_isomer


def profile(tmp_path, model, feeds):
    """The steps of `isomer run --profile` (1 thread, no ONNX Runtime) and the outputs."""
    _, got = run_isomer(tmp_path, model, feeds, "--profile", "--report-json", str(tmp_path / "r.json"))
    return json.load(open(tmp_path / "r.json"))["profile"], got


def arr(name, v):
    return numpy_helper.from_array(np.asarray(v, np.float32), name)


CONSUMERS = {
    "conv": ("conv", lambda rng: ([arr("k", rng.standard_normal((16, 16, 3, 3)) * 0.1)],
                                  helper.make_node("Conv", ["t", "k"], ["y"], pads=[1, 1, 1, 1]))),
    "depthwise": ("conv", lambda rng: ([arr("k", rng.standard_normal((16, 1, 3, 3)) * 0.1)],
                                       helper.make_node("Conv", ["t", "k"], ["y"], pads=[1, 1, 1, 1], group=16))),
    "maxpool": ("pool", lambda rng: ([], helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3, 3], strides=[2, 2]))),
    "avgpool": ("pool", lambda rng: ([], helper.make_node("AveragePool", ["t"], ["y"], kernel_shape=[3, 3],
                                                          pads=[1, 1, 1, 1]))),
    "dilated": ("pool", lambda rng: ([], helper.make_node("MaxPool", ["t"], ["y"], kernel_shape=[3, 3],
                                                          dilations=[2, 2]))),
    "batchnorm": ("batchnorm", lambda rng: ([arr("s", rng.uniform(0.5, 1.5, 16)), arr("b", rng.standard_normal(16)),
                                             arr("m", rng.standard_normal(16) * 0.1), arr("v", rng.uniform(0.5, 1.5, 16))],
                                            helper.make_node("BatchNormalization", ["t", "s", "b", "m", "v"], ["y"]))),
    "sigmoid": ("pointwise", lambda rng: ([], helper.make_node("Sigmoid", ["t"], ["y"]))),
}


@pytest.mark.parametrize("consumer", sorted(CONSUMERS))
def test_channels_last_view_of_batch_one_is_read_as_it_is_on_a_fast_kernel(tmp_path, consumer):
    """x [1, 32, 32, 16] through a Linear, permuted to [1, 16, 32, 32] (a view of the
    product, channels last): the consumer reads the view itself, with the batch stride
    nhwc gives (16384), on no reference kernel and with no reorder before it."""
    kind, make = CONSUMERS[consumer]
    rng = np.random.default_rng(3)
    inits, node = make(rng)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="linear"),
             helper.make_node("Transpose", ["h"], ["t"], name="permute", perm=[0, 3, 1, 2]), node]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 32, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [arr("w", rng.standard_normal((16, 16)) * 0.3)] + inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, 32, 32, 16)).astype(np.float32)
    steps, got = profile(tmp_path, model, {"x": x})
    assert not [s for s in steps if "ref:any" in s["signature"]], steps
    reader = [s for s in steps if s["kind"] == kind]
    assert len(reader) == 1, steps
    if consumer == "dilated":  # oneDNN has only its reference kernel: the native one reads the view
        assert reader[0]["signature"].startswith("maxpool-native "), reader
    if kind != "pointwise":
        assert steps.index(reader[0]) == 1 and " 1x16x32x32:s16384,1,512,16 " in reader[0]["signature"], steps
    np.testing.assert_allclose(got["y"], expect(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_blocked_concat_of_a_one_block_first_part_has_the_whole_batch_stride(tmp_path):
    """Two convolutions of 16 channels each (one block) concatenated in channel blocks,
    then pooled: oneDNN's concatenation took the first part's batch stride (one block's,
    5168), which no nChw16c tensor of 32 channels has; the pools read the whole one's."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "wa"], ["ca"], pads=[1, 1, 1, 1]), helper.make_node("Conv", ["x", "wb"], ["cb"]),
             helper.make_node("Relu", ["ca"], ["ra"]), helper.make_node("Relu", ["cb"], ["rb"]),
             helper.make_node("Concat", ["ra", "rb"], ["c"], axis=1),
             helper.make_node("MaxPool", ["c"], ["a"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             helper.make_node("MaxPool", ["c"], ["b"], kernel_shape=[3, 2], pads=[1, 0, 2, 1], dilations=[2, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 17, 19])],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in "ab"],
                              [arr("wa", rng.standard_normal((16, 8, 3, 3))), arr("wb", rng.standard_normal((16, 8, 1, 1)))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, 8, 17, 19)).astype(np.float32)
    steps, got = profile(tmp_path, model, {"x": x})
    assert not [s for s in steps if "ref:any" in s["signature"]], steps
    pools = [s for s in steps if s["kind"] == "pool"]
    assert len(pools) == 2 and all(" 1x32x17x19:s10336,5168,304,16:b1/16 -> " in s["signature"] for s in pools), pools
    for name, want in zip("ab", expect(model, {"x": x})):
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-4)
