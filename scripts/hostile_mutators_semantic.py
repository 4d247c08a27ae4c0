"""The sixth family of the hostile-model campaign (scripts/hostile_campaign.py): models that are
well formed protobuf and well typed at a glance but wrong in meaning, and hostile run-time
inputs and command lines. Control flow (If branches that disagree in count, type or rank,
Loop bodies whose carried values change type, trip counts of INT64_MAX, conditions that are
not a bool scalar, Scan axes and input counts that lie, outer names used before they
exist), quantization (zero points of the wrong type, per-axis scales of the wrong length,
axes out of range, block sizes), rare element types (float8, int4, complex64, bfloat16,
strings) where kernels expect float, sequences and optionals at run time (indices out of
range, splits that do not sum, empty optionals, empty sequences), input files that lie about
the model (another type, rank or shape, missing or extra names, empty, truncated or not an
npz at all, a dynamic dim whose value asks for terabytes), and `optimize`/`run` command
lines (-o onto the input, a directory that does not exist, --input-shape strings that do
not parse or name no input, a model path that is a directory or a FIFO).

Each mutator builds a small model of its own (the source is ignored) and returns
(model, note, bad_index, patch, reference, run) where `run` (optional) may hold:
  "feeds":  {name: array} fed instead of the random inputs (ONNX Runtime gets the same);
  "inputs_bytes": the bytes of the inputs file itself (no reference run);
  "args":   extra command-line arguments for every command;
  "model":  a path (relative to the case's folder) given as the model instead of model.onnx,
            made by "setup" (a function of the folder) when that is not a plain file;
  "output": what `optimize` gets as -o (relative to the case's folder; "@model" is the model);
  "no_reference": ONNX Runtime's run of the model says nothing of the case (a command line).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INT64_MAX = (1 << 63) - 1


def _model(nodes, inputs, outputs, inits=(), opset=21, ir=10):
    g = helper.make_graph(nodes, "semantic", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="hostile")
    m.ir_version = ir
    return m


def _vi(name, dtype=TensorProto.FLOAT, dims=None):
    return helper.make_tensor_value_info(name, dtype, dims)


def _init(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.array(value, dtype), name)


# --- control flow ---------------------------------------------------------------------------

def _branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], outputs)


def m_control_flow(m, rng, wd):
    """If, Loop and Scan whose bodies disagree with the node or with ONNX's rules."""
    how = rng.choice(["if_count", "if_dtype", "if_rank", "loop_dtype", "loop_rank", "loop_intmax",
                      "loop_cond_float", "loop_cond_vector", "loop_cond_false", "scan_axis", "scan_count",
                      "scan_direction", "outer_later", "outer_shadow"])
    x = _vi("x", TensorProto.FLOAT, [2, 3])
    c = _vi("c", TensorProto.BOOL, [])
    if how.startswith("if_"):
        then_out = [helper.make_node("Relu", ["x"], ["t0"])]
        if how == "if_count":
            then_b = _branch("then", then_out + [helper.make_node("Neg", ["x"], ["t1"])],
                             [_vi("t0", TensorProto.FLOAT, None), _vi("t1", TensorProto.FLOAT, None)])
        else:
            then_b = _branch("then", then_out, [_vi("t0", TensorProto.FLOAT, None)])
        if how == "if_dtype":
            else_nodes = [helper.make_node("Cast", ["x"], ["e0"], to=TensorProto.INT64)]
            else_b = _branch("else", else_nodes, [_vi("e0", TensorProto.INT64, None)])
        elif how == "if_rank":  # legal: If's outputs may differ in shape between branches
            else_nodes = [helper.make_node("Flatten", ["x"], ["e0"], axis=0)]
            else_b = _branch("else", else_nodes, [_vi("e0", TensorProto.FLOAT, None)])
        else:
            else_b = _branch("else", [helper.make_node("Neg", ["x"], ["e0"])], [_vi("e0", TensorProto.FLOAT, None)])
        outs = ["y", "y2"] if how == "if_count" else ["y"]
        node = helper.make_node("If", ["c"], outs, then_branch=then_b, else_branch=else_b)
        return _model([node], [c, x], [_vi(o, TensorProto.FLOAT, None) for o in outs]), f"control_flow {how}"
    if how.startswith("loop_"):
        # body(i, cond, v) -> (cond', v'): v' = v + 1, cond' = i < 2 (so a huge trip count ends)
        trip, cond_in, cond_val = 3, TensorProto.BOOL, True
        body_nodes = [helper.make_node("Constant", [], ["one"], value=helper.make_tensor("", TensorProto.FLOAT, [], [1.0])),
                      helper.make_node("Add", ["v_in", "one"], ["v_out"]),
                      helper.make_node("Constant", [], ["two"], value=helper.make_tensor("", TensorProto.INT64, [], [2])),
                      helper.make_node("Less", ["i", "two"], ["cond_out"])]
        v_out_type = TensorProto.FLOAT
        if how == "loop_dtype":
            body_nodes[1] = helper.make_node("Add", ["v_in", "one"], ["v_f"])
            body_nodes.append(helper.make_node("Cast", ["v_f"], ["v_out"], to=TensorProto.INT64))
            v_out_type = TensorProto.INT64
        elif how == "loop_rank":
            body_nodes[1] = helper.make_node("Add", ["v_in", "one"], ["v_f"])
            body_nodes.append(helper.make_node("Flatten", ["v_f"], ["v_out"], axis=0))
        elif how == "loop_intmax":
            trip = INT64_MAX
        elif how == "loop_cond_float":
            cond_in = TensorProto.FLOAT
        elif how == "loop_cond_false":
            cond_val = False
        body = helper.make_graph(body_nodes, "body",
                                 [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
                                  _vi("v_in", TensorProto.FLOAT, None)],
                                 [_vi("cond_out", TensorProto.BOOL, []), _vi("v_out", v_out_type, None)])
        if cond_in == TensorProto.FLOAT:
            cond = _init("cond", 1.0, np.float32)
        elif how == "loop_cond_vector":
            cond = _init("cond", [True, False], np.bool_)
        else:
            cond = _init("cond", cond_val, np.bool_)
        node = helper.make_node("Loop", ["trip", "cond", "x"], ["y"], body=body)
        return _model([node], [x], [_vi("y", TensorProto.FLOAT, None)], [_init("trip", trip), cond]), \
            f"control_flow {how}"
    if how.startswith("scan_"):
        # Scan over x's rows: state s += row; scan output = row * 2
        body = helper.make_graph(
            [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
             helper.make_node("Add", ["row", "row"], ["r2"])], "scan_body",
            [_vi("s_in", TensorProto.FLOAT, [3]), _vi("row", TensorProto.FLOAT, [3])],
            [_vi("s_out", TensorProto.FLOAT, [3]), _vi("r2", TensorProto.FLOAT, [3])])
        attrs = {"num_scan_inputs": 1}
        if how == "scan_axis":
            attrs["scan_input_axes"] = [rng.choice([2, -3, 1 << 40])]
        elif how == "scan_count":
            attrs["num_scan_inputs"] = rng.choice([0, 2, -1, 1 << 40])
        else:
            attrs["scan_input_directions"] = [rng.choice([2, -1])]
        node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, **attrs)
        return _model([node], [x], [_vi("s", TensorProto.FLOAT, None), _vi("ys", TensorProto.FLOAT, None)],
                      [_init("s0", [0, 0, 0], np.float32)]), f"control_flow {how} {attrs}"
    # Outer-scope names: a body that reads a value the outer graph makes only after the If
    # (not in scope: invalid), or a body that defines a name the outer graph already has
    # (shadowing: invalid in ONNX's SSA form).
    if how == "outer_later":
        then_b = _branch("then", [helper.make_node("Relu", ["late"], ["t0"])], [_vi("t0", TensorProto.FLOAT, None)])
        else_b = _branch("else", [helper.make_node("Neg", ["x"], ["e0"])], [_vi("e0", TensorProto.FLOAT, None)])
        nodes = [helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
                 helper.make_node("Sigmoid", ["x"], ["late"]),
                 helper.make_node("Add", ["y", "late"], ["z"])]
    else:
        then_b = _branch("then", [helper.make_node("Relu", ["x"], ["pre"]), helper.make_node("Neg", ["pre"], ["t0"])],
                         [_vi("t0", TensorProto.FLOAT, None)])
        else_b = _branch("else", [helper.make_node("Neg", ["x"], ["e0"])], [_vi("e0", TensorProto.FLOAT, None)])
        nodes = [helper.make_node("Sigmoid", ["x"], ["pre"]),
                 helper.make_node("If", ["c"], ["y"], then_branch=then_b, else_branch=else_b),
                 helper.make_node("Add", ["y", "pre"], ["z"])]
    return _model(nodes, [c, x], [_vi("z", TensorProto.FLOAT, None)]), f"control_flow {how}"


