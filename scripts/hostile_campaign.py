#!/usr/bin/env python3
"""Mutation campaign: semantically hostile but well-formed ONNX models through the whole pipeline.

Takes real models (ONNX's node test cases from Debian's libonnx-testdata, small corpus and
sweep models), applies seeded mutations that keep the file parseable but make the model
hostile (bad dims, dtype lies, attributes out of range, memory bombs in shape tensors,
cycles, duplicate/missing names, broken If/Loop/Scan bodies, escaping external data,
NaN in shape constants, out-of-range run-time indices, ...), and runs
`isomer optimize`, `isomer run --no-onnxruntime` and `isomer run` on each under a
timeout and an address-space limit. Every outcome is classified:

  ok          exit 0 and (where ONNX Runtime runs the model too) the same outputs, or
              exit 1 with one "isomer: error: ..." line
  crash       killed by a signal (or an exit status of 128 and above)
  hang        ran past the timeout
  memory      ran out of memory (bad_alloc / "out of memory" / killed at the limit)
  unclear     failed without exactly one "isomer: error:" line, or a message that names
              neither the file nor a node
  accepted    exit 0 although ONNX Runtime refuses the model (to be triaged: ORT is not
              the specification, but it is a good hint)
  wrong       isomer's outputs differ from ONNX Runtime's on the same inputs
  triaged     "accepted" or "wrong", but of a class TRIAGED explains: ONNX Runtime is
              stricter than the ONNX specification, or the specification leaves the
              difference open (the reason goes into the record's detail)

Usage (reproducible: the seed fixes every mutation and every input):
  ISOMER_BIN=build/isomer .venv/bin/python scripts/hostile_campaign.py --seed 1 --count 300 \
      --out /tmp/hostile [--only MUTATOR] [--commands optimize,run_native,run]
It writes each failing mutant and its log under --out/<class>/ and prints counts by class.
A small fixed-seed subset runs in the tests (tests/python/test_hostile_campaign.py, --count 8).
"""
import argparse
import collections
import copy
import glob
import json
import os
import random
import re
import resource
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NODE_DIRS = ["/usr/share/libonnx-testdata/data/node", "/usr/share/onnx/data/node"]
# Operators whose node cases the campaign favours: shape tensors, indices, attributes
# with ranges, control flow.
FAVOURED = ["gather", "scatter", "reshape", "expand", "tile", "constantofshape", "range", "resize",
            "conv", "pool", "transpose", "concat", "split", "slice", "pad", "if", "loop", "scan",
            "topk", "onehot", "squeeze", "unsqueeze", "flatten", "gemm", "matmul", "softmax",
            "reduce", "cumsum", "depthtospace", "spacetodepth", "where", "einsum", "batchnorm",
            "layer_norm", "instancenorm", "lrn", "argmax", "trilu", "compress", "nonzero",
            "gridsample", "roialign", "upsample", "maxunpool", "eyelike", "shape", "size", "cast",
            "dequantize", "quantize", "lstm", "gru", "rnn", "center_crop", "col2im", "dft"]
REAL_MODELS = ["/work/corpus/squeezenet1_1.onnx", "/work/corpus/gpt2_block.onnx",
               "/work/sweep5/models/rnn_grucell_loop.onnx"]
HUGE = [0, -1, -7, 1 << 31, 1 << 40, 1 << 62, (1 << 63) - 1]


# --- sources -------------------------------------------------------------------------------

def node_cases():
    for d in NODE_DIRS:
        if os.path.isdir(d):
            cases = sorted(glob.glob(os.path.join(d, "*", "model.onnx")))
            return [c for c in cases if any(f in os.path.basename(os.path.dirname(c)) for f in FAVOURED)]
    return []


def load(path):
    m = onnx.load(path, load_external_data=False)
    return m


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


def m_external(m, rng, wd):
    ts = [t for t in m.graph.initializer if t.data_location != TensorProto.EXTERNAL]
    t = _pick(rng, ts)
    if t is None:
        return None
    raw = numpy_helper.to_array(t).tobytes()
    for f in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    with open(os.path.join(wd, "w.bin"), "wb") as f:
        f.write(raw)
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


