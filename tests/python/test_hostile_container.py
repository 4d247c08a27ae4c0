"""Hostile inputs of the campaign's thirteenth family (scripts/hostile_mutators_container.py):
what the container holds past the sizes and spellings the other families try; each class
found, rebuilt small with onnx.helper.

- Values of rank 13 and more (ONNX sets no limit; ONNX Runtime runs them): the runtime lays
  every value out with a oneDNN memory descriptor, which holds 12 axes, and oneDNN's
  "dimensions are invalid" ended `optimize`, `run` and `run --no-onnxruntime` alike,
  naming no node. Such a graph is now not runnable on isomer's runtime, for a reason that
  names the value: `run` gives it to ONNX Runtime, `optimize` checks and guards it on the
  engines that can run it, and `run --no-onnxruntime` refuses it in one line.
- The Python module given such a path (a str from os.listdir holds its bytes as surrogates):
  pybind11's conversion to the core's string refused it with a TypeError; and an
  isomer.Error whose message names a file or node by bytes that are not UTF-8 came with no
  message at all (PyErr_SetString decodes strictly). Both now go through.
- A model whose path is not UTF-8 (a Linux file name is bytes), run by ONNX Runtime whole:
  the bridge sent the path in its JSON header, which holds only UTF-8, and `run` failed on
  nlohmann's "invalid UTF-8 byte". The path now goes as its bytes, and the helper loads a
  model whose path its binding cannot take from its directory (external data included).
"""
import os

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hostile_util import isomer_cli, one_error, ort_outputs, save_model  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _vi(name, t, dims=None):
    return helper.make_tensor_value_info(name, t, dims)


def _high_rank_input(tmp_path):
    """Relu of a rank-13 input, times a constant."""
    dims = [2] + [1] * 11 + [3]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Mul", ["r", "w"], ["y"], name="mul")]
    w = numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "w")
    path = save_model(tmp_path, "rank13", nodes, [_vi("x", F, dims)], [_vi("y", F)], [w])
    return path, {"x": np.random.default_rng(0).standard_normal(dims).astype(np.float32)}


def _high_rank_inside(tmp_path, rank):
    """A [2, 3] input reshaped to rank `rank`, transposed and reshaped back."""
    up = numpy_helper.from_array(np.array([2] + [1] * (rank - 2) + [3], np.int64), "up")
    down = numpy_helper.from_array(np.array([3, 2], np.int64), "down")
    nodes = [helper.make_node("Reshape", ["x", "up"], ["h"], name="up"),
             helper.make_node("Transpose", ["h"], ["t"], perm=list(range(rank))[::-1], name="flip"),
             helper.make_node("Reshape", ["t", "down"], ["y"], name="down")]
    path = save_model(tmp_path, f"inside{rank}", nodes, [_vi("x", F, [2, 3])], [_vi("y", F)], [up, down])
    return path, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}


def _run(isomer_bin, tmp_path, path, feeds, *flags):
    np.savez(tmp_path / "in.npz", **feeds)
    out = tmp_path / "out.npz"
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", out, "--threads", "1", *flags)
    return p, out


