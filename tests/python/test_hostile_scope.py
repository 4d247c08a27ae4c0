"""Hostile models of the campaign's ninth family (scripts/hostile_mutators_scope.py): where a
model's names and attributes come from. Each class it found, rebuilt here as a small file.

- A body (If branch, Loop or Scan body, in the graph or in a function) that returns a value of
  the enclosing graph as it is:
  onnx.checker and ONNX Runtime refuse it; isomer ran it and `optimize` wrote it back. It is
  refused naming the node and the body; a body that returns its own input still runs.
- An attribute that refers to a function attribute (ref_attr_name) in the graph, outside any
  function body, was read as its unset value field (0); it is refused.
- Model-local function bodies: a node that reads a name neither an input of the function nor
  an earlier node defines (a function has no enclosing scope), an output defined twice, a
  function output nothing defines, a call of an overload no function defines (IR 10), a call
  that leaves a trailing output off (onnx's inference
  and ONNX Runtime refuse it; "" names an unused one), an attribute reference of another type than the call (its default, or
  the calling function's reference) gives, and a body operator whose version at the
  function's opset is not its version at the model's (Squeeze-11 in a model of opset 21)
  passed through `optimize` to fail in ONNX Runtime; they are refused. Functions that agree
  (same operator versions at another opset, references of the right type, nested calls)
  still run, matching ONNX Runtime.
- A tensor inside a function body whose data is in an external file was written back as a
  reference relative to the input's folder (the written model, elsewhere, failed in ONNX
  Runtime), its path unchecked; it is read in, and a missing or escaping file is refused.
- A sparse initializer of an If branch was taken for an undefined name (a valid model refused),
  and a sparse tensor's external data (in a body, or a Constant's sparse_value) was written
  back relative to the input's folder.
- An If branch whose initializer shadows an outer value the other branch reads did not compile
  on the runtime (each branch was handed every outer value of the node, its own x too).
- A Loop that runs no iteration (a trip count of 0, negative or INT64_MIN, or a condition that
  starts false) gave its scan outputs as empty vectors; ONNX Runtime gives 0 elements of the
  shape ONNX's inference knows for one, and so does isomer where its import knows it too.
- A node name holding a newline broke the CLI's one-line error in two; one holding another
  control character (written \\xNN) was named twice. Every failure is one line, naming it once.
"""
import os
import sys

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import AttributeProto, TensorProto, helper, numpy_helper  # noqa: E402
from hostile_util import isomer_cli, one_error, ort_outputs  # noqa: E402

FN = "local.fn"


def _vi(name, dims=None, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, dims)


def _model(nodes, outputs=None, inits=(), functions=(), opset=21):
    g = helper.make_graph(nodes, "g", [_vi("x", [2, 3])], outputs or [_vi("y")], list(inits))
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(FN, 1)] if functions else [])
    m = helper.make_model(g, opset_imports=imports, functions=list(functions))
    m.ir_version = 10
    return m


def _fn(name, inputs, outputs, nodes, attributes=(), opset=21):
    return helper.make_function(FN, name, inputs, outputs, nodes,
                                [helper.make_opsetid("", opset), helper.make_opsetid(FN, 1)], attributes=list(attributes))


def _ref(name, ref, kind=AttributeProto.FLOAT):
    a = AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, kind
    return a


def _refused(isomer_bin, tmp_path, m, *wants):
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    out = tmp_path / "out.onnx"
    for args in (["optimize", path, "-o", out, "--budget", "1"], ["run", path]):
        one_error(isomer_cli(isomer_bin, *args), "model.onnx", *wants)
        assert not out.exists()


def _runs_like_ort(isomer_bin, tmp_path, m):
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    x = np.random.default_rng(5).standard_normal([2, 3]).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], ort_outputs(path, {"x": x}), rtol=1e-5, atol=1e-6)
    p = isomer_cli(isomer_bin, "optimize", path, "-o", tmp_path / "opt.onnx", "--budget", "1")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(ort_outputs(tmp_path / "opt.onnx", {"x": x}), ort_outputs(path, {"x": x}), rtol=1e-5,
                               atol=1e-6)


