"""The eighth family of the hostile-model campaign (scripts/hostile_campaign.py): VALID models
whose numbers sit at the edges of their types, and graphs that make the search blow up.

- Integer arithmetic that C++ leaves undefined or that wraps: Div and Mod by zero and of
  INT_MIN by -1 (SIGFPE on x86), Neg and Abs of INT_MIN, Pow of integers to negative
  exponents, ReduceProd, CumSum and Mul that overflow, BitShift by the bit width or more, and
  int64 values past 2^53 (a double does not hold them) through Neg, Abs, Relu, Clip and Sign;
  each with constant operands (folded by `optimize`) or fed at run time.
- Cast of NaN, +-Inf, 1e30 and values past the target's range from float to int8, uint8,
  int32, int64 and bool (a plain C++ cast is undefined behaviour), constant or fed.
- NaN, +-Inf, -0.0 and denormals fed through what rewrite rules and fusions touch: x*0, x-x,
  x/x, x+0 (-0.0), 0-x against Neg, Max/Min of x with itself and with NaN, Pow(x, 0.5)
  against Sqrt, x/c against x*(1/c) for a denormal c, Relu and Clip after Conv and MatMul,
  Softmax of rows masked to -inf, LayerNormalization and InstanceNormalization of constant
  rows, Sqrt and Log of negatives, Clip with min > max, Round of halves, Exp, Sigmoid and Tanh
  at the ends of the range, sums of +Inf and -Inf.
- Search blow-ups: hundreds of parallel MatMuls or Convs reading one input, Add/Mul trees of
  200 leaves, a thousand Transpose/Reshape pairs, a thousand Concat/Split pairs.
- The source model itself (a node case, or a whole model with --real) fed a few NaN, +-Inf,
  -0.0 or denormal elements among normal numbers.

Where ONNX leaves the result undefined (integer division by zero, INT_MIN / -1, a shift by
the width or more, NaN cast to an integer) ONNX Runtime's outputs are no reference: the case
runs without one (a crash, hang or unclear message is still one). Each mutator but the last
builds a small model of its own (the source is ignored) and returns the tuple the other families do
(hostile_mutators_semantic.py).
"""
import numpy as np
from onnx import TensorProto, helper

from hostile_mutators_semantic import _init, _model, _vi

INT_TYPES = {"int32": (TensorProto.INT32, np.int32), "int64": (TensorProto.INT64, np.int64)}
# Float values that no rule may treat as ordinary numbers.
SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1.4e-40, 1.0, -1.0, 0.5, -2.5, 3.0e38, -3.0e38,
                    65504.0, 1e-30, 2.5], np.float32)


def _special(shape, rng, sums=False):
    """A float32 array of `shape` drawn from SPECIAL (every value at least once where it fits).
    For sums (convolutions, products) without the values near float's end: whether
    3e38 + 3e38 - 3e38 overflows depends on the order of the sum, which ONNX leaves open."""
    n = int(np.prod(shape))
    vals = np.resize(SPECIAL[np.abs(SPECIAL) < 1e30] if sums else SPECIAL, n)
    np.random.default_rng(rng.randrange(1 << 30)).shuffle(vals)
    return vals.reshape(shape).astype(np.float32)


