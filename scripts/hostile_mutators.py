"""The mutators of the hostile-model campaign (scripts/hostile_campaign.py).

Each takes (model, rng, workdir) and returns (model, note), (model, note, bad_index) or None
when it does not apply to the model; MUTATORS maps a mutator's name (without its "m_") to it.
Every choice comes from `rng`, so a seed fixes the mutant.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HUGE = [0, -1, -7, 1 << 31, 1 << 40, 1 << 62, (1 << 63) - 1]

# --- mutators: each takes (model, rng, workdir) and returns (model, note) or None -----------

def _pick(rng, seq):
    seq = list(seq)
    return rng.choice(seq) if seq else None


def _producers(g):
    return {o: n for n in g.node for o in n.output if o}


def _init_names(g):
    return {t.name for t in g.initializer}


def m_input_dim(m, rng, wd):
    ins = [i for i in m.graph.input if i.name not in _init_names(m.graph) and i.type.HasField("tensor_type")
           and i.type.tensor_type.HasField("shape") and len(i.type.tensor_type.shape.dim)]
    vi = _pick(rng, ins)
    if vi is None:
        return None
    d = rng.randrange(len(vi.type.tensor_type.shape.dim))
    v = rng.choice(HUGE)
    vi.type.tensor_type.shape.dim[d].dim_value = v
    return m, f"input {vi.name} dim {d} = {v}"


def m_input_dtype(m, rng, wd):
    ins = [i for i in m.graph.input if i.name not in _init_names(m.graph) and i.type.HasField("tensor_type")]
    vi = _pick(rng, ins)
    if vi is None:
        return None
    t = rng.choice([TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING, TensorProto.FLOAT16,
                    TensorProto.UINT8, TensorProto.DOUBLE, TensorProto.COMPLEX64, 0, 99])
    if t == vi.type.tensor_type.elem_type:
        t = TensorProto.STRING
    vi.type.tensor_type.elem_type = t
    return m, f"input {vi.name} dtype {t}"


def m_output_lie(m, rng, wd):
    o = _pick(rng, m.graph.output)
    if o is None or not o.type.HasField("tensor_type"):
        return None
    if rng.random() < 0.5:
        o.type.tensor_type.elem_type = rng.choice([TensorProto.INT8, TensorProto.STRING, TensorProto.DOUBLE])
        return m, f"output {o.name} dtype lie"
    shp = o.type.tensor_type.shape
    del shp.dim[:]
    for v in [rng.choice([3, 1 << 40, 0]) for _ in range(rng.randrange(1, 4))]:
        shp.dim.add().dim_value = v
    return m, f"output {o.name} shape lie"


def m_init_dims(m, rng, wd):
    t = _pick(rng, m.graph.initializer)
    if t is None:
        return None
    if not t.dims:
        t.dims.append(rng.choice([2, 0, 1 << 40]))
        return m, f"initializer {t.name} scalar -> dims {list(t.dims)}"
    d = rng.randrange(len(t.dims))
    t.dims[d] = rng.choice(HUGE + [t.dims[d] + 1])
    return m, f"initializer {t.name} dims {list(t.dims)}"


def m_init_raw(m, rng, wd):
    ts = [t for t in m.graph.initializer if t.data_location != TensorProto.EXTERNAL]
    t = _pick(rng, ts)
    if t is None:
        return None
    a = numpy_helper.to_array(t)
    t.ClearField("float_data"); t.ClearField("int64_data"); t.ClearField("int32_data"); t.ClearField("double_data")
    raw = a.tobytes()
    how = rng.choice(["short", "long", "odd", "dtype"])
    if how == "short":
        t.raw_data = raw[: max(0, len(raw) // 2 - 1)]
    elif how == "long":
        t.raw_data = raw + b"\0" * 12
    elif how == "odd":
        t.raw_data = raw[:-1] if raw else b"\x01"
    else:
        t.raw_data = raw
        t.data_type = rng.choice([TensorProto.DOUBLE, TensorProto.INT8, TensorProto.STRING, TensorProto.BOOL, 0, 77])
    return m, f"initializer {t.name} raw_data {how}"


INT_ATTRS = {"axis": [-100, 100, 1 << 40, -(1 << 62)], "axes": None, "perm": None, "pads": None,
             "strides": [0, -1, 1 << 40], "dilations": [0, -3, 1 << 40], "kernel_shape": [0, -1, 1 << 20, 1 << 40],
             "group": [0, -1, 7, 1 << 40], "blocksize": [0, -2, 1 << 40], "k": [-5, 1 << 40],
             "keepdims": [7], "batch_dims": [-3, 9], "upper": [5], "split": None, "to": [0, 99, 8],
             "output_padding": [-1, 100], "output_shape": [-1, 1 << 40], "hidden_size": [0, -1, 1 << 30],
             "depth": [0], "num_outputs": [0, -2, 1 << 30], "sorted": [3], "largest": [-1], "select_last_index": [4],
             "exclusive": [5], "reverse": [-2], "mode": None, "direction": None, "p": [0, -1],
             "size": [0, -1, 1 << 40], "dtype": [0, 99, 8], "ceil_mode": [2]}


def m_attr(m, rng, wd):
    cands = [(n, a) for n in m.graph.node for a in n.attribute
             if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS, onnx.AttributeProto.STRING,
                           onnx.AttributeProto.FLOAT, onnx.AttributeProto.FLOATS)]
    if not cands:
        return None
    n, a = rng.choice(cands)
    if a.type == onnx.AttributeProto.INT:
        choices = INT_ATTRS.get(a.name) or [-1, 0, 1 << 40, -(1 << 62)]
        a.i = rng.choice(choices)
    elif a.type == onnx.AttributeProto.INTS:
        vals = list(a.ints)
        how = rng.choice(["dup", "neg", "huge", "len", "zero", "empty"])
        if how == "dup" and vals:
            vals = [vals[0]] * len(vals)
        elif how == "neg" and vals:
            vals[rng.randrange(len(vals))] = -rng.choice([1, 5, 1 << 40])
        elif how == "huge" and vals:
            vals[rng.randrange(len(vals))] = rng.choice([1 << 31, 1 << 40, 1 << 62])
        elif how == "len":
            vals = vals + [1, 2, 3]
        elif how == "zero" and vals:
            vals = [0] * len(vals)
        else:
            vals = []
        del a.ints[:]
        a.ints.extend(vals)
    elif a.type == onnx.AttributeProto.STRING:
        a.s = rng.choice([b"", b"BOGUS", b"\xff\xfe", b"x" * 1000])
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice([float("nan"), float("inf"), -1.0, 0.0, 1e38])
    else:
        vals = list(a.floats) or [1.0]
        vals[rng.randrange(len(vals))] = rng.choice([float("nan"), float("inf"), 0.0, -1.0, 1e30])
        del a.floats[:]
        a.floats.extend(vals)
    return m, f"node {n.name or n.op_type} ({n.op_type}) attribute {a.name}"


SHAPE_OPS = {"Reshape": 1, "Expand": 1, "Tile": 1, "ConstantOfShape": 0, "Range": 1, "Resize": None,
             "Upsample": 1, "Slice": 1, "Pad": 1, "OneHot": 1, "TopK": 1, "Squeeze": 1, "Unsqueeze": 1,
             "Split": 1, "ReduceSum": 1, "CenterCropPad": 1, "Trilu": 1, "Gather": 1}


def _const_source(g, name):
    for t in g.initializer:
        if t.name == name:
            return t
    for n in g.node:
        if n.op_type == "Constant" and n.output[0] == name:
            for a in n.attribute:
                if a.name == "value":
                    return a.t
    return None


def m_shape_bomb(m, rng, wd):
    """A shape/size tensor of a shape operator asks for an enormous (or NaN, negative) output."""
    cands = []
    for n in m.graph.node:
        if n.op_type in SHAPE_OPS:
            for i, name in enumerate(n.input):
                if name and i >= 1 or n.op_type == "ConstantOfShape":
                    t = _const_source(m.graph, name)
                    if t is not None:
                        cands.append((n, name, t))
    if cands:
        n, name, t = rng.choice(cands)
        a = numpy_helper.to_array(t).copy()
        if a.size == 0:
            return None
        flat = a.reshape(-1)
        if np.issubdtype(a.dtype, np.floating):
            flat[rng.randrange(flat.size)] = rng.choice([np.nan, np.inf, -np.inf, 1e12, 1e30])
        elif np.issubdtype(a.dtype, np.integer):
            flat[rng.randrange(flat.size)] = rng.choice([1 << 31, 1 << 40, 1 << 62, -(1 << 62), -5, 0]) \
                if a.dtype == np.int64 else rng.choice([1 << 30, -5, 0])
            if rng.random() < 0.5:
                flat[:] = rng.choice([1 << 20, 1 << 31])
        else:
            return None
        t.CopyFrom(numpy_helper.from_array(flat.reshape(a.shape), t.name))
        return m, f"node {n.name or n.op_type} ({n.op_type}) shape input {name} -> {flat.tolist()[:6]}"
    # no shape operator: append a memory bomb fed from the first float input
    x = _pick(rng, [i for i in m.graph.input if i.type.tensor_type.elem_type == TensorProto.FLOAT
                    and i.name not in _init_names(m.graph)])
    if x is None:
        return None
    kind = rng.choice(["cos", "expand", "tile", "range", "reshape"])
    big = rng.choice([1 << 20, 1 << 31, 1 << 40])
    nodes, inits = [], []
    if kind == "cos":
        inits.append(numpy_helper.from_array(np.array([big, big], np.int64), "bomb_shape"))
        nodes.append(helper.make_node("ConstantOfShape", ["bomb_shape"], ["bomb"],
                                      value=numpy_helper.from_array(np.array([1.0], np.float32))))
    elif kind == "expand":
        inits.append(numpy_helper.from_array(np.array([big, big, big], np.int64), "bomb_shape"))
        nodes.append(helper.make_node("Expand", [x.name, "bomb_shape"], ["bomb"]))
    elif kind == "tile":
        r = len(x.type.tensor_type.shape.dim)
        inits.append(numpy_helper.from_array(np.full([r], big, np.int64), "bomb_shape"))
        nodes.append(helper.make_node("Tile", [x.name, "bomb_shape"], ["bomb"]))
    elif kind == "range":
        inits += [numpy_helper.from_array(np.array(0, np.int64), "b0"),
                  numpy_helper.from_array(np.array(min(big * big, 1 << 62), np.int64), "b1"),
                  numpy_helper.from_array(np.array(1, np.int64), "b2")]
        nodes.append(helper.make_node("Range", ["b0", "b1", "b2"], ["bomb"]))
    else:
        inits.append(numpy_helper.from_array(np.array([big, -1], np.int64), "bomb_shape"))
        nodes.append(helper.make_node("Reshape", [x.name, "bomb_shape"], ["bomb"]))
    m.graph.node.extend(nodes)
    m.graph.initializer.extend(inits)
    m.graph.output.append(helper.make_tensor_value_info(
        "bomb", TensorProto.FLOAT if kind != "range" else TensorProto.INT64, None))
    return m, f"appended {kind} bomb {big}"


def m_cycle(m, rng, wd):
    ns = list(m.graph.node)
    if len(ns) < 1:
        return None
    i = rng.randrange(len(ns))
    j = rng.randrange(i, len(ns))
    a, b = ns[i], ns[j]
    if not a.input or not b.output:
        return None
    k = rng.randrange(len(a.input))
    a.input[k] = b.output[0]
    return m, f"node {a.name or a.op_type} input {k} <- output of {b.name or b.op_type} (cycle)"


def m_dup_output(m, rng, wd):
    ns = [n for n in m.graph.node if n.output]
    if len(ns) < 2:
        names = [i.name for i in m.graph.input] + list(_init_names(m.graph))
        if not ns or not names:
            return None
        ns[0].output[0] = rng.choice(names)
        return m, f"node output renamed to graph input/initializer {ns[0].output[0]}"
    a, b = rng.sample(ns, 2)
    a.output[0] = b.output[0]
    return m, f"duplicate output name {b.output[0]}"


def m_unproduced_output(m, rng, wd):
    how = rng.choice(["new", "rename", "empty"])
    if how == "new":
        m.graph.output.append(helper.make_tensor_value_info("nobody_makes_this", TensorProto.FLOAT, [1]))
    elif how == "rename" and m.graph.output:
        m.graph.output[0].name = m.graph.output[0].name + "_ghost"
    else:
        del m.graph.output[:]
    return m, f"graph output {how}"


def m_missing_input(m, rng, wd):
    how = rng.choice(["rename", "drop_graph_input", "drop_init"])
    if how == "rename":
        n = _pick(rng, [n for n in m.graph.node if n.input])
        if n is None:
            return None
        k = rng.randrange(len(n.input))
        n.input[k] = "ghost_" + str(k)
        return m, f"node {n.name or n.op_type} input {k} renamed to a ghost"
    if how == "drop_graph_input":
        ins = [i for i in m.graph.input if i.name not in _init_names(m.graph)]
        if not ins:
            return None
        m.graph.input.remove(rng.choice(ins))
        return m, "graph input dropped"
    if not m.graph.initializer:
        return None
    t = rng.choice(list(m.graph.initializer))
    m.graph.initializer.remove(t)
    return m, f"initializer {t.name} dropped"


def m_opset(m, rng, wd):
    how = rng.choice(["one", "huge", "domain", "nodedomain", "noopset", "dupopset"])
    if how == "one":
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = 1
    elif how == "huge":
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = rng.choice([999, 1 << 40, -1, 0])
    elif how == "domain":
        m.opset_import.add(domain="com.evil", version=1)
        m.graph.node.add().CopyFrom(helper.make_node("Frobnicate", [m.graph.input[0].name] if m.graph.input else [],
                                                     ["frob"], domain="com.evil"))
        m.graph.output.append(helper.make_tensor_value_info("frob", TensorProto.FLOAT, None))
    elif how == "nodedomain":
        n = _pick(rng, m.graph.node)
        if n is None:
            return None
        n.domain = rng.choice(["com.evil", "ai.onnx.ml", "com.microsoft"])
    elif how == "noopset":
        del m.opset_import[:]
    else:
        m.opset_import.add(domain="", version=1)
    return m, f"opset {how}"


def _subgraph_attrs(g):
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield n, a.g
            elif a.type == onnx.AttributeProto.GRAPHS:
                for s in a.graphs:
                    yield n, s


def m_body(m, rng, wd):
    subs = list(_subgraph_attrs(m.graph))
    if not subs:
        return None
    n, b = rng.choice(subs)
    how = rng.choice(["drop_out", "add_out", "ghost", "drop_in", "add_in", "cycle", "empty", "out_type"])
    if how == "drop_out" and b.output:
        b.output.remove(b.output[-1])
    elif how == "add_out":
        b.output.append(helper.make_tensor_value_info(b.output[0].name if b.output else "z", TensorProto.FLOAT, [2]))
    elif how == "ghost" and b.node and b.node[0].input:
        b.node[0].input[0] = "ghost_in_body"
    elif how == "drop_in" and b.input:
        b.input.remove(b.input[-1])
    elif how == "add_in":
        b.input.append(helper.make_tensor_value_info("extra_body_in", TensorProto.FLOAT, [1 << 40]))
    elif how == "cycle" and len(b.node) >= 1 and b.node[0].input and b.node[-1].output:
        b.node[0].input[0] = b.node[-1].output[0]
    elif how == "empty":
        del b.node[:]
    elif how == "out_type" and b.output:
        b.output[0].type.tensor_type.elem_type = TensorProto.STRING
    else:
        return None
    return m, f"node {n.name or n.op_type} ({n.op_type}) body {how}"


def _externalize(t, wd):
    """Moves initializer `t`'s data to WD/w.bin as external data; returns the bytes written."""
    raw = numpy_helper.to_array(t).tobytes()
    for f in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    with open(os.path.join(wd, "w.bin"), "wb") as f:
        f.write(raw)
    return raw


