"""Hostile inputs of the campaign's twelfth family (scripts/hostile_mutators_fold.py): what a
model's constants make isomer compute before anything runs; each class found, rebuilt small
with onnx.helper.

- An int64 Range whose span passes int64 (start -2^63, limit 2^63 - 1, delta 2^62: four
  elements): the count was computed from limit - start, which wrapped to -1, so the Range
  had no element and its ReduceMax came out INT64_MIN, folded and at run time alike.
- Extents that break an operator's definition were checked as forms isomer does not handle:
  Tile repeats that make an extent past int64, Split sizes that are negative or add up past
  int64, a negative OneHot depth. The node was kept opaque and `optimize` wrote back a model
  ONNX Runtime refuses; each is now refused naming the node.
- Integer Pow past its type folded modulo 2^bits (3^21 as int32: 1870418611) where ONNX
  Runtime, which computes it in double, gives the type's minimum on x86: `optimize` wrote a
  model whose outputs differ from the input's on ONNX Runtime (its own check compared
  isomer with isomer). A fold now converts as ONNX Runtime does.
- A node inside an If branch that breaks its operator at the static ranks it reads (a
  Transpose perm that repeats an axis, a Concat axis past the rank): bodies were checked from
  element types alone, so the If was kept opaque and `optimize` wrote back a model ONNX
  Runtime refuses at load. Where every input's declared shape is static, ONNX's inference
  now sees it, as ONNX Runtime's does.
- A node ONNX Runtime runs for isomer (an operator isomer does not compute) whose inputs are
  all constants: its delegated step has no input, and the bridge sent the helper an empty
  request (the cached header of a step never run before matched its empty input list), so
  `run` failed on the helper's "JSONDecodeError".
"""
import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hostile_util import isomer_cli, one_error, ort_outputs, save_model as _model  # noqa: E402

F, I64 = TensorProto.FLOAT, TensorProto.INT64
I64_MIN, I64_MAX, H = -(1 << 63), (1 << 63) - 1, 1 << 62


def _vi(name, t, dims=None):
    return helper.make_tensor_value_info(name, t, dims)


def _init(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.array(value, dtype), name)


