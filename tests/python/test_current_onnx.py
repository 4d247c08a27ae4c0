"""Models as the current onnx release writes them (onnx.helper's defaults: IR 14, opset
28): `isomer convert` and `isomer optimize` read them, write them back at their versions
with the fields isomer does not model intact, onnx.checker (full_check) accepts the
result and ONNX Runtime gives the same outputs; external data laid out the way
PyTorch and onnx.save write it; the Python API on ModelProtos of this onnx."""
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ISOMER_BIN = os.environ.get("ISOMER_BIN")


def isomer_cli(*args, check=True):
    proc = subprocess.run([ISOMER_BIN, *args], capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc


def ort_run(model_path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    session = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(got, want, rtol=1e-4):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        scale = max(float(np.max(np.abs(w), initial=0.0)), 1e-6)
        assert float(np.max(np.abs(g.astype(np.float64) - w), initial=0.0)) <= rtol * scale


def metadata(proto):
    return {p.key: p.value for p in proto.metadata_props}


# ---- A model with what isomer does not model -------------------------------------------


def rich_model():
    """Native nodes with metadata, doc strings and device configurations; a model-local
    function (its call is inlined); a vendor op; float8 and int4 weights (their Casts stay opaque); metadata on
    the model, graph, values and initializers; the model's device configuration."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    x.doc_string = "the input"
    x.metadata_props.add(key="in", value="x")
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("y", "z")]
    outputs[1].metadata_props.add(key="out", value="z")
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4) / 8, "w")
    w.doc_string = "weights"
    w.metadata_props.add(key="init", value="w")
    f8 = helper.make_tensor("f8", TensorProto.FLOAT8E4M3FN, [2, 4], np.linspace(-2, 2, 8).astype(np.float32))
    i4 = helper.make_tensor("i4", TensorProto.INT4, [2, 4], [1, -2, 3, -4, 5, -6, 7, -8])
    add = helper.make_node("Add", ["x", "w"], ["a"], name="add0", doc_string="adds the weights")
    add.metadata_props.add(key="pkg.torch.onnx.stack_trace", value="model.py:3")
    config = add.device_configurations.add()
    config.configuration_id = "mesh"
    config.pipeline_stage = 0
    nodes = [
        helper.make_node("Cast", ["f8"], ["dq8"], to=TensorProto.FLOAT, name="dq8"),
        helper.make_node("Cast", ["i4"], ["dq4"], to=TensorProto.FLOAT, name="dq4"),
        add,
        helper.make_node("Mul", ["a", "dq8"], ["b"], name="mul0"),
        helper.make_node("Add", ["b", "dq4"], ["c"], name="add1"),
        helper.make_node("MyNeg", ["c"], ["y"], name="call", domain="local.fn"),
        helper.make_node("Relu", ["c"], ["z"], name="relu"),
    ]
    nodes[5].metadata_props.add(key="call", value="inlined")
    fn = helper.make_function("local.fn", "MyNeg", ["X"], ["Y"], [helper.make_node("Neg", ["X"], ["Y"])],
                              [helper.make_opsetid("", 28)])
    fn.metadata_props.add(key="fn", value="neg")
    value_info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("a", "dq8", "dq4")]
    value_info[0].metadata_props.add(key="mid", value="a")
    graph = helper.make_graph(nodes, "rich", [x], outputs, [w, f8, i4], doc_string="graph doc",
                              value_info=value_info)
    graph.metadata_props.add(key="graph", value="g")
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 28), helper.make_opsetid("local.fn", 1)],
                              functions=[fn], producer_name="test", doc_string="model doc")
    model.metadata_props.add(key="model", value="m")
    device = model.configuration.add()
    device.name = "mesh"
    device.num_devices = 2
    device.device.extend(["cpu0", "cpu1"])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_rich_model_round_trips_with_every_field(tmp_path):
    src, dst = str(tmp_path / "rich.onnx"), str(tmp_path / "out.onnx")
    model = rich_model()
    assert (model.ir_version, model.opset_import[0].version) == (onnx.IR_VERSION, 28)
    onnx.save(model, src)
    isomer_cli("convert", src, "-o", dst)
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert out.ir_version == model.ir_version
    assert [(o.domain, o.version) for o in out.opset_import] == [(o.domain, o.version) for o in model.opset_import]
    assert (out.producer_name, out.doc_string, metadata(out)) == ("test", "model doc", {"model": "m"})
    assert list(out.configuration) == list(model.configuration)
    assert list(out.functions) == []  # its one call inlined, the function is no longer called
    assert (out.graph.doc_string, metadata(out.graph)) == ("graph doc", {"graph": "g"})
    nodes = {n.name: n for n in out.graph.node}
    assert set(nodes) == {n.name for n in model.graph.node} - {"call"} | {"call/Neg"}
    assert (nodes["call/Neg"].op_type, list(nodes["call/Neg"].output)) == ("Neg", ["y"])
    for n in model.graph.node:
        assert n.name == "call" or nodes[n.name] == n, n.name  # inputs, outputs, attributes, metadata, configurations
    inits = {t.name: t for t in out.graph.initializer}
    for t in model.graph.initializer:
        if t.data_type in (TensorProto.FLOAT8E4M3FN, TensorProto.INT4):
            assert inits[t.name] == t, t.name  # kept verbatim
        else:  # written as raw_data, metadata kept
            np.testing.assert_array_equal(numpy_helper.to_array(inits[t.name]), numpy_helper.to_array(t))
            assert (inits[t.name].doc_string, metadata(inits[t.name])) == (t.doc_string, metadata(t))
    values = {v.name: v for v in list(out.graph.input) + list(out.graph.output) + list(out.graph.value_info)}
    for v in list(model.graph.input) + list(model.graph.output) + list(model.graph.value_info):
        assert values[v.name] == v, v.name  # types, doc strings, metadata; opaque outputs typed
    feeds = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    assert_close(ort_run(dst, feeds), ort_run(src, feeds))


# ---- The user story: onnx.helper's defaults through optimize --------------------------


def current_mlp_conv():
    """What a user builds with onnx.helper today (IR 14, opset 28): a conv block with
    BatchNormalization and a residual, then a classifier head; work for the template
    passes (BN folding, MatMul+Add, a dead branch, an identity)."""
    rng = np.random.default_rng(1)

    def init(name, *shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.3, name)

    inits = [init("conv_w", 8, 3, 3, 3), init("conv_b", 8), init("bn_scale", 8), init("bn_bias", 8),
             init("bn_mean", 8), numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn_var"),
             init("proj_w", 8, 3, 1, 1), init("fc_w", 8, 10), init("fc_b", 10),
             numpy_helper.from_array(np.array([0, -1], dtype=np.int64), "flat_shape"),
             numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes")]
    nodes = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Conv", ["x", "proj_w"], ["p"], name="proj"),
        helper.make_node("Add", ["r", "p"], ["res"], name="residual"),
        helper.make_node("Identity", ["res"], ["res1"], name="id"),
        helper.make_node("ReduceMean", ["res1", "axes"], ["pooled"], keepdims=0, name="pool"),
        helper.make_node("Reshape", ["pooled", "flat_shape"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "fc_w"], ["logits0"], name="fc"),
        helper.make_node("Add", ["logits0", "fc_b"], ["logits"], name="fc_bias"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
        helper.make_node("Sigmoid", ["logits"], ["unused"], name="dead"),
    ]
    graph = helper.make_graph(nodes, "user_model", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                    ["batch", 3, 8, 8])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])], inits)
    model = helper.make_model(graph)  # the defaults: onnx.IR_VERSION, the newest opset
    onnx.checker.check_model(model, full_check=True)
    return model


def test_optimize_a_model_saved_by_current_onnx(tmp_path):
    src, dst = str(tmp_path / "user.onnx"), str(tmp_path / "user.opt.onnx")
    model = current_mlp_conv()
    assert model.ir_version == onnx.IR_VERSION and model.opset_import[0].version == onnx.defs.onnx_opset_version()
    onnx.save(model, src)
    # No guard: this is about reading and writing what current onnx saves, and the
    # model runs in 0.37 ms either way, so a timing round on a busy machine may keep the
    # BatchNormalization (its 2% band is the guard's to test, in test_optimize_guard.py).
    proc = isomer_cli("optimize", src, "-o", dst, "--cost", "none", "--no-guard")
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert out.ir_version == model.ir_version
    assert out.opset_import[0].version == model.opset_import[0].version
    assert len(out.graph.node) < len(model.graph.node), proc.stdout  # it did optimize
    assert "BatchNormalization" not in {n.op_type for n in out.graph.node}
    feeds = {"x": np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    assert_close(ort_run(dst, feeds), ort_run(src, feeds))
    # The output reads back and round-trips to the same bytes.
    again = str(tmp_path / "again.onnx")
    isomer_cli("convert", dst, "-o", again)
    with open(dst, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()


# ---- External data ------------------------------------------------------------------


def weights_model():
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w2")
    b = numpy_helper.from_array(np.ones(32, np.float32), "b")  # small: stays inline
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])]
    graph = helper.make_graph(nodes, "weights", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])], [w1, w2, b])
    return helper.make_model(graph)


FEEDS = {"x": np.random.default_rng(4).standard_normal((4, 64)).astype(np.float32)}


@pytest.mark.parametrize("layout", ["pytorch", "onnx_default", "one_file_per_tensor"])
def test_external_data_layouts_are_read(tmp_path, layout):
    """pytorch: model.onnx + model.onnx.data, as torch.onnx.export writes it;
    onnx_default: onnx.save(..., save_as_external_data=True) with no other option;
    one_file_per_tensor: all_tensors_to_one_file=False, files under a subdirectory."""
    model_dir = tmp_path / "in"
    model_dir.mkdir()
    src = str(model_dir / "model.onnx")
    if layout == "pytorch":
        onnx.save(weights_model(), src, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data", size_threshold=1024)
    elif layout == "onnx_default":
        onnx.save(weights_model(), src, save_as_external_data=True)
    else:
        (model_dir / "weights").mkdir()
        model = weights_model()
        onnx.external_data_helper.convert_model_to_external_data(model, all_tensors_to_one_file=False,
                                                                 size_threshold=1024)
        for t in model.graph.initializer:
            if t.data_location == TensorProto.EXTERNAL:
                for e in t.external_data:
                    if e.key == "location":
                        e.value = "weights/" + e.value
        onnx.save(model, src)
    external = [t.name for t in onnx.load(src, load_external_data=False).graph.initializer
                if t.data_location == TensorProto.EXTERNAL]
    assert external == ["w1", "w2"]
    want = ort_run(src, FEEDS)
    # Read from another working directory: locations are relative to the model's.
    out_inline, out_external = str(tmp_path / "inline.onnx"), str(tmp_path / "ext" / "model.onnx")
    os.makedirs(os.path.dirname(out_external))
    subprocess.run([ISOMER_BIN, "convert", src, "-o", out_inline], check=True, cwd="/", capture_output=True)
    isomer_cli("convert", src, "-o", out_external, "--external-data")
    for out in (out_inline, out_external):
        onnx.checker.check_model(out, full_check=True)
        assert_close(ort_run(out, FEEDS), want)
    written = onnx.load(out_external, load_external_data=False)
    locations = {e.value for t in written.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"model.onnx.data"}
    assert os.path.exists(out_external + ".data")


def _with_location(tmp_path, location, offset=None, length=None):
    src = str(tmp_path / "model.onnx")
    onnx.save(weights_model(), src, save_as_external_data=True, all_tensors_to_one_file=True,
              location="model.onnx.data")
    model = onnx.load(src, load_external_data=False)
    t = model.graph.initializer[0]
    for e in t.external_data:
        if e.key == "location":
            e.value = location
        if e.key == "offset" and offset is not None:
            e.value = offset
        if e.key == "length" and length is not None:
            e.value = length
    onnx.save(model, src)
    return src


@pytest.mark.parametrize("location,offset,length,message", [
    ("../outside.data", None, None, "outside the model's directory"),
    ("/etc/passwd", None, None, "outside the model's directory"),
    ("model.onnx.data", "1000000", None, "past its end"),
    ("model.onnx.data", None, "99999999", "past its end"),
    ("model.onnx.data", "9223372036854775807", None, "past its end"),
    ("model.onnx.data", "-4", None, "not a byte count"),
    ("missing.data", None, None, "cannot be opened"),
])
def test_bad_external_data_is_refused_naming_the_initializer(tmp_path, location, offset, length, message):
    src = _with_location(tmp_path, location, offset, length)
    proc = isomer_cli("convert", src, "-o", str(tmp_path / "out.onnx"), check=False)
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "'w1'" in err and message in err, err
    assert not os.path.exists(tmp_path / "out.onnx")


def test_external_data_through_a_symlink_out_of_the_directory_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    inside = tmp_path / "inside"
    inside.mkdir()
    src = _with_location(inside, "model.onnx.data")
    os.replace(inside / "model.onnx.data", outside / "real.data")
    os.symlink(outside / "real.data", inside / "model.onnx.data")
    proc = isomer_cli("convert", src, "-o", str(tmp_path / "out.onnx"), check=False)
    assert proc.returncode != 0 and "leads outside the model's directory" in proc.stderr, proc.stderr


# ---- The Python API on this onnx's ModelProtos ----------------------------------------


def test_python_api_takes_and_returns_current_model_protos(tmp_path):
    isomer = pytest.importorskip("isomer")
    model = current_mlp_conv()
    optimized, report = isomer.optimize(model, cost="none")
    assert isinstance(optimized, onnx.ModelProto)
    assert optimized.ir_version == model.ir_version
    assert optimized.opset_import[0].version == model.opset_import[0].version
    onnx.checker.check_model(optimized, full_check=True)
    feeds = {"x": np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)}
    got = isomer.run(optimized, feeds)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    assert_close(got, ort_run(path, feeds), rtol=1e-3)
    # Fields isomer does not model survive the API too.
    rich = rich_model()
    back, _ = isomer.optimize(rich, search="none", check=False, cost="none")
    assert list(back.configuration) == list(rich.configuration)
    assert metadata(back.graph) == {"graph": "g"}
    assert {n.name: metadata(n) for n in back.graph.node}["add0"] == {"pkg.torch.onnx.stack_trace": "model.py:3"}
    # A ModelProto whose weights were left in their file has no directory to find them.
    ext = str(tmp_path / "ext.onnx")
    onnx.save(weights_model(), ext, save_as_external_data=True, location="ext.onnx.data")
    with pytest.raises(isomer.Error, match="came without its directory"):
        isomer.optimize(onnx.load(ext, load_external_data=False), cost="none")
    assert_close(isomer.run(onnx.load(ext), FEEDS), ort_run(ext, FEEDS), rtol=1e-3)


@pytest.mark.parametrize("opset,attr,valid", [
    (17, "saturate", False), (19, "saturate", True), (19, "round_mode", False), (24, "round_mode", True),
    (24, "perm", False), (28, "perm", False)])
def test_attributes_are_judged_by_the_operators_version(tmp_path, opset, attr, valid):
    """Debian's libonnx knows Cast up to version 13; versions 19 (saturate) and 24
    (round_mode) are judged by isomer's table of ONNX's history. A foreign attribute on
    a newer version was accepted and written back (ONNX Runtime refuses the model)."""
    value = {"saturate": 1, "round_mode": "up", "perm": "x" * 100}[attr]
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT, **{attr: value})
    graph = helper.make_graph([node], "cast", [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
        checker_ok = True
    except onnx.checker.ValidationError:
        checker_ok = False
    assert checker_ok == valid
    p = isomer_cli("convert", path, "-o", str(tmp_path / "o.onnx"), check=False)
    if valid:
        assert p.returncode == 0, p.stderr
    else:
        assert p.returncode == 1 and p.stderr.count("isomer: error:") == 1, p.stderr
        assert f"Unrecognized attribute: {attr} for operator Cast" in p.stderr and "m.onnx" in p.stderr, p.stderr
