"""What `isomer optimize`, `isomer convert` and isomer.optimize() write keeps the model's
interface: code that feeds the original feeds the optimized model unchanged, and gets
the same outputs (tests/python/interface_util.py says what the interface holds).

An initializer the graph also lists as an input (IR 4 on: models exported with
keep_initializers_as_inputs=True, older exporters, TF converters) is a default value
the user may override, as ONNX Runtime lets them: it stays an input, with its default,
unless the user asks to fold it (--fold-overridable-inputs, fold_overridable_inputs=).
"""
import json
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import isomer  # noqa: E402
from interface_util import interface_differences  # noqa: E402

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
QUICK = ["--threads", "1", "--budget", "2", "--cost", "none", "--no-guard"]


def run_cli(*args):
    return subprocess.run([ISOMER, *map(str, args)], capture_output=True, text=True, timeout=300)


def run_ort(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def save(model, path):
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def make(nodes, inputs, outputs, initializers=(), ir=8, opset=17):
    g = helper.make_graph(nodes, "interface", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="interface-test")
    m.ir_version = ir
    return m


def overridable_model():
    """y = x @ w + b, then a Reshape to `shape`; w and shape are initializers also listed as inputs."""
    w = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(4, 3) - 5) / 7, "w")
    b = numpy_helper.from_array(np.array([1, 2, 3], np.float32), "b")
    shape = numpy_helper.from_array(np.array([-1], np.int64), "shape")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Reshape", ["r", "shape"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3]),
              helper.make_tensor_value_info("shape", TensorProto.INT64, ["R"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])]
    return make(nodes, inputs, outputs, [w, b, shape])


X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
W2 = np.full((4, 3), 0.5, np.float32)


def test_overridable_initializers_stay_inputs_with_their_defaults(tmp_path):
    src = save(overridable_model(), tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    r = run_cli("optimize", src, "-o", out, *QUICK)
    assert r.returncode == 0, r.stderr
    assert "2 input(s) with a default value kept as inputs" in r.stdout, r.stdout
    original, optimized = onnx.load(src), onnx.load(str(out))
    assert interface_differences(original, optimized) == []
    # Not fed: the defaults; fed: the user's values, on both models.
    for feeds in ({"x": X}, {"x": X, "w": W2}, {"x": X, "w": W2, "shape": np.array([3, 2], np.int64)}):
        want = run_ort(original, feeds)
        got = run_ort(optimized, feeds)
        assert [a.shape for a in got] == [a.shape for a in want]
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


def test_isomer_run_takes_defaults_and_overrides_as_onnx_runtime_does(tmp_path):
    src = save(overridable_model(), tmp_path / "m.onnx")
    for name, feeds in (("plain", {"x": X}), ("override", {"x": X, "w": W2})):
        np.savez(tmp_path / f"{name}.npz", **feeds)
        r = run_cli("run", src, "--inputs", tmp_path / f"{name}.npz", "--threads", "1",
                    "--outputs", tmp_path / f"{name}_out.npz")
        assert r.returncode == 0, r.stderr
        got = np.load(tmp_path / f"{name}_out.npz")["y"]
        np.testing.assert_allclose(got, run_ort(onnx.load(src), feeds)[0], rtol=1e-5, atol=1e-6)


def test_a_run_that_feeds_no_default_takes_the_defaults_for_constants(tmp_path):
    # A Conv whose weight is an overridable input: a run that does not feed the weight
    # computes with the default, so the runtime packs it as a constant (the Conv ran on
    # the reference kernel, 6x slower, with the weight an input); a run that feeds it
    # computes with the user's weight.
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 3, 3, 3])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])]
    src = save(make(nodes, inputs, outputs, [w]), tmp_path / "conv.onnx")
    x = rng.standard_normal((1, 3, 10, 10)).astype(np.float32)
    other_w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    for name, feeds in (("plain", {"x": x}), ("override", {"x": x, "w": other_w})):
        np.savez(tmp_path / f"{name}.npz", **feeds)
        r = run_cli("run", src, "--inputs", tmp_path / f"{name}.npz", "--threads", "1", "--print-steps",
                    "--outputs", tmp_path / f"{name}_out.npz")
        assert r.returncode == 0, r.stderr
        if name == "plain":
            assert "reference kernel" not in r.stdout + r.stderr, r.stdout
        got = np.load(tmp_path / f"{name}_out.npz")["y"]
        np.testing.assert_allclose(got, run_ort(onnx.load(src), feeds)[0], rtol=1e-4, atol=1e-5)


def test_drawn_inputs_take_the_extents_of_defaults(tmp_path):
    # w's rows are an open dim K; its default has 3. The check's drawn inputs take the
    # default, so K is 3 there (it was drawn as 1, and the runtime compiled for a w of 1
    # row refused the default's 3); a run that does not feed w computes with it as a
    # constant.
    w = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 7, "w")
    model = make([helper.make_node("Gemm", ["x", "w"], ["m"], transB=1), helper.make_node("Relu", ["m"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
                  helper.make_tensor_value_info("w", TensorProto.FLOAT, ["K", 4])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "K"])], [w])
    src = save(model, tmp_path / "m.onnx")
    r = run_cli("run", src, "--threads", "1", "--outputs", tmp_path / "y.npz")
    assert r.returncode == 0, r.stderr
    assert "instead" not in r.stdout, r.stdout
    assert np.load(tmp_path / "y.npz")["y"].shape == (1, 3)
    r = run_cli("optimize", src, "-o", tmp_path / "o.onnx", *QUICK)
    assert r.returncode == 0 and "check: passed" in r.stdout, r.stdout + r.stderr
    assert isomer.valid_inputs(model)["w"].shape == (3, 4)
    assert isomer.benchmark(model, threads=1, repeat=1, warmup=0)["repeats"] == 1


