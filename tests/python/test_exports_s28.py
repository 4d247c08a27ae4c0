"""Exports that earlier rounds did not try (models28), each case built with onnx.helper.

RWKV's time shift pads the time axis by one at the front and -1 at the back (a
negative Pad crops): it ran on the reference kernel. torch.stft's export (an audio
front end) is STFT, an operator isomer did not know.
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


def pad_model(pads, shape, value=None, dtype=TensorProto.FLOAT, mode="constant"):
    """Relu(x) padded by `pads` in `mode` (constant: negative amounts crop)."""
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    ins = ["r", "pads"]
    if value is not None:
        inits.append(numpy_helper.from_array(np.array(value, onnx.helper.tensor_dtype_to_np_dtype(dtype)), "v"))
        ins.append("v")
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Pad", ins, ["y"], name="pad", mode=mode)]
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


@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("pads,shape", [
    ([0, 0, 3, 0, 0, 3], [1, 4, 9]),         # EnCodec's Conv1d pad_mode="reflect"
    ([0, 1, 2, 0, 2, 1], [2, 3, 5]),         # two axes: the corners from padded rows
    ([1, 0, 0, 1, 0, 0, 0, 4], [2, 3, 4, 5]),  # the batch axis, and one side only
])
def test_mirrored_pad_runs_natively(tmp_path, mode, pads, shape):
    model = pad_model(pads, shape, mode=mode)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x})
    assert "reference" not in steps, steps
    want = ort_outputs(model, {"x": x})[0]
    assert got["y"].shape == want.shape
    np.testing.assert_array_equal(got["y"], want)


def stft_model(n, step, length, complex_signal, window, onesided, batch=2):
    """STFT of x [batch, n] (as [batch, n, 1], or [batch, n, 2] = (x, -x)), by a Hann
    window of `length` samples or by frame_length alone, then its squared magnitude."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    inits = [c("step", np.array(step, np.int64)), c("ax", np.array([2], np.int64)), c("last", np.array([3], np.int64))]
    nodes = [helper.make_node("Unsqueeze", ["x", "ax"], ["z"], name="unsq")]
    sig = "z"
    if complex_signal:
        nodes += [helper.make_node("Neg", ["z"], ["nz"], name="neg"),
                  helper.make_node("Concat", ["z", "nz"], ["zc"], name="cat", axis=2)]
        sig = "zc"
    if window:
        inits.append(c("win", (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / length)).astype(np.float32)))
        ins = [sig, "step", "win"]
    else:
        inits.append(c("len", np.array(length, np.int64)))
        ins = [sig, "step", "", "len"]
    nodes += [helper.make_node("STFT", ins, ["spec"], name="stft", onesided=onesided),
              helper.make_node("Mul", ["spec", "spec"], ["sq"], name="sq"),
              helper.make_node("ReduceSum", ["sq", "last"], ["power"], name="power", keepdims=0)]
    graph = helper.make_graph(nodes, "stft", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, n])],
                              [helper.make_tensor_value_info("spec", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("power", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("n,step,length,complex_signal,window,onesided", [
    (400, 64, 128, False, True, 1),     # torch.stft(center=False): Hann window, one-sided
    (100, 7, 20, False, False, 0),      # a rectangular frame_length, both sides
    (90, 10, 33, True, True, 0),        # a complex signal, an odd length
    (50, 3, 50, False, True, 1),        # one frame the whole signal long
])
def test_stft_runs_natively_as_onnx_runtime_does(tmp_path, n, step, length, complex_signal, window, onesided):
    model = stft_model(n, step, length, complex_signal, window, onesided)
    x = np.random.default_rng(2).standard_normal((2, n)).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x})
    assert "reference" not in steps and "stft" in steps, steps
    for name, want in zip(["spec", "power"], ort_outputs(model, {"x": x})):
        assert got[name].shape == want.shape
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


def test_optimize_writes_stft_back(tmp_path):
    model = stft_model(256, 32, 64, False, True, 1)
    path, out = tmp_path / "m.onnx", tmp_path / "o.onnx"
    onnx.save(model, path)
    p = subprocess.run([ISOMER, "optimize", str(path), "-o", str(out), "--threads", "1"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    opt = onnx.load(out)
    onnx.checker.check_model(opt, full_check=True)
    assert "STFT" in [n.op_type for n in opt.graph.node]
    x = np.random.default_rng(3).standard_normal((2, 256)).astype(np.float32)
    for g, w in zip(ort_outputs(opt, {"x": x}), ort_outputs(model, {"x": x})):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_stft_longer_than_its_signal_is_refused_in_one_line(tmp_path):
    model = stft_model(20, 4, 32, False, True, 1)
    path, inp = tmp_path / "m.onnx", tmp_path / "in.npz"
    onnx.save(model, path)
    np.savez(inp, x=np.zeros((2, 20), np.float32))
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(inp), "--threads", "1"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0
    err = (p.stdout + p.stderr).strip().splitlines()
    assert err and "'stft'" in err[-1] and "STFT frame of 32 samples for a signal of 20" in err[-1], err


def ghost_model(batch=2, c=16, half=12, side=20):
    """GhostNet's module: y = Relu(Conv1x1(x)), cat([y, Relu(DepthwiseConv(y))]), read
    by a depthwise convolution of stride 2."""
    rng = np.random.default_rng(4)
    w = lambda name, *s: numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), name)
    inits = [w("w1", half, c, 1, 1), w("b1", half), w("w2", half, 1, 3, 3), w("b2", half),
             w("w3", 2 * half, 1, 3, 3), w("b3", 2 * half)]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["p"], name="primary"),
             helper.make_node("Relu", ["p"], ["y"], name="relu1"),
             helper.make_node("Conv", ["y", "w2", "b2"], ["q"], name="cheap", group=half, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["q"], ["z"], name="relu2"),
             helper.make_node("Concat", ["y", "z"], ["cat"], name="ghost_cat", axis=1),
             helper.make_node("Conv", ["cat", "w3", "b3"], ["out"], name="down", group=2 * half, pads=[1, 1, 1, 1],
                              strides=[2, 2])]
    graph = helper.make_graph(nodes, "ghost", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, side, side])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("batch", [1, 2])
