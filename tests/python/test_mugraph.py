"""`isomer optimize --mugraph`: fused regions are written as model-local functions in
domain ai.isomer.mugraph whose bodies are the original subgraphs, so the model
passes onnx.checker and ONNX Runtime (which inlines them) computes what the
original computes; isomer runs the compiled kernels, rebuilding an empty kernel
cache. (--mugraph-untimed keeps every verified kernel, so the test does not depend
on a timing; no test here asserts a speed.)"""
import json
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")


def small_block(path):
    """RMSNorm -> projection, and a causal softmax attention over the projection."""
    rng = np.random.default_rng(0)
    d, s = 32, 24
    mask = np.triu(np.full((s, s), -1e9, dtype=np.float32), 1)[None]
    inits = [numpy_helper.from_array(rng.uniform(-0.3, 0.3, (d, d)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, (d,)).astype(np.float32), "gamma"),
             numpy_helper.from_array(np.array(2, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(np.array(0.18, np.float32), "scale"),
             numpy_helper.from_array(mask, "mask")]
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]),
             helper.make_node("Sqrt", ["mse"], ["rms"]),
             helper.make_node("Div", ["x", "rms"], ["xn"]),
             helper.make_node("Mul", ["xn", "gamma"], ["xg"]),
             helper.make_node("MatMul", ["xg", "w"], ["h"]),
             helper.make_node("Transpose", ["h"], ["ht"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["h", "ht"], ["sc"]),
             helper.make_node("Mul", ["sc", "scale"], ["scs"]),
             helper.make_node("Add", ["scs", "mask"], ["scm"]),
             helper.make_node("Softmax", ["scm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "h"], ["y"])]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)
    return rng.standard_normal((1, s, d)).astype(np.float32)


@pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")
def test_optimize_mugraph_writes_portable_functions(tmp_path):
    src, out, rep = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx"), str(tmp_path / "r.json")
    x = small_block(src)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), ISOMER_MUGRAPH_NO_MEASURE="1")
    p = subprocess.run([ISOMER, "optimize", src, "-o", out, "--mugraph", "--mugraph-untimed", "--mugraph-seconds",
                        "1", "--no-guard", "--cost", "none", "--threads", "1", "--report-json", rep],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "mugraph:" in p.stdout, p.stdout
    r = json.load(open(rep))
    assert r["rules_applied"].get("mugraph-fuse", 0) >= 1, r["mugraph"]
    assert r["check"] == "passed"

    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    funcs = [f for f in m.functions if f.domain == "ai.isomer.mugraph"]
    assert funcs and all(len(f.node) >= 3 for f in funcs)
    assert any(o.domain == "ai.isomer.mugraph" for o in m.opset_import)
    calls = [n for n in m.graph.node if n.domain == "ai.isomer.mugraph"]
    assert len(calls) == r["rules_applied"]["mugraph-fuse"]

    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    # isomer's runtime runs the kernels; the cache was emptied, so it is rebuilt.
    kernels = tmp_path / "cache" / "isomer" / "kernels"
    for f in kernels.glob("*"):
        f.unlink()
    np.save(tmp_path / "x.npy", x)
    steps = subprocess.run([ISOMER, "run", out, "--print-steps"], capture_output=True, text=True, timeout=300,
                           env=env)
    assert steps.returncode == 0, steps.stderr
    assert "mugraph" in steps.stdout, steps.stdout
    assert any(kernels.glob("*.so")), list(kernels.glob("*"))


@pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")
def test_optimize_mugraph_same_model_same_kernels(tmp_path):
    """The search is bounded by --mugraph-states, not the clock: two runs choose the
    same kernels, and the report names the state limit as what stopped a loop choice."""
    import re
    src = str(tmp_path / "in.onnx")
    small_block(src)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), ISOMER_MUGRAPH_NO_MEASURE="1")
    texts, models = [], []
    for run in range(2):
        out, rep = str(tmp_path / f"out{run}.onnx"), str(tmp_path / f"r{run}.json")
        p = subprocess.run([ISOMER, "optimize", src, "-o", out, "--mugraph", "--mugraph-untimed", "--mugraph-states",
                            "200", "--mugraph-seconds", "300", "--no-guard", "--cost", "none", "--threads", "1",
                            "--report-json", rep], capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        texts.append(re.sub(r"in [0-9.]+ s", "", json.load(open(rep))["mugraph"]))
        m = onnx.load(out)
        models.append([(n.op_type, n.domain, [a.SerializeToString() for a in n.attribute]) for n in m.graph.node])
    assert "state limit" in texts[0], texts[0]
    assert "time limit" not in texts[0], texts[0]
    assert texts[0] == texts[1]
    assert models[0] == models[1]


def test_python_optimize_takes_the_mugraph_options(tmp_path, monkeypatch):
    """isomer.optimize(mugraph=True, ...) runs the same μGraph pass as the CLI flags."""
    isomer = pytest.importorskip("isomer")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    src = str(tmp_path / "in.onnx")
    x = small_block(src)
    model, report = isomer.optimize(src, mugraph=True, mugraph_untimed=True, mugraph_states=200,
                                    mugraph_seconds=300, guard=False, cost="none", threads=1)
    r = report.to_dict()
    assert r["rules_applied"].get("mugraph-fuse", 0) >= 1, r.get("mugraph")
    assert "state limit" in r["mugraph"], r["mugraph"]
    onnx.checker.check_model(model, full_check=True)
    assert any(f.domain == "ai.isomer.mugraph" for f in model.functions)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    _, plain = isomer.optimize(src, guard=False, cost="none", threads=1)
    plain = plain.to_dict()
    assert plain["rules_applied"].get("mugraph-fuse", 0) == 0
    with pytest.raises(TypeError):
        isomer.optimize(src, mugraph=True, mugraph_states=1.5)
