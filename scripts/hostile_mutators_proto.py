"""Mutators of the hostile-model campaign (scripts/hostile_campaign.py) that the other two
files do not cover: damage to the protobuf bytes themselves (truncation inside a tensor's
data, a node or a length prefix; wire types flipped; a length past the end; varints of 10
and 11 bytes; repeated fields written packed), model-local functions (recursion, arity,
attribute references without a value, undeclared or duplicate functions), the model's
typing (untyped and non-tensor graph inputs and outputs, optional inputs left empty,
value_info of another rank, odd IR versions and opsets, the default domain spelled
"ai.onnx"), names (duplicate node names, NUL bytes, 10 kB names, an initializer that
defaults a graph input) and numbers (empty tensors, Reshape's 0 and -1, Slice at INT64's
ends, TopK's k past the axis, Resize scales of 0 or NaN, Conv strides of 0, ...).

Same contract as hostile_mutators.py; the fourth item may also be a function from the
serialized model's bytes to the bytes the runner writes (byte-level damage).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hostile_mutators import _init_names, _pick

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# --- the protobuf wire format, just enough to find fields and splice them ------------------

# Length-delimited fields that hold messages, by the path of field numbers that leads there:
# ModelProto.graph (7) -> GraphProto.node (1), .initializer (5), .input (11), .output (12),
# .value_info (13) -> NodeProto.attribute (5); ModelProto.opset_import (8).
GRAPH, NODE, INIT, INPUT, OUTPUT, VALUE_INFO, ATTR, OPSET = 7, 1, 5, 11, 12, 13, 5, 8


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _read_varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        v |= (b & 0x7F) << shift
        pos += 1
        shift += 7
        if not b & 0x80:
            return v, pos


def walk(buf):
    """Yields (tag_start, value_start, value_end, field, wire_type) for each field of a
    message's bytes; value_start is past a length prefix."""
    pos = 0
    while pos < len(buf):
        start = pos
        tag, pos = _read_varint(buf, pos)
        field, wt = tag >> 3, tag & 7
        if wt == 0:
            _, end = _read_varint(buf, pos)
        elif wt == 1:
            end = pos + 8
        elif wt == 5:
            end = pos + 4
        elif wt == 2:
            n, pos = _read_varint(buf, pos)
            end = pos + n
        else:
            raise ValueError(f"wire type {wt} at {start}")
        yield start, pos, end, field, wt
        pos = end


def splice(buf, path, fn):
    """`buf` with the submessage at `path` ((field, occurrence) pairs, outermost first)
    replaced by fn(its bytes), the length prefixes of every enclosing message fixed."""
    if not path:
        return fn(buf)
    (want, k), rest = path[0], path[1:]
    out, seen = bytearray(), 0
    for start, vs, ve, field, wt in walk(buf):
        if field == want and wt == 2 and seen == k:
            tag_end = start + len(varint((field << 3) | 2))
            inner = splice(buf[vs:ve], rest, fn)
            out += buf[start:tag_end] + varint(len(inner)) + inner
        else:
            out += buf[start:ve]
        seen += field == want and wt == 2
    return bytes(out)


def span(buf, path):
    """(tag_start, value_start, value_end) of the submessage at `path`, in `buf`'s offsets."""
    base, result = 0, None
    for want, k in path:
        seen = 0
        for start, vs, ve, field, wt in walk(buf):
            if field == want and wt == 2:
                if seen == k:
                    result = (base + start, base + vs, base + ve)
                    buf, base = buf[vs:ve], base + vs
                    break
                seen += 1
        else:
            raise ValueError(f"no field {want} #{k}")
    return result