def test_concat_of_channels_last_parts_stays_channels_last_for_its_convolution(tmp_path, batch):
    model = ghost_model(batch)
    x = np.random.default_rng(5).standard_normal((batch, 16, 20, 20)).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x})
    rows = [l.split() for l in steps.splitlines() if l.startswith("  ")]
    convs = [r for r in rows if r[0] == "conv"]
    assert len(convs) == 3, steps
    # The parts and the concatenation in one layout: no reorder of it for the convolution.
    assert not any(r[0] == "reorder" and r[-1] == "ghost_cat" for r in rows), steps
    np.testing.assert_allclose(got["out"], ort_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k,dtype", [(0, None), (1, TensorProto.FLOAT), (-2, TensorProto.INT64), (5, None)])
def test_eye_like_of_a_computed_matrix(tmp_path, k, dtype):
    """XLNet's TorchScript export: EyeLike of ConstantOfShape([n, m]) masks a score matrix."""
    c = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("ConstantOfShape", ["s"], ["zeros"], name="zeros",
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("EyeLike", ["zeros"], ["eye"], name="eye", **attrs),
             helper.make_node("Cast", ["eye"], ["eyef"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "eyef"], ["y"], name="mask")]
    graph = helper.make_graph(nodes, "eye", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x})
    assert "reference" not in steps, steps
    np.testing.assert_array_equal(got["y"], ort_outputs(model, {"x": x})[0])


def test_batchnorm_of_a_permuted_channels_last_view_reads_it_channels_last(tmp_path):
    """SwiftFormer: x [1, H, W, C] permuted to [1, C, H, W], then BatchNorm2d. The view's
    batch axis (extent 1) carries a stride no dense layout gives it; oneDNN matched no
    layout and ran its reference kernel (30x slower)."""
    rng = np.random.default_rng(7)
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, np.float32), name)
    inits = [c("w", rng.standard_normal((16, 16)) * 0.3), c("s", rng.uniform(0.5, 1.5, 16)), c("b", rng.standard_normal(16)),
             c("m", rng.standard_normal(16) * 0.1), c("v", rng.uniform(0.5, 1.5, 16))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="linear"),
             helper.make_node("Transpose", ["h"], ["t"], name="permute", perm=[0, 3, 1, 2]),
             helper.make_node("BatchNormalization", ["t", "s", "b", "m", "v"], ["y"], name="bn")]
    graph = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 32, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, 32, 32, 16)).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x}, "--profile", "--report-json", str(tmp_path / "r.json"))
    import json
    bn = [s for s in json.load(open(tmp_path / "r.json"))["profile"] if s["kind"] == "batchnorm"]
    assert len(bn) == 1 and "1x16x32x32:s16384,1,512,16 " in bn[0]["signature"] + " ", bn
    np.testing.assert_allclose(got["y"], ort_outputs(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("image,block,strides,pads,dilations", [
    ([8, 8], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1]),    # MobileViTV2's fold: patches back into the image
    ([5, 6], [2, 3], [1, 1], [0, 0, 0, 0], [1, 1]),    # overlapping blocks sum
    ([7, 9], [3, 2], [2, 1], [1, 0, 1, 2], [1, 2]),    # strided, padded, dilated
    ([1, 11], [1, 4], [1, 2], [0, 1, 0, 1], [1, 1]),   # nn.Fold of a 1-D signal
])
def test_col2im_runs_natively(tmp_path, image, block, strides, pads, dilations):
    k = len(image)
    positions = [(image[d] + pads[d] + pads[k + d] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(k)]
    n, ch = 2, 3
    cols = [n, ch * int(np.prod(block)), int(np.prod(positions))]
    c = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Col2Im", ["r", "image", "block"], ["y"], name="fold", strides=strides, pads=pads,
                              dilations=dilations)]
    graph = helper.make_graph(nodes, "fold", [helper.make_tensor_value_info("x", TensorProto.FLOAT, cols)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [c("image", image), c("block", block)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    x = np.random.default_rng(8).standard_normal(cols).astype(np.float32)
    steps, got = run_isomer(tmp_path, model, {"x": x})
    assert "reference" not in steps and "col2im" in steps.lower(), steps
    np.testing.assert_allclose(got["y"], ort_outputs(model, {"x": x})[0], rtol=1e-6, atol=1e-6)
