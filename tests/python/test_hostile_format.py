"""Hostile files and declarations the third pass of the campaign covered: files that are
not ONNX models at all, value_info whose shape lies, operators no opset has, and a model
of 10^5 tiny nodes.

- A path that is no readable ONNX model (a PNG, an empty file, a truncated protobuf, a
  directory, a missing file, a device) is refused by the CLI with one "isomer: error:"
  line naming the file, and by the Python module with isomer.Error and the same message.
- A value_info's shape is a hint, as ONNX Runtime reads it (src/onnx/declared_shapes.h):
  a shape that contradicts what ONNX infers is overruled, not believed, so isomer computes
  what ONNX Runtime computes, both where isomer used the declaration (the output of a
  node it keeps opaque) and where it never did (its own operators).
- An ai.onnx operator that no opset has, or not yet at the model's opset, is refused.
- A chain of 10^5 nodes imports and runs (it used to overflow the stack).
- `run --input-shape` that contradicts the model (rank, dims, names, sizes) is refused clearly.
"""
import os
import subprocess
import sys
import time

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))


def _small_model_bytes():
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _bad_paths(tmp_path):
    png = tmp_path / "picture.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(_small_model_bytes()[:-7])
    directory = tmp_path / "folder.onnx"
    directory.mkdir()
    return {"png": (png, "not an ONNX model"), "empty": (empty, "empty file"),
            "truncated": (truncated, "not an ONNX model"),
            "directory": (directory, "cannot open file (a directory, not an ONNX file)"),
            "missing": (tmp_path / "nowhere.onnx", "cannot open file (no such file)"),
            "device": ("/dev/zero", "cannot open file (not a regular file)")}


KINDS = ["png", "empty", "truncated", "directory", "missing", "device"]


@pytest.mark.parametrize("kind", KINDS)
def test_cli_refuses_a_file_that_is_not_an_onnx_model(tmp_path, isomer_bin, kind):
    path, fragment = _bad_paths(tmp_path)[kind]
    out = tmp_path / "out.onnx"
    for args in (["optimize", str(path), "-o", str(out)], ["run", "--no-onnxruntime", str(path)]):
        proc = subprocess.run([isomer_bin] + args, capture_output=True, text=True, timeout=60)
        lines = [l for l in proc.stderr.splitlines() if l.strip()]
        assert proc.returncode == 1, proc.stderr
        assert len(lines) == 1 and lines[0].startswith("isomer: error: "), proc.stderr
        assert os.path.basename(str(path)) in lines[0] and fragment in lines[0], lines[0]
        assert not out.exists()


@pytest.mark.parametrize("kind", KINDS)
def test_python_module_raises_the_same_message(tmp_path, isomer_bin, kind):
    """In a child interpreter, so that an abort would show as its exit status."""
    path, fragment = _bad_paths(tmp_path)[kind]
    code = ("import isomer, sys\n"
            "try:\n"
            f"    isomer.optimize({str(path)!r}, budget=1)\n"
            "except isomer.Error as e:\n"
            "    print('ERROR', e); sys.exit(3)\n"
            "print('ACCEPTED')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    if "No module named 'isomer'" in proc.stderr:
        pytest.skip("no isomer Python module in this build")
    assert proc.returncode == 3, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert fragment in proc.stdout and os.path.basename(str(path)) in proc.stdout, proc.stdout


def _onehot_model(declared=None, on_add=None):
    """y = OneHot(idx, 3) + bias: OneHot is a node isomer keeps opaque (its output type comes
    from ONNX's inference), Add one it computes itself. `declared`: a value_info shape for
    OneHot's output; `on_add`: one for Add's."""
    nodes = [helper.make_node("OneHot", ["idx", "depth", "vals"], ["oh"], name="onehot"),
             helper.make_node("Add", ["oh", "bias"], ["y"], name="add")]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "depth"),
             numpy_helper.from_array(np.array([0, 1], np.float32), "vals"),
             numpy_helper.from_array(np.arange(3, dtype=np.float32), "bias")]
    vis = []
    if declared is not None:
        vis.append(helper.make_tensor_value_info("oh", TensorProto.FLOAT, declared))
    if on_add is not None:
        vis.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, on_add))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits, value_info=vis)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("declared,on_add", [([2, 3], None), ([3, 2], None), ([1, 3], None), ([6], None),
                                             ([2, 3, 1], None), (None, [3, 2]), (None, [6])],
                         ids=["truthful", "transposed", "broadcastable_lie", "rank_lie", "rank_up_lie",
                              "native_transposed", "native_rank"])
