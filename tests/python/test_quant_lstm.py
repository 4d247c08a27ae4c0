"""ONNX Runtime's com.microsoft DynamicQuantizeLSTM, which quantize_dynamic writes for
every LSTM, built here as it writes it (W [D, input, 4H] and R [D, H, 4H] int8 or
uint8, a scale and zero point per direction or per column). isomer runs it on its
native recurrence (src/runtime/lower_quant_lstm.cpp), quantizing X and each step's h
as ONNX Runtime does, and no step goes to ONNX Runtime. Outputs are held to ONNX
Runtime's at the same thread count (on several, ONNX Runtime quantizes h in parts
of the batch, and isomer with it): their difference stays far below what the
quantization itself changes (the same LSTM on the float weights).
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_vendor_ops import steps_of

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
MS = "com.microsoft"


def quantize_weights(w, dtype, per_channel):
    """w [D, 4H, K] float -> ([D, K, 4H] int, scale, zero point) as quantize_dynamic
    writes them: int8 symmetric (zero point 0), uint8 with one zero point per direction."""
    D, G, _ = w.shape
    wt = np.transpose(w, (0, 2, 1))  # [D, K, 4H]
    axes = (1,) if per_channel else (1, 2)
    lo, hi = np.minimum(wt.min(axis=axes), 0), np.maximum(wt.max(axis=axes), 0)
    if dtype == np.int8:
        scale = np.maximum(np.abs(lo), hi) / 127.0
        zp = np.zeros_like(scale, dtype=np.int8)
        q = np.clip(np.round(wt / scale[:, None] if per_channel else wt / scale[:, None, None]), -127, 127)
    else:
        # one zero point per direction, the scale per column where asked
        glo, ghi = np.minimum(wt.min(axis=(1, 2)), 0), np.maximum(wt.max(axis=(1, 2)), 0)
        z = np.round(-glo / ((ghi - glo) / 255.0)).astype(np.int64)
        scale = np.maximum(hi / (255 - z[:, None] if per_channel else 255 - z), -lo / np.maximum(z[:, None] if per_channel else z, 1))
        zp = (np.broadcast_to(z[:, None], scale.shape) if per_channel else z).astype(np.uint8)
        s = scale[:, None] if per_channel else scale[:, None, None]
        zz = z[:, None, None]
        q = np.clip(np.round(wt / s) + zz, 0, 255)
    return q.astype(dtype), scale.astype(np.float32), np.ascontiguousarray(zp).astype(dtype)


def dequantized(q, scale, zp, per_channel):
    s = scale[:, None, :] if per_channel else scale[:, None, None]
    z = zp.astype(np.float32)[:, None, :] if per_channel else zp.astype(np.float32)[:, None, None]
    return np.transpose((q.astype(np.float32) - z) * s, (0, 2, 1)).astype(np.float32)  # [D, 4H, K]


def lstm_models(path, T=6, N=2, I=12, H=16, direction="forward", dtype=np.int8, per_channel=False, lens=None,
                lens_input=False, states=False, peepholes=False, clip=None, seed=0):
    """The quantized node and the float LSTM on its dequantized weights (the error
    quantization itself makes). Inputs: x, and seq where lens_input."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    w = rng.standard_normal((D, 4 * H, I)).astype(np.float32) * 0.3
    r = rng.standard_normal((D, 4 * H, H)).astype(np.float32) * 0.3
    b = rng.standard_normal((D, 8 * H)).astype(np.float32) * 0.2
    wq, ws, wz = quantize_weights(w, dtype, per_channel)
    rq, rs, rz = quantize_weights(r, dtype, per_channel)
    f = lambda name, a: numpy_helper.from_array(np.asarray(a), name)
    inits = [f("W", wq), f("R", rq), f("B", b), f("ws", ws), f("wz", wz), f("rs", rs), f("rz", rz)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, N, I])]
    names = ["x", "W", "R", "B", "", "", "", ""]
    if lens is not None:
        names[4] = "seq"
        if lens_input:
            inputs.append(helper.make_tensor_value_info("seq", TensorProto.INT32, [N]))
        else:
            inits.append(f("seq", np.array(lens, np.int32)))
    if states:
        inits += [f("h0", rng.standard_normal((D, N, H)).astype(np.float32) * 0.5),
                  f("c0", rng.standard_normal((D, N, H)).astype(np.float32) * 0.5)]
        names[5:7] = ["h0", "c0"]
    if peepholes:
        inits.append(f("P", rng.standard_normal((D, 3 * H)).astype(np.float32) * 0.1))
        names[7] = "P"
    attrs = dict(hidden_size=H, direction=direction)
    if clip:
        attrs["clip"] = clip
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("y", "yh", "yc")]
    q = helper.make_node("DynamicQuantizeLSTM", names + ["ws", "wz", "rs", "rz"], ["y", "yh", "yc"], domain=MS,
                         **attrs)
    m = helper.make_model(helper.make_graph([q], "qlstm", inputs, outputs, inits),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)], ir_version=8)
    onnx.save(m, path)
    float_inits = [i for i in inits if i.name not in ("W", "R", "ws", "wz", "rs", "rz")]
    float_inits += [f("W", dequantized(wq, ws, wz, per_channel)), f("R", dequantized(rq, rs, rz, per_channel))]
    fl = helper.make_node("LSTM", names, ["y", "yh", "yc"], **attrs)
    fm = helper.make_model(helper.make_graph([fl], "flstm", inputs, outputs, float_inits),
                           opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((T, N, I)).astype(np.float32)
    if lens is not None:
        # Rows past the longest sequence are outside the range ONNX Runtime quantizes X on.
        x[max(lens):] *= 8
    feeds = {"x": x}
    if lens_input:
        feeds["seq"] = np.array(lens, np.int32)
    return path, fm, feeds


def ort_run(model, feeds, threads=1):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads  # on more than one it quantizes h in parts of the batch
    src = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(src, o, providers=["CPUExecutionProvider"]).run(None, feeds)


CASES = {
    "s8 forward": dict(),
    "u8 forward": dict(dtype=np.uint8),
    "s8 per-channel": dict(per_channel=True),
    "u8 per-channel": dict(dtype=np.uint8, per_channel=True),
    "reverse": dict(direction="reverse", dtype=np.uint8),
    "bidirectional": dict(direction="bidirectional", per_channel=True, N=3),
    "batch 1": dict(N=1, T=9),
    "initial states": dict(states=True, direction="bidirectional", dtype=np.uint8),
    "constant lengths": dict(T=8, N=4, lens=[6, 3, 0, 4], direction="bidirectional", states=True),
    "lengths at run time": dict(N=3, lens=[2, 5, 4], lens_input=True, direction="reverse", dtype=np.uint8),
    "clip": dict(clip=0.7, per_channel=True),
    "larger": dict(T=12, N=5, I=40, H=64, dtype=np.uint8, per_channel=True),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_dynamic_quantize_lstm_runs_natively_in_onnxruntimes_steps(case, tmp_path):
    path, float_model, feeds = lstm_models(str(tmp_path / "q.onnx"), **CASES[case])
    steps = steps_of(path)
    assert not any(s[0] == "onnxruntime" for s in steps), steps
    assert any(s[0] == "rnn" and s[1] == "DynamicQuantizeLSTM" for s in steps), steps
    float_lstm = ort_run(float_model, feeds)
    for threads in (1, 2):
        want = ort_run(path, feeds, threads)
        got = isomer.run(path, feeds, engine="runtime", threads=threads)
        for g, w, fl in zip(got, want, float_lstm):
            assert g.shape == w.shape
            err, quant_err = np.abs(g - w).max(), np.abs(fl - w).max()
            # float rounding, and now and then one rounding step of a quantized h
            assert err <= 2e-3 and err <= quant_err / 4, (case, err, quant_err)
            assert (np.abs(g - w) > 1e-5).mean() <= 0.02, (case, err, quant_err)


def test_dynamic_quantize_lstm_forms_it_does_not_take_still_run_on_onnxruntime(tmp_path):
    path, _, feeds = lstm_models(str(tmp_path / "p.onnx"), peepholes=True)
    assert any(s[0] == "onnxruntime" for s in steps_of(path))
    want = ort_run(path, feeds)
    got = isomer.run(path, feeds, engine="runtime", threads=1)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def lstm_head_model(path, seed, T=30, I=64, H=128):
    """quantize_dynamic's 1-layer LSTM classifier: DynamicQuantizeLSTM (int8 weights
    scaled as PyTorch initializes them), then DynamicQuantizeLinear, MatMulInteger and
    the scales, as it writes the Linear after it."""
    rng = np.random.default_rng(seed)
    k = 1 / np.sqrt(H)
    w = rng.uniform(-k, k, (1, 4 * H, I)).astype(np.float32)
    r = rng.uniform(-k, k, (1, 4 * H, H)).astype(np.float32)
    wq, ws, wz = quantize_weights(w, np.int8, False)
    rq, rs, rz = quantize_weights(r, np.int8, False)
    fc = np.clip(np.round(rng.uniform(-k, k, (H, 10)) / (k / 127)), -127, 127).astype(np.int8)
    f = lambda name, a: numpy_helper.from_array(np.asarray(a), name)
    inits = [f("W", wq), f("R", rq), f("B", rng.uniform(-k, k, (1, 8 * H)).astype(np.float32)), f("ws", ws),
             f("wz", wz), f("rs", rs), f("rz", rz), f("fc", fc), f("fc_zp", np.int8(0)),
             f("fc_scale", np.float32(k / 127)), f("shape", np.array([T, H], np.int64))]
    nodes = [helper.make_node("DynamicQuantizeLSTM", ["x", "W", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"],
                              ["y"], domain=MS, hidden_size=H),
             helper.make_node("Reshape", ["y", "shape"], ["y2"]),
             helper.make_node("DynamicQuantizeLinear", ["y2"], ["q", "qs", "qz"]),
             helper.make_node("MatMulInteger", ["q", "fc", "qz", "fc_zp"], ["acc"]),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["qs", "fc_scale"], ["scale"]),
             helper.make_node("Mul", ["accf", "scale"], ["out"])]
    g = helper.make_graph(nodes, "qlstm_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, 1, I])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)],
                                ir_version=8), path)
    np.savez(path + ".npz", x=rng.standard_normal((T, 1, I)).astype(np.float32))
    return path


@pytest.mark.parametrize("seed", [30, 36])
def test_run_checks_a_quantized_lstm_layer_by_layer(seed, tmp_path):
    """isomer's h lands on the other side of a quantization tie than ONNX Runtime's now
    and then (their sigmoid and tanh round differently); the steps after carry the step,
    and the DynamicQuantizeLinear after the LSTM carries it past the float tolerance
    (2.9e-3 and 6e-3 relative at these seeds on an AVX-512 machine). `run` then
    checks each quantized LSTM against ONNX Runtime's on the same inputs, and what
    follows fed isomer's LSTM outputs."""
    path = lstm_head_model(str(tmp_path / "head.onnx"), seed, T=60)
    p = subprocess.run([ISOMER, "run", path, "--inputs", path + ".npz", "--threads", "1", "--bench", "--repeat", "2",
                        "--warmup", "0"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "outputs match" in p.stdout, p.stdout


@pytest.mark.parametrize("case", ["bidirectional", "lengths at run time", "u8 per-channel"])
def test_dynamic_quantize_lstm_without_vnni_takes_float_products(case, tmp_path):
    """Where the CPU has no AVX-512 VNNI, X and h are quantized and dequantized and
    the products are float32's over the dequantized weights: the same results."""
    path, _, feeds = lstm_models(str(tmp_path / "q.onnx"), **CASES[case])
    np.savez(str(tmp_path / "in.npz"), **feeds)
    env = dict(os.environ, ISOMER_NO_VNNI="1")
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--threads", "1", "--print-steps"], capture_output=True,
                       text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert "int8-matmul" not in p.stdout and "onnxruntime" not in p.stdout, p.stdout
    got = np.load(str(tmp_path / "out.npz"))
    for name, w in zip(("y", "yh", "yc"), ort_run(path, feeds)):
        assert np.abs(got[name] - w).max() <= 2e-3, (case, name)
        assert (np.abs(got[name] - w) > 1e-5).mean() <= 0.02, (case, name)


def test_dynamic_quantize_lstm_runs_without_onnxruntime(tmp_path):
    """No ONNX Runtime to ask for types: isomer's own shape hook
    (src/onnx/vendor_shapes.cpp) types Y, so the Reshape, DynamicQuantizeLinear and
    MatMulInteger after it import as operators and the model runs whole."""
    path = lstm_head_model(str(tmp_path / "head.onnx"), 1, T=8, I=16, H=32)
    env = dict(os.environ, ISOMER_PYTHON=str(tmp_path / "no-python"))
    p = subprocess.run([ISOMER, "run", path, "--inputs", path + ".npz", "--no-onnxruntime", "--threads", "1",
                        "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    got = np.load(str(tmp_path / "out.npz"))["out"]
    want = ort_run(path, dict(np.load(path + ".npz")))[0]
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()
