"""`isomer run` on models with operators isomer does not know (opaque nodes).

The issue's contract: such a model runs through ONNX Runtime when it is
available, else it is reported, clearly, as not runnable on the isomer runtime.
Opaque nodes run on ONNX Runtime node by node inside isomer's runtime; a node
whose output shapes depend on its data makes the whole model run on ONNX Runtime.
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=120, env=e)


def opaque_model(path, batch=2):
    """Relu -> Shrink -> Hardmax -> Sigmoid: two operators isomer lacks between two it
    runs, opset 17. `batch` may be a symbolic dim name."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Shrink", ["r"], ["e"]),
        helper.make_node("Hardmax", ["e"], ["c"], axis=-1),
        helper.make_node("Sigmoid", ["c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "opaque", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3, 4])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    onnx.save(m, path)


def data_dependent_model(path):
    """Relu -> NonZero -> Cast: NonZero's output shape depends on the values."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, None])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def refused_attention_model(path):
    """An ONNX Attention node (an operator isomer knows) whose 3 query heads are not a
    multiple of its 2 key/value heads: the importer keeps it opaque, for that reason.
    The batch is symbolic, so the model is not rejected as wrong on known shapes."""
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, ["b", 3, 4, 8])
    k = helper.make_tensor_value_info("k", TensorProto.FLOAT, ["b", 2, 4, 8])
    v = helper.make_tensor_value_info("v", TensorProto.FLOAT, ["b", 2, 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", 3, 4, 8])
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn")
    graph = helper.make_graph([node], "attn", [q, k, v], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10), path)


def custom_op_model(path):
    """Relu -> a node of an operator domain nobody knows -> Sigmoid."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Frobnicate", ["r"], ["f"], name="frob", domain="com.example"),
             helper.make_node("Sigmoid", ["f"], ["y"])]
    graph = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                                ir_version=8), path)


ATTN_WHY = "the 3 query heads are not a multiple of the 2 key/value heads"


def test_run_without_onnxruntime_says_why_a_known_operator_is_opaque(tmp_path):
    path = str(tmp_path / "attn.onnx")
    refused_attention_model(path)
    p = isomer("run", path, "--no-onnxruntime")
    assert p.returncode != 0
    assert f"'{path}' is not runnable on the isomer runtime: node 'attn' (Attention) is kept opaque: {ATTN_WHY}" \
        in p.stderr, p.stderr
    assert "does not understand" not in p.stderr, p.stderr


def test_run_without_onnxruntime_says_an_unknown_operator_is_not_understood(tmp_path):
    path = str(tmp_path / "custom.onnx")
    custom_op_model(path)
    p = isomer("run", path, "--no-onnxruntime")
    assert p.returncode != 0
    assert (f"'{path}' is not runnable on the isomer runtime: node 'frob' (Frobnicate) is an operator isomer does "
            "not understand (operator of domain 'com.example')") in p.stderr, p.stderr


def test_optimize_reports_why_each_node_is_opaque(tmp_path):
    path, out = str(tmp_path / "attn.onnx"), str(tmp_path / "o.onnx")
    refused_attention_model(path)
    p = isomer("optimize", path, "-o", out, "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    assert f"isomer optimize {path} -> {out}" in p.stdout, p.stdout
    assert f"    opaque: node 'attn' (Attention): {ATTN_WHY}\n" in p.stdout, p.stdout
    r = json.load(open(tmp_path / "r.json"))
    assert r["opaque_reasons"] == [f"node 'attn' (Attention): {ATTN_WHY}"], r


def test_delegated_run_names_the_operator_isomer_does_not_understand(tmp_path):
    path = str(tmp_path / "custom.onnx")
    custom_op_model(path)
    # ONNX Runtime has no com.example domain either: the message says which node,
    # why isomer keeps it opaque, and what ONNX Runtime said.
    p = isomer("run", path, env={"ISOMER_PYTHON": sys.executable})
    assert p.returncode != 0
    assert f"'{path}' is not runnable on the isomer runtime: node 'frob' (Frobnicate) is an operator isomer " \
        "does not understand (operator of domain 'com.example'); ONNX Runtime" in p.stderr, p.stderr


def test_opaque_nodes_run_on_onnxruntime_inside_the_isomer_runtime(tmp_path):
    path = str(tmp_path / "m.onnx")
    opaque_model(path)
    x = np.random.default_rng(4).uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"), "--bench",
               "--repeat", "3", "--threads", "1", "--report-json", str(tmp_path / "r.json"), "--print-steps")
    assert p.returncode == 0, p.stderr
    assert "not runnable" not in p.stdout, p.stdout
    # The two opaque nodes are adjacent: one step, one ONNX Runtime session.
    assert f"1 steps run on ONNX Runtime {ort.__version__}, for the nodes isomer keeps opaque:" in p.stdout, p.stdout
    assert "    node (Shrink) is an operator isomer does not understand\n" in p.stdout, p.stdout
    assert "    node (Hardmax) is an operator isomer does not understand\n" in p.stdout, p.stdout
    kinds = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("  ") and len(line.split()) >= 2
             and line.split()[0] in ("pointwise", "onnxruntime", "reference")]
    assert kinds == ["pointwise", "onnxruntime", "pointwise"], p.stdout
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-6, atol=1e-6)
    r = json.load(open(tmp_path / "r.json"))
    assert r["engine"] == "isomer" and r["repeats"] == 3 and r["threads"] == 1 and r["onnxruntime_steps"] == 1
    assert r["latency_ms_min"] <= r["latency_ms_median"] <= r["latency_ms_max"]
    assert r["onnxruntime"]["outputs"]["status"] == "passed"