# --- triage ----------------------------------------------------------------------------------

# Classes of "accepted" and "wrong" results that are not isomer's to fix, each with why:
# (mutator, commands, regex on the mutation's note, on the detail, on isomer's stderr, reason).
TRIAGED = [
    ("nonfinite_shape", ("run_native", "run"), r"non-finite|Cast", r"NaN positions differ$",
     r"isomer: warning: .* holds (NaN|Inf) at element",
     "NaN where a max meets it is not defined by ONNX: oneDNN's Relu and MaxPool return the other operand (IEEE "
     "maxNum), ONNX Runtime's Relu keeps the NaN (its MaxPool does not); the numbers agree, and `run` warns of the "
     "non-finite weight"),
    ("opset", ("optimize",), r"^opset (node)?domain$", r"", r"",
     "a node of a vendor domain: ONNX Runtime refuses it for want of that domain's custom-op library, not because "
     "the model is invalid; `optimize` keeps it verbatim, `run` refuses it (a node of an ONNX domain that lacks its "
     "operator, such as ai.onnx.ml, isomer refuses)"),
    ("index", ("optimize",), r"run-time index", r"", r"",
     "the model is valid, the inputs the campaign feeds are not (an index out of range): `optimize` writes the "
     "model, `run` refuses the inputs"),
    ("index", ("optimize",), r"constant index", r"", r"",
     "an index out of range is an error when the node runs (ONNX Runtime fails only then); isomer refuses a constant "
     "one where it imports the node, but not inside an If/Loop/Scan body it keeps verbatim, and `optimize` does not "
     "run a model it leaves unchanged (`run` refuses it)"),
    ("shape_bomb", ("optimize",), r"^appended \w+ bomb", r"", r"",
     "a valid model whose output needs terabytes: ONNX Runtime runs out of memory; `optimize` writes it back "
     "unchanged without running it (`run` refuses it, naming the allocation)"),
]


def triage(mutator, note, command, detail, stderr):
    for mut, commands, note_re, detail_re, stderr_re, reason in TRIAGED:
        if mut == mutator and command in commands and re.search(note_re, note) and re.search(detail_re, detail) \
                and re.search(stderr_re, stderr):
            return reason
    return None


# --- running ---------------------------------------------------------------------------------

def _limit(mem_bytes):
    def f():
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.nice(10)
    return f


def run_isomer(cmd, timeout, mem, env):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout,
                           preexec_fn=_limit(mem), env=env)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""), timeout


def classify(rc, err, model_path, ort_ok):
    lines = [l for l in err.splitlines() if l.strip()]
    if rc is None:
        return "hang"
    # Running out of memory is a failure unless isomer says so cleanly, naming the file.
    if any(l in ("isomer: error: out of memory", "isomer: error: std::bad_alloc") for l in lines) or \
            (("max_size()" in err or "length_error" in err) and os.path.basename(model_path) not in err):
        return "memory"
    if rc < 0 or rc >= 128:
        return "crash"
    if rc == 0:
        return "accepted" if ort_ok is False else "ok"
    errs = [l for l in lines if l.startswith("isomer: error: ")]
    if len(errs) != 1 or len(lines) != 1:
        return "unclear"
    if os.path.basename(model_path) not in errs[0] and "inputs.npz" not in errs[0]:
        return "unclear"
    return "ok"


def ort_outputs(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def _ort_child(path, feeds_path, out_path, mem):
    """ONNX Runtime in a child process: a hostile model must not take the campaign down."""
    code = ("import sys, numpy as np; sys.path.insert(0, %r); import hostile_campaign as h; "
            "f = dict(np.load(%r)) if %r else {}; o = h.ort_outputs(%r, f); np.savez(%r, **o)"
            % (os.path.dirname(os.path.abspath(__file__)), feeds_path, feeds_path, path, out_path))
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           preexec_fn=_limit(mem))
        return p.returncode == 0
    except subprocess.TimeoutExpired:
        return False


