"""`isomer optimize` on models whose inputs random values do not fit: indices,
shapes, axes, split sizes, divisors.

The check, the cost measurement and the guard run the model, so they need inputs
it can run on; isomer derives them from the consumers (src/check/inputs.h) or
takes the user's (--inputs IN.npz, inputs=). Where none can be made it skips
what needed them and says why; it never fails on a valid model.

The sweep runs every node test of Debian's libonnx-testdata that ONNX Runtime
runs, through isomer.optimize in this process (one ONNX Runtime helper for all),
on derived inputs, and requires that none fails.
"""
import glob
import json
import os
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import isomer  # noqa: E402

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
NODE_TESTS = "/usr/share/libonnx-testdata/data/node"


def run_cli(*args):
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=300)


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def case_inputs(case):
    model = onnx.load(os.path.join(case, "model.onnx"))
    inits = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    data = os.path.join(case, "test_data_set_0")
    return {n: load_pb(os.path.join(data, f"input_{k}.pb")) for k, n in enumerate(names)}


def ort_runs(case):
    """True when ONNX Runtime runs the model on its own test inputs."""
    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 4
        s = ort.InferenceSession(os.path.join(case, "model.onnx"), so, providers=["CPUExecutionProvider"])
        s.run(None, case_inputs(case))
        return True
    except Exception:  # noqa: BLE001 - not a case ONNX Runtime runs: not part of the contract
        return False