# --- bodies that return an outer value --------------------------------------------------------

def _cond_nodes():
    return [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "z"], ["c"])]


def _zero():
    return numpy_helper.from_array(np.array(0, np.float32), "z")


@pytest.mark.parametrize("body", ["if", "loop", "scan"])
def test_body_returning_an_outer_value_is_refused(isomer_bin, tmp_path, body):
    if body == "if":
        then = helper.make_graph([], "then", [], [_vi("x", [2, 3])])
        other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [], [_vi("n")])
        nodes = _cond_nodes() + [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
        inits = [_zero()]
    elif body == "loop":
        # The carried value v is returned; the scan output is the outer x itself.
        g = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond2"]), helper.make_node("Neg", ["v"], ["v2"])],
                              "body", [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v")],
                              [_vi("cond2", [], TensorProto.BOOL), _vi("v2"), _vi("x", [2, 3])])
        nodes = [helper.make_node("Loop", ["n", "t", "x"], ["y", "ys"], body=g)]
        inits = [numpy_helper.from_array(np.array(2, np.int64), "n"), numpy_helper.from_array(np.array(True), "t")]
    else:
        g = helper.make_graph([helper.make_node("Add", ["st", "row"], ["st2"])], "body", [_vi("st", [3]), _vi("row", [3])],
                              [_vi("st2", [3]), _vi("x", [2, 3])])
        nodes = [helper.make_node("Scan", ["s0", "x"], ["y", "ys"], body=g, num_scan_inputs=1)]
        inits = [numpy_helper.from_array(np.zeros(3, np.float32), "s0")]
    _refused(isomer_bin, tmp_path, _model(nodes, inits=inits), "output 'x' is a value of the enclosing graph")


def test_loop_body_returning_its_own_input_runs(isomer_bin, tmp_path):
    g = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond2"])], "body",
                          [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v", [2, 3])],
                          [_vi("cond2", [], TensorProto.BOOL), _vi("v", [2, 3])])
    nodes = [helper.make_node("Loop", ["n", "t", "x"], ["l"], body=g), helper.make_node("Relu", ["l"], ["y"])]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(True), "t")]
    _runs_like_ort(isomer_bin, tmp_path, _model(nodes, inits=inits))


# --- attribute references outside functions -----------------------------------------------------

@pytest.mark.parametrize("where", ["graph", "branch"])
def test_attribute_reference_outside_a_function_is_refused(isomer_bin, tmp_path, where):
    leaky = helper.make_node("LeakyRelu", ["x"], ["y" if where == "graph" else "t"], name="leaky")
    leaky.attribute.append(_ref("alpha", "slope"))
    if where == "graph":
        nodes, inits = [leaky], []
    else:
        then = helper.make_graph([leaky], "then", [], [_vi("t")])
        other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [], [_vi("n")])
        nodes, inits = _cond_nodes() + [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], \
            [_zero()]
    _refused(isomer_bin, tmp_path, _model(nodes, inits=inits), "node 'leaky'", "'slope'", "not in a function body")


# --- function bodies ------------------------------------------------------------------------------

def _call(*outputs, **attrs):
    return helper.make_node("F", ["x"], list(outputs) or ["y"], domain=FN, **attrs)


@pytest.mark.parametrize("case", ["outer_name", "later_name", "defined_twice", "output_undefined"])
def test_function_body_names_are_its_own(isomer_bin, tmp_path, case):
    relu = helper.make_node("Relu", ["a"], ["r"])
    body, outputs, want = {
        "outer_name": ([helper.make_node("Add", ["a", "x"], ["b"])], ["b"], "reads 'x'"),
        "later_name": ([helper.make_node("Neg", ["r"], ["b"]), relu], ["b"], "reads 'r'"),
        "defined_twice": ([relu, helper.make_node("Neg", ["a"], ["r"]), helper.make_node("Abs", ["r"], ["b"])], ["b"],
                          "output 'r' is already defined"),
        "output_undefined": ([relu], ["r", "c"], "returns 'c'"),
    }[case]
    call_outputs = ["y", "y2"] if len(outputs) == 2 else ["y"]
    nodes = [_call(*call_outputs)] + ([helper.make_node("Identity", ["y2"], ["y3"])] if len(outputs) == 2 else [])
    graph_outputs = [_vi("y")] + ([_vi("y3")] if len(outputs) == 2 else [])
    m = _model(nodes, graph_outputs, functions=[_fn("F", ["a"], outputs, body)])
    _refused(isomer_bin, tmp_path, m, "function 'local.fn:F'", want)


