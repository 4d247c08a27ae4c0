"""`isomer mugraph emit-cuda`: a model's μGraph regions as .cu files, their constant
inputs and a manifest; the .cu compiles with nvcc where one is found (skipped
otherwise: CI has no CUDA toolkit). Running the kernels needs a GPU
(scripts/cuda_gpu_check.py)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import mugraph_regions  # noqa: E402
import onnx  # noqa: E402


def _nvcc():
    for c in [os.environ.get("ISOMER_NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]:
        if c and os.path.exists(c):
            return c
    return None


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    d = tmp_path_factory.mktemp("cuda")
    model = str(d / "softmax.onnx")
    onnx.save(mugraph_regions.softmax(4, 64), model)
    out = d / "out"
    p = subprocess.run([ISOMER, "mugraph", "emit-cuda", model, "--out", str(out), "--mugraph-seconds", "2"],
                       capture_output=True, text=True, env={**os.environ, "ISOMER_MUGRAPH_NO_MEASURE": "1"})
    assert p.returncode == 0, p.stderr
    return out


def test_manifest_names_inputs_and_constants(emitted):
    m = json.load(open(emitted / "manifest.json"))
    assert len(m["regions"]) == 1
    r = m["regions"][0]
    assert (emitted / r["source"]).exists()
    assert r["launcher"] in open(emitted / r["source"]).read()
    names = [i["name"] for i in r["inputs"]]
    assert names == ["x", "mask"]
    mask = np.fromfile(emitted / r["inputs"][1]["constant"], dtype=np.float32).reshape(r["inputs"][1]["dims"])
    want = np.triu(np.full((64, 64), -1e9, np.float32), 1)
    np.testing.assert_array_equal(mask[0, 0], want)
    assert r["outputs"][0]["dims"] == [1, 4, 64, 64]
    assert "equal at" in r["field_check"]


def test_emitted_cuda_compiles(emitted):
    nvcc = _nvcc()
    if not nvcc:
        pytest.skip("nvcc not found (set ISOMER_NVCC)")
    r = json.load(open(emitted / "manifest.json"))["regions"][0]
    p = subprocess.run([nvcc, "--ptx", "-arch=sm_90", "-std=c++17", "-o", str(emitted / "k.ptx"),
                        str(emitted / r["source"])], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert ".entry " + r["name"] + "_kernel" in open(emitted / "k.ptx").read()


def _emit(tmp_path, model, *flags):
    out = tmp_path / ("out" + "".join(flags).replace("-", "_"))
    p = subprocess.run([ISOMER, "mugraph", "emit-cuda", model, "--out", str(out), "--mugraph-seconds", "2", *flags],
                       capture_output=True, text=True, env={**os.environ, "ISOMER_MUGRAPH_NO_MEASURE": "1"})
    assert p.returncode == 0, p.stderr
    return out, json.load(open(out / "manifest.json"))["regions"][0]


def test_decode_splits_its_loop_unless_told_not_to(tmp_path):
    """Decode (4 heads: fewer tiles than --sms) is emitted as a runs kernel and a
    combine kernel, verified at that tiling; --splits 1 keeps one kernel."""
    model = str(tmp_path / "decode.onnx")
    onnx.save(mugraph_regions.attention_decode(4, 2, 600, 16), model)
    out, r = _emit(tmp_path, model)
    assert " split " in r["kernel"] and "equal at" in r["field_check"]
    src = open(out / r["source"]).read()
    assert r["name"] + "_runs<<<" in src and r["name"] + "_combine<<<" in src
    _, whole = _emit(tmp_path, model, "--splits", "1")
    assert " split " not in whole["kernel"] and whole["blocks"] < r["blocks"]
    nvcc = _nvcc()
    if nvcc:
        p = subprocess.run([nvcc, "--ptx", "-arch=sm_90", "-std=c++17", "-o", str(out / "k.ptx"), str(out / r["source"])],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        ptx = open(out / "k.ptx").read()
        assert ".entry " + r["name"] + "_runs" in ptx and ".entry " + r["name"] + "_combine" in ptx


def test_bert_attention_takes_the_kv_loop_on_the_gpu(tmp_path):
    """BERT's attention (12 heads of 128) fits 96 KB a block without a loop, but
    each block would stage the whole K and V for 4 rows: the GPU runs the loop over
    the key positions, 16 rows a block, and the manifest says why."""
    model = str(tmp_path / "bert.onnx")
    onnx.save(mugraph_regions.attention_nomask(12, 128, 64), model)
    _, r = _emit(tmp_path, model)
    assert "loop{a" in r["kernel"] and r["blocks"] == 96 and "equal at" in r["field_check"]
    if "loop{}" in r["cpu_kernel"]:
        assert r["structure"] == "a loop over a3: the CPU's reads 6389760 input elements, this 1671168"
    else:
        assert r["structure"] == "the CPU's"
