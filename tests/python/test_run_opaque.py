"""`isomer run` on models with operators isomer does not know (opaque nodes).

The issue's contract: such a model runs through ONNX Runtime when it is
available, else it is reported, clearly, as not runnable on the isomer runtime.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=120, env=e)


def opaque_model(path):
    """Relu -> Einsum (batched matmul) -> CumSum: two operators isomer lacks, opset 17."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((2, 4, 5)).astype(np.float32), "w")
    axis = numpy_helper.from_array(np.array(2, dtype=np.int64), "axis")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Einsum", ["r", "w"], ["e"], equation="bij,bjk->bik"),
        helper.make_node("CumSum", ["e", "axis"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "opaque", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5])], [w, axis])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def test_opaque_model_runs_on_onnxruntime(tmp_path):
    path = str(tmp_path / "m.onnx")
    opaque_model(path)
    x = np.random.default_rng(4).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"), "--bench",
               "--repeat", "3", "--threads", "1", "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    assert "not runnable on the isomer runtime" in p.stdout and "ONNX Runtime" in p.stdout, p.stdout
    assert "Einsum" in p.stdout, p.stdout  # names what could not run
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-6, atol=1e-6)
    r = json.load(open(tmp_path / "r.json"))
    assert r["engine"] == "onnxruntime" and r["repeats"] == 3 and r["threads"] == 1
    assert r["latency_ms_min"] <= r["latency_ms_median"] <= r["latency_ms_max"]


def test_opaque_model_random_inputs_are_the_seeded_ones(tmp_path):
    path = str(tmp_path / "m.onnx")
    opaque_model(path)
    a = isomer("run", path, "--seed", "7", "--outputs", str(tmp_path / "a.npz"))
    b = isomer("run", path, "--seed", "7", "--outputs", str(tmp_path / "b.npz"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert "seed 7" in a.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["y"], np.load(tmp_path / "b.npz")["y"])


def test_opaque_model_without_onnxruntime_is_reported_not_runnable(tmp_path):
    path = str(tmp_path / "m.onnx")
    opaque_model(path)
    # No interpreter with onnxruntime: a clear error, no output file, no crash.
    p = isomer("run", path, "--outputs", str(tmp_path / "out.npz"), env={"ISOMER_PYTHON": "/nonexistent/python"})
    assert p.returncode != 0
    assert "isomer: error:" in p.stderr, p.stderr
    assert "not runnable on the isomer runtime" in p.stderr and "Einsum" in p.stderr, p.stderr
    assert "ONNX Runtime could not run it" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "out.npz")
    # And when delegation is switched off.
    q = isomer("run", path, "--no-onnxruntime")
    assert q.returncode != 0 and "not runnable on the isomer runtime" in q.stderr, q.stderr
