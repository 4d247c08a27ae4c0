"""Attention as exporters decompose it (MatMul, scalar factors, a mask added or a Where
to -inf, Softmax, MatMul) on the runtime's attention step: taken where the mask is
causal and each head's queries x keys x (D + Dv) is at least 2^18 (64 queries of 32;
LLaMA's and GPT-2's 128 queries of 64), or, without a causal mask, at least 2^20; the
outputs those of ONNX Runtime at odd shapes (grouped-query and multi-query heads,
batch 2, partial tiles and bands, head sizes that fill no vector, Y transposed back
to [B, S, heads, d]), and left to the separate steps below those sizes. Encoders
(no mask, padding masks) in detail: test_attention_encoder.py.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")


def repeated_kv(lead, Hq, Hk, T, D, Dv):
    """Nodes and initializers that repeat K and V ([*lead, Hk, T, D|Dv]) to Hq heads as
    torch exports it, into "kr" and "vr": repeat_kv's Unsqueeze, Expand and Reshape,
    or (Hk == 1) an Expand of the one head."""
    inits, nodes = [], []
    if Hk == 1:
        for x, d in (("k", D), ("v", Dv)):
            inits.append(numpy_helper.from_array(np.array(lead + [Hq, T, d], np.int64), "es" + x))
            nodes.append(helper.make_node("Expand", [x, "es" + x], [x + "r"]))
        return nodes, inits
    r = Hq // Hk
    inits.append(numpy_helper.from_array(np.array([len(lead) + 1], np.int64), "ax"))
    for x, d in (("k", D), ("v", Dv)):
        inits.append(numpy_helper.from_array(np.array(lead + [Hk, r, T, d], np.int64), "es" + x))
        inits.append(numpy_helper.from_array(np.array(lead + [Hq, T, d], np.int64), "rs" + x))
        nodes += [helper.make_node("Unsqueeze", [x, "ax"], [x + "u"]),
                  helper.make_node("Expand", [x + "u", "es" + x], [x + "e"]),
                  helper.make_node("Reshape", [x + "e", "rs" + x], [x + "r"])]
    return nodes, inits


def scaled_scores(nodes, inits, k, D, scale, perm):
    """Appends Q K^T (Q is "q") with its scale as torch exports it: "qk" (Mul by
    sqrt(scale) on Q and on K^T), "div" (Div after the product), "mul" (Mul after it).
    Returns the scores' name."""
    nodes.append(helper.make_node("Transpose", [k], ["kt"], perm=perm))
    q, kt = "q", "kt"
    if scale == "qk":
        inits.append(numpy_helper.from_array(np.array(D ** -0.25, np.float32), "s"))
        nodes += [helper.make_node("Mul", ["q", "s"], ["qs"]), helper.make_node("Mul", ["kt", "s"], ["kts"])]
        q, kt = "qs", "kts"
    nodes.append(helper.make_node("MatMul", [q, kt], ["sc"]))
    if scale not in ("div", "mul"):
        return "sc"
    f = D ** 0.5 if scale == "div" else D ** -0.5
    inits.append(numpy_helper.from_array(np.array(f, np.float32), "f"))
    nodes.append(helper.make_node("Div" if scale == "div" else "Mul", ["sc", "f"], ["scs"]))
    return "scs"


