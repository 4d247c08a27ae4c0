"""Semantically hostile but well-formed models through the whole pipeline.

Each case is a class of failure the mutation campaign (scripts/hostile_campaign.py)
found: a crash inside libonnx's shape inference, an allocation sized by the model
(a memory bomb, or an element count that overflows), or an error that did not name
the file; and, from its second pass, a model that breaks ONNX's own rules where isomer
did not look: no opset of ai.onnx, an initializer that contradicts the graph input it is
the default of, a value_info that lies about a type, nodes against their operator's
schema (attributes, arity, input types), opaque ones included, and nodes isomer's own
shape rule finds invalid where libonnx's inference does not look, which `optimize` used
to pass through unchecked. Every command must refuse such a model with one "isomer: error:"
line that names the file, and never crash or run out of memory.
"""
import os
import resource
import subprocess

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
COMMANDS = {"optimize": ["optimize", "{model}", "-o", "{out}", "--budget", "1"],
            "run-native": ["run", "--no-onnxruntime", "{model}"],
            "run": ["run", "{model}"]}


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def layernorm_axis_out_of_range():
    """libonnx's LayerNormalization inference indexes the input's dims with `axis` unchecked."""
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=100)]
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "s"), numpy_helper.from_array(np.zeros(4, np.float32), "b")]
    return _model(nodes, [_vi("x", [2, 3, 4])], [_vi("y", [2, 3, 4])], inits)


def short_shape_initializer():
    """A Reshape's shape initializer with fewer bytes than its dims: libonnx copies it unchecked."""
    shape = numpy_helper.from_array(np.array([3, 2], np.int64), "shape")
    shape.raw_data = shape.raw_data[:5]
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    return _model(nodes, [_vi("x", [2, 3])], [_vi("y", [3, 2])], [shape])


def short_constant_node():
    """The same through a Constant node's value tensor."""
    value = numpy_helper.from_array(np.array([3, 2], np.int64), "v")
    value.raw_data = value.raw_data[:3]
    nodes = [helper.make_node("Constant", [], ["shape"], value=value), helper.make_node("Reshape", ["x", "shape"], ["y"])]
    return _model(nodes, [_vi("x", [2, 3])], [_vi("y", [3, 2])])


def _constant_of_shape(shape_init, extra=()):
    nodes = list(extra) + [helper.make_node("ConstantOfShape", ["shape"], ["big"],
                                            value=numpy_helper.from_array(np.array([1.0], np.float32))),
                           helper.make_node("Relu", ["x"], ["y"])]
    return _model(nodes, [_vi("x", [2, 3])], [_vi("big", None), _vi("y", [2, 3])], shape_init)


def constant_of_shape_overflow():
    """ConstantOfShape of [2^31, 2^31]: 2^62 elements, 2^64 bytes (the size wraps around)."""
    return _constant_of_shape([numpy_helper.from_array(np.array([1 << 31, 1 << 31], np.int64), "shape")])


def constant_of_shape_too_big():
    """ConstantOfShape of [2^20, 2^20]: 4 TiB that fits in 64 bits but in no machine."""
    return _constant_of_shape([numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "shape")])


def cast_huge_float_to_shape():
    """A float 1e30 cast to int64 (saturated) as a shape."""
    cast = helper.make_node("Cast", ["f"], ["shape"], to=TensorProto.INT64)
    return _constant_of_shape([numpy_helper.from_array(np.array([1e30, 2.0], np.float32), "f")], [cast])


def huge_input_dims():
    """Inputs of 2^40 elements: refused when inputs are made for them, with the file named."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)]
    return _model(nodes, [_vi("x", [1, 1 << 20, 1 << 20])], [_vi("y", [])], opset=11)


def overflowing_input_dims():
    """Inputs whose element count does not fit in 64 bits."""
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    return _model(nodes, [_vi("x", [1 << 40, 1 << 40])], [_vi("y", [1 << 40, 1 << 40])])


def expand_overflow():
    """Expand to [2^40, 2^40]: a shape rule's output whose element count wraps around."""
    shape = numpy_helper.from_array(np.array([1 << 40, 1 << 40], np.int64), "shape")
    nodes = [helper.make_node("Expand", ["x", "shape"], ["y"])]
    return _model(nodes, [_vi("x", [1, 1])], [_vi("y", None)], [shape])


def negative_shape_after_import():
    """A shape that turns negative only once constants are folded: the error names the file."""
    cast = helper.make_node("Cast", ["f"], ["shape"], to=TensorProto.INT64)
    return _constant_of_shape([numpy_helper.from_array(np.array([-5.0, 2.0], np.float32), "f")], [cast])


def no_outputs():
    """A graph without outputs (ONNX Runtime refuses it; an "optimized" copy is empty)."""
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [])


