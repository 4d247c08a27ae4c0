"""Calls of model-local functions (ModelProto.functions) are inlined at import, as ONNX Runtime
inlines them: `run --no-onnxruntime` runs them natively (before, each call was an opaque node
that ONNX Runtime had to run), and `optimize` writes the inlined graph, valid ONNX without the
functions no longer called. Attribute references take the call's value or the function's
default, or are absent; calls nest, sit in If branches, and leave outputs unused."""
import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
from onnx import AttributeProto, TensorProto, helper  # noqa: E402
from hostile_util import isomer_cli, one_error, ort_outputs  # noqa: E402

FN = "local.fn"


def _vi(name, dims=None):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _ref(name, ref, kind=AttributeProto.FLOAT):
    a = AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, kind
    return a


def _fn(name, inputs, outputs, nodes, attributes=(), defaults=()):
    f = helper.make_function(FN, name, inputs, outputs, nodes,
                             [helper.make_opsetid("", 21), helper.make_opsetid(FN, 1)], attributes=list(attributes))
    f.attribute_proto.extend(defaults)
    return f


def _model(nodes, functions, outputs=("y",)):
    g = helper.make_graph(nodes, "g", [_vi("x", [2, 4])], [_vi(o) for o in outputs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(FN, 1)],
                          functions=list(functions))
    m.ir_version = 10
    return m


def _layer_norm():
    """LayerNorm over the last axis, its epsilon an attribute (default 1e-5)."""
    eps = helper.make_node("Constant", [], ["eps"])
    eps.attribute.append(_ref("value_float", "epsilon"))
    body = [helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [-1])),
            helper.make_node("ReduceMean", ["X", "axes"], ["mean"]), helper.make_node("Sub", ["X", "mean"], ["d"]),
            helper.make_node("Mul", ["d", "d"], ["sq"]), helper.make_node("ReduceMean", ["sq", "axes"], ["var"]),
            eps, helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
            helper.make_node("Div", ["d", "sd"], ["Y"])]
    return _fn("LayerNorm", ["X"], ["Y"], body, defaults=[helper.make_attribute("epsilon", 1e-5)])


def _run_native(isomer_bin, tmp_path, m, want=None):
    """isomer's outputs with ONNX Runtime off, checked against ONNX Runtime's (or `want(x)` for
    a model ONNX Runtime refuses), and its steps."""
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    x = np.random.default_rng(3).standard_normal([2, 4]).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
                   "--no-onnxruntime", "--print-steps", "--threads", "1")
    assert p.returncode == 0, p.stderr
    assert "onnxruntime" not in p.stdout.lower().split("latency")[0], p.stdout
    expected = want(x) if want else ort_outputs(path, {"x": x})
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], expected, rtol=1e-5, atol=1e-5)
    return p.stdout


def _optimized(isomer_bin, tmp_path, m):
    return _optimize(isomer_bin, tmp_path, m)[0]


def _optimize(isomer_bin, tmp_path, m):
    """`optimize`'s output, which passes onnx.checker and computes what the input does on ONNX
    Runtime, and its report."""
    path, out = tmp_path / "model.onnx", tmp_path / "opt.onnx"
    onnx.save(m, str(path))
    p = isomer_cli(isomer_bin, "optimize", path, "-o", out, "--budget", "1")
    assert p.returncode == 0, p.stderr
    written = onnx.load(str(out))
    onnx.checker.check_model(written, full_check=True)
    x = np.random.default_rng(4).standard_normal([2, 4]).astype(np.float32)
    np.testing.assert_allclose(ort_outputs(out, {"x": x}), ort_outputs(path, {"x": x}), rtol=1e-5, atol=1e-5)
    return written, p.stdout


def _layer_norm_twice():
    calls = [helper.make_node("LayerNorm", ["x"], ["a"], domain=FN, name="ln1", epsilon=1e-5),
             helper.make_node("Mul", ["a", "a"], ["a2"]),
             helper.make_node("LayerNorm", ["a2"], ["y"], domain=FN, name="ln2", epsilon=0.5)]
    return _model(calls, [_layer_norm()])


def test_layer_norm_function_called_twice_runs_natively(isomer_bin, tmp_path):
    _run_native(isomer_bin, tmp_path, _layer_norm_twice())


