"""The seventh family of the hostile-model campaign (scripts/hostile_campaign.py): VALID models
(onnx.checker and ONNX Runtime accept them) built to make `optimize` or `run` take unbounded
time, memory or disk, or to make `optimize` write a bloated model. Constants that folding would
blow up (ConstantOfShape, Expand, Tile, Range of a scalar to 10^8..10^9 elements under a Reduce;
an outer product of two vectors), products of large constant matrices and convolutions of
constant images (folding's arithmetic), e-graph food (long Add/Mul chains over constants, one
value read by a thousand consumers, deep chains, thousands of small ops), Loops whose constant
trip count is 10^9 (ended by their condition, or not), Resize, Pad and ConvTranspose whose
output extents are huge from valid attributes, a 2 GB initializer in external data that is
sparse on disk, 10^5 tiny initializers, hundreds of Ifs, and constant indices out of range
(Gather, GatherElements, ScatterND, ScatterElements: valid files, ONNX Runtime fails when the
node runs).

Each mutator builds a small model of its own (the source is ignored) and returns the tuple the
other families return (hostile_mutators_semantic.py); its `run` may also hold
  "commands": the commands the case runs (a model whose run takes hours by its own meaning is
              only optimized).
"""
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from hostile_mutators_semantic import _init, _model, _vi


def _scalar_to(rng, numel):
    """Nodes that make `big` (float, numel elements, 1-D) from small constants, and their inits."""
    how = rng.choice(["constantofshape", "expand", "tile", "range"])
    if how == "constantofshape":
        nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"],
                                  value=numpy_helper.from_array(np.array([0.5], np.float32), ""))]
        return how, nodes, [_init("shape", [numel])]
    if how == "expand":
        nodes = [helper.make_node("Expand", ["one"], ["big"])]
        nodes[0].input.append("shape")
        return how, nodes, [_init("one", [0.25], np.float32), _init("shape", [numel])]
    if how == "tile":
        return how, [helper.make_node("Tile", ["one", "reps"], ["big"])], \
            [_init("one", [0.25], np.float32), _init("reps", [numel])]
    return how, [helper.make_node("Range", ["start", "limit", "delta"], ["big"])], \
        [_init("start", 0.0, np.float32), _init("limit", float(numel), np.float32), _init("delta", 1.0, np.float32)]


def m_fold_bomb(m, rng, wd):
    """A scalar made into 10^7..10^9 elements by a shape operator, then reduced to one number
    added to the input: folding must neither allocate it nor write it into the model."""
    numel = rng.choice([10 ** 7, 10 ** 8, 10 ** 9])
    how, nodes, inits = _scalar_to(rng, numel)
    red = rng.choice(["ReduceSum", "ReduceMax", "ReduceMean"])
    nodes += [helper.make_node(red, ["big"], ["r"], keepdims=1), helper.make_node("Add", ["x", "r"], ["y"])]
    run = {"commands": ["optimize"]} if numel > 10 ** 8 else {}
    return (_model(nodes, [_vi("x", dims=[2, 3])], [_vi("y", dims=[2, 3])], inits),
            f"fold_bomb {how} {numel} {red}", None, [], None, run)


