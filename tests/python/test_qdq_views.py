"""Views between a DequantizeLinear and a QuantizeLinear of the same scale and zero
point (quantize_static's head split in a BERT: Q(Transpose(DQ(Q(Reshape(DQ(q)))))))
move the integers: no quantize, dequantize or copy step is run for them, and the outputs
are ONNX Runtime's but for a rounding flip of the Mul after them."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")
isomer = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")


def steps_of(model, x, tmp_path):
    """`model` saved and run on x at 1 thread: its path and its steps' kinds."""
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **x)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--threads", "1", "--print-steps",
                        "--no-onnxruntime"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return path, [line.split()[0] for line in p.stdout.splitlines()
                  if line.startswith("  ") and not line.strip().startswith("output")]


def head_split(qtype, rescale):
    """x [2, 5, 12] quantized, reshaped to heads [2, 5, 3, 4] and transposed to
    [2, 3, 5, 4], each view between a DQ and a Q (of other parameters after the
    transpose where `rescale`), then scaled by a Mul in its own QDQ pair; the
    dequantized reshape is also an output: it is computed, and its view still
    moves the integers."""
    np_t = np.uint8 if qtype == TensorProto.UINT8 else np.int8
    t = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    zp = np_t(131 if qtype == TensorProto.UINT8 else 3)
    inits = [t("s", np.float32(0.0123)), t("z", zp), t("s2", np.float32(0.0123 * (1.5 if rescale else 1))),
             t("k", np.float32(0.7)), t("sy", np.float32(0.0091)), t("zy", zp),
             t("shape", np.array([2, 5, 3, 4], np.int64))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q0"]),
             helper.make_node("DequantizeLinear", ["q0", "s", "z"], ["d0"]),
             helper.make_node("Reshape", ["d0", "shape"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "s", "z"], ["d1"]),
             helper.make_node("Transpose", ["d1"], ["tr"], perm=[0, 2, 1, 3]),
             helper.make_node("QuantizeLinear", ["tr", "s2", "z"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z"], ["d2"]),
             helper.make_node("Mul", ["d2", "k"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "sy", "zy"], ["qy"]),
             helper.make_node("DequantizeLinear", ["qy", "sy", "zy"], ["y"])]
    g = helper.make_graph(nodes, "head_split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 5, 4]),
                           helper.make_tensor_value_info("d1", TensorProto.FLOAT, [2, 5, 3, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("qtype", [TensorProto.UINT8, TensorProto.INT8])
@pytest.mark.parametrize("rescale", [False, True])
def test_views_between_equal_qdq_pairs_move_the_integers(qtype, rescale, tmp_path):
    x = {"x": (np.random.default_rng(3).random((2, 5, 12), dtype=np.float32) * 3 - 1.2)}
    path, kinds = steps_of(head_split(qtype, rescale), x, tmp_path)
    # Q(x); the Reshape's pair moves the integers; the Transpose's too unless its Q
    # rescales; the DQ of the reshape (an output); DQ, Mul and Q as one step
    # (lower_qdq_affine.cpp); the last DQ.
    assert kinds.count("quantize") == (2 if rescale else 1), kinds
    assert kinds.count("dequantize") == 2 and kinds.count("quantize-affine") == 1, kinds
    assert "copy" not in kinds, kinds  # the transposed integers are dequantized as they lie
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, x)
    for threads in (1, 2):
        got = isomer.run(path, x, engine="runtime", threads=threads)
        np.testing.assert_array_equal(got[1], want[1])
        d = np.abs(got[0].astype(np.float64) - want[0]) / 0.0091
        assert d.max() <= 1 + 1e-6 and (d >= 0.5).mean() <= 0.1, d.max()


def test_slices_and_gathers_between_equal_qdq_pairs_move_the_integers(tmp_path):
    """Q(Gather(Slice(DQ(q)))) of one scale and zero point is the slice and gather of
    q: the quantized input is quantized once and the result dequantized once."""
    t = lambda name, v: numpy_helper.from_array(np.asarray(v), name)
    inits = [t("s", np.float32(0.021)), t("z", np.uint8(77)), t("starts", np.array([1], np.int64)),
             t("ends", np.array([6], np.int64)), t("axes", np.array([1], np.int64)),
             t("idx", np.array([0, 6, 3], np.int64))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q0"]),
             helper.make_node("DequantizeLinear", ["q0", "s", "z"], ["d0"]),
             helper.make_node("Slice", ["d0", "starts", "ends", "axes"], ["sl"]),
             helper.make_node("Gather", ["sl", "idx"], ["g"], axis=2),
             helper.make_node("QuantizeLinear", ["g", "s", "z"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "pick", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5, 3])], inits)
    x = {"x": (np.random.default_rng(4).random((2, 7, 9), dtype=np.float32) * 5 - 1.5)}
    path, kinds = steps_of(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), x,
                           tmp_path)
    assert kinds.count("quantize") == 1 and kinds.count("dequantize") == 1, kinds
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, x)[0]
    for threads in (1, 2):
        np.testing.assert_array_equal(isomer.run(path, x, engine="runtime", threads=threads)[0], want)
