"""isomer's CPU runtime (`isomer run`) against ONNX Runtime, and `isomer cost`.

Every node test from Debian's libonnx-testdata (operators the runtime lowers to
oneDNN, runs on reference kernels, or hands to ONNX Runtime; those of the operators
current exporters add must plan no step on either of the last two), a small CNN
block built here, the npz interface, --bench's JSON, and the cost database being
reused across runs.
"""
import glob
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper, TensorProto

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
TESTDATA = "/usr/share/libonnx-testdata/data/node"

pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args, check=True, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=120, env=e)
    if check and p.returncode != 0:
        raise AssertionError(f"isomer {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}")
    return p


def node_cases():
    """Every node test of libonnx-testdata: operators the runtime lowers to oneDNN,
    those it runs on reference kernels, and those it hands to ONNX Runtime."""
    return [d for d in sorted(glob.glob(os.path.join(TESTDATA, "test_*")))
            if os.path.exists(os.path.join(d, "test_data_set_0"))]


# Random operators: their test data cannot be reproduced.
NONDETERMINISTIC = ("test_bernoulli", "test_training_dropout")
# ...except a training-mode dropout of ratio 0, which drops nothing.
DETERMINISTIC_AFTER_ALL = ("test_training_dropout_zero_ratio",)
# Where ONNX Runtime 1.19 itself differs from the test data (checked against it instead).
ORT_DEVIATES = {
    "test_maxunpool_export_with_output_shape": "ORT fills the unpooled output differently",
    "test_resize_downsample_scales_cubic_align_corners": "ORT's align_corners downsampling",
    "test_resize_downsample_scales_linear_align_corners": "ORT's align_corners downsampling",
}


# The operators current exporters use beyond the first set: natively lowered.
NEW_OPS = {
    "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "Sin", "Cos",
    "Floor", "Ceil", "Round", "Sign", "Mod", "Sum", "Mean", "Softplus", "Mish", "Elu", "Selu", "Celu",
    "ThresholdedRelu", "PRelu", "GlobalMaxPool", "LogSoftmax", "RMSNormalization", "GroupNormalization",
    "InstanceNormalization", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin", "CumSum", "Tile", "Trilu", "GatherElements",
    "GatherND", "ScatterND", "Range", "Einsum", "LSTM", "GRU", "RNN",
    "ConvTranspose", "Resize", "DepthToSpace", "SpaceToDepth",
    "TopK", "ScatterElements", "OneHot", "GridSample", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
    "Acosh", "Atanh", "Softsign", "Size",
}