def test_python_optimize_and_run_keep_overridable_inputs(tmp_path):
    model = overridable_model()
    optimized, report = isomer.optimize(model, budget=2, cost="none", guard=False, threads=1)
    assert interface_differences(model, optimized) == []
    assert report.frozen_inputs == [] and report.overridable_inputs == ["w", "shape"]
    for feeds in ({"x": X}, {"x": X, "w": W2}):
        np.testing.assert_allclose(isomer.run(optimized, feeds, engine="runtime", threads=1)[0],
                                   run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_folding_overridable_inputs_is_asked_for_and_named(tmp_path):
    src = save(overridable_model(), tmp_path / "m.onnx")
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    r = run_cli("optimize", src, "-o", out, "--fold-overridable-inputs", "--report-json", report, *QUICK)
    assert r.returncode == 0, r.stderr
    assert "overridable input(s) frozen" in r.stdout and "w, shape" in r.stdout
    assert json.loads(report.read_text())["frozen_inputs"] == ["w", "shape"]
    optimized = onnx.load(str(out))
    assert [i.name for i in optimized.graph.input] == ["x"]
    assert interface_differences(onnx.load(src), optimized, frozen=("w", "shape")) == []
    np.testing.assert_allclose(run_ort(optimized, {"x": X})[0], run_ort(onnx.load(src), {"x": X})[0], rtol=1e-5)
    _, py_report = isomer.optimize(onnx.load(src), budget=2, cost="none", guard=False, threads=1,
                                   fold_overridable_inputs=True)
    assert py_report.frozen_inputs == ["w", "shape"]


def test_ir3_initializers_listed_as_inputs_stay_constants(tmp_path):
    # Before IR 4 every initializer is listed as an input, and ONNX Runtime takes them
    # for constants: there is nothing to override.
    m = overridable_model()
    m.ir_version = 3
    m.opset_import[0].version = 8
    m.graph.input.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [3]))
    src = save(m, tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    r = run_cli("optimize", src, "-o", out, *QUICK)
    assert r.returncode == 0, r.stderr
    assert interface_differences(onnx.load(src), onnx.load(str(out))) == []


def edge_models():
    """Graphs whose outputs or inputs are unusual but valid: each must keep its interface."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, ["N", 3])
    c = numpy_helper.from_array(np.array([1.5, -2, 3], np.float32), "c")
    relu = helper.make_node("Relu", ["x"], ["r"])
    yield "output_is_input", make([relu], [x], [helper.make_tensor_value_info("x", f, ["N", 3]),
                                                helper.make_tensor_value_info("r", f, ["N", 3])])
    yield "output_is_initializer", make([relu], [x], [helper.make_tensor_value_info("r", f, ["N", 3]),
                                                      helper.make_tensor_value_info("c", f, [3])], [c])
    const = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array([4, 5], np.int64)))
    yield "output_is_constant_node", make([relu, const], [x], [helper.make_tensor_value_info("r", f, ["N", 3]),
                                                               helper.make_tensor_value_info("k", TensorProto.INT64, [2])])
    yield "output_listed_twice", make([relu], [x], [helper.make_tensor_value_info("r", f, ["N", 3]),
                                                    helper.make_tensor_value_info("r", f, ["N", 3])])
    yield "output_without_shape", make([relu, helper.make_node("Add", ["r", "c"], ["y"])], [x],
                                       [helper.make_tensor_value_info("y", f, [None, None])], [c])
    # A Reshape to a shape computed from the input's: isomer cannot tell the output's dims,
    # which the declaration names.
    computed = [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
                helper.make_node("Concat", ["s", "tail"], ["shape"], axis=0),
                helper.make_node("Reshape", ["x", "shape"], ["y"])]
    tail = numpy_helper.from_array(np.array([3, 1], np.int64), "tail")
    yield "output_dims_from_computed_shape", make(computed, [x], [helper.make_tensor_value_info("y", f, ["N", 3, 1])],
                                                  [tail], opset=18)
    unused = helper.make_tensor_value_info("unused", TensorProto.INT64, ["B", 7])
    yield "unused_input", make([relu], [x, unused], [helper.make_tensor_value_info("r", f, ["N", 3])])
    yield "unused_overridable_input", make([relu], [x, helper.make_tensor_value_info("c", f, [3])],
                                           [helper.make_tensor_value_info("r", f, ["N", 3])], [c])


EDGE = dict(edge_models())


def _feeds(model):
    feeds = {"x": np.array([[1, -2, 3], [-4, 5, -6]], np.float32)}
    if any(i.name == "unused" for i in model.graph.input):
        feeds["unused"] = np.zeros((1, 7), np.int64)
    return feeds


def _same_outputs(original, written):
    feeds = _feeds(original)
    for want, got in zip(run_ort(original, feeds), run_ort(written, feeds)):
        assert want.shape == got.shape and want.dtype == got.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(EDGE))
@pytest.mark.parametrize("command", ["optimize", "convert"])
def test_unusual_interfaces_round_trip_through_the_cli(name, command, tmp_path):
    model = EDGE[name]
    src = save(model, tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    r = run_cli(command, src, "-o", out, *(QUICK if command == "optimize" else ()))
    assert r.returncode == 0, r.stderr
    written = onnx.load(str(out))
    onnx.checker.check_model(written)
    assert interface_differences(model, written) == []
    _same_outputs(model, written)


@pytest.mark.parametrize("name", sorted(EDGE))
def test_unusual_interfaces_round_trip_through_python(name):
    model = EDGE[name]
    written, _ = isomer.optimize(model, budget=2, cost="none", guard=False, threads=1)
    onnx.checker.check_model(written)
    assert interface_differences(model, written) == []
    _same_outputs(model, written)