def _int_case(rng, t):
    """(node builder, left, right, defined) for one integer edge case of numpy type t."""
    lo, hi = int(np.iinfo(t).min), int(np.iinfo(t).max)
    how = rng.choice(["div_zero", "div_min", "mod_zero", "mod_min", "fmod_min", "neg_min", "abs_min", "pow_neg",
                      "mul_wrap", "add_wrap", "reduceprod_wrap", "cumsum_wrap", "bitshift_wide", "big_neg",
                      "big_abs", "big_relu", "big_clip", "big_sign", "big_div"])
    a = np.array([lo, hi, -7, 7, 0, lo + 1], t)
    if how in ("div_zero", "mod_zero"):
        b, defined = np.array([0, 0, 2, 0, 0, -1], t), False
    elif how in ("div_min", "mod_min", "fmod_min"):
        b, defined = np.array([-1, -1, -1, 3, -1, -1], t), how != "div_min"  # x % -1 is 0
    elif how == "pow_neg":
        a, b, defined = np.array([2, -1, 1, 7, 3, -2], t), np.array([-1, -3, -5, -1, 0, -2], t), True
    elif how in ("mul_wrap", "add_wrap"):
        b, defined = np.array([hi, hi, 3, lo, 5, 2], t), True
    elif how == "bitshift_wide":
        t = np.uint32 if t == np.int32 else np.uint64
        bits = np.iinfo(t).bits
        a, b, defined = np.array([1, 3, 255, 1, 7, 1], t), np.array([bits, bits + 1, 200, 0, bits - 1, 63], t), False
    elif how.startswith("big_"):
        a = np.array([lo, hi, (1 << 53) + 1, -(1 << 53) - 3, (1 << 60) + 7, -5], np.int64)
        # Div of these is defined: no zero divisor, and -1 never meets INT_MIN.
        b, defined = np.array([3, -3, 7, 1, -1, 9], np.int64), True
        if t == np.int32:
            a = np.array([lo, hi, (1 << 24) + 1, -(1 << 24) - 3, (1 << 30) + 7, -5], t)
            b = b.astype(t)
    else:  # no zero among them: a product that overflows stays non-zero
        a[4] = 3
        b, defined = a[::-1].copy(), True
    op = {"div_zero": "Div", "div_min": "Div", "mod_zero": "Mod", "mod_min": "Mod", "fmod_min": "Mod",
          "neg_min": "Neg", "abs_min": "Abs", "pow_neg": "Pow", "mul_wrap": "Mul", "add_wrap": "Add",
          "reduceprod_wrap": "ReduceProd", "cumsum_wrap": "CumSum", "bitshift_wide": "BitShift", "big_neg": "Neg",
          "big_abs": "Abs", "big_relu": "Relu", "big_clip": "Clip", "big_sign": "Sign", "big_div": "Div"}[how]
    return how, op, a, b, defined


def m_int_edges(m, rng, wd):
    """Integer operators at their types' edges, with constant operands (which `optimize` folds)
    or operands fed at run time."""
    tname = rng.choice(sorted(INT_TYPES))
    _, t = INT_TYPES[tname]
    how, op, a, b, defined = _int_case(rng, t)
    elem = helper.np_dtype_to_tensor_dtype(a.dtype)
    fed = rng.random() < 0.5
    ins = ["a"] if op in ("Neg", "Abs", "Relu", "Sign", "ReduceProd") else ["a", "b"]
    attrs = {}
    extra_inits = []
    if op == "Mod":
        attrs["fmod"] = 1 if how == "fmod_min" else 0
    elif op == "BitShift":
        attrs["direction"] = rng.choice(["LEFT", "RIGHT"])
    elif op == "ReduceProd":
        attrs["keepdims"] = 0
    elif op == "CumSum":
        ins = ["a", "axis"]
        extra_inits.append(_init("axis", 0))
    elif op == "Clip":
        ins = ["a", "cmin", "cmax"]
        extra_inits += [_init("cmin", a[3] - 1, a.dtype), _init("cmax", a[2] - 1, a.dtype)]
    nodes = [helper.make_node(op, ins, ["r"], name=f"edge_{op}", **attrs)]
    # Added to an input of the same type: the result is not a constant output on its own.
    nodes.append(helper.make_node("Add", ["r", "z"], ["y"]))
    out_dims = [] if op == "ReduceProd" else [6]
    inputs = [_vi("z", elem, out_dims)]
    feeds = {"z": np.zeros(out_dims, a.dtype)}
    inits = list(extra_inits)
    for name, v in (("a", a), ("b", b)):
        if name not in ins:
            continue
        if fed:
            inputs.append(_vi(name, elem, [6]))
            feeds[name] = v
        else:
            inits.append(_init(name, v, v.dtype))
    run = {"feeds": feeds}
    if not defined:
        run["no_reference"] = True
    model = _model(nodes, inputs, [_vi("y", elem, out_dims)], inits)
    return model, f"int_edges {how} {op} {a.dtype} {'fed' if fed else 'constant'}", None, [], None, run