def decomposed(B, Hq, Hk, S, D, Dv=None, mask="add", scale="qk", out="heads", rank=4, mask_rows=None):
    """Q [B, Hq, S, D], K and V [B, Hk, S, D|Dv] (Hk < Hq: repeat_kv as torch exports
    it; Hk == 1 and Hq > 1: an Expand of the one head) -> attention -> Y.

    mask: "add" (a constant float mask, 0 or -inf), "where" (Where(keep, S, -inf)),
    "finite" (-3.4e38 for -inf), None. mask_rows: the [S, S] mask's keep pattern
    (default causal). scale: "qk" (Mul by sqrt(scale) on Q and on K^T), "div"
    (Div after the product), "mul" (Mul after it). out: "heads" ([B, Hq, S, Dv]) or
    "seq" (Transpose and Reshape to [B, S, Hq * Dv]). rank 3: no batch dim (B = 1)."""
    Dv = Dv or D
    lead = [B] if rank == 4 else []
    ins = [helper.make_tensor_value_info("q", TensorProto.FLOAT, lead + [Hq, S, D]),
           helper.make_tensor_value_info("k", TensorProto.FLOAT, lead + [Hk, S, D]),
           helper.make_tensor_value_info("v", TensorProto.FLOAT, lead + [Hk, S, Dv])]
    inits, nodes = [], []
    k, v = "k", "v"
    if Hk != Hq:
        nodes, inits = repeated_kv(lead, Hq, Hk, S, D, Dv)
        k, v = "kr", "vr"
    x = scaled_scores(nodes, inits, k, D, scale, [0, 1, 3, 2] if rank == 4 else [0, 2, 1])
    keep = np.tril(np.ones((S, S), bool)) if mask_rows is None else mask_rows
    mshape = [1, 1, S, S] if rank == 4 else [1, S, S]
    if mask in ("add", "finite"):
        low = -np.inf if mask == "add" else np.float32(-3.4e38)
        inits.append(numpy_helper.from_array(np.where(keep, 0, low).astype(np.float32).reshape(mshape), "m"))
        nodes.append(helper.make_node("Add", [x, "m"], ["xm"]))
        x = "xm"
    elif mask == "where":
        inits += [numpy_helper.from_array(keep.reshape(mshape), "m"),
                  numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
        nodes.append(helper.make_node("Where", ["m", x, "ninf"], ["xm"]))
        x = "xm"
    nodes += [helper.make_node("Softmax", [x], ["p"], axis=-1), helper.make_node("MatMul", ["p", v], ["y"])]
    y = "y"
    if out == "seq":
        inits.append(numpy_helper.from_array(np.array([B, S, Hq * Dv], np.int64), "ys"))
        nodes += [helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["yt", "ys"], ["yr"])]
        y = "yr"
    graph = helper.make_graph(nodes, "attention_chain", ins, [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def feeds_for(model, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        out[i.name] = (rng.standard_normal(shape) * 2).astype(np.float32)
    return out


def first_output_matches_onnxruntime(model, feeds):
    """The first output on isomer's runtime at 1 and 2 threads against ONNX Runtime's
    (optimizations off); returns the 2-thread one."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for threads in (1, 2):
        got = isomer.run(model, feeds, engine="runtime", threads=threads)
        assert got[0].shape == want[0].shape
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=2e-5, equal_nan=True)
    return got[0]


def check(model, taken):
    feeds = feeds_for(model)
    first_output_matches_onnxruntime(model, feeds)
    kinds = isomer.benchmark(model, feeds, threads=1, repeat=1, warmup=0)["step_kinds"]
    if taken:
        assert kinds.get("attention") == 1 and "softmax" not in kinds and "matmul" not in kinds, kinds
    else:
        assert "attention" not in kinds, kinds


@pytest.mark.parametrize(
    "B,Hq,Hk,S,D,Dv,mask,scale,out",
    [
        (1, 16, 4, 256, 64, 64, "add", "qk", "seq"),  # LLaMA's block: GQA, Y back to [B, S, hidden]
        (1, 12, 12, 256, 64, 64, "where", "div", "seq"),  # GPT-2's: Where(keep, S, -inf), Div
        (1, 16, 4, 128, 64, 64, "add", "qk", "seq"),  # the corpus's LLaMA block: 128 queries
        (1, 12, 12, 128, 64, 64, "where", "div", "seq"),  # the corpus's GPT-2 block
        (2, 6, 2, 97, 48, 40, "add", "mul", "heads"),  # odd: a partial tile of rows and of keys
        (1, 4, 4, 65, 64, 64, "where", "qk", "seq"),  # one row past whole tiles
        (2, 6, 3, 257, 24, 40, "add", "mul", "heads"),  # batch 2, a partial band, odd head sizes
        (2, 4, 1, 300, 16, 16, "where", "qk", "seq"),  # multi-query: one KV head expanded
        (1, 3, 3, 384, 8, 8, "add", "qk", "heads"),
    ])
def test_causal_chain_runs_on_the_attention_step(B, Hq, Hk, S, D, Dv, mask, scale, out):
    check(decomposed(B, Hq, Hk, S, D, Dv, mask=mask, scale=scale, out=out), taken=True)


def test_rank3_heads_without_batch():
    check(decomposed(1, 4, 4, 260, 32, mask="add", scale="div", rank=3), taken=True)


def test_a_causal_mask_with_more_keys_hidden_is_still_applied():
    # Causal, and key 3 hidden from every query after it: the frontier comes from the
    # causality, the rest from the mask itself.
    keep = np.tril(np.ones((288, 288), bool))
    keep[4:, 3] = False
    check(decomposed(1, 4, 2, 288, 32, mask="where", mask_rows=keep), taken=True)
    check(decomposed(1, 4, 2, 288, 32, mask="add", mask_rows=keep), taken=True)


def test_a_causal_mask_that_also_adds_a_bias_is_still_added():
    # -inf above the diagonal, and a finite bias on and below it (ALiBi's form): the
    # step skips the keys past the frontier and still adds the rest of the mask; a
    # mask of only 0 and -inf is not read (the frontier is all it says).
    S = 128
    model = decomposed(1, 4, 2, S, 64, mask="add")
    i, j = np.meshgrid(np.arange(S), np.arange(S), indexing="ij")
    bias = np.where(j <= i, -0.5 * (i - j), -np.inf).astype(np.float32).reshape(1, 1, S, S)
    for init in model.graph.initializer:
        if init.name == "m":
            init.CopyFrom(numpy_helper.from_array(bias, "m"))
    check(model, taken=True)
    check(decomposed(1, 4, 2, S, 64, mask="add"), taken=True)


def test_a_row_with_every_key_masked_is_nan_as_softmax_makes_it():
    keep = np.tril(np.ones((256, 256), bool))
    keep[5, :] = False
    model = decomposed(1, 2, 2, 256, 16, mask="add", mask_rows=keep)
    check(model, taken=True)
    got = isomer.run(model, feeds_for(model), engine="runtime", threads=1)[0]
    assert np.isnan(got[0, :, 5]).all() and not np.isnan(got[0, :, 4]).any()


@pytest.mark.parametrize(
    "S,mask,keep",
    [
        (197, None, None),  # no mask (ViT): the same products, without a frontier
        (256, "finite", None),  # -3.4e38, not -inf: not causal, the mask added as it is
        (256, "add", np.ones((256, 256), bool)),  # a mask that hides nothing
        (256, "add", np.triu(np.ones((256, 256), bool))),  # the other triangle
    ])
def test_masks_that_are_not_causal_run_the_step_without_a_frontier(S, mask, keep):
    check(decomposed(1, 4, 4, S, 32, mask=mask, mask_rows=keep), taken=True)


def test_causal_heads_of_2_to_the_18():
    # 64 queries of 32: half the products saved pays for the packing and the rows.
    check(decomposed(1, 12, 12, 64, 32, mask="add"), taken=True)


@pytest.mark.parametrize(
    "S,D,mask",
    [
        (32, 64, "add"),  # causal at 2^17: the step's packing and rows cost more than it saves
        (64, 32, None),  # not causal at 2^18
        (100, 32, "finite"),  # not causal, under 2^20
    ])
def test_left_to_separate_steps_where_the_step_saves_nothing(S, D, mask):
    check(decomposed(1, 4, 4, S, D, mask=mask), taken=False)


def hf_masked(B, Hq, S, D, keep, fill=np.float32(-3.4028235e38), form="add", scale=None):
    """Attention under a mask computed at run time as Hugging Face's exports build it:
    And(a constant [1, 1, S, S] keep pattern, the padding mask attention_mask[:, None,
    None, :] as bool), then Where(., 0, fill) added to the scores (form "add"), or the
    bool mask itself in Where(., S, -inf) (form "where")."""
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [B, Hq, S, D]) for x in ("q", "k", "v")]
    ins.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, S]))
    inits = [numpy_helper.from_array(keep.reshape(1, 1, S, S), "keep"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
             numpy_helper.from_array(np.array(D ** -0.5 if scale is None else scale, np.float32), "s"),
             numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array(fill, np.float32), "fill"),
             numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf")]
    nodes = [helper.make_node("Unsqueeze", ["attention_mask", "axes"], ["pm"]),
             helper.make_node("Cast", ["pm"], ["pb"], to=TensorProto.BOOL),
             helper.make_node("And", ["keep", "pb"], ["both"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["sc"]),
             helper.make_node("Mul", ["sc", "s"], ["scs"])]
    if form == "add":
        nodes += [helper.make_node("Where", ["both", "zero", "fill"], ["m"]),
                  helper.make_node("Add", ["scs", "m"], ["xm"])]
    else:
        nodes.append(helper.make_node("Where", ["both", "scs", "ninf"], ["xm"]))
    nodes += [helper.make_node("Softmax", ["xm"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "hf_mask", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def check_padded(model, taken, pads, feeds=None):
    S = model.graph.input[3].type.tensor_type.shape.dim[1].dim_value
    feeds = feeds or feeds_for(model)
    # Left padding: the first pads[b] positions of batch b hidden; those queries see
    # no key the fill does not hide, and the decomposed Softmax weighs every key.
    feeds["attention_mask"] = np.array([[0] * p + [1] * (S - p) for p in pads], np.int64)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for threads in (1, 2):
        got = isomer.run(model, feeds, engine="runtime", threads=threads)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=2e-5, equal_nan=True)
    kinds = isomer.benchmark(model, feeds, threads=1, repeat=1, warmup=0)["step_kinds"]
    assert (kinds.get("attention") == 1) == taken, kinds


@pytest.mark.parametrize("form", ["add", "where"])
def test_a_causal_mask_computed_at_run_time_is_taken(form):
    # 128 queries of 4 heads of 64; batch 2 with 5 positions of left padding in the
    # second: the padded queries' rows (every key at finfo.min) are computed over
    # every key, as the decomposed graph weighs them.
    S = 128
    check_padded(hf_masked(2, 4, S, 64, np.tril(np.ones((S, S), bool)), form=form), True, [0, 5])
    check_padded(hf_masked(1, 2, 97, 64, np.tril(np.ones((97, 97), bool)), form=form), True, [3])


def test_a_finite_fill_row_with_scores_too_large_to_bound_is_exact():
    # Scores of +-2e38: the keys before the frontier at -2e38, those after it at
    # +2e38 + finfo.min = -1.4e38, which outweigh them; rows that cannot be bounded
    # go over every key too.
    S, D = 128, 64
    model = hf_masked(1, 2, S, D, np.tril(np.ones((S, S), bool)), scale=1.0)
    feeds = feeds_for(model)
    a = np.float32(np.sqrt(2e38 / D))
    feeds["q"] = np.full_like(feeds["q"], a)
    feeds["k"] = np.where(np.arange(S)[None, None, :, None] <= 60, -a, a).astype(np.float32) * np.ones_like(feeds["k"])
    check_padded(model, True, [0], feeds)


@pytest.mark.parametrize("keep,fill", [
    (np.ones((128, 128), bool), np.float32(-3.4028235e38)),  # no causality in the constant: padding only
    (np.triu(np.ones((128, 128), bool)), np.float32(-3.4028235e38)),  # the other triangle
    (np.tril(np.ones((128, 128), bool)), np.float32(-1e4)),  # a fill the scores can reach
])
def test_a_computed_mask_that_is_not_causal_runs_without_a_frontier(keep, fill):
    # Every key of every row weighed as the decomposed graph weighs it: the padded
    # queries' rows (every key at the fill) included.
    check_padded(hf_masked(2, 4, 128, 64, keep, fill=fill), True, [0, 5])


def test_bert_padding_mask_computed_at_run_time():
    # transformers' BERT: (1 - mask[:, None, None, :]) expanded to [B, 1, S, S], as bool
    # selects finfo.min, else the float (0): Where(hidden, finfo.min, 1 - mask) added. Not
    # causal, so the step without a frontier; proving that must lower nothing out of the
    # graph's order (the mask's Cast, lowered early by the proof, left its output unwritten).
    B, H, S, D = 2, 4, 128, 64
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [B, H, S, D]) for x in ("q", "k", "v")]
    ins.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, S]))
    inits = [numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
             numpy_helper.from_array(np.array(1, np.float32), "one"),
             numpy_helper.from_array(np.array(-3.4028235e38, np.float32), "fill"),
             numpy_helper.from_array(np.array(D ** -0.5, np.float32), "s"),
             numpy_helper.from_array(np.array([B, 1, S, S], np.int64), "full")]
    nodes = [helper.make_node("Unsqueeze", ["attention_mask", "axes"], ["pu"]),
             helper.make_node("Expand", ["pu", "full"], ["pm"]),
             helper.make_node("Cast", ["pm"], ["pf"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["one", "pf"], ["rsub"]),
             helper.make_node("Cast", ["rsub"], ["hidden"], to=TensorProto.BOOL),
             helper.make_node("Where", ["hidden", "fill", "rsub"], ["m"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["sc"]),
             helper.make_node("Mul", ["sc", "s"], ["scs"]),
             helper.make_node("Add", ["scs", "m"], ["xm"]),
             helper.make_node("Softmax", ["xm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "bert_mask", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    check_padded(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), True, [0, 7])
