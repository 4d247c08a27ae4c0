"""Grouped strided ConvTranspose.

A ConvTranspose2d of groups 4 with 4 channels a group (stride 2, output_padding
1) ran on oneDNN's jit deconvolution in 4-channel blocks at about 5 times ONNX
Runtime's time; a grouped strided one now runs as the ungrouped ones do: a
grouped 1x1 convolution to one channel per (group, kernel tap, output channel)
and a scatter of those into the output pixels. Each case is compared with ONNX
Runtime at 1 and 2 threads (odd extents, asymmetric pads, dilations, strides 2
and 3, output_padding, 1-D to 3-D, batch 2), and the plan is checked: no oneDNN
deconvolution (but depthwise), no reference kernel.
"""
import numpy as np
import pytest

from test_vision_s25 import deconv_model, run_native, steps_of

# name: (input shape, output channels, kernel, attributes)
GROUPED = {
    "2d_g4_s2_op1": ((2, 16, 7, 9), 16, [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1],
                                                      group=4)),
    "2d_g2_s3_asym_dil": ((1, 6, 5, 7), 10, [3, 2], dict(strides=[3, 2], pads=[2, 0, 1, 1], dilations=[2, 1],
                                                         output_padding=[1, 0], group=2)),
    "2d_g4_k4_s2_relu": ((2, 8, 6, 5), 20, [4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1], relu=True, group=4)),
    "2d_g2_leaky_nobias": ((1, 4, 5, 6), 12, [3, 3], dict(strides=[2, 2], relu="leaky", bias=False, group=2)),
    "2d_g2_m4_s2": ((1, 6, 6, 6), 8, [4, 4], dict(strides=[2, 2], pads=[1, 1, 1, 1], group=2)),
    "2d_g4_m2_s3": ((1, 8, 5, 7), 8, [3, 3], dict(strides=[3, 3], pads=[1, 0, 0, 1], group=4)),
    "2d_g2_m7_s2": ((1, 4, 5, 4), 14, [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1], group=2)),
    "1d_g4_s3_dilated": ((2, 8, 11), 20, [5], dict(strides=[3], pads=[2, 1], dilations=[2], group=4)),
    "1d_g2_s2_op1": ((1, 6, 13), 8, [3], dict(strides=[2], pads=[0, 1], output_padding=[1], group=2)),
    "3d_g2_s2_op1": ((2, 4, 3, 4, 3), 10, [3, 3, 2], dict(strides=[2, 2, 2], pads=[1, 0, 1, 1, 1, 0],
                                                         output_padding=[1, 0, 1], group=2)),
    "2d_g4_output_shape": ((1, 8, 5, 6), 16, [3, 3], dict(strides=[2, 2], output_shape=[12, 13], group=4)),
    "2d_g1_s2_op1": ((2, 5, 7, 6), 3, [3, 3], dict(strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])),
}


@pytest.mark.parametrize("name", sorted(GROUPED))
def test_grouped_strided_conv_transpose_matches_onnxruntime(tmp_path, name):
    shape, c_out, kernel, attrs = GROUPED[name]
    attrs = dict(attrs)
    relu, bias = attrs.pop("relu", False), attrs.pop("bias", True)
    model = deconv_model(list(shape), c_out, kernel, bias=bias, relu=relu, **attrs)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    for threads in (1, 2):
        out = run_native(tmp_path, model, x, threads)
        assert "deconv" not in steps_of(out, "up"), out


def test_grouped_conv_transpose_runs_as_grouped_taps_and_a_scatter(tmp_path):
    """The 4.95x case: groups 4 of 4 channels, kernel 3, stride 2, padding 1,
    output_padding 1, batch 2 of 12x12: a 1x1 convolution to the taps, then the
    copy that adds them into the pixels."""
    model = deconv_model([2, 16, 12, 12], 16, [3, 3], group=4, strides=[2, 2], pads=[1, 1, 1, 1],
                         output_padding=[1, 1])
    x = np.random.default_rng(0).standard_normal((2, 16, 12, 12)).astype(np.float32)
    out = run_native(tmp_path, model, x)
    assert [k for k in steps_of(out, "up") if k != "reorder"] == ["conv", "copy"], out


def test_depthwise_conv_transpose_stays_on_a_deconvolution(tmp_path):
    """One output channel a group: the scatter's runs of one float took as long as
    oneDNN's deconvolution (kernel 4, stride 2)."""
    model = deconv_model([1, 8, 9, 10], 8, [4, 4], group=8, strides=[2, 2], pads=[1, 1, 1, 1])
    x = np.random.default_rng(0).standard_normal((1, 8, 9, 10)).astype(np.float32)
    out = run_native(tmp_path, model, x)
    assert "deconv" in steps_of(out, "up"), out
