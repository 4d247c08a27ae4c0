"""The thirteenth family of the hostile-model campaign (scripts/hostile_campaign.py): what the
container holds past the sizes and spellings the twelve others try. These models are valid
ONNX (or invalid in one stated way) whose hostility is in their extents and names rather
than their numbers: values of rank 13 to 200 (ONNX sets no limit on a rank; oneDNN holds
12 axes, numpy 64, npz 32), as graph inputs and mid-graph through each kind of operator;
model files at paths that are not UTF-8, hold a newline or spaces, or start with '-', with
their weights in external data beside them; chains of model-local functions each calling
the next, 100 to 20000 deep (ONNX Runtime stops at 100); values and nodes named as isomer
names the values it makes ("isomer_<n>"), at the top and inside an If branch kept as
written; and attributes given twice on a node, alike or not, at the top, in a branch and
in a function's body.

Each mutator builds a small model of its own (the source is ignored) and returns (model,
note) or (model, note, None, [], reference, run), as hostile_mutators_semantic.py's do.
"""
import os

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from hostile_mutators_semantic import _init, _model, _vi

F = TensorProto.FLOAT


# --- ranks past oneDNN's 12 axes -----------------------------------------------------------------

def _rank_op(op, rank, src):
    """One node of `op` on value `src` of rank `rank` (extents 2, 1, ..., 1, 3): (nodes, inits)."""
    last = rank - 1
    inits, ins, attrs = [], [src], {}
    if op == "Transpose":
        attrs = {"perm": list(range(rank))[::-1]}
    elif op in ("ReduceSum", "ReduceMax"):
        inits, ins = [_init("rk_ax", [0, last])], [src, "rk_ax"]
    elif op == "Add":
        inits, ins = [_init("rk_b", [1.0, -2.0, 0.5], np.float32)], [src, "rk_b"]
    elif op == "Concat":
        ins, attrs = [src, src], {"axis": rank // 2}
    elif op == "MatMul":
        inits, ins = [_init("rk_w", np.arange(12).reshape(3, 4) / 7.0, np.float32)], [src, "rk_w"]
    elif op == "Expand":
        shape = [2] + [1] * (rank - 2) + [3]
        shape[1] = 2
        inits, ins = [_init("rk_s", shape)], [src, "rk_s"]
    elif op == "Slice":
        inits = [_init("rk_st", [1]), _init("rk_en", [3]), _init("rk_sa", [last])]
        ins = [src, "rk_st", "rk_en", "rk_sa"]
    elif op == "Gather":
        inits, ins, attrs = [_init("rk_gi", [2, 0])], [src, "rk_gi"], {"axis": last}
    elif op == "Pad":
        inits, ins = [_init("rk_p", [0] * last + [1] + [0] * last + [2])], [src, "rk_p"]
    elif op == "CumSum":
        inits, ins = [_init("rk_a", last)], [src, "rk_a"]
    elif op in ("Softmax", "LogSoftmax"):
        attrs = {"axis": last}
    elif op == "Where":
        inits, ins = [numpy_helper.from_array(np.array([True, False, True]), "rk_c")], ["rk_c", src, src]
    return [helper.make_node(op, ins, ["rk_y"], name="rk_op", **attrs)], inits


RANK_OPS = ["Relu", "Transpose", "ReduceSum", "ReduceMax", "Add", "Concat", "MatMul", "Expand", "Slice", "Gather",
            "Pad", "CumSum", "Softmax", "LogSoftmax", "Where", "Sigmoid"]


def m_high_rank(m, rng, wd):
    """A value of rank 12 (oneDNN's last) to 200 through one operator: a graph input (npz
    holds 32 axes), or a [2, 3] input reshaped up to it and flattened back, at the top or in
    an If branch."""
    op = rng.choice(RANK_OPS)
    where = rng.choice(["input", "inside", "branch"])
    rank = rng.choice([12, 13, 16, 32]) if where == "input" else rng.choice([12, 13, 40, 64, 200])
    nodes, inits = _rank_op(op, rank, "x" if where == "input" else "rk_h")
    if where == "input":
        ins = [_vi("x", F, [2] + [1] * (rank - 2) + [3])]
        nodes.append(helper.make_node("Flatten", ["rk_y"], ["y"], axis=0, name="rk_flat"))
    else:
        ins = [_vi("x", F, [2, 3])]
        inits.append(_init("rk_up", [2] + [1] * (rank - 2) + [3]))
        nodes = [helper.make_node("Reshape", ["x", "rk_up"], ["rk_h"], name="rk_up")] + nodes + \
            [helper.make_node("Flatten", ["rk_y"], ["y" if where == "inside" else "rk_f"], axis=0, name="rk_flat")]
    if where == "branch":
        then = helper.make_graph(nodes, "then", [], [_vi("rk_f")])
        other = helper.make_graph([helper.make_node("Flatten", ["x"], ["rk_e"], axis=0)], "else", [], [_vi("rk_e")])
        inits.append(numpy_helper.from_array(np.array(-100.0, np.float32), "rk_floor"))
        nodes = [helper.make_node("ReduceSum", ["x"], ["rk_s"], keepdims=0),
                 helper.make_node("Greater", ["rk_s", "rk_floor"], ["rk_c"]),
                 helper.make_node("If", ["rk_c"], ["y"], then_branch=then, else_branch=other, name="rk_if")]
    return _model(nodes, ins, [_vi("y")], inits), f"high_rank {where} {rank} {op}"


# --- paths ---------------------------------------------------------------------------------------

def m_odd_path(m, rng, wd):
    """The model at a path that is not UTF-8, holds a newline or spaces, or starts with '-',
    in a folder of such a name, with its weight in external data beside it."""
    how = rng.choice(["not_utf8", "not_utf8_dir", "newline", "spaces", "dash", "long_component"])
    rank = rng.choice([2, 13])  # rank 13: run gives the model to ONNX Runtime whole
    dims = [2] + [1] * (rank - 2) + [3]
    w = np.array([1.0, -2.0, 3.0], np.float32)
    nodes = [helper.make_node("Mul", ["x", "op_w"], ["op_m"], name="mul"),
             helper.make_node("Flatten", ["op_m"], ["y"], axis=0, name="flat")]
    model = _model(nodes, [_vi("x", F, dims)], [_vi("y")], [numpy_helper.from_array(w, "op_w")])
    external = rng.random() < 0.5
    folder, name = {"not_utf8": (b"", b"m\xff.onnx"), "not_utf8_dir": (b"d\xfe\xc0\x80", b"m.onnx"),
                    "newline": (b"", b"m\nx.onnx"), "spaces": (b"a b", b" m .onnx"), "dash": (b"", b"-m.onnx"),
                    "long_component": (b"", b"m" * 250 + b".onnx")}[how]
    run = {}

    def setup(case_dir):
        base = os.path.join(os.fsencode(case_dir), folder) if folder else os.fsencode(case_dir)
        os.makedirs(base, exist_ok=True)
        saved = ModelProto()
        saved.CopyFrom(model)
        if external:
            t = saved.graph.initializer[0]
            with open(os.path.join(base, b"w.bin"), "wb") as f:
                f.write(t.raw_data or w.tobytes())
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.data_location = TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = "location", "w.bin"
        with open(os.path.join(base, name), "wb") as f:
            f.write(saved.SerializeToString())

    run["setup"] = setup
    run["model"] = os.fsdecode(os.path.join(folder, name) if folder else name)
    reference = model
    return model, f"odd_path {how} rank {rank}{' external' if external else ''}", None, [], reference, run


# --- function chains -------------------------------------------------------------------------------

def m_function_chain(m, rng, wd):
    """f0 calls f1 calls ... f(depth-1), which computes Relu: valid ONNX however deep (ONNX
    Runtime refuses a call depth past 100, an implementation limit); or the last one calls
    f0 again (recursion through the whole chain), or a function missing from the middle."""
    depth = rng.choice([3, 100, 101, 2000, 20000])
    how = rng.choice(["valid", "valid", "loop_back", "missing_link"])
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("chain", 1)]
    funcs = []
    for i in range(depth):
        last = i == depth - 1
        callee = "Relu" if last and how != "loop_back" else ("f0" if last else f"f{i + 1}")
        body = [helper.make_node(callee, ["a"], ["b"], domain="" if callee == "Relu" else "chain")]
        funcs.append(helper.make_function("chain", f"f{i}", ["a"], ["b"], body, opsets))
    if how == "missing_link" and depth > 2:
        del funcs[depth // 2]
    g = helper.make_graph([helper.make_node("f0", ["x"], ["y"], domain="chain", name="call")], "chain",
                          [_vi("x", F, [2, 3])], [_vi("y")])
    model = helper.make_model(g, opset_imports=opsets, functions=funcs, producer_name="hostile")
    model.ir_version = 10
    reference = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, [2, 3])], [_vi("y")]) \
        if how == "valid" else None
    return model, f"function_chain {how} {depth}", None, [], reference, {}


