"""Hostile inputs of the campaign's seventh family (scripts/hostile_mutators_resource.py): valid
models that ask for unbounded time, memory or disk. Each class it found, rebuilt here small.

- A constant index out of range for GatherElements, GatherND, ScatterND or ScatterElements
  (onnx.checker accepts the file, ONNX Runtime fails when the node runs) is refused where it
  is imported, naming the node; `optimize` wrote it back unchanged. The same index fed at run
  time is refused by `run`, naming the node.
- A scalar expanded to 16 MB (or an outer product of two vectors) added to the input:
  `optimize` wrote the folded 16 MB into a model of 200 bytes; the model written now stays
  about the input's size and computes what ONNX Runtime computes.
- ReduceSum of a scalar expanded to 2^28 elements: the e-graph and the runtime's compile
  evaluated it through the reference kernels (an index table of 8 bytes an element beside
  it) and ran out of memory where ONNX Runtime runs it; both now leave it to a step.
"""
import os
import resource
import subprocess

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _isomer(isomer_bin, *args, timeout=300, mem=None):
    limit = (lambda: resource.setrlimit(resource.RLIMIT_AS, (mem, mem))) if mem else None
    return subprocess.run([isomer_bin, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit)


def _model(tmp_path, name, nodes, inputs, inits, y_dims):
    g = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_dims)],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _ort(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


INDEX_CASES = {
    # op: (attributes, indices (7 is out of range for the data's first axis), updates, output dims)
    "GatherElements": (dict(axis=0), [[0, 1, 2, 0], [1, 2, 0, 7]], None, [2, 4]),
    "GatherND": ({}, [[0, 1], [7, 0]], None, [2]),
    "ScatterND": ({}, [[0], [7]], np.ones((2, 4), np.float32), [3, 4]),
    "ScatterElements": (dict(axis=0), [[0, 1, 2, 7]], np.ones((1, 4), np.float32), [3, 4]),
}


@pytest.mark.parametrize("op", sorted(INDEX_CASES))
def test_constant_index_out_of_range_is_refused(isomer_bin, tmp_path, op):
    attrs, idx, upd, y_dims = INDEX_CASES[op]
    ins = ["x", "idx"] + (["upd"] if upd is not None else [])
    inits = [numpy_helper.from_array(np.array(idx, np.int64), "idx")]
    if upd is not None:
        inits.append(numpy_helper.from_array(upd, "upd"))
    node = helper.make_node(op, ins, ["y"], name=f"bad_{op}", **attrs)
    path = _model(tmp_path, op, [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], inits,
                  y_dims)
    feeds = {"x": np.ones((3, 4), np.float32)}
    with pytest.raises(Exception):
        _ort(path, feeds)
    for args in (["optimize", path, "-o", tmp_path / "out.onnx"], ["run", path]):
        p = _isomer(isomer_bin, *args)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert p.returncode == 1 and len(lines) == 1, p.stderr
        for want in (path.name, f"bad_{op}", "index 7 is out of range for an axis of extent 3"):
            assert want in lines[0], lines[0]
    assert not (tmp_path / "out.onnx").exists()


def test_run_time_index_out_of_range_is_refused(isomer_bin, tmp_path):
    node = helper.make_node("GatherElements", ["x", "idx"], ["y"], name="take", axis=0)
    path = _model(tmp_path, "runtime_index", [node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                                      helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 4])], [], [1, 4])
    np.savez(tmp_path / "in.npz", x=np.ones((3, 4), np.float32), idx=np.array([[0, 1, 2, -9]], np.int64))
    for extra in ([], ["--no-onnxruntime"]):
        p = _isomer(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", *extra)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert p.returncode == 1 and len(lines) == 1, p.stderr
        assert path.name in lines[0] and "GatherElements" in lines[0] and "out of range" in lines[0], lines[0]


@pytest.mark.parametrize("how", ["expand", "outer"])
def test_folding_does_not_bloat_the_model(isomer_bin, tmp_path, how):
    n = 2048
    rng = np.random.default_rng(5)
    if how == "expand":
        nodes = [helper.make_node("Expand", ["one", "shape"], ["c"])]
        inits = [numpy_helper.from_array(np.array([[0.25]], np.float32), "one"),
                 numpy_helper.from_array(np.array([n, n], np.int64), "shape")]
    else:
        nodes = [helper.make_node("MatMul", ["col", "row"], ["c"])]
        inits = [numpy_helper.from_array(rng.standard_normal((n, 1)).astype(np.float32), "col"),
                 numpy_helper.from_array(rng.standard_normal((1, n)).astype(np.float32), "row")]
    nodes.append(helper.make_node("Add", ["x", "c"], ["y"]))
    path = _model(tmp_path, how, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])], inits, [n, n])
    out = tmp_path / "out.onnx"
    p = _isomer(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1")
    assert p.returncode == 0, p.stderr
    assert os.path.getsize(out) < 2 * os.path.getsize(path) + 4096, (os.path.getsize(path), os.path.getsize(out))
    assert not os.path.exists(str(out) + ".data")
    x = rng.standard_normal((n, n)).astype(np.float32)
    np.testing.assert_allclose(_ort(out, {"x": x}), _ort(path, {"x": x}), rtol=1e-5, atol=1e-5)


def test_reduce_of_a_blown_up_scalar_runs(isomer_bin, tmp_path):
    numel = 1 << 28  # 1 GB of float32 where it is materialized; 3 GB with the reference kernels' index table
    nodes = [helper.make_node("Expand", ["one", "shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["r"], keepdims=1),
             helper.make_node("Add", ["x", "r"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0.5], np.float32), "one"),
             numpy_helper.from_array(np.array([numel], np.int64), "shape")]
    path = _model(tmp_path, "blown_up", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], inits, [2])
    np.savez(tmp_path / "in.npz", x=np.array([1, 2], np.float32))
    p = _isomer(isomer_bin, "run", path, "--no-onnxruntime", "--threads", "1", "--inputs", tmp_path / "in.npz",
                "--outputs", tmp_path / "out.npz", mem=5 << 29)  # 2.5 GB of address space
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], [1 + numel / 2, 2 + numel / 2])


