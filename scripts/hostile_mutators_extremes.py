"""The tenth family of the hostile-model campaign (scripts/hostile_campaign.py): shapes and
versions at their extremes, where the nine others mutate values and names. Axes of 0
elements in the middle of a graph (reductions, products, normalizations and index operators
over nothing); sizes computed at run time from Shape by arithmetic that goes negative or
wraps, feeding Reshape, Expand, Tile, ConstantOfShape, Range, Slice and Pad; operators at an
opset where their attributes became inputs (or the reverse: inputs at an opset that still
had the attribute); optional outputs wired to graph outputs, left "" between named ones, or
read by another node; and values declared with 2^31 to 2^62 elements that a model does not
hold (a graph input, an initializer without its data, value_info).

Each mutator builds a small model of its own (the source is ignored) and returns (model,
note) or (model, note, None, [], reference, run), as hostile_mutators_semantic.py's do.
"""
import numpy as np
from onnx import TensorProto, helper

from hostile_mutators_semantic import _init, _model, _vi

F = TensorProto.FLOAT
I64 = TensorProto.INT64


# --- 0 elements in the middle ----------------------------------------------------------------

EMPTY_TAILS = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceL2", "ReduceLogSumExp",
               "ArgMax", "Softmax", "LayerNormalization", "MatMul", "Gemm", "TopK", "CumSum", "Concat",
               "GatherElements", "Flatten", "InstanceNormalization", "LpNormalization", "Hardmax"]


def m_empty_mid(m, rng, wd):
    """x[:, 0:0] (an axis of 0 elements made at run time from a full input) into an operator
    that reduces, multiplies, normalizes or indexes over that axis, then on to an output."""
    tail = rng.choice(EMPTY_TAILS)
    axis = rng.choice([1, -1])
    nodes = [helper.make_node("Slice", ["x", "s0", "s0", "ax"], ["e"], name="cut")]
    inits = [_init("s0", [0]), _init("ax", [1])]
    outs = [_vi("y")]
    if tail.startswith("Reduce"):
        keep = rng.choice([0, 1])
        nodes.append(helper.make_node(tail, ["e", "axes"], ["y"], keepdims=keep, name="tail"))
        inits.append(_init("axes", [axis]))
    elif tail == "ArgMax":
        nodes.append(helper.make_node("ArgMax", ["e"], ["y"], axis=1, name="tail"))
        outs = [_vi("y", I64)]
    elif tail in ("Softmax", "Hardmax", "Flatten", "LpNormalization"):
        nodes.append(helper.make_node(tail, ["e"], ["y"], axis=1, name="tail"))
    elif tail == "LayerNormalization":
        inits += [_init("g", np.ones([0], np.float32), np.float32), _init("b", np.zeros([0], np.float32), np.float32)]
        nodes.append(helper.make_node(tail, ["e", "g", "b"], ["y"], axis=-1, name="tail"))
    elif tail == "InstanceNormalization":
        inits += [_init("g", np.ones([3], np.float32), np.float32), _init("b", np.zeros([3], np.float32), np.float32)]
        nodes = [helper.make_node("Slice", ["x", "s0", "s0", "ax"], ["e"], name="cut")]
        inits[2] = _init("ax", [0])
        nodes += [helper.make_node("Unsqueeze", ["e", "u"], ["e4"]), helper.make_node(tail, ["e4", "g", "b"], ["y"], name="tail")]
        inits.append(_init("u", [0]))
        return _model(nodes, [_vi("x", F, [4, 3, 5])], [_vi("y")], inits), f"empty_mid {tail}"
    elif tail in ("MatMul", "Gemm"):
        # [4, 0] x [0, 6]: a product over nothing is zeros.
        inits.append(_init("w", np.ones([0, 6], np.float32), np.float32))
        nodes.append(helper.make_node(tail, ["e", "w"], ["y"], name="tail"))
    elif tail == "TopK":
        inits.append(_init("k", [0]))
        nodes.append(helper.make_node("TopK", ["e", "k"], ["y", "yi"], axis=1, name="tail"))
        outs.append(_vi("yi", I64))
    elif tail == "CumSum":
        inits.append(_init("a", 1))
        nodes.append(helper.make_node("CumSum", ["e", "a"], ["y"], name="tail"))
    elif tail == "Concat":
        nodes.append(helper.make_node("Concat", ["e", "x", "e"], ["y"], axis=1, name="tail"))
    elif tail == "GatherElements":
        inits.append(_init("gi", np.zeros([4, 0], np.int64)))
        nodes.append(helper.make_node("GatherElements", ["x", "gi"], ["y"], axis=1, name="tail"))
    return _model(nodes, [_vi("x", F, [4, 5])], outs, inits), f"empty_mid {tail} axis {axis}"