def test_value_info_shape_is_a_hint_as_in_onnx_runtime(tmp_path, isomer_bin, declared, on_add):
    path = tmp_path / "m.onnx"
    onnx.save(_onehot_model(declared, on_add), str(path))
    feeds = {"idx": np.array([0, 2], np.int64)}
    np.savez(tmp_path / "in.npz", **feeds)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    proc = subprocess.run([isomer_bin, "run", str(path), "--inputs", str(tmp_path / "in.npz"),
                           "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = np.load(tmp_path / "out.npz")["y"]
    assert got.shape == want.shape and np.array_equal(got, want), (got, want)


def _unknown_op_model(op, opset):
    g = helper.make_graph([helper.make_node(op, ["x", "x"], ["y"], name="n0")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("op,opset,fragment", [
    ("FutureOpAdd", 17, "domain 'ai.onnx' has no operator FutureOpAdd at opset 17"),
    ("BitwiseAnd", 17, "domain 'ai.onnx' has no operator BitwiseAnd at opset 17 (it has one from opset 18)")])
def test_operator_no_opset_has_is_refused(tmp_path, isomer_bin, op, opset, fragment):
    path = tmp_path / "m.onnx"
    onnx.save(_unknown_op_model(op, opset), str(path))
    proc = subprocess.run([isomer_bin, "optimize", str(path), "-o", str(tmp_path / "o.onnx")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "node 'n0'" in proc.stderr and fragment in proc.stderr, proc.stderr
    with pytest.raises(Exception):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_chain_of_a_hundred_thousand_nodes_imports_and_runs(tmp_path, isomer_bin):
    count = 100_000
    nodes = [helper.make_node(["Neg", "Relu", "Abs", "Identity"][i % 4], ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"])
             for i in range(count)]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info(f"v{count - 1}", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "chain.onnx"
    onnx.save(m, str(path))
    x = np.array([-2.0, -0.5, 0.5, 3.0], np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    start = time.time()
    proc = subprocess.run([isomer_bin, "run", "--no-onnxruntime", str(path), "--inputs", str(tmp_path / "in.npz"),
                           "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    want = x
    for i in range(count):
        want = [np.negative, lambda v: np.maximum(v, 0), np.abs, lambda v: v][i % 4](want)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")[f"v{count - 1}"], want)
    assert time.time() - start < 300


@pytest.mark.parametrize("where", ["output", "value_info"])
def test_declared_element_type_of_an_opaque_output_that_lies_is_refused(tmp_path, isomer_bin, where):
    """An opaque node's output takes its declared type where libonnx's inference cannot merge
    the inferred one: a declared element type ONNX infers otherwise is refused, naming it."""
    m = _onehot_model()
    if where == "output":
        m.graph.output[0].name = "oh"
        del m.graph.node[1:]
        m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT8
    else:
        m.graph.value_info.append(helper.make_tensor_value_info("oh", TensorProto.INT8, None))
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    proc = subprocess.run([isomer_bin, "optimize", str(path), "-o", str(tmp_path / "o.onnx")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "'oh' is declared i8, but ONNX infers f32" in proc.stderr and path.name in proc.stderr, proc.stderr
    with pytest.raises(Exception):
        so = ort.SessionOptions()
        so.log_severity_level = 4
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(
            None, {"idx": np.array([0, 2], np.int64)})


@pytest.mark.parametrize("shape,fragment", [
    ("x:3,4", "input shape for 'x' has rank 2, the model declares rank 3"),
    ("x:-1,4,5", "'-1' is not a dimension"),
    ("x:a,b", "'a' is not a dimension"),
    ("nope:3,4,5", "input shape given for 'nope', which is not a graph input"),
    ("x:1099511627776,1099511627776,4", "more elements than fit in 64 bits"),
    ("x:3,4,7", "MatMul inner dimensions differ: [3,4,7] x [5,2]")])
def test_input_shape_that_lies_is_refused_naming_the_file(tmp_path, isomer_bin, shape, fragment):
    w = numpy_helper.from_array(np.ones((5, 2), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    proc = subprocess.run([isomer_bin, "run", "--no-onnxruntime", str(path), "--input-shape", shape],
                          capture_output=True, text=True, timeout=60)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert path.name in lines[0] and fragment in lines[0], lines[0]
