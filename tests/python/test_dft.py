"""DFT (torch.fft's export) runs on isomer's runtime, not delegated to ONNX Runtime.

ONNX models of one DFT at opsets 17, 18 (axis attribute) and 20 (axis input): real
and complex signals, forward and inverse, one-sided, a dft_length that pads or cuts
the signal, the axis first, inner and negative; and FNet's token mixing as torch's
dynamo exporter writes it (imaginary zeros concatenated, two DFTs, the real part).
`isomer run --no-onnxruntime` must run every node itself, with ONNX Runtime's
outputs; `isomer optimize` must write a model ONNX Runtime runs to the same outputs
(the axis written back as the model's opset has it).
"""
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def dft_model(shape, opset, axis=None, inverse=0, onesided=0, length=None):
    inits, ins = [], ["x"]
    attrs = {"inverse": inverse, "onesided": onesided}
    if length is not None:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "len"))
    ins.append("len" if length is not None else "")
    if opset >= 20:
        if axis is not None:
            inits.append(numpy_helper.from_array(np.array(axis, np.int64), "axis"))
            ins.append("axis")
    elif axis is not None:
        attrs["axis"] = axis
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("DFT", ins, ["y"], **attrs)
    graph = helper.make_graph([node], "dft", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def fnet_mixing(opset):
    """x [batch, seq, hidden] -> real(fft2(x)) over seq and hidden, as torch 2.15's dynamo exporter writes it."""
    c = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    nodes = [helper.make_node("Unsqueeze", ["x", "minus1"], ["re"]),
             helper.make_node("Mul", ["re", "zero"], ["im"]),
             helper.make_node("Concat", ["re", "im"], ["z"], axis=-1)]
    if opset >= 20:
        nodes += [helper.make_node("DFT", ["z", "", "two"], ["f1"]), helper.make_node("DFT", ["f1", "", "one"], ["f2"])]
    else:
        nodes += [helper.make_node("DFT", ["z"], ["f1"], axis=2), helper.make_node("DFT", ["f1"], ["f2"], axis=1)]
    nodes += [helper.make_node("Gather", ["f2", "zero_i"], ["y"], axis=3)]
    inits = [c("minus1", [-1]), c("two", 2), c("one", 1), c("zero_i", 0), numpy_helper.from_array(np.array(0, np.float32), "zero")]
    graph = helper.make_graph(nodes, "fnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 48])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


CASES = {
    "op17_real_default_axis": (dict(shape=[2, 12, 1], opset=17), None),
    "op17_complex_inner_inverse": (dict(shape=[3, 8, 5, 2], opset=17, axis=2, inverse=1), None),
    "op18_onesided_padded": (dict(shape=[4, 10, 1], opset=18, axis=1, onesided=1, length=16), None),
    "op18_complex_first_axis": (dict(shape=[9, 3, 2], opset=18, axis=0), None),
    "op20_negative_axis_cut": (dict(shape=[2, 6, 7, 2], opset=20, axis=-3, length=5), None),
    "op20_default_axis_inverse": (dict(shape=[2, 6, 7, 2], opset=20, inverse=1), None),
    "fnet_op18": (None, 18),
    "fnet_op20": (None, 20),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dft_runs_natively_with_onnxruntime_outputs(tmp_path, name):
    kw, fnet_opset = CASES[name]
    model = fnet_mixing(fnet_opset) if fnet_opset else dft_model(**kw)
    path, opt = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    np.savez(tmp_path / "in.npz", x=x)
    p = subprocess.run([ISOMER, "run", path, "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--print-steps", "--threads", "2"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "reference kernels" not in p.stdout and " dft " in p.stdout, p.stdout
    got = np.load(tmp_path / "out.npz")["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    p = subprocess.run([ISOMER, "optimize", path, "-o", opt], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert onnx.load(opt).opset_import[0].version == model.opset_import[0].version
    again = ort.InferenceSession(opt, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(again, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
