"""More mutators of the hostile-model campaign (scripts/hostile_campaign.py): tensor and file
forms (sparse initializers, strings where numbers belong, odd-length half-precision data,
negative dims, external data past the file's end), size bombs (attribute lists of a million
entries, subgraphs nested far past any recursion limit, a hundred thousand tiny nodes),
names that are not UTF-8, operators of future opsets, and nodes inside If/Loop/Scan bodies
broken as the main graph's are. Same contract as hostile_mutators.py.

A mutator may return a fourth item: (old, new) byte pairs of equal length that the runner
replaces in the serialized model (how a name that is not UTF-8 gets into the file, since
the protobuf library refuses to set one).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hostile_mutators import _externalize, _init_names, _pick, _subgraph_attrs


def _numeric_inits(g, rng=None):
    """The graph's numeric initializers; where it has none (ONNX's node cases feed every
    tensor as an input) and `rng` is given, a static numeric graph input made one first."""
    kinds = (TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.DOUBLE, TensorProto.FLOAT16)
    inits = [t for t in g.initializer if t.data_location != TensorProto.EXTERNAL and t.data_type in kinds]
    if inits or rng is None:
        return inits
    ins = [i for i in g.input if i.name not in _init_names(g) and i.type.tensor_type.elem_type in kinds
           and i.type.tensor_type.HasField("shape")
           and all(d.HasField("dim_value") and 0 < d.dim_value <= 64 for d in i.type.tensor_type.shape.dim)]
    vi = _pick(rng, ins)
    if vi is None:
        return []
    dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
    a = (np.random.default_rng(rng.randrange(1 << 30)).standard_normal(dims) * 3).astype(dt)
    g.input.remove(vi)
    g.initializer.append(numpy_helper.from_array(a, vi.name))
    return [g.initializer[-1]]


def m_sparse_init(m, rng, wd):
    """An initializer moved to sparse_initializer, well formed or with indices that lie."""
    t = _pick(rng, _numeric_inits(m.graph, rng))
    if t is None:
        return None
    a = numpy_helper.to_array(t).reshape(-1)
    nz = np.flatnonzero(a)
    how = rng.choice(["valid", "index_past_end", "index_negative", "count_mismatch", "dims_lie"])
    idx = nz.astype(np.int64)
    vals = a[nz]
    if how == "index_past_end" and idx.size:
        idx[-1] = a.size + 1000
    elif how == "index_negative" and idx.size:
        idx[0] = -3
    elif how == "count_mismatch":
        idx = np.concatenate([idx, np.array([0, 0], np.int64)])
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(numpy_helper.from_array(vals, t.name))
    sp.indices.CopyFrom(numpy_helper.from_array(idx, ""))
    dims = list(t.dims) if how != "dims_lie" else [1 << 40] + list(t.dims)
    sp.dims.extend(dims)
    m.graph.initializer.remove(t)
    m.graph.sparse_initializer.append(sp)
    return m, f"initializer {t.name} sparse {how}"


def m_string_tensor(m, rng, wd):
    """Strings where numbers are expected: an initializer, a Constant or a graph input."""
    how = rng.choice(["init", "constant", "input"])
    if how == "init":
        t = _pick(rng, _numeric_inits(m.graph, rng))
        if t is None:
            return None
        dims, name = list(t.dims), t.name
        t.CopyFrom(helper.make_tensor(name, TensorProto.STRING, dims,
                                      [b"3.5"] * int(np.prod(dims, dtype=np.int64))))
        return m, f"initializer {name} made of strings"
    if how == "constant":
        n = _pick(rng, [n for n in m.graph.node if n.op_type == "Constant" and n.attribute
                        and n.attribute[0].name == "value"])
        if n is None:
            return None
        dims = list(n.attribute[0].t.dims)
        n.attribute[0].t.CopyFrom(helper.make_tensor("", TensorProto.STRING, dims,
                                                     [b"nan"] * int(np.prod(dims, dtype=np.int64))))
        return m, f"constant {n.output[0]} made of strings"
    vi = _pick(rng, [i for i in m.graph.input if i.name not in _init_names(m.graph)
                     and i.type.HasField("tensor_type")])
    if vi is None:
        return None
    vi.type.tensor_type.elem_type = TensorProto.STRING
    return m, f"input {vi.name} declared string"


def m_half_odd(m, rng, wd):
    """float16/bfloat16 raw_data of an odd number of bytes (or one element short)."""
    t = _pick(rng, _numeric_inits(m.graph, rng))
    if t is None:
        return None
    a = numpy_helper.to_array(t).astype(np.float16)
    raw = a.tobytes()
    how = rng.choice(["odd", "short", "long"])
    raw = raw[:-1] if how == "odd" and raw else raw[:-2] if how == "short" and raw else raw + b"\x01"
    dt = rng.choice([TensorProto.FLOAT16, TensorProto.BFLOAT16])
    for f in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
        t.ClearField(f)
    t.data_type = dt
    t.raw_data = raw
    return m, f"initializer {t.name} {TensorProto.DataType.Name(dt)} raw_data {how} ({len(raw)} bytes)"


def m_negative_dim(m, rng, wd):
    """A negative dim in an initializer, with data that matches the product of the dims or not."""
    t = _pick(rng, [t for t in _numeric_inits(m.graph, rng) if len(t.dims)])
    if t is None:
        return None
    d = rng.randrange(len(t.dims))
    how = rng.choice(["neg", "neg_pair", "neg_empty"])
    if how == "neg":
        t.dims[d] = -t.dims[d] if t.dims[d] else -1
    elif how == "neg_pair" and len(t.dims) >= 2:
        # Two negatives multiply to the element count the data has.
        e = (d + 1) % len(t.dims)
        t.dims[d], t.dims[e] = -t.dims[d], -t.dims[e]
    else:
        t.dims[d] = -1
        for f in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
            t.ClearField(f)
    return m, f"initializer {t.name} negative dim {how}: {list(t.dims)}"


def m_huge_attr(m, rng, wd):
    """An INTS/FLOATS attribute of about a million entries (pads, axes, perm, ...), or a
    STRING of megabytes."""
    n = _pick(rng, m.graph.node)
    if n is None:
        return None
    size = rng.choice([1 << 20, 10 ** 6 + 1])
    names = [a.name for a in n.attribute if a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS)]
    name = _pick(rng, names) or rng.choice(["pads", "axes", "perm", "kernel_shape", "strides"])
    for a in list(n.attribute):
        if a.name == name:
            n.attribute.remove(a)
    how = rng.choice(["ints", "floats", "string"])
    if how == "ints":
        n.attribute.append(helper.make_attribute(name, [rng.choice([0, 1, -1])] * size))
    elif how == "floats":
        n.attribute.append(helper.make_attribute(name, [0.5] * size))
    else:
        n.attribute.append(helper.make_attribute(name, b"p" * (size * 8)))
    return m, f"node {n.name or n.op_type} ({n.op_type}) attribute {name}: {how} x {size}"


def m_nest_bomb(m, rng, wd):
    """An output computed inside If nodes nested `depth` deep (recursion depth bomb)."""
    x = _pick(rng, [i for i in m.graph.input if i.name not in _init_names(m.graph)
                    and i.type.tensor_type.elem_type == TensorProto.FLOAT])
    if x is None:
        return None
    # Protobuf refuses messages nested over 100 deep (3 per level): 31 levels is near the
    # deepest a file can be, deeper ones never parse.
    depth = rng.choice([8, 20, 31])
    inner = helper.make_graph([helper.make_node("Neg", [x.name], ["nest_y0"])], "g0", [],
                              [helper.make_tensor_value_info("nest_y0", TensorProto.FLOAT, None)])
    for level in range(1, depth + 1):
        cond = helper.make_node("Constant", [], [f"nest_c{level}"],
                                value=numpy_helper.from_array(np.array(True), ""))
        # The else branch is flat: two copies of `inner` would double the file at every level.
        other = helper.make_graph([helper.make_node("Neg", [x.name], [f"nest_e{level}"])], f"e{level}", [],
                                  [helper.make_tensor_value_info(f"nest_e{level}", TensorProto.FLOAT, None)])
        node = helper.make_node("If", [f"nest_c{level}"], [f"nest_y{level}"], then_branch=inner, else_branch=other)
        inner = helper.make_graph([cond, node], f"g{level}", [],
                                  [helper.make_tensor_value_info(f"nest_y{level}", TensorProto.FLOAT, None)])
    m.graph.node.extend(inner.node)
    m.graph.output.append(helper.make_tensor_value_info(f"nest_y{depth}", TensorProto.FLOAT, None))
    return m, f"If nested {depth} deep"


def m_many_nodes(m, rng, wd):
    """A chain of 10^5 tiny nodes appended to a float input (import, search and run must stay
    about linear in the node count)."""
    x = _pick(rng, [i for i in m.graph.input if i.name not in _init_names(m.graph)
                    and i.type.tensor_type.elem_type == TensorProto.FLOAT])
    if x is None:
        return None
    count = rng.choice([20000, 100000])
    ops = ["Neg", "Abs", "Relu", "Identity"]
    prev = x.name
    for i in range(count):
        m.graph.node.append(helper.make_node(ops[i % len(ops)], [prev], [f"chain{i}"], name=f"chain_node{i}"))
        prev = f"chain{i}"
    m.graph.output.append(helper.make_tensor_value_info(prev, TensorProto.FLOAT, None))
    return m, f"chain of {count} nodes"


def m_external_end(m, rng, wd):
    """External data whose offset or length runs past the data file's end, or overflows."""
    t = _pick(rng, _numeric_inits(m.graph, rng))
    if t is None:
        return None
    raw = _externalize(t, wd)
    how = rng.choice(["length_past_end", "offset_plus_length", "overflow", "short_file", "not_a_number"])
    off, ln = {"length_past_end": ("0", str(len(raw) + 64)), "offset_plus_length": (str(max(len(raw) - 4, 0)), str(len(raw))),
               "overflow": (str((1 << 63) - 8), "16"), "short_file": (None, None),
               "not_a_number": ("0x10", "12abc")}[how]
    if how == "short_file":
        with open(os.path.join(wd, "w.bin"), "wb") as f:
            f.write(raw[: len(raw) // 2])
    for k, v in [("location", "w.bin"), ("offset", off), ("length", ln)]:
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, v
    return m, f"initializer {t.name} external {how}"


def m_non_utf8(m, rng, wd):
    """Names that are not UTF-8: a node's name, an intermediate value's name, an attribute's
    name or a domain (patched into the serialized bytes)."""
    how = rng.choice(["node_name", "value_name", "attr_name", "doc"])
    marker = b"NONUTF8MARK"
    bad = b"\xff\xfe\xc3(" + b"\x80" * (len(marker) - 4)
    if how == "node_name":
        n = _pick(rng, m.graph.node)
        if n is None:
            return None
        n.name = marker.decode()
    elif how == "value_name":
        outs = {o.name for o in m.graph.output}
        n = _pick(rng, [n for n in m.graph.node if n.output and n.output[0] and n.output[0] not in outs])
        if n is None:
            return None
        old = n.output[0]
        n.output[0] = marker.decode()
        for k in m.graph.node:
            for i, v in enumerate(k.input):
                if v == old:
                    k.input[i] = marker.decode()
        for v in m.graph.value_info:
            if v.name == old:
                v.name = marker.decode()
    elif how == "attr_name":
        n = _pick(rng, [n for n in m.graph.node if n.attribute])
        if n is None:
            return None
        n.attribute[0].name = marker.decode()
    else:
        m.graph.doc_string = marker.decode()
    return m, f"non-UTF-8 {how}", None, [(marker, bad)]


def m_future_op(m, rng, wd):
    """ai.onnx at a future opset (30), or a node of an operator no opset has."""
    how = rng.choice(["opset30", "opset30_ml", "unknown_op"])
    if how == "unknown_op":
        n = _pick(rng, m.graph.node)
        if n is None:
            return None
        n.op_type = "FutureOp" + n.op_type
        return m, f"node {n.name or 'unnamed'} made FutureOp{n.op_type[8:]}"
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx") and how == "opset30":
            o.version = 30
    if how == "opset30_ml":
        m.opset_import.add(domain="ai.onnx.ml", version=30)
    return m, f"opset {how}"


def m_body_node(m, rng, wd):
    """A node inside an If/Loop/Scan body broken as m_attr and m_node_arity break the main
    graph's, or a body whose inputs and outputs break the operator's contract."""
    subs = list(_subgraph_attrs(m.graph))
    if not subs:
        return None
    owner, b = rng.choice(subs)
    how = rng.choice(["attr", "arity", "op_type", "shadow", "io_count", "out_type", "vi_type"])
    n = _pick(rng, b.node)
    if how == "attr" and n is not None:
        n.attribute.append(helper.make_attribute("bogus_attribute", 3))
    elif how == "arity" and n is not None:
        n.input.extend([n.input[0] if n.input else "x"] * 4)
    elif how == "op_type" and n is not None:
        n.op_type = "NoSuchOp"
    elif how == "shadow" and n is not None and b.input and n.output:
        n.output[0] = b.input[0].name  # a body node redefines the body's own input
    elif how == "io_count":
        b.input.append(helper.make_tensor_value_info("extra_body_in", TensorProto.FLOAT, [2]))
        b.output.append(helper.make_tensor_value_info(b.input[-1].name, TensorProto.FLOAT, [2]))
    elif how == "out_type" and b.output:
        b.output[0].type.tensor_type.elem_type = rng.choice([TensorProto.INT8, TensorProto.BOOL])
    elif how == "vi_type" and n is not None and n.output and n.output[0]:
        b.value_info.append(helper.make_tensor_value_info(n.output[0], TensorProto.STRING, None))
    else:
        return None
    return m, f"node {owner.name or owner.op_type} ({owner.op_type}) body node {how}"


MUTATORS = {f.__name__[2:]: f for f in [m_sparse_init, m_string_tensor, m_half_odd, m_negative_dim, m_huge_attr,
                                        m_nest_bomb, m_many_nodes, m_external_end, m_non_utf8, m_future_op,
                                        m_body_node]}