# --- sizes from Shape arithmetic ---------------------------------------------------------------

SIZE_USERS = ["Reshape", "Expand", "Tile", "ConstantOfShape", "Range", "Slice", "Pad", "Resize"]


def m_shape_arith(m, rng, wd):
    """A size computed at run time: Shape(x) (a [2, 3] input) times, plus or minus a constant
    that makes it negative, 0, huge or wrap past INT64_MAX, into an operator that takes it as
    a shape, a count, bounds or pads."""
    user = rng.choice(SIZE_USERS)
    op, k = rng.choice([("Mul", 1 << 62), ("Mul", -1), ("Mul", 0), ("Add", (1 << 63) - 2), ("Sub", 5),
                        ("Mul", 1 << 31), ("Mul", 3)])
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node(op, ["s", "k"], ["n"], name="arith")]
    inits = [_init("k", [k, k])]
    if user == "Reshape":
        nodes.append(helper.make_node("Reshape", ["x", "n"], ["y"], name="use"))
    elif user == "Expand":
        nodes.append(helper.make_node("Expand", ["x", "n"], ["y"], name="use"))
    elif user == "Tile":
        nodes.append(helper.make_node("Tile", ["x", "n"], ["y"], name="use"))
    elif user == "ConstantOfShape":
        nodes.append(helper.make_node("ConstantOfShape", ["n"], ["c"], name="use"))
        nodes.append(helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0, name="sum"))
    elif user == "Range":
        nodes += [helper.make_node("ReduceMin", ["n"], ["lim"], keepdims=0, name="lim"),
                  helper.make_node("Cast", ["lim"], ["limf"], to=F, name="limf"),
                  helper.make_node("Range", ["zero", "limf", "one"], ["r"], name="use"),
                  helper.make_node("ReduceSum", ["r"], ["y"], keepdims=0, name="sum")]
        inits += [_init("zero", 0.0, np.float32), _init("one", 1.0, np.float32)]
    elif user == "Slice":
        steps = rng.choice([[1, 1], [-1, -1], [np.iinfo(np.int64).min, 1]])
        nodes.append(helper.make_node("Slice", ["x", "n", "n", "axs", "st"], ["y"], name="use"))
        nodes[-1].input[1] = "zs"
        inits += [_init("zs", [0, 0]), _init("axs", [0, 1]), _init("st", steps)]
    elif user == "Pad":
        nodes.append(helper.make_node("Concat", ["n", "n"], ["pads"], axis=0, name="pads"))
        nodes.append(helper.make_node("Pad", ["x", "pads"], ["y"], name="use"))
    else:
        nodes.append(helper.make_node("Resize", ["x", "", "", "n"], ["y"], mode="nearest", name="use"))
    return _model(nodes, [_vi("x", F, [2, 3])], [_vi("y")], inits, opset=18), \
        f"shape_arith {op} {k} {user}"


# --- opset edges --------------------------------------------------------------------------------