# --- quantization -----------------------------------------------------------------------------

def m_quant(m, rng, wd):
    """QuantizeLinear, DequantizeLinear, QLinearMatMul, MatMulInteger and DynamicQuantizeLinear
    with zero points of another type than the data, per-axis scales of the wrong length, axes
    out of range and block sizes that do not divide the axis."""
    how = rng.choice(["q_zp_type", "dq_zp_type", "q_axis_len", "dq_axis_range", "q_block", "dq_block_zero",
                      "q_scale_int", "mmi_zp_shape", "mmi_float", "dql_int", "dq_int4", "qlmm_zp_type",
                      "q_float8", "q_valid_axis"])
    x = _vi("x", TensorProto.FLOAT, [2, 4])
    y = _vi("y", TensorProto.FLOAT, None)
    note = f"quant {how}"
    if how in ("q_zp_type", "q_axis_len", "q_block", "q_scale_int", "q_float8", "q_valid_axis"):
        scale = _init("sc", [0.05] if how in ("q_zp_type", "q_float8") else [0.05, 0.1, 0.2, 0.4], np.float32)
        zp_type = np.uint8 if how == "q_zp_type" else np.int8
        zp = _init("zp", [3] * len(scale.dims and [0] * scale.dims[0]), zp_type)
        attrs = {"axis": 1}
        if how == "q_zp_type":  # scale of one element, zero point uint8 of shape [1] vs int8 asked
            zp = _init("zp", 3, np.uint8)
            attrs = {"output_dtype": TensorProto.INT8}
        elif how == "q_axis_len":
            scale = _init("sc", [0.05, 0.1, 0.2], np.float32)
            zp = _init("zp", [0, 0, 0], np.int8)
        elif how == "q_block":
            attrs = {"axis": 1, "block_size": rng.choice([3, -2, 1 << 40])}
            scale = _init("sc", [[0.1, 0.2], [0.3, 0.4]], np.float32)
            zp = _init("zp", [[0, 0], [0, 0]], np.int8)
        elif how == "q_scale_int":
            scale = _init("sc", [1, 2, 3, 4], np.int32)
        elif how == "q_float8":
            zp = helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [0.0])
            attrs = {}
        nodes = [helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"], **attrs),
                 helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"], **attrs)]
        return _model(nodes, [x], [y], [scale, zp]), note + f" {attrs}"
    if how in ("dq_zp_type", "dq_axis_range", "dq_block_zero", "dq_int4"):
        q = _init("q", np.arange(8).reshape(2, 4), np.int8)
        scale, zp, attrs = _init("sc", 0.5, np.float32), _init("zp", 1, np.int8), {}
        if how == "dq_zp_type":
            zp = _init("zp", 1, np.int32)
        elif how == "dq_axis_range":
            scale, zp = _init("sc", [0.5, 0.25], np.float32), _init("zp", [1, 2], np.int8)
            attrs = {"axis": rng.choice([2, -3, 1 << 40])}
        elif how == "dq_block_zero":
            scale, zp = _init("sc", [[0.5], [0.25]], np.float32), _init("zp", [[1], [2]], np.int8)
            attrs = {"axis": 1, "block_size": 0}
        else:
            q = helper.make_tensor("q", TensorProto.INT4, [2, 4], [1, -2, 3, -4, 5, -6, 7, -8])
            zp = helper.make_tensor("zp", TensorProto.INT4, [], [1])
        nodes = [helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["d"], **attrs),
                 helper.make_node("Add", ["d", "x"], ["y"])]
        return _model(nodes, [x], [y], [q, scale, zp]), note + f" {attrs}"
    if how.startswith("mmi_"):
        a = _vi("a", TensorProto.UINT8, [2, 4]) if how == "mmi_zp_shape" else x
        b = _init("b", np.arange(12).reshape(4, 3) % 7, np.uint8)
        zps = [_init("azp", [1, 2, 3], np.uint8)] if how == "mmi_zp_shape" else []
        nodes = [helper.make_node("MatMulInteger", ["a" if how == "mmi_zp_shape" else "x", "b"] +
                                  (["azp"] if zps else []), ["mi"]),
                 helper.make_node("Cast", ["mi"], ["y"], to=TensorProto.FLOAT)]
        return _model(nodes, [a], [y], [b] + zps), note
    if how == "dql_int":
        xi = _vi("xi", TensorProto.INT32, [2, 4])
        nodes = [helper.make_node("DynamicQuantizeLinear", ["xi"], ["q", "s", "z"]),
                 helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)]
        return _model(nodes, [xi], [y]), note
    # QLinearMatMul with a zero point of another type than its quantized operand
    a = _vi("a", TensorProto.UINT8, [2, 4])
    inits = [_init("as", 0.1, np.float32), _init("azp", 3, np.int8), _init("b", np.ones([4, 3]), np.uint8),
             _init("bs", 0.2, np.float32), _init("bzp", 1, np.uint8), _init("ys", 0.3, np.float32),
             _init("yzp", 2, np.uint8)]
    nodes = [helper.make_node("QLinearMatMul", ["a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"], ["qy"]),
             helper.make_node("Cast", ["qy"], ["y"], to=TensorProto.FLOAT)]
    return _model(nodes, [a], [y], inits), note