def m_cast_edges(m, rng, wd):
    """Cast of NaN, +-Inf, 1e30 and values past the target's range from float to an integer
    type (undefined in ONNX and in C++), or of in-range values (defined: truncation)."""
    to = rng.choice(["INT8", "UINT8", "INT32", "INT64", "UINT16", "BOOL", "FLOAT16"])
    elem = getattr(TensorProto, to)
    kind = rng.choice(["nonfinite", "out_of_range", "in_range"])
    src_t = rng.choice([np.float32, np.float64])
    if kind == "nonfinite":
        v = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0, 2.0], src_t)
    elif kind == "out_of_range":
        v = np.array([1e30, -1e30, 3e9, -3e9, 300.0, -129.0], src_t)
    else:
        v = np.array([2.9, -2.9, 0.5, -0.0, 100.0, 1e-40], src_t)
    defined = kind == "in_range" and to not in ("UINT8", "UINT16") or to in ("BOOL", "FLOAT16")
    fed = rng.random() < 0.5
    src_elem = helper.np_dtype_to_tensor_dtype(np.dtype(src_t))
    nodes = [helper.make_node("Cast", ["v"], ["c"], name="edge_cast", to=elem),
             helper.make_node("Identity", ["c"], ["y"])] if fed else \
        [helper.make_node("Cast", ["v"], ["c"], name="edge_cast", to=elem),
         helper.make_node("Cast", ["z"], ["zc"], to=elem), helper.make_node("Max" if to != "BOOL" else "Or",
                                                                             ["c", "zc"], ["y"])]
    if fed:
        inputs, inits, feeds = [_vi("v", src_elem, [6])], [], {"v": v}
    else:
        inputs, inits = [_vi("z", TensorProto.INT8, [6])], [_init("v", v, src_t)]
        feeds = {"z": np.full(6, -128, np.int8)}
        if to == "BOOL":
            feeds["z"] = np.zeros(6, np.int8)
    run = {"feeds": feeds}
    if not defined:
        run["no_reference"] = True
    model = _model(nodes, inputs, [_vi("y", elem, [6])], inits)
    return model, f"cast_edges {kind} {np.dtype(src_t).name} to {to} {'fed' if fed else 'constant'}", None, [], \
        None, run