def make_feeds(m, rng, bad_index):
    """Inputs for every graph input, from its declared type (dynamic dims -> 2)."""
    feeds = {}
    inits = _init_names(m.graph)
    np_rng = np.random.default_rng(rng.randrange(1 << 30))
    for vi in m.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in tt.shape.dim]
        if any(d < 0 or d > 4096 for d in dims) or int(np.prod(dims, dtype=np.float64)) > (1 << 22):
            return None
        try:
            dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        except Exception:
            return None
        if dt == np.bool_:
            a = np_rng.random(dims) < 0.5
        elif np.issubdtype(dt, np.integer):
            a = np_rng.integers(0, 2, dims).astype(dt)
        elif np.issubdtype(dt, np.floating):
            a = np_rng.standard_normal(dims).astype(dt)
        else:
            return None
        if bad_index and vi.name == bad_index[0] and a.size:
            a = a.copy()
            a.reshape(-1)[rng.randrange(a.size)] = np.array(bad_index[1]).astype(dt) if dt != np.int32 \
                else np.int32(np.clip(bad_index[1], -(1 << 31), (1 << 31) - 1))
        feeds[vi.name] = a
    return feeds


def compare(a_path, b_path, tol=1e-3):
    a, b = np.load(a_path), np.load(b_path)
    for k in b.files:
        if k not in a.files:
            continue
        x, y = a[k], b[k]
        if x.shape != y.shape:
            return f"output {k}: shape {x.shape} vs {y.shape}"
        if x.dtype.kind in "fc":
            # Values where both are numbers first: a NaN in another place is a lesser
            # difference (see TRIAGED), a wrong number never is.
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            ok = ~np.isnan(xf) & ~np.isnan(yf)
            fin = ok & np.isfinite(xf) & np.isfinite(yf)
            scale = max(1.0, float(np.abs(yf[fin]).max()) if fin.any() else 1.0)
            if fin.any() and float(np.abs(xf[fin] - yf[fin]).max()) > tol * scale:
                return f"output {k}: max abs diff {float(np.abs(xf[fin] - yf[fin]).max())}"
            if not np.array_equal(xf[ok & ~fin], yf[ok & ~fin]):
                return f"output {k}: infinities differ"
            if not np.array_equal(np.isnan(xf), np.isnan(yf)):
                return f"output {k}: NaN positions differ"
        elif not np.array_equal(x, y):
            return f"output {k}: values differ"
    return None


