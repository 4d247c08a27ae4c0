"""Encoder attention as exporters decompose it (no mask: ViT; a padding mask shared by
every query: BERT; a full mask that is not causal) on the runtime's attention step
where each head's queries x keys x (D + Dv) is at least 2^20 and its heads have 32
features or more: the outputs those of
ONNX Runtime at odd shapes (197 tokens, grouped-query heads, batch 2, head sizes that
fill no vector, rank 3), rows whose every key is masked as the decomposed Softmax
gives them (NaN under -inf, even weights under finfo.min), large logits; Q's and
K^T's scalar Muls taken into the step only where the product alone reads them; and
heads below the threshold left to the separate steps.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_attention_chain import repeated_kv

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

FMIN = np.float32(np.finfo(np.float32).min)


def encoder(B, Hq, Hk, Sq, T, D, Dv=None, mask=None, qk_scale=True, out="seq", rank=4, shared_q=False):
    """Q [B, Hq, Sq, D], K [B, Hk, T, D], V [B, Hk, T, Dv] (Hk < Hq: torch's repeat_kv),
    Mul(Q, s), Mul(K^T, s) (qk_scale; else Mul after the product), a mask, Softmax, P V.

    mask: None; "row" (a float input [B, 1, 1, T] added: a padding mask); "bool-row"
    (a bool input [B, 1, 1, T] in Where(keep, S, -inf)); "full" (a float input [B, Hq,
    Sq, T] added); "bert" (transformers' BERT: attention_mask [B, T] int64,
    Where(1 - m as bool, finfo.min, 1 - m) added). shared_q: the scaled Q is also a
    graph output (its Mul must stay)."""
    Dv = Dv or D
    lead = [B] if rank == 4 else []
    ins = [helper.make_tensor_value_info("q", TensorProto.FLOAT, lead + [Hq, Sq, D]),
           helper.make_tensor_value_info("k", TensorProto.FLOAT, lead + [Hk, T, D]),
           helper.make_tensor_value_info("v", TensorProto.FLOAT, lead + [Hk, T, Dv])]
    inits, nodes, outs = [], [], []
    k, v = "k", "v"
    if Hk != Hq:
        nodes, inits = repeated_kv(lead, Hq, Hk, T, D, Dv)
        k, v = "kr", "vr"
    perm = [0, 1, 3, 2] if rank == 4 else [0, 2, 1]
    nodes.append(helper.make_node("Transpose", [k], ["kt"], perm=perm))
    q, kt = "q", "kt"
    if qk_scale:
        inits.append(numpy_helper.from_array(np.array(D ** -0.25, np.float32), "s"))
        nodes += [helper.make_node("Mul", ["q", "s"], ["qs"]), helper.make_node("Mul", ["kt", "s"], ["kts"])]
        q, kt = "qs", "kts"
        if shared_q:
            outs.append(helper.make_tensor_value_info("qs", TensorProto.FLOAT, None))
    nodes.append(helper.make_node("MatMul", [q, kt], ["sc"]))
    x = "sc"
    if not qk_scale:
        inits.append(numpy_helper.from_array(np.array(D ** -0.5, np.float32), "f"))
        nodes.append(helper.make_node("Mul", ["sc", "f"], ["scs"]))
        x = "scs"
    if mask in ("row", "full"):
        shape = [B, 1, 1, T] if mask == "row" else lead + [Hq, Sq, T]
        ins.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, shape))
        nodes.append(helper.make_node("Add", [x, "mask"], ["xm"]))
        x = "xm"
    elif mask == "bool-row":
        ins.append(helper.make_tensor_value_info("mask", TensorProto.BOOL, [B, 1, 1, T]))
        inits.append(numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf"))
        nodes.append(helper.make_node("Where", ["mask", x, "ninf"], ["xm"]))
        x = "xm"
    elif mask == "bert":
        ins.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, T]))
        inits += [numpy_helper.from_array(np.array([1, 2], np.int64), "axes"),
                  numpy_helper.from_array(np.array(1, np.float32), "one"),
                  numpy_helper.from_array(FMIN, "fill")]
        nodes += [helper.make_node("Unsqueeze", ["attention_mask", "axes"], ["pu"]),
                  helper.make_node("Cast", ["pu"], ["pf"], to=TensorProto.FLOAT),
                  helper.make_node("Sub", ["one", "pf"], ["rsub"]),
                  helper.make_node("Cast", ["rsub"], ["hidden"], to=TensorProto.BOOL),
                  helper.make_node("Where", ["hidden", "fill", "rsub"], ["m"]),
                  helper.make_node("Add", [x, "m"], ["xm"])]
        x = "xm"
    nodes += [helper.make_node("Softmax", [x], ["p"], axis=-1), helper.make_node("MatMul", ["p", v], ["y"])]
    y = "y"
    if out == "seq" and rank == 4:
        inits.append(numpy_helper.from_array(np.array([B, Sq, Hq * Dv], np.int64), "ys"))
        nodes += [helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["yt", "ys"], ["yr"])]
        y = "yr"
    outs.insert(0, helper.make_tensor_value_info(y, TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "encoder_attention", ins, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def feeds_for(model, seed=0, scale=2.0):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if i.name == "attention_mask":
            out[i.name] = np.ones(shape, np.int64)
        elif i.type.tensor_type.elem_type == TensorProto.BOOL:
            out[i.name] = np.ones(shape, bool)
        elif i.name == "mask":
            out[i.name] = np.zeros(shape, np.float32)
        else:
            out[i.name] = (rng.standard_normal(shape) * scale).astype(np.float32)
    return out


def check(model, taken, feeds=None, kinds_want=None, atol=2e-5):
    feeds = feeds or feeds_for(model)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for threads in (1, 2):
        got = isomer.run(model, feeds, engine="runtime", threads=threads)
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=atol, equal_nan=True)
    kinds = isomer.benchmark(model, feeds, threads=1, repeat=1, warmup=0)["step_kinds"]
    if kinds_want is not None:
        assert kinds == kinds_want, kinds
    elif taken:
        assert kinds.get("attention") == 1 and "softmax" not in kinds and "matmul" not in kinds, kinds
    else:
        assert "attention" not in kinds, kinds
    return want


@pytest.mark.parametrize(
    "B,Hq,Hk,Sq,T,D,Dv,mask",
    [
        (1, 6, 6, 197, 197, 64, 64, None),  # ViT-S/16: 197 tokens, no mask
        (2, 12, 12, 128, 128, 64, 64, "bert"),  # BERT's padding mask computed at run time
        (2, 6, 2, 131, 131, 40, 48, "row"),  # GQA 3:1, odd tokens and head sizes, a float key mask
        (2, 4, 4, 97, 157, 48, 48, "bool-row"),  # more keys than queries, Where(keep, S, -inf)
        (1, 4, 1, 150, 150, 64, 32, "full"),  # one KV head, a mask of its own per query
        (2, 3, 3, 257, 257, 32, 33, None),  # batch 2, a partial band, heads of 32 and 33
    ])
def test_encoder_attention_runs_on_the_attention_step(B, Hq, Hk, Sq, T, D, Dv, mask):
    model = encoder(B, Hq, Hk, Sq, T, D, Dv, mask=mask)
    feeds = feeds_for(model)
    rng = np.random.default_rng(1)
    if mask == "row":
        feeds["mask"] = np.where(rng.random((B, 1, 1, T)) < 0.2, FMIN, rng.standard_normal((B, 1, 1, T))).astype(np.float32)
    elif mask == "bool-row":
        feeds["mask"] = rng.random((B, 1, 1, T)) > 0.3
    elif mask == "full":
        feeds["mask"] = np.where(rng.random((B, Hq, Sq, T)) < 0.3, -np.inf, 0.5).astype(np.float32)
    elif mask == "bert":
        feeds["attention_mask"][1, 100:] = 0  # the second sequence padded
    check(model, True, feeds)


def test_rank3_heads_without_batch():
    check(encoder(1, 4, 4, 140, 140, 64, mask=None, qk_scale=False, rank=3), True)


def test_keys_all_masked_give_the_decomposed_softmax_rows():
    # Batch 1's keys all -inf (bool mask false everywhere): NaN rows as Softmax gives
    # them; all at finfo.min: even weights over every key; the other batch exact.
    B, H, S, D = 2, 4, 130, 64
    model = encoder(B, H, H, S, S, D, mask="bool-row")
    feeds = feeds_for(model)
    feeds["mask"][1] = False
    want = check(model, True, feeds)[0]
    assert np.isnan(want[1]).all() and not np.isnan(want[0]).any()
    model = encoder(B, H, H, S, S, D, mask="row")
    feeds = feeds_for(model)
    feeds["mask"][1] = FMIN
    want = check(model, True, feeds)[0]
    uniform = np.broadcast_to(feeds["v"][1].mean(axis=1).reshape(-1), (S, H * D))
    np.testing.assert_allclose(want[1], uniform, rtol=1e-4, atol=1e-5)


def test_large_logits():
    # Scores of about +-1000: the max taken out before exp, as Softmax does (a score's
    # rounding, 1e-7 of it, moves the weights by 1e-4: V of unit scale, atol to match).
    model = encoder(1, 4, 4, 128, 128, 64, mask="row")
    feeds = feeds_for(model)
    feeds["q"] *= 15
    feeds["k"] *= 15
    check(model, True, feeds, atol=1e-3)


def test_scale_muls_are_taken_in_only_where_the_product_alone_reads_them():
    model = encoder(1, 6, 6, 197, 197, 64)
    check(model, True, kinds_want={"attention": 1})
    # Q's scaled value is also a graph output: that Mul stays a step of its own, and
    # the product reads its result; K^T's Mul is still taken in.
    check(encoder(1, 6, 6, 197, 197, 64, shared_q=True), True, kinds_want={"attention": 1, "pointwise": 1})


@pytest.mark.parametrize(
    "B,Hq,Sq,T,D,mask",
    [
        (1, 12, 64, 64, 32, None),  # 2^18 per head: the packing and rows cost more than the step saves
        (1, 12, 32, 32, 64, "row"),  # 2^17
        (2, 4, 17, 17, 16, "row"),  # 17 tokens
        (1, 4, 199, 199, 16, None),  # heads of 16 (HuBERT's): 16-deep Q K^T tiles, 8-lane P V
    ])
def test_small_heads_stay_on_the_separate_steps(B, Hq, Sq, T, D, mask):
    # (One query against many keys, decode, runs on the step's decode kernels:
    # test_attention_decode.py.)
    check(encoder(B, Hq, Hq, Sq, T, D, mask=mask), False)