def _packed(buf, field):
    """A message's bytes with its unpacked repeated varint `field` written packed (what a
    proto3 writer does; every parser must read both); None where it has none."""
    vals, rest, first = [], bytearray(), None
    for start, vs, ve, f, wt in walk(buf):
        if f == field and wt == 0:
            first = len(rest) if first is None else first
            vals.append(buf[vs:ve])
        else:
            rest += buf[start:ve]
    if not vals:
        return None
    # Half packed, half not (both forms of one field in one message are legal too).
    half = len(vals) // 2
    body = b"".join(vals[half:])
    packed = varint((field << 3) | 2) + varint(len(body)) + body
    plain = b"".join(varint(field << 3) + v for v in vals[:half])
    return bytes(rest[:first]) + plain + packed + bytes(rest[first:])


def _overlong(buf, field, nbytes):
    """The first varint `field` of a message re-encoded in `nbytes` bytes (non-canonical:
    up to 10 is legal, 11 is not)."""
    out, done = bytearray(), False
    for start, vs, ve, f, wt in walk(buf):
        if f == field and wt == 0 and not done:
            v, _ = _read_varint(buf, vs)
            enc = bytearray(varint(v))
            while len(enc) < nbytes:
                enc[-1] |= 0x80
                enc.append(0)
            out += buf[start:vs] + bytes(enc)
            done = True
        else:
            out += buf[start:ve]
    return bytes(out) if done else None


