"""Hostile models of the campaign's fourth pass (scripts/hostile_mutators_proto.py): each
class it found, rebuilt here as a small file.

- A node whose ONNX shape inference fails (a MatMul of mismatched dims, a Reshape to
  another element count) read by a Shape node crashed libonnx's data propagation; the
  model is now refused with the node and the reason.
- Model-local functions: one that calls itself (directly or through another), one
  defined twice, a call with more inputs than the function declares or without an input
  its body requires, a call of a domain the model does not import, a body node of no
  operator or of a domain the function does not import, are refused (they crashed isomer,
  or passed through `optimize` to fail in ONNX Runtime); a valid function still runs,
  matching ONNX Runtime, an attribute reference left without a value included.
- Empty tensors (a dim of 0) through MatMul, Gemm, Conv and the rest run and match ONNX
  Runtime (Conv and MatMul of an empty weight divided by zero).
- A model of IR version 1 or 2 that imports opsets is refused (ONNX Runtime runs it, and
  computes other outputs than at the model's true IR version).
- Legal encodings ONNX's own writer never produces (repeated fields packed, varints of 10
  bytes) read as the plain ones; damaged bytes are refused with one line.
"""
import os
import subprocess
import sys

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import hostile_mutators_proto as proto  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17, functions=(), extra_imports=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] + list(extra_imports),
                          functions=list(functions))
    m.ir_version = 8
    return m


def _isomer(isomer_bin, *args):
    return subprocess.run([isomer_bin, *args], capture_output=True, text=True, timeout=300)


def _refused(isomer_bin, path, want, commands=("optimize", "run")):
    """Every command refuses `path` with one "isomer: error:" line naming it and `want`."""
    for cmd in commands:
        args = [cmd, str(path)] + (["-o", str(path) + ".out.onnx", "--budget", "1"] if cmd == "optimize" else [])
        p = _isomer(isomer_bin, *args)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert p.returncode == 1, (cmd, p.returncode, p.stderr)
        assert len(lines) == 1 and lines[0].startswith("isomer: error: "), (cmd, p.stderr)
        assert os.path.basename(str(path)) in lines[0] and want in lines[0], (cmd, lines[0])
        assert not os.path.exists(str(path) + ".out.onnx")


def _matches_ort(isomer_bin, tmp_path, m, feeds, native=True):
    path = tmp_path / "model.onnx"
    onnx.save(m, str(path))
    np.savez(tmp_path / "in.npz", **feeds)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for extra in (["--no-onnxruntime"] if native else []) + [[]]:
        extra = extra if isinstance(extra, list) else [extra]
        p = _isomer(isomer_bin, "run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                    str(tmp_path / "out.npz"), *extra)
        assert p.returncode == 0, p.stderr
        got = np.load(tmp_path / "out.npz")
        for k, v in want.items():
            assert got[k].shape == v.shape, (k, got[k].shape, v.shape)
            np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-5)


# --- Shape of a value whose inference failed ---------------------------------------------

@pytest.mark.parametrize("producer", ["matmul", "reshape"])
def test_shape_of_a_failed_inference_is_refused_not_a_crash(isomer_bin, tmp_path, producer):
    a = numpy_helper.from_array(np.zeros([2, 4], np.float32), "a")
    if producer == "matmul":
        nodes = [helper.make_node("MatMul", ["a", "b"], ["r"], name="mm")]
        inits = [a, numpy_helper.from_array(np.zeros([3, 5], np.float32), "b")]
        want = "node 'mm' (MatMul)"
    else:
        nodes = [helper.make_node("Reshape", ["a", "s"], ["r"], name="rs")]
        inits = [a, numpy_helper.from_array(np.array([-1, 3], np.int64), "s")]
        want = "node 'rs' (Reshape)"
    nodes.append(helper.make_node("Shape", ["r"], ["y"]))
    m = _model(nodes, [], [helper.make_tensor_value_info("y", TensorProto.INT64, None)], inits)
    path = tmp_path / f"shape_{producer}.onnx"
    onnx.save(m, str(path))
    _refused(isomer_bin, path, want)


# --- model-local functions ------------------------------------------------------------------

DOM = "local.fn"
IMPORTS = [helper.make_opsetid("", 17), helper.make_opsetid(DOM, 1)]


