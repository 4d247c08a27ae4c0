"""Forms found by running a fresh set of transformer exports (transformers 5 / torch 2.15:
Gemma 3, Qwen 3, Mistral, Phi-3, OLMo 2, ModernBERT, DeBERTa-v2, Whisper, wav2vec 2 and
more, through both of torch's exporters, with dynamic axes and past key/values) through
isomer. Each model is built here with onnx.helper, run natively and compared with ONNX
Runtime; the steps the runtime compiles are checked where a fusion was missed."""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_current_exports import isomer, run_natively

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def const(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def rms_norm_nodes(x, out, weight, prefix, reciprocal="Div"):
    """RMSNorm as torch writes x * rsqrt(mean(x^2) + eps) * w: the TorchScript exporter
    (dynamo=False) writes rsqrt as Div(1, Sqrt), the dynamo exporter as Reciprocal(Sqrt)."""
    p = prefix
    inv = ([helper.make_node("Div", [f"{p}one", f"{p}s"], [f"{p}inv"])] if reciprocal == "Div"
           else [helper.make_node("Reciprocal", [f"{p}s"], [f"{p}inv"])])
    return [helper.make_node("Pow", [x, f"{p}two"], [f"{p}sq"]),
            helper.make_node("ReduceMean", [f"{p}sq"], [f"{p}m"], axes=[-1], keepdims=1),
            helper.make_node("Add", [f"{p}m", f"{p}eps"], [f"{p}a"]),
            helper.make_node("Sqrt", [f"{p}a"], [f"{p}s"]),
            *inv,
            helper.make_node("Mul", [x, f"{p}inv"], [f"{p}n"]),
            helper.make_node("Mul", [f"{p}n", weight], [out])], \
        [const(f"{p}two", 2.0), const(f"{p}eps", 1e-6), const(f"{p}one", 1.0)]


def rms_model(tmp_path, dims, reciprocal="Div", name="m.onnx"):
    """x -> RMSNorm -> MatMul, opset 17 (ReduceMean's axes an attribute, as TorchScript writes it)."""
    rng = np.random.default_rng(0)
    nodes, inits = rms_norm_nodes("x", "nx", "w", "n_", reciprocal)
    nodes.append(helper.make_node("MatMul", ["nx", "proj"], ["y"]))
    inits += [numpy_helper.from_array(rng.uniform(0.5, 1.5, 64).astype(np.float32), "w"),
              numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32) * 0.1, "proj")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims[:-1] + [32])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = str(tmp_path / name)
    onnx.save(m, path)
    return path


def norm_steps(stdout):
    return [line for line in stdout.splitlines() if line.strip().startswith("layernorm")]


def test_rms_norm_with_rsqrt_as_one_over_sqrt_is_one_step(tmp_path):
    # torch.rsqrt through the TorchScript exporter is Div(1, Sqrt(.)): every dynamo=False
    # export of a LLaMA-family model (Gemma 3, Qwen 3, Phi-3, Mixtral) writes its RMSNorm
    # so, and it ran as four steps (a pointwise Pow, a ReduceMean, the rsqrt pieces, the
    # products) instead of the row kernel the Reciprocal form gets.
    path = rms_model(tmp_path, [2, 16, 64])
    x = np.random.default_rng(1).standard_normal((2, 16, 64)).astype(np.float32)
    steps = norm_steps(run_natively(tmp_path, path, {"x": x}))
    assert len(steps) == 1 and "Div" in steps[0], steps


def test_open_input_dims_take_the_given_inputs_extents(tmp_path):
    # An export with dynamic batch and sequence axes, run on given inputs: the graph's
    # dims stayed symbolic, so every fusion that matches static shapes (RMSNorm here,
    # rotary embeddings, attention) was missed; Gemma 3's opset-17 export with dynamic
    # axes ran 1.4x ONNX Runtime's time, 0.52x once its dims are the inputs'.
    for form in ("Reciprocal", "Div"):
        path = rms_model(tmp_path, ["batch", "seq", 64], form, name=f"{form}.onnx")
        x = np.random.default_rng(2).standard_normal((3, 5, 64)).astype(np.float32)
        steps = norm_steps(run_natively(tmp_path, path, {"x": x}))
        assert len(steps) == 1, (form, steps)


