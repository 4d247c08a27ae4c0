"""Rotary position embedding (rotate-half) in real exports runs as one step per
rotated tensor on isomer's runtime, and the outputs are ONNX Runtime's.

The models under tests/models are small LLaMA-style attention blocks (grouped KV
heads) written by tests/models/make_rope_exports.py: torch's dynamo exporter, its
TorchScript exporter, and dynamo with partial rotary dims (the Phi / GPT-NeoX form,
where the rotated part is itself a slice of each head).
"""
import os
import subprocess

import numpy as np
import pytest

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")

pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")


def isomer(*args):
    p = subprocess.run([ISOMER, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"isomer {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}"
    return p.stdout


def step_ops(text):
    """The operator lists of `isomer run --print-steps`, one per step."""
    return [line.split()[1].split("+") for line in text.splitlines()
            if line.startswith("  ") and len(line.split()) >= 3 and not line.strip().startswith("output")]


@pytest.mark.parametrize("name", ["rope_dynamo", "rope_torchscript", "rope_partial_dynamo"])
def test_exported_rope_is_one_step_per_tensor_and_matches_onnxruntime(name, tmp_path):
    pytest.importorskip("onnxruntime")
    model = os.path.join(MODELS, name + ".onnx")
    rng = np.random.default_rng(3)
    inputs = tmp_path / "in.npz"
    # Positions inside the 64-row tables, not in order (a decode step's are not 0..7).
    np.savez(inputs, x=rng.standard_normal((1, 8, 64)).astype(np.float32),
             position_ids=rng.permutation(64)[:8].reshape(1, 8).astype(np.int64))
    steps = step_ops(isomer("run", model, "--inputs", str(inputs), "--print-steps", "--threads", "1"))
    rope = [s for s in steps if "Neg" in s]
    # q and k: each one step that takes the slices, the negation, the concatenation
    # and the products and sum; no Neg or Concat of the pattern left elsewhere.
    assert len(rope) == 2, steps
    for s in rope:
        assert sorted(s) == sorted(["Slice", "Slice", "Neg", "Concat", "Mul", "Mul", "Add"]), s
    out = isomer("run", model, "--inputs", str(inputs), "--bench", "--repeat", "2", "--warmup", "1",
                 "--threads", "1", "--tolerance", "1e-5")
    assert "outputs match ONNX Runtime's" in out, out