def _fn(name, inputs, outputs, nodes, imports=IMPORTS, attributes=()):
    return helper.make_function(DOM, name, inputs, outputs, nodes, imports, attributes=list(attributes))


def _call_model(functions, call_inputs=("x",), import_domain=True, **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    call = helper.make_node("F", list(call_inputs), ["y"], domain=DOM, name="call", **attrs)
    return _model([call], [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                  functions=functions, extra_imports=[helper.make_opsetid(DOM, 1)] if import_domain else [])


BAD_FUNCTIONS = {
    "self": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain=DOM)])]),
             "'local.fn:F' calls itself (local.fn:F -> local.fn:F)"),
    "mutual": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("G", ["a"], ["b"], domain=DOM)]),
                                    _fn("G", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain=DOM)])]),
               "functions must not be recursive"),
    "twice": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])]),
                                   _fn("F", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["b"])])]),
              "model-local function 'local.fn:F' is defined twice"),
    "more_inputs": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])])],
                                        call_inputs=("x", "x")),
                    "node 'call' (F): calls model-local function 'local.fn:F' with 2 inputs; it declares 1"),
    "fewer_inputs": (lambda: _call_model([_fn("F", ["a", "c"], ["b"], [helper.make_node("Add", ["a", "c"], ["b"])])]),
                     "without its input 'c', which node (Add) -> 'b' requires"),
    "domain_not_imported": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])])],
                                                import_domain=False),
                            "the model imports no opset of domain 'local.fn'"),
    "body_domain_not_imported": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                                                          imports=[helper.make_opsetid("ai.onnx", 17)])]),
                                 "the function imports no opset of domain ''"),
    "body_no_such_op": (lambda: _call_model([_fn("F", ["a"], ["b"], [helper.make_node("NoSuchOp", ["a"], ["b"])])]),
                        "domain 'ai.onnx' has no operator NoSuchOp at opset 17"),
}


@pytest.mark.parametrize("case", sorted(BAD_FUNCTIONS))
def test_bad_model_local_function_is_refused(isomer_bin, tmp_path, case):
    make, want = BAD_FUNCTIONS[case]
    m = make()
    with pytest.raises(Exception):  # the reference refuses it too
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    path = tmp_path / f"fn_{case}.onnx"
    onnx.save(m, str(path))
    _refused(isomer_bin, path, want)


@pytest.mark.parametrize("given", [True, False])
def test_valid_function_with_attribute_reference_runs_and_matches(isomer_bin, tmp_path, given):
    alpha = helper.make_attribute("alpha", 0.5)
    alpha.ClearField("f")
    alpha.ref_attr_name = "slope"
    leaky = helper.make_node("LeakyRelu", ["a"], ["b"])
    leaky.attribute.append(alpha)
    f = _fn("F", ["a"], ["b"], [leaky], attributes=["slope"])
    m = _call_model([f], **({"slope": 0.25} if given else {}))
    x = np.random.default_rng(3).standard_normal([2, 3]).astype(np.float32)
    _matches_ort(isomer_bin, tmp_path, m, {"x": x}, native=False)


# --- empty tensors --------------------------------------------------------------------------

def _empty_case(kind):
    z = lambda *s: np.zeros(s, np.float32)  # noqa: E731
    c = numpy_helper.from_array
    x_full = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])
    x_empty = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 3])
    out = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if kind == "conv_no_output_channels":
        return _model([helper.make_node("Conv", ["x", "w"], ["y"])], [x_full], out, [c(z(0, 4, 1), "w")]), [2, 4, 3]
    if kind == "conv_no_input_channels":
        return _model([helper.make_node("Conv", ["x", "w", "b"], ["y"])], [x_empty], out,
                      [c(z(5, 0, 1), "w"), c(np.arange(5, dtype=np.float32), "b")]), [2, 0, 3]
    if kind == "matmul_no_columns":
        return _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x_full], out, [c(z(3, 0), "w")]), [2, 4, 3]
    if kind == "matmul_no_inner":
        return _model([helper.make_node("MatMul", ["a", "w"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])],
                      [x_full], out, [c(z(4, 0), "a"), c(z(0, 3), "w")]), [2, 4, 3]
    if kind == "gemm_no_inner":
        return _model([helper.make_node("Gemm", ["a", "w", "b"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])],
                      [x_full], out, [c(z(4, 0), "a"), c(z(0, 3), "w"), c(np.ones(3, np.float32), "b")]), [2, 4, 3]
    if kind == "reducesum_empty_axis":
        return _model([helper.make_node("ReduceSum", ["x", "ax"], ["y"], keepdims=0)], [x_empty], out,
                      [c(np.array([1], np.int64), "ax")]), [2, 0, 3]
    if kind == "concat_empty":
        return _model([helper.make_node("Concat", ["e", "x", "e"], ["y"], axis=1)], [x_full], out,
                      [c(z(2, 0, 3), "e")]), [2, 4, 3]
    return _model([helper.make_node("Softmax", ["x"], ["t"], axis=1), helper.make_node("Relu", ["t"], ["y"])],
                  [x_empty], out), [2, 0, 3]


