"""A Resize of a convolution's output runs in the convolution's layout.

Convolutions write channel blocks or channels last; a nearest upsample between two
of them (YOLO's and FPN's necks) copies runs of a pixel's channels in that layout on
isomer's own kernel, with no reorder around it, and a linear or cubic one that
oneDNN's resampling does not compute (align_corners: DPT's fusion stages) blends
those runs in that layout too. Each case is checked against ONNX
Runtime at odd channel counts and extents, batch 2, several nearest modes and scales,
at 1 and 3 threads, and the plan is checked for the kernel it names.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")

# name: (N, C, H, W, Resize attributes, scales or None, sizes or None)
CASES = {
    "yolo_2x_floor_c64": (1, 64, 8, 8, dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                          [1, 1, 2, 2], None),
    "batch2_c24_odd": (2, 24, 5, 7, dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                       [1, 1, 2, 2], None),
    "c40_size_half_pixel": (1, 40, 5, 7, dict(coordinate_transformation_mode="half_pixel",
                                              nearest_mode="round_prefer_floor"), None, [1, 40, 13, 17]),
    "c48_scale3": (2, 48, 3, 4, dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                   [1, 1, 3, 3], None),
    "c33_down": (1, 33, 9, 11, dict(coordinate_transformation_mode="pytorch_half_pixel", nearest_mode="floor"),
                 None, [1, 33, 4, 6]),
    "c128_2x": (1, 128, 6, 5, dict(coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
                [1, 1, 2, 2], None),
}


def build(path, n, c, h, w, attrs, scales, sizes, mode="nearest"):
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((c, 8, 3, 3)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((16, c, 3, 3)) * 0.2).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    resize_in = ["c1", ""]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
        resize_in.append("scales")
    else:
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
        resize_in += ["", "sizes"]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c0"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c0"], ["c1"], name="relu"),
        helper.make_node("Resize", resize_in, ["up"], mode=mode, name="up", **attrs),
        helper.make_node("Conv", ["up", "w2"], ["y"], pads=[1, 1, 1, 1], name="conv2"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 8, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_nearest_resize_in_the_convolutions_layout(name, threads, tmp_path):
    n, c, h, w, attrs, scales, sizes = CASES[name]
    path = str(tmp_path / "m.onnx")
    build(path, n, c, h, w, attrs, scales, sizes)
    x = np.random.default_rng(5).standard_normal((n, 8, h, w)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, steps = run_isomer(path, x, threads, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    resize = [s for s in steps if "Resize" in s["ops"]]
    assert len(resize) == 1 and "nearest in layout" in resize[0]["signature"], steps
    # Only the model's input and output change layout.
    between = [s["label"] for s in steps[steps.index(resize[0]) - 1:steps.index(resize[0]) + 2] if s["kind"] == "reorder"]
    assert not between, steps


def run_isomer(path, x, threads, tmp_path):
    np.savez(tmp_path / "in.npz", x=x)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--no-onnxruntime", "--threads", str(threads), "--profile",
                        "--report-json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return np.load(tmp_path / "out.npz")["y"], json.load(open(tmp_path / "r.json"))["profile"]


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("n,c,h,w", [(1, 32, 5, 7), (1, 16, 9, 6), (1, 48, 3, 5)])
def test_resize_of_a_blocked_concatenation(n, c, h, w, threads, mode, tmp_path):
    # Two convolutions concatenated on channels (batch 1) are written in channel
    # blocks; the upsample copies (or blends) whole blocks.
    rng = np.random.default_rng(11)
    w1 = (rng.standard_normal((c, 16, 1, 1)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((c, 16, 1, 1)) * 0.2).astype(np.float32)
    w3 = (rng.standard_normal((8, 2 * c, 1, 1)) * 0.2).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"]),
        helper.make_node("Conv", ["x", "w2"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
        helper.make_node("Resize", ["cat", "", "s"], ["up"], mode=mode,
                         coordinate_transformation_mode="asymmetric" if mode == "nearest" else "align_corners"),
        helper.make_node("Conv", ["up", "w3"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in
             {"w1": w1, "w2": w2, "w3": w3, "s": np.array([1, 1, 2, 3], np.float32)}.items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, 16, h, w])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    x = rng.standard_normal((n, 16, h, w)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, steps = run_isomer(path, x, threads, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    resize = [s for s in steps if "Resize" in s["ops"]]
    assert len(resize) == 1 and f"{mode} " in resize[0]["signature"], steps
    assert " in layout " in resize[0]["signature"] and ":b1/16" in resize[0]["signature"], resize[0]["signature"]


# name: (N, C, H, W, mode, Resize attributes, scales or None, sizes or None)
TAP_CASES = {
    "dpt_align_corners_2x_c16": (1, 16, 9, 7, "linear", dict(coordinate_transformation_mode="align_corners"),
                                 [1, 1, 2, 2], None),
    "align_corners_sizes_c21": (2, 21, 5, 6, "linear", dict(coordinate_transformation_mode="align_corners"),
                                None, [2, 21, 13, 11]),
    "asymmetric_down_c33": (1, 33, 9, 11, "linear", dict(coordinate_transformation_mode="asymmetric"),
                            None, [1, 33, 4, 6]),
    "cubic_half_pixel_c24": (1, 24, 5, 7, "cubic", dict(coordinate_transformation_mode="half_pixel"),
                             [1, 1, 2, 2], None),
    "cubic_align_corners_c40": (2, 40, 4, 3, "cubic", dict(coordinate_transformation_mode="align_corners"),
                                [1, 1, 3, 3], None),
}


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("name", sorted(TAP_CASES))
def test_linear_and_cubic_resize_in_the_convolutions_layout(name, threads, tmp_path):
    n, c, h, w, mode, attrs, scales, sizes = TAP_CASES[name]
    path = str(tmp_path / "m.onnx")
    build(path, n, c, h, w, attrs, scales, sizes, mode)
    x = np.random.default_rng(5).standard_normal((n, 8, h, w)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, steps = run_isomer(path, x, threads, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    resize = [s for s in steps if "Resize" in s["ops"]]
    assert len(resize) == 1 and f"{mode} " in resize[0]["signature"] and " in layout " in resize[0]["signature"], steps
    at = steps.index(resize[0])
    assert not [s for s in steps[at - 1:at + 2] if s["kind"] == "reorder"], steps


@pytest.mark.parametrize("mode,attrs", [("linear", dict(coordinate_transformation_mode="half_pixel")),
                                        ("cubic", dict(coordinate_transformation_mode="align_corners")),
                                        ("nearest", dict(coordinate_transformation_mode="asymmetric"))])
def test_resize_to_the_same_size_is_no_step(mode, attrs, tmp_path):
    """SegFormer's decode head resizes its first stage to the size it already has: the
    output is the input, read where it lies."""
    path = str(tmp_path / "m.onnx")
    build(path, 1, 24, 7, 9, attrs, [1, 1, 1, 1], None, mode)
    x = np.random.default_rng(2).standard_normal((1, 8, 7, 9)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got, steps = run_isomer(path, x, 1, tmp_path)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert not [s for s in steps if "Resize" in s["ops"]] and not [s for s in steps if s["kind"] == "reorder"][1:-1], steps


def test_resize_to_the_same_size_as_the_graph_output(tmp_path):
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones(4, np.float32), "s")])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    x = np.random.default_rng(4).standard_normal((2, 3, 5, 4)).astype(np.float32)
    got, _ = run_isomer(path, x, 1, tmp_path)
    np.testing.assert_array_equal(got, x)