@pytest.mark.parametrize("case", ["direct", "nested"])
def test_attribute_reference_of_another_type_is_refused(isomer_bin, tmp_path, case):
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(_ref("alpha", "slope"))
    if case == "direct":
        fns, call = [_fn("F", ["a"], ["b"], [leaky], attributes=["slope"])], _call(slope=3)
    else:
        mid = helper.make_node("G", ["a"], ["b"], domain=FN)
        mid.attribute.append(_ref("slope", "s", AttributeProto.INT))
        fns = [_fn("F", ["a"], ["b"], [mid], attributes=["s"]), _fn("G", ["a"], ["b"], [leaky], attributes=["slope"])]
        call = _call(s=3)
    _refused(isomer_bin, tmp_path, _model([call], functions=fns), "attribute 'slope' of type INT",
             "of type FLOAT")


def test_nested_attribute_reference_of_the_right_type_runs(isomer_bin, tmp_path):
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(_ref("alpha", "slope"))
    mid = helper.make_node("G", ["a"], ["b"], domain=FN)
    mid.attribute.append(_ref("slope", "s"))
    fns = [_fn("F", ["a"], ["b"], [mid], attributes=["s"]), _fn("G", ["a"], ["b"], [leaky], attributes=["slope"])]
    _runs_like_ort(isomer_bin, tmp_path, _model([_call(s=0.125)], functions=fns))


def test_function_opset_where_its_operator_differs_is_refused(isomer_bin, tmp_path):
    body = [helper.make_node("Unsqueeze", ["a"], ["u"], axes=[0]), helper.make_node("Squeeze", ["u"], ["b"], axes=[0])]
    m = _model([_call()], functions=[_fn("F", ["a"], ["b"], body, opset=11)])
    _refused(isomer_bin, tmp_path, m, "node (Unsqueeze) -> 'u'", "opset 11", "opset 21")


def test_function_opset_where_its_operators_agree_runs(isomer_bin, tmp_path):
    # Neg and Abs are version 13 at opsets 13 and 21 alike.
    body = [helper.make_node("Neg", ["a"], ["n"]), helper.make_node("Abs", ["n"], ["b"])]
    _runs_like_ort(isomer_bin, tmp_path, _model([_call()], functions=[_fn("F", ["a"], ["b"], body, opset=13)]))


@pytest.mark.parametrize("named", [False, True])
def test_function_call_names_every_output(isomer_bin, tmp_path, named):
    body = [helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Abs", ["a"], ["c"])]
    m = _model([_call("y", "") if named else _call("y")], functions=[_fn("F", ["a"], ["b", "c"], body)])
    if named:
        _runs_like_ort(isomer_bin, tmp_path, m)
    else:
        _refused(isomer_bin, tmp_path, m, "with 1 outputs; it declares 2")


# --- names that hold control characters -------------------------------------------------------

@pytest.mark.parametrize("name,shown", [("a\nb", "a\\x0ab"), ("a\rb", "a\\x0db"), ("a\x1b[2Jb", "a\\x1b[2Jb")])
def test_a_name_with_control_characters_is_named_once_on_one_line(isomer_bin, tmp_path, name, shown):
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=5, name=name)])
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    for args in (["optimize", path, "-o", tmp_path / "out.onnx"], ["run", path]):
        line = one_error(isomer_cli(isomer_bin, *args), "model.onnx", f"node '{shown}' (Softmax)", "axis 5")
        assert line.count(shown) == 1, line


# --- loops that run no iteration ----------------------------------------------------------------