# --- names isomer makes -----------------------------------------------------------------------------

def m_generated_names(m, rng, wd):
    """Values and nodes named "isomer_<n>", as isomer names the values it makes, where a
    rewrite makes new values (a MatMul + Add, a Transpose pair, a Mul chain): at the top, or
    inside an If branch that isomer writes back as it was (names there share the model's
    one namespace)."""
    where = rng.choice(["top", "branch", "nodes", "input"])
    k = rng.choice([0, 1, 5])
    names = [f"isomer_{k + i}" for i in range(12)]
    inits = [_init("gn_w", np.arange(9).reshape(3, 3) / 10.0, np.float32), _init("gn_b", [0.5, -1.0, 2.0], np.float32),
             numpy_helper.from_array(np.array(0.0, np.float32), "gn_zero")]
    x = names[11] if where == "input" else "x"
    v = names if where in ("top", "input") else [f"gn_{i}" for i in range(12)]
    nodes = [helper.make_node("Transpose", [x], [v[0]], perm=[1, 0]),
             helper.make_node("Transpose", [v[0]], [v[1]], perm=[1, 0]),
             helper.make_node("MatMul", [v[1], "gn_w"], [v[2]]),
             helper.make_node("Add", [v[2], "gn_b"], [v[3]]),
             helper.make_node("Mul", [v[3], v[3]], [v[4]]),
             helper.make_node("Mul", [v[4], v[3]], [v[5]])]
    if where == "nodes":
        for i, n in enumerate(nodes):
            n.name = names[i]
    out = v[5]
    if where == "branch":
        inner = [helper.make_node("Relu", [v[5]], [names[0]])] + \
            [helper.make_node("Neg", [names[i - 1]], [names[i]]) for i in range(1, 6)]
        then = helper.make_graph(inner, "then", [], [_vi(names[5])])
        other = helper.make_graph([helper.make_node("Identity", [v[5]], ["gn_e"])], "else", [], [_vi("gn_e")])
        nodes += [helper.make_node("ReduceSum", [v[5]], ["gn_s"], keepdims=0),
                  helper.make_node("Greater", ["gn_s", "gn_zero"], ["gn_c"]),
                  helper.make_node("If", ["gn_c"], ["gn_if"], then_branch=then, else_branch=other)]
        out = "gn_if"
    nodes.append(helper.make_node("Relu", [out], ["y"]))
    model = _model(nodes, [_vi(x, F, [2, 3])], [_vi("y")], inits)
    return model, f"generated_names {where} isomer_{k}"


