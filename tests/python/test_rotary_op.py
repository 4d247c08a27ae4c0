"""ONNX RotaryEmbedding (opset 23) as a native operator: isomer's reference semantics and
its runtime against the outputs onnx's own node tests expect (every case the installed
onnx package generates) and against ONNX Runtime on random models; the runtime runs it
as its own step (no ONNX Runtime delegation); `isomer optimize` keeps the node; a bad
node is refused with the reason."""
import os
import subprocess
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
TOL = dict(rtol=1e-5, atol=1e-5)


def _cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.case.node import collect_testcases

        # (onnx keeps one list across calls: after another test module's collect_testcases it holds
        # that operator's cases too)
        return [c for c in collect_testcases("RotaryEmbedding") if "expanded" not in c.name
                and any(n.op_type == "RotaryEmbedding" for n in c.model.graph.node)]


CASES = {c.name: c for c in _cases()}


def _assert_outputs(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what} output {k}: {g.shape} vs {w.shape}"
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), err_msg=f"{what} output {k}", **TOL)


@pytest.mark.parametrize("name", sorted(CASES))
def test_onnx_node_case_reference_and_runtime(name):
    case = CASES[name]
    inputs, want = case.data_sets[0]
    feeds = dict(zip([i.name for i in case.model.graph.input], inputs))
    _assert_outputs(isomer.run(case.model, feeds, engine="reference"), want, "reference")
    _assert_outputs(isomer.run(case.model, feeds, engine="runtime", threads=1), want, "runtime")


def rotary_model(x_shape, attrs, positions, max_pos=64, seed=0):
    """Linear projection, RotaryEmbedding with constant caches, a second projection (so the
    node reads a computed value and feeds one)."""
    rng = np.random.default_rng(seed)
    heads_first = len(x_shape) == 4
    b, s = (x_shape[0], x_shape[2]) if heads_first else x_shape[:2]
    head = x_shape[3] if heads_first else x_shape[2] // attrs["num_heads"]
    rot = attrs.get("rotary_embedding_dim", 0) or head
    max_pos = max(max_pos, s)  # ONNX Runtime wants a cache row for every position of the sequence
    angles = rng.uniform(0, 6.3, (max_pos if positions else b * s, rot // 2)).astype(np.float32)
    cache_shape = (max_pos, rot // 2) if positions else (b, s, rot // 2)
    inits = [numpy_helper.from_array(np.cos(angles).reshape(cache_shape), "cos"),
             numpy_helper.from_array(np.sin(angles).reshape(cache_shape), "sin"),
             numpy_helper.from_array((rng.standard_normal((x_shape[-1], x_shape[-1])) * 0.3).astype(np.float32), "w")]
    ins = ["xw", "cos", "sin"] + (["pos"] if positions else [])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("RotaryEmbedding", ins, ["r"], name="rope", **attrs),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))]
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if positions:
        inputs.append(helper.make_tensor_value_info("pos", TensorProto.INT64, [b, s]))
        feeds["pos"] = rng.integers(0, max_pos, (b, s)).astype(np.int64)
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape))],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]), feeds


RANDOM = {
    "heads_first_positions": ((2, 4, 24, 32), {}, True),
    "heads_first_partial_interleaved": ((1, 2, 17, 64), {"rotary_embedding_dim": 16, "interleaved": 1}, True),
    "hidden_3d_positions": ((2, 9, 96), {"num_heads": 3}, True),
    "hidden_3d_no_positions_partial": ((2, 5, 64), {"num_heads": 2, "rotary_embedding_dim": 8}, False),
    "many_rows": ((2, 8, 256, 64), {}, True),  # enough work for two threads
}


@pytest.mark.parametrize("name", sorted(RANDOM))
def test_runtime_step_matches_onnxruntime(name):
    shape, attrs, positions = RANDOM[name]
    model, feeds = rotary_model(shape, attrs, positions, seed=len(name))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    _assert_outputs(isomer.run(model, feeds, engine="reference"), want, "reference")
    for threads in (1, 2):
        _assert_outputs(isomer.run(model, feeds, engine="runtime", threads=threads), want, f"runtime t{threads}")


def test_optimize_keeps_the_node_and_runs_it_natively(tmp_path):
    model, feeds = rotary_model((1, 4, 16, 32), {}, True)
    src, dst = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(model, src)
    p = subprocess.run([ISOMER, "optimize", src, "-o", dst, "--threads", "1"], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert [n.op_type for n in out.graph.node].count("RotaryEmbedding") == 1
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(got[0], want[0], **TOL)
    p = subprocess.run([ISOMER, "run", dst, "--no-onnxruntime", "--print-steps"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr + p.stdout
    assert "RotaryEmbedding" in p.stdout and "reference" not in p.stdout, p.stdout


def test_position_outside_the_caches_is_an_error(tmp_path):
    model, feeds = rotary_model((1, 2, 4, 8), {}, True, max_pos=6)
    feeds["pos"][0, 2] = 6
    with pytest.raises(Exception, match="position 6 is outside the caches' 6 rows"):
        isomer.run(model, feeds, engine="runtime", threads=1)


def test_bad_cache_width_is_refused(tmp_path):
    model, _ = rotary_model((1, 2, 4, 8), {}, True)  # caches of 4 columns, for all 8 values
    model.graph.node[1].attribute.append(helper.make_attribute("rotary_embedding_dim", 4))
    path = str(tmp_path / "bad.onnx")
    onnx.save(model, path)
    p = subprocess.run([ISOMER, "show", path], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "rope" in p.stderr and "cos_cache" in p.stderr, p.stderr
