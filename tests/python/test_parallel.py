"""`isomer parallelize`, `isomer run-plan` on 2 MPI ranks, `isomer calibrate` and
`isomer rules generate --mpi`, through the CLI.

The plans' outputs are compared with ONNX Runtime's on the same inputs, for data
parallelism, the Megatron-style plan and the searched plan of a small transformer
layer. Open MPI as root needs its two "allow" variables; --oversubscribe lets two
ranks share a core; the vader single-copy mechanism is off (containers often forbid
the ptrace it needs).
"""
import json
import os
import shutil
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(MPIRUN is None, reason="Open MPI's mpirun is not installed (make deps installs it)")


def run(cmd, timeout=120, env=None, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if check:
        assert r.returncode == 0, f"{' '.join(cmd)}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def mpirun(args, timeout=120, check=True):
    return run([MPIRUN, "-np", "2", "--oversubscribe", ISOMER] + args, timeout=timeout, env=MPI_ENV, check=check)


def transformer_layer(path, hidden=16, heads=4, seq=8):
    """One attention layer with an MLP, batch dimension dynamic, as exporters write it."""
    rng = np.random.default_rng(0)
    hd = hidden // heads
    inits, nodes = [], []

    def w(name, *shape, scale=0.3):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def i64(name, values):
        inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], **attrs))
        return out

    def linear(x, n_in, n_out, name):
        return node("Add", [node("MatMul", [x, w(name + "_w", n_in, n_out)], name + "_mm"), w(name + "_b", n_out, scale=0.1)], name)

    def heads_of(t, name):
        r = node("Reshape", [t, i64(name + "_shape", [0, seq, heads, hd])], name + "_r")
        return node("Transpose", [r], name + "_t", perm=[0, 2, 1, 3])

    q, k, v = (heads_of(linear("x", hidden, hidden, n), n + "h") for n in ("q", "k", "v"))
    kt = node("Transpose", [k], "kt", perm=[0, 1, 3, 2])
    inits.append(numpy_helper.from_array(np.array(np.sqrt(hd), dtype=np.float32), "scale"))
    p = node("Softmax", [node("Div", [node("MatMul", [q, kt], "qk"), "scale"], "s")], "p", axis=-1)
    ctx = node("Transpose", [node("MatMul", [p, v], "pv")], "ctx_t", perm=[0, 2, 1, 3])
    ctx = node("Reshape", [ctx, i64("ctx_shape", [0, seq, hidden])], "ctx")
    x1 = node("Add", ["x", linear(ctx, hidden, hidden, "o")], "x1")
    h = node("Relu", [linear(x1, hidden, 4 * hidden, "up")], "h")
    node("Add", [x1, linear(h, 4 * hidden, hidden, "down")], "y")
    graph = helper.make_graph(
        nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", seq, hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def cluster(path, nodes=1, per_node=2, **device):
    c = {"nodes": nodes, "devices_per_node": per_node,
         "device": {"tflops": 0.05, "memory_gb": 1, "bandwidth_gbps": 20, **device},
         "intra_node": {"bandwidth_gbps": 400, "latency_us": 5}, "inter_node": {"bandwidth_gbps": 100, "latency_us": 10}}
    with open(path, "w") as f:
        json.dump(c, f)
    return path


@pytest.fixture(scope="module")
def layer(tmp_path_factory):
    return transformer_layer(str(tmp_path_factory.mktemp("par") / "layer.onnx"))


def test_parallelize_writes_a_plan(layer, tmp_path):
    plan = tmp_path / "plan"
    r = run([ISOMER, "parallelize", layer, "--cluster", cluster(str(tmp_path / "c.json"), 2, 4), "--batch", "8",
             "--steps", "300", "--seed", "3", "-o", str(plan)])
    assert "data parallelism" in r.stdout and "Megatron-style" in r.stdout and "isomer (unity)" in r.stdout
    j = json.load(open(plan / "plan.json"))
    assert j["mesh"]["devices"] == 8 and [a["size"] for a in j["mesh"]["axes"]] == [2, 2, 2]
    assert j["predicted_step_ms"] <= j["data_parallel_step_ms"]
    assert j["speedup_vs_data_parallel"] == pytest.approx(j["data_parallel_step_ms"] / j["predicted_step_ms"])
    assert {"compute_ms", "communication_ms", "overlap_ms", "memory_per_device_bytes"} <= set(j["predicted"])
    assert all("layout" in o for op in j["operators"] for o in op["outputs"])
    assert len(j["rank_graphs"]) == 8 and all((plan / f).exists() for f in j["rank_graphs"])
    for step in (s for m in j["parallel_ops"] for s in m["steps"]):
        assert step["collective"] in ("none", "all_gather", "all_reduce", "reduce_scatter")
    # The same seed and step budget give the same plan.
    run([ISOMER, "parallelize", layer, "--cluster", str(tmp_path / "c.json"), "--batch", "8", "--steps", "300",
         "--seed", "3", "-o", str(tmp_path / "again")])
    again = json.load(open(tmp_path / "again" / "plan.json"))
    assert [o["config"] for o in again["operators"]] == [o["config"] for o in j["operators"]]


@needs_mpi
@pytest.mark.parametrize("plan", ["data", "megatron", "search"])
def test_two_ranks_compute_what_one_process_computes(layer, tmp_path, plan):
    out = tmp_path / "plan"
    run([ISOMER, "parallelize", layer, "--cluster", cluster(str(tmp_path / "c.json")), "--batch", "4", "--mode", "infer",
         "--plan", plan, "--steps", "300", "-q", "-o", str(out)])
    x = np.random.default_rng(1).standard_normal((4, 8, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    r = mpirun(["run-plan", str(out), "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"),
                "--check", "--bench", "3"])
    assert "check: passed" in r.stdout
    got = np.load(tmp_path / "out.npz")["y"]
    want = ort.InferenceSession(layer, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if plan != "search":  # the baselines of a 2-device node communicate
        assert any(s["collective"] != "none" for m in json.load(open(out / "plan.json"))["parallel_ops"] for s in m["steps"])


@needs_mpi
def test_run_plan_needs_the_plan_s_rank_count(layer, tmp_path):
    out = tmp_path / "plan"
    run([ISOMER, "parallelize", layer, "--cluster", cluster(str(tmp_path / "c.json"), 1, 4), "--batch", "4", "--plan",
         "data", "-q", "-o", str(out)])
    r = mpirun(["run-plan", str(out)], check=False)
    assert r.returncode != 0
    assert "the plan is for 4 ranks, mpirun started 2" in r.stderr


@needs_mpi
def test_rules_generate_on_two_ranks_writes_the_same_file(tmp_path):
    run([ISOMER, "rules", "generate", "--max-ops", "2", "-q", "-o", str(tmp_path / "one.rules")], timeout=300)
    r = mpirun(["rules", "generate", "--max-ops", "2", "--mpi", "-q", "-o", str(tmp_path / "two.rules")], timeout=300)
    assert "(2 MPI ranks)" in r.stdout
    assert (tmp_path / "one.rules").read_bytes() == (tmp_path / "two.rules").read_bytes()


@needs_mpi
def test_calibrate_fits_the_collectives(layer, tmp_path):
    calib = tmp_path / "calib.json"
    mpirun(["calibrate", "-o", str(calib), "--sizes", "4096,65536,262144", "--repeat", "3"])
    j = json.load(open(calib))
    assert j["ranks"] == 2
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        assert j["collectives"][kind]["bandwidth_gbps"] > 0 and j["collectives"][kind]["latency_us"] >= 0
    c = {"nodes": 1, "devices_per_node": 2, "device": {"tflops": 1, "memory_gb": 1, "bandwidth_gbps": 10},
         "intra_node": {"calibration": "calib.json"}}
    (tmp_path / "c.json").write_text(json.dumps(c))
    run([ISOMER, "parallelize", layer, "--cluster", str(tmp_path / "c.json"), "--batch", "4", "--plan", "data", "-q",
         "--skip-rank-graphs", "-o", str(tmp_path / "plan")])
    assert json.load(open(tmp_path / "plan" / "plan.json"))["cluster"]["intra_node_calibration"].endswith("calib.json")
    # The host overheads: measured, and used for devices of this machine (no "device").
    host = j["host"]
    assert host["dispatch_us"] > 0 and host["compute_contention"] >= 1 and host["weight_stream_gbytes_per_s"] >= 0
    assert host["blocking_collectives"] is True
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        assert [p[0] for p in j["collectives"][kind]["points_bytes_ms"]] == [4096, 65536, 262144]
    c = {"nodes": 1, "devices_per_node": 2, "cost_model": "analytic", "intra_node": {"calibration": "calib.json"}}
    (tmp_path / "m.json").write_text(json.dumps(c))
    run([ISOMER, "parallelize", layer, "--cluster", str(tmp_path / "m.json"), "--batch", "4", "--plan", "data", "-q",
         "--skip-rank-graphs", "-o", str(tmp_path / "plan_m")])
    used = json.load(open(tmp_path / "plan_m" / "plan.json"))["cluster"]["host_overheads"]
    assert used["dispatch_us"] == pytest.approx(host["dispatch_us"])
    assert used["compute_contention"] == pytest.approx(host["compute_contention"])


@pytest.mark.parametrize("text,message", [
    ('{"nodes": 2, "devices_per_node": 8, "device": {"tflops": 100}}', 'missing "bandwidth_gbps"'),
    ('{"nodes": -1}', '"nodes" must be a positive integer'),
    ('{"nodes": 1, "gpus": 2}', 'unknown key "gpus"'),
    ('{"nodes": 1, "intra_node": {"calibration": "nope.json"}}', "cannot read calibration file"),
])
def test_bad_cluster_files_give_one_line(layer, tmp_path, text, message):
    (tmp_path / "c.json").write_text(text)
    r = run([ISOMER, "parallelize", layer, "--cluster", str(tmp_path / "c.json"), "--batch", "2", "-o",
             str(tmp_path / "p")], check=False)
    assert r.returncode == 1
    assert r.stderr.startswith("isomer: error: ") and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_dynamic_batch_needs_a_value(layer, tmp_path):
    r = run([ISOMER, "parallelize", layer, "--cluster", cluster(str(tmp_path / "c.json")), "-o", str(tmp_path / "p")],
            check=False)
    assert r.returncode == 1 and "give --batch N" in r.stderr


def test_parallel_rules_verify():
    r = run([ISOMER, "rules", "verify", os.path.join(REPO, "rules", "parallel", "parallel.rules")])
    assert "10 rules: 10 proved" in r.stdout
    # The joint search's rules (tried first by `parallelize --search unity`).
    r = run([ISOMER, "rules", "verify", os.path.join(REPO, "rules", "parallel", "joint.rules")])
    assert "8 rules: 8 proved" in r.stdout
