"""Decode attention (a few query rows per key head against a KV cache) on the
attention step's decode kernels (src/runtime/lower_attention_decode.cpp), as exporters
decompose it (MatMul, scale, mask, Softmax, MatMul, with repeat_kv for grouped-query
heads): outputs against ONNX Runtime at odd shapes (key counts that fill no block,
heads that fill no vector, batch 2, multi-query, masks float and bool, fully masked
rows, large logits), the step's signature naming the decode kernels where the cost
rule takes them, and the separate steps kept where it does not (many rows per key
head against many keys, or too few keys).
"""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

from test_attention_chain import first_output_matches_onnxruntime, repeated_kv, scaled_scores  # noqa: E402


def decode(B, Hq, Hk, Sq, T, D, Dv=None, mask=None, scale="div"):
    """Q [B, Hq, Sq, D] against K and V [B, Hk, T, D|Dv] (repeat_kv as torch exports
    it), mask "add" (float [B, 1, Sq, T] input), "where" (bool [B, 1, Sq, T] input in
    Where(keep, S, -inf)), or None; scale "div" (after the product) or "qk" (on Q and
    on K^T)."""
    Dv = Dv or D
    ins = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [B, Hq, Sq, D]),
           helper.make_tensor_value_info("k", TensorProto.FLOAT, [B, Hk, T, D]),
           helper.make_tensor_value_info("v", TensorProto.FLOAT, [B, Hk, T, Dv])]
    nodes, inits = ([], []) if Hk == Hq else repeated_kv([B], Hq, Hk, T, D, Dv)
    k, v = ("k", "v") if Hk == Hq else ("kr", "vr")
    x = scaled_scores(nodes, inits, k, D, scale, [0, 1, 3, 2])
    if mask == "add":
        ins.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [B, 1, Sq, T]))
        nodes.append(helper.make_node("Add", [x, "m"], ["xm"]))
        x = "xm"
    elif mask == "where":
        ins.append(helper.make_tensor_value_info("m", TensorProto.BOOL, [B, 1, Sq, T]))
        inits.append(numpy_helper.from_array(np.array(-np.inf, np.float32), "ninf"))
        nodes.append(helper.make_node("Where", ["m", x, "ninf"], ["xm"]))
        x = "xm"
    nodes += [helper.make_node("Softmax", [x], ["p"], axis=-1), helper.make_node("MatMul", ["p", v], ["y"])]
    graph = helper.make_graph(nodes, "decode", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def feeds_for(model, seed=0, logit=1.0):
    rng = np.random.default_rng(seed)
    out = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if i.name == "m":
            keep = rng.random(shape) > 0.3
            keep[..., 0, -1] = True  # every row keeps a key unless a test says otherwise
            elem = i.type.tensor_type.elem_type
            out["m"] = keep if elem == TensorProto.BOOL else np.where(keep, rng.standard_normal(shape), -np.inf).astype(np.float32)
        else:
            out[i.name] = (rng.standard_normal(shape) * (logit if i.name == "q" else 1.0)).astype(np.float32)
    return out


def signatures(tmp_path, model, feeds):
    """The attention steps' signatures, from `isomer run --profile` on the given inputs."""
    path, npz, rep = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "r.json"
    onnx.save(model, str(path))
    np.savez(str(npz), **feeds)
    exe = os.environ.get("ISOMER_BIN") or os.path.join(os.environ.get("ISOMER_BUILD_DIR", "build"), "isomer")
    p = subprocess.run([exe, "run", str(path), "--inputs", str(npz), "--threads", "1", "--no-onnxruntime", "--profile",
                        "--report-json", str(rep)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    profile = json.load(open(rep))["profile"]
    kinds = {s["kind"] for s in profile}
    return [s["signature"] for s in profile if s["kind"] == "attention"], kinds


def check(tmp_path, model, decode_taken, feeds=None):
    feeds = feeds or feeds_for(model)
    got = first_output_matches_onnxruntime(model, feeds)
    sigs, kinds = signatures(tmp_path, model, feeds)
    if decode_taken:
        assert len(sigs) == 1 and sigs[0].startswith("attention-decode "), (sigs, kinds)
        assert "softmax" not in kinds and "matmul" not in kinds, kinds
    else:
        assert not any(s.startswith("attention-decode") for s in sigs), sigs
    return got


@pytest.mark.parametrize(
    "B,Hq,Hk,Sq,T,D,Dv,mask,scale",
    [
        (1, 8, 8, 1, 1000, 64, 64, None, "div"),  # multi-head decode: 1000 keys fill no block
        (2, 6, 3, 1, 777, 40, 24, "add", "qk"),  # GQA 2, batch 2, heads that fill no vector
        (1, 6, 3, 1, 2049, 64, 64, "where", "div"),  # Where(keep, S, -inf), one key past a block
        (1, 8, 2, 1, 1024, 64, 64, None, "qk"),  # LLaMA's 8/2 heads: 4 rows per key head
        (2, 4, 1, 1, 300, 32, 32, "add", "div"),  # multi-query: one KV head expanded, 4 rows
        (1, 4, 4, 3, 200, 48, 48, "add", "div"),  # 3 queries (speculative decoding), a mask per query
        (1, 4, 2, 2, 65, 16, 16, None, "qk"),  # 2 x 2 rows against 65 keys
        # Work for two threads on three heads: each head's keys in two ranges, merged.
        (1, 3, 3, 1, 11000, 128, 128, "add", "div"),
    ])
def test_decode_runs_on_the_decode_kernels(tmp_path, B, Hq, Hk, Sq, T, D, Dv, mask, scale):
    check(tmp_path, decode(B, Hq, Hk, Sq, T, D, Dv, mask=mask, scale=scale), True)


def test_a_row_with_every_key_masked_is_nan_as_softmax_makes_it(tmp_path):
    model = decode(2, 4, 2, 1, 600, 64, mask="where")
    feeds = feeds_for(model)
    feeds["m"][1] = False
    got = check(tmp_path, model, True, feeds)
    assert np.isnan(got[1]).all() and not np.isnan(got[0]).any()


def test_large_logits_are_exact(tmp_path):
    # Scores in the thousands: each block's and each range's max shifts its exponents.
    model = decode(1, 8, 8, 1, 1500, 64, mask="add")
    check(tmp_path, model, True, feeds_for(model, logit=40.0))


@pytest.mark.parametrize(
    "Hq,Hk,Sq,T",
    [
        (16, 2, 1, 1024),  # 8 rows per key head against 1024 keys: the products share K^T among them
        (8, 8, 1, 32),  # too few keys
    ])
def test_left_to_separate_steps_where_the_decode_kernels_save_nothing(tmp_path, Hq, Hk, Sq, T):
    check(tmp_path, decode(1, Hq, Hk, Sq, T, 64), False)