def duplicate_opset_import():
    """Two versions of the default domain: which one the nodes mean is undefined."""
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    model.opset_import.add(domain="", version=1)
    return model


def output_dtype_lie():
    """An output declared int8 that the graph computes as float."""
    return _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3], TensorProto.INT8)])


def keepdims_not_a_flag():
    """keepdims=7: isomer read it as true, ONNX Runtime as false (it keeps dims only for 1)."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=7)]
    return _model(nodes, [_vi("x", [2, 3])], [_vi("y", None)], opset=11)


def no_opset_import():
    """No opset import at all (IR 8): ONNX requires ai.onnx's from IR 3; isomer read it as opset 1."""
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    del model.opset_import[:]
    return model


def default_domain_not_imported():
    """Only a vendor domain imported, but an ai.onnx node: which version would it be?"""
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    del model.opset_import[:]
    model.opset_import.add(domain="com.example", version=1)
    return model


def initializer_dtype_differs_from_input():
    """A graph input's default value (an initializer of the same name) of another dtype than declared."""
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    w = numpy_helper.from_array(np.ones((2, 3), np.int64), "w")
    return _model(nodes, [_vi("x", [2, 3]), _vi("w", [2, 3])], [_vi("y", [2, 3])], [w])


def initializer_shape_differs_from_input():
    """The same with the shape: declared [4, 3], the initializer [2, 3]."""
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    return _model(nodes, [_vi("x", [2, 3]), _vi("w", [4, 3])], [_vi("y", [2, 3])], [w])


def value_info_dtype_lie():
    """A value_info that declares int64 what Relu computes as float."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    model = _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    model.graph.value_info.append(_vi("r", [2, 3], TensorProto.INT64))
    return model


def _opaque(**attrs):
    """Hardmax, an operator isomer keeps opaque (it runs on ONNX Runtime, node by node)."""
    nodes = [helper.make_node("Hardmax", ["x"], ["h"], **attrs), helper.make_node("Relu", ["h"], ["y"])]
    return _model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 3])])


def opaque_unknown_attribute():
    """An opaque node with an attribute its operator does not have."""
    return _opaque(bogus=3)


def opaque_attribute_type():
    """An opaque node whose axis is a float."""
    return _opaque(axis=1.5)


def opaque_axis_out_of_range():
    """An opaque node whose axis is beyond its input's rank."""
    return _opaque(axis=100)


def opaque_missing_required_attribute():
    """LRN (opaque) without its required size."""
    nodes = [helper.make_node("LRN", ["x"], ["y"])]
    return _model(nodes, [_vi("x", [1, 2, 3, 3])], [_vi("y", [1, 2, 3, 3])])


def opaque_input_type():
    """Hardmax of an int64 tensor: outside its type constraint."""
    nodes = [helper.make_node("Hardmax", ["x"], ["y"])]
    return _model(nodes, [_vi("x", [2, 3], TensorProto.INT64)], [_vi("y", [2, 3], TensorProto.INT64)])


def too_many_outputs():
    """MaxPool with five outputs (it has at most two)."""
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i", "extra_a", "extra_b", "extra_c"], kernel_shape=[2, 2])]
    return _model(nodes, [_vi("x", [1, 1, 4, 4])], [_vi("y", None)])


def input_type_outside_constraint():
    """Conv of float16 data with float weights: T binds both (ONNX Runtime refuses it)."""
    w = numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"])]
    return _model(nodes, [_vi("x", ["n", 1, 4, 4], TensorProto.FLOAT16)], [_vi("y", None, TensorProto.FLOAT16)], [w])


def no_such_operator_in_ml_domain():
    """ReduceSum moved into ai.onnx.ml, which has no such operator (isomer kept it opaque)."""
    nodes = [helper.make_node("ReduceSum", ["x"], ["y"], domain="ai.onnx.ml")]
    model = _model(nodes, [_vi("x", [2, 3])], [_vi("y", None)])
    model.opset_import.add(domain="ai.onnx.ml", version=3)
    return model


def rnn_hidden_size_not_positive():
    """RNN with hidden_size -1: isomer's shape rule refused it, but libonnx's inference does
    not check it, so the node was kept opaque and `optimize` wrote it back."""
    w = numpy_helper.from_array(np.ones((1, 4, 2), np.float32), "w")
    r = numpy_helper.from_array(np.ones((1, 4, 4), np.float32), "r")
    nodes = [helper.make_node("RNN", ["x", "w", "r"], ["", "y"], hidden_size=-1)]
    return _model(nodes, [_vi("x", [3, 1, 2])], [_vi("y", None)], [w, r])


def space_to_depth_blocksize_not_dividing():
    """SpaceToDepth whose blocksize 4 does not divide the height 6 (the same path)."""
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=4)]
    return _model(nodes, [_vi("x", [1, 1, 6, 8])], [_vi("y", None)])