# --- rare element types -------------------------------------------------------------------------

RARE = [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT4, TensorProto.UINT4,
        TensorProto.COMPLEX64, TensorProto.BFLOAT16, TensorProto.FLOAT16, TensorProto.UINT16]


def m_rare_dtype(m, rng, wd):
    """Element types most kernels never see (float8, int4, complex64, bfloat16, string) as
    inputs, initializers and Cast targets of float operators."""
    dt = rng.choice(RARE)
    name = TensorProto.DataType.Name(dt)
    how = rng.choice(["input_relu", "init_add", "init_matmul", "cast_to", "cast_from_string", "cast_to_string",
                      "cast_roundtrip", "constant_conv"])
    x = _vi("x", TensorProto.FLOAT, [2, 4])
    if how == "input_relu":
        return _model([helper.make_node("Relu", ["r"], ["y"])], [_vi("r", dt, [2, 4])], [_vi("y", dt, None)]), \
            f"rare_dtype {how} {name}"
    if how in ("init_add", "init_matmul", "constant_conv"):
        vals = [1, 2, 3, 0, 1, 2, 3, 0] if dt != TensorProto.COMPLEX64 else [1 + 1j] * 8
        t = helper.make_tensor("w", dt, [4, 2] if how == "init_matmul" else [2, 4], vals)
        if how == "constant_conv":
            t = helper.make_tensor("w", dt, [2, 2, 2], vals)
            nodes = [helper.make_node("Reshape", ["x", "s"], ["x3"]), helper.make_node("Conv", ["x3", "w"], ["y"])]
            return _model(nodes, [x], [_vi("y", TensorProto.FLOAT, None)], [t, _init("s", [1, 2, 4])]), \
                f"rare_dtype {how} {name}"
        op = "MatMul" if how == "init_matmul" else "Add"
        return _model([helper.make_node(op, ["x", "w"], ["y"])], [x], [_vi("y", TensorProto.FLOAT, None)], [t]), \
            f"rare_dtype {how} {name}"
    if how == "cast_from_string":
        s = helper.make_tensor("s", TensorProto.STRING, [2, 4],
                               [b"1.5", b"-2", b"nan", b"inf", b"1e40", b"abc", b"", b"0x10"])
        nodes = [helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT), helper.make_node("Add", ["sf", "x"], ["y"])]
        return _model(nodes, [x], [_vi("y", TensorProto.FLOAT, None)], [s]), f"rare_dtype {how}"
    if how == "cast_to_string":
        nodes = [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING)]
        return _model(nodes, [x], [_vi("y", TensorProto.STRING, None)]), f"rare_dtype {how}"
    if how == "cast_to":
        return _model([helper.make_node("Cast", ["x"], ["y"], to=dt)], [x], [_vi("y", dt, None)]), \
            f"rare_dtype {how} {name}"
    nodes = [helper.make_node("Cast", ["x"], ["r"], to=dt), helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
    return _model(nodes, [x], [_vi("y", TensorProto.FLOAT, None)]), f"rare_dtype {how} {name}"


# --- sequences and optionals at run time -----------------------------------------------------

def m_sequence(m, rng, wd):
    """Sequence and optional operators given positions past the end, splits that do not sum,
    empty optionals and empty sequences."""
    how = rng.choice(["at_past_end", "at_negative", "erase_past_end", "split_sum", "split_negative",
                      "optional_empty", "concat_empty", "insert_past_end", "at_runtime"])
    x = _vi("x", TensorProto.FLOAT, [4, 3])
    y = _vi("y", TensorProto.FLOAT, None)
    split = helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0)
    inputs, inits, bad = [x], [], None
    if how in ("at_past_end", "at_negative"):
        inits = [_init("pos", 4 if how == "at_past_end" else -5)]
        nodes = [split, helper.make_node("SequenceAt", ["seq", "pos"], ["y"])]
    elif how == "at_runtime":
        inputs.append(_vi("pos", TensorProto.INT64, []))
        nodes = [split, helper.make_node("SequenceAt", ["seq", "pos"], ["y"])]
        bad = ("pos", rng.choice([4, -5, INT64_MAX]))
    elif how == "erase_past_end":
        inits = [_init("pos", rng.choice([4, -5, INT64_MAX]))]
        nodes = [split, helper.make_node("SequenceErase", ["seq", "pos"], ["seq2"]),
                 helper.make_node("ConcatFromSequence", ["seq2"], ["y"], axis=0)]
    elif how == "insert_past_end":
        inits = [_init("pos", rng.choice([6, -6]))]
        nodes = [split, helper.make_node("SequenceInsert", ["seq", "x", "pos"], ["seq2"]),
                 helper.make_node("ConcatFromSequence", ["seq2"], ["y"], axis=0)]
    elif how in ("split_sum", "split_negative"):
        inits = [_init("sp", [1, 1] if how == "split_sum" else [5, -1])]
        nodes = [helper.make_node("SplitToSequence", ["x", "sp"], ["seq"], axis=0),
                 helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0)]
    elif how == "optional_empty":
        nodes = [helper.make_node("Optional", [], ["opt"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, None)),
                 helper.make_node("OptionalGetElement", ["opt"], ["e"]), helper.make_node("Add", ["e", "x"], ["y"])]
    else:
        nodes = [helper.make_node("SequenceEmpty", [], ["seq"], dtype=TensorProto.FLOAT),
                 helper.make_node("ConcatFromSequence", ["seq"], ["c"], axis=0),
                 helper.make_node("Add", ["c", "x"], ["y"])]
    return _model(nodes, inputs, [y], inits), f"sequence {how}", bad


