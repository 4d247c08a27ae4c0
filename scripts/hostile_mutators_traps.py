"""Hostile mutators, seventh family: traps around external data that the first family
(m_external, m_external_end) does not set, numbers at the ends of int64 where an operator
multiplies, negates or sums them, element data stored past its type's range, and quantized
operators with scales of 0, NaN or Inf.

Every mutator builds a small model of its own except m_external_trap, which moves one of
the source's initializers out (or, where it has none, builds a model with one). Each
returns (model, note[, bad_index, patch, reference, run]) as the campaign expects (see
hostile_mutators_semantic.py for `run`).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hostile_mutators_semantic import _init, _model, _vi

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


# --- external data ---------------------------------------------------------------------------

def _weighted_model():
    """y = x + w, w a [4, 8] float initializer: what the external-data traps move out."""
    w = _init("w", np.arange(32).reshape(4, 8) / 8.0, np.float32)
    return _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", TensorProto.FLOAT, [4, 8])],
                  [_vi("y", TensorProto.FLOAT, [4, 8])], [w])


def _external(t, location, entries=()):
    """Marks tensor `t` external at `location` (its data already written there)."""
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in [("location", location)] + list(entries):
        e = t.external_data.add()
        e.key, e.value = k, v


def _raw_of(t):
    a = numpy_helper.to_array(t)
    return a.astype(a.dtype.newbyteorder("<")).tobytes()


def _setup_fifo(name):
    def setup(wd):
        p = os.path.join(wd, name)
        if not os.path.exists(p):
            os.mkfifo(p)
    return setup


def m_external_trap(m, rng, wd):
    """External data through a FIFO (a reader blocks on it), a symbolic link out of the
    model's folder, offsets and lengths that are not plain decimal numbers, the location
    key given twice or empty, external data on a Constant node's tensor or on an
    initializer inside an If branch, and data_location EXTERNAL with no entries."""
    how = rng.choice(["fifo", "symlink_out", "symlink_in", "offset_text", "length_text", "two_locations",
                      "empty_location", "constant_attr", "body_init", "no_entries"])
    ts = [t for t in m.graph.initializer if t.data_location != TensorProto.EXTERNAL and t.data_type == TensorProto.FLOAT
          and 0 < len(_raw_of(t)) <= (1 << 24)]
    if not ts or how in ("constant_attr", "body_init"):
        m = _weighted_model()
        ts = list(m.graph.initializer)
    t = rng.choice(ts)
    raw = _raw_of(t)
    run = {}
    with open(os.path.join(wd, "w.bin"), "wb") as f:
        f.write(raw)
    note = f"external {how} ({t.name})"
    if how == "fifo":
        _external(t, "pipe.bin")
        run["setup"] = _setup_fifo("pipe.bin")
        run["no_reference"] = True  # ONNX Runtime would block on the FIFO as well
    elif how == "symlink_out":
        # A link to a file outside the model's folder (the bytes are the weights: only the
        # path is hostile).
        outside = os.path.join(os.path.dirname(os.path.abspath(wd)), f"outside_{os.path.basename(wd)}.bin")
        with open(outside, "wb") as f:
            f.write(raw)
        link = os.path.join(wd, "link.bin")
        if not os.path.lexists(link):
            os.symlink(outside, link)
        _external(t, "link.bin")
    elif how == "symlink_in":
        # A link that stays inside the folder: a valid model.
        link = os.path.join(wd, "same.bin")
        if not os.path.lexists(link):
            os.symlink("w.bin", link)
        _external(t, "same.bin")
    elif how in ("offset_text", "length_text"):
        key = how.split("_")[0]
        value = rng.choice(["abc", "12abc", "1e3", "", " 0", "+0", "0x0", "-0", "99999999999999999999",
                            "18446744073709551616", "0.5"])
        if key == "length":
            value = rng.choice([value, str(len(raw)) + "x", f" {len(raw)}"])
        _external(t, "w.bin", [(key, value)])
        note += f" {key}={value!r}"
    elif how == "two_locations":
        _external(t, "w.bin", [("location", "/etc/passwd" if rng.random() < 0.5 else "other.bin")])
    elif how == "empty_location":
        _external(t, "")
    elif how == "constant_attr":
        # The weights as a Constant node's value, that tensor external.
        node_t = onnx.TensorProto()
        node_t.CopyFrom(t)
        node_t.name = ""
        _external(node_t, rng.choice(["w.bin", "../" * 6 + "etc/passwd", "/dev/zero", "pipe.bin"]))
        if node_t.external_data[0].value == "pipe.bin":
            run.update(setup=_setup_fifo("pipe.bin"), no_reference=True)
        del m.graph.initializer[:]
        m.graph.node.insert(0, helper.make_node("Constant", [], ["w"], value=node_t))
        note += f" at {node_t.external_data[0].value}"
    elif how == "body_init":
        # An If whose branch holds the weights as its own initializer, external.
        body_t = onnx.TensorProto()
        body_t.CopyFrom(t)
        loc = rng.choice(["w.bin", "../" * 6 + "etc/passwd", "/dev/zero", "pipe.bin"])
        _external(body_t, loc)
        if loc == "pipe.bin":
            run.update(setup=_setup_fifo("pipe.bin"), no_reference=True)
        then_g = helper.make_graph([helper.make_node("Identity", ["w"], ["wt"])], "then", [],
                                   [_vi("wt", TensorProto.FLOAT, [4, 8])], initializer=[body_t])
        else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["we"])], "else", [],
                                   [_vi("we", TensorProto.FLOAT, [4, 8])])
        m = _model([helper.make_node("If", ["c"], ["w"], then_branch=then_g, else_branch=else_g),
                    helper.make_node("Add", ["x", "w"], ["y"])],
                   [_vi("x", TensorProto.FLOAT, [4, 8]), _vi("c", TensorProto.BOOL, [])],
                   [_vi("y", TensorProto.FLOAT, [4, 8])])
        run["feeds"] = {"x": np.ones([4, 8], np.float32), "c": np.array(True)}
        note += f" at {loc}"
    else:
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
    return m, note, None, [], None, run


# --- int64 at its ends -----------------------------------------------------------------------

def m_int64_ends(m, rng, wd):
    """Attributes and shape inputs whose arithmetic wraps int64: a DepthToSpace or
    SpaceToDepth block of 2^32 (its square is 2^64), Split sizes that wrap to the axis's
    length, Range(INT64_MIN, INT64_MAX) and a step of 0, Slice with a step of INT64_MIN,
    axes of INT64_MIN, ConstantOfShape and Expand whose extents overflow before a 0,
    Conv/MaxPool kernels, dilations and pads of 2^62, Tile by INT64_MAX of an empty tensor,
    OneHot of depth 2^62 and TopK of k INT64_MAX."""
    how = rng.choice(["d2s_block", "s2d_block", "split_wrap", "range_wide", "range_zero_step", "slice_step_min",
                      "axis_min", "cos_wrap", "expand_wrap", "conv_dilation", "pool_kernel", "pool_pads",
                      "tile_empty", "onehot_depth", "topk_k", "pad_wrap", "reshape_wrap", "gather_axis_min",
                      "unsqueeze_min", "flatten_min", "trilu_k"])
    x = _vi("x", TensorProto.FLOAT, [1, 4, 4, 4])
    y = _vi("y", TensorProto.FLOAT, None)
    inits, nodes, note = [], [], f"int64 {how}"
    big = rng.choice([1 << 32, 1 << 62, INT64_MAX])
    if how == "d2s_block":
        nodes = [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=rng.choice([1 << 32, 1 << 31, -2, 0]))]
    elif how == "s2d_block":
        nodes = [helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=rng.choice([1 << 32, 1 << 31, -2, 0]))]
    elif how == "split_wrap":
        # Two sizes that sum to 4 modulo 2^64.
        a = rng.choice([INT64_MAX, 1 << 62, -1])
        b = (4 - a + (1 << 63)) % (1 << 64) - (1 << 63)
        inits.append(_init("sp", [a, b]))
        nodes = [helper.make_node("Split", ["x", "sp"], ["y", "y2"], axis=1)]
        note += f" [{a}, {b}]"
    elif how in ("range_wide", "range_zero_step"):
        lo, hi, st = (INT64_MIN, INT64_MAX, rng.choice([1, INT64_MAX, (1 << 62)])) if how == "range_wide" \
            else (0, 10, 0)
        inits += [_init("r0", lo), _init("r1", hi), _init("r2", st)]
        nodes = [helper.make_node("Range", ["r0", "r1", "r2"], ["ri"]),
                 helper.make_node("Cast", ["ri"], ["rf"], to=TensorProto.FLOAT),
                 helper.make_node("ReduceSum", ["rf"], ["rs"], keepdims=0),
                 helper.make_node("Add", ["x", "rs"], ["y"])]
        note += f" step {st}"
    elif how == "slice_step_min":
        inits += [_init("s0", [rng.choice([-1, INT64_MAX, 3])]), _init("s1", [rng.choice([INT64_MIN, 0, -5])]),
                  _init("sa", [rng.choice([1, 3, -1])]), _init("ss", [INT64_MIN])]
        nodes = [helper.make_node("Slice", ["x", "s0", "s1", "sa", "ss"], ["y"])]
    elif how == "axis_min":
        op = rng.choice(["Concat", "Softmax", "CumSum", "ReduceMean", "ArgMax", "LogSoftmax", "Hardmax"])
        if op == "CumSum":
            inits.append(_init("ax", INT64_MIN))
            nodes = [helper.make_node("CumSum", ["x", "ax"], ["y"])]
        elif op == "ReduceMean":
            inits.append(_init("ax", [INT64_MIN]))
            nodes = [helper.make_node("ReduceMean", ["x", "ax"], ["y"])]
        elif op == "ArgMax":
            nodes = [helper.make_node("ArgMax", ["x"], ["am"], axis=INT64_MIN),
                     helper.make_node("Cast", ["am"], ["y"], to=TensorProto.FLOAT)]
        elif op == "Concat":
            nodes = [helper.make_node("Concat", ["x", "x"], ["y"], axis=INT64_MIN)]
        else:
            nodes = [helper.make_node(op, ["x"], ["y"], axis=INT64_MIN)]
        note += f" {op}"
    elif how == "cos_wrap":
        dims = rng.choice([[INT64_MAX, INT64_MAX, 0], [1 << 32, 1 << 32, 0], [0, 1 << 62, 1 << 62], [1 << 32, 1 << 32]])
        inits.append(_init("cs", dims))
        nodes = [helper.make_node("ConstantOfShape", ["cs"], ["c"],
                                  value=numpy_helper.from_array(np.array([1.0], np.float32))),
                 helper.make_node("ReduceSum", ["c"], ["cr"], keepdims=0),
                 helper.make_node("Add", ["x", "cr"], ["y"])]
        note += f" {dims}"
    elif how == "expand_wrap":
        dims = rng.choice([[1 << 32, 1 << 32, 0, 1], [0, INT64_MAX, 4, 4], [1, 4, 4, -1], [1 << 31, 1 << 31, 4, 4]])
        inits.append(_init("es", dims))
        nodes = [helper.make_node("Expand", ["x", "es"], ["e"]),
                 helper.make_node("ReduceSum", ["e"], ["y"], keepdims=1)]
        note += f" {dims}"
    elif how == "conv_dilation":
        inits.append(_init("cw", np.ones([2, 4, 3, 3]), np.float32))
        attr = rng.choice([{"dilations": [big, 1]}, {"strides": [big, 1]}, {"pads": [INT64_MIN, 0, 0, 0]},
                           {"pads": [big, 0, big, 0]}, {"kernel_shape": [big, 3]}])
        nodes = [helper.make_node("Conv", ["x", "cw"], ["y"], **attr)]
        note += f" {attr}"
    elif how == "pool_kernel":
        op = rng.choice(["MaxPool", "AveragePool", "LpPool"])
        nodes = [helper.make_node(op, ["x"], ["y"], kernel_shape=[rng.choice([big, 0, -1]), 2])]
        note += f" {op}"
    elif how == "pool_pads":
        op = rng.choice(["MaxPool", "AveragePool"])
        attr = rng.choice([{"pads": [big, 0, big, 0]}, {"pads": [INT64_MIN, 0, 0, 0]}, {"strides": [big, 1]},
                           {"dilations": [big, 1]}])
        nodes = [helper.make_node(op, ["x"], ["y"], kernel_shape=[2, 2], **attr)]
        note += f" {op} {attr}"
    elif how == "tile_empty":
        inits += [_init("e", np.zeros([0, 4]), np.float32), _init("rep", [INT64_MAX, rng.choice([INT64_MAX, 2])])]
        nodes = [helper.make_node("Tile", ["e", "rep"], ["t"]),
                 helper.make_node("ReduceSum", ["t"], ["tr"], keepdims=0),
                 helper.make_node("Add", ["x", "tr"], ["y"])]
    elif how == "onehot_depth":
        inits += [_init("oi", [0, 1]), _init("od", rng.choice([1 << 62, INT64_MAX, 1 << 40]), np.float32),
                  _init("ov", [0.0, 1.0], np.float32)]
        nodes = [helper.make_node("OneHot", ["oi", "od", "ov"], ["oh"]),
                 helper.make_node("ReduceSum", ["oh"], ["ohr"], keepdims=0),
                 helper.make_node("Add", ["x", "ohr"], ["y"])]
    elif how == "topk_k":
        inits.append(_init("k", [rng.choice([INT64_MAX, INT64_MIN, 1 << 32])]))
        nodes = [helper.make_node("TopK", ["x", "k"], ["y", "yi"], axis=-1)]
    elif how == "pad_wrap":
        p = rng.choice([[0, 0, 0, INT64_MAX, 0, 0, 0, 1], [0, 0, 0, INT64_MIN, 0, 0, 0, 0],
                        [0, 0, 0, 1 << 62, 0, 0, 0, 1 << 62], [0, 0, 0, -(1 << 62), 0, 0, 0, (1 << 62) + 4]])
        inits.append(_init("pp", p))
        nodes = [helper.make_node("Pad", ["x", "pp"], ["y"])]
        note += f" {p}"
    elif how == "reshape_wrap":
        s = rng.choice([[1 << 32, 1 << 32, 0], [-1, 1 << 62, 4], [INT64_MAX, -1], [1 << 33, 1 << 31, 1 << 1, 64]])
        inits.append(_init("rs", s))
        nodes = [helper.make_node("Reshape", ["x", "rs"], ["y"], allowzero=rng.choice([0, 1]))]
        note += f" {s}"
    elif how == "gather_axis_min":
        inits.append(_init("gi", [0]))
        nodes = [helper.make_node(rng.choice(["Gather", "GatherElements"]), ["x", "gi"], ["y"], axis=INT64_MIN)]
    elif how == "unsqueeze_min":
        inits.append(_init("ua", [rng.choice([INT64_MIN, INT64_MAX])]))
        nodes = [helper.make_node(rng.choice(["Unsqueeze", "Squeeze"]), ["x", "ua"], ["y"])]
    elif how == "flatten_min":
        nodes = [helper.make_node("Flatten", ["x"], ["y"], axis=rng.choice([INT64_MIN, INT64_MAX]))]
    else:
        inits.append(_init("tk", rng.choice([INT64_MIN, INT64_MAX, -(1 << 62)])))
        nodes = [helper.make_node("Trilu", ["x", "tk"], ["y"], upper=rng.choice([0, 1]))]
    outputs = [y, _vi("y2", TensorProto.FLOAT, None)] if how == "split_wrap" else [y]
    return _model(nodes, [x], outputs, inits), note


# --- element data out of its type's range ------------------------------------------------------

def m_data_range(m, rng, wd):
    """Initializers whose int32_data (or int64_data, uint64_data) holds values their element
    type cannot: uint8 1000, int8 -1000, bool 2, uint16 70000, float16 bits past 16, int4 9;
    read through a Cast, a Gather index or a Where condition."""
    kind = rng.choice(["uint8", "int8", "bool", "uint16", "float16", "int4", "uint32_u64"])
    dt = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "bool": TensorProto.BOOL, "uint16": TensorProto.UINT16,
          "float16": TensorProto.FLOAT16, "int4": TensorProto.INT4, "uint32_u64": TensorProto.UINT32}[kind]
    vals = {"uint8": [1000, 3, -1, 255], "int8": [-1000, 200, 7, 0], "bool": [2, 0, -1, 1],
            "uint16": [70000, -1, 5, 1], "float16": [0x3C00 | (1 << 20), 0x3C00, 0xFFFFF, 0],
            "int4": [9, -9, 3, 1], "uint32_u64": [(1 << 40) + 1, 1, 2, 3]}[kind]
    t = onnx.TensorProto()
    t.name, t.data_type = "d", dt
    t.dims.extend([4])
    if kind == "uint32_u64":
        t.uint64_data.extend(vals)
    elif kind == "int4":
        # int4 packs two to a byte in int32_data; a byte past its 8 bits.
        t.int32_data.extend([0x1F3, 0x12])
    else:
        t.int32_data.extend(vals)
    use = rng.choice(["cast", "where"]) if kind == "bool" else "cast"
    x = _vi("x", TensorProto.FLOAT, [4])
    y = _vi("y", TensorProto.FLOAT, None)
    if use == "where":
        nodes = [helper.make_node("Where", ["d", "x", "z"], ["y"])]
        return _model(nodes, [x], [y], [t, _init("z", np.zeros(4), np.float32)]), f"data_range {kind} where"
    nodes = [helper.make_node("Cast", ["d"], ["dc"], to=TensorProto.FLOAT), helper.make_node("Add", ["x", "dc"], ["y"])]
    return _model(nodes, [x], [y], [t]), f"data_range {kind} {vals}"


# --- quantization with degenerate scales ---------------------------------------------------------

def m_quant_scale(m, rng, wd):
    """QuantizeLinear, DequantizeLinear, QLinearMatMul, QLinearConv and DynamicQuantizeLinear
    with a scale of 0, -0, NaN, Inf, -1 or a denormal, per tensor or in one channel, and a
    zero point at its type's ends."""
    s = rng.choice([0.0, -0.0, float("nan"), float("inf"), -1.0, 1e-45, 1e38])
    op = rng.choice(["q", "dq", "qdq_axis", "qlmm", "qlconv", "dql_input"])
    x = _vi("x", TensorProto.FLOAT, [2, 4])
    y = _vi("y", TensorProto.FLOAT, None)
    zp_v = rng.choice([0, 127, -128])
    note = f"quant_scale {op} scale {s} zp {zp_v}"
    if op in ("q", "dq", "qdq_axis"):
        if op == "qdq_axis":
            sc = _init("sc", [0.1, s, 0.2, 0.3], np.float32)
            zp = _init("zp", [zp_v] * 4, np.int8)
            attrs = {"axis": 1}
        else:
            sc, zp, attrs = _init("sc", s, np.float32), _init("zp", zp_v, np.int8), {}
        if op == "dq":
            q = _init("q", np.array([[-128, -1, 0, 1], [2, 50, 126, 127]]), np.int8)
            nodes = [helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["d"]), helper.make_node("Add", ["d", "x"], ["y"])]
            return _model(nodes, [x], [y], [q, sc, zp]), note
        nodes = [helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], **attrs),
                 helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"], **attrs)]
        return _model(nodes, [x], [y], [sc, zp]), note
    if op == "dql_input":
        # DynamicQuantizeLinear of an input that is all equal (its range is 0: a scale of 0).
        nodes = [helper.make_node("Mul", ["x", "zero"], ["x0"]),
                 helper.make_node("DynamicQuantizeLinear", ["x0"], ["q", "qs", "qz"]),
                 helper.make_node("DequantizeLinear", ["q", "qs", "qz"], ["y"])]
        return _model(nodes, [x], [y], [_init("zero", 0.0, np.float32)]), "quant_scale dql of a constant input"
    a = _vi("a", TensorProto.UINT8, [2, 4] if op == "qlmm" else [1, 4, 3, 3])
    inits = [_init("as", s, np.float32), _init("azp", 255 if zp_v else 0, np.uint8), _init("bs", 0.2, np.float32),
             _init("bzp", 1, np.uint8), _init("ys", rng.choice([s, 0.3]), np.float32), _init("yzp", 2, np.uint8)]
    if op == "qlmm":
        inits.append(_init("b", np.ones([4, 3]), np.uint8))
        nodes = [helper.make_node("QLinearMatMul", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"], ["qy"])]
    else:
        inits.append(_init("b", np.ones([2, 4, 1, 1]), np.uint8))
        nodes = [helper.make_node("QLinearConv", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"], ["qy"])]
    nodes.append(helper.make_node("Cast", ["qy"], ["y"], to=TensorProto.FLOAT))
    return _model(nodes, [a], [y], inits), note


MUTATORS = {f.__name__[2:]: f for f in [m_external_trap, m_int64_ends, m_data_range, m_quant_scale]}
