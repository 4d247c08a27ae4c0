"""Hostile inputs of the campaign's tenth family (scripts/hostile_mutators_extremes.py), and the
classes left from the ninth's round; each class found, rebuilt small with onnx.helper.

- A value ONNX Runtime computes for isomer (a node the runtime delegates) that comes back
  empty: the bridge waited for its zero bytes as if more were coming, so `optimize`'s check
  sat until the run limit killed the helper and the original was kept (a 10^5-node chain
  after a Split of an empty tensor took 200 s).
- A model-local function in com.microsoft named like one of ONNX Runtime's contrib operators
  (Gelu): ONNX leaves the choice to the runtime, ONNX Runtime runs its kernel; isomer inlined
  the body. A vendor domain's operators are now those ONNX Runtime defines, as an ONNX
  operator already won over a function of its name.
"""
import json

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from hostile_util import isomer_cli, ort_outputs  # noqa: E402


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


@pytest.mark.parametrize("name", ["Gelu", "NotAContribOp"])
def test_vendor_function_named_like_a_contrib_operator(isomer_bin, tmp_path, name):
    ms = "com.microsoft"
    f = helper.make_function(ms, name, ["X"], ["Y"], [helper.make_node("Neg", ["X"], ["Y"])],
                             opset_imports=[helper.make_opsetid("", 18)])
    g = helper.make_graph([helper.make_node(name, ["x"], ["y"], domain=ms, name="call")], "g",
                          [_vi("x", TensorProto.FLOAT, [2, 3])], [_vi("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ms, 1)], functions=[f])
    m.ir_version = 8
    path = tmp_path / "vendor_fn.onnx"
    onnx.save(m, str(path))
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    want = ort_outputs(path, {"x": x})
    assert np.allclose(want, -x) == (name != "Gelu")  # ONNX Runtime's kernel, or the body where it has none
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-5, atol=1e-6)
    out = tmp_path / "o.onnx"
    p = isomer_cli(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(ort_outputs(out, {"x": x}), want, rtol=1e-5, atol=1e-6)