def run_ort(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


@pytest.mark.skipif(not os.path.isdir(NODE_TESTS), reason="no libonnx-testdata")
def test_optimize_never_fails_on_a_node_test_onnxruntime_runs():
    """Every node test ONNX Runtime runs: optimize does not fail, and the inputs
    isomer derives are ones ONNX Runtime runs the model on too (so the check
    and the guard of a model that optimize changed would run)."""
    failures, ran, no_inputs, bad_inputs = [], 0, [], []
    for case in sorted(glob.glob(os.path.join(NODE_TESTS, "test_*"))):
        if not os.path.exists(os.path.join(case, "test_data_set_0")) or not ort_runs(case):
            continue
        ran += 1
        name, path = os.path.basename(case), os.path.join(case, "model.onnx")
        try:
            isomer.optimize(path, cost="none", threads=1, allow_nonfinite=True)
        except isomer.Error as e:
            failures.append(f"{name}: {e}")
        try:
            feeds = isomer.valid_inputs(path)
        except isomer.Error as e:
            no_inputs.append(f"{name}: {e}")
            continue
        try:
            run_ort(path, feeds)
        except Exception as e:  # noqa: BLE001 - what ONNX Runtime says about the derived inputs
            bad_inputs.append(f"{name}: {str(e).splitlines()[-1][:160]}")
    print(f"\n{ran} node tests ONNX Runtime runs; no valid inputs for {len(no_inputs)}:")
    print("\n".join(no_inputs))
    assert ran > 800
    assert not failures, "\n".join(failures)
    assert not bad_inputs, "\n".join(bad_inputs)


# The classes of the ~30 node tests optimize used to fail on, each with its reason.
@pytest.mark.parametrize("name", ["test_gather_2d_indices", "test_reshape_reordered_all_dims", "test_slice_neg_steps",
                                  "test_split_variable_parts_2d", "test_squeeze_negative_axes",
                                  "test_unsqueeze_unsorted_axes", "test_expand_dim_changed", "test_div_uint8",
                                  "test_reduce_sum_keepdims_random", "test_pow_types_int64_float32",
                                  "test_reflect_pad"])
def test_derived_inputs_let_the_check_run(name, tmp_path):
    case = os.path.join(NODE_TESTS, name)
    if not os.path.isdir(case):
        pytest.skip("no libonnx-testdata")
    p = run_cli("optimize", os.path.join(case, "model.onnx"), "-o", str(tmp_path / "out.onnx"), "--cost", "none",
                "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    r = json.load(open(tmp_path / "r.json"))
    assert r["check"] == "passed", r["check_reason"]
    assert r["inputs"] == "random (seed 0)"
    assert r["input_notes"], "no input was derived from its consumers"
    assert "inputs: random (seed 0)" in p.stdout and r["input_notes"][0] in p.stdout


def test_given_inputs_are_used_by_the_check_and_the_guard(tmp_path):
    case = os.path.join(NODE_TESTS, "test_split_variable_parts_2d")
    if not os.path.isdir(case):
        pytest.skip("no libonnx-testdata")
    np.savez(tmp_path / "in.npz", **case_inputs(case))
    p = run_cli("optimize", os.path.join(case, "model.onnx"), "-o", str(tmp_path / "out.onnx"), "--cost", "none",
                "--inputs", str(tmp_path / "in.npz"), "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    r = json.load(open(tmp_path / "r.json"))
    assert r["inputs"] == f"given ({tmp_path / 'in.npz'})" and r["input_notes"] == []
    assert r["check"] == "passed"
    # An input missing from the file is the user's mistake: one clear line.
    np.savez(tmp_path / "bad.npz", input=case_inputs(case)["input"])
    p = run_cli("optimize", os.path.join(case, "model.onnx"), "-o", str(tmp_path / "out2.onnx"), "--inputs",
                str(tmp_path / "bad.npz"))
    assert p.returncode == 1 and "has no array for input 'split'" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "out2.onnx")


def embedding_model(vocab=30522, seq=8, width=16):
    """A BERT-style embedding as current exporters write it: input_ids (int64) into a
    Gather on the table, plus position embeddings through Unsqueeze and Add."""
    rng = np.random.default_rng(0)
    table = numpy_helper.from_array(rng.standard_normal((vocab, width)).astype(np.float32), "table")
    pos = numpy_helper.from_array(rng.standard_normal((seq, width)).astype(np.float32), "pos")
    scale = numpy_helper.from_array(np.array(2.0, np.float32), "scale")
    nodes = [helper.make_node("Gather", ["table", "input_ids"], ["emb"]),
             helper.make_node("Add", ["emb", "pos"], ["sum"]),
             helper.make_node("Mul", ["sum", "scale"], ["y"])]
    graph = helper.make_graph(nodes, "emb", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, width])],
                              [table, pos, scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_token_ids_are_drawn_within_the_vocabulary():
    _, r = isomer.optimize(embedding_model(), threads=1)
    assert r.check == "passed", r.check_reason
    assert r.input_notes == ["'input_ids' = integers in [0, 30522): indices of node (Gather), axis 0 of extent 30522"]
    assert r.cost_before_ms is not None, r.cost_note  # the cost model runs it too
    assert r.guard in ("measured", "unchanged"), r.guard_reason


def test_python_inputs_are_used(tmp_path):
    ids = np.array([[1, 2, 3, 4, 5, 6, 7, 30521]], np.int64)
    _, r = isomer.optimize(embedding_model(), threads=1, inputs={"input_ids": ids})
    assert r.inputs == "given (inputs=)" and r.check == "passed"
    with pytest.raises(isomer.Error, match="input 'input_ids' is i32"):
        isomer.optimize(embedding_model(), inputs={"input_ids": ids.astype(np.int32)})


def test_no_valid_input_skips_the_check_and_keeps_the_original(tmp_path):
    # The same integer input is a Reshape's shape and a Gather's indices: [2,3] as a
    # shape, but indices below 2: no input satisfies both. (The Identity gives
    # optimize something to remove, so that there is something to check.)
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Gather", ["t", "s"], ["g"]),
             helper.make_node("Identity", ["r"], ["i"]),
             helper.make_node("Relu", ["i"], ["y"]), helper.make_node("Relu", ["g"], ["z"])]
    graph = helper.make_graph(
        nodes, "conflict",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((2, 4), np.float32), "t")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              str(tmp_path / "m.onnx"))
    p = run_cli("optimize", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out.onnx"), "--cost", "none",
                "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    r = json.load(open(tmp_path / "r.json"))
    assert r["check"] == "skipped" and "no valid inputs: input 's'" in r["check_reason"], r["check_reason"]
    # Nothing vouches for the rewrite, so the original is written (fail closed) ...
    assert r["guard"] == "skipped" and "the check could not run" in r["guard_reason"], r["guard_reason"]
    assert r["kept"] == "original" and r["rules_applied"] == {}, r
    assert f"check: skipped: {r['check_reason']}" in p.stdout
    assert [n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node].count("Identity") == 1
    # ... unless the user switches the check off.
    p = run_cli("optimize", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out.onnx"), "--cost", "none",
                "--no-check", "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    r = json.load(open(tmp_path / "r.json"))
    assert r["kept"] == "optimized" and r["rules_applied"] == {"eliminate-identity": 1}, r


def test_dims_named_by_expressions_get_consistent_random_shapes(tmp_path):
    # torch's dynamo exporter names a KV cache's dims "past" and its mask's "past + 1".
    # Random inputs bind "past + 1" from "past", so the concatenated cache lines up
    # with the mask, and the check and the guard run (before: "past + 1" was 1, the
    # model failed on its own inputs and optimize wrote it unchecked).
    F = TensorProto.FLOAT
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4), "w")
    g = helper.make_graph(
        [helper.make_node("Concat", ["past_k", "new_k"], ["k"], axis=1),
         helper.make_node("MatMul", ["k", "w"], ["kw"]),
         helper.make_node("Concat", ["kw", "mask"], ["y"], axis=2)],
        "kv",
        [helper.make_tensor_value_info("past_k", F, ["batch", "past", 4]),
         helper.make_tensor_value_info("new_k", F, ["batch", 1, 4]),
         helper.make_tensor_value_info("mask", F, ["batch", "past + 1", 4])],
        [helper.make_tensor_value_info("y", F, None)],
        [w])
    path = str(tmp_path / "kv.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    p = run_cli("run", path, "--threads", "1")
    assert p.returncode == 0, p.stderr
    assert "f32[1,2,8]" in p.stdout, p.stdout
    p = run_cli("optimize", path, "-o", str(tmp_path / "out.onnx"), "--cost", "none", "--no-guard",
                "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stderr
    assert json.load(open(tmp_path / "r.json"))["check"] == "passed", p.stdout
