"""A mixture of experts' products with weights picked at run time run as one step.

transformers' batched-matmul MoE (GraniteMoE, Qwen3-MoE, DeepSeek-V3 exported with
dynamo) picks each token's expert matrix with GatherND (or Gather) from a constant
[E, P, Q] and multiplies it by the token with MatMul. isomer runs the pair as one
matmul step over each expert's matrix packed once, the tokens grouped by expert: no
gather step copies the picked matrices. Built here with onnx.helper at odd shapes,
compared with ONNX Runtime.
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")
F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def save(tmp_path, nodes, inputs, w):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", F, None)], [numpy_helper.from_array(w, "w")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    return path


def steps_of(stdout):
    return [line.split()[:2] for line in stdout.splitlines()
            if line.startswith("  ") and len(line.split()) >= 2 and not line.strip().startswith("output")]


def run_both(tmp_path, path, feeds, threads=1):
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([ISOMER, "run", path, "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--print-steps", "--threads", str(threads)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "reference kernels" not in p.stdout, p.stdout
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-4, atol=1e-4)
    return steps_of(p.stdout)


rng = np.random.default_rng(11)


def weights(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def experts(e, shape, dtype=np.int64):
    return rng.integers(-e, e, size=shape).astype(dtype)  # negative indices count from the end


@pytest.mark.parametrize("threads,cols", [(1, 1), (2, 1), (1, 9)])
def test_gather_nd_of_expert_matrices_times_tokens(tmp_path, threads, cols):
    """GraniteMoE's form: W[idx] @ x, one [P, Q] matrix per token, x as [T, Q, 1]
    (or Q x 9: columns of x at a stride)."""
    E, P, Q, T = 5, 37, 19, 13
    path = save(tmp_path, [helper.make_node("GatherND", ["w", "i"], ["g"]),
                           helper.make_node("MatMul", ["g", "x"], ["y"])],
                [("i", I64, [T, 1]), ("x", F, [T, Q, cols])], weights(E, P, Q))
    steps = run_both(tmp_path, path, {"i": experts(E, (T, 1)), "x": weights(T, Q, cols)}, threads)
    assert ["matmul", "GatherND+MatMul"] in steps and not any(s[0] in ("gather", "copy") for s in steps), steps


@pytest.mark.parametrize("rows", [3, 11])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_gather_then_product_on_the_right(tmp_path, rows, itype):
    """x @ W[idx] with several rows per picked matrix (11: a batch's rows read in place)."""
    E, P, Q, T = 4, 23, 45, 7
    path = save(tmp_path, [helper.make_node("Gather", ["w", "i"], ["g"], axis=0),
                           helper.make_node("MatMul", ["x", "g"], ["y"])],
                [("i", I64 if itype is np.int64 else I32, [T]), ("x", F, [T, rows, P])], weights(E, P, Q))
    steps = run_both(tmp_path, path, {"i": experts(E, (T,), itype), "x": weights(T, rows, P)})
    assert ["matmul", "Gather+MatMul"] in steps and not any(s[0] == "gather" for s in steps), steps


def test_transposed_expert_matrices(tmp_path):
    """x @ W[idx]^T (a Linear layer's [out, in] weights), through an identity Transpose too,
    as exporters without optimization write it."""
    E, P, Q, T = 3, 29, 17, 9
    path = save(tmp_path, [helper.make_node("GatherND", ["w", "i"], ["g"]),
                           helper.make_node("Transpose", ["g"], ["t0"], perm=[0, 1, 2]),
                           helper.make_node("Transpose", ["t0"], ["t"], perm=[0, 2, 1]),
                           helper.make_node("Identity", ["t"], ["t2"]),
                           helper.make_node("MatMul", ["x", "t2"], ["y"])],
                [("i", I64, [T, 1]), ("x", F, [T, 2, Q])], weights(E, P, Q))
    steps = run_both(tmp_path, path, {"i": experts(E, (T, 1)), "x": weights(T, 2, Q)})
    assert ["matmul", "GatherND+Transpose+Transpose+Identity+MatMul"] in steps, steps


def test_one_expert_for_all_tokens_broadcasts(tmp_path):
    """A scalar index picks one matrix that every batch of x multiplies."""
    E, P, Q = 6, 33, 21
    path = save(tmp_path, [helper.make_node("Gather", ["w", "i"], ["g"], axis=0),
                           helper.make_node("MatMul", ["x", "g"], ["y"])],
                [("i", I64, []), ("x", F, [2, 9, P])], weights(E, P, Q))
    steps = run_both(tmp_path, path, {"i": np.array(-2, np.int64), "x": weights(2, 9, P)})
    assert ["matmul", "Gather+MatMul"] in steps, steps


def test_picked_batches_broadcast_against_the_tokens(tmp_path):
    """Index [2, 1] picks [2, 1, P, Q]; x [2, 5, 3, P] broadcasts the pick over its 5."""
    E, P, Q = 4, 10, 12
    path = save(tmp_path, [helper.make_node("Gather", ["w", "i"], ["g"], axis=0),
                           helper.make_node("MatMul", ["x", "g"], ["y"])],
                [("i", I64, [2, 1]), ("x", F, [2, 5, 3, P])], weights(E, P, Q))
    steps = run_both(tmp_path, path, {"i": experts(E, (2, 1)), "x": weights(2, 5, 3, P)})
    assert ["matmul", "Gather+MatMul"] in steps, steps


def test_repeated_tokens_are_read_in_place(tmp_path):
    """Each token repeated for its top-2 experts (torch's repeat_interleave: Expand and a
    Reshape merging the repeat): the step reads the tokens where they lie, no copy."""
    E, P, Q, T = 4, 40, 24, 11
    shape = numpy_helper.from_array(np.array([T, 2, Q], np.int64), "shape")
    flat = numpy_helper.from_array(np.array([2 * T, Q, 1], np.int64), "flat")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
             helper.make_node("Expand", ["u", "shape"], ["r"]),
             helper.make_node("Reshape", ["r", "flat"], ["xs"]),
             helper.make_node("GatherND", ["w", "i"], ["g"]),
             helper.make_node("MatMul", ["g", "xs"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("i", I64, [2 * T, 1]),
                                           helper.make_tensor_value_info("x", F, [T, Q])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(weights(E, P, Q), "w"), shape, flat, axes])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    steps = run_both(tmp_path, path, {"i": experts(E, (2 * T, 1)), "x": weights(T, Q)})
    assert steps == [["matmul", "GatherND+MatMul"]], steps


@pytest.mark.parametrize("threads", [1, 2])
def test_experts_larger_than_the_cache(tmp_path, threads):
    """Matrices past half of L2 run in column blocks; 40 tokens over 3 experts."""
    E, P, Q, T = 3, 300, 1000, 40
    path = save(tmp_path, [helper.make_node("Gather", ["w", "i"], ["g"], axis=0),
                           helper.make_node("MatMul", ["x", "g"], ["y"])],
                [("i", I64, [T]), ("x", F, [T, 1, P])], weights(E, P, Q))
    steps = run_both(tmp_path, path, {"i": experts(E, (T,)), "x": weights(T, 1, P)}, threads)
    assert ["matmul", "Gather+MatMul"] in steps, steps


def test_picked_matrices_read_elsewhere_are_gathered(tmp_path):
    """The picked matrices are also a graph output: they are gathered, and the product
    runs on them as before."""
    E, P, Q, T = 3, 8, 6, 5
    graph = helper.make_graph([helper.make_node("GatherND", ["w", "i"], ["g"]),
                               helper.make_node("MatMul", ["g", "x"], ["y"])], "g",
                              [helper.make_tensor_value_info("i", I64, [T, 1]),
                               helper.make_tensor_value_info("x", F, [T, Q, 2])],
                              [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("g", F, None)],
                              [numpy_helper.from_array(weights(E, P, Q), "w")])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    steps = run_both(tmp_path, path, {"i": experts(E, (T, 1)), "x": weights(T, Q, 2)})
    assert ["gather", "GatherND"] in steps and ["matmul", "MatMul"] in steps, steps


def test_out_of_range_expert_is_one_clear_error(tmp_path):
    E, P, Q, T = 4, 8, 8, 3
    nodes = [helper.make_node("GatherND", ["w", "i"], ["g"], name="pick_expert"),
             helper.make_node("MatMul", ["g", "x"], ["y"])]
    path = save(tmp_path, nodes, [("i", I64, [T, 1]), ("x", F, [T, Q, 1])], weights(E, P, Q))
    np.savez(tmp_path / "in.npz", i=np.array([[0], [4], [1]], np.int64), x=weights(T, Q, 1))
    p = subprocess.run([ISOMER, "run", path, "--no-onnxruntime", "--inputs", str(tmp_path / "in.npz"), "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "pick_expert" in p.stderr and "out of range" in p.stderr and "Traceback" not in p.stderr, p.stderr
