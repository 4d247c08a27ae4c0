"""A dynamic export (open batch and sequence dims) run, priced, benchmarked and optimized
without given inputs: the drawn inputs take the extents the dims' names suggest (a batch
1, a sequence 64: src/check/open_dims.h) and the model runs fixed to them, fused as it is
at static shapes; the model optimize writes keeps its open dims."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_current_exports import isomer
from test_exports_s25 import norm_steps, rms_model

ort = pytest.importorskip("onnxruntime")


def test_run_without_inputs_fuses_at_the_drawn_extents(tmp_path):
    # Without --inputs the random inputs took every open dim as 1 and the graph ran as
    # imported, its dims symbolic: the RMSNorm ran as five steps, not the row kernel.
    path = rms_model(tmp_path, ["batch", "seq", 64], "Reciprocal")
    p = isomer("run", path, "--print-steps", "--threads", "1", "--no-onnxruntime")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "inputs: random, seed 0, open dims at batch=1, seq=64" in p.stdout, p.stdout
    assert len(norm_steps(p.stdout)) == 1, p.stdout
    assert "f32[1,64,32]" in p.stdout, p.stdout
    # --input-shape still sets a dim the user cares about.
    p = isomer("run", path, "--print-steps", "--threads", "1", "--no-onnxruntime", "--input-shape", "x:2,3,64")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "f32[2,3,32]" in p.stdout and len(norm_steps(p.stdout)) == 1, p.stdout


def test_cost_prices_the_model_fixed_at_the_drawn_extents(tmp_path):
    path = rms_model(tmp_path, ["batch", "seq", 64], "Div")
    p = isomer("cost", path, "--cost", "analytic", "--threads", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "open input dims at batch=1, seq=64" in p.stdout, p.stdout
    assert len([line for line in p.stdout.splitlines() if line.startswith("layernorm")]) == 1, p.stdout


def test_python_benchmark_without_inputs_fuses_at_the_drawn_extents(tmp_path):
    isomer_py = pytest.importorskip("isomer")
    path = rms_model(tmp_path, ["batch", "seq", 64], "Reciprocal")
    bench = isomer_py.benchmark(path, threads=1, repeat=1, warmup=0)
    assert bench["step_kinds"].get("layernorm") == 1, bench["step_kinds"]
    assert isomer_py.valid_inputs(path)["x"].shape == (1, 64, 64)
    assert isomer_py.valid_inputs(path, input_shapes={"x": [2, 3, 64]})["x"].shape == (2, 3, 64)


def test_optimize_times_fixed_dims_and_writes_open_ones(tmp_path):
    # The check and the guard run both models fixed at the drawn extents, as they run;
    # the written model keeps the open dims and computes what the original does at any.
    path = rms_model(tmp_path, ["batch", "seq", 64], "Div")
    out, report = str(tmp_path / "o.onnx"), str(tmp_path / "r.json")
    p = isomer("optimize", path, "-o", out, "--threads", "1", "--report-json", report)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "inputs: random (seed 0), open dims at batch=1, seq=64" in p.stdout, p.stdout
    r = json.load(open(report))
    assert r["input_extents"] == {"batch": 1, "seq": 64}, r
    assert r["check"] == "passed", r
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq", 64], dims
    before = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    after = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for shape in [(2, 5, 64), (1, 9, 64)]:
        x = {"x": rng.standard_normal(shape).astype(np.float32)}
        np.testing.assert_allclose(after.run(None, x)[0], before.run(None, x)[0], rtol=1e-5, atol=1e-6)


def test_optimize_states_the_given_inputs_extents(tmp_path):
    path = rms_model(tmp_path, ["batch", "seq", 64], "Div")
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(8).standard_normal((3, 5, 64)).astype(np.float32))
    report = str(tmp_path / "r.json")
    p = isomer("optimize", path, "-o", str(tmp_path / "o.onnx"), "--threads", "1", "--inputs",
               str(tmp_path / "in.npz"), "--report-json", report)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.load(open(report))["input_extents"] == {"batch": 3, "seq": 5}


def short_positions_model(tmp_path):
    """x[batch, seq, 16] + the first seq rows of a 32-row position table: seq 64 does not fit."""
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
             helper.make_node("Slice", ["pos", "zero", "s", "zero"], ["p"]),
             helper.make_node("Add", ["x", "p"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "pos"),
             numpy_helper.from_array(np.array([0], np.int64), "zero")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 16])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = str(tmp_path / "pos.onnx")
    onnx.save(m, path)
    return path


def test_a_model_that_refuses_the_named_extents_is_drawn_at_1(tmp_path):
    # A sequence of 64 does not fit a 32-row position table: the drawn inputs take
    # every open dim as 1 (as they did before they went by name), not a failure.
    path = short_positions_model(tmp_path)
    p = isomer("run", path, "--threads", "1", "--no-onnxruntime")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "open dims at batch=1, seq=1" in p.stdout and "f32[1,1,16]" in p.stdout, p.stdout
    p = isomer("cost", path, "--cost", "analytic", "--threads", "1")
    assert p.returncode == 0 and "open input dims at batch=1, seq=1" in p.stdout, p.stdout + p.stderr
    report = str(tmp_path / "r.json")
    p = isomer("optimize", path, "-o", str(tmp_path / "o.onnx"), "--threads", "1", "--report-json", report)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.load(open(report))
    assert r["input_extents"] == {"batch": 1, "seq": 1} and r["check"] == "passed", r
    isomer_py = pytest.importorskip("isomer")
    assert isomer_py.valid_inputs(path)["x"].shape == (1, 1, 16)
