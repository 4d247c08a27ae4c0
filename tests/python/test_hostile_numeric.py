"""Hostile inputs of the campaign's eighth family (scripts/hostile_mutators_numeric.py): valid
models whose numbers sit at the edges of their types. Each class it found, rebuilt here small.

- INT64_MIN / -1 in an int64 Div (SIGFPE in C++): `optimize` folding it, and the reference
  evaluator running it, died of the signal; integers now wrap, as ONNX Runtime's do.
- Neg, Abs, Sign and Clip of int64 values past 2^53 were evaluated through double (folded
  to a neighbour of the true value), and Neg/Abs of INT_MIN saturated where the runtime
  and ONNX Runtime wrap; they now compute exactly in int64.
- An integer Clip bound a float does not hold (2^24 + 1) became a float immediate of the
  runtime's kernel: the values came out clipped at 2^24.
"""
import resource

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hostile_util import isomer_cli, ort_outputs, python_child  # noqa: E402




def _save(tmp_path, name, nodes, inputs, inits, out_type, out_dims):
    g = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", out_type, out_dims)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _run(isomer_bin, tmp_path, path, feeds, *extra):
    np.savez(tmp_path / "in.npz", **feeds)
    out = tmp_path / "out.npz"
    p = isomer_cli(isomer_bin, "run", path, "--threads", "1", "--inputs", tmp_path / "in.npz", "--outputs", out, *extra)
    assert p.returncode == 0, p.stderr
    return np.load(out)["y"]


def _reference(tmp_path, path, feeds):
    """isomer.run(engine="reference") in a child interpreter: a signal must not end the tests."""
    pytest.importorskip("isomer")  # a sanitizer build has no module
    np.savez(tmp_path / "ref_in.npz", **feeds)
    code = ("import sys, numpy as np, isomer; f = dict(np.load(sys.argv[2])); "
            "np.save(sys.argv[3], isomer.run(sys.argv[1], f, engine='reference')[0])")
    p = python_child(code, path, tmp_path / "ref_in.npz", tmp_path / "ref.npy", timeout=300)
    assert p.returncode == 0, p.stderr
    return np.load(tmp_path / "ref.npy")


def _optimized(isomer_bin, tmp_path, path, feeds, run_ort=True):
    """The outputs of the model `optimize` writes, on ONNX Runtime (or the model's path)."""
    np.savez(tmp_path / "opt_in.npz", **feeds)
    out = tmp_path / "opt.onnx"
    p = isomer_cli(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1", "--inputs",
                tmp_path / "opt_in.npz")
    assert p.returncode == 0, p.stderr
    return ort_outputs(out, feeds) if run_ort else out


I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@pytest.mark.parametrize("fed", [False, True])
def test_int64_min_divided_by_minus_one_wraps(isomer_bin, tmp_path, fed):
    # Constant operands are folded by optimize and by the runtime's compile; fed ones reach
    # the reference evaluator (--no-onnxruntime keeps the check's engine) and the kernel.
    a = np.array([I64_MIN, I64_MAX, -7, 7], np.int64)
    b = np.array([-1, -1, 2, -3], np.int64)
    i64 = TensorProto.INT64
    nodes = [helper.make_node("Div", ["a", "b"], ["q"], name="div"), helper.make_node("Add", ["q", "z"], ["y"])]
    inputs = [helper.make_tensor_value_info("z", i64, [4])]
    feeds = {"z": np.zeros(4, np.int64)}
    inits = []
    if fed:
        inputs += [helper.make_tensor_value_info("a", i64, [4]), helper.make_tensor_value_info("b", i64, [4])]
        feeds.update(a=a, b=b)
    else:
        inits = [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")]
    path = _save(tmp_path, "div_min", nodes, inputs, inits, i64, [4])
    want = np.array([I64_MIN, -I64_MAX, -3, -2], np.int64)  # two's complement; C truncates toward zero
    for extra in ([], ["--no-onnxruntime"]):
        np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, feeds, *extra), want)
    np.testing.assert_array_equal(_reference(tmp_path, path, feeds), want)
    # ONNX Runtime itself dies of SIGFPE on a Div it computes: the model optimize writes
    # is run by isomer.
    opt = _optimized(isomer_bin, tmp_path, path, feeds, run_ort=False)
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, opt, feeds, "--no-onnxruntime"), want)


