"""Models as torch 2.15's dynamo exporter writes them (tests/models/make_dynamo_exports.py):
a GQA decode step against a KV cache, whose scaled_dot_product_attention(enable_gqa=True)
becomes Unsqueezes with 0-d axes tensors, and torch.cond, an If. Both run on isomer's
own kernels (no step on ONNX Runtime, and with --no-onnxruntime), match ONNX Runtime,
and go through optimize to valid ONNX."""
import os
import subprocess

import onnx
import pytest

pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args):
    return subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["gqa_decode_dynamo", "cond_dynamo"])
def test_dynamo_export_runs_natively_and_optimizes(tmp_path, name):
    path = os.path.join(MODELS, name + ".onnx")
    for seed in ("0", "3"):  # cond: the sum's sign picks the branch; seed 0 takes sigmoid, 3 relu
        p = isomer("run", path, "--bench", "--repeat", "3", "--print-steps", "--seed", seed, "--threads", "1")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "outputs match ONNX Runtime's" in p.stdout, p.stdout
        assert "onnxruntime " not in p.stdout and "steps run on ONNX Runtime" not in p.stdout, p.stdout
    p = isomer("run", path, "--no-onnxruntime")
    assert p.returncode == 0, p.stdout + p.stderr
    out = str(tmp_path / "o.onnx")
    p = isomer("optimize", path, "-o", out, "--no-guard", "--threads", "1")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "check: passed" in p.stdout, p.stdout
    onnx.checker.check_model(onnx.load(out), full_check=True)