def test_empty_slices_and_concats_with_an_empty_part_cost_nothing(tmp_path):
    # Phi-3 (partial_rotary_factor 1) rotates q[..., :rotary_dim] and concatenates
    # q[..., rotary_dim:], empty, back on: each empty Slice and each Concat with an
    # empty part ran on the reference kernel (4-5 us a step; 8 such steps were a third
    # of a two-layer decode step). The Slice is now a step that does nothing and the
    # Concat copies its other part natively.
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Slice", ["x", "s0", "s16", "ax"], ["rot"]),
             helper.make_node("Slice", ["x", "s16", "big", "ax"], ["rest"]),
             helper.make_node("Mul", ["rot", "cos"], ["r"]),
             helper.make_node("Neg", ["rest"], ["nrest"]),
             helper.make_node("Concat", ["r", "nrest"], ["y"], axis=-1)]
    i64 = lambda name, v: numpy_helper.from_array(np.array([v], np.int64), name)
    inits = [i64("s0", 0), i64("s16", 16), i64("big", 2**62), i64("ax", -1),
             numpy_helper.from_array(rng.standard_normal((1, 1, 5, 16)).astype(np.float32), "cos")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 5, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 5, 16])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    feeds = {"x": rng.standard_normal((2, 4, 5, 16)).astype(np.float32)}
    steps = run_natively(tmp_path, path, feeds)
    assert any(line.split()[:2] == ["copy", "Concat"] for line in steps.splitlines()), steps
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--no-onnxruntime",
               "--profile", "--report-json", str(tmp_path / "r.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    profile = json.load(open(tmp_path / "r.json"))["profile"]
    steps = profile["steps"] if isinstance(profile, dict) else profile
    refs = [s for s in steps if str(s.get("signature", "")).startswith("ref ")]
    assert not refs, refs


def test_python_runtime_fixes_open_input_dims_to_the_arrays(tmp_path):
    # isomer.run(engine="runtime") and isomer.benchmark() on given arrays fix a
    # dynamic export's open dims to their extents as `isomer run --inputs` does, so
    # the runtime fuses what it fuses at static shapes (the RMSNorm here).
    isomer_py = pytest.importorskip("isomer")
    path = rms_model(tmp_path, ["batch", "seq", 64], "Reciprocal")
    x = np.random.default_rng(4).standard_normal((3, 5, 64)).astype(np.float32)
    bench = isomer_py.benchmark(path, {"x": x}, threads=1, repeat=1, warmup=0)
    assert bench["step_kinds"].get("layernorm") == 1, bench["step_kinds"]
    got = isomer_py.run(path, {"x": x}, engine="runtime", threads=1)[0]
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("gelu", [True, False])
def test_tanh_gelu_written_out_by_torchscript_fuses(tmp_path, gelu):
    # BLOOM's GELU, x * 0.5 * (1 + tanh(0.79788456 x (1 + 0.044715 x x))), as the
    # TorchScript exporter writes it: x feeds four products, and the last product
    # reaches back five producers. Groups took producers two deep and lowered the rest
    # on their own first: three pointwise steps (three passes); with other constants
    # (not a GELU) it is now one. The GELU itself was not known in this form (only
    # GPT-2's x + 0.044715 x^3): it is now one GeluTanh, a post-op of the product.
    h, k, g = (0.5, 0.79788456, 0.044715) if gelu else (0.3, 0.7, 0.1)
    rng = np.random.default_rng(5)
    mk = helper.make_node
    nodes = [mk("MatMul", ["a", "w"], ["mm"]), mk("Add", ["mm", "b"], ["x"]),
             mk("Mul", ["x", "h"], ["A"]), mk("Mul", ["x", "k"], ["B"]), mk("Mul", ["x", "g"], ["C"]),
             mk("Mul", ["C", "x"], ["D"]), mk("Add", ["D", "one"], ["E"]), mk("Mul", ["B", "E"], ["F"]),
             mk("Tanh", ["F"], ["T"]), mk("Add", ["T", "one"], ["U"]), mk("Mul", ["A", "U"], ["y"])]
    inits = [numpy_helper.from_array(rng.standard_normal((64, 256)).astype(np.float32) * 0.1, "w"),
             numpy_helper.from_array(rng.standard_normal(256).astype(np.float32), "b"),
             const("h", h), const("k", k), const("g", g), const("one", 1.0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 16, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 256])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    steps = run_natively(tmp_path, path, {"a": rng.standard_normal((2, 16, 64)).astype(np.float32)})
    pointwise = [line for line in steps.splitlines() if line.strip().startswith("pointwise")]
    assert len(pointwise) == (0 if gelu else 1), steps