@pytest.mark.parametrize("op", ["Neg", "Abs", "Sign", "Clip"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_unary_is_exact(isomer_bin, tmp_path, op, dtype):
    info = np.iinfo(dtype)
    if dtype == np.int64:
        a = np.array([info.min, info.max, (1 << 53) + 1, -(1 << 53) - 3, (1 << 60) + 7, -5], dtype)
    else:
        a = np.array([info.min, info.max, (1 << 24) + 1, -(1 << 24) - 3, (1 << 30) + 7, -5], dtype)
    elem = helper.np_dtype_to_tensor_dtype(a.dtype)
    ins, inits = ["a"], [numpy_helper.from_array(a, "a")]
    if op == "Clip":  # bounds a float does not hold
        ins += ["lo", "hi"]
        inits += [numpy_helper.from_array(np.array(a[3] + 2, dtype), "lo"),
                  numpy_helper.from_array(np.array(a[2] - 2, dtype), "hi")]
    nodes = [helper.make_node(op, ins, ["r"], name="edge"), helper.make_node("Add", ["r", "z"], ["y"])]
    path = _save(tmp_path, f"{op}_{a.dtype}", nodes, [helper.make_tensor_value_info("z", elem, [6])], inits, elem, [6])
    feeds = {"z": np.zeros(6, dtype)}
    want = ort_outputs(path, feeds)
    # The folded constant (optimize; the runtime's compile), and the kernel on a fed value.
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime"), want)
    np.testing.assert_array_equal(_optimized(isomer_bin, tmp_path, path, feeds), want)
    fed_nodes = [helper.make_node(op, ins, ["r"], name="edge"), helper.make_node("Add", ["r", "z"], ["y"])]
    fed_path = _save(tmp_path, f"{op}_{a.dtype}_fed", fed_nodes,
                     [helper.make_tensor_value_info("a", elem, [6]), helper.make_tensor_value_info("z", elem, [6])],
                     inits[1:], elem, [6])
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, fed_path, {"a": a, **feeds}, "--no-onnxruntime"), want)
    np.testing.assert_array_equal(_reference(tmp_path, fed_path, {"a": a, **feeds}), want)


def _float_model(tmp_path, name, nodes, inits, dims=(4, 8)):
    vi = helper.make_tensor_value_info
    return _save(tmp_path, name, nodes, [vi("x", TensorProto.FLOAT, list(dims))], inits, TensorProto.FLOAT, list(dims))


SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1.4e-40, 1.0, -1.0, 0.5, -2.5, 3.0e38, -3.0e38,
                    65504.0, 1e-30, 2.5] * 2, np.float32).reshape(4, 8)


def _same(got, want):
    """Equal, NaN where NaN and the sign of every zero and infinity as well."""
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


@pytest.mark.parametrize("exponent", [0.5, -0.5])
def test_pow_of_a_half_is_pow_at_minus_zero_and_minus_infinity(isomer_bin, tmp_path, exponent):
    # The runtime computed Pow(x, 0.5) as Sqrt(x): -0 for -0 and NaN for -inf, where pow
    # gives +0 and +inf (and Rsqrt gave -inf and NaN for +inf and +0).
    path = _float_model(tmp_path, "pow", [helper.make_node("Pow", ["x", "e"], ["y"])],
                        [numpy_helper.from_array(np.array(exponent, np.float32), "e")])
    feeds = {"x": SPECIAL}
    want = ort_outputs(path, feeds)  # IEEE pow, as numpy's
    for extra in ([], ["--no-onnxruntime"]):
        got = _run(isomer_bin, tmp_path, path, feeds, *extra)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)  # the square root is rounded once
        _same(np.where(np.isfinite(got) & (got != 0), 1, got), np.where(np.isfinite(want) & (want != 0), 1, want))


