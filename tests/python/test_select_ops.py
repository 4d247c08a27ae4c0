"""TopK, ScatterElements, OneHot and GridSample as PyTorch exports them run natively.

Small models holding each (torch.topk on logits and in an MoE router, scatter_ and
scatter_add, F.one_hot, F.grid_sample in every mode and padding) are exported by
torch.onnx, run with `isomer run --no-onnxruntime` (nothing may be delegated, nothing
may run on the reference kernels) and compared with ONNX Runtime on the same inputs.
"""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
F = torch.nn.functional

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def export(tmp_path, module, args, names, opset=16):
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(module, args, path, input_names=names, opset_version=opset)
    return path


def run_both(tmp_path, path, feeds, kind):
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([ISOMER, "run", path, "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--print-steps", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime" not in p.stdout and "reference kernels" not in p.stdout, p.stdout
    assert kind in p.stdout, p.stdout
    got = np.load(tmp_path / "out.npz")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for o, want in zip(sess.get_outputs(), sess.run(None, feeds)):
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got[o.name], want, rtol=1e-5, atol=1e-5, err_msg=o.name)
        else:
            np.testing.assert_array_equal(got[o.name], want, err_msg=o.name)


class TopK(torch.nn.Module):
    def __init__(self, k, largest=True):
        super().__init__()
        self.k, self.largest = k, largest

    def forward(self, x):
        return torch.topk(x, self.k, largest=self.largest)


class Router(torch.nn.Module):
    """An MoE router: the top-2 of 8 experts per token, weights renormalized."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gate = torch.nn.Linear(64, 8, bias=False)

    def forward(self, x):
        w, experts = torch.topk(torch.softmax(self.gate(x), dim=-1), 2)
        return w / w.sum(-1, keepdim=True), experts


@pytest.mark.parametrize("largest", [True, False])
def test_topk_of_logits_with_ties(tmp_path, largest):
    path = export(tmp_path, TopK(5, largest), (torch.zeros(2, 1000),), ["x"])
    x = np.round(np.random.default_rng(1).standard_normal((2, 1000)) * 4).astype(np.float32)  # many ties
    run_both(tmp_path, path, {"x": x}, "topk")


def test_moe_router_top2(tmp_path):
    path = export(tmp_path, Router(), (torch.zeros(128, 64),), ["x"])
    run_both(tmp_path, path, {"x": np.random.default_rng(2).standard_normal((128, 64)).astype(np.float32)}, "topk")


class Packed(torch.nn.Module):
    """An LSTM over pack_padded_sequence(enforce_sorted=False): TorchScript sorts the
    lengths with a TopK whose k is Gather(Shape(lengths), 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.rnn = torch.nn.LSTM(8, 12, batch_first=True)

    def forward(self, x, lengths):
        p = torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.rnn(p)
        return torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])[0]


def test_topk_whose_k_is_a_static_shape(tmp_path):
    """k computed from a static shape is known at import: the TopK is isomer's own, not
    a node kept opaque and run by ONNX Runtime."""
    path = str(tmp_path / "m.onnx")
    torch.onnx.export(Packed(), (torch.zeros(3, 7, 8), torch.tensor([7, 3, 5])), path, input_names=["x", "lengths"],
                      opset_version=16)
    feeds = {"x": np.random.default_rng(4).standard_normal((3, 7, 8)).astype(np.float32),
             "lengths": np.array([4, 7, 2], np.int64)}
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"),
                        "--print-steps", "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime" not in p.stdout and "opaque" not in p.stdout, p.stdout
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = np.load(tmp_path / "out.npz")
    np.testing.assert_allclose(got[list(got.keys())[0]], want, rtol=1e-5, atol=1e-5)


class Scatter(torch.nn.Module):
    def forward(self, x, idx, src):
        return x.scatter(1, idx, src), x.scatter_add(0, idx, src)


def test_scatter_and_scatter_add(tmp_path):
    path = export(tmp_path, Scatter(), (torch.zeros(4, 6), torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, 3)),
                  ["x", "idx", "src"])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((4, 6)).astype(np.float32),
             "idx": rng.integers(0, 4, (4, 3)).astype(np.int64),  # repeats: scatter_add sums them
             "src": rng.standard_normal((4, 3)).astype(np.float32)}
    run_both(tmp_path, path, feeds, "scatter")