@pytest.mark.parametrize("kind", ["conv_no_output_channels", "conv_no_input_channels", "matmul_no_columns",
                                  "matmul_no_inner", "gemm_no_inner", "reducesum_empty_axis", "concat_empty",
                                  "softmax_relu_empty"])
def test_empty_tensors_run_and_match_onnxruntime(isomer_bin, tmp_path, kind):
    m, dims = _empty_case(kind)
    x = np.random.default_rng(5).standard_normal(dims).astype(np.float32)
    _matches_ort(isomer_bin, tmp_path, m, {"x": x})


# --- IR versions ------------------------------------------------------------------------------

@pytest.mark.parametrize("ir", [1, 2])
def test_old_ir_version_with_opset_imports_is_refused(isomer_bin, tmp_path, ir):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m.ir_version = ir
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    path = tmp_path / f"ir{ir}.onnx"
    onnx.save(m, str(path))
    _refused(isomer_bin, path, f"IR version {ir} predates opset imports")


# --- encodings ---------------------------------------------------------------------------------

def _conv_model():
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal([4, 3, 3, 3]).astype(np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], strides=[1, 1], kernel_shape=[3, 3])
    return _model([conv], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])], [w])


def test_packed_repeated_fields_and_long_varints_read_as_plain(isomer_bin, tmp_path):
    m = _conv_model()
    data = m.SerializeToString()
    # The Conv's pads (attribute 0) half packed, the weight's dims packed, ir_version in 10 bytes.
    data = proto.splice(data, [(proto.GRAPH, 0), (proto.NODE, 0), (proto.ATTR, 0)], lambda b: proto._packed(b, 8))
    data = proto.splice(data, [(proto.GRAPH, 0), (proto.INIT, 0)], lambda b: proto._packed(b, 1))
    data = proto._overlong(data, 1, 10)
    parsed = onnx.ModelProto()
    parsed.ParseFromString(data)
    assert parsed == m and data != m.SerializeToString()
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    x = np.random.default_rng(2).standard_normal([1, 3, 6, 6]).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    p = _isomer(isomer_bin, "run", str(path), "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"),
                "--outputs", str(tmp_path / "out.npz"))
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("how", ["varint11", "length_past_end", "truncated_in_weight", "wire_type"])
def test_damaged_bytes_are_refused_with_one_line(isomer_bin, tmp_path, how):
    m = _conv_model()
    data = m.SerializeToString()
    start, vs, ve = proto.span(data, [(proto.GRAPH, 0), (proto.NODE, 0)])
    if how == "varint11":
        data = data[: start + 1] + b"\x80" * 10 + b"\x01" + data[vs:]
    elif how == "length_past_end":
        data = data[: start + 1] + proto.varint(1 << 40) + data[vs:]
    elif how == "truncated_in_weight":
        raw = m.graph.initializer[0].raw_data
        data = data[: data.find(raw) + len(raw) // 2]
    else:
        data = data[:vs] + bytes([data[vs] ^ 7]) + data[vs + 1:]  # the node's first tag, wire type 7
    path = tmp_path / f"{how}.onnx"
    path.write_bytes(data)
    with pytest.raises(Exception):
        onnx.load_model_from_string(data)
    _refused(isomer_bin, path, "not an ONNX model: the protobuf does not parse")


# --- Resize scales ----------------------------------------------------------------------------

def _resize_model(scale):
    sc = numpy_helper.from_array(np.array([1, 1, scale], np.float32), "sc")
    return _model([helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest", name="rs")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [sc], opset=18)


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan"), float("inf")])
def test_resize_scale_not_positive_and_finite_is_refused(isomer_bin, tmp_path, scale):
    m = _resize_model(scale)
    with pytest.raises(Exception):
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": np.ones([2, 4, 3], np.float32)})
    path = tmp_path / "resize.onnx"
    onnx.save(m, str(path))
    _refused(isomer_bin, path, "node 'rs' (Resize): Resize scales must be positive and finite")


def test_resize_extent_past_64_bits_is_refused(isomer_bin, tmp_path):
    path = tmp_path / "resize.onnx"
    onnx.save(_resize_model(1e30), str(path))
    _refused(isomer_bin, path, "which does not fit in 64 bits")


def test_output_larger_than_memory_is_refused_before_anything_is_allocated(isomer_bin, tmp_path):
    """[2,4,3e9] floats (96 GB) under a 4 GiB address-space limit: refused at once, naming
    the node (it used to build index tables of the output's extent until memory ran out)."""
    import resource
    path = tmp_path / "resize.onnx"
    onnx.save(_resize_model(1e9), str(path))
    limit = 4 << 30
    p = subprocess.run([isomer_bin, "run", str(path), "--no-onnxruntime"], capture_output=True, text=True,
                       timeout=120, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert p.returncode == 1, p.stderr
    assert "node 'rs' (Resize): output 0 [2,4,3000000000] needs 89.4 GiB, more than the 4.0 GiB" in p.stderr


# --- axes out of range ---------------------------------------------------------------------------

@pytest.mark.parametrize("axes,want", [([3], "Pad axis 3 is out of range for rank 3"),
                                       ([-4], "Pad axis -4 is out of range for rank 3"),
                                       ([0, 0], "Pad axes [0,0] repeat an axis"),
                                       ([1 << 40], "Pad axis 1099511627776 is out of range")])
def test_pad_axes_out_of_range_or_repeated_are_refused(isomer_bin, tmp_path, axes, want):
    """Pad-18's axes: libonnx has no schema of that version to judge them, so isomer's own
    rule refuses the node instead of keeping it opaque for `optimize` to write back."""
    p = numpy_helper.from_array(np.ones(2 * len(axes), np.int64), "p")
    ax = numpy_helper.from_array(np.array(axes, np.int64), "ax")
    m = _model([helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], name="pad")],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [p, ax], opset=18)
    with pytest.raises(Exception):
        ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    path = tmp_path / "pad.onnx"
    onnx.save(m, str(path))
    _refused(isomer_bin, path, "node 'pad' (Pad): " + want)


# --- opset imports ----------------------------------------------------------------------------

@pytest.mark.parametrize("imports", [[("", 17), ("", 17)], [("", 17), ("ai.onnx", 17)], [("", 17), ("", 1)]])
def test_default_domain_imported_twice(isomer_bin, tmp_path, imports):
    """The same import twice (spelled "" or "ai.onnx") says one thing: onnx.checker and ONNX
    Runtime accept it, so isomer runs it; two versions leave the model's meaning unsaid
    (ONNX Runtime silently takes the last): refused, naming both."""
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    del m.opset_import[:]
    m.opset_import.extend([helper.make_opsetid(d, v) for d, v in imports])
    onnx.checker.check_model(m)
    if imports[0][1] != imports[1][1]:
        path = tmp_path / "twice.onnx"
        onnx.save(m, str(path))
        _refused(isomer_bin, path, "the model imports domain 'ai.onnx' twice, at opsets 17 and 1")
        return
    x = np.random.default_rng(4).standard_normal([2, 3]).astype(np.float32)
    _matches_ort(isomer_bin, tmp_path, m, {"x": x})


def test_control_characters_in_a_name_are_written_out_not_obeyed(isomer_bin, tmp_path):
    """A node name with a NUL and a terminal escape in it, on a node isomer refuses: the
    message goes on past the NUL (it used to end there) and shows both as \\xNN."""
    name = "bad\x00node\x1b[31m"
    shape = numpy_helper.from_array(np.array([5], np.int64), "shape")
    m = _model([helper.make_node("Reshape", ["x", "shape"], ["y"], name=name)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])], [shape])
    path = tmp_path / "ctl.onnx"
    path.write_bytes(m.SerializeToString())
    _refused(isomer_bin, path, "bad\\x00node\\x1b[31m")