def m_fold_bloat(m, rng, wd):
    """Small constants whose folded value is 4..64 MB (an Expand of a scalar, an outer product
    of two vectors, a Tile) feeding an Add with the input: the model written must not carry the
    folded tensor (the input file is a few kB)."""
    n = rng.choice([1024, 2048, 4096])
    how = rng.choice(["expand", "outer", "tile", "range"])
    if how == "expand":
        nodes = [helper.make_node("Expand", ["one", "shape"], ["c"])]
        inits = [_init("one", [[0.25]], np.float32), _init("shape", [n, n])]
    elif how == "outer":
        nodes = [helper.make_node("MatMul", ["col", "row"], ["c"])]
        r = np.random.default_rng(n)
        inits = [_init("col", r.standard_normal((n, 1)), np.float32), _init("row", r.standard_normal((1, n)), np.float32)]
    elif how == "tile":
        nodes = [helper.make_node("Tile", ["one", "reps"], ["c"])]
        inits = [_init("one", [[0.5, -0.5]], np.float32), _init("reps", [n, n // 2])]
    else:
        nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
                 helper.make_node("Reshape", ["r", "shape"], ["c"])]
        inits = [_init("start", 0.0, np.float32), _init("limit", float(n * n), np.float32),
                 _init("delta", 1.0, np.float32), _init("shape", [n, n])]
    nodes.append(helper.make_node("Add", ["x", "c"], ["y"]))
    return _model(nodes, [_vi("x", dims=[n, n])], [_vi("y", dims=[n, n])], inits), f"fold_bloat {how} {n}"


def m_fold_flops(m, rng, wd):
    """Folding whose arithmetic is large although every tensor is small enough to fold: a chain
    of constant square MatMuls, or a convolution of a constant image."""
    how = rng.choice(["matmul_chain", "conv"])
    r = np.random.default_rng(7)
    if how == "matmul_chain":
        n, k = rng.choice([(1024, 4), (2048, 4), (2048, 8)])
        inits = [_init(f"w{i}", r.standard_normal((n, n)) / np.sqrt(n), np.float32) for i in range(k)]
        nodes, prev = [], "w0"
        for i in range(1, k):
            nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"p{i}"]))
            prev = f"p{i}"
        nodes.append(helper.make_node("MatMul", ["x", prev], ["y"]))
        return _model(nodes, [_vi("x", dims=[2, n])], [_vi("y", dims=[2, n])], inits), f"fold_flops {how} {n} x{k}"
    c, hw = rng.choice([(64, 256), (128, 256)])
    inits = [_init("img", r.standard_normal((1, c, hw, hw)), np.float32),
             _init("w", r.standard_normal((c, c, 3, 3)) / 30, np.float32)]
    nodes = [helper.make_node("Conv", ["img", "w"], ["f"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["x", "f"], ["y"])]
    return (_model(nodes, [_vi("x", dims=[1, c, hw, hw])], [_vi("y", dims=[1, c, hw, hw])], inits),
            f"fold_flops {how} {c}x{hw}x{hw}")


def m_egraph_food(m, rng, wd):
    """Graphs an e-graph grows fast on: a long alternating Add/Mul chain over constants
    (associativity and commutativity), one value read by a thousand consumers summed back,
    a deep chain of small ops, thousands of independent small ops."""
    how = rng.choice(["assoc_chain", "fan_out", "deep_chain", "many_small"])
    x = _vi("x", dims=[4, 8])
    nodes, inits = [], []
    if how == "assoc_chain":
        count = rng.choice([200, 1000, 3000])
        prev = "x"
        for i in range(count):
            inits.append(_init(f"c{i}", np.full((8,), 1.0 + (i % 7) / 64, np.float32), np.float32))
            op = "Add" if i % 3 else "Mul"
            ins = [prev, f"c{i}"] if i % 2 else [f"c{i}", prev]
            nodes.append(helper.make_node(op, ins, [f"v{i}"]))
            prev = f"v{i}"
    elif how == "fan_out":
        count = rng.choice([1000, 3000])
        outs = []
        for i in range(count):
            nodes.append(helper.make_node(["Relu", "Neg", "Abs", "Sigmoid"][i % 4], ["x"], [f"f{i}"]))
            outs.append(f"f{i}")
        nodes.append(helper.make_node("Sum", outs, ["s"]))
        prev = "s"
    elif how == "deep_chain":
        count = rng.choice([5000, 10000])
        prev = "x"
        for i in range(count):
            nodes.append(helper.make_node(["Relu", "Neg", "Tanh", "Identity"][i % 4], [prev], [f"d{i}"]))
            prev = f"d{i}"
    else:
        count = 5000
        inits.append(_init("one", np.ones((8,), np.float32), np.float32))
        outs = []
        for i in range(count):
            nodes.append(helper.make_node("Add" if i % 2 else "Mul", ["x", "one"], [f"a{i}"]))
            nodes.append(helper.make_node("Relu", [f"a{i}"], [f"b{i}"]))
            outs.append(f"b{i}")
        nodes.append(helper.make_node("Concat", outs, ["s"], axis=0))
        prev = "s"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return _model(nodes, [x], [_vi("y", dims=None)], inits), f"egraph_food {how} {count}"


def m_long_loop(m, rng, wd):
    """A Loop whose constant trip count is 10^9 over constant carried values: ended at once by
    its condition (a folder that unrolls by the trip count would never end), or not (the
    model's own run takes hours: only `optimize` runs it, and must not run the loop)."""
    how = rng.choice(["cond_ends", "runs_long"])
    body_nodes = [helper.make_node("Add", ["v_in", "step"], ["v_out"])]
    if how == "cond_ends":
        body_nodes.append(helper.make_node("Less", ["i", "three"], ["cond_out"]))
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(body_nodes, "body", [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
                                                  _vi("v_in", dims=[3])],
                             [_vi("cond_out", TensorProto.BOOL, []), _vi("v_out", dims=[3])],
                             initializer=[_init("step", [1.0, 2.0, 3.0], np.float32), _init("three", 3)])
    nodes = [helper.make_node("Loop", ["trip", "cond", "v0"], ["v"], body=body),
             helper.make_node("Add", ["x", "v"], ["y"])]
    inits = [_init("trip", 10 ** 9), _init("cond", True, np.bool_), _init("v0", [0.0, 0.0, 0.0], np.float32)]
    run = {"commands": ["optimize"]} if how == "runs_long" else {}
    return (_model(nodes, [_vi("x", dims=[2, 3])], [_vi("y", dims=[2, 3])], inits), f"long_loop {how}",
            None, [], None, run)


def m_huge_extent(m, rng, wd):
    """Resize, Pad and ConvTranspose whose outputs are terabytes from valid attributes."""
    how = rng.choice(["resize", "pad", "convtranspose"])
    x = _vi("x", dims=[1, 1, 8, 8])
    if how == "resize":
        nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")]
        inits = [_init("scales", [1.0, 1.0, 1e5, 1e5], np.float32)]
    elif how == "pad":
        nodes = [helper.make_node("Pad", ["x", "pads"], ["y"])]
        inits = [_init("pads", [0, 0, 1 << 20, 1 << 20, 0, 0, 1 << 20, 1 << 20])]
    else:
        nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[1 << 18, 1 << 18])]
        inits = [_init("w", np.ones((1, 1, 3, 3)), np.float32)]
    return (_model(nodes, [x], [_vi("y", dims=None)], inits), f"huge_extent {how}", None, [], None,
            {"commands": ["optimize", "run_native"]})