@pytest.mark.parametrize("trips,cond", [(0, True), (-1, True), (-(1 << 63), True), (3, False)])
def test_scan_output_of_a_loop_that_never_runs_keeps_its_element_shape(isomer_bin, tmp_path, trips, cond):
    """ONNX Runtime gives 0 elements of the body's [2, 3] (ONNX's inference knows that shape),
    not an empty vector; isomer's runtime gave [0] for every loop of no iteration."""
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Add", ["v", "x"], ["v2"]),
                              helper.make_node("Mul", ["v", "x"], ["sc"])], "body",
                             [_vi("i", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _vi("v", [2, 3])],
                             [_vi("c2", [], TensorProto.BOOL), _vi("v2", [2, 3]), _vi("sc", [2, 3])])
    inits = [numpy_helper.from_array(np.zeros((2, 3), np.float32), "v0"),
             numpy_helper.from_array(np.array(trips, np.int64), "trip"), numpy_helper.from_array(np.array(cond), "cond")]
    m = _model([helper.make_node("Loop", ["trip", "cond", "v0"], ["y", "scan"], body=body)], [_vi("y"), _vi("scan")],
               inits)
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    feeds = {"x": np.ones((2, 3), np.float32)}
    np.savez(tmp_path / "in.npz", **feeds)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    assert want[1].shape == (0, 2, 3)
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
                   "--no-onnxruntime")
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "out.npz")
    assert got["scan"].shape == (0, 2, 3)
    np.testing.assert_array_equal(got["y"], want[0])


# --- tensors inside functions in external data ----------------------------------------------------

def _external(name, array, location, folder=None):
    """`array` as a tensor whose data is at `location` (written there, in `folder`, if given)."""
    if folder is not None:
        (folder / location).write_bytes(array.tobytes())
    t = numpy_helper.from_array(array, name)
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(array.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def _function_with_external_constant(location):
    t = _external("cw", np.arange(6, dtype=np.float32).reshape(2, 3), location)
    const = helper.make_node("Constant", [], ["c"], name="weights")
    const.attribute.append(helper.make_attribute("value", t))
    return _model([_call()], functions=[_fn("F", ["a"], ["b"], [const, helper.make_node("Add", ["a", "c"], ["b"])])])


def test_function_tensor_in_external_data_travels_with_the_written_model(isomer_bin, tmp_path):
    src, dst = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    dst.mkdir()
    (src / "w.bin").write_bytes(np.arange(6, dtype=np.float32).tobytes())
    onnx.save(_function_with_external_constant("w.bin"), str(src / "model.onnx"))
    p = isomer_cli(isomer_bin, "optimize", src / "model.onnx", "-o", dst / "opt.onnx", "--budget", "1")
    assert p.returncode == 0, p.stderr
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(ort_outputs(dst / "opt.onnx", {"x": x}), ort_outputs(src / "model.onnx", {"x": x}))


@pytest.mark.parametrize("location", ["missing.bin", "../" * 8 + "etc/passwd"])
def test_function_tensor_in_bad_external_data_is_refused(isomer_bin, tmp_path, location):
    _refused(isomer_bin, tmp_path, _function_with_external_constant(location), "function 'local.fn:F'",
             "node 'weights' (Constant)")


# --- sparse tensors inside bodies and attributes -------------------------------------------------

@pytest.mark.parametrize("where", ["branch_initializer", "constant_attribute"])
def test_sparse_tensor_in_a_body_or_attribute_runs_and_travels(isomer_bin, tmp_path, where):
    """A sparse initializer of an If branch was taken for an undefined name (the model was
    refused; ONNX Runtime runs it), and a sparse tensor's external data, in a branch or in a
    Constant's sparse_value, was written back relative to the input's folder."""
    src, dst = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    dst.mkdir()
    values = _external("sw", np.array([5.0, 7.0], np.float32), "v.bin", src)
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([1, 4], np.int64), "i"), [2, 3])
    if where == "branch_initializer":
        then = helper.make_graph([helper.make_node("Add", ["x", "sw"], ["tb"])], "then", [], [_vi("tb")])
        then.sparse_initializer.append(sparse)
    else:
        then = helper.make_graph([helper.make_node("Constant", [], ["sw"], sparse_value=sparse),
                                  helper.make_node("Add", ["x", "sw"], ["tb"])], "then", [], [_vi("tb")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["eb"])], "else", [], [_vi("eb")])
    m = _model(_cond_nodes() + [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
               inits=[_zero()])
    onnx.save(m, str(src / "model.onnx"))
    x = np.ones((2, 3), np.float32)
    want = ort_outputs(src / "model.onnx", {"x": x})
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer_cli(isomer_bin, "run", src / "model.onnx", "--inputs", tmp_path / "in.npz", "--outputs",
                   tmp_path / "out.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], want)
    p = isomer_cli(isomer_bin, "optimize", src / "model.onnx", "-o", dst / "opt.onnx", "--budget", "1")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(ort_outputs(dst / "opt.onnx", {"x": x}), want)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_branch_initializer_shadowing_an_outer_value_the_other_branch_reads(isomer_bin, tmp_path, sign):
    """onnx.checker accepts it; the then-branch's own x stands (ONNX Runtime's optimized session
    gives 20, its unoptimized one reads the outer x). The runtime handed both branches the outer
    x too, and the then-branch (which defined x itself) did not compile."""
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["tb"])], "then", [], [_vi("tb")],
                             [numpy_helper.from_array(np.full((2, 3), 10, np.float32), "x")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["eb"])], "else", [], [_vi("eb")])
    m = _model(_cond_nodes() + [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
               inits=[_zero()])
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    x = np.full((2, 3), sign, np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
                   "--no-onnxruntime")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], np.full((2, 3), 20.0) if sign > 0 else -x)