def _long_loop(tmp_path):
    """A Loop whose trip count is 10^9 and whose condition never ends it: valid, hours to run."""
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "step"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("v_in", TensorProto.FLOAT, [3])],
        [vi("cond_out", TensorProto.BOOL, []), vi("v_out", TensorProto.FLOAT, [3])],
        initializer=[numpy_helper.from_array(np.array([1, 2, 3], np.float32), "step")])
    nodes = [helper.make_node("Loop", ["trip", "cond", "v0"], ["v"], name="forever", body=body),
             helper.make_node("Add", ["x", "v"], ["y0"]), helper.make_node("Add", ["c1", "c2"], ["s"]),
             helper.make_node("Add", ["y0", "s"], ["y"])]  # c1 + c2 folds: the check has a rewrite to run
    inits = [numpy_helper.from_array(np.array(10 ** 9, np.int64), "trip"),
             numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(np.zeros(3, np.float32), "v0"),
             numpy_helper.from_array(np.ones(3, np.float32), "c1"), numpy_helper.from_array(np.ones(3, np.float32), "c2")]
    return _model(tmp_path, "long_loop", nodes, [vi("x", TensorProto.FLOAT, [2, 3])], inits, [2, 3])


@pytest.mark.parametrize("target", ["isomer", "onnxruntime"])
def test_optimize_stops_running_a_loop_of_a_billion_iterations(isomer_bin, tmp_path, target):
    # optimize ran it to its count in the check and the pricing (hours); each of its own
    # runs now has a limit, past which the rest is skipped and the original written.
    path = _long_loop(tmp_path)
    out = tmp_path / "out.onnx"
    p = _isomer(isomer_bin, "optimize", path, "-o", out, "--threads", "1", "--budget", "1", "--run-limit", "2",
                "--target", target, "--report-json", tmp_path / "r.json", timeout=60)
    assert p.returncode == 0, p.stderr
    assert "run limit: a run of the model took longer than optimize's limit of 2 s per run" in p.stdout, p.stdout
    assert "kept: original" in p.stdout
    import json
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["check"] == "skipped" and "limit of 2 s" in report["check_reason"], report["check_reason"]
    assert report["run_limit_seconds"] == 2
    assert onnx.load(str(out)).graph.node[0].op_type == "Loop"