def m_external(m, rng, wd):
    ts = [t for t in m.graph.initializer if t.data_location != TensorProto.EXTERNAL]
    t = _pick(rng, ts)
    if t is None:
        return None
    raw = _externalize(t, wd)
    how = rng.choice(["escape", "absolute", "past_end", "negative", "huge_len", "self", "dir", "dev"])
    loc, off, ln = "w.bin", None, None
    if how == "escape":
        loc = "../" * 8 + "etc/passwd"
    elif how == "absolute":
        loc = "/etc/passwd"
    elif how == "past_end":
        off = len(raw) + 4096
    elif how == "negative":
        off = -8
    elif how == "huge_len":
        ln = 1 << 62
    elif how == "self":
        loc = "model.onnx"
    elif how == "dir":
        loc = "."
    else:
        loc = "/dev/zero" if rng.random() < 0.5 else "/proc/self/mem"
    for k, v in [("location", loc), ("offset", off), ("length", ln)]:
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return m, f"initializer {t.name} external {how}"


def m_nonfinite_shape(m, rng, wd):
    """NaN/Inf in float constants that feed shape computations (Resize scales, Range bounds,
    ConstantOfShape values, Cast to int64 of a float)."""
    cands = [t for t in m.graph.initializer if t.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE)]
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value" and a.t.data_type in (TensorProto.FLOAT, TensorProto.DOUBLE):
                    cands.append(a.t)
    if cands and rng.random() < 0.6:
        t = rng.choice(cands)
        a = numpy_helper.to_array(t).copy()
        if a.size == 0:
            return None
        a.reshape(-1)[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -np.inf])
        t.CopyFrom(numpy_helper.from_array(a, t.name))
        return m, f"constant {t.name} non-finite"
    x = _pick(rng, [i for i in m.graph.input if i.name not in _init_names(m.graph)])
    if x is None:
        return None
    v = rng.choice([np.nan, np.inf, -np.inf, 1e30])
    m.graph.initializer.append(numpy_helper.from_array(np.array([v, 2.0], np.float32), "nf"))
    m.graph.node.extend([helper.make_node("Cast", ["nf"], ["nf_i"], to=TensorProto.INT64),
                         helper.make_node("ConstantOfShape", ["nf_i"], ["nf_out"],
                                          value=numpy_helper.from_array(np.array([0.0], np.float32)))])
    m.graph.output.append(helper.make_tensor_value_info("nf_out", TensorProto.FLOAT, None))
    return m, f"Cast({v})->ConstantOfShape appended"