def test_opaque_nodes_follow_the_input_shape_given(tmp_path):
    # A symbolic batch: the delegated nodes are planned at the shape the inputs have.
    path = str(tmp_path / "m.onnx")
    opaque_model(path, batch="N")
    x = np.random.default_rng(5).uniform(-1, 1, (7, 3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    assert p.returncode == 0, p.stderr
    assert "1 steps run on ONNX Runtime" in p.stdout, p.stdout
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = np.load(tmp_path / "out.npz")["y"]
    assert got.shape == (7, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_output_shapes_that_depend_on_data_run_the_tail_on_onnxruntime(tmp_path):
    """The Relu before NonZero runs on the isomer runtime, NonZero and what follows on
    ONNX Runtime as one model (tests/python/test_exports_s26.py has the detector case)."""
    path = str(tmp_path / "nz.onnx")
    data_dependent_model(path)
    x = np.array([[1, -1, 2], [0, 3, -4]], np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"))
    assert p.returncode == 0, p.stderr
    assert "not runnable whole on the isomer runtime" in p.stdout and "NonZero" in p.stdout, p.stdout
    assert "output shapes depend on the data" in p.stdout, p.stdout
    assert "1 nodes run on the isomer runtime" in p.stdout and "ONNX Runtime" in p.stdout, p.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], [[0, 0, 1], [0, 2, 1]])  # relu(x) != 0


def test_optimize_prices_models_with_opaque_nodes(tmp_path):
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    opaque_model(path)
    p = isomer("optimize", path, "-o", out, "--report-json", str(tmp_path / "r.json"), "--cost-db",
               str(tmp_path / "c.sqlite"))
    assert p.returncode == 0, p.stderr
    r = json.load(open(tmp_path / "r.json"))
    assert r["cost_before_ms"] > 0 and r["cost_after_ms"] > 0 and r["check"] == "passed"


def test_opaque_model_random_inputs_are_the_seeded_ones(tmp_path):
    path = str(tmp_path / "m.onnx")
    opaque_model(path)
    a = isomer("run", path, "--seed", "7", "--outputs", str(tmp_path / "a.npz"))
    b = isomer("run", path, "--seed", "7", "--outputs", str(tmp_path / "b.npz"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert "seed 7" in a.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["y"], np.load(tmp_path / "b.npz")["y"])


def test_opaque_model_without_onnxruntime_is_reported_not_runnable(tmp_path):
    path = str(tmp_path / "m.onnx")
    opaque_model(path)
    # No interpreter with onnxruntime: a clear error, no output file, no crash.
    p = isomer("run", path, "--outputs", str(tmp_path / "out.npz"), env={"ISOMER_PYTHON": "/nonexistent/python"})
    assert p.returncode != 0
    assert "isomer: error:" in p.stderr, p.stderr
    assert "not runnable on the isomer runtime" in p.stderr and "Shrink" in p.stderr, p.stderr
    assert "ONNX Runtime is not available" in p.stderr, p.stderr
    assert "ONNX Runtime could not run it" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "out.npz")
    # And when delegation is switched off.
    q = isomer("run", path, "--no-onnxruntime")
    assert q.returncode != 0 and "not runnable on the isomer runtime" in q.stderr, q.stderr


def training_dropout_model(path, ratio):
    """Transpose -> Transpose back (a rewrite removes both) -> Dropout with training_mode
    true and the given ratio -> Relu, opset 23: what torch's exporter writes for the
    dropouts of a module exported in training mode (without .eval())."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[1, 0, 2]),
        helper.make_node("Dropout", ["u", "ratio", "training"], ["d"], name="drop"),
        helper.make_node("Relu", ["d"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(ratio, np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "training")]
    graph = helper.make_graph(nodes, "dropout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8, 16])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]), path)


def optimize_training_dropout(tmp_path, ratio, *flags):
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    training_dropout_model(path, ratio)
    p = isomer("optimize", path, "-o", out, *flags)
    assert p.returncode == 0, p.stdout + p.stderr
    return path, out, p


def test_a_dropout_in_training_mode_is_random_so_optimize_keeps_the_original(tmp_path):
    # The rewrite cannot be compared with a model that drops at random: the original is
    # written, and said why, instead of a check that fails on the randomness.
    path, out, p = optimize_training_dropout(tmp_path, 0.3)
    assert "check: skipped: node 'drop' (Dropout) drops at random (training mode)" in p.stdout, p.stdout
    assert "kept: original" in p.stdout, p.stdout
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert [n.op_type for n in written.graph.node] == ["Transpose", "Transpose", "Dropout", "Relu"]
    # `run --bench` says the outputs were not compared, and succeeds.
    p = isomer("run", path, "--bench", "--repeat", "2")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "outputs not compared with ONNX Runtime's: node 'drop' (Dropout) drops at random" in p.stdout, p.stdout


def test_a_dropout_in_training_mode_with_ratio_zero_is_the_identity_and_optimized(tmp_path):
    # No guard: this is about the check and the rewrite; a model of microseconds on a
    # busy machine times "the same" in a band too wide to write it (test_optimize_guard.py).
    _, out, p = optimize_training_dropout(tmp_path, 0.0, "--no-guard")
    assert "check: passed" in p.stdout, p.stdout
    assert "Transpose" not in [n.op_type for n in onnx.load(out).graph.node]


def test_run_draws_random_indices_within_the_axis_they_index(tmp_path):
    """BERT's token_type_ids index a table of 2 rows: run's random inputs must stay
    within it, as optimize's check draws them (they were integers in [0, 4))."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Gather", ["words", "input_ids"], ["w"]),
             helper.make_node("Gather", ["types", "token_type_ids"], ["t"]),
             helper.make_node("Add", ["w", "t"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((50, 8)).astype(np.float32), "words"),
             numpy_helper.from_array(rng.standard_normal((2, 8)).astype(np.float32), "types")]
    ids = [helper.make_tensor_value_info(n, TensorProto.INT64, [1, 16]) for n in ("input_ids", "token_type_ids")]
    graph = helper.make_graph(nodes, "bert_embeddings", ids, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8])],
                              inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    for seed in ("0", "1", "2"):
        p = isomer("run", path, "--seed", seed, "--bench", "--repeat", "2", "--outputs", str(tmp_path / "o.npz"))
        assert p.returncode == 0, p.stdout + p.stderr
        assert "outputs match ONNX Runtime's" in p.stdout, p.stdout