# Node tests of these operators that do not run natively, and why; all their other
# node tests plan no step on ONNX Runtime and none on the reference kernel.
NOT_NATIVE = {
    "test_range_float_type_positive_delta": "its bounds are graph inputs: the output's length is known only when run",
    "test_range_int32_type_negative_delta": "its bounds are graph inputs: the output's length is known only when run",
    "test_tile": "its repeats are a graph input: the output's shape is known only when run",
    "test_tile_precomputed": "its repeats are a graph input: the output's shape is known only when run",
    "test_mod_mixed_sign_float64": "float64: the pointwise engine computes in float32 or int64",
    "test_mod_uint64": "uint64 past 2^63: the fused integer loop computes signed int64, so Div/Mod/Max/Min and comparisons of uint64 run on the evaluator",
    "test_reduce_log_sum_exp_": "float64: the reduction kernels are float32",
    "test_einsum_batch_diagonal": "a diagonal (a repeated label): the reference kernel",
    "test_einsum_batch_matmul": "float64: oneDNN's matmul has no float64",
    "test_einsum_inner_prod": "float64: oneDNN's matmul has no float64",
    "test_einsum_sum": "float64: the reduction kernels are float32",
    "test_gru_": "W and R are graph inputs: the lowering reorders constant weights once, when compiling",
    "test_lstm_": "W and R are graph inputs: the lowering reorders constant weights once, when compiling",
    "test_rnn_seq_length": "W and R are graph inputs: the lowering reorders constant weights once, when compiling",
    "test_simple_rnn_": "W and R are graph inputs: the lowering reorders constant weights once, when compiling",
    "test_top_k": "its k is a graph input: the output's shape is known only when run",
    "test_onehot_": "its depth is a graph input: the output's shape is known only when run",
    "test_resize_": "its scales or sizes are a graph input: the output's shape is known only when run "
                    "(test_resample.py runs these cases with them as initializers)",
}


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("case", node_cases(), ids=lambda d: os.path.basename(d))
def test_node_runs_as_the_test_data_says(case, tmp_path):
    name = os.path.basename(case)
    if name.startswith(NONDETERMINISTIC) and not name.startswith(DETERMINISTIC_AFTER_ALL):
        pytest.skip("random operator")
    model = onnx.load(os.path.join(case, "model.onnx"))
    data = os.path.join(case, "test_data_set_0")
    names = [i.name for i in model.graph.input if i.name not in {x.name for x in model.graph.initializer}]
    outs = [o.name for o in model.graph.output]
    try:
        inputs = {n: load_pb(os.path.join(data, f"input_{k}.pb")) for k, n in enumerate(names)}
        expected = [load_pb(os.path.join(data, f"output_{k}.pb")) for k in range(len(outs))]
        np.savez(tmp_path / "in.npz", **inputs)
    except Exception as e:  # sequences, optionals, strings: not what .npz holds
        pytest.skip(f"test data not tensors .npz can hold: {e}")
    p = isomer("run", os.path.join(case, "model.onnx"), "--inputs", str(tmp_path / "in.npz"), "--outputs",
               str(tmp_path / "out.npz"), "--threads", "1", "--print-steps", check=False)
    if p.returncode != 0:
        # Neither engine can run it (ONNX Runtime lacks the kernel, bfloat16 or string
        # data): reported clearly, which is the contract.
        assert "isomer: error:" in p.stderr, p.stderr
        pytest.skip(p.stderr.strip()[-200:])
    got = np.load(tmp_path / "out.npz")
    # ONNX Runtime ran it whole, or the part after a data-dependent shape.
    whole_on_ort = "running it on ONNX Runtime" in p.stdout or "split where the shapes" in p.stdout
    if name in ORT_DEVIATES or whole_on_ort:
        # What ran was ONNX Runtime's (whole, or the deviating node delegated).
        expected = ort.InferenceSession(os.path.join(case, "model.onnx"), providers=["CPUExecutionProvider"]).run(
            None, inputs)
    check_outputs(outs, got, expected)
    types = {n.op_type for n in model.graph.node}
    if types & NEW_OPS and types <= NEW_OPS | {"Identity"} and not name.endswith("_expanded"):
        native = "ONNX Runtime" not in p.stdout and "reference kernels" not in p.stdout
        reason = next((why for prefix, why in NOT_NATIVE.items() if name.startswith(prefix)), None)
        if reason:
            assert not native, f"{name} runs natively now: remove it from NOT_NATIVE ({reason})"
        else:
            assert native, p.stdout


def check_outputs(outs, got, want):
    for name, w in zip(outs, want):
        g = got[name]
        assert g.shape == w.shape, name
        if g.dtype == np.float32 and w.dtype == np.uint16:
            # A bf16 output: isomer writes it as float32 (exactly), the test data as bits,
            # truncated (the data predates ONNX's round-to-nearest-even bf16 Cast, which
            # isomer computes): a step apart at most.
            bits = (g.view(np.uint32) >> 16).astype(np.int64)
            assert np.max(np.abs(bits - w.astype(np.int64)), initial=0) <= 1, (name, bits, w)
            continue
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.max(np.abs(w), initial=0))))
        else:
            np.testing.assert_array_equal(g, w)


def small_cnn(path):
    rng = np.random.default_rng(1)
    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "s", "t", "m", "v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=2),
        helper.make_node("Add", ["c2", "r1"], ["a"]),
        helper.make_node("Relu", ["a"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["prob"], axis=1),
    ]
    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,)), init("s", (8,)), init("t", (8,)), init("m", (8,)),
             numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "v"), init("w2", (8, 4, 3, 3)),
             init("wf", (10, 8)), init("bf", (10,))]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [2, 10])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(m, path)