CASES = [no_opset_import, rnn_hidden_size_not_positive, space_to_depth_blocksize_not_dividing, no_such_operator_in_ml_domain, default_domain_not_imported, initializer_dtype_differs_from_input,
         initializer_shape_differs_from_input, value_info_dtype_lie, opaque_unknown_attribute, opaque_attribute_type,
         opaque_axis_out_of_range, opaque_missing_required_attribute, opaque_input_type, too_many_outputs,
         input_type_outside_constraint,
         keepdims_not_a_flag, no_outputs, duplicate_opset_import, output_dtype_lie, layernorm_axis_out_of_range, short_shape_initializer, short_constant_node, constant_of_shape_overflow,
         constant_of_shape_too_big, cast_huge_float_to_shape, huge_input_dims, overflowing_input_dims, expand_overflow,
         negative_shape_after_import]


# A valid model no machine can run, that `optimize` leaves unchanged: it may write it
# back (nothing runs it), or refuse it clearly.
MAY_PASS_UNCHANGED = {("constant_of_shape_too_big", "optimize")}


def _limit_memory():
    # 8 GiB of address space: a model that allocates what it asks for is killed here,
    # not by the machine's OOM killer.
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_hostile_model_is_refused_clearly(tmp_path, isomer_bin, make, command):
    path = tmp_path / f"{make.__name__}.onnx"
    path.write_bytes(make().SerializeToString())
    out = tmp_path / "out.onnx"
    args = [a.format(model=str(path), out=str(out)) for a in COMMANDS[command]]
    env = dict(os.environ)
    proc = subprocess.run([isomer_bin] + args, capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_memory, env=env)
    lines = [l for l in proc.stderr.splitlines() if l.strip() and not l.startswith("eqsat:")]
    if proc.returncode == 0 and (make.__name__, command) in MAY_PASS_UNCHANGED:
        assert out.exists() and "kept: original" in proc.stdout, proc.stdout
        return
    assert proc.returncode != 0, f"accepted a hostile model; stdout:\n{proc.stdout}"
    assert 0 < proc.returncode < 128, f"crashed (exit {proc.returncode}):\n{proc.stderr}"
    assert len(lines) == 1 and lines[0].startswith("isomer: error: "), proc.stderr
    assert path.name in lines[0], f"the message does not name the file: {lines[0]}"
    for vague in ("max_size", "bad_alloc", "length_error"):
        assert vague not in lines[0], lines[0]
    assert lines[0] != "isomer: error: out of memory"
    assert not out.exists()


@pytest.mark.parametrize("value", [np.nan, np.inf], ids=["nan", "inf"])
def test_nonfinite_weight_runs_with_a_warning(tmp_path, isomer_bin, value):
    """`run` computes with NaN/Inf weights as ONNX Runtime does (`optimize` refuses them),
    but says so once, naming the file and the initializer: the outputs it reaches are not
    numbers, and NaN meeting Relu or MaxPool becomes one on isomer's kernels."""
    w = np.ones((3, 2), np.float32)
    w[1, 0] = value
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    path = tmp_path / "nonfinite.onnx"
    path.write_bytes(_model(nodes, [_vi("x", [2, 3])], [_vi("y", [2, 2])],
                            [numpy_helper.from_array(w, "w")]).SerializeToString())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.savez(tmp_path / "in.npz", x=x)
    proc = subprocess.run([isomer_bin, "run", "--no-onnxruntime", str(path), "--inputs", str(tmp_path / "in.npz"),
                           "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("isomer: warning: "), proc.stderr
    assert path.name in lines[0] and "initializer 'w'" in lines[0] and "element 2" in lines[0], lines[0]
    got = np.load(tmp_path / "out.npz")["y"]
    want = x @ w
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.allclose(got[~np.isnan(want)], want[~np.isnan(want)])


def test_constant_node_with_an_omitted_optional_input_runs(isomer_bin, tmp_path):
    # The runtime's compile folds a node whose inputs are all constants; an omitted optional
    # input ("" for Clip's min) held no bytes and crashed it (hf_yolos from torch's exporter).
    ort = pytest.importorskip("onnxruntime")
    nodes = [helper.make_node("Clip", ["c", "", "mx"], ["k"], name="clip_const"), helper.make_node("Add", ["x", "k"], ["y"])]
    inits = [numpy_helper.from_array(np.array([-3, 0.5, 9], np.float32), "c"),
             numpy_helper.from_array(np.array(2, np.float32), "mx")]
    g = helper.make_graph(nodes, "clip", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "clip.onnx"
    onnx.save(m, str(path))
    x = np.array([1, 2, 3], np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = subprocess.run([isomer_bin, "run", str(path), "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"),
                        "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want)