def test_long_run_says_so_and_stops_at_ctrl_c(isomer_bin, tmp_path):
    # `run` runs what was asked, however long, but said nothing while it did.
    import signal
    import time
    path = _long_loop(tmp_path)
    p = subprocess.Popen([isomer_bin, "run", str(path), "--threads", "1"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(12)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGINT, (p.returncode, err)
    assert f"isomer: still running {path}: 10 s so far (Ctrl-C stops it)" in err, err


def test_skipped_fold_is_reported(isomer_bin, tmp_path):
    # The fold budget left the 16 MB outer product to the runtime without a word.
    n = 2048
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("MatMul", ["col", "row"], ["c"], name="outer"), helper.make_node("Add", ["x", "c"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((n, 1)).astype(np.float32), "col"),
             numpy_helper.from_array(rng.standard_normal((1, n)).astype(np.float32), "row")]
    path = _model(tmp_path, "outer", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])], inits, [n, n])
    p = _isomer(isomer_bin, "optimize", path, "-o", tmp_path / "out.onnx", "--budget", "1", "--threads", "1",
                "--no-guard", "--cost", "none", "--report-json", tmp_path / "r.json")
    assert p.returncode == 0, p.stderr
    want = "node 'outer' (MatMul): its result adds 16.0 MiB of constants, past the 1.0 MiB a template pass may add"
    assert "fold skipped: " + want in p.stdout, p.stdout
    import json
    assert any(want in line for line in json.loads((tmp_path / "r.json").read_text())["fold_skipped"])


def test_concat_of_a_hundred_thousand_initializers_is_quick(isomer_bin, tmp_path):
    # ONNX Runtime takes 40 s (more on a busy machine) to load 10^5 initializers, and the
    # check and the guard's confirmation loaded it twice: now neither hands it over.
    count = 100_000
    inits = [numpy_helper.from_array(np.array([float(i % 13)], np.float32), f"t{i}") for i in range(count)]
    nodes = [helper.make_node("Concat", [t.name for t in inits], ["c"], axis=0),
             helper.make_node("ReduceSum", ["c"], ["r"], keepdims=1), helper.make_node("Add", ["x", "r"], ["y"])]
    path = _model(tmp_path, "many_inits", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], inits,
                  [2, 3])
    out = tmp_path / "out.onnx"
    p = _isomer(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1", timeout=300)
    assert p.returncode == 0, p.stderr
    # The check runs the original on the engine after ONNX Runtime (the guard may keep the
    # original before it would confirm on ONNX Runtime, which it would skip as well).
    assert "check: passed (isomer's runtime against reference evaluator" in p.stdout, p.stdout
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(_ort(out, {"x": x}), x + sum(float(i % 13) for i in range(count)), rtol=1e-6)


def test_sparse_external_weight_stays_sparse(isomer_bin, tmp_path):
    # A 2 GB weight, sparse on disk, was written back dense (2 GB of disk).
    rows, cols = 500_000, 1024
    with open(tmp_path / "weights.bin", "wb") as f:
        f.truncate(rows * cols * 4)
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[rows, cols], data_location=TensorProto.EXTERNAL)
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", str(rows * cols * 4))):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Gather", ["w", "idx"], ["y"], axis=0)], "sparse",
                          [helper.make_tensor_value_info("idx", TensorProto.INT64, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, cols])], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "sparse.onnx"
    onnx.save(m, str(path))
    np.savez(tmp_path / "in.npz", idx=np.array([0, 1, rows // 2, rows - 1], np.int64))
    out = tmp_path / "out.onnx"
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    p = _isomer(isomer_bin, "optimize", path, "-o", out, "--budget", "1", "--threads", "1", "--inputs",
                tmp_path / "in.npz")
    assert p.returncode == 0, p.stderr
    data = str(out) + ".data"
    assert os.path.getsize(data) == rows * cols * 4
    assert os.stat(data).st_blocks * 512 < (16 << 20), os.stat(data).st_blocks  # as sparse as the input
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, of the largest child so far
    assert peak == before or peak < 3 * (1 << 20), peak  # about the weight's 2 GB
