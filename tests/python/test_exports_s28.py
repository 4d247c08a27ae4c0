"""Exports that earlier rounds did not try (models28), each case built with onnx.helper.

RWKV's time shift pads the time axis by one at the front and -1 at the back (a
negative Pad crops): it ran on the reference kernel.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def ort_outputs(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def run_isomer(tmp_path, model, feeds, *flags):
    """`isomer run` of `model` on `feeds`, 1 thread, --no-onnxruntime --print-steps; the
    process and its outputs."""
    path, inp, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "out.npz"
    onnx.save(model, path)
    np.savez(inp, **feeds)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--outputs", str(out), "--threads", "1",
                        "--no-onnxruntime", "--print-steps", *flags], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout, dict(np.load(out))


def pad_model(pads, shape, value=None, dtype=TensorProto.FLOAT):
    """Relu(x) padded by `pads` (constant mode, negative amounts crop)."""
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    ins = ["r", "pads"]
    if value is not None:
        inits.append(numpy_helper.from_array(np.array(value, onnx.helper.tensor_dtype_to_np_dtype(dtype)), "v"))
        ins.append("v")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Pad", ins, ["y"], name="pad")]
    graph = helper.make_graph(nodes, "pad", [helper.make_tensor_value_info("x", dtype, shape)],
                              [helper.make_tensor_value_info("y", dtype, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("pads,value", [
    ([0, 1, 0, 0, -1, 0], None),       # RWKV's time shift: [B, T, C] one step later
    ([0, -2, 1, 0, 3, -1], 0.5),       # crop one side, pad the other, on two axes
    ([0, -1, 0, 0, -2, 0], None),      # only crops: no element filled
    ([0, -5, 0, 0, 2, 0], 1.5),        # the whole input cropped away: all fill
])
def test_negative_pad_crops_on_the_native_kernel(tmp_path, pads, value):
    model = pad_model(pads, [2, 5, 3], value)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x})
    assert "reference" not in steps, steps
    want = ort_outputs(model, {"x": x})[0]
    assert got["y"].shape == want.shape
    np.testing.assert_array_equal(got["y"], want)