@pytest.mark.parametrize("asked", ["neg", "", "other"])
def test_call_of_an_overload_the_model_does_not_define_is_refused(isomer_bin, tmp_path, asked):
    if not hasattr(onnx.FunctionProto(), "overload"):
        pytest.skip("this onnx predates IR 10's overloads")
    fns = []
    for overload, op in (("relu", "Relu"), ("neg", "Neg")):
        f = _fn("F", ["a"], ["b"], [helper.make_node(op, ["a"], ["b"])])
        f.overload = overload
        fns.append(f)
    call = _call()
    call.overload = asked
    m = _model([call], functions=fns)
    if asked == "neg":
        _runs_like_ort(isomer_bin, tmp_path, m)
    else:
        _refused(isomer_bin, tmp_path, m, f"with overload '{asked}'", "only with overload(s) 'neg', 'relu'")


def test_body_inside_a_function_returning_an_outer_value_is_refused(isomer_bin, tmp_path):
    then = helper.make_graph([], "then", [], [_vi("a", [2, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["a"], ["n"])], "else", [], [_vi("n")])
    body = [helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
            helper.make_node("Constant", [], ["z"], value=helper.make_tensor("z", TensorProto.FLOAT, [], [0.0])),
            helper.make_node("Greater", ["s", "z"], ["c"]),
            helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other)]
    m = _model([_call()], functions=[_fn("F", ["a"], ["b"], body)])
    _refused(isomer_bin, tmp_path, m, "function 'local.fn:F'", "then_branch: output 'a' is not defined")


def test_attribute_default_of_another_type_than_its_reference_is_refused(isomer_bin, tmp_path):
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(_ref("alpha", "slope"))
    f = _fn("F", ["a"], ["b"], [leaky])
    f.attribute_proto.append(helper.make_attribute("slope", 3))
    _refused(isomer_bin, tmp_path, _model([_call()], functions=[f]), "attribute 'slope' a default of type INT",
             "of type FLOAT")


def test_python_module_error_is_the_cli_line(tmp_path):
    isomer = pytest.importorskip("isomer")
    m = _model([helper.make_node("Softmax", ["x"], ["y"], axis=5, name="a\nb")])
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    with pytest.raises(isomer.Error) as e:
        isomer.optimize(str(path), budget=1.0)
    assert "\n" not in str(e.value) and "node 'a\\x0ab' (Softmax)" in str(e.value), str(e.value)
