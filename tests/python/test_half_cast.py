"""Casts between float32 and float16 / bfloat16 on isomer's runtime against numpy
(ml_dtypes for bfloat16): round to nearest even, overflow to infinity, subnormals,
signed zeros and NaNs, over runs long enough for the vector conversions and their
tails (tests/cpp/half_convert_test.cpp checks the kernels bit by bit)."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ml_dtypes = pytest.importorskip("ml_dtypes")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def edge_values():
    f = np.float32
    v = [0.0, 1.0, 65504.0, 65519.99, 65520.0, 65536.0, 1e30, np.inf, np.nan,
         np.finfo(f).tiny, np.finfo(f).max, np.finfo(f).smallest_subnormal,
         2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -26, 2.0 ** -14, 1023 * 2.0 ** -24,
         1023.5 * 2.0 ** -24, 1022.5 * 2.0 ** -24, 3 * 2.0 ** -25]
    v = np.array(v, dtype=f)
    # Halfway and near-halfway mantissas of half (13 dropped bits) and bfloat16 (16).
    halfway = (np.uint32(0x3F800000) | np.array([0x1000, 0x3000, 0x8000, 0x18000, 0xFFF, 0x1001, 0x7FFF],
                                                dtype=np.uint32)).view(f)
    rng = np.random.default_rng(3)
    random_bits = rng.integers(0, 2 ** 32, size=3000, dtype=np.uint64).astype(np.uint32).view(f)
    v = np.concatenate([v, halfway, random_bits, rng.uniform(-7e4, 7e4, 1000).astype(f)])
    return np.concatenate([v, -v])  # 8194 values: vector runs and a tail


def cast_model(path):
    """x (float32) -> y16 = Cast(x, float16), ybf = Cast(Cast(x, bfloat16), float32);
    h (float16) -> hf = Cast(h, float32)."""
    n = len(edge_values())
    nodes = [helper.make_node("Cast", ["x"], ["y16"], to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["x"], ["xbf"], to=TensorProto.BFLOAT16),
             helper.make_node("Cast", ["xbf"], ["ybf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["h"], ["hf"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "casts",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n]),
                           helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2, 32768])],
                          [helper.make_tensor_value_info("y16", TensorProto.FLOAT16, [1, n]),
                           helper.make_tensor_value_info("ybf", TensorProto.FLOAT, [1, n]),
                           helper.make_tensor_value_info("hf", TensorProto.FLOAT, [2, 32768])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def same(got, want):
    """Equal bit for bit, except that a NaN need only be a NaN of the same sign."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(np.signbit(got[nan]), np.signbit(want[nan]))
    assert np.array_equal(got[~nan].view(np.uint8), want[~nan].view(np.uint8)), \
        [(w, g) for w, g in zip(want[~nan].ravel(), got[~nan].ravel()) if w.tobytes() != g.tobytes()][:5]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_casts_match_numpy_on_edge_values(tmp_path, threads):
    path = str(tmp_path / "casts.onnx")
    cast_model(path)
    x = edge_values()[None, :]
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).reshape(2, 32768)  # every pattern
    np.savez(tmp_path / "in.npz", x=x, h=h)
    p = subprocess.run([ISOMER, "run", path, "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--threads", threads, "--no-onnxruntime"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = np.load(tmp_path / "out.npz")
    with np.errstate(over="ignore", invalid="ignore"):
        same(out["y16"], x.astype(np.float16))
        same(out["ybf"], x.astype(ml_dtypes.bfloat16).astype(np.float32))
    same(out["hf"], h.astype(np.float32))