@pytest.mark.parametrize("how", ["relu", "clip", "clip_inverted"])
def test_relu_and_clip_keep_nan_and_clip_inverted_gives_max(isomer_bin, tmp_path, how):
    # The runtime's kernels made NaN 0 (Relu) or the lower bound (Clip), and Clip with
    # min > max gave min: ONNX's Clip is min(max(x, min), max), which is max there.
    inits = []
    if how == "relu":
        nodes = [helper.make_node("Relu", ["x"], ["y"])]
    else:
        lo, hi = (2.0, -1.0) if how == "clip_inverted" else (-1.0, 6.0)
        nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
        inits = [numpy_helper.from_array(np.array(lo, np.float32), "lo"),
                 numpy_helper.from_array(np.array(hi, np.float32), "hi")]
    path = _float_model(tmp_path, how, nodes, inits)
    feeds = {"x": SPECIAL}
    want = ort_outputs(path, feeds)
    for extra in ([], ["--no-onnxruntime"]):
        got = _run(isomer_bin, tmp_path, path, feeds, *extra)
        np.testing.assert_array_equal(got, want)  # NaN where NaN: assert_array_equal says so


_CAST_TARGETS = [TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16, TensorProto.INT32,
                 TensorProto.INT64, TensorProto.UINT64]


@pytest.mark.parametrize("to", _CAST_TARGETS)
def test_cast_of_nan_and_infinity_is_the_same_folded_checked_and_run(isomer_bin, tmp_path, to):
    # ONNX leaves the value undefined; isomer gives what ONNX Runtime's Cast gives on x86,
    # per target (ir/float_to_int.h): int64 through a 64-bit conversion (INT64_MIN for NaN,
    # an infinity or what int64 does not hold), int32 and narrower through a 32-bit one
    # (INT32_MIN, then wrapped: 3e9 is 0 as int16, 70000.5 is 4464), uint64 through v - 2^63
    # (an infinity is 0). isomer went through int64 for every target (int32 of NaN was 0).
    # The Div halves the cast value inside the runtime's fused integer kernel, which must
    # hold it in its own type first (300.7 is 44 as int8, 22 halved; isomer gave -106).
    # uint32 is left out: ONNX Runtime's depends on an element's position.
    vi = helper.make_tensor_value_info
    t = helper.tensor_dtype_to_np_dtype(to)
    halve = to != TensorProto.UINT64  # isomer's uint64 Div is signed (left)
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=to),
             helper.make_node("Div", ["c", "two"], ["y"]) if halve else helper.make_node("Identity", ["c"], ["y"])]
    inits = [numpy_helper.from_array(np.array([2], t), "two")] if halve else []
    path = _save(tmp_path, "cast", nodes, [vi("x", TensorProto.FLOAT, [11])], inits, to, [11])
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -2.5, 7.9, 3e9, -3e9, 300.7, 70000.5, 1e19], np.float32)
    want = ort_outputs(path, {"x": x})
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, {"x": x}, "--no-onnxruntime"), want)
    np.testing.assert_array_equal(_reference(tmp_path, path, {"x": x}), want)
    np.testing.assert_array_equal(_optimized(isomer_bin, tmp_path, path, {"x": x}), want)
    # The same numbers as a constant: folded by optimize, computed by run.
    nodes[0] = helper.make_node("Cast", ["k"], ["c"], to=to)
    inits.append(numpy_helper.from_array(x, "k"))
    folded = _save(tmp_path, "cast_const", nodes, [vi("z", TensorProto.FLOAT, [1])], inits, to, [11])
    p = isomer_cli(isomer_bin, "optimize", folded, "-o", tmp_path / "folded.onnx", "--budget", "1", "--threads", "1",
                   "--allow-nonfinite")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(ort_outputs(tmp_path / "folded.onnx", {"z": np.zeros(1, np.float32)}), want)
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, folded, {"z": np.zeros(1, np.float32)},
                                       "--no-onnxruntime"), want)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32])
