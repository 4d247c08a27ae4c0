"""The operators current PyTorch/ONNX exports use run natively on isomer's runtime.

Their node tests in Debian's libonnx-testdata are checked in test_runtime.py (outputs,
and that they plan no step on ONNX Runtime or the reference kernel). The forms newer
than that test data (RMSNormalization at opset 23, GroupNormalization at 18 and 21,
reductions with an axes input at opset 18) and the patterns exporters write (masks,
position ids, rotary tables, Einsum attention) are built here with onnx.helper and
checked against ONNX Runtime, each planned without such steps.
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

def isomer(*args):
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=120)


def steps_of(stdout):
    return [line.split()[0] for line in stdout.splitlines()
            if line.startswith("  ") and len(line.split()) >= 2 and not line.strip().startswith(("output", "1 ", "2 "))]


# ---- models built here, against ONNX Runtime 1.32 ---------------------------------------

def save(tmp_path, nodes, inputs, outputs, opset, inits=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    return path


def run_both(tmp_path, path, feeds):
    np.savez(tmp_path / "in.npz", **feeds)
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs", str(tmp_path / "out.npz"),
               "--print-steps", "--threads", "1")
    if p.returncode != 0 and "unsupported opset" in p.stderr:
        pytest.skip(p.stderr.strip())  # the importer does not read this opset yet
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime" not in p.stdout and "reference kernels" not in p.stdout, p.stdout
    got = np.load(tmp_path / "out.npz")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    for o, w in zip(sess.get_outputs(), want):
        if w.dtype.kind == "f":
            np.testing.assert_allclose(got[o.name], w, rtol=1e-4, atol=1e-5, err_msg=o.name)
        else:
            np.testing.assert_array_equal(got[o.name], w, err_msg=o.name)
    return p.stdout


F = TensorProto.FLOAT
rng = np.random.default_rng(7)


def test_rms_normalization_opset_23(tmp_path):
    scale = numpy_helper.from_array(rng.uniform(0.5, 1.5, 16).astype(np.float32), "scale")
    path = save(tmp_path, [helper.make_node("RMSNormalization", ["x", "scale"], ["y"], epsilon=1e-6)],
                [("x", F, [2, 5, 16])], [("y", F)], 23, [scale])
    out = run_both(tmp_path, path, {"x": rng.standard_normal((2, 5, 16)).astype(np.float32)})
    assert "layernorm   RMSNormalization" in out


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_both_forms(tmp_path, opset):
    # Opset 18 gives scale and bias per group, 21 per channel.
    n = 2 if opset == 18 else 6
    scale = numpy_helper.from_array(rng.uniform(0.5, 1.5, n).astype(np.float32), "scale")
    bias = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias")
    path = save(tmp_path, [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=2)],
                [("x", F, [2, 6, 4, 4])], [("y", F)], opset, [scale, bias])
    if opset == 18 and not ort_supports(path):
        pytest.skip("ONNX Runtime has no opset 18 GroupNormalization")
    run_both(tmp_path, path, {"x": rng.standard_normal((2, 6, 4, 4)).astype(np.float32)})


def ort_supports(path):
    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        return True
    except Exception:  # noqa: BLE001 (any load failure means unsupported)
        return False


def test_reductions_with_an_axes_input_at_opset_18(tmp_path):
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    ops = ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"]
    nodes = [helper.make_node(op, ["x", "axes"], [op], keepdims=k % 2) for k, op in enumerate(ops)]
    nodes.append(helper.make_node("ReduceMax", ["x"], ["all"], keepdims=0))  # no axes: every axis
    path = save(tmp_path, nodes, [("x", F, [3, 4, 5])], [(op, F) for op in ops] + [("all", F)], 18, [axes])
    run_both(tmp_path, path, {"x": rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)})


def test_masks_positions_and_argmax_as_exporters_write_them(tmp_path):
    # HuggingFace: position ids from an int64 CumSum of the attention mask; a causal
    # mask from Trilu; comparisons, Not/And/Where; ArgMax over the logits.
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    ones = numpy_helper.from_array(np.ones((6, 6), np.float32), "ones")
    zero = numpy_helper.from_array(np.array(0, np.float32), "zero")
    ninf = numpy_helper.from_array(np.array(-1e9, np.float32), "ninf")
    nodes = [
        helper.make_node("CumSum", ["mask", "one"], ["cs"]),
        helper.make_node("Sub", ["cs", "one"], ["pos"]),
        helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
        helper.make_node("Greater", ["tri", "zero"], ["causal"]),
        helper.make_node("Cast", ["mask"], ["mb"], to=TensorProto.BOOL),
        helper.make_node("Unsqueeze", ["mb", "ax1"], ["mb3"]),
        helper.make_node("And", ["causal", "mb3"], ["keep"]),
        helper.make_node("Not", ["keep"], ["drop"]),
        helper.make_node("Where", ["drop", "ninf", "scores"], ["masked"]),
        helper.make_node("LogSoftmax", ["masked"], ["lp"], axis=-1),
        helper.make_node("ArgMax", ["lp"], ["best"], axis=-1, keepdims=0, select_last_index=1),
        helper.make_node("Mod", ["pos", "two"], ["parity"]),
    ]
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    ax1 = numpy_helper.from_array(np.array([1], np.int64), "ax1")
    path = save(tmp_path, nodes, [("mask", TensorProto.INT64, [2, 6]), ("scores", F, [2, 6, 6])],
                [("pos", TensorProto.INT64), ("lp", F), ("best", TensorProto.INT64), ("parity", TensorProto.INT64)],
                17, [one, ones, zero, ninf, two, ax1])
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], np.int64)
    run_both(tmp_path, path, {"mask": mask, "scores": rng.standard_normal((2, 6, 6)).astype(np.float32)})


def test_argmax_of_integer_ids_as_clip_pools_them(tmp_path):
    # CLIP's text model pools at the end-of-text token: (ids == eos).int().argmax(-1),
    # an ArgMax over int32; ArgMin and select_last_index over int64 along a strided axis.
    eos = numpy_helper.from_array(np.array(7, np.int64), "eos")
    nodes = [
        helper.make_node("Equal", ["ids", "eos"], ["is_eos"]),
        helper.make_node("Cast", ["is_eos"], ["is_eos32"], to=TensorProto.INT32),
        helper.make_node("ArgMax", ["is_eos32"], ["at"], axis=-1, keepdims=0),
        helper.make_node("ArgMax", ["ids"], ["top"], axis=0, keepdims=1, select_last_index=1),
        helper.make_node("ArgMin", ["ids"], ["low"], axis=1, keepdims=0),
    ]
    path = save(tmp_path, nodes, [("ids", TensorProto.INT64, [3, 40])],
                [("at", TensorProto.INT64), ("top", TensorProto.INT64), ("low", TensorProto.INT64)], 18, [eos])
    ids = rng.integers(0, 9, (3, 40)).astype(np.int64)
    ids[:, 0] = np.iinfo(np.int64).min  # extremes at either end of int64
    ids[1, 39] = np.iinfo(np.int64).max
    run_both(tmp_path, path, {"ids": ids})


def test_einsum_attention_is_matmuls(tmp_path):
    nodes = [helper.make_node("Einsum", ["q", "k"], ["s"], equation="bqhd,bkhd->bhqk"),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("Einsum", ["p", "k"], ["o"], equation="bhqk,bkhd->bqhd")]
    path = save(tmp_path, nodes, [("q", F, [2, 7, 4, 8]), ("k", F, [2, 7, 4, 8])], [("o", F)], 17)
    out = run_both(tmp_path, path, {"q": rng.standard_normal((2, 7, 4, 8)).astype(np.float32),
                                    "k": rng.standard_normal((2, 7, 4, 8)).astype(np.float32)})
    assert steps_of(out).count("matmul") == 2, out


def test_einsum_of_stacked_expert_weights_copies_nothing_per_run(tmp_path):
    """A dense MoE's 'bsd,edf->bsef': the constant [E, D, F] read as [D, (E, F)] is laid
    out so once, when the graph is compiled; it was copied by a step on every run."""
    w = numpy_helper.from_array(rng.standard_normal((5, 12, 9)).astype(np.float32), "w")
    nodes = [helper.make_node("Einsum", ["x", "w"], ["y"], equation="bsd,edf->bsef")]
    path = save(tmp_path, nodes, [("x", F, [2, 3, 12])], [("y", F)], 17, [w])
    out = run_both(tmp_path, path, {"x": rng.standard_normal((2, 3, 12)).astype(np.float32)})
    assert steps_of(out) == ["matmul"], out


@pytest.mark.parametrize("op,itype,axes,keep", [("ReduceSum", TensorProto.INT64, [0], 0),
                                                ("ReduceSum", TensorProto.INT32, [1, 2], 1),
                                                ("ReduceMax", TensorProto.INT64, [2], 0),
                                                ("ReduceMin", TensorProto.INT32, [0, 1], 1)])
def test_integer_reductions(tmp_path, op, itype, axes, keep):
    """An MoE router counts the tokens of each expert with ReduceSum of a OneHot (int64);
    integer sums and extremes run natively, not on the reference kernel."""
    ax = numpy_helper.from_array(np.array(axes, np.int64), "axes")
    nodes = [helper.make_node(op, ["x", "axes"], ["y"], keepdims=keep)]
    path = save(tmp_path, nodes, [("x", itype, [5, 3, 7])], [("y", itype)], 18, [ax])
    dtype = np.int64 if itype == TensorProto.INT64 else np.int32
    out = run_both(tmp_path, path, {"x": rng.integers(-1000, 1000, (5, 3, 7)).astype(dtype)})
    assert steps_of(out) == ["reduce"], out


def test_rotary_tables_and_activations(tmp_path):
    inv = numpy_helper.from_array((1.0 / 10000 ** (np.arange(0, 8, 2) / 8)).astype(np.float32).reshape(1, 4), "inv")
    slope = numpy_helper.from_array(np.full((8, 1), 0.2, np.float32), "slope")
    nodes = [
        helper.make_node("Mul", ["t", "inv"], ["f"]),
        helper.make_node("Concat", ["f", "f"], ["emb"], axis=-1),
        helper.make_node("Cos", ["emb"], ["cos"]),
        helper.make_node("Sin", ["emb"], ["sin"]),
        helper.make_node("Mul", ["x", "cos"], ["xc"]),
        helper.make_node("Mul", ["x", "sin"], ["xs"]),
        helper.make_node("Sum", ["xc", "xs", "x"], ["r"]),
        helper.make_node("Mish", ["r"], ["m"]),
        helper.make_node("PRelu", ["m", "slope"], ["pr"]),
        helper.make_node("Celu", ["pr"], ["ce"], alpha=0.5),
        helper.make_node("Mean", ["ce", "r"], ["y"]),
        helper.make_node("GlobalMaxPool", ["y4"], ["gmp"]),
    ]
    nodes.insert(-1, helper.make_node("Unsqueeze", ["y", "zero"], ["y4"]))
    zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
    path = save(tmp_path, nodes, [("t", F, [8, 1]), ("x", F, [8, 8])], [("y", F), ("gmp", F)], 18,
                [inv, slope, zero])
    out = run_both(tmp_path, path, {"t": np.arange(8, dtype=np.float32).reshape(8, 1),
                                    "x": rng.standard_normal((8, 8)).astype(np.float32)})
    assert steps_of(out).count("pointwise") <= 2, out  # the elementwise chain fuses


@pytest.mark.parametrize("data_shape,idx_shape,batch_dims,dtype", [
    ([5, 4, 3], [6, 1], 0, np.float32),         # whole rows
    ([5, 4, 3], [2, 3, 2], 0, np.float32),      # pairs of coordinates: slices of the last axis
    ([5, 4, 3], [7, 3], 0, np.int64),           # single elements
    ([2, 4, 3], [2, 5, 1], 1, np.float32),      # one batch axis
    ([2, 3, 4, 5], [2, 3, 2, 1], 2, np.float32),  # two batch axes
    ([1, 1, 8, 8], [1, 1, 8, 8, 4], 0, np.bool_),   # transformers' mask indexing: bool data, 4-tuples
])
def test_gather_nd(tmp_path, data_shape, idx_shape, batch_dims, dtype):
    """GatherND (torch's advanced indexing: transformers builds BERT's attention mask
    with it) runs natively, negative indices included, against ONNX Runtime."""
    rng = np.random.default_rng(len(data_shape) * 10 + batch_dims)
    k = idx_shape[-1]
    extents = data_shape[batch_dims:batch_dims + k]
    idx = np.stack([rng.integers(-e, e, size=idx_shape[:-1]) for e in extents], axis=-1).astype(np.int64)
    data = rng.standard_normal(data_shape) > 0 if dtype is np.bool_ else (rng.standard_normal(data_shape) * 10).astype(dtype)
    onnx_type = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL}[dtype]
    path = save(tmp_path, [helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)],
                [("x", onnx_type, data_shape), ("i", TensorProto.INT64, idx_shape)], [("y", onnx_type)], 13)
    out = run_both(tmp_path, path, {"x": data, "i": idx})
    assert "gather" in steps_of(out), out


def test_gather_nd_out_of_range_index_is_one_clear_error(tmp_path):
    path = save(tmp_path, [helper.make_node("GatherND", ["x", "i"], ["y"], name="pick")],
                [("x", TensorProto.FLOAT, [3, 4]), ("i", TensorProto.INT64, [2, 1])], [("y", TensorProto.FLOAT)], 13)
    np.savez(tmp_path / "in.npz", x=np.ones((3, 4), np.float32), i=np.array([[0], [3]], np.int64))
    p = isomer("run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--no-onnxruntime")
    assert p.returncode != 0
    assert "pick" in p.stderr and "out of range" in p.stderr and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("op,opset", [("ReduceMean", 13), ("ReduceMean", 18), ("ReduceMax", 18)])
def test_spatial_reduction_of_a_convolution_is_global_pooling(tmp_path, op, opset):
    """Squeeze-and-excitation as torch 2 exports it: ReduceMean over H and W of a
    convolution's output. It runs as global pooling on the convolution's blocked
    layout, with no reorder to plain and no reduction kernel."""
    rng = np.random.default_rng(3)
    w1 = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.2, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 32, 1, 1)).astype(np.float32) * 0.2, "w2")
    inits = [w1, w2]
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array([2, -1], np.int64), "axes"))
        reduce = helper.make_node(op, ["c", "axes"], ["s"], keepdims=1)
    else:
        reduce = helper.make_node(op, ["c"], ["s"], axes=[2, 3], keepdims=1)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]), reduce,
             helper.make_node("Conv", ["s", "w2"], ["y"])]
    path = save(tmp_path, nodes, [("x", TensorProto.FLOAT, [1, 16, 20, 20])], [("y", TensorProto.FLOAT)], opset, inits)
    out = run_both(tmp_path, path, {"x": rng.standard_normal((1, 16, 20, 20)).astype(np.float32)})
    steps = steps_of(out)
    assert "pool" in steps and "reduce" not in steps and "reorder" not in steps[1:], out