def _run(isomer_bin, tmp_path, path, feeds, *flags):
    np.savez(tmp_path / "in.npz", **feeds)
    out = tmp_path / "out.npz"
    p = isomer_cli(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", out, "--threads", "1", *flags)
    assert p.returncode == 0, p.stderr
    return np.load(out)


@pytest.mark.parametrize("start,limit,delta", [(I64_MIN, I64_MAX, H), (I64_MAX, I64_MIN, -H), (I64_MIN, I64_MAX, I64_MAX)])
@pytest.mark.parametrize("fed", [False, True])
def test_int64_range_whose_span_passes_int64(isomer_bin, tmp_path, start, limit, delta, fed):
    want = np.array(list(range(start, limit, delta)), np.int64)
    # The elements themselves, and their maximum (a Range of no element gives INT64_MIN).
    nodes = [helper.make_node("Range", ["a", "b", "d"], ["r"], name="range"),
             helper.make_node("ReduceMax", ["r"], ["m"], keepdims=0, name="max")]
    inits = [_init("b", limit), _init("d", delta)]
    inputs, feeds = [_vi("z", I64, [1])], {"z": np.zeros([1], np.int64)}
    if fed:  # computed when it runs rather than folded at import
        inputs.append(_vi("a", I64, []))
        feeds["a"] = np.array(start, np.int64)
    else:
        inits.append(_init("a", start))
    nodes.append(helper.make_node("Add", ["r", "z"], ["y"], name="add"))
    path = _model(tmp_path, "range", nodes, inputs, [_vi("y", I64), _vi("m", I64)], inits)
    if fed:  # not native (the output's extent is known only when it runs): the reference evaluator
        isomer = pytest.importorskip("isomer")
        y, m = isomer.run(str(path), feeds, engine="reference")
        np.testing.assert_array_equal(y, want)
        assert m == want.max()
    else:
        for flags in ([], ["--no-onnxruntime"]):
            got = _run(isomer_bin, tmp_path, path, feeds, *flags)
            np.testing.assert_array_equal(got["y"], want)
            assert got["m"] == want.max()
    out = tmp_path / "o.onnx"
    p = isomer_cli(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(ort_outputs(out, feeds), want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_pow_past_its_type_folds_as_onnx_runtime_computes_it(isomer_bin, tmp_path, dtype):
    # ONNX leaves it undefined; ONNX Runtime converts pow in double to the type, x86 making
    # a result past it the type's minimum. A fold that wrapped instead (3^21 as int32:
    # 1870418611) wrote a model whose outputs differ from the input's on ONNX Runtime.
    t = TensorProto.INT32 if dtype == np.int32 else I64
    a, b = np.array([3, 2, -2, 3], dtype), np.array([21 if dtype == np.int32 else 40, 31, 31, 5], dtype)
    nodes = [helper.make_node("Pow", ["a", "b"], ["o"], name="pow"), helper.make_node("Add", ["o", "z"], ["y"], name="add")]
    path = _model(tmp_path, "pow", nodes, [_vi("z", t, [1])], [_vi("y", t)], [_init("a", a, dtype), _init("b", b, dtype)])
    feeds = {"z": np.zeros([1], dtype)}
    want = ort_outputs(path, feeds)
    np.testing.assert_array_equal(want[-1], 243)
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime")["y"], want)
    out = tmp_path / "o.onnx"
    p = isomer_cli(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(ort_outputs(out, feeds), want)


@pytest.mark.parametrize("case", ["tile", "split_negative", "onehot_negative", "onehot_int64_min", "onehot_minus_inf"])
def test_extents_that_break_the_definition_are_refused(isomer_bin, tmp_path, case):
    x = _vi("x", F, [1, 2, 4, 4])
    outs = [_vi("y", F)]
    if case == "tile":
        nodes, inits, why = [helper.make_node("Tile", ["x", "r"], ["y"], name="use")], [_init("r", [1, 1, H, 2])], \
            "make an extent past int64"
    elif case == "split_negative":
        nodes = [helper.make_node("Split", ["x", "s"], ["y", "y2"], axis=3, name="use")]
        inits, outs, why = [_init("s", [H, 4 - H])], [_vi("y", F), _vi("y2", F)], "contain a negative size"
    else:
        nodes = [helper.make_node("ArgMax", ["x"], ["i"], axis=3, name="idx"),
                 helper.make_node("OneHot", ["i", "d", "v"], ["y"], name="use")]
        # (A depth of any numeric type; one past the range of int64 was kept opaque.)
        d, why = {"onehot_negative": (_init("d", -5), "OneHot depth -5 is negative"),
                  "onehot_int64_min": (_init("d", I64_MIN), f"OneHot depth {I64_MIN} is negative"),
                  "onehot_minus_inf": (_init("d", -np.inf, np.float32), "OneHot depth -inf is negative")}[case]
        inits = [d, _init("v", [0.0, 1.0], np.float32)]
    path = _model(tmp_path, case, nodes, [x], outs, inits)
    with pytest.raises(Exception):  # ONNX Runtime refuses it, at load or when it runs
        ort_outputs(path, {"x": np.ones([1, 2, 4, 4], np.float32)})
    for cmd in (["optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1"], ["run", path], ["cost", path]):
        one_error(isomer_cli(isomer_bin, *cmd), str(path), "node 'use'", why)
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("sizes,why", [([H, H, H, H + 4], "add up past int64"), ([1, 1, 1, 2], "do not add up to extent 4")])
def test_split_sizes_that_do_not_add_up(isomer_bin, tmp_path, sizes, why):
    nodes = [helper.make_node("Split", ["x", "s"], ["a", "b", "c", "d"], axis=1, name="use")]
    path = _model(tmp_path, "split", nodes, [_vi("x", F, [2, 4])], [_vi(n, F) for n in "abcd"], [_init("s", sizes)])
    one_error(isomer_cli(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1"), "node 'use'", why)


def test_opaque_operator_over_constants_alone(isomer_bin, tmp_path):
    # BitShift is no operator of isomer's: ONNX Runtime computes it for isomer, and with
    # constant inputs only, its step sends no tensor.
    nodes = [helper.make_node("BitShift", ["a", "b"], ["o"], direction="LEFT", name="shift"),
             helper.make_node("Add", ["o", "z"], ["y"], name="add")]
    inits = [_init("a", [1, 3, 1], np.uint64), _init("b", [63, 1, 2], np.uint64)]
    path = _model(tmp_path, "bitshift", nodes, [_vi("z", TensorProto.UINT64, [1])], [_vi("y", TensorProto.UINT64)], inits)
    feeds = {"z": np.zeros([1], np.uint64)}
    got = _run(isomer_bin, tmp_path, path, feeds)
    np.testing.assert_array_equal(got["y"], np.array([1 << 63, 6, 4], np.uint64))


@pytest.mark.parametrize("cond", ["fed", "constant"])
@pytest.mark.parametrize("bad", ["transpose_repeats", "concat_axis"])
def test_branch_node_that_breaks_its_operator_at_static_ranks(isomer_bin, tmp_path, cond, bad):
    # The untaken branch's node reads an outer value of static shape [2, 3]: ONNX Runtime's
    # inference refuses the model at load; isomer checked body nodes from element types
    # alone, kept the If opaque and `optimize` wrote the model back.
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="ok")], "then", [], [_vi("t", F, [2, 3])])
    node = helper.make_node("Transpose", ["x"], ["e"], perm=[0, 0], name="bad") if bad == "transpose_repeats" else \
        helper.make_node("Concat", ["x", "x"], ["e"], axis=5, name="bad")
    els = helper.make_graph([node], "else", [], [_vi("e", F, None)])
    inputs, inits, feeds = [_vi("x", F, [2, 3])], [], {"x": np.ones([2, 3], np.float32)}
    if cond == "fed":
        inputs.append(_vi("c", TensorProto.BOOL, []))
        feeds["c"] = np.array(True)
    else:
        inits.append(_init("c", True, np.bool_))
    path = _model(tmp_path, "branch", [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els, name="if")],
                  inputs, [_vi("y", F)], inits)
    with pytest.raises(Exception):
        ort_outputs(path, feeds)
    for cmd in (["optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1"], ["run", path]):
        one_error(isomer_cli(isomer_bin, *cmd), str(path), "node 'if' (If) else_branch node 'bad'")
    assert not (tmp_path / "o.onnx").exists()