def test_narrow_integer_arithmetic_wraps_inside_a_fused_kernel(isomer_bin, tmp_path, dtype):
    # The runtime's fused integer kernels compute in int64: a sum past the type's range was
    # handed to the next operator unwrapped (int8 100 + 100 halved gave 100, not -28).
    vi = helper.make_tensor_value_info
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Div", ["s", "two"], ["y"])]
    info = np.iinfo(dtype)
    x = np.array([info.max, info.max // 2 + 3, info.min, info.min + 1, 3, 0], dtype)
    path = _save(tmp_path, "wrap", nodes, [vi("x", to, [6])], [numpy_helper.from_array(np.array([2], dtype), "two")],
                 to, [6])
    want = ort_outputs(path, {"x": x})
    for extra in ([], ["--no-fuse"]):
        np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, {"x": x}, "--no-onnxruntime", *extra), want)
    np.testing.assert_array_equal(_reference(tmp_path, path, {"x": x}), want)


def test_exact_extraction_of_a_wide_sum_stays_near_the_budget(isomer_bin, tmp_path):
    # A 200-leaf Add/Mul tree paired at random: associativity and commutativity fill the
    # e-graph, and the ILP over it has 18,000 rows. Building them (each appended row
    # copied the whole matrix) took 8 s of processor time and 30 s on a busy machine,
    # past a search budget of 2 s. Processor time, not wall-clock: the machine is shared.
    import random
    rng = random.Random(0)
    vi = helper.make_tensor_value_info
    nodes, inits, vals = [], [], []
    for i in range(200):
        if i % 3 == 0:
            inits.append(numpy_helper.from_array(np.full(8, 1.0 + (i % 5) / 8, np.float32), f"k{i}"))
            vals.append(f"k{i}")
        else:
            nodes.append(helper.make_node(["Relu", "Neg", "Abs"][i % 3], ["x"], [f"l{i}"]))
            vals.append(f"l{i}")
    k = 0
    while len(vals) > 1:
        i = rng.randrange(len(vals) - 1)
        a, b = vals.pop(i), vals.pop(i)
        nodes.append(helper.make_node("Add" if k % 4 else "Mul", [a, b], [f"t{k}"]))
        vals.append(f"t{k}")
        k += 1
    nodes.append(helper.make_node("Tanh", [vals[0]], ["y"]))
    path = _save(tmp_path, "wide_sum", nodes, [vi("x", TensorProto.FLOAT, [4, 8])], inits, TensorProto.FLOAT, [4, 8])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = isomer_cli(isomer_bin, "optimize", path, "-o", tmp_path / "out.onnx", "--budget", "2", "--threads", "1",
                "--no-guard", "--cost", "none", "--report-json", tmp_path / "r.json")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert p.returncode == 0, p.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 5, (cpu, p.stdout)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min", "Mean"])
