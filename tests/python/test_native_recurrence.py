"""isomer's own recurrence (runtime/native_recurrence.cpp) against ONNX Runtime: LSTM,
linear-before-reset GRU and RNN nodes in every direction, at batch 1 and larger, with
and without initial states, with clip, and with sequence_lens shorter than the
sequence, given as a constant or fed as an input. ISOMER_RNN=native makes the
runtime take the native step wherever it can (by default larger batches without clip
or ragged lengths run on oneDNN); a GRU without linear_before_reset stays on oneDNN
and must agree too. The C++ tests (native_recurrence_test.cpp) check that the native
step, not the reference kernel, ran.
"""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def model_and_feeds(op, direction, N, lens, initial, clip, lens_input, lbr=1, T=6, I=5, H=7, seed=0, activations=None):
    rng = np.random.default_rng(seed)
    D, G = (2 if direction == "bidirectional" else 1), GATES[op]
    f32 = lambda *s: (rng.standard_normal(s) * 0.6).astype(np.float32)
    feeds = {"X": f32(T, N, I)}
    inits = [numpy_helper.from_array(f32(D, G * H, I), "W"), numpy_helper.from_array(f32(D, G * H, H), "R"),
             numpy_helper.from_array(f32(D, 2 * G * H), "B")]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, N, I])]
    names = ["X", "W", "R", "B", ""]
    if lens is not None:
        names[4] = "L"
        arr = np.array(lens, np.int32)
        if lens_input:
            feeds["L"] = arr
            inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, [N]))
        else:
            inits.append(numpy_helper.from_array(arr, "L"))
    if initial:
        for name in ["H0", "C0"] if op == "LSTM" else ["H0"]:
            names.append(name)
            feeds[name] = f32(D, N, H)
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [D, N, H]))
    while names[-1] == "":
        names.pop()
    attrs = {"hidden_size": H, "direction": direction}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    if clip:
        attrs["clip"] = clip
    if activations:
        attrs["activations"] = activations * D
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    graph = helper.make_graph([helper.make_node(op, names, outs, **attrs)], "g", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), feeds


def check(model, feeds, threads):
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = isomer.run(model, feeds, engine="runtime", threads=threads)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("N,lens", [(1, None), (1, [4]), (4, None), (4, [6, 2, 0, 5])])
@pytest.mark.parametrize("initial", [False, True])
def test_native_matches_onnxruntime(monkeypatch, op, direction, N, lens, initial):
    monkeypatch.setenv("ISOMER_RNN", "native")
    for lens_input in ([False, True] if lens else [False]):
        for clip in (None, 0.5):
            model, feeds = model_and_feeds(op, direction, N, lens, initial, clip, lens_input, seed=N + 7 * initial)
            check(model, feeds, threads=1)


# Two threads: large steps (G * H * H * batch >= 2^20 multiply-adds) are split
# between the two, smaller ones run on one.
@pytest.mark.parametrize("op,H", [("LSTM", 256), ("GRU", 300), ("RNN", 40)])
def test_native_on_two_threads_matches_onnxruntime(monkeypatch, op, H):
    monkeypatch.setenv("ISOMER_RNN", "native")
    model, feeds = model_and_feeds(op, "bidirectional", 4, [5, 1, 3, 0], True, None, False, T=5, I=9, H=H, seed=H)
    check(model, feeds, threads=2)


# The default choice between the native step and oneDNN, and a GRU without
# linear_before_reset (oneDNN's, or the reference kernel where clip or ragged
# lengths rule oneDNN out), agree with ONNX Runtime as well.
@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("N,lens,clip", [(1, None, None), (3, None, None), (3, [6, 4, 1], None), (2, None, 0.3)])
def test_default_choice_matches_onnxruntime(monkeypatch, lbr, N, lens, clip):
    monkeypatch.delenv("ISOMER_RNN", raising=False)
    for threads in (1, 2):
        model, feeds = model_and_feeds("GRU", "bidirectional", N, lens, True, clip, False, lbr=lbr, seed=N + lbr)
        check(model, feeds, threads=threads)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("N,threads", [(1, 1), (3, 1), (3, 2)])
def test_relu_rnn_matches_onnxruntime(direction, N, threads):
    """PyTorch's nn.RNN(nonlinearity='relu') exports activations=["Relu"]: the
    native step runs it (it ran on the reference kernel before)."""
    model, feeds = model_and_feeds("RNN", direction, N, None, N > 1, 0, False, seed=N + threads,
                                   activations=["Relu"])
    check(model, feeds, threads)
