"""isomer.optimize / isomer.run against ONNX Runtime, ModelProto round trips, and the
exceptions bad input raises."""
import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import isomer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "examples", "demo.onnx")


def ort_run(model, feeds):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(got, want, rtol=1e-4):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = max(float(np.max(np.abs(w), initial=0.0)), 1e-6)
        assert float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0)) <= rtol * scale


def small_model(opset=17):
    """y = Relu(x @ W + b) computed the wasteful way: an Identity, a Mul by 1 and a
    duplicate Relu added to nothing, so the template passes have work to do."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b")
    nodes = [
        helper.make_node("Identity", ["x"], ["x1"]),
        helper.make_node("MatMul", ["x1", "W"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["r1"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("Add", ["r1", "r2"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def torch_cnn(path):
    """A small CNN exported by torch.onnx (the path real models take)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 5),
        torch.nn.Softmax(dim=1)).eval()
    with torch.no_grad():  # non-trivial BN statistics, so folding them changes numbers
        for m in net:
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    torch.onnx.export(net, torch.randn(1, 3, 16, 16), path, opset_version=13, input_names=["input"],
                      output_names=["probs"], do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    return path


# ---- optimize -------------------------------------------------------------------


def test_optimize_model_proto_matches_onnxruntime():
    model = small_model()
    opt, report = isomer.optimize(model, guard=False)  # rewrites, not timings
    assert isinstance(opt, onnx.ModelProto)
    onnx.checker.check_model(opt)
    assert report.check == "passed"
    assert report.passed
    assert report.nodes_before == 6
    assert report.nodes_after < report.nodes_before
    assert sum(report.rules_applied.values()) > 0
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    assert_close(ort_run(opt, {"x": x}), ort_run(model, {"x": x}))


def test_optimize_demo_model_path_matches_onnxruntime():
    if not os.path.exists(DEMO):
        pytest.skip("examples/demo.onnx not there yet")
    opt, report = isomer.optimize(DEMO, guard=False)  # rewrites, not timings
    assert report.input == DEMO
    assert report.check == "passed"
    assert report.nodes_after < report.nodes_before
    x = np.random.default_rng(2).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    assert_close(ort_run(opt, {"input": x}), ort_run(DEMO, {"input": x}))
    # the same model given as a ModelProto optimizes to the same bytes
    opt2, _ = isomer.optimize(onnx.load(DEMO), guard=False)
    assert opt2.SerializeToString() == opt.SerializeToString()


def test_optimize_torch_exported_model(tmp_path):
    path = torch_cnn(str(tmp_path / "cnn.onnx"))
    opt, report = isomer.optimize(path, guard=False)  # rewrites, not timings
    assert report.check == "passed"
    assert report.op_types_before.get("BatchNormalization") == 2
    assert "BatchNormalization" not in report.op_types_after
    x = np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32)
    assert_close(ort_run(opt, {"input": x}), ort_run(path, {"input": x}))
    assert_close(isomer.run(opt, {"input": x}), ort_run(path, {"input": x}))


MODELS_DIR = os.path.join(REPO, "build", "models")