@pytest.mark.parametrize("case", ["input13", "inside13", "inside40"])
def test_values_past_twelve_axes_run_and_optimize(isomer_bin, tmp_path, case):
    path, feeds = _high_rank_input(tmp_path) if case == "input13" else \
        _high_rank_inside(tmp_path, int(case[len("inside"):]))
    want = ort_outputs(path, feeds)
    p, out = _run(isomer_bin, tmp_path, path, feeds)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-6)
    np.savez(tmp_path / "opt_in.npz", **feeds)
    opt = tmp_path / "opt.onnx"
    p = isomer_cli(isomer_bin, "optimize", path, "-o", opt, "--budget", "1", "--threads", "1",
                   "--inputs", tmp_path / "opt_in.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(ort_outputs(opt, feeds), want, rtol=1e-6)


def test_values_past_twelve_axes_refused_without_onnxruntime(isomer_bin, tmp_path):
    path, feeds = _high_rank_input(tmp_path)
    p, _ = _run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime")
    one_error(p, "rank13.onnx", "graph input 'x'", "rank 13")
    path, feeds = _high_rank_inside(tmp_path, 40)
    p, _ = _run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime")
    one_error(p, "inside40.onnx", "node 'up' (Reshape)", "rank 40")


def test_model_at_a_path_that_is_not_utf8_runs_on_onnxruntime(isomer_bin, tmp_path):
    """A model isomer's runtime cannot run (rank 13), given whole to ONNX Runtime, with its
    weight in external data, at a path whose directory and file name are not UTF-8."""
    dims = [2] + [1] * 11 + [3]
    w = numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "w")
    m = helper.make_model(helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "g", [_vi("x", F, dims)],
                                            [_vi("y", F)], [w]), opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    plain = tmp_path / "plain"
    plain.mkdir()
    onnx.save(m, str(plain / "m.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    base = os.fsencode(tmp_path)
    os.rename(os.path.join(base, b"plain", b"m.onnx"), os.path.join(base, b"plain", b"m\xff.onnx"))
    os.rename(os.path.join(base, b"plain"), os.path.join(base, b"d\xfe"))
    x = np.random.default_rng(1).standard_normal(dims).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    import subprocess
    p = subprocess.run([os.fsencode(isomer_bin), b"run", os.path.join(base, b"d\xfe", b"m\xff.onnx"), b"--inputs",
                        os.fsencode(tmp_path / "in.npz"), b"--outputs", os.fsencode(out)], capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    np.testing.assert_allclose(np.load(out)["y"], x * np.array([1.0, -2.0, 3.0], np.float32), rtol=1e-6)


def _ort_outputs_model(model, feeds):
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def test_python_module_takes_a_path_that_is_not_utf8(tmp_path):
    """isomer.optimize and isomer.run given a path as os.listdir gives it: a name that is not
    UTF-8 holds surrogates, which pybind11's conversion to the core's string refused (a
    TypeError listing the signature)."""
    isomer = pytest.importorskip("isomer")
    w = numpy_helper.from_array(np.array([1.0, -2.0, 3.0], np.float32), "w")
    m = helper.make_model(helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "g", [_vi("x", F, [2, 3])],
                                            [_vi("y", F)], [w]), opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    folder = os.path.join(os.fsencode(tmp_path), b"d\xfe")
    os.mkdir(folder)
    onnx.save(m, str(tmp_path / "plain.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    os.rename(os.fsencode(tmp_path / "plain.onnx"), os.path.join(folder, b"m\xff.onnx"))
    os.rename(os.fsencode(tmp_path / "w.bin"), os.path.join(folder, b"w.bin"))
    path = os.fsdecode(os.path.join(folder, b"m\xff.onnx"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    want = x * np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_allclose(isomer.run(path, {"x": x})[0], want)
    out, _ = isomer.optimize(path, budget=1, threads=1)
    np.testing.assert_allclose(_ort_outputs_model(out, {"x": x}), want)
    with pytest.raises(isomer.Error, match="missing\ufffd.onnx: cannot open file"):
        isomer.run(os.fsdecode(os.path.join(folder, b"missing\xff.onnx")), {"x": x})


def test_python_module_error_naming_a_node_that_is_not_utf8(tmp_path):
    """isomer.Error's message names a node by its bytes; one that is not UTF-8 made
    PyErr_SetString fail to decode it, and the error came with no message at all."""
    isomer = pytest.importorskip("isomer")
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1, name="nQQ")
    node.attribute.append(helper.make_attribute("axis", 0))
    m = helper.make_model(helper.make_graph([node], "g", [_vi("x", F, [2, 3])], [_vi("y", F)]),
                          opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    data = m.SerializeToString().replace(b"nQQ", b"n\xff\xfe")
    with pytest.raises(isomer.Error, match="node 'n\ufffd\ufffd' \\(Softmax\\).*appeared multiple times"):
        isomer.optimize(data, budget=1, threads=1)