INDEX_OPS = {"Gather": 1, "GatherElements": 1, "GatherND": 1, "ScatterND": 1, "ScatterElements": 1,
             "Scatter": 1, "OneHot": 0, "Compress": 1, "TopK": None}


def m_index(m, rng, wd):
    """Out-of-range indices, either as constants (constant folding sees them) or as run-time
    inputs (the runtime sees them: the campaign feeds an .npz with bad indices)."""
    cands = [n for n in m.graph.node if n.op_type in ("Gather", "GatherElements", "GatherND", "ScatterND",
                                                      "ScatterElements", "Scatter")]
    n = _pick(rng, cands)
    if n is None:
        return None
    name = n.input[1]
    bad = rng.choice([1 << 40, -(1 << 40), 1 << 62, -(1 << 62), 1000, -1000, (1 << 31), -(1 << 31) - 1])
    t = _const_source(m.graph, name)
    if t is not None:
        a = numpy_helper.to_array(t).copy()
        if a.size == 0:
            return None
        if a.dtype == np.int32:
            bad = int(np.clip(bad, -(1 << 31), (1 << 31) - 1))
        a.reshape(-1)[rng.randrange(a.size)] = bad
        t.CopyFrom(numpy_helper.from_array(a, t.name))
        return m, f"node {n.name or n.op_type} ({n.op_type}) constant index {bad}", None
    return m, f"node {n.name or n.op_type} ({n.op_type}) run-time index {bad}", (name, bad)