def m_proto_bytes(m, rng, wd):
    """Damage to the serialized model: truncated inside a tensor's raw data, a node or a
    length prefix; a tag's wire type flipped; a length prefix far past the end; an 11-byte
    varint; or (legal) repeated varints written packed and a varint of 10 bytes."""
    g = m.graph
    how = rng.choice(["trunc_random", "trunc_raw", "trunc_node", "trunc_prefix", "wire_type", "length_past_end",
                      "varint11", "varint10", "packed"])
    raws = [i for i, t in enumerate(g.initializer) if len(t.raw_data) > 8]
    nodes = list(range(len(g.node)))
    if how == "trunc_random":
        return m, how, None, lambda d: d[: rng.randrange(1, len(d))]
    if how == "trunc_raw" and raws:
        i = rng.choice(raws)
        raw = g.initializer[i].raw_data

        def cut(d):
            _, vs, ve = span(d, [(GRAPH, 0), (INIT, i)])
            at = d.find(raw, vs, ve)
            return d[: at + rng.randrange(1, len(raw))]
        return m, f"{how} of initializer {g.initializer[i].name}", None, cut
    if how in ("trunc_node", "trunc_prefix", "wire_type", "length_past_end") and nodes:
        i = rng.choice(nodes)
        name = g.node[i].name or g.node[i].op_type

        def damage(d):
            start, vs, ve = span(d, [(GRAPH, 0), (NODE, i)])
            if how == "trunc_node":
                return d[: rng.randrange(vs, ve)] if ve > vs else d[:vs]
            if how == "trunc_prefix":
                return d[: start + 1 + max(0, (vs - start - 1) // 2)]  # the tag, then half the length's bytes
            if how == "wire_type":
                tags = [s for s, *_ in walk(d[vs:ve])]
                at = vs + rng.choice(tags) if tags else start
                return d[:at] + bytes([d[at] ^ rng.choice([1, 2, 3, 4, 5, 6, 7])]) + d[at + 1:]
            big = rng.choice([ve - vs + 1000, 1 << 31, 1 << 62])
            return d[: start + 1] + varint(big) + d[vs:]
        return m, f"{how} at node {name}", None, damage
    if how == "varint11":
        i = rng.choice(nodes) if nodes else None
        if i is None:
            return None

        def long_varint(d):
            start, vs, _ = span(d, [(GRAPH, 0), (NODE, i)])
            return d[: start + 1] + b"\x80" * 10 + b"\x01" + d[vs:]
        return m, f"{how}: length of node {g.node[i].name or g.node[i].op_type}", None, long_varint
    # Legal re-encodings: the model means what it meant.
    with_dims = [i for i, t in enumerate(g.initializer) if len(t.dims) >= 2]
    with_ints = [(i, j) for i, n in enumerate(g.node) for j, a in enumerate(n.attribute) if len(a.ints) >= 2]
    if how == "varint10" and (with_dims or nodes):
        if with_dims:
            path, field, what = [(GRAPH, 0), (INIT, rng.choice(with_dims))], 1, "initializer dims"
        else:
            path, field, what = [(OPSET, 0)], 2, "opset version"
        return m, f"{how}: {what}", None, lambda d: splice(d, path, lambda b: _overlong(b, field, 10) or b)
    if how == "packed" and (with_dims or with_ints):
        if with_ints and (not with_dims or rng.random() < 0.5):
            i, j = rng.choice(with_ints)
            path, field = [(GRAPH, 0), (NODE, i), (ATTR, j)], 8
        else:
            path, field = [(GRAPH, 0), (INIT, rng.choice(with_dims))], 1
        return m, f"{how}: repeated field {field} packed", None, lambda d: splice(d, path, lambda b: _packed(b, field) or b)
    return None


# --- model-local functions ------------------------------------------------------------------

def _float_input(m, rng):
    """A float graph input (not defaulted by an initializer) with a tensor type."""
    return _pick(rng, [i for i in m.graph.input if i.name not in _init_names(m.graph)
                       and i.type.HasField("tensor_type") and i.type.tensor_type.elem_type == TensorProto.FLOAT])


def _function(name, domain, inputs, outputs, nodes, attributes=(), opset=13):
    # The function imports its own domain too: a recursive call is then the only fault.
    return helper.make_function(domain, name, inputs, outputs, nodes,
                                [helper.make_opsetid("", opset), helper.make_opsetid(domain, 1)],
                                attributes=list(attributes))


def m_function(m, rng, wd):
    """A model-local function called from the graph: well formed, or calling itself, with
    the wrong number of inputs, an attribute reference left without a value, its domain
    not imported, or defined twice."""
    x = _float_input(m, rng)
    if x is None:
        return None
    dom = "local.fn"
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 13)
    how = rng.choice(["valid", "valid_attr", "self", "mutual", "more_inputs", "fewer_inputs", "ref_missing",
                      "domain_missing", "duplicate", "unknown_body_op"])
    body = [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Neg", ["r"], ["b"])]
    fns = [_function("F", dom, ["a"], ["b"], body, opset=opset)]
    attrs = {}
    if how in ("valid_attr", "ref_missing"):
        alpha = helper.make_attribute("alpha", 0.5)
        alpha.ClearField("f")
        alpha.ref_attr_name = "slope"
        node = helper.make_node("LeakyRelu", ["a"], ["b"])
        node.attribute.append(alpha)
        fns = [_function("F", dom, ["a"], ["b"], [node], attributes=["slope"], opset=opset)]
        if how == "valid_attr":
            attrs["slope"] = 0.25
    elif how == "self":
        fns = [_function("F", dom, ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain=dom)], opset=opset)]
    elif how == "mutual":
        fns = [_function("F", dom, ["a"], ["b"], [helper.make_node("G", ["a"], ["b"], domain=dom)], opset=opset),
               _function("G", dom, ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain=dom)], opset=opset)]
    elif how == "duplicate":
        fns.append(_function("F", dom, ["a"], ["b"], [helper.make_node("Abs", ["a"], ["b"])], opset=opset))
    elif how == "unknown_body_op":
        fns = [_function("F", dom, ["a"], ["b"], [helper.make_node("NoSuchOp", ["a"], ["b"])], opset=opset)]
    inputs = [x.name] + ([x.name] if how == "more_inputs" else [])
    if how == "fewer_inputs":
        fns = [_function("F", dom, ["a", "c"], ["b"], [helper.make_node("Add", ["a", "c"], ["b"])], opset=opset)]
    call = helper.make_node("F", inputs, ["fn_out"], domain=dom, **attrs)
    m.graph.node.append(call)
    m.graph.output.append(helper.make_tensor_value_info("fn_out", TensorProto.FLOAT, None))
    m.functions.extend(fns)
    if how != "domain_missing":
        m.opset_import.append(helper.make_opsetid(dom, 1))
    if m.ir_version < 8:
        m.ir_version = 8
    return m, f"function {how}"