# Runs when `make models` has exported them (about 15 s for the three).
@pytest.mark.parametrize("name", ["squeezenet1_0", "mobilenet_v2", "resnet50"])
def test_optimize_torchvision_model(name):
    path = os.path.join(MODELS_DIR, name + ".onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path} missing (make models)")
    opt, report = isomer.optimize(path, guard=False)  # rewrites, not timings
    assert report.check == "passed"
    assert report.nodes_after < report.nodes_before
    feeds = {onnx.load(path, load_external_data=False).graph.input[0].name:
             np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    assert_close(ort_run(opt, feeds), ort_run(path, feeds), rtol=1e-3)


def test_report_fields_are_the_cli_report_json(tmp_path):
    if not os.path.exists(DEMO):
        pytest.skip("examples/demo.onnx not there yet")
    binary = os.environ["ISOMER_BIN"]  # set by conftest.py: the CLI of the same build
    if not os.path.exists(binary):
        pytest.skip("the isomer CLI is not built")
    out, report_json = tmp_path / "o.onnx", tmp_path / "r.json"
    # The guard off in both: what it keeps depends on timings, and this compares fields.
    subprocess.run([binary, "optimize", DEMO, "-o", str(out), "--report-json", str(report_json), "--no-guard"],
                   check=True, capture_output=True)
    cli = json.loads(report_json.read_text())
    _, report = isomer.optimize(DEMO, guard=False)
    assert list(report.fields) == list(cli)
    for key in ("nodes_before", "nodes_after", "weight_bytes_before", "weight_bytes_after", "op_types_before",
                "op_types_after", "rules_applied", "check", "check_method", "check_seed", "input"):
        assert getattr(report, key) == cli[key], key
    assert report.to_dict() == json.loads(report.to_json())
    assert "rules applied" in str(report)


def test_search_none_changes_nothing_and_round_trips():
    model = small_model()
    opt, report = isomer.optimize(model, search="none")
    assert report.rules_applied == {}
    assert report.nodes_after == report.nodes_before == 6
    assert report.check == "passed"
    assert [n.op_type for n in opt.graph.node] == [n.op_type for n in model.graph.node]
    # export is deterministic: a second round trip gives the same bytes
    again, _ = isomer.optimize(opt, search="none")
    assert again.SerializeToString() == opt.SerializeToString()


def test_round_trip_keeps_interface_and_weights():
    model = small_model(opset=13)
    opt, _ = isomer.optimize(model, search="none", check=False)
    assert [i.name for i in opt.graph.input] == ["x"]
    assert [o.name for o in opt.graph.output] == ["y"]
    assert opt.opset_import[0].version == 13
    weights = {t.name: numpy_helper.to_array(t) for t in opt.graph.initializer}
    np.testing.assert_array_equal(weights["W"], numpy_helper.to_array(model.graph.initializer[0]))
    # bytes and isomer.Graph are accepted as model too
    from_bytes, _ = isomer.optimize(model.SerializeToString(), search="none", check=False)
    assert from_bytes.SerializeToString() == opt.SerializeToString()


def test_check_off_is_reported_as_skipped():
    _, report = isomer.optimize(small_model(), check=False)
    assert report.check == "skipped"
    assert not report.passed


def test_input_shapes_fix_symbolic_dims():
    opt, _ = isomer.optimize(small_model(), input_shapes={"x": [2, 4]})
    dims = [d.dim_value for d in opt.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 4]


def test_disable_a_rule():
    rules = isomer.template_rules()
    assert "cse" in rules
    _, report = isomer.optimize(small_model(), disable=["cse"])
    assert "cse" not in report.rules_applied


# ---- run ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,onnx_type", [
    (np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16), (np.float64, TensorProto.DOUBLE),
    (np.int64, TensorProto.INT64), (np.int32, TensorProto.INT32)])