def campaign(args):
    rng = random.Random(args.seed)
    sources = node_cases()
    real = [p for p in REAL_MODELS if os.path.exists(p)] if args.real else []
    names = sorted(MUTATORS) if not args.only else args.only.split(",")
    commands = args.commands.split(",")
    env = dict(os.environ)
    env.setdefault("ISOMER_PYTHON", sys.executable)
    counts = collections.Counter()
    by_mut = collections.defaultdict(collections.Counter)
    os.makedirs(args.out, exist_ok=True)
    results = []
    for case in range(args.count):
        crng = random.Random(rng.randrange(1 << 62))
        src = crng.choice(real) if real and crng.random() < args.real_fraction else crng.choice(sources)
        mut = crng.choice(names)
        wd = os.path.join(args.out, "work", f"{case:05d}")
        os.makedirs(wd, exist_ok=True)
        m = load(src)
        if src in real and any(t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer):
            onnx.load_external_data_for_model(m, os.path.dirname(src))
        try:
            r = MUTATORS[mut](m, crng, wd)
        except Exception as e:  # a mutator that does not apply to this model
            print(f"# case {case}: mutator {mut} skipped on {src}: {e}", file=sys.stderr)
            r = None
        if r is None:
            continue
        bad_index = r[2] if len(r) > 2 else None
        m, note = r[0], r[1]
        path = os.path.join(wd, "model.onnx")
        data = m.SerializeToString()
        with open(path, "wb") as f:
            f.write(data)
        feeds = make_feeds(m, crng, bad_index)
        feeds_path = ""
        if feeds is not None:
            feeds_path = os.path.join(wd, "inputs.npz")
            np.savez(feeds_path, **feeds)
        ort_path = os.path.join(wd, "ort.npz")
        ort_ok = _ort_child(path, feeds_path, ort_path, args.mem) if feeds is not None else None
        if ort_ok and bad_index:
            ort_ok = None  # ORT's behaviour on out-of-range indices is not a reference
        for cmd_name in commands:
            outp = os.path.join(wd, f"{cmd_name}.out.onnx")
            npz = os.path.join(wd, f"{cmd_name}.npz")
            if cmd_name == "optimize":
                cmd = [args.isomer, "optimize", path, "-o", outp, "--budget", str(args.budget), "--threads", "1"]
                if feeds_path:
                    cmd += ["--inputs", feeds_path]
            else:
                cmd = [args.isomer, "run", path, "--threads", "1", "--outputs", npz]
                if cmd_name == "run_native":
                    cmd.append("--no-onnxruntime")
                if feeds_path:
                    cmd += ["--inputs", feeds_path]
            rc, out, err, secs = run_isomer(cmd, args.timeout, args.mem, env)
            cls = classify(rc, err, path, ort_ok)
            detail = ""
            if cls == "ok" and rc == 0 and ort_ok and cmd_name != "optimize" and os.path.exists(npz):
                detail = compare(npz, ort_path) or ""
                if detail:
                    cls = "wrong"
            if cls == "ok" and rc == 0 and ort_ok and cmd_name == "optimize" and os.path.exists(outp):
                opt_npz = os.path.join(wd, "opt_ort.npz")
                if _ort_child(outp, feeds_path, opt_npz, args.mem):
                    detail = compare(opt_npz, ort_path) or ""
                    if detail:
                        cls = "wrong"
                else:
                    cls, detail = "wrong", "ONNX Runtime cannot run the optimized model"
            if cls in ("accepted", "wrong"):
                why = triage(mut, note, cmd_name, detail, err)
                if why:
                    cls, detail = "triaged", (detail + "; " if detail else "") + why
            counts[cls] += 1
            by_mut[mut][cls] += 1
            rec = {"case": case, "source": src, "mutator": mut, "note": note, "command": cmd_name, "class": cls,
                   "rc": rc, "secs": round(secs, 2), "stderr": err.strip().splitlines()[-3:], "detail": detail,
                   "ort_ok": ort_ok}
            results.append(rec)
            if cls != "ok":
                print(json.dumps(rec), flush=True)
                keep = os.path.join(args.out, cls)
                os.makedirs(keep, exist_ok=True)
                stem = os.path.join(keep, f"{case:05d}_{cmd_name}_{mut}")
                if len(data) < (1 << 20):  # real models' mutants are rebuilt from the seed instead
                    with open(stem + ".onnx", "wb") as f:
                        f.write(data)
                if feeds_path:
                    os.replace(feeds_path, stem + ".npz") if cmd_name == commands[-1] else \
                        open(stem + ".npz", "wb").write(open(feeds_path, "rb").read())
                with open(stem + ".log", "w") as f:
                    f.write(json.dumps(rec, indent=1) + "\n--- stdout\n" + out + "\n--- stderr\n" + err)
        if not args.keep_work:
            subprocess.run(["rm", "-rf", wd])
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=0)
    print("by class:", dict(counts))
    for k in sorted(by_mut):
        print(f"  {k:18s} {dict(by_mut[k])}")
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--out", default="/tmp/hostile")
    ap.add_argument("--only", default="")
    ap.add_argument("--commands", default="optimize,run_native,run")
    ap.add_argument("--isomer", default=os.environ.get("ISOMER_BIN", "build/isomer"))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--mem", type=int, default=6 << 30, help="address-space limit per process (bytes)")
    ap.add_argument("--budget", type=float, default=2)
    ap.add_argument("--real", action="store_true", help="also mutate the corpus/sweep models in REAL_MODELS")
    ap.add_argument("--real-fraction", type=float, default=0.1)
    ap.add_argument("--keep-work", action="store_true")
    args = ap.parse_args()
    counts = campaign(args)
    bad = sum(v for k, v in counts.items() if k not in ("ok", "triaged"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
