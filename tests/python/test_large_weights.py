"""A model over the large-graph size (64 MB of weights, stored as external data)
through `isomer optimize` and `isomer run --bench`: the paths that keep one
prepared copy of the weights at a time, the phase report and the progress lines,
and an output that ONNX Runtime loads and that matches the input."""
import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")


def _large_model(path):
    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((2048, 4096)) / 64).astype(np.float32)  # 32 MiB
    w2 = (rng.standard_normal((4096, 2048)) / 64).astype(np.float32)  # 32 MiB
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "large",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2048])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2048])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=1024)


def _ort_run(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def test_large_model_optimize_reports_phases_and_writes_a_loadable_model(tmp_path, isomer_bin):
    src = tmp_path / "large.onnx"
    _large_model(src)
    out = tmp_path / "out" / "large.opt.onnx"
    out.parent.mkdir()
    report = tmp_path / "report.json"
    proc = subprocess.run([isomer_bin, "optimize", str(src), "-o", str(out), "--report-json", str(report),
                           "--budget", "1", "--threads", "1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "isomer: imported" in proc.stderr and "isomer: writing" in proc.stderr, proc.stderr
    phases = json.loads(report.read_text())["phase_seconds"]
    for phase in ("import", "check", "guard", "write"):
        assert phase in phases, phases
    assert "written: one file" in proc.stdout, proc.stdout
    x = np.random.default_rng(1).standard_normal((4, 2048)).astype(np.float32)
    np.testing.assert_allclose(_ort_run(out, x), _ort_run(src, x), rtol=1e-4, atol=1e-4)


def test_large_model_run_bench_compares_with_onnxruntime(tmp_path, isomer_bin):
    src = tmp_path / "large.onnx"
    _large_model(src)
    report = tmp_path / "bench.json"
    proc = subprocess.run([isomer_bin, "run", str(src), "--bench", "--repeat", "3", "--warmup", "1", "--threads", "1",
                           "--report-json", str(report)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "isomer / ONNX Runtime" in proc.stdout, proc.stdout
    j = json.loads(report.read_text())
    assert j["steps"] >= 2, j
