"""`isomer optimize` end to end on real networks: torchvision models exported to
ONNX (random weights, nothing downloaded) go in, and what comes out must pass
onnx.checker, compute what the original computes under ONNX Runtime, and not grow.

The models are exported once into build/models (shared with `make models` and
`make bench`); exporting all four takes about half a minute.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
MODELS_DIR = os.path.join(REPO, "build", "models")
MODELS = ["resnet50", "inception_v3", "mobilenet_v2", "vit_b_16"]
# The never-slower guard times a model some twenty times; the two largest are
# checked for structure and correctness only (tests/python/test_optimize_guard.py
# and tests/cpp/guard_test.cpp test the guard).
UNGUARDED = {"inception_v3", "vit_b_16"}


def _export(name):
    path = os.path.join(MODELS_DIR, name + ".onnx")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "export_torchvision.py"),
                        "--out", MODELS_DIR, "--models", name], check=True, capture_output=True)
    return path


def _run(path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.parametrize("name", MODELS)
def test_optimize_torchvision_model(name, tmp_path):
    src = _export(name)
    out = str(tmp_path / (name + ".opt.onnx"))
    report_path = str(tmp_path / "report.json")
    proc = subprocess.run([ISOMER, "optimize", src, "-o", out, "--report-json", report_path, "--cost", "none",
                           *(["--no-guard"] if name in UNGUARDED else [])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "check: passed" in proc.stdout, proc.stdout
    report = json.load(open(report_path))
    assert report["check"] == "passed"
    assert report["nodes_after"] <= report["nodes_before"]
    if report["kept"] != "original":  # the guard may keep the original when nothing measured faster
        assert report["nodes_after"] < report["nodes_before"], "the template passes should simplify an unfolded export"
    if name not in UNGUARDED:
        assert report["guard"] == "measured", report["guard_reason"]
    onnx.checker.check_model(onnx.load(out))

    # The optimized model must agree with the original under ONNX Runtime too (an
    # engine isomer does not control), on an input of realistic scale.
    model = onnx.load(src, load_external_data=False)
    feeds = {}
    rng = np.random.default_rng(1)
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    want, got = _run(src, feeds), _run(out, feeds)
    for w, g in zip(want, got):
        scale = max(float(np.abs(w).max()), 1e-30)
        assert float(np.abs(w - g).max()) / scale < 1e-3


def test_input_shape_fixes_a_dynamic_batch(tmp_path):
    """A model exported with a dynamic batch keeps its dim name; --input-shape
    fixes it, and the optimized model still runs at the fixed shape."""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)

        def forward(self, x):
            y = torch.relu(self.bn(self.conv(x)))
            return y.reshape(y.shape[0], -1)

    torch.manual_seed(0)
    net = Net().eval()
    src = str(tmp_path / "dyn.onnx")
    torch.onnx.export(net, torch.randn(2, 3, 8, 8), src, opset_version=13, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    kept = str(tmp_path / "kept.onnx")
    proc = subprocess.run([ISOMER, "optimize", src, "-o", kept, "--cost", "none", "--no-guard"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    dims = onnx.load(kept).graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch"
    fixed = str(tmp_path / "fixed.onnx")
    proc = subprocess.run([ISOMER, "optimize", src, "-o", fixed, "--input-shape", "x:4,3,8,8", "--cost", "none",
                           "--no-guard"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    want = _run(src, {"x": x})[0]
    for path in (kept, fixed):
        got = _run(path, {"x": x})[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert len(onnx.load(fixed).graph.node) <= len(onnx.load(kept).graph.node)


def test_ir10_opset18_model_is_read(tmp_path):
    """Models written by current onnx (IR 10, opset 18 forms such as ReduceMean
    with an axes input) go in and come out valid."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    nodes = [helper.make_node("Identity", ["x"], ["i"]),
             helper.make_node("ReduceMean", ["i", "axes"], ["r"], keepdims=1),
             helper.make_node("Sub", ["i", "r"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [axes]),
                              opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    src, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(model, src)
    # No guard: this is about reading and writing; a model of microseconds on a busy
    # machine can time "the same" in a band too wide to write the rewrite.
    proc = subprocess.run([ISOMER, "optimize", src, "-o", out, "--cost", "none", "--no-guard"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    opt = onnx.load(out)
    onnx.checker.check_model(opt)
    assert [n.op_type for n in opt.graph.node] == ["ReduceMean", "Sub"]
    feeds = {"x": np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)}
    np.testing.assert_allclose(_run(out, feeds)[0], _run(src, feeds)[0], rtol=1e-6, atol=1e-6)