def test_small_cnn_matches_onnxruntime_and_benches(tmp_path):
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    x = np.random.default_rng(2).uniform(-1, 1, (2, 3, 16, 16)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"), "--bench",
               "--repeat", "5", "--threads", "2", "--report-json", str(tmp_path / "r.json"))
    assert "latency: median" in p.stdout
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["prob"], want, rtol=1e-4, atol=1e-6)
    r = json.load(open(tmp_path / "r.json"))
    for key in ("latency_ms_median", "latency_ms_min", "latency_ms_max", "repeats", "threads"):
        assert key in r
    assert r["repeats"] == 5 and r["threads"] == 2
    assert r["latency_ms_min"] <= r["latency_ms_median"] <= r["latency_ms_max"]
    # Side by side with ONNX Runtime: its latency at the same thread count, the
    # ratio of the medians, and isomer's outputs compared with its own.
    o = r["onnxruntime"]
    assert o["version"] == ort.__version__ and o["repeats"] == 5 and o["threads"] == 2
    assert o["latency_ms_min"] <= o["latency_ms_median"] <= o["latency_ms_max"]
    assert o["ratio"] == pytest.approx(r["latency_ms_median"] / o["latency_ms_median"])
    assert o["outputs"]["status"] == "passed" and o["outputs"]["max_rel_error"] < 1e-4
    assert f"ONNX Runtime {ort.__version__}: median" in p.stdout and "isomer / ONNX Runtime: " in p.stdout
    assert "outputs match ONNX Runtime's" in p.stdout


def mobile_block(path, hard):
    """An MBConv block as torch 2 exports it, batch 2: 1x1 expansion, depthwise 3x3,
    SiLU (Sigmoid, Mul) or HardSwish, squeeze-excitation (ReduceMean over H and W
    with the axes as an input, two 1x1 convolutions, Sigmoid or HardSigmoid, the gate
    multiplied over the image), 1x1 projection and the residual Add."""
    rng = np.random.default_rng(3)
    def init(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
    def act(x, y):
        if hard:
            return [helper.make_node("HardSwish", [x], [y])]
        return [helper.make_node("Sigmoid", [x], [y + "_s"]), helper.make_node("Mul", [x, y + "_s"], [y])]
    c, e, s = 24, 96, 8
    nodes = [helper.make_node("Conv", ["x", "we", "be"], ["ce"]), *act("ce", "ae"),
             helper.make_node("Conv", ["ae", "wd", "bd"], ["cd"], pads=[1, 1, 1, 1], group=e), *act("cd", "ad"),
             helper.make_node("ReduceMean", ["ad", "axes"], ["m"], keepdims=1),
             helper.make_node("Conv", ["m", "w1", "b1"], ["s1"]), *act("s1", "a1"),
             helper.make_node("Conv", ["a1", "w2", "b2"], ["s2"]),
             helper.make_node("HardSigmoid", ["s2"], ["g"], alpha=1 / 6, beta=0.5) if hard
             else helper.make_node("Sigmoid", ["s2"], ["g"]),
             helper.make_node("Mul", ["ad", "g"], ["gated"]),
             helper.make_node("Conv", ["gated", "wp", "bp"], ["p"]),
             helper.make_node("Add", ["p", "x"], ["y"])]
    inits = [init("we", (e, c, 1, 1)), init("be", (e,)), init("wd", (e, 1, 3, 3)), init("bd", (e,)),
             numpy_helper.from_array(np.array([2, 3], np.int64), "axes"), init("w1", (s, e, 1, 1)), init("b1", (s,)),
             init("w2", (e, s, 1, 1)), init("b2", (e,)), init("wp", (c, e, 1, 1)), init("bp", (c,))]
    graph = helper.make_graph(nodes, "mbconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 20, 20])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 20, 20])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8), path)


@pytest.mark.parametrize("hard", [False, True], ids=["silu", "hardswish"])
def test_mobile_block_matches_onnxruntime_at_one_and_two_threads(tmp_path, hard):
    path = str(tmp_path / "block.onnx")
    mobile_block(path, hard)
    x = np.random.default_rng(4).uniform(-2, 2, (2, 24, 20, 20)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for threads in ("1", "2"):
        out = tmp_path / f"out{threads}.npz"
        isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(out), "--threads", threads,
               "--no-onnxruntime")
        np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-4, atol=1e-5)


def test_bench_reports_outputs_that_differ_from_onnxruntime(tmp_path):
    # The runtime and ONNX Runtime disagree only when something is wrong; a tolerance
    # of 0 makes float rounding differences count, so the report must say so and fail.
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    p = isomer("run", path, "--bench", "--repeat", "2", "--warmup", "1", "--threads", "1", "--tolerance", "0",
               "--report-json", str(tmp_path / "r.json"), check=False)
    assert p.returncode != 0
    assert "outputs DIFFER from ONNX Runtime's" in p.stdout, p.stdout
    assert "differ from ONNX Runtime's" in p.stderr, p.stderr
    r = json.load(open(tmp_path / "r.json"))
    assert r["onnxruntime"]["outputs"]["status"] == "failed" and r["onnxruntime"]["outputs"]["max_rel_error"] > 0


def test_bench_without_onnxruntime_says_why(tmp_path):
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    p = isomer("run", path, "--bench", "--repeat", "2", "--warmup", "1", "--threads", "1",
               "--report-json", str(tmp_path / "r.json"), env={"ISOMER_PYTHON": "/nonexistent/python"})
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime: not compared" in p.stdout, p.stdout
    assert "error" in json.load(open(tmp_path / "r.json"))["onnxruntime"]


def test_random_inputs_print_their_seed(tmp_path):
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    a = isomer("run", path, "--seed", "5", "--outputs", str(tmp_path / "a.npz"))
    isomer("run", path, "--seed", "5", "--outputs", str(tmp_path / "b.npz"))
    assert "seed 5" in a.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["prob"], np.load(tmp_path / "b.npz")["prob"])