def m_value_info_lie(m, rng, wd):
    ns = [o for n in m.graph.node for o in n.output if o]
    if not ns:
        return None
    name = rng.choice(ns)
    for v in list(m.graph.value_info):
        if v.name == name:
            m.graph.value_info.remove(v)
    dims = [rng.choice([7, 0, 1 << 40, 1]) for _ in range(rng.randrange(0, 5))]
    m.graph.value_info.append(helper.make_tensor_value_info(
        name, rng.choice([TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING]), dims))
    return m, f"value_info {name} lies: {dims}"


def m_node_arity(m, rng, wd):
    n = _pick(rng, m.graph.node)
    if n is None:
        return None
    how = rng.choice(["drop_in", "add_in", "add_out", "no_out", "empty_in"])
    if how == "drop_in" and n.input:
        n.input.pop()
    elif how == "add_in":
        n.input.extend([n.input[0] if n.input else (m.graph.input[0].name if m.graph.input else "")] * 3)
    elif how == "add_out":
        n.output.extend(["extra_out_a", "extra_out_b", "extra_out_c", "extra_out_d"])
    elif how == "no_out":
        del n.output[:]
    elif how == "empty_in" and n.input:
        n.input[0] = ""
    else:
        return None
    return m, f"node {n.name or n.op_type} ({n.op_type}) arity {how}"


MUTATORS = {f.__name__[2:]: f for f in [m_input_dim, m_input_dtype, m_output_lie, m_init_dims, m_init_raw, m_attr,
                                        m_shape_bomb, m_cycle, m_dup_output, m_unproduced_output,
                                        m_missing_input, m_opset, m_body, m_external, m_nonfinite_shape,
                                        m_index, m_value_info_lie, m_node_arity]}