def m_attr_moved(m, rng, wd):
    """An operator at an opset where an attribute had become an input (or an input given at an
    opset that still had the attribute): ONNX's schema at that opset has no such attribute
    (input)."""
    how = rng.choice(["split_attr_18", "reduce_axes_attr_18", "squeeze_axes_attr_13", "unsqueeze_axes_attr_13",
                      "pad_pads_attr_11", "clip_min_attr_11", "slice_attrs_10", "split_input_11",
                      "reducesum_input_11", "clip_inputs_6", "upsample_10", "dropout_ratio_attr_12",
                      "topk_k_attr_10", "resize_scales_10"])
    x = _vi("x", F, [2, 4])
    inits = []
    if how == "split_attr_18":
        n, opset, outs = helper.make_node("Split", ["x"], ["y", "z"], axis=1, split=[1, 3]), 18, ["y", "z"]
    elif how == "reduce_axes_attr_18":
        n, opset, outs = helper.make_node("ReduceMax", ["x"], ["y"], axes=[1]), 18, ["y"]
    elif how == "squeeze_axes_attr_13":
        n, opset, outs = helper.make_node("Squeeze", ["x"], ["y"], axes=[0]), 13, ["y"]
    elif how == "unsqueeze_axes_attr_13":
        n, opset, outs = helper.make_node("Unsqueeze", ["x"], ["y"], axes=[0]), 13, ["y"]
    elif how == "pad_pads_attr_11":
        n, opset, outs = helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 0, 1]), 11, ["y"]
    elif how == "clip_min_attr_11":
        n, opset, outs = helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.5), 11, ["y"]
    elif how == "slice_attrs_10":
        n, opset, outs = helper.make_node("Slice", ["x"], ["y"], starts=[0], ends=[1], axes=[1]), 10, ["y"]
    elif how == "split_input_11":
        inits.append(_init("sp", [1, 3]))
        n, opset, outs = helper.make_node("Split", ["x", "sp"], ["y", "z"], axis=1), 11, ["y", "z"]
    elif how == "reducesum_input_11":
        inits.append(_init("axes", [1]))
        n, opset, outs = helper.make_node("ReduceSum", ["x", "axes"], ["y"]), 11, ["y"]
    elif how == "clip_inputs_6":
        inits += [_init("lo", -0.5, np.float32), _init("hi", 0.5, np.float32)]
        n, opset, outs = helper.make_node("Clip", ["x", "lo", "hi"], ["y"]), 6, ["y"]
    elif how == "upsample_10":
        inits.append(_init("sc", [1.0, 2.0], np.float32))
        n, opset, outs = helper.make_node("Upsample", ["x", "sc"], ["y"], mode="nearest"), 10, ["y"]
    elif how == "dropout_ratio_attr_12":
        n, opset, outs = helper.make_node("Dropout", ["x"], ["y"], ratio=0.5), 12, ["y"]
    elif how == "topk_k_attr_10":
        n, opset, outs = helper.make_node("TopK", ["x"], ["y", "yi"], k=2, axis=1), 10, ["y", "yi"]
    else:
        inits.append(_init("sc", [1.0, 2.0], np.float32))
        n, opset, outs = helper.make_node("Resize", ["x", "sc"], ["y"], mode="nearest"), 10, ["y"]
    n.name = "edge"
    types = {"yi": I64}
    return _model([n], [x], [_vi(o, types.get(o, F)) for o in outs], inits, opset=opset, ir=7), \
        f"attr_moved {how}"


# --- optional outputs ---------------------------------------------------------------------------

def m_optional_outputs(m, rng, wd):
    """Optional outputs: wired to graph outputs, "" between named ones, or read by another node
    (MaxPool's Indices, LayerNormalization's Mean and InvStdDev, Dropout's mask, TopK's indices
    alone, BatchNormalization's running statistics in inference, Split and Unique outputs)."""
    how = rng.choice(["maxpool_indices", "layernorm_stats", "layernorm_gap", "dropout_mask", "dropout_mask_read",
                      "topk_indices_only", "bn_running", "split_gap", "unique_counts", "gru_yh_only"])
    x4 = _vi("x", F, [1, 2, 4, 4])
    x2 = _vi("x", F, [3, 4])
    f = lambda a: _init(a[0], np.asarray(a[1], np.float32), np.float32)
    if how == "maxpool_indices":
        nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], strides=[2, 2])]
        return _model(nodes, [x4], [_vi("y"), _vi("idx", I64)]), f"optional_outputs {how}"
    if how in ("layernorm_stats", "layernorm_gap"):
        outs = ["y", "mean", "isd"] if how == "layernorm_stats" else ["y", "", "isd"]
        nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], outs, axis=-1, epsilon=1e-5)]
        inits = [f(("g", np.ones(4))), f(("b", np.zeros(4)))]
        return _model(nodes, [x2], [_vi(o) for o in outs if o], inits), f"optional_outputs {how}"
    if how in ("dropout_mask", "dropout_mask_read"):
        nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"])]
        outs = [_vi("y"), _vi("mask", TensorProto.BOOL)]
        if how == "dropout_mask_read":
            nodes.append(helper.make_node("Cast", ["mask"], ["mf"], to=F))
            nodes.append(helper.make_node("Add", ["y", "mf"], ["z"]))
            outs = [_vi("z")]
        return _model(nodes, [x2], outs), f"optional_outputs {how}"
    if how == "topk_indices_only":
        nodes = [helper.make_node("TopK", ["x", "k"], ["", "yi"], axis=1)]
        return _model(nodes, [x2], [_vi("yi", I64)], [_init("k", [2])]), f"optional_outputs {how}"
    if how == "bn_running":
        # training_mode 0 with the running statistics named: ONNX forbids them in inference.
        nodes = [helper.make_node("BatchNormalization", ["x", "s", "bb", "mu", "var"], ["y", "rm", "rv"])]
        inits = [f((n, v)) for n, v in (("s", np.ones(2)), ("bb", np.zeros(2)), ("mu", np.zeros(2)),
                                        ("var", np.ones(2)))]
        return _model(nodes, [x4], [_vi("y"), _vi("rm"), _vi("rv")], inits), f"optional_outputs {how}"
    if how == "split_gap":
        nodes = [helper.make_node("Split", ["x"], ["a", "", "c"], axis=1, num_outputs=3)]
        return _model(nodes, [_vi("x", F, [3, 6])], [_vi("a"), _vi("c")], opset=18), f"optional_outputs {how}"
    if how == "unique_counts":
        nodes = [helper.make_node("Unique", ["x"], ["u", "", "", "cnt"], sorted=1)]
        return _model(nodes, [x2], [_vi("u"), _vi("cnt", I64)]), f"optional_outputs {how}"
    w = f(("w", np.full([1, 9, 4], 0.1)))
    r = f(("r", np.full([1, 9, 3], 0.1)))
    nodes = [helper.make_node("GRU", ["xs", "w", "r"], ["", "yh"], hidden_size=3)]
    return _model(nodes, [_vi("xs", F, [2, 1, 4])], [_vi("yh")], [w, r]), f"optional_outputs {how}"