def test_cost_database_is_reused(tmp_path):
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    db = str(tmp_path / "costs.sqlite")
    runs = []
    for k in range(2):
        # A fixed load average: whether the machine is overloaded must not change between the runs.
        isomer("cost", path, "--cost-db", db, "--threads", "1", "--report-json", str(tmp_path / f"c{k}.json"),
               env={"ISOMER_LOAD_AVERAGE": "0"})
        runs.append(json.load(open(tmp_path / f"c{k}.json")))
    assert runs[0]["measured_new"] > 0 and runs[0]["cached"] == 0
    assert runs[1]["measured_new"] == 0 and runs[1]["cached"] == len(runs[1]["steps"])
    assert runs[1]["total_ms"] > 0
    a = isomer("cost", path, "--cost", "analytic", "--cost-db", db, "--threads", "1", "-q")
    assert "total" in a.stdout


def test_opaque_models_are_reported_not_run(tmp_path):
    node = helper.make_node("FancyOp", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)], ir_version=8)
    path = str(tmp_path / "opaque.onnx")
    onnx.save(m, path)
    p = isomer("run", path, check=False)
    assert p.returncode != 0
    assert "not runnable on the isomer runtime" in p.stderr


def test_cost_measured_on_an_overloaded_machine_is_marked_and_measured_again(tmp_path):
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    db = str(tmp_path / "costs.sqlite")

    def cost(load, k):
        # Two threads: one thread is timed in processor time, which a busy machine does
        # not inflate, so its rows are never marked (CostDbNoisy in tests/cpp).
        p = isomer("cost", path, "--cost-db", db, "--threads", "2", "--report-json", str(tmp_path / f"n{k}.json"),
                   env={"ISOMER_LOAD_AVERAGE": str(load)})
        return p, json.load(open(tmp_path / f"n{k}.json"))

    busy = os.cpu_count() + 3
    p, a = cost(busy, 0)
    assert a["measured_new"] > 0 and a["noisy"] == len(a["steps"]) and a["load_average"] == busy
    assert "overloaded" in p.stdout
    _, b = cost(busy, 1)  # still overloaded: reused, still marked
    assert b["measured_new"] == 0 and b["noisy"] == len(b["steps"])
    _, c = cost(0, 2)  # quiet again: measured again, clean
    assert c["measured_new"] == len(c["steps"]) and c["noisy"] == 0
    _, d = cost(busy, 3)  # clean entries are kept whatever the load
    assert d["measured_new"] == 0 and d["noisy"] == 0