def test_optimize_writes_the_inlined_graph_without_functions(isomer_bin, tmp_path):
    written, report = _optimize(isomer_bin, tmp_path, _layer_norm_twice())
    assert "(2 call(s) of model-local functions inlined)" in report, report
    assert len(written.functions) == 0
    assert all(n.domain != FN for n in written.graph.node)


def test_nested_calls_pass_attributes_down(isomer_bin, tmp_path):
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(_ref("alpha", "slope"))
    g1 = helper.make_node("G", ["a"], ["t"], domain=FN)
    g1.attribute.append(_ref("slope", "s"))
    g2 = helper.make_node("G", ["t"], ["n"], domain=FN, slope=3.0)
    fns = [_fn("F", ["a"], ["b"], [g1, g2, helper.make_node("Neg", ["n"], ["b"])], attributes=["s"]),
           _fn("G", ["a"], ["b"], [leaky], attributes=["slope"])]
    m = _model([helper.make_node("F", ["x"], ["y"], domain=FN, s=0.25)], fns)
    _run_native(isomer_bin, tmp_path, m)
    _optimized(isomer_bin, tmp_path, m)


def test_call_inside_an_if_branch(isomer_bin, tmp_path):
    then = helper.make_graph([helper.make_node("LayerNorm", ["x"], ["tb"], domain=FN, epsilon=0.1)], "then", [],
                             [_vi("tb", [2, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["eb"])], "else", [], [_vi("eb", [2, 4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Constant", [], ["z"], value=helper.make_tensor("z", TensorProto.FLOAT, [], [-100.0])),
             helper.make_node("Greater", ["s", "z"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    m = _model(nodes, [_layer_norm()])
    _run_native(isomer_bin, tmp_path, m)
    assert len(_optimized(isomer_bin, tmp_path, m).functions) == 0


@pytest.mark.parametrize("default", [True, False])
def test_attribute_left_to_the_default_or_absent(isomer_bin, tmp_path, default):
    """Without the call's value, a reference takes the function's default; with no default
    either, the attribute is absent (LeakyRelu's own default, 0.01, stands)."""
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(_ref("alpha", "slope"))
    f = _fn("F", ["a"], ["b"], [leaky], defaults=[helper.make_attribute("slope", 0.5)] if default else [],
            attributes=[] if default else ["slope"])
    m = _model([helper.make_node("F", ["x"], ["y"], domain=FN)], [f])
    _run_native(isomer_bin, tmp_path, m)
    written = _optimized(isomer_bin, tmp_path, m)
    (alpha,) = [a.f for n in written.graph.node if n.op_type == "LeakyRelu" for a in n.attribute] or [0.01]
    assert alpha == pytest.approx(0.5 if default else 0.01)


def test_unused_output(isomer_bin, tmp_path):
    body = [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Abs", ["a"], ["c"])]
    m = _model([helper.make_node("F", ["x"], ["y", ""], domain=FN)], [_fn("F", ["a"], ["r", "c"], body)])
    _run_native(isomer_bin, tmp_path, m)
    _optimized(isomer_bin, tmp_path, m)


def test_input_returned_and_an_output_returned_twice(isomer_bin, tmp_path):
    """Returned as they are, they become copies (ONNX Runtime refuses such a function:
    "!(it.GetName().empty())"; the inlined model it runs)."""
    f = _fn("F", ["a"], ["r", "a", "r"], [helper.make_node("Relu", ["a"], ["r"])])
    nodes = [helper.make_node("F", ["x"], ["r1", "x1", "r2"], domain=FN), helper.make_node("Add", ["r1", "x1"], ["s"]),
             helper.make_node("Add", ["s", "r2"], ["y"])]
    _run_native(isomer_bin, tmp_path, _model(nodes, [f]), want=lambda x: 2 * np.maximum(x, 0) + x)


def test_body_names_do_not_clash_with_the_graph(isomer_bin, tmp_path):
    """The body's values are named as the graph's are ("d", "eps", "axes"); each inlined copy is
    renamed apart."""
    m = _layer_norm_twice()
    m.graph.node.insert(0, helper.make_node("Relu", ["x"], ["d"], name="LayerNorm"))
    m.graph.node[-1].input[0] = "d"
    _run_native(isomer_bin, tmp_path, m)
    _optimized(isomer_bin, tmp_path, m)


def test_long_chain_of_functions_is_inlined_without_recursion(isomer_bin, tmp_path):
    """(ONNX Runtime refuses calls nested over 100 deep.)"""
    n = 2000
    fns = [_fn(f"F{i}", ["a"], ["b"], [helper.make_node(f"F{i + 1}", ["a"], ["b"], domain=FN)]) for i in range(n)]
    fns.append(_fn(f"F{n}", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])]))
    m = _model([helper.make_node("F0", ["x"], ["y"], domain=FN)], fns)
    _run_native(isomer_bin, tmp_path, m, want=np.negative)
    p = isomer_cli(isomer_bin, "optimize", tmp_path / "model.onnx", "-o", tmp_path / "opt.onnx", "--budget", "1")
    assert p.returncode == 0, p.stderr
    written = onnx.load(str(tmp_path / "opt.onnx"))
    onnx.checker.check_model(written, full_check=True)
    # Names say where they come from, but do not grow with the depth of the chain.
    assert max(len(n.name) for n in written.graph.node) < 300
    x = np.ones([2, 4], np.float32)
    np.testing.assert_array_equal(ort_outputs(tmp_path / "opt.onnx", {"x": x}), -x)


def test_optional_inputs_left_out_stay_absent(isomer_bin, tmp_path):
    """A call that leaves an input out ("" or past its last) leaves the body's reads of it absent."""
    f = _fn("F", ["a", "lo", "hi"], ["b"], [helper.make_node("Clip", ["a", "lo", "hi"], ["b"])])
    nodes = [helper.make_node("Constant", [], ["m"], value=helper.make_tensor("m", TensorProto.FLOAT, [], [0.5])),
             helper.make_node("F", ["x", "", "m"], ["c"], domain=FN), helper.make_node("F", ["c"], ["y"], domain=FN)]
    m = _model(nodes, [f])
    _run_native(isomer_bin, tmp_path, m)
    _optimized(isomer_bin, tmp_path, m)


def test_recursion_is_refused(isomer_bin, tmp_path):
    fns = [_fn("F", ["a"], ["b"], [helper.make_node("G", ["a"], ["b"], domain=FN)]),
           _fn("G", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain=FN)])]
    path = tmp_path / "model.onnx"
    onnx.save(_model([helper.make_node("F", ["x"], ["y"], domain=FN)], fns), str(path))
    one_error(isomer_cli(isomer_bin, "run", path), "model.onnx", "calls itself")


def test_python_module_optimizes_inside_functions():
    isomer = pytest.importorskip("isomer")
    model = _layer_norm_twice()
    opt, report = isomer.optimize(model, guard=False)  # rewrites, not timings
    onnx.checker.check_model(opt, full_check=True)
    assert report.check == "passed"
    assert len(opt.functions) == 0 and all(n.domain != FN for n in opt.graph.node)
    assert (report.inlined_calls, report.nodes_before) == (2, 19)  # two LayerNorm bodies of 9 nodes and the Mul
    x = np.random.default_rng(2).standard_normal([2, 4]).astype(np.float32)
    np.testing.assert_allclose(ort_run(opt, x), ort_run(model, x), rtol=1e-5, atol=1e-5)


def ort_run(model, x):
    import onnxruntime as ort
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_torch_export_of_modules_as_functions_runs_natively(isomer_bin, tmp_path):
    torch = pytest.importorskip("torch")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.fc, self.act = torch.nn.LayerNorm(8), torch.nn.Linear(8, 8), torch.nn.GELU()

        def forward(self, x):
            return self.act(self.fc(self.ln(x))) + x

    module = torch.nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 4, 8)
    path = tmp_path / "model.onnx"
    try:
        torch.onnx.export(module, (x,), str(path), opset_version=17, export_modules_as_functions=True,
                          input_names=["x"])
    except TypeError:
        pytest.skip("this torch has no export_modules_as_functions")
    assert onnx.load(str(path)).functions
    np.savez(tmp_path / "in.npz", x=x.numpy())
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz",
                   "--no-onnxruntime", "--threads", "1")
    assert p.returncode == 0, p.stderr
    (got,) = np.load(tmp_path / "out.npz").values()
    np.testing.assert_allclose(got, module(x).detach().numpy(), rtol=1e-4, atol=1e-5)
