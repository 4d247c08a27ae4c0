"""scripts/torch_compile_onnx.py, the bench's torch.compile engine, translates ONNX
models into torch modules. The translation must compute what the model computes,
else the bench would time something else: here its eager module (torch.compile needs
torch >= 2, which the test environment does not have; compiling does not change what
the module computes) runs the μGraph bench's programs and a small convolutional
network against ONNX Runtime."""
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts")
sys.path.insert(0, SCRIPTS)
import mugraph_regions  # noqa: E402
import mugraph_regions_mlp  # noqa: E402
import torch_compile_onnx as T  # noqa: E402


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in inits:
            continue
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _compare(model, feeds, tol=1e-4):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    example = [torch.from_numpy(feeds[n]) for n in names]
    module = T.OnnxModule(model, example)
    with torch.no_grad():
        got = module(*example)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = g.numpy()
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * max(1.0, float(np.abs(w).max())))
    return module


SMALL = {
    "rmsnorm": lambda: mugraph_regions.rmsnorm(8, 64),
    "layernorm_gelu": lambda: mugraph_regions.layernorm_gelu(8, 48),
    "softmax": lambda: mugraph_regions.softmax(2, 16),
    "attention_gqa": lambda: mugraph_regions.attention(4, 2, 16, 8),
    "attention_decode": lambda: mugraph_regions.attention_decode(4, 2, 32, 8),
    "attention_nomask": lambda: mugraph_regions.attention_nomask(2, 10, 8),
    "swiglu_mlp": lambda: mugraph_regions_mlp.swiglu_mlp(4, 16, 24),
    "layernorm_matmul": lambda: mugraph_regions_mlp.layernorm_matmul(4, 16, 12),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_region_programs_match_onnxruntime(name):
    model = SMALL[name]()
    module = _compare(model, _feeds(model))
    if name == "rmsnorm":
        assert module.scalar_exponent, "Pow's constant exponent should be a Python number, as torch code writes it"


def _c(name, v, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(v, dtype), name)


def test_small_cnn_with_exporter_shape_arithmetic_matches_onnxruntime():
    """Conv (asymmetric pads), BatchNormalization, pooling, Clip, and the Shape ->
    Gather -> Concat -> Reshape chain exporters write: the shape values are computed
    once, when the module is built, and the traced code reads no tensor's values."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[0, 1, 1, 0], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Clip", ["bn", "lo", "hi"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("AveragePool", ["p"], ["ap"], kernel_shape=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0),
        helper.make_node("GlobalAveragePool", ["ap"], ["gp"]),
        helper.make_node("Shape", ["gp"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["gp", "shape"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], transB=1),
        helper.make_node("Slice", ["y", "st", "en", "axs", "steps"], ["ys"]),
    ]
    inits = [_c("w", rng.standard_normal((6, 3, 3, 3)) * 0.3), _c("b", rng.standard_normal(6)),
             _c("g", rng.uniform(0.5, 1.5, 6)), _c("beta", rng.standard_normal(6)),
             _c("mean", rng.standard_normal(6) * 0.1), _c("var", rng.uniform(0.5, 1.5, 6)),
             _c("lo", 0.0), _c("hi", 6.0), _c("zero", 0, np.int64), _c("ax0", [0], np.int64),
             _c("minus1", [-1], np.int64), _c("fw", rng.standard_normal((5, 6))), _c("fb", rng.standard_normal(5)),
             _c("st", [4], np.int64), _c("en", [-100], np.int64), _c("axs", [1], np.int64),
             _c("steps", [-2], np.int64)]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 9])],
                          [helper.make_tensor_value_info("ys", TensorProto.FLOAT, [2, 3])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    module = _compare(model, _feeds(model))
    assert module.static_ints["shape"] == [2, -1]


def test_unsupported_operator_is_named():
    g = helper.make_graph([helper.make_node("Einsum", ["a", "a"], ["y"], name="contract", equation="ij,jk->ik")],
                          "e", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(T.Unsupported, match="contract.*Einsum"):
        T.OnnxModule(model, [torch.zeros(2, 2)])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_and_ceil_mode_pooling_match_onnxruntime(mode):
    """Pad (as Inception's and DenseNet's exports write it: pads and the constant as
    inputs, or only some axes) and pooling with ceil_mode (SqueezeNet's), whose last
    window hangs over the edge."""
    nodes = [
        helper.make_node("Pad", ["x", "pads", "value"] if mode == "constant" else ["x", "pads"], ["p"], mode=mode),
        helper.make_node("MaxPool", ["p"], ["m"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        helper.make_node("Pad", ["m", "pads2", "", "axes"], ["q"]),
        helper.make_node("AveragePool", ["q"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
    ]
    inits = [_c("pads", [0, 0, 1, 2, 0, 0, 2, 0], np.int64), _c("value", 0.5),
             _c("pads2", [1, 0], np.int64), _c("axes", [-1], np.int64)]
    g = helper.make_graph(nodes, "pad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, None, None])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(model)
    _compare(model, _feeds(model))