def test_openmp_wait_policy_follows_the_machine_and_the_user(tmp_path):
    path = str(tmp_path / "cnn.onnx")
    small_cnn(path)
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "ISOMER_OMP_REEXEC")}

    def waits(threads, env):
        report = str(tmp_path / "w.json")
        p = subprocess.run([ISOMER, "run", path, "--bench", "--repeat", "2", "--warmup", "1", "--threads", str(threads),
                            "--report-json", report, "--no-onnxruntime"], capture_output=True, text=True, timeout=120, env={**base, **env})
        assert p.returncode == 0, p.stderr
        r = json.load(open(report))
        assert "OpenMP waits: " + r["openmp_waits"] in p.stdout
        return r["openmp_waits"]

    cpus = len(os.sched_getaffinity(0))
    # More runnable tasks than free cores: the threads sleep at once.
    assert waits(2, {"ISOMER_RUNNABLE_TASKS": str(cpus)}).startswith(f"passive ({cpus} other runnable tasks")
    # A core for every thread: a short spin (passive on a one-core machine).
    w = waits(2, {"ISOMER_RUNNABLE_TASKS": "0"})
    assert w.startswith("spin 1000 (0 other" if cpus >= 2 else "passive (0 other"), w
    assert waits(1, {"ISOMER_RUNNABLE_TASKS": "9"}).startswith("libgomp default (1 thread")
    # The user's choice is kept, whatever the load.
    assert waits(2, {"OMP_WAIT_POLICY": "active", "ISOMER_RUNNABLE_TASKS": "9"}) == \
        "OMP_WAIT_POLICY=active (set by the user)"
    assert waits(2, {"GOMP_SPINCOUNT": "5", "ISOMER_RUNNABLE_TASKS": "0"}) == "GOMP_SPINCOUNT=5 (set by the user)"


@pytest.mark.parametrize("threads", [1, 2])
def test_hard_sigmoid_and_hard_swish_on_the_pointwise_kernel(threads):
    """x * HardSigmoid(x) (TorchScript's hardswish before opset 14) and HardSwish on
    the runtime's own pointwise loop, which clamps by comparisons rather than a libm
    call an element: the values of fmax(0, fmin(1, t)), NaN going to 1 inside."""
    isomer_mod = pytest.importorskip("isomer")
    nodes = [helper.make_node("HardSigmoid", ["x"], ["g"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["x", "g"], ["y"]),
             helper.make_node("HardSwish", ["x"], ["z"]),
             helper.make_node("HardSigmoid", ["x"], ["h"], alpha=0.3, beta=-0.2)]
    shape = [1, 8, 37, 29]  # not a multiple of any vector width
    g = helper.make_graph(nodes, "hard", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("y", "z", "h")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(5).uniform(-5, 5, shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[:9] = [np.nan, np.inf, -np.inf, -3.0, 3.0, 0.0, -0.0, 2.9999998, -2.9999998]
    y, z, h = isomer_mod.run(m, {"x": x}, engine="runtime", threads=threads)

    def clamp(t):
        return np.fmax(np.float32(0), np.fmin(np.float32(1), t))

    with np.errstate(invalid="ignore"):
        want_y = x * clamp(np.float32(1 / 6) * x + np.float32(0.5))
        want_z = x * clamp(x * np.float32(1 / 6) + np.float32(0.5))
        want_h = clamp(np.float32(0.3) * x + np.float32(-0.2))
    np.testing.assert_allclose(y, want_y, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(z, want_z, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h, want_h, rtol=1e-6, atol=1e-7)
    assert h.reshape(-1)[0] == 1.0  # NaN clamps to 1
