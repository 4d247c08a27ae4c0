"""isomer.Graph: building graphs in Python through the operator table."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import isomer


def ort_run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def small_cnn():
    rng = np.random.default_rng(0)
    g = isomer.Graph("cnn")
    x = g.input("x", [1, 3, 8, 8])
    w = g.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), name="w")
    b = g.constant(rng.standard_normal(4).astype(np.float32), name="b")
    y = g.relu(g.conv2d(x, w, b, pads=1))
    y = g.max_pool2d(y, 2)
    y = g.flatten(g.global_avg_pool(y))
    fc = g.constant(rng.standard_normal((4, 2)).astype(np.float32))
    g.output(g.softmax(g.matmul(y, fc)), "probs")
    return g


def test_values_carry_inferred_types():
    g = isomer.Graph()
    x = g.input("x", ["N", 3, 8, 8])
    w = g.constant(np.zeros((4, 3, 3, 3), np.float32))
    y = g.conv2d(x, w, strides=2, pads=1)
    assert y.dtype == "f32"
    assert y.shape == ["N", 4, 4, 4]
    assert y.op_type == "Conv"
    assert "Conv" in repr(y)
    assert g.input("z", [None, 2], dtype=np.int64).shape == [None, 2]


def test_builder_model_matches_onnxruntime():
    g = small_cnn()
    model = g.to_onnx()
    onnx.checker.check_model(model)
    assert [o.name for o in model.graph.output] == ["probs"]
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (got,) = g.evaluate({"x": x})
    (want,) = ort_run(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the built graph optimizes like any model
    opt, report = isomer.optimize(g)
    assert report.check == "passed"
    np.testing.assert_allclose(isomer.run(opt, [x])[0], want, rtol=1e-5, atol=1e-6)


def test_generic_op_takes_attributes_as_keywords():
    g = isomer.Graph()
    x = g.input("x", [2, 3])
    y = g.op("LeakyRelu", [x], alpha=1)  # an int is accepted for a float attribute
    z = g.op("Transpose", [y], perm=(1, 0))
    g.output(z, "z")
    x0 = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    (out,) = g.evaluate([x0])
    np.testing.assert_array_equal(out, x0.T)


def test_scalars_become_constants_of_the_operand_type():
    g = isomer.Graph()
    x = g.input("x", [3], dtype="float64")
    y = g.add(g.mul(x, 2), 0.5)
    assert y.dtype == "f64"
    g.output(y)
    (out,) = g.evaluate({"x": np.arange(3.0)})
    np.testing.assert_array_equal(out, np.arange(3.0) * 2 + 0.5)


def test_multiple_outputs_and_clip():
    g = isomer.Graph()
    x = g.input("x", [6])
    a, b = g.split(x, [2, 4])
    assert a.shape == [2] and b.shape == [4]
    g.output(g.clip(a, 0.0, 1.0), "a")
    g.output(b, "b")
    outs = g.evaluate({"x": np.linspace(-1, 2, 6).astype(np.float32)})
    assert [o.shape for o in outs] == [(2,), (4,)]
    assert outs[0].min() >= 0


def test_hash_consing_merges_equal_nodes():
    g = isomer.Graph()
    x = g.input("x", [4])
    assert g.relu(x) == g.relu(x)
    assert g.relu(x) != g.sigmoid(x)


def test_cast_and_int_types():
    g = isomer.Graph()
    x = g.input("x", [3], dtype=np.int32)
    y = g.cast(x, np.float16)
    assert y.dtype == "f16"
    g.output(y)
    (out,) = g.evaluate({"x": np.array([1, 2, 3], np.int32)})
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, [1, 2, 3])


def test_shape_errors_raise_at_once():
    g = isomer.Graph()
    a = g.input("a", [2, 3])
    b = g.input("b", [4, 5])
    with pytest.raises(isomer.Error, match="MatMul"):
        g.matmul(a, b)


def test_bad_builder_input_raises():
    g = isomer.Graph()
    x = g.input("x", [2])
    with pytest.raises(isomer.Error, match="unknown operator|no operator|NoSuchOp"):
        g.op("NoSuchOp", [x])
    with pytest.raises(isomer.Error, match="operator Relu has no attribute 'alpha'"):
        g.op("Relu", [x], alpha=0.1)
    with pytest.raises(isomer.Error, match="attribute 'perm' of Transpose must be a list of ints"):
        g.op("Transpose", [x], perm="01")
    with pytest.raises(isomer.Error, match="already has an input named 'x'"):
        g.input("x", [3])
    with pytest.raises(isomer.Error, match="unknown element type"):
        g.input("y", [3], dtype="float128x")
    with pytest.raises(isomer.Error, match="negative"):
        g.input("y", [-2])
    with pytest.raises(isomer.Error, match="has 1 inputs, expected 2"):
        g.op("Add", [x])
    with pytest.raises(isomer.Error, match="no outputs"):
        isomer.Graph().to_onnx()
    other = isomer.Graph()
    with pytest.raises(isomer.Error, match="belongs to another isomer.Graph"):
        other.relu(x)
    other.output(x)
    with pytest.raises(isomer.Error, match="belongs to another isomer.Graph"):
        other.to_onnx()


def test_operator_table_is_visible():
    ops = isomer.operators()
    assert {"Conv", "MatMul", "Relu", "Add"} <= set(ops)
    schema = isomer.operator_schema("Conv")
    assert schema["attributes"]["pads"] == "ints"
    assert schema["min_inputs"] == 2
