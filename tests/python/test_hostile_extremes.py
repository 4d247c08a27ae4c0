"""Hostile inputs of the campaign's tenth family (scripts/hostile_mutators_extremes.py), and the
classes left from the ninth's round; each class found, rebuilt small with onnx.helper.

- A value ONNX Runtime computes for isomer (a node the runtime delegates) that comes back
  empty: the bridge waited for its zero bytes as if more were coming, so `optimize`'s check
  sat until the run limit killed the helper and the original was kept (a 10^5-node chain
  after a Split of an empty tensor took 200 s).
"""
import json

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from hostile_util import isomer_cli  # noqa: E402


def _model(tmp_path, name, nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _vi(name, t, dims):
    return helper.make_tensor_value_info(name, t, dims)


def test_empty_delegated_output_does_not_wait_for_the_run_limit(isomer_bin, tmp_path):
    # A Split by a fed sizes input: its outputs' shapes are not known when the runtime
    # compiles, so it and what follows run on ONNX Runtime; the Identity before it is a
    # rewrite, so the check runs both models.
    nodes = [helper.make_node("Identity", ["x"], ["xi"], name="id"),
             helper.make_node("Split", ["xi", "s"], ["a", "b"], axis=0, name="split"),
             helper.make_node("Relu", ["a"], ["y"], name="relu")]
    path = _model(tmp_path, "empty_split", nodes, [_vi("x", TensorProto.FLOAT, [0]), _vi("s", TensorProto.INT64, [2])],
                  [_vi("y", TensorProto.FLOAT, None), _vi("b", TensorProto.FLOAT, None)])
    np.savez(tmp_path / "in.npz", x=np.zeros([0], np.float32), s=np.array([0, 0], np.int64))
    report = tmp_path / "r.json"
    p = isomer_cli(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--inputs", tmp_path / "in.npz",
                   "--run-limit", "30", "--threads", "1", "--budget", "1", "--report-json", report)
    assert p.returncode == 0, p.stderr
    r = json.loads(report.read_text())
    assert not r["run_limit_exceeded"], r["run_limit_exceeded"]
    assert r["check"] == "passed", (r["check"], r["check_reason"])