def test_variadic_node_of_a_hundred_inputs_runs(isomer_bin, tmp_path, op):
    # The runtime's pointwise program holds 48 registers: a Sum of 25 or more inputs was
    # "not runnable on the isomer runtime: pointwise program too long" (the search's
    # parallel-convolution blow-up ends in one); it is imported as a tree of 16-input nodes
    # (a Mean as scaled Sums under one Mean).
    vi = helper.make_tensor_value_info
    count = 100
    nodes = [helper.make_node("Relu", ["x"], ["r"])]
    nodes += [helper.make_node("Mul", ["r", f"k{i}"], [f"m{i}"]) for i in range(count)]
    nodes.append(helper.make_node(op, [f"m{i}" for i in range(count)], ["y"], name="wide"))
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), f"k{i}") for i in range(count)]
    path = _save(tmp_path, "wide", nodes, [vi("x", TensorProto.FLOAT, [4, 8])], inits, TensorProto.FLOAT, [4, 8])
    feeds = {"x": rng.standard_normal((4, 8)).astype(np.float32)}
    want = ort_outputs(path, feeds)
    np.testing.assert_allclose(_run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime"), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_optimized(isomer_bin, tmp_path, path, feeds), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_crop_resize_to_constant_sizes_with_a_fed_roi_runs(isomer_bin, tmp_path, mode):
    # A tf_crop_and_resize Resize whose roi is an input (a NaN-probing campaign fed one):
    # its sizes fix the output, but the shape was left unknown and the runtime refused
    # the model ("output shape [?,?,?,?] is not known at compile time").
    vi = helper.make_tensor_value_info
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode=mode,
                            coordinate_transformation_mode="tf_crop_and_resize")
    path = _save(tmp_path, "crop", [node], [vi("x", TensorProto.FLOAT, [1, 1, 4, 4]), vi("roi", TensorProto.FLOAT, [8])],
                 [numpy_helper.from_array(np.array([1, 1, 3, 3], np.int64), "sizes")], TensorProto.FLOAT, [1, 1, 3, 3])
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4),
             "roi": np.array([0, 0, 0.1, 0.2, 1, 1, 0.8, 0.9], np.float32)}
    want = ort_outputs(path, feeds)
    np.testing.assert_allclose(_run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime"), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["Div", "Mod", "Max", "Less"])
def test_uint64_past_int64_max_is_not_folded_as_signed(isomer_bin, tmp_path, op):
    # isomer's evaluator computes integers in int64: optimize folded Div(2^64 - 300, 2) of
    # uint64 constants as -150 and wrote 2^64 - 150 where ONNX Runtime computes 2^63 - 150.
    # The evaluator reads uint64 as unsigned now (ops/kernels.h), so such folds are exact.
    u64 = TensorProto.UINT64
    a = numpy_helper.from_array(np.array([2**64 - 300, 2**63 + 7, 5], np.uint64), "a")
    b = numpy_helper.from_array(np.array([2, 3, 2**63 + 1], np.uint64), "b")
    out = TensorProto.BOOL if op == "Less" else u64
    nodes = [helper.make_node(op, ["a", "b"], ["d"]), helper.make_node("Cast", ["d"], ["dc"], to=u64),
             helper.make_node("Add", ["x", "dc"], ["y"])]
    vi = helper.make_tensor_value_info
    path = _save(tmp_path, "u64", nodes, [vi("x", u64, [3])], [a, b], u64, [3])
    feeds = {"x": np.zeros(3, np.uint64)}
    want = ort_outputs(path, feeds)
    np.testing.assert_array_equal(_optimized(isomer_bin, tmp_path, path, feeds), want)


# uint64 past INT64_MAX (hostile28): isomer holds integers in int64, where such a value is
# negative; Div, Mod, Max, Min, the comparisons, Abs, Sign, Clip, the extreme-value
# reductions, ArgMax, TopK, ScatterElements' and ScatterND's max and Cast to a float gave a signed answer in the reference
# evaluator and in the runtime's integer kernels. numpy computes uint64 exactly.
U64_A = np.array([2**64 - 300, 2**63 + 7, 5, 2**63, 2**64 - 1, 2**63 - 1], np.uint64)
U64_B = np.array([2, 3, 2**63 + 1, 2**63 - 1, 2**64 - 2, 2**63], np.uint64)
U64_BINARY = {
    "Div": lambda a, b: a // b, "Mod": lambda a, b: a % b, "Max": np.maximum, "Min": np.minimum,
    "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater, "GreaterOrEqual": np.greater_equal,
}


def _u64_binary_model(tmp_path, op, fed):
    """op(a, b) + 0 (Cast to uint64 where it compares): a and b fed or constant."""
    u64, vi = TensorProto.UINT64, helper.make_tensor_value_info
    cmp = op not in ("Div", "Mod", "Max", "Min")
    nodes = [helper.make_node(op, ["a", "b"], ["d"]), helper.make_node("Cast", ["d"], ["dc"], to=u64),
             helper.make_node("Add", ["x" if fed else "z", "dc" if cmp else "d"], ["y"])]
    inputs = [vi(n, u64, [6]) for n in ("a", "b", "x")] if fed else [vi("z", u64, [6])]
    inits = [] if fed else [numpy_helper.from_array(U64_A, "a"), numpy_helper.from_array(U64_B, "b")]
    feeds = {"a": U64_A, "b": U64_B, "x": np.zeros(6, np.uint64)} if fed else {"z": np.zeros(6, np.uint64)}
    want = U64_BINARY[op](U64_A, U64_B).astype(np.uint64)
    return _save(tmp_path, f"u64{op}", nodes, inputs, inits, u64, [6]), feeds, want


@pytest.mark.parametrize("op", sorted(U64_BINARY))
def test_uint64_binary_ops_are_unsigned(isomer_bin, tmp_path, op):
    path, feeds, want = _u64_binary_model(tmp_path, op, fed=True)
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime"), want)
    np.testing.assert_array_equal(_reference(tmp_path, path, feeds), want)
    # Constant: optimize folds it (its check runs the reference evaluator on the original).
    const_path, const_feeds, _ = _u64_binary_model(tmp_path, op, fed=False)
    opt = _optimized(isomer_bin, tmp_path, const_path, const_feeds, run_ort=False)
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, opt, const_feeds, "--no-onnxruntime"), want)


