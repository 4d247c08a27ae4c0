"""Hostile inputs of the campaign's eleventh family (scripts/hostile_mutators_storage.py): what a
model says about how its values are stored, against what it stores. Each class found, rebuilt
small with onnx.helper.

- A tensor of element type 0 (UNDEFINED) as an initializer, a Constant's value or an If
  branch's initializer was taken for a type isomer keeps as written (like float8): `optimize`
  wrote it back, a model onnx.checker and ONNX Runtime refuse. It is refused naming the tensor.
- value_info naming a graph input or output with another element type than the input's or
  output's own declaration: ONNX's value_info is for the other values, and onnx.checker and
  ONNX Runtime ignore such an entry; isomer refused the model.
"""
import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hostile_util import isomer_cli, one_error, ort_outputs  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, t=F, dims=(4,)):
    return helper.make_tensor_value_info(name, t, list(dims))


def _save(tmp_path, name, graph, functions=(), opsets=(("", 18),)):
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets],
                          functions=list(functions))
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(m.SerializeToString())  # onnx.save would check the tensors first
    return path


def _undefined(name):
    t = numpy_helper.from_array(np.arange(4, dtype=np.float32), name)
    t.data_type = TensorProto.UNDEFINED
    return t


def _undefined_model(tmp_path, where):
    c = _undefined("c")
    x, y = _vi("x"), _vi("y")
    add = helper.make_node("Add", ["x", "c"], ["y"], name="add")
    if where == "initializer":
        return _save(tmp_path, where, helper.make_graph([add], "g", [x], [y], initializer=[c]))
    if where == "constant":
        k = helper.make_node("Constant", [], ["c"], value=c, name="k")
        return _save(tmp_path, where, helper.make_graph([k, add], "g", [x], [y]))
    if where == "if_branch":
        then_b = helper.make_graph([helper.make_node("Add", ["x", "c"], ["t"])], "then", [], [_vi("t")], initializer=[c])
        else_b = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e")])
        node = helper.make_node("If", ["cond"], ["y"], then_branch=then_b, else_branch=else_b, name="if")
        return _save(tmp_path, where, helper.make_graph([node], "g", [x, _vi("cond", TensorProto.BOOL, ())], [y]))
    body = [helper.make_node("Constant", [], ["c"], value=c), helper.make_node("Add", ["a", "c"], ["b"])]
    f = helper.make_function("local", "AddC", ["a"], ["b"], body, [helper.make_opsetid("", 18)])
    call = helper.make_node("AddC", ["x"], ["y"], domain="local", name="call")
    return _save(tmp_path, where, helper.make_graph([call], "g", [x], [y]), [f], (("", 18), ("local", 1)))


@pytest.mark.parametrize("where", ["initializer", "constant", "if_branch", "function"])
@pytest.mark.parametrize("command", ["optimize", "run"])
def test_tensor_of_undefined_element_type_is_refused(isomer_bin, tmp_path, where, command):
    path = _undefined_model(tmp_path, where)
    args = ["-o", tmp_path / "out.onnx", "--budget", "1"] if command == "optimize" else ["--no-onnxruntime"]
    p = isomer_cli(isomer_bin, command, path, *args)
    one_error(p, path.name, "tensor 'c' has no element type (data_type 0, UNDEFINED)")
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("name,declared", [("x", TensorProto.INT32), ("y", TensorProto.DOUBLE)])
def test_value_info_naming_a_graph_input_or_output_is_ignored(isomer_bin, tmp_path, name, declared):
    w = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    nodes = [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    g = helper.make_graph(nodes, "g", [_vi("x")], [_vi("y")], initializer=[w], value_info=[_vi(name, declared)])
    path = _save(tmp_path, "vi", g)
    x = np.array([-3, 1, -2, 5], np.float32)
    want = ort_outputs(path, {"x": x})
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz",
                   "--no-onnxruntime")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], want)
    p = isomer_cli(isomer_bin, "optimize", path, "-o", tmp_path / "out.onnx", "--budget", "1")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(ort_outputs(tmp_path / "out.onnx", {"x": x}), want)