# --- typing ---------------------------------------------------------------------------------

def m_typing(m, rng, wd):
    """Graph inputs and outputs without a type or of a sequence, map or optional type; an
    optional input left "" in the middle and at the end; value_info of another rank; IR
    versions 0, 1 and 99; the default opset at 0, 6, 99 or twice; nodes of "ai.onnx"."""
    g = m.graph
    how = rng.choice(["input_untyped", "output_untyped", "input_seq", "output_seq", "input_map", "input_optional",
                      "empty_optional", "vi_rank", "ir", "opset", "opset_twice", "ai_onnx_domain"])
    x = _float_input(m, rng)
    if how == "input_untyped" and x is not None:
        x.ClearField("type")
    elif how == "output_untyped" and g.output:
        rng.choice(list(g.output)).ClearField("type")
    elif how in ("input_seq", "input_map", "input_optional") and x is not None:
        elem = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
        t = {"input_seq": lambda: helper.make_sequence_type_proto(elem),
             "input_map": lambda: helper.make_map_type_proto(TensorProto.INT64, elem),
             "input_optional": lambda: helper.make_optional_type_proto(elem)}[how]()
        x.type.CopyFrom(t)
    elif how == "output_seq" and x is not None:
        g.node.append(helper.make_node("SequenceConstruct", [x.name, x.name], ["seq_out"]))
        g.output.append(helper.make_value_info("seq_out", helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(TensorProto.FLOAT, None))))
    elif how == "empty_optional" and x is not None:
        # Clip(x, "", max) and Clip(x, min, ""): optional inputs left out by name.
        bound = numpy_helper.from_array(np.array(0.5, np.float32), "clip_bound")
        g.initializer.append(bound)
        mid = rng.random() < 0.5
        g.node.append(helper.make_node("Clip", [x.name, "", "clip_bound"] if mid else [x.name, "clip_bound", ""],
                                       ["clip_out"]))
        g.output.append(helper.make_tensor_value_info("clip_out", TensorProto.FLOAT, None))
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = max(o.version, 13)
        how += " (middle)" if mid else " (end)"
    elif how == "vi_rank" and g.node:
        outs = {o.name for o in g.output}
        n = _pick(rng, [n for n in g.node if n.output and n.output[0] and n.output[0] not in outs])
        if n is None:
            return None
        for v in list(g.value_info):
            if v.name == n.output[0]:
                g.value_info.remove(v)
        g.value_info.append(helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, [1] * rng.choice([0, 1, 7])))
        how += f" of {n.output[0]}"
    elif how == "ir":
        m.ir_version = rng.choice([0, 1, 99])
        how += f" {m.ir_version}"
    elif how in ("opset", "opset_twice"):
        v = rng.choice([0, 6, 99])
        if how == "opset":
            for o in m.opset_import:
                if o.domain in ("", "ai.onnx"):
                    o.version = v
        else:
            m.opset_import.append(helper.make_opsetid(rng.choice(["", "ai.onnx"]), v))
        how += f" {v}"
    elif how == "ai_onnx_domain" and g.node:
        for n in g.node:
            if n.domain == "" and rng.random() < 0.5:
                n.domain = "ai.onnx"
        if rng.random() < 0.5:
            for o in m.opset_import:
                if o.domain == "":
                    o.domain = "ai.onnx"
            how += " (and opset_import)"
    else:
        return None
    return m, f"typing {how}"


# --- names ------------------------------------------------------------------------------------

def _rename_value(g, old, new):
    for n in g.node:
        for i, v in enumerate(n.input):
            if v == old:
                n.input[i] = new
        for i, v in enumerate(n.output):
            if v == old:
                n.output[i] = new
    for coll in (g.input, g.output, g.value_info, g.initializer):
        for v in coll:
            if v.name == old:
                v.name = new


