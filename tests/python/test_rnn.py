"""LSTM, GRU and RNN: isomer's reference semantics against ONNX Runtime, on nodes built
with onnx.helper (every optional input, both layouts, all directions, clip, peepholes,
ragged sequence lengths) and on PyTorch's exports of nn.LSTM, nn.GRU and nn.RNN, which
the runtime must run on its own steps (no ONNX Runtime, no reference kernel).

ONNX Runtime has no layout=1 kernel: batch-first nodes are checked against the
layout-0 node on transposed data.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # torch.onnx's export notes
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def node_model(op, T, N, I, H, direction, layout, opts, attrs, seed):
    """A one-node model and its feeds; `opts` names the optional inputs present."""
    rng = np.random.default_rng(seed)
    D, G = (2 if direction == "bidirectional" else 1), GATES[op]
    f32 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float32)
    swap = (lambda a: np.ascontiguousarray(a.swapaxes(0, 1))) if layout == 1 else (lambda a: a)
    x = swap(f32(T, N, I))
    optional = {"B": f32(D, 2 * G * H), "sequence_lens": np.array(opts.get("lens", [T] * N), np.int32),
                "initial_h": swap(f32(D, N, H)), "initial_c": swap(f32(D, N, H)), "P": f32(D, 3 * H)}
    order = ["B", "sequence_lens", "initial_h"] + (["initial_c", "P"] if op == "LSTM" else [])
    inits = [numpy_helper.from_array(f32(D, G * H, I), "W"), numpy_helper.from_array(f32(D, G * H, H), "R")]
    names = ["X", "W", "R"]
    for name in order:
        present = name in opts or (name == "sequence_lens" and "lens" in opts)
        names.append(name if present else "")
        if present:
            inits.append(numpy_helper.from_array(optional[name], name))
    while names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    node = helper.make_node(op, names, outs, hidden_size=H, direction=direction, layout=layout, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), {"X": x}


def ort_outputs(op, T, N, I, H, direction, layout, opts, attrs, seed):
    """ONNX Runtime's outputs, in the node's layout."""
    model, feeds = node_model(op, T, N, I, H, direction, 0, opts, attrs, seed)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    if layout == 1:
        want = [want[0].transpose(2, 0, 1, 3)] + [w.swapaxes(0, 1) for w in want[1:]]
    return want


CASES = [
    ("LSTM", {}, {"B": 1}),
    ("LSTM", {}, {"B": 1, "initial_h": 1, "initial_c": 1, "P": 1}),
    ("LSTM", {"clip": 0.4}, {"B": 1, "initial_h": 1}),
    ("LSTM", {"input_forget": 1}, {"B": 1, "P": 1}),
    ("GRU", {"linear_before_reset": 1}, {"B": 1, "initial_h": 1}),
    ("GRU", {"linear_before_reset": 0}, {"B": 1}),
    ("GRU", {"clip": 0.4}, {"B": 1}),
    ("RNN", {}, {"B": 1, "initial_h": 1}),
    ("RNN", {"activations": ["Relu"]}, {}),
    ("GRU", {"activations": ["HardSigmoid", "LeakyRelu"], "activation_alpha": [0.3, 0.2], "activation_beta": [0.4]},
     {"B": 1}),
]


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_reference_matches_onnxruntime(case, layout, direction):
    op, attrs, opts = CASES[case]
    if "activations" in attrs and direction == "bidirectional":
        attrs = dict(attrs, activations=attrs["activations"] * 2)
    shape = (5, 3, 4, 6)
    model, feeds = node_model(op, *shape, direction, layout, opts, attrs, seed=case)
    want = ort_outputs(op, *shape, direction, layout, opts, attrs, seed=case)
    got = isomer.run(model, feeds, engine="reference")
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    # The runtime agrees with the reference (its fast path or the reference kernel).
    for g, r in zip(isomer.run(model, feeds, engine="runtime", threads=1), got):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_ragged_sequence_lengths_match_onnxruntime(op, direction):
    opts = {"B": 1, "initial_h": 1, "lens": [5, 2, 3, 1]}
    model, feeds = node_model(op, 5, 4, 3, 4, direction, 0, opts, {}, seed=3)
    want = ort_outputs(op, 5, 4, 3, 4, direction, 0, opts, {}, seed=3)
    for engine in ("reference", "runtime"):
        for g, w in zip(isomer.run(model, feeds, engine=engine, threads=1), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_unsupported_attribute_is_a_clear_error(tmp_path):
    # layout=3 is no layout ONNX defines (ONNX's checker does not look, libonnx's
    # inference neither): import refuses it, naming the node and why.
    model, _ = node_model("LSTM", 5, 3, 4, 6, "forward", 0, {"B": 1}, {}, seed=0)
    model.graph.node[0].name = "enc"
    next(a for a in model.graph.node[0].attribute if a.name == "layout").i = 3
    path = str(tmp_path / "bad.onnx")
    onnx.save(model, path)
    for args in (["show", path], ["run", path, "--no-onnxruntime"]):
        p = subprocess.run([ISOMER] + args, capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and "node 'enc' (LSTM): layout must be 0 or 1, not 3" in p.stderr, p.stderr
        assert "bad.onnx" in p.stderr, p.stderr


# ---- PyTorch's exports ----------------------------------------------------------------------

def export(tmp_path, kind, bidirectional=False, batch_first=False, layers=2, initial=False, seed=0):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seed)
    rnn = getattr(torch.nn, kind)(8, 12, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = rnn

        def forward(self, x, *state):
            y, h = self.rnn(x, *state)
            return (y, *h) if isinstance(h, tuple) else (y, h)

    D = 2 if bidirectional else 1
    x = torch.randn((3, 7, 8) if batch_first else (7, 3, 8))
    args = [x]
    if initial:
        h = torch.randn(layers * D, 3, 12)
        args.append((h, torch.randn(layers * D, 3, 12)) if kind == "LSTM" else h)
    names = ["x"] + (["h0", "c0"] if initial and kind == "LSTM" else ["h0"] if initial else [])
    path = str(tmp_path / f"{kind}.onnx")
    torch.onnx.export(M().eval(), tuple(args), path, opset_version=14, input_names=names)
    feeds = {"x": x.numpy()}
    if initial:
        state = args[1] if kind == "LSTM" else (args[1],)
        feeds.update({n: t.numpy() for n, t in zip(names[1:], state)})
    return path, feeds


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("variant", ["plain", "bidirectional", "batch_first", "initial"])
def test_pytorch_exports_run_natively_and_match_onnxruntime(tmp_path, kind, variant):
    path, feeds = export(tmp_path, kind, bidirectional=variant == "bidirectional", batch_first=variant == "batch_first",
                         initial=variant == "initial")
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for engine in ("reference", "runtime"):
        for g, w in zip(isomer.run(path, feeds, engine=engine, threads=1), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--print-steps",
                        "--no-onnxruntime"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime" not in p.stdout and "reference kernel" not in p.stdout, p.stdout
    assert " rnn " in p.stdout, p.stdout