def _u64_unary_cases():
    a = U64_A.reshape(2, 3)
    lo, hi = np.uint64(2**63 - 1), np.uint64(2**64 - 2)
    scattered = np.vstack([np.maximum(a[0], np.maximum(*U64_B.reshape(2, 3))), a[1]])  # both updates into row 0
    return {
        "Abs": ([], {}, a, TensorProto.UINT64),
        "Sign": ([], {}, np.sign(a), TensorProto.UINT64),
        "Clip": (["lo", "hi"], {}, np.clip(a, lo, hi), TensorProto.UINT64),
        "ReduceMax": (["axes"], {"keepdims": 0}, a.max(axis=1), TensorProto.UINT64),
        "ReduceMin": (["axes"], {"keepdims": 0}, a.min(axis=1), TensorProto.UINT64),
        "ReduceMean": (["axes"], {"keepdims": 0}, a.sum(axis=1) // np.uint64(3), TensorProto.UINT64),
        "ReduceL1": (["axes"], {"keepdims": 0}, a.sum(axis=1), TensorProto.UINT64),
        "ScatterElements": (["idx", "upd"], {"reduction": "max"}, scattered, TensorProto.UINT64),
        "ScatterND": (["nd_idx", "upd"], {"reduction": "max"}, scattered, TensorProto.UINT64),
        "ArgMax": ([], {"axis": 1, "keepdims": 0}, a.argmax(axis=1), TensorProto.INT64),
        "ArgMin": ([], {"axis": 1, "keepdims": 0}, a.argmin(axis=1), TensorProto.INT64),
        "TopK": (["k"], {}, np.sort(a, axis=1)[:, ::-1][:, :2], TensorProto.UINT64),
        "Cast": ([], {"to": TensorProto.DOUBLE}, a.astype(np.float64), TensorProto.DOUBLE),
    }


@pytest.mark.parametrize("op", sorted(_u64_unary_cases()))
def test_uint64_orders_and_converts_as_unsigned(isomer_bin, tmp_path, op):
    extra, attrs, want, out_type = _u64_unary_cases()[op]
    u64, vi = TensorProto.UINT64, helper.make_tensor_value_info
    inits = [numpy_helper.from_array(np.array(2**63 - 1, np.uint64), "lo"),
             numpy_helper.from_array(np.array(2**64 - 2, np.uint64), "hi"),
             numpy_helper.from_array(np.array([2], np.int64), "k"), numpy_helper.from_array(np.array([1], np.int64), "axes"),
             numpy_helper.from_array(np.zeros((2, 3), np.int64), "idx"), numpy_helper.from_array(U64_B.reshape(2, 3), "upd"),
             numpy_helper.from_array(np.zeros((2, 1), np.int64), "nd_idx")]
    outs = ["y", "i"] if op == "TopK" else ["y"]
    nodes = [helper.make_node(op, ["x", *extra], outs, **attrs)]
    inits = [t for t in inits if t.name in extra]
    path = _save(tmp_path, f"u64{op}", nodes, [vi("x", u64, [2, 3])], inits, out_type, list(want.shape))
    feeds = {"x": U64_A.reshape(2, 3)}
    np.testing.assert_array_equal(_run(isomer_bin, tmp_path, path, feeds, "--no-onnxruntime"), want)
    np.testing.assert_array_equal(_reference(tmp_path, path, feeds), want)