def m_names(m, rng, wd):
    """Duplicate node names (legal), a 10 kB or NUL-carrying value name (legal), an empty
    name used as a real output, and an initializer defaulting a graph input (legal)."""
    g = m.graph
    how = rng.choice(["dup_node_names", "long_name", "nul_name", "empty_output", "init_defaults_input"])
    if how == "dup_node_names" and g.node:
        # The IR's text asks for unique node names, onnx.checker does not check it and
        # ONNX Runtime refuses them: the reference is the model as it was.
        reference = onnx.ModelProto()
        reference.CopyFrom(m)
        for n in g.node:
            n.name = "same"
        return m, f"names {how}", None, [], reference
    elif how in ("long_name", "nul_name"):
        vals = [o for n in g.node for o in n.output if o] + [i.name for i in g.input]
        old = _pick(rng, vals)
        if old is None:
            return None
        new = "v" * 10240 if how == "long_name" else "a\0b" + old
        _rename_value(g, old, new)
    elif how == "empty_output" and g.node and g.output:
        outs = {o.name for o in g.output}
        n = _pick(rng, [n for n in g.node if n.output and n.output[0] in outs])
        if n is None:
            return None
        _rename_value(g, n.output[0], "")
    elif how == "init_defaults_input":
        x = _pick(rng, [i for i in g.input if i.name not in _init_names(g) and i.type.HasField("tensor_type")
                        and i.type.tensor_type.elem_type == TensorProto.FLOAT
                        and all(d.HasField("dim_value") and 0 < d.dim_value <= 64 for d in i.type.tensor_type.shape.dim)])
        if x is None:
            return None
        dims = [d.dim_value for d in x.type.tensor_type.shape.dim]
        a = np.random.default_rng(rng.randrange(1 << 30)).standard_normal(dims).astype(np.float32)
        g.initializer.append(numpy_helper.from_array(a, x.name))
        if m.ir_version < 4:
            m.ir_version = 4
    else:
        return None
    return m, f"names {how}"


# --- numbers ----------------------------------------------------------------------------------

def _new_input(g, name, dims, dtype=TensorProto.FLOAT):
    g.input.append(helper.make_tensor_value_info(name, dtype, dims))
    return name


def _const(g, name, value, dtype=np.int64):
    g.initializer.append(numpy_helper.from_array(np.array(value, dtype), name))
    return name