# --- run-time inputs ------------------------------------------------------------------------

def _plain_model():
    """x[2, 3] float and n[] int64: y = Relu(x) * n."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["r", "nf"], ["y"])]
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [2, 3]), _vi("n", TensorProto.INT64, [])],
                  [_vi("y", TensorProto.FLOAT, None)])


def _npz_bytes(wd, feeds):
    path = os.path.join(wd, "_feeds.npz")
    np.savez(path, **feeds)
    data = open(path, "rb").read()
    os.remove(path)
    return data


def m_run_inputs(m, rng, wd):
    """An inputs file that does not fit the model: another type, rank or shape, NaN and Inf
    (legal), an empty tensor, a missing or an extra name, a file of 0 bytes, a truncated npz,
    an npz holding a pickled object; and a dynamic dim whose run-time value asks Expand,
    Tile or Reshape for terabytes."""
    how = rng.choice(["dtype", "rank", "shape", "nonfinite", "empty", "missing", "extra", "zero_bytes",
                      "truncated", "not_npz", "object", "expand_bomb", "tile_bomb", "reshape_bomb",
                      "fortran", "scalar_for_vector"])
    model = _plain_model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    feeds = {"x": x, "n": np.array(3, np.int64)}
    run = {}
    if how == "dtype":
        feeds["x"] = x.astype(rng.choice([np.float64, np.int64, np.float16, np.bool_]))
    elif how == "rank":
        feeds["x"] = x.reshape(rng.choice([(6,), (1, 2, 3), (2, 3, 1)]))
    elif how == "shape":
        feeds["x"] = np.zeros(rng.choice([(3, 2), (2, 4), (0, 3)]), np.float32)
    elif how == "nonfinite":
        feeds["x"] = np.array([[np.nan, np.inf, -np.inf], [0, -0.0, 1e38]], np.float32)
    elif how == "empty":
        feeds["n"] = np.zeros([0], np.int64)
    elif how == "missing":
        del feeds[rng.choice(["x", "n"])]
    elif how == "extra":
        feeds["ghost"] = np.ones([2], np.float32)
    elif how == "fortran":
        feeds["x"] = np.asfortranarray(x)  # legal: stored column-major in the npz
    elif how == "scalar_for_vector":
        feeds["n"] = np.array([3], np.int64)
    elif how in ("zero_bytes", "truncated", "not_npz", "object"):
        data = _npz_bytes(wd, feeds)
        if how == "zero_bytes":
            data = b""
        elif how == "truncated":
            data = data[:rng.randrange(1, len(data))]
        elif how == "not_npz":
            data = b"\x93NUMPY\x01\x00" + b"v" * 200
        else:
            path = os.path.join(wd, "_obj.npz")
            np.savez(path, x=np.array([{"a": 1}, None], dtype=object), n=np.array(3, np.int64))
            data = open(path, "rb").read()
            os.remove(path)
        run["inputs_bytes"] = data
        return model, f"run_inputs {how}", None, [], None, run
    else:
        # y = op(x, by a run-time shape) with the shape's values huge
        s = _vi("s", TensorProto.INT64, [2])
        op = {"expand_bomb": "Expand", "tile_bomb": "Tile", "reshape_bomb": "Reshape"}[how]
        big = rng.choice([1 << 20, 1 << 31, 1 << 40, INT64_MAX])
        nodes = [helper.make_node(op, ["x", "s"], ["y"])]
        model = _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 3] if op == "Expand" else [2, 3]), s],
                       [_vi("y", TensorProto.FLOAT, None)])
        shape = [big, 3] if op == "Expand" else [big, big] if op == "Tile" else [big, -1]
        feeds = {"x": np.ones([1, 3] if op == "Expand" else [2, 3], np.float32), "s": np.array(shape, np.int64)}
        return model, f"run_inputs {how} {shape}", None, [], None, {"feeds": feeds}
    return model, f"run_inputs {how}", None, [], None, {"feeds": feeds}


# --- command lines ----------------------------------------------------------------------------

def _mkfifo(wd):
    os.mkfifo(os.path.join(wd, "pipe.onnx"))


def _mkdir_model(wd):
    os.makedirs(os.path.join(wd, "dir.onnx"), exist_ok=True)


def _mk_plain_file(wd):
    with open(os.path.join(wd, "plain"), "w") as f:
        f.write("not a folder\n")


def m_cli(m, rng, wd):
    """Command lines that are hostile around a good model: -o onto the input itself, into a
    folder that does not exist or is a file, --input-shape strings that do not parse,
    name no input or give extents of 0, -1 or 2^62, and a model path that is a folder or a
    FIFO."""
    how = rng.choice(["out_is_input", "out_missing_dir", "out_under_file", "out_is_dir", "shape_garbage",
                      "shape_unknown", "shape_zero", "shape_negative", "shape_huge", "shape_rank",
                      "shape_twice", "model_dir", "model_fifo", "model_missing"])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])]
    model = _model(nodes, [_vi("x", TensorProto.FLOAT, ["N", 3])], [_vi("y", TensorProto.FLOAT, None)])
    run = {"no_reference": True}
    if how == "out_is_input":
        run["output"] = "@model"
    elif how == "out_missing_dir":
        run["output"] = "no/such/dir/out.onnx"
    elif how == "out_under_file":
        run.update(output="plain/out.onnx", setup=_mk_plain_file)
    elif how == "out_is_dir":
        run["output"] = "."
    elif how.startswith("shape_"):
        spec = {"shape_garbage": rng.choice(["x:", "x:a,b", ":1,3", "x", "x:1,,3", "x:1;3", "x:0x10,3"]),
                "shape_unknown": "nosuch:2,3", "shape_zero": "x:0,3", "shape_negative": "x:-1,3",
                "shape_huge": rng.choice(["x:4611686018427387904,3", "x:99999999999999999999,3",
                                          "x:1048576,1048576"]),
                "shape_rank": rng.choice(["x:2", "x:2,3,4"])}.get(how)
        run["args"] = ["--input-shape", "x:2,3", "--input-shape", "x:4,3"] if how == "shape_twice" \
            else ["--input-shape", spec]
        return model, f"cli {how} {run['args'][-1]}", None, [], None, run
    elif how == "model_dir":
        run.update(model="dir.onnx", setup=_mkdir_model)
    elif how == "model_fifo":
        run.update(model="pipe.onnx", setup=_mkfifo)
    else:
        run["model"] = "missing.onnx"
    return model, f"cli {how}", None, [], None, run


MUTATORS = {f.__name__[2:]: f for f in [m_control_flow, m_quant, m_rare_dtype, m_sequence, m_run_inputs, m_cli]}
