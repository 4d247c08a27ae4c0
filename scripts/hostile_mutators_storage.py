"""The eleventh family of the hostile-model campaign (scripts/hostile_campaign.py): what a model
says about how its values are stored, against what it stores, where the ten others mutate the
values, names, shapes and versions themselves. Tensors of element type 0 (UNDEFINED) as an
initializer, a Constant's value, an If branch's initializer or a function's Constant; a
tensor's values in the field of another type (int64_data of a float tensor, float_data of an
int64 one, strings), in two fields at once (raw_data beside a typed field), or too few or too
many of them; the legal homes that look wrong (float16 in int32_data, uint32 in uint64_data);
TensorProto's segment; value_info that disagrees with a graph input, an initializer or
another value_info of the same name; and counts no real model has (10^5 opset imports, a
Split into 10^4 outputs, one value as a thousand graph outputs, a 50 MB doc_string,
quantization annotations naming nothing).

Each mutator builds a small model of its own (the source is ignored) and returns (model,
note), as hostile_mutators_extremes.py's do.
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from hostile_mutators_semantic import _init, _model, _vi

F = TensorProto.FLOAT


def _weights(name="w", n=4):
    return numpy_helper.from_array(np.arange(1, n + 1, dtype=np.float32), name)


def _add_model(w, opset=21):
    """y = x + w over 4 floats."""
    return _model([helper.make_node("Add", ["x", w.name], ["y"], name="add")], [_vi("x", F, [4])], [_vi("y", F, [4])],
                  [w], opset=opset)


def m_undefined_type(m, rng, wd):
    """A tensor of element type 0 (UNDEFINED): onnx.checker and ONNX Runtime refuse it."""
    where = rng.choice(["initializer", "constant", "if_branch", "function", "sparse"])
    w = _weights("c")
    w.data_type = TensorProto.UNDEFINED
    x, y = _vi("x", F, [4]), _vi("y", F, [4])
    if where == "initializer":
        return _add_model(w), "undefined_type initializer"
    if where == "constant":
        nodes = [helper.make_node("Constant", [], ["c"], value=w, name="k"), helper.make_node("Add", ["x", "c"], ["y"])]
        return _model(nodes, [x], [y]), "undefined_type constant"
    if where == "if_branch":
        then_b = helper.make_graph([helper.make_node("Add", ["x", "c"], ["t"])], "then", [], [_vi("t", F, [4])],
                                   initializer=[w])
        else_b = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", F, [4])])
        nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then_b, else_branch=else_b, name="if")]
        return _model(nodes, [x, _vi("cond", TensorProto.BOOL, [])], [y]), "undefined_type if_branch"
    if where == "function":
        body = [helper.make_node("Constant", [], ["c"], value=w), helper.make_node("Add", ["a", "c"], ["b"])]
        f = helper.make_function("local", "AddC", ["a"], ["b"], body, [helper.make_opsetid("", 21)])
        model = _model([helper.make_node("AddC", ["x"], ["y"], domain="local", name="call")], [x], [y])
        model.opset_import.append(helper.make_opsetid("local", 1))
        model.functions.append(f)
        return model, "undefined_type function"
    values = numpy_helper.from_array(np.array([5.0], np.float32), "c")
    values.data_type = TensorProto.UNDEFINED
    sparse = helper.make_sparse_tensor(values, numpy_helper.from_array(np.array([2], np.int64), "i"), [4])
    model = _model([helper.make_node("Add", ["x", "c"], ["y"])], [x], [y])
    model.graph.sparse_initializer.append(sparse)
    return model, "undefined_type sparse"


def m_data_field(m, rng, wd):
    """A tensor's values in another type's field, in two fields, too few or too many of them;
    or in a legal field that looks wrong."""
    how = rng.choice(["int64_for_float", "double_for_float", "string_for_float", "float_for_int64", "raw_and_typed",
                      "typed_short", "typed_long", "float16_in_int32", "uint32_in_uint64", "bool_in_int32",
                      "int8_past_range"])
    w = _weights()
    w.ClearField("raw_data")
    if how == "int64_for_float":
        w.int64_data.extend([1, 2, 3, 4])
    elif how == "double_for_float":
        w.double_data.extend([1, 2, 3, 4])
    elif how == "string_for_float":
        w.string_data.extend([b"1", b"2", b"3", b"4"])
    elif how == "raw_and_typed":  # ONNX Runtime reads raw_data
        w.raw_data = np.arange(1, 5, dtype=np.float32).tobytes()
        w.float_data.extend([9, 9, 9, 9])
    elif how == "typed_short":
        w.float_data.extend([1, 2, 3])
    elif how == "typed_long":
        w.float_data.extend([1, 2, 3, 4, 5])
    elif how == "float_for_int64":
        w = _init("w", [1, 2, 3, 4])
        w.ClearField("raw_data")
        w.float_data.extend([1, 2, 3, 4])
        nodes = [helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64), helper.make_node("Add", ["xi", "w"], ["y"])]
        return _model(nodes, [_vi("x", F, [4])], [_vi("y", TensorProto.INT64, [4])], [w]), f"data_field {how}"
    else:
        dtype, field, values, np_type = {
            "float16_in_int32": (TensorProto.FLOAT16, "int32_data",
                                 np.array([1, -2, 0.5, 65504], np.float16).view(np.uint16).tolist(), np.float16),
            "uint32_in_uint64": (TensorProto.UINT32, "uint64_data", [1, 2, 4294967295, 7], np.uint32),
            "bool_in_int32": (TensorProto.BOOL, "int32_data", [1, 0, 1, 1], np.bool_),
            "int8_past_range": (TensorProto.INT8, "int32_data", [1, -128, 127, 300], np.int8),
        }[how]
        w = TensorProto(name="w", data_type=dtype, dims=[4])
        getattr(w, field).extend(values)
        cast_to = TensorProto.INT64 if dtype == TensorProto.BOOL else F
        nodes = [helper.make_node("Cast", ["w"], ["wf"], to=cast_to), helper.make_node("Identity", ["wf"], ["y"])]
        return _model(nodes, [], [_vi("y", cast_to, [4])], [w]), f"data_field {how}"
    return _add_model(w), f"data_field {how}"


def m_segment(m, rng, wd):
    """TensorProto.segment (a tensor that is part of a larger one): ONNX Runtime ignores it."""
    w = _weights()
    begin, end = rng.choice([(1, 3), (0, 4), (5, 2), (-1, 1 << 62)])
    w.segment.begin, w.segment.end = begin, end
    return _add_model(w), f"segment {begin} {end}"


def m_value_info_conflict(m, rng, wd):
    """value_info that disagrees with a graph input, an initializer, an output or itself."""
    how = rng.choice(["input_dtype", "input_rank", "initializer_dtype", "output_dtype", "twice", "intermediate_dims"])
    w = _weights()
    nodes = [helper.make_node("Add", ["x", "w"], ["s"], name="add"), helper.make_node("Relu", ["s"], ["y"], name="relu")]
    model = _model(nodes, [_vi("x", F, [4])], [_vi("y", F, [4])], [w])
    vi = model.graph.value_info
    if how == "input_dtype":
        vi.append(_vi("x", TensorProto.INT32, [4]))
    elif how == "input_rank":
        vi.append(_vi("x", F, [2, 2]))
    elif how == "initializer_dtype":
        vi.append(_vi("w", TensorProto.INT64, [4]))
    elif how == "output_dtype":
        vi.append(_vi("y", TensorProto.DOUBLE, [4]))
    elif how == "twice":
        vi.extend([_vi("s", F, [4]), _vi("s", F, [5])])
    else:
        vi.append(_vi("s", F, [4, 1]))
    return model, f"value_info_conflict {how}"


def m_counts(m, rng, wd):
    """Counts no real model has: opset imports, outputs of a node, graph outputs, doc bytes."""
    how = rng.choice(["opset_imports", "split_outputs", "graph_outputs", "doc_string", "quant_annotation"])
    x, y = _vi("x", F, [4]), _vi("y", F, [4])
    if how == "opset_imports":
        model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])
        model.opset_import.extend(helper.make_opsetid(f"vendor.d{i}", 1) for i in range(100_000))
        return model, "counts opset_imports 100000"
    if how == "split_outputs":
        n = 10_000
        nodes = [helper.make_node("Split", ["x"], [f"s{i}" for i in range(n)], axis=0, num_outputs=n, name="split"),
                 helper.make_node("Identity", [f"s{n - 1}"], ["y"])]
        return _model(nodes, [_vi("x", F, [n])], [_vi("y", F, [1])]), f"counts split_outputs {n}"
    if how == "graph_outputs":
        return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y] * 1000), "counts graph_outputs 1000"
    if how == "doc_string":
        model = _model([helper.make_node("Relu", ["x"], ["y"], doc_string="d" * (50 << 20))], [x], [y])
        return model, "counts doc_string 50MB"
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])
    for i in range(rng.choice([1, 10_000])):
        a = model.graph.quantization_annotation.add()
        a.tensor_name = rng.choice(["x", "nothing"])
        p = a.quant_parameter_tensor_names.add()
        p.key, p.value = "SCALE_TENSOR", f"missing{i}"
    return model, "counts quant_annotation"


# Classes of outcomes that are not isomer's to fix, as hostile_campaign.TRIAGED's entries.
TRIAGED = [
    ("value_info_conflict", ("optimize", "run_native", "run", "cost", "convert", "py_optimize"), r"initializer_dtype$",
     r"", r"value_info declares",
     "value_info that gives an initializer another element type than its data: onnx.checker refuses it (\"Inferred "
     "elem type differs from existing elem type\"), ONNX Runtime runs the data's type; isomer refuses the "
     "contradiction naming the value (value_info naming a graph input or output is ignored, as both ignore it)"),
]

MUTATORS = {f.__name__[2:]: f for f in [m_undefined_type, m_data_field, m_segment, m_value_info_conflict, m_counts]}
