"""Grouped-query attention's K and V heads repeated for each query head (torch's
repeat_kv: Unsqueeze, Expand or Tile, a Reshape merging the KV and repeat axes) are
read in place by the products on isomer's runtime, never copied per query head, and
the outputs are the reference evaluator's: odd head ratios, a decode row and 17
rows, batch 2, query heads read as a view of [batch, seq, heads, d], the sdpa
export's 3-D Reshape and scale on both operands, and a repeated head that is also a
graph output (that one copy is made), and a causal mask after the scores."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")

pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def i64(name, values):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def gqa(b, h, kv, s, t, d, *, tile=False, q_rows=False, sdpa=False, k_out=False, mask=False):
    """softmax(q k^T / sqrt(d)) v with k and v of kv heads repeated h / kv times."""
    r = h // kv
    f = TensorProto.FLOAT
    inits = [i64("ax2", [2]), i64("rep_shape", [b, kv, r, t, d]), i64("heads", [b, h, t, d]),
             i64("tile_reps", [1, 1, r, 1, 1]), i64("flat", [b * h, t, d]), i64("heads_t", [b, h, d, t]),
             i64("q_shape", [b, s, h, d]), helper.make_tensor("scale", f, [], [1 / np.sqrt(d)]),
             helper.make_tensor("root", f, [], [d ** -0.25])]
    nodes = []
    for x in ("k", "v"):
        nodes.append(helper.make_node("Unsqueeze", [x, "ax2"], [x + "_u"]))
        nodes.append(helper.make_node("Tile", [x + "_u", "tile_reps"], [x + "_e"]) if tile else
                     helper.make_node("Expand", [x + "_u", "rep_shape"], [x + "_e"]))
        nodes.append(helper.make_node("Reshape", [x + "_e", "heads"], [x + "_r"]))
    if q_rows:  # q as a projection's output [b, s, h * d], heads a transposed view
        q_in = helper.make_tensor_value_info("q", f, [b, s, h * d])
        nodes += [helper.make_node("Reshape", ["q", "q_shape"], ["q_4"]),
                  helper.make_node("Transpose", ["q_4"], ["q_h"], perm=[0, 2, 1, 3])]
    else:
        q_in = helper.make_tensor_value_info("q", f, [b, h, s, d])
        nodes.append(helper.make_node("Identity", ["q"], ["q_h"]))
    if sdpa:  # torch's sdpa export: K^T through a 3-D Reshape, both operands scaled
        nodes += [helper.make_node("Reshape", ["k_e", "flat"], ["k_3"]),
                  helper.make_node("Transpose", ["k_3"], ["k_3t"], perm=[0, 2, 1]),
                  helper.make_node("Reshape", ["k_3t", "heads_t"], ["k_t0"]),
                  helper.make_node("Mul", ["k_t0", "root"], ["k_t"]),
                  helper.make_node("Mul", ["q_h", "root"], ["q_s"]),
                  helper.make_node("MatMul", ["q_s", "k_t"], ["scores"])]
    else:
        nodes += [helper.make_node("Transpose", ["k_r"], ["k_t"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", ["q_h", "k_t"], ["qk"]),
                  helper.make_node("Mul", ["qk", "scale"], ["scores"])]
    if mask:  # a causal mask added to the scores, broadcast over batch and heads
        inits.append(helper.make_tensor("causal", f, [1, 1, s, t],
                                        np.where(np.tril(np.ones((s, t)), t - s) > 0, 0, -1e9).ravel().tolist()))
        nodes.append(helper.make_node("Add", ["scores", "causal"], ["masked"]))
    nodes += [helper.make_node("Softmax", ["masked" if mask else "scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v_r"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", f, [b, h, s, d])]
    if k_out:
        outputs.append(helper.make_tensor_value_info("k_r", f, [b, h, t, d]))
    graph = helper.make_graph(nodes, "gqa", [q_in, helper.make_tensor_value_info("k", f, [b, kv, t, d]),
                                              helper.make_tensor_value_info("v", f, [b, kv, t, d])],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CASES = {  # b, h, kv, s, t, d
    "decode_b1_6_over_2": (1, 6, 2, 1, 33, 16),
    "rows17_b2_6_over_2": (2, 6, 2, 17, 17, 16),
    "rows17_b2_10_over_2": (2, 10, 2, 17, 20, 8),
    "decode_b2_3_over_1": (2, 3, 1, 1, 7, 12),
    "rows5_b1_12_over_4": (1, 12, 4, 5, 40, 24),
}
FORMS = ["expand", "tile", "q_rows", "sdpa", "k_out", "mask"]


@pytest.mark.parametrize("gemm", ["onednn", "native"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_repeated_kv_heads_are_read_in_place_and_match_the_reference(case, form, gemm, tmp_path):
    b, h, kv, s, t, d = CASES[case]
    model = gqa(b, h, kv, s, t, d, tile=form == "tile", q_rows=form == "q_rows", sdpa=form == "sdpa",
                k_out=form == "k_out", mask=form == "mask")
    path = tmp_path / "gqa.onnx"
    onnx.save(model, path)
    rng = np.random.default_rng(b * 1000 + h * 100 + s)
    q_shape = (b, s, h * d) if form == "q_rows" else (b, h, s, d)
    feeds = {"q": rng.standard_normal(q_shape).astype(np.float32),
             "k": rng.standard_normal((b, kv, t, d)).astype(np.float32),
             "v": rng.standard_normal((b, kv, t, d)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    env = dict(os.environ, ISOMER_GEMM=gemm)
    for threads in ("1", "2"):
        p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                            str(tmp_path / "out.npz"), "--threads", threads, "--print-steps"],
                           capture_output=True, text=True, timeout=120, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        got = np.load(tmp_path / "out.npz")
        for o, w in zip(model.graph.output, want):
            np.testing.assert_allclose(got[o.name], w, rtol=1e-4, atol=1e-5, err_msg=o.name)
        # The repeated heads are copied only where a graph output needs them (the
        # K heads once); the products read K and V per KV head. (A mask after the
        # product may make the copy of K's heads the cheaper way: outputs only.)
        if form == "mask":
            continue
        copies = [line for line in p.stdout.splitlines() if line.split()[:2] == ["copy", "Copy"]]
        assert len(copies) == (1 if form == "k_out" else 0), p.stdout