def m_numbers(m, rng, wd):
    """A small model of its own (the source is not used) with the numbers ONNX allows at
    their edges or past them: empty tensors through MatMul, Conv, Concat and Reshape;
    Reshape with 0, -1 and allowzero; Slice at INT64's ends with step -1; Pad axes out of
    range; TopK's k past the axis; Gather indices out of range at run time; Resize scales
    of 0, NaN or 1e9; Conv strides or dilations of 0, or a group that does not divide the
    channels."""
    # A model of its own (opset 18: Pad's axes, Resize's forms), whatever the source.
    g = helper.make_graph([], "numbers", [], [])
    how = rng.choice(["empty_matmul", "empty_conv", "empty_concat", "empty_reshape", "reshape_zero",
                      "slice_extremes", "pad_axes", "topk_k", "gather_runtime", "resize_scales", "conv_stride0",
                      "conv_group"])
    x, out, bad = _new_input(g, "nb_x", [2, 4, 3]), "nb_out", None
    nodes = []
    if how == "empty_matmul":
        _const(g, "nb_w", np.zeros([3, 0]), np.float32)
        nodes.append(helper.make_node("MatMul", [x, "nb_w"], [out]))
    elif how == "empty_conv":
        _const(g, "nb_w", np.zeros([0, 4, 1]), np.float32)
        nodes.append(helper.make_node("Conv", [x, "nb_w"], [out]))
    elif how == "empty_concat":
        _const(g, "nb_e", np.zeros([2, 0, 3]), np.float32)
        nodes.append(helper.make_node("Concat", ["nb_e", x, "nb_e"], [out], axis=1))
    elif how == "empty_reshape":
        _const(g, "nb_e", np.zeros([0, 4]), np.float32)
        _const(g, "nb_s", rng.choice([[0, -1], [-1, 0], [2, 0, 2], [0]]))
        nodes.append(helper.make_node("Reshape", ["nb_e", "nb_s"], ["nb_r"], allowzero=1))
        nodes.append(helper.make_node("Shape", ["nb_r"], ["nb_rs"]))
        nodes.append(helper.make_node("Cast", ["nb_rs"], ["nb_rf"], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("ReduceSum", [x], ["nb_xs"], keepdims=0))
        nodes.append(helper.make_node("Add", ["nb_rf", "nb_xs"], [out]))
    elif how == "reshape_zero":
        shape, allowzero = rng.choice([([0, -1], 0), ([0, 0, -1], 0), ([-1, 0], 0), ([0, 12], 1), ([0, -1], 1),
                                       ([-1, -1], 0), ([0, 4, 3], 0)])
        _const(g, "nb_s", shape)
        nodes.append(helper.make_node("Reshape", [x, "nb_s"], [out], allowzero=allowzero))
        how += f" {shape} allowzero={allowzero}"
    elif how == "slice_extremes":
        starts, ends, step = rng.choice([([INT64_MAX], [INT64_MIN], -1), ([INT64_MIN], [INT64_MAX], 1),
                                         ([-1], [INT64_MIN], -1), ([INT64_MAX], [0], -2), ([0], [INT64_MAX], 0)])
        _const(g, "nb_st", starts), _const(g, "nb_en", ends), _const(g, "nb_ax", [rng.choice([0, 1, 2, -1])])
        _const(g, "nb_sp", [step])
        nodes.append(helper.make_node("Slice", [x, "nb_st", "nb_en", "nb_ax", "nb_sp"], [out]))
        how += f" {starts}:{ends}:{step}"
    elif how == "pad_axes":
        axes = rng.choice([[3], [-4], [0, 0], [1 << 40]])
        _const(g, "nb_p", [1] * (2 * len(axes))), _const(g, "nb_ax", axes)
        nodes.append(helper.make_node("Pad", [x, "nb_p", "", "nb_ax"], [out]))
        how += f" {axes}"
    elif how == "topk_k":
        k = rng.choice([4, 5, 1 << 40, 0, -1])
        _const(g, "nb_k", [k])
        nodes.append(helper.make_node("TopK", [x, "nb_k"], [out, "nb_idx"], axis=1))
        how += f" k={k}"
    elif how == "gather_runtime":
        idx = _new_input(g, "nb_i", [3], TensorProto.INT64)
        nodes.append(helper.make_node("Gather", [x, idx], [out], axis=1))
        bad = (idx, rng.choice([4, -5, 1 << 40, INT64_MIN, INT64_MAX]))
        how += f" {bad[1]}"
    elif how == "resize_scales":
        s = rng.choice([0.0, float("nan"), 1e9, -1.0, float("inf")])
        _const(g, "nb_sc", [1.0, 1.0, s], np.float32)
        nodes.append(helper.make_node("Resize", [x, "", "nb_sc"], [out], mode="nearest"))
        how += f" {s}"
    elif how == "conv_stride0":
        _const(g, "nb_w", np.ones([2, 4, 1]), np.float32)
        attr = rng.choice(["strides", "dilations"])
        nodes.append(helper.make_node("Conv", [x, "nb_w"], [out], **{attr: [rng.choice([0, -1])]}))
        how += f" {attr}"
    else:
        group = rng.choice([3, 8, 0])
        _const(g, "nb_w", np.ones([3, 1, 1]), np.float32)
        nodes.append(helper.make_node("Conv", [x, "nb_w"], [out], group=group))
        how += f" group={group}"
    g.node.extend(nodes)
    g.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], producer_name="hostile")
    model.ir_version = 8
    return model, f"numbers {how}", bad


MUTATORS = {f.__name__[2:]: f for f in [m_proto_bytes, m_function, m_typing, m_names, m_numbers]}
