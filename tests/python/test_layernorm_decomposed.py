"""LayerNormalization as exporters before opset 17 write it (TorchScript's BERT, GPT-2,
RoBERTa at opset 14): mean = ReduceMean(x), d = x - mean, var = ReduceMean(d^2),
d / Sqrt(var + eps) * gamma + beta. The runtime runs the whole chain as one
normalization step (it ran the mean, the centring, the rest and beta as four) with
ONNX Runtime's outputs, and leaves it to separate steps where a part of it is read
elsewhere or is not the layer norm's (another axis, a non-column beta).
"""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")


def decomposed_ln(dims, opset=14, square="pow", gamma=True, beta=True, eps=1e-5, axis=-1, beta_shape=None,
                  centred_output=False):
    """x [dims] -> the decomposed layer norm over `axis` (kept). square: "pow" (Pow(d, 2))
    or "mul" (Mul(d, d)). opset 18: ReduceMean's axes as an input. centred_output: d is
    a graph output too (read outside the chain)."""
    cols = dims[-1]
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(np.array(eps, np.float32), "eps"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array([axis], np.int64), "axes"))

    def mean(src, dst):
        if opset >= 18:
            return helper.make_node("ReduceMean", [src, "axes"], [dst], keepdims=1)
        return helper.make_node("ReduceMean", [src], [dst], axes=[axis], keepdims=1)

    nodes = [mean("x", "mu"), helper.make_node("Sub", ["x", "mu"], ["d"])]
    nodes.append(helper.make_node("Pow", ["d", "two"], ["sq"]) if square == "pow"
                 else helper.make_node("Mul", ["d", "d"], ["sq"]))
    nodes += [mean("sq", "var"), helper.make_node("Add", ["var", "eps"], ["ve"]),
              helper.make_node("Sqrt", ["ve"], ["sd"]), helper.make_node("Div", ["d", "sd"], ["n"])]
    y = "n"
    if gamma:
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, [cols]).astype(np.float32), "gamma"))
        nodes.append(helper.make_node("Mul", [y, "gamma"], ["g"]))
        y = "g"
    if beta:
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, beta_shape or [cols]).astype(np.float32), "beta"))
        nodes.append(helper.make_node("Add", [y, "beta"], ["b"]))
        y = "b"
    nodes.append(helper.make_node("Identity", [y], ["y"]))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if centred_output:
        outs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def check(model, dims, one_step):
    x = np.random.default_rng(7).normal(2.0, 3.0, dims).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for threads in (1, 2):
        got = isomer.run(model, {"x": x}, engine="runtime", threads=threads)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    kinds = isomer.benchmark(model, {"x": x}, threads=1, repeat=1, warmup=0)["step_kinds"]
    if one_step:
        assert kinds == {"layernorm": 1}, kinds
    else:
        assert "reduce" in kinds, kinds
    return kinds


@pytest.mark.parametrize(
    "dims,opset,square,gamma,beta",
    [([2, 17, 37], 14, "pow", True, True),   # batch 2, odd rows and columns
     ([1, 128, 768], 14, "pow", True, True),  # BERT-base's rows
     ([5, 64], 18, "mul", True, True),        # axes as an input, d * d
     ([3, 1, 33], 13, "pow", True, False),    # gamma only
     ([4, 16], 14, "pow", False, False)])     # neither
def test_decomposed_layer_norm_is_one_step(dims, opset, square, gamma, beta):
    check(decomposed_ln(dims, opset, square, gamma, beta), dims, one_step=True)


def test_centred_value_read_elsewhere_stays_separate():
    dims = [2, 9, 24]
    check(decomposed_ln(dims, centred_output=True), dims, one_step=False)


def test_mean_over_another_axis_is_not_a_layer_norm():
    dims = [2, 9, 24]
    check(decomposed_ln(dims, axis=1, gamma=False, beta=False), dims, one_step=False)


def test_beta_that_is_not_per_column_stays_its_own_add():
    dims = [2, 9, 24]
    model = decomposed_ln(dims, beta_shape=[9, 24])
    x = np.random.default_rng(7).normal(size=dims).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(isomer.run(model, {"x": x}, engine="runtime", threads=1)[0], want[0], rtol=1e-4,
                               atol=1e-5)
    kinds = isomer.benchmark(model, {"x": x}, threads=1, repeat=1, warmup=0)["step_kinds"]
    assert kinds.get("layernorm") == 1 and sum(kinds.values()) == 2, kinds