def test_a_dropout_in_training_mode_runs_on_isomers_own_kernel(tmp_path):
    # It was delegated to ONNX Runtime node by node (a round trip to the helper
    # process each); the runtime draws its masks itself, without ONNX Runtime.
    path = str(tmp_path / "m.onnx")
    training_dropout_model(path, 0.25)
    p = isomer("run", path, "--print-steps", "--no-onnxruntime", "--outputs", str(tmp_path / "o.npz"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "onnxruntime" not in p.stdout and "random" in p.stdout, p.stdout
    y = np.load(str(tmp_path / "o.npz"))["y"]
    # Relu of x / 0.75 where kept: about a quarter of the elements are exactly 0 more
    # than Relu alone makes (x is uniform in [-1, 1]: about half are negative).
    assert 0.52 < float(np.mean(y == 0)) < 0.73, float(np.mean(y == 0))  # 0.625 expected, 512 elements


def test_unsqueeze_with_a_0d_axes_tensor_runs_natively(tmp_path):
    """torch 2.15's dynamo exporter writes Unsqueeze(x, axes) with a 0-d axes tensor
    for scaled_dot_product_attention(enable_gqa=True); ONNX Runtime reads it as one
    axis. It was kept opaque, and a LLaMA decode step ran 3x ONNX Runtime's time."""
    nodes = [helper.make_node("Unsqueeze", ["x", "axis"], ["u"]), helper.make_node("Relu", ["u"], ["y"])]
    graph = helper.make_graph(nodes, "u0d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 3, 4])],
                              [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    path, out = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    p = isomer("run", path, "--bench", "--repeat", "2", "--print-steps")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "onnxruntime " not in p.stdout and "outputs match ONNX Runtime's" in p.stdout, p.stdout
    # Written back, the axes are the 1-D tensor the standard asks for.
    p = isomer("optimize", path, "-o", out, "--no-guard")
    assert p.returncode == 0, p.stdout + p.stderr
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)


def test_open_dims_that_the_model_contradicts_are_named_with_how_to_set_them(tmp_path):
    """A TorchScript export with dynamic axes on x only (its initial state static, as
    torch writes it) cannot run at the extent 1 random inputs give an open dim; the
    error names the extents taken and the flag that sets them, which then works."""
    nodes = [helper.make_node("Concat", ["x", "h"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "open", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
                                              helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 7])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    p = isomer("run", path)
    assert p.returncode == 1 and p.stderr.count("isomer: error:") == 1, p.stdout + p.stderr
    assert "took the open input dims as batch=1" in p.stderr and "--input-shape" in p.stderr, p.stderr
    p = isomer("run", path, "--input-shape", "x:2,3")
    assert p.returncode == 0, p.stdout + p.stderr
