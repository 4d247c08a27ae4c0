"""Upsampling as PyTorch exports it runs natively and as ONNX Runtime computes it.

nn.ConvTranspose2d (UNet decoders), F.interpolate / nn.Upsample (nearest, bilinear,
bicubic; align_corners both ways; scale_factor and size: FPN necks, segmentation
heads) and nn.PixelShuffle / PixelUnshuffle (super-resolution) exported by torch:
isomer's reference evaluator and its runtime (which must plan no step on ONNX
Runtime or the reference kernel) both match ONNX Runtime.
"""
import glob
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
isomer_py = pytest.importorskip("isomer")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")
nn, F = torch.nn, torch.nn.functional


class Interpolate(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


# name: (module, input shape)
MODELS = {
    "deconv_s2_k3_p1_op1": (nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1), (1, 6, 7, 9)),
    "deconv_unet_k2_s2": (nn.ConvTranspose2d(8, 4, 2, stride=2), (2, 8, 6, 5)),
    "deconv_k3_s2_op1_no_pad": (nn.ConvTranspose2d(5, 3, 3, stride=2, output_padding=1), (1, 5, 6, 7)),
    "deconv_groups_dilation": (nn.ConvTranspose2d(6, 4, 3, stride=2, padding=2, dilation=2, groups=2,
                                                  output_padding=1), (1, 6, 5, 6)),
    "deconv_no_bias_relu": (nn.Sequential(nn.ConvTranspose2d(4, 8, 4, stride=2, padding=1, bias=False), nn.ReLU()),
                            (1, 4, 5, 5)),
    "deconv_1d": (nn.ConvTranspose1d(3, 5, 3, stride=3, padding=1), (1, 3, 11)),
    "nearest_scale2": (Interpolate(scale_factor=2, mode="nearest"), (1, 3, 5, 7)),
    "nearest_size": (Interpolate(size=(13, 17), mode="nearest"), (1, 3, 5, 7)),
    "nearest_down": (Interpolate(size=(3, 4), mode="nearest"), (1, 2, 7, 9)),
    "bilinear_scale2": (Interpolate(scale_factor=2, mode="bilinear", align_corners=False), (1, 3, 5, 7)),
    "bilinear_scale2_corners": (Interpolate(scale_factor=2, mode="bilinear", align_corners=True), (1, 3, 5, 7)),
    "bilinear_size": (Interpolate(size=(11, 6), mode="bilinear", align_corners=False), (2, 3, 5, 7)),
    "bilinear_size_corners": (Interpolate(size=(11, 6), mode="bilinear", align_corners=True), (2, 3, 5, 7)),
    "bicubic_scale2": (Interpolate(scale_factor=2, mode="bicubic", align_corners=False), (1, 2, 6, 5)),
    "upsample_module": (nn.Upsample(scale_factor=3, mode="nearest"), (1, 2, 4, 4)),
    "pixel_shuffle": (nn.PixelShuffle(3), (1, 18, 4, 5)),
    "pixel_unshuffle": (nn.PixelUnshuffle(2), (1, 3, 6, 8)),
}


def export(module, shape, path):
    torch.manual_seed(0)
    for p in module.parameters():
        torch.nn.init.uniform_(p, -0.5, 0.5)
    module.eval()
    torch.onnx.export(module, torch.zeros(shape), path, input_names=["x"], output_names=["y"], opset_version=13)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_reference_and_runtime_match_onnxruntime(name, tmp_path):
    module, shape = MODELS[name]
    path = str(tmp_path / f"{name}.onnx")
    export(module, shape, path)
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ref = isomer_py.run(path, {"x": x})
    got_ref = ref["y"] if isinstance(ref, dict) else ref[0]
    np.testing.assert_allclose(got_ref, want, rtol=1e-5, atol=1e-5, err_msg="reference evaluator")
    np.savez(tmp_path / "in.npz", x=x)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--print-steps", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime" not in p.stdout and "reference kernels" not in p.stdout, p.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-4, atol=1e-5, err_msg="runtime")


def test_bad_attributes_name_the_node_and_the_reason(tmp_path):
    """A node whose attributes contradict ONNX's definition of the operator (a DepthToSpace
    block that does not divide the channels, a Resize mode ONNX does not have, a
    ConvTranspose output_padding not below its stride; ONNX Runtime refuses each) is
    refused at import, naming it and the reason."""
    from onnx import helper, TensorProto
    import onnx
    cases = {
        "Resize": ([helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="quadratic")],
                   "mode must be nearest, linear or cubic"),
        "DepthToSpace": ([helper.make_node("DepthToSpace", ["x"], ["y"], name="d2s", blocksize=3)],
                         "not divisible"),
        "ConvTranspose": ([helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up", strides=[2, 2],
                                            output_padding=[2, 2])], "output_padding"),
    }
    for op, (nodes, reason) in cases.items():
        inits = [helper.make_tensor("s", TensorProto.FLOAT, [4], [1, 1, 2, 2]),
                 helper.make_tensor("w", TensorProto.FLOAT, [4, 2, 3, 3], [0.1] * 72)]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        path = str(tmp_path / f"{op}.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
        p = subprocess.run([ISOMER, "show", path], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and f"node '{nodes[0].name}' ({op})" in p.stderr and reason in p.stderr, p.stderr
        assert path in p.stderr, p.stderr


TESTDATA = "/usr/share/libonnx-testdata/data/node"
RESIZE_CASES = sorted(glob.glob(os.path.join(TESTDATA, "test_resize_*")))


def load_pb(path):
    from onnx import numpy_helper, TensorProto
    t = TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("case", RESIZE_CASES, ids=os.path.basename)
def test_resize_node_cases_with_constant_extents(case, tmp_path):
    """ONNX's Resize node tests take scales, sizes and roi as graph inputs, so the runtime
    delegates them whole (test_runtime.py); made initializers, as exporters write them, the
    reference evaluator and the runtime (natively) must give ONNX's expected outputs."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(os.path.join(case, "model.onnx"))
    data = os.path.join(case, "test_data_set_0")
    names = [i.name for i in model.graph.input]
    values = {n: load_pb(os.path.join(data, f"input_{k}.pb")) for k, n in enumerate(names)}
    want = load_pb(os.path.join(data, "output_0.pb"))
    keep = [i for i in model.graph.input if i.name == "X"]
    for i in list(model.graph.input):
        if i.name != "X":
            model.graph.initializer.append(numpy_helper.from_array(values[i.name], i.name))
    del model.graph.input[:]
    model.graph.input.extend(keep)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    x = values["X"]
    ref = isomer_py.run(path, {"X": x})
    got_ref = ref[model.graph.output[0].name] if isinstance(ref, dict) else ref[0]
    np.testing.assert_allclose(got_ref, want, rtol=1e-5, atol=1e-5, err_msg="reference evaluator")
    np.savez(tmp_path / "in.npz", X=x)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--print-steps", "--threads", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ONNX Runtime" not in p.stdout, p.stdout
    # tf_crop_and_resize's extrapolation and axes changed other than the last two: the reference kernel.
    if "tf_crop_and_resize" not in case:
        assert "reference kernels" not in p.stdout, p.stdout
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")[model.graph.output[0].name], want, rtol=1e-4,
                               atol=1e-5, err_msg="runtime")