def test_run_matches_onnxruntime(dtype, onnx_type):
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "a"], ["y"]),
         helper.make_node("Equal", ["a", "b"], ["e"])], "g",
        [helper.make_tensor_value_info("a", onnx_type, [2, 3]), helper.make_tensor_value_info("b", onnx_type, [3])],
        [helper.make_tensor_value_info("y", onnx_type, [2, 3]),
         helper.make_tensor_value_info("e", TensorProto.BOOL, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    rng = np.random.default_rng(5)
    a = (rng.uniform(-4, 4, (2, 3))).astype(dtype)
    b = a[1].copy()
    got = isomer.run(model, {"a": a, "b": b})
    want = ort_run(model, {"a": a, "b": b})
    assert got[1].dtype == np.bool_
    assert_close(got, want, rtol=1e-3)
    # inputs in order as a list give the same
    assert_close(isomer.run(model, [a, b]), want, rtol=1e-3)


def test_run_bool_and_where():
    graph = helper.make_graph(
        [helper.make_node("Where", ["c", "a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [4]),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    c = np.array([True, False, True, False])
    a, b = np.arange(4, dtype=np.float32), -np.arange(4, dtype=np.float32)
    (y,) = isomer.run(model, {"c": c, "a": a, "b": b})
    np.testing.assert_array_equal(y, np.where(c, a, b))


@pytest.mark.parametrize("batch", [1, 5])
def test_run_on_the_runtime_matches_the_reference_and_onnxruntime(batch):
    model = small_model()  # symbolic batch N: the runtime is compiled for the shapes given
    x = np.random.default_rng(8).standard_normal((batch, 4)).astype(np.float32)
    got = isomer.run(model, {"x": x}, engine="runtime", threads=1)
    assert got[0].shape == (batch, 3)
    assert_close(got, isomer.run(model, {"x": x}))
    assert_close(got, ort_run(model, {"x": x}))
    x = np.random.default_rng(9).standard_normal((1, 3, 32, 32)).astype(np.float32)
    assert_close(isomer.run(DEMO, [x], engine="runtime"), ort_run(DEMO, {"input": x}))


def test_runtime_outputs_large_and_empty_reach_python_whole():
    # The runtime writes its outputs into blocks it never zero-fills: a 25 MB output
    # and an empty one come out as writable arrays with exactly the values computed.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["big"]), helper.make_node("Relu", ["e"], ["empty"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2500, 2500]),
         helper.make_tensor_value_info("e", TensorProto.FLOAT, [0, 7])],
        [helper.make_tensor_value_info("big", TensorProto.FLOAT, [2500, 2500]),
         helper.make_tensor_value_info("empty", TensorProto.FLOAT, [0, 7])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    rng = np.random.default_rng(11)
    for _ in range(3):  # later runs may get the blocks the earlier runs' outputs left
        x = rng.standard_normal((2500, 2500)).astype(np.float32)
        big, empty = isomer.run(model, {"x": x, "e": np.zeros((0, 7), np.float32)}, engine="runtime", threads=1)
        np.testing.assert_array_equal(big, np.maximum(x, 0))
        assert empty.shape == (0, 7) and empty.dtype == np.float32
        big[0, 0] = -1.0  # the caller's own array
        assert big[0, 0] == -1.0


def test_run_on_the_runtime_delegates_operators_isomer_does_not_know():
    # Shrink is not in isomer's operator table: the runtime hands it to ONNX Runtime.
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shrink", ["r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.random.default_rng(10).standard_normal((2, 5)).astype(np.float32)
    (y,) = isomer.run(model, {"x": x}, engine="runtime")
    r = np.maximum(x, 0)
    np.testing.assert_allclose(y, np.where(r > 0.5, r, 0), rtol=1e-6)
    with pytest.raises(isomer.Error, match="Shrink"):
        isomer.run(model, {"x": x})  # the reference evaluator knows only isomer's operators
    assert isomer.benchmark(model, repeat=2)["step_kinds"] == {"pointwise": 1, "onnxruntime": 1}


def test_benchmark_draws_random_indices_within_the_table_they_index():
    # A 2-row table (BERT's token types): random integers in [0, 4) ran out of it.
    table = numpy_helper.from_array(np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32), "types")
    graph = helper.make_graph([helper.make_node("Gather", ["types", "ids"], ["y"])], "g",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8])], [table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for seed in (0, 1, 2):
        assert isomer.benchmark(model, repeat=1, seed=seed)["repeats"] == 1


def test_benchmark_reports_latencies():
    r = isomer.benchmark(DEMO, threads=1, repeat=4, warmup=1)
    assert r["repeats"] == 4 and r["warmup"] == 1 and r["threads"] == 1 and len(r["latency_ms"]) == 4
    assert 0 < r["latency_ms_min"] <= r["latency_ms_median"] <= r["latency_ms_max"]
    assert r["steps"] == sum(r["step_kinds"].values()) and r["step_kinds"]["conv"] == 3
    x = np.zeros((1, 3, 32, 32), np.float32)
    assert isomer.benchmark(DEMO, {"input": x}, repeat=1)["repeats"] == 1
    with pytest.raises(isomer.Error, match="repeat"):
        isomer.benchmark(DEMO, repeat=0)
    with pytest.raises(isomer.Error, match="unknown engine 'fast'"):
        isomer.run(DEMO, [x], engine="fast")


def test_run_non_contiguous_input():
    model = small_model()
    x = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32).T[:, :4]  # a strided view
    assert not x.flags.c_contiguous
    assert_close(isomer.run(model, {"x": x}), ort_run(model, {"x": np.ascontiguousarray(x)}))


# ---- errors ---------------------------------------------------------------------


def test_missing_file_raises_the_cli_message(tmp_path):
    missing = str(tmp_path / "nope.onnx")
    with pytest.raises(isomer.Error, match="nope.onnx: cannot open file"):
        isomer.optimize(missing)


def test_corrupt_bytes_raise(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf\xff\xff")
    with pytest.raises(isomer.Error, match="not an ONNX model"):
        isomer.optimize(str(bad))
    with pytest.raises(ValueError):  # isomer.Error is a ValueError
        isomer.optimize(b"\xff\xff\xff")


def test_unknown_search_mode_is_a_value_error():
    with pytest.raises(ValueError, match="search='egraph' is not available"):
        isomer.optimize(small_model(), search="egraph")


def test_bad_model_type_is_a_type_error():
    with pytest.raises(TypeError, match="expected an onnx.ModelProto"):
        isomer.optimize(42)


def test_input_shape_errors():
    with pytest.raises(isomer.Error, match="not a graph input"):
        isomer.optimize(small_model(), input_shapes={"z": [1, 4]})
    with pytest.raises(isomer.Error, match="has rank 3"):
        isomer.optimize(small_model(), input_shapes={"x": [1, 4, 1]})
    with pytest.raises(isomer.Error, match="negative dim"):
        isomer.optimize(small_model(), input_shapes={"x": [-1, 4]})
    with pytest.raises(TypeError):
        isomer.optimize(small_model(), input_shapes=[("x", [1, 4])])


def test_unknown_rule_to_disable():
    with pytest.raises(isomer.Error, match="no_such_rule"):
        isomer.optimize(small_model(), disable=["no_such_rule"])


def test_shape_mismatch_in_model_raises():
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(isomer.Error, match="MatMul"):
        isomer.optimize(model)


def test_run_input_errors():
    model = small_model()
    with pytest.raises(isomer.Error, match="no value given for graph input 'x'"):
        isomer.run(model, {})
    with pytest.raises(isomer.Error, match="no graph input named 'q'"):
        isomer.run(model, {"x": np.zeros((1, 4), np.float32), "q": 1})
    with pytest.raises(isomer.Error, match="input 'x'"):  # wrong dtype: the evaluator names the input
        isomer.run(model, {"x": np.zeros((1, 4), np.int64)})
    with pytest.raises(isomer.Error):
        isomer.run(model, {"x": np.zeros((1, 5), np.float32)})
    with pytest.raises(isomer.Error, match="not supported"):
        isomer.run(model, {"x": np.zeros((1, 4), np.complex64)})


def test_failed_check_raises_with_report():
    # A tolerance of -1 can never be met: the check must fail closed.
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["i"]), helper.make_node("Relu", ["i"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(isomer.CheckFailedError, match="does not match the original") as info:
        isomer.optimize(model, tolerance=-1.0)
    assert info.value.report.check == "failed"
    assert isinstance(info.value, isomer.Error)