def _rule_probe(how, rng):
    """(nodes, inputs, inits, output dims, feeds) for one rewrite/fusion probe fed special floats."""
    x = _vi("x", dims=[4, 8])
    feeds = {"x": _special((4, 8), rng)}
    f32 = np.float32
    mk = helper.make_node
    if how == "mul_zero":
        return [mk("Mul", ["x", "zero"], ["y"])], [x], [_init("zero", np.zeros(8), f32)], [4, 8], feeds
    if how in ("sub_self", "div_self", "max_self", "min_self"):
        op = {"sub_self": "Sub", "div_self": "Div", "max_self": "Max", "min_self": "Min"}[how]
        return [mk(op, ["x", "x"], ["y"])], [x], [], [4, 8], feeds
    if how == "add_zero_sign":  # 1 / (x + 0): -0.0 + 0 is +0, so x + 0 -> x flips -inf to +inf
        return [mk("Add", ["x", "zero"], ["s"]), mk("Reciprocal", ["s"], ["y"])], [x], \
            [_init("zero", np.zeros(8), f32)], [4, 8], feeds
    if how == "sub_from_zero":  # 0 - x is +0 at x = 0, Neg(x) is -0
        return [mk("Sub", ["zero", "x"], ["s"]), mk("Reciprocal", ["s"], ["y"])], [x], \
            [_init("zero", np.zeros(8), f32)], [4, 8], feeds
    if how == "double_neg_mul":  # x * -1 * -1
        return [mk("Mul", ["x", "m1"], ["a"]), mk("Mul", ["a", "m1"], ["y"])], [x], \
            [_init("m1", np.full(8, -1.0), f32)], [4, 8], feeds
    if how == "minmax_nan":
        return [mk("Max", ["x", "c"], ["a"]), mk("Min", ["a", "x"], ["y"])], [x], \
            [_init("c", np.linspace(-1, 1, 8), f32)], [4, 8], feeds
    if how == "pow_half":  # Pow(-0, 0.5) = +0 and Pow(-inf, 0.5) = +inf, Sqrt gives -0 and NaN
        return [mk("Pow", ["x", "e"], ["y"])], [x], [_init("e", 0.5, f32)], [4, 8], feeds
    if how == "pow_small":
        e = rng.choice([0.0, 1.0, 2.0, 3.0, 4.0, -1.0, -2.0, 1.5, -0.5])
        return [mk("Pow", ["x", "e"], ["y"])], [x], [_init("e", e, f32)], [4, 8], feeds
    if how == "div_denormal":  # x / c -> x * (1 / c) overflows to inf for a denormal c
        return [mk("Div", ["x", "c"], ["y"])], [x], [_init("c", np.full(8, 1e-40), f32)], [4, 8], feeds
    if how in ("conv_relu", "conv_clip"):
        xi = _vi("x", dims=[1, 2, 4, 4])
        feeds = {"x": _special((1, 2, 4, 4), rng, sums=True)}
        w = np.random.default_rng(3).standard_normal((3, 2, 3, 3)).astype(f32)
        act = mk("Relu", ["c"], ["y"]) if how == "conv_relu" else mk("Clip", ["c", "lo", "hi"], ["y"])
        inits = [_init("w", w, f32), _init("b", [0.1, -0.2, 0.0], f32)]
        if how == "conv_clip":
            inits += [_init("lo", -1.0, f32), _init("hi", 6.0, f32)]
        return [mk("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), act], [xi], inits, [1, 3, 4, 4], feeds
    if how in ("matmul_relu", "matmul_clip", "gemm_relu"):
        feeds = {"x": _special((4, 8), rng, sums=True)}
        w = np.random.default_rng(4).standard_normal((8, 5)).astype(f32)
        if how == "gemm_relu":
            mm = mk("Gemm", ["x", "w", "b"], ["c"])
        else:
            mm = mk("MatMul", ["x", "w"], ["m"])
        act = mk("Clip", ["c", "lo", "hi"], ["y"]) if how == "matmul_clip" else mk("Relu", ["c"], ["y"])
        nodes = [mm] if how == "gemm_relu" else [mm, mk("Add", ["m", "b"], ["c"])]
        inits = [_init("w", w, f32), _init("b", np.linspace(-1, 1, 5), f32), _init("lo", 0.0, f32),
                 _init("hi", 6.0, f32)]
        return nodes + [act], [x], inits, [4, 5], feeds
    if how == "softmax_masked":  # a row masked entirely to -inf: Softmax is NaN there
        mask = np.zeros((4, 8), f32)
        mask[1, :] = -np.inf
        mask[2, :4] = -np.inf
        mask[3, :] = np.finfo(f32).min
        feeds = {"x": np.random.default_rng(5).standard_normal((4, 8)).astype(f32), "mask": mask}
        return [mk("Add", ["x", "mask"], ["s"]), mk("Softmax", ["s"], ["y"], axis=-1)], \
            [x, _vi("mask", dims=[4, 8])], [], [4, 8], feeds
    if how in ("layernorm_const", "instancenorm_const"):
        v = np.random.default_rng(6).standard_normal((4, 8)).astype(f32)
        v[0, :] = 3.0
        v[2, :] = 0.0
        v[3, :] = 1e30
        feeds = {"x": v}
        if how == "layernorm_const":
            return [mk("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)], [x], \
                [_init("g", np.ones(8), f32), _init("b", np.full(8, 0.5), f32)], [4, 8], feeds
        feeds = {"x": v.reshape(1, 4, 8)}
        return [mk("InstanceNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)], [_vi("x", dims=[1, 4, 8])], \
            [_init("g", np.ones(4), f32), _init("b", np.full(4, 0.5), f32)], [1, 4, 8], feeds
    if how == "sqrt_log_neg":
        return [mk("Sqrt", ["x"], ["a"]), mk("Log", ["x"], ["b"]), mk("Add", ["a", "b"], ["s"]),
                mk("Mul", ["s", "zero"], ["y"])], [x], [_init("zero", np.zeros(8), f32)], [4, 8], feeds
    if how == "clip_inverted":  # min > max: every value becomes max (ONNX, opset 13 on)
        return [mk("Clip", ["x", "lo", "hi"], ["y"])], [x], [_init("lo", 2.0, f32), _init("hi", -1.0, f32)], \
            [4, 8], feeds
    if how == "round_half":
        v = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5] * 4, f32).reshape(4, 8)
        v[3] = _special((8,), rng)
        return [mk("Round", ["x"], ["y"])], [x], [], [4, 8], {"x": v}
    if how == "transcendental_ends":
        op = rng.choice(["Exp", "Sigmoid", "Tanh", "Softplus", "Erf", "Gelu", "HardSwish", "Selu", "Elu"])
        return [mk(op, ["x"], ["y"])], [x], [], [4, 8], feeds
    if how == "reduce_inf":
        op = rng.choice(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp"])
        return [mk(op, ["x", "axes"], ["y"], keepdims=1)], [x], [_init("axes", [1])], [4, 1], feeds
    raise ValueError(how)


RULE_PROBES = ["mul_zero", "sub_self", "div_self", "max_self", "min_self", "add_zero_sign", "sub_from_zero",
               "double_neg_mul", "minmax_nan", "pow_half", "pow_small", "div_denormal", "conv_relu", "conv_clip",
               "matmul_relu", "matmul_clip", "gemm_relu", "softmax_masked", "layernorm_const", "instancenorm_const",
               "sqrt_log_neg", "clip_inverted", "round_half", "transcendental_ends", "reduce_inf"]


def m_nonfinite_rules(m, rng, wd):
    """NaN, +-Inf, -0.0 and denormals fed through patterns that rewrite rules and fusions
    touch: `run` and the model `optimize` writes must compute what ONNX Runtime computes on the
    original, NaN positions and infinities included."""
    how = rng.choice(RULE_PROBES)
    nodes, inputs, inits, dims, feeds = _rule_probe(how, rng)
    ops = "+".join(n.op_type for n in nodes)
    return _model(nodes, inputs, [_vi("y", dims=dims)], inits), f"nonfinite_rules {how} {ops}", None, [], None, \
        {"feeds": feeds}


def m_search_blowup(m, rng, wd):
    """Graphs whose rewrites multiply: hundreds of parallel MatMuls or Convs on one input
    (merging them pairwise), a 200-leaf Add/Mul tree (associativity and commutativity), a
    thousand Transpose/Reshape pairs and a thousand Concat/Split pairs. `optimize` must stay
    within its budget and its memory."""
    how = rng.choice(["parallel_matmul", "parallel_conv", "wide_tree", "transpose_reshape", "concat_split"])
    mk = helper.make_node
    r = np.random.default_rng(11)
    f32 = np.float32
    nodes, inits = [], []
    if how == "parallel_matmul":
        count = rng.choice([100, 300, 500])
        x = _vi("x", dims=[4, 16])
        for i in range(count):
            inits.append(_init(f"w{i}", r.standard_normal((16, 8)) / 4, f32))
            nodes.append(mk("MatMul", ["x", f"w{i}"], [f"m{i}"]))
        outs = [f"m{i}" for i in range(count)]
        if rng.random() < 0.5:
            nodes.append(mk("Sum", outs, ["y"]))
            dims = [4, 8]
        else:
            nodes.append(mk("Concat", outs, ["y"], axis=1))
            dims = [4, 8 * count]
        return _model(nodes, [x], [_vi("y", dims=dims)], inits), f"search_blowup {how} {count} {nodes[-1].op_type}"
    if how == "parallel_conv":
        count = rng.choice([100, 300])
        x = _vi("x", dims=[1, 4, 8, 8])
        for i in range(count):
            inits.append(_init(f"w{i}", r.standard_normal((4, 4, 1, 1)) / 2, f32))
            nodes.append(mk("Conv", ["x", f"w{i}"], [f"c{i}"]))
            nodes.append(mk("Relu", [f"c{i}"], [f"r{i}"]))
        nodes.append(mk("Sum", [f"r{i}" for i in range(count)], ["y"]))
        return _model(nodes, [x], [_vi("y", dims=[1, 4, 8, 8])], inits), f"search_blowup {how} {count}"
    if how == "wide_tree":
        leaves = rng.choice([200, 400])
        x = _vi("x", dims=[4, 8])
        vals = []
        for i in range(leaves):
            if i % 3 == 0:
                inits.append(_init(f"k{i}", np.full(8, 1.0 + (i % 5) / 8), f32))
                vals.append(f"k{i}")
            else:
                nodes.append(mk(["Relu", "Neg", "Abs"][i % 3], ["x"], [f"l{i}"]))
                vals.append(f"l{i}")
        shuffle = rng.random() < 0.5
        k = 0
        while len(vals) > 1:
            i = rng.randrange(len(vals) - 1) if shuffle else 0
            a, b = vals.pop(i), vals.pop(i)
            nodes.append(mk("Add" if k % 4 else "Mul", [a, b], [f"t{k}"]))
            vals.append(f"t{k}")
            k += 1
        nodes.append(mk("Tanh", [vals[0]], ["y"]))  # bounded: a product of 60 sums stays finite after it
        return _model(nodes, [x], [_vi("y", dims=[4, 8])], inits), \
            f"search_blowup {how} {leaves} {'random' if shuffle else 'chain'}"
    pairs = rng.choice([500, 1000])
    prev = "x"
    if how == "transpose_reshape":
        x = _vi("x", dims=[4, 6, 8])
        inits.append(_init("shape", [6, 4, 8]))
        inits.append(_init("back", [4, 6, 8]))
        for i in range(pairs):
            nodes.append(mk("Transpose", [prev], [f"t{i}"], perm=[1, 0, 2]))
            nodes.append(mk("Reshape", [f"t{i}", "back" if i % 2 else "shape"], [f"r{i}"]))
            prev = f"r{i}"
        # The shape after pair i is [4, 6, 8] (odd i) or [6, 4, 8].
        dims = [4, 6, 8] if (pairs - 1) % 2 else [6, 4, 8]
        nodes.append(mk("Identity", [prev], ["y"]))
        return _model(nodes, [x], [_vi("y", dims=dims)], inits), f"search_blowup {how} {pairs}"
    x = _vi("x", dims=[4, 8])
    inits.append(_init("split", [4, 4]))
    for i in range(pairs):
        nodes.append(mk("Split", [prev, "split"], [f"a{i}", f"b{i}"], axis=1))
        nodes.append(mk("Concat", [f"b{i}", f"a{i}"] if i % 2 else [f"a{i}", f"b{i}"], [f"c{i}"], axis=1))
        prev = f"c{i}"
    nodes.append(mk("Identity", [prev], ["y"]))
    return _model(nodes, [x], [_vi("y", dims=[4, 8])], inits), f"search_blowup {how} {pairs}"


def m_nonfinite_feeds(m, rng, wd):
    """The source model itself (a node case, or a whole model with --real) fed NaN, +-Inf,
    -0.0 and denormals in a few elements of each float input, normal numbers elsewhere:
    whatever its rules and fusions rewrite must keep ONNX Runtime's outputs on them."""
    inits = {t.name for t in m.graph.initializer}
    np_rng = np.random.default_rng(rng.randrange(1 << 30))
    feeds = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            return None
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in tt.shape.dim]
        if any(d <= 0 for d in dims) or int(np.prod(dims)) > (1 << 22):
            return None
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dt == np.bool_:
            feeds[vi.name] = np_rng.random(dims) < 0.5
        elif np.issubdtype(dt, np.integer):
            feeds[vi.name] = np_rng.integers(0, 2, dims).astype(dt)
        elif dt in (np.float32, np.float16, np.float64):
            a = np_rng.standard_normal(dims).astype(dt)
            flat = a.reshape(-1)
            which = rng.choice(["nan", "inf", "neg_zero", "denormal", "mixed"])
            vals = {"nan": [np.nan], "inf": [np.inf, -np.inf], "neg_zero": [-0.0], "denormal": [1e-45, -1.4e-40],
                    "mixed": [np.nan, np.inf, -np.inf, -0.0, 1e-45]}[which]
            for k in range(min(flat.size, rng.choice([1, 2, 5]))):
                flat[rng.randrange(flat.size)] = vals[k % len(vals)]
            feeds[vi.name] = a
        else:
            return None
    if not any(np.issubdtype(v.dtype, np.floating) for v in feeds.values()):
        return None
    ops = sorted({n.op_type for n in m.graph.node})
    return m, f"nonfinite_feeds {which} {'+'.join(ops[:8])}", None, [], None, {"feeds": feeds}


MUTATORS = {f.__name__[2:]: f for f in [m_int_edges, m_cast_edges, m_nonfinite_rules, m_search_blowup,
                                        m_nonfinite_feeds]}