class MessagePassing(torch.nn.Module):
    """GNN aggregation: scatter_add of edge messages at their targets, the target index
    expanded over the feature columns (what index_add exports as: every index row is one
    value), degrees, and a 3-D scatter whose index rows mix values."""
    def forward(self, h, src, dst, idx3, upd3):
        m = h[src]
        summed = torch.zeros_like(h).scatter_add(0, dst[:, None].expand(-1, h.shape[1]), m)
        deg = torch.zeros(h.shape[0]).scatter_add(0, dst, torch.ones(dst.shape[0]))
        mixed = torch.zeros(3, 5, 6).scatter_add(1, idx3, upd3)
        return summed, deg, mixed


def test_scatter_add_of_expanded_rows_and_mixed_rows(tmp_path):
    path = export(tmp_path, MessagePassing(), (torch.zeros(20, 16), torch.zeros(90, dtype=torch.long),
                                               torch.zeros(90, dtype=torch.long), torch.zeros(3, 4, 6, dtype=torch.long),
                                               torch.zeros(3, 4, 6)), ["h", "src", "dst", "idx3", "upd3"], opset=17)
    rng = np.random.default_rng(5)
    idx3 = rng.integers(0, 5, (3, 4, 6)).astype(np.int64)
    idx3[1, 2, :] = 3  # one uniform row among mixed ones
    feeds = {"h": rng.standard_normal((20, 16)).astype(np.float32),
             "src": rng.integers(0, 20, 90).astype(np.int64), "dst": rng.integers(0, 20, 90).astype(np.int64),
             "idx3": idx3, "upd3": rng.standard_normal((3, 4, 6)).astype(np.float32)}
    run_both(tmp_path, path, feeds, "scatter")


class OneHot(torch.nn.Module):
    def forward(self, idx, x):
        return F.one_hot(idx, 10).to(torch.float32) * x


def test_one_hot(tmp_path):
    path = export(tmp_path, OneHot(), (torch.zeros(3, 5, dtype=torch.long), torch.zeros(3, 5, 10)), ["idx", "x"])
    rng = np.random.default_rng(4)
    feeds = {"idx": rng.integers(0, 10, (3, 5)).astype(np.int64), "x": rng.standard_normal((3, 5, 10)).astype(np.float32)}
    run_both(tmp_path, path, feeds, "onehot")


class GridSample(torch.nn.Module):
    def __init__(self, mode, padding, align):
        super().__init__()
        self.mode, self.padding, self.align = mode, padding, align

    def forward(self, x, grid):
        return F.grid_sample(x, grid, mode=self.mode, padding_mode=self.padding, align_corners=self.align)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(tmp_path, mode, padding, align):
    path = export(tmp_path, GridSample(mode, padding, align), (torch.zeros(2, 3, 9, 11), torch.zeros(2, 6, 7, 2)),
                  ["x", "grid"])
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((2, 3, 9, 11)).astype(np.float32),
             "grid": rng.uniform(-1.4, 1.4, (2, 6, 7, 2)).astype(np.float32)}  # past the borders too
    run_both(tmp_path, path, feeds, "gridsample")


NODE_DIR = "/usr/share/libonnx-testdata/data/node"


@pytest.mark.parametrize("case", ["test_top_k", "test_top_k_negative_axis", "test_top_k_smallest",
                                  "test_onehot_negative_indices", "test_onehot_with_axis",
                                  "test_onehot_with_negative_axis", "test_onehot_without_axis"])
def test_node_cases_with_k_or_depth_constant(tmp_path, case):
    """ONNX's node tests of TopK and OneHot give k and depth as graph inputs (those nodes
    stay opaque: the output's shape would be known only when run); made initializers,
    the native kernels must reproduce the test data."""
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    d = os.path.join(NODE_DIR, case)
    if not os.path.isdir(d):
        pytest.skip(f"no {d}")
    m = onnx.load(os.path.join(d, "model.onnx"))
    data = os.path.join(d, "test_data_set_0")

    def load(name):
        t = onnx.TensorProto()
        with open(os.path.join(data, name), "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)

    names = [i.name for i in m.graph.input]
    inputs = {name: load(f"input_{k}.pb") for k, name in enumerate(names)}
    m.graph.initializer.append(numpy_helper.from_array(inputs.pop(names[1]), names[1]))
    m.graph.input.remove(m.graph.input[1])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    feeds = inputs
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([ISOMER, "run", path, "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--print-steps", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "reference kernels" not in p.stdout, p.stdout
    got = np.load(tmp_path / "out.npz")
    for k, o in enumerate(m.graph.output):
        want = load(f"output_{k}.pb")
        np.testing.assert_allclose(got[o.name], want, rtol=1e-6, err_msg=o.name)