def m_sparse_external(m, rng, wd):
    """An initializer of 0.6..2.1 GB whose external data file is sparse on disk, read by a
    Gather of a few rows: loading must not be the end of the machine, nor may `optimize` write
    it inline (protobuf's 2 GB limit) or twice."""
    rows = rng.choice([150_000, 500_000])
    cols = 1024
    path = os.path.join(wd, "weights.bin")
    with open(path, "wb") as f:
        f.truncate(rows * cols * 4)
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[rows, cols], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(rows * cols * 4))):
        e = w.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("Gather", ["w", "idx"], ["y"], axis=0)]
    idx = _vi("idx", TensorProto.INT64, [4])
    return _model(nodes, [idx], [_vi("y", dims=[4, cols])], [w]), f"sparse_external {rows}x{cols}", None, [], None, \
        {"feeds": {"idx": np.array([0, 1, rows // 2, rows - 1], np.int64)}}


def m_many_inits(m, rng, wd):
    """10^4..10^5 tiny initializers concatenated (one node of 10^5 inputs) or summed (10^4:
    ONNX Runtime itself spends over a minute loading a Sum of 10^5 inputs, and `run` hands
    such a node to it)."""
    how = rng.choice(["concat", "sum"])
    count = rng.choice([10_000, 100_000]) if how == "concat" else 10_000
    inits = [_init(f"t{i}", [float(i % 13)], np.float32) for i in range(count)]
    if how == "concat":
        nodes = [helper.make_node("Concat", [t.name for t in inits], ["c"], axis=0),
                 helper.make_node("ReduceSum", ["c"], ["r"], keepdims=1),
                 helper.make_node("Add", ["x", "r"], ["y"])]
    else:
        nodes = [helper.make_node("Sum", ["x"] + [t.name for t in inits], ["y"])]
    return _model(nodes, [_vi("x", dims=[2, 3])], [_vi("y", dims=[2, 3])], inits), f"many_inits {how} {count}"


def m_many_ifs(m, rng, wd):
    """Hundreds of Ifs in sequence, each on a run-time condition, each branch a small op."""
    count = rng.choice([200, 1000])
    nodes, prev = [], "x"
    for i in range(count):
        then_b = helper.make_graph([helper.make_node("Relu", [prev], [f"t{i}"])], f"then{i}", [],
                                   [_vi(f"t{i}", dims=None)])
        else_b = helper.make_graph([helper.make_node("Neg", [prev], [f"e{i}"])], f"else{i}", [],
                                   [_vi(f"e{i}", dims=None)])
        nodes.append(helper.make_node("If", ["c"], [f"y{i}"], then_branch=then_b, else_branch=else_b))
        prev = f"y{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return (_model(nodes, [_vi("c", TensorProto.BOOL, []), _vi("x", dims=[2, 3])], [_vi("y", dims=None)]),
            f"many_ifs {count}")


def m_const_index(m, rng, wd):
    """A constant index out of range for Gather, GatherElements, ScatterND or ScatterElements:
    onnx.checker accepts the file, ONNX Runtime fails when the node runs; isomer must refuse it
    naming the node (and, fed at run time, refuse the inputs)."""
    op = rng.choice(["Gather", "GatherElements", "ScatterND", "ScatterElements"])
    bad = rng.choice([3, -4, 1000, -(1 << 40), 1 << 62])
    runtime = rng.random() < 0.3
    data = _vi("x", dims=[3, 4])
    if op == "Gather":
        idx, dims = [0, bad], [2]
        nodes = [helper.make_node("Gather", ["x", "idx"], ["y"], axis=0)]
    elif op == "GatherElements":
        idx, dims = [[0, 1, 2, 0], [1, 2, 0, bad]], [2, 4]
        nodes = [helper.make_node("GatherElements", ["x", "idx"], ["y"], axis=0)]
    elif op == "ScatterND":
        idx, dims = [[0], [bad]], [2, 1]
        nodes = [helper.make_node("ScatterND", ["x", "idx", "upd"], ["y"])]
    else:
        idx, dims = [[0, 1, 2, bad]], [1, 4]
        nodes = [helper.make_node("ScatterElements", ["x", "idx", "upd"], ["y"], axis=0)]
    inputs, inits = [data], []
    if op == "ScatterND":
        inits.append(_init("upd", np.ones((2, 4)), np.float32))
    elif op == "ScatterElements":
        inits.append(_init("upd", np.ones((1, 4)), np.float32))
    if runtime:
        inputs.append(_vi("idx", TensorProto.INT64, dims))
        return (_model(nodes, inputs, [_vi("y", dims=None)], inits), f"const_index {op} run-time index {bad}",
                ("idx", bad), [], None, {"feeds": {"x": np.ones((3, 4), np.float32),
                                                   "idx": np.array(idx, np.int64)}})
    inits.append(_init("idx", idx))
    return _model(nodes, inputs, [_vi("y", dims=None)], inits), f"const_index {op} constant index {bad}"


MUTATORS = {f.__name__[2:]: f for f in [m_fold_bomb, m_fold_bloat, m_fold_flops, m_egraph_food, m_long_loop,
                                        m_huge_extent, m_sparse_external, m_many_inits, m_many_ifs, m_const_index]}