# --- declared but not held ------------------------------------------------------------------------

def m_declared_huge(m, rng, wd):
    """Values declared with 2^31 to 2^62 elements: a graph input fed a small array, an
    initializer whose dims say so but whose data is a few bytes (or none), value_info of an
    intermediate, a Constant's dims."""
    how = rng.choice(["input_fed_small", "init_no_data", "init_short_data", "value_info", "constant_dims",
                      "input_dim_overflow"])
    big = rng.choice([1 << 31, 1 << 40, 1 << 62])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Add", ["r", "w"], ["y"], name="add")]
    w = _init("w", np.ones([4], np.float32), np.float32)
    if how == "input_fed_small":
        x = _vi("x", F, [big])
        return _model(nodes, [x], [_vi("y")], [w]), f"declared_huge {how} {big}", None, [], None, \
            {"feeds": {"x": np.ones([4], np.float32)}}
    x = _vi("x", F, [4])
    if how in ("init_no_data", "init_short_data"):
        w = TensorProto(name="w", data_type=F, dims=[big])
        if how == "init_short_data":
            w.raw_data = np.ones([4], np.float32).tobytes()
        return _model(nodes, [x], [_vi("y")], [w]), f"declared_huge {how} {big}"
    if how == "value_info":
        m2 = _model(nodes, [x], [_vi("y")], [w])
        m2.graph.value_info.append(_vi("r", F, [big]))
        return m2, f"declared_huge {how} {big}"
    if how == "constant_dims":
        t = TensorProto(name="", data_type=F, dims=[big, 0, big])
        nodes = [helper.make_node("Constant", [], ["c"], value=t, name="const"),
                 helper.make_node("ReduceSum", ["c"], ["y"], keepdims=0, name="sum")]
        return _model(nodes, [x], [_vi("y")]), f"declared_huge {how} {big}"
    # Dims whose product wraps int64: 2^32 * 2^32 elements.
    x = _vi("x", F, [1 << 32, 1 << 32])
    return _model(nodes, [x], [_vi("y")], [w]), f"declared_huge {how}", None, [], None, \
        {"feeds": {"x": np.ones([1, 4], np.float32)}}


# Classes of this family's results that are not isomer's to fix, in the campaign's TRIAGED form:
# (mutators, commands, note, detail, stderr, reason).
TRIAGED = [
    ("empty_mid", ("run_native", "run", "optimize"), r"ReduceMean", r"NaN positions differ$", r"",
     "a ReduceMean over an axis of 0 elements: ONNX says a reduction over an empty set \"yields undefined\"; "
     "isomer gives the mean of nothing, 0/0 = NaN, as ONNX's reference evaluator (numpy) does, ONNX Runtime 0"),
    ("optional_outputs", ("optimize", "run_native", "run", "cost", "convert", "py_optimize"), r"split_gap$", r"^$",
     r"", "a Split whose middle output is \"\" (not wanted): ONNX's reference evaluator computes the other two as "
     "isomer does; ONNX Runtime 1.32 dies of a segmentation fault on it (the campaign's reference run fails)"),
]


MUTATORS = {f.__name__[2:]: f for f in [m_empty_mid, m_shape_arith, m_attr_moved, m_optional_outputs,
                                        m_declared_huge]}