# --- attributes given twice -------------------------------------------------------------------------

def m_dup_attr(m, rng, wd):
    """An attribute given twice on a node (onnx.checker and ONNX Runtime refuse it: "appeared
    multiple times"), the same value or another, at the top, in an If branch or in a
    function's body."""
    where = rng.choice(["top", "branch", "function"])
    same = rng.random() < 0.5
    op, attr, first, second = rng.choice([("Transpose", "perm", [1, 0], [0, 1]), ("Softmax", "axis", 1, 0),
                                          ("LeakyRelu", "alpha", 0.1, 0.2), ("Flatten", "axis", 1, 0)])
    node = helper.make_node(op, ["x" if where != "function" else "a"], ["dup_y" if where != "function" else "b"],
                            **{attr: first})
    node.attribute.append(helper.make_attribute(attr, first if same else second))
    opsets = [helper.make_opsetid("", 21)]
    funcs = []
    if where == "top":
        nodes = [node]
    elif where == "branch":
        then = helper.make_graph([node], "then", [], [_vi("dup_y")])
        other = helper.make_graph([helper.make_node("Identity", ["x"], ["dup_e"])], "else", [], [_vi("dup_e")])
        nodes = [helper.make_node("Constant", [], ["dup_c"], value=numpy_helper.from_array(np.array(True), "")),
                 helper.make_node("If", ["dup_c"], ["dup_y"], then_branch=then, else_branch=other)]
    else:
        opsets.append(helper.make_opsetid("dup", 1))
        funcs = [helper.make_function("dup", "twice", ["a"], ["b"], [node], opsets)]
        nodes = [helper.make_node("twice", ["x"], ["dup_y"], domain="dup")]
    nodes.append(helper.make_node("Identity", ["dup_y"], ["y"]))
    g = helper.make_graph(nodes, "dup", [_vi("x", F, [2, 3])], [_vi("y")])
    model = helper.make_model(g, opset_imports=opsets, functions=funcs, producer_name="hostile")
    model.ir_version = 10
    return model, f"dup_attr {where} {op}.{attr} {'same' if same else 'differs'}"


MUTATORS = {f.__name__[2:]: f for f in [m_high_rank, m_odd_path, m_function_chain, m_generated_names, m_dup_attr]}

# Classes of this family's results that are not isomer's to fix, in the campaign's TRIAGED form:
# (mutators, commands, note, detail, stderr, reason).
TRIAGED = [
    ("function_chain", ("optimize",), r"^function_chain missing_link ", r"^$", r"",
     "a call of a function the model does not define, in the model's own function domain: ONNX allows a node of "
     "any other domain than its own (onnx.checker passes it; a runtime may register the operator), as the "
     "vendor-domain triage says; ONNX Runtime refuses it for want of a kernel, `optimize` inlines the functions "
     "that are there and keeps the call verbatim, and `run` refuses it naming the node"),
    ("dup_attr", ("optimize", "run", "convert", "py_optimize"), r"^dup_attr function ", r"ONNX Runtime runs it",
     r"appeared multiple times",
     "an attribute given twice on a node of a function's body: onnx.checker refuses it in these words, as ONNX "
     "Runtime refuses the same node outside a function; ONNX Runtime does not check the body it inlines, and which "
     "value it takes is not said; isomer refuses it naming the node"),
]
