"""The benchmark corpus builders (scripts/corpus): a few of the small ones build into a
temporary directory, and what they write must pass onnx.checker, load and run in ONNX
Runtime on the inputs the manifest calls valid, and keep the layout the builder promises
(external data beside the model, IR version and opset of the exporter imitated, integer
inputs with their ranges). The torchvision export needs Debian's torch; it is skipped
where torch is missing.
"""
import json
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))

from corpus import build  # noqa: E402
from corpus.inputs import load_manifest, make_inputs  # noqa: E402


def _build(out, names, force=False):
    assert build.main(["--out", str(out), "--only", ",".join(names)] + (["--force"] if force else [])) == 0
    return load_manifest(str(out))


def _run_ort(path, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_helper_builders_write_valid_dynamo_style_models(tmp_path, capsys):
    names = ["nasrnn_b1", "gpt2_block", "llama_block"]
    manifest = _build(tmp_path, names)
    assert sorted(manifest) == sorted(names)
    for name in names:
        e = manifest[name]
        path = e["path"]
        # torch's dynamo exporter: IR 10, opset 18, weights in <model>.onnx.data.
        assert e["external_data"] == name + ".onnx.data"
        assert os.path.getsize(path + ".data") > os.path.getsize(path)
        m = onnx.load(path, load_external_data=False)
        assert (m.ir_version, e["opset"]) == (10, 18)
        assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer)
        onnx.checker.check_model(path, full_check=True)
        assert e["check"]["checker"] == "full_check passed"
        outs = _run_ort(path, make_inputs(e))
        assert all(np.all(np.isfinite(o)) and np.abs(o).max() > 0 for o in outs)
    # The decompositions the corpus stands for are there.
    llama_ops = set(manifest["llama_block"]["ops"])
    assert {"Pow", "ReduceMean", "Sqrt", "Reciprocal", "Neg", "Expand", "Where", "Gather"} <= llama_ops
    assert {"Split", "Gemm", "Tanh", "Slice", "Where"} <= set(manifest["gpt2_block"]["ops"])
    assert manifest["nasrnn_b1"]["ops"]["MatMul"] == 80  # 16 per step over 5 steps
    pos = next(i for i in manifest["llama_block"]["inputs"] if i["name"] == "position_ids")
    assert pos["dtype"] == "int64" and pos["range"] == [0, 2048]
    assert "building" in capsys.readouterr().out


def test_build_is_idempotent_and_manifest_keeps_other_models(tmp_path, capsys):
    _build(tmp_path, ["nasrnn_b1"])
    stamp = os.path.getmtime(tmp_path / "nasrnn_b1.onnx")
    manifest = _build(tmp_path, ["nasrnn_b16", "nasrnn_b1"])
    assert "exists (skipped" in capsys.readouterr().out
    assert os.path.getmtime(tmp_path / "nasrnn_b1.onnx") == stamp
    assert sorted(manifest) == ["nasrnn_b1", "nasrnn_b16"]
    assert manifest["nasrnn_b16"]["inputs"][0]["shape"] == [5, 16, 512]
    with open(tmp_path / "manifest.json") as f:
        assert {m["name"]: m["suites"] for m in json.load(f)["models"]}["nasrnn_b16"] == ["corpus", "taso"]


def test_integer_inputs_stay_in_their_range(tmp_path):
    """BERT's token ids must index the embedding: the manifest's range is what makes the
    inputs valid, for every engine the bench runs."""
    from corpus import transformer

    built = transformer.bert_base(layers=1, seq=16, vocab=100)
    e = {"name": "bert", "inputs": [i.to_json() for i in built.inputs]}
    feeds = make_inputs(e, seed=3)
    assert feeds["input_ids"].dtype == np.int64 and feeds["input_ids"].max() < 100
    assert set(np.unique(feeds["attention_mask"])) <= {0, 1}
    path = str(tmp_path / "bert.onnx")
    onnx.save(built.model, path)
    onnx.checker.check_model(path, full_check=True)
    hidden, pooled = _run_ort(path, feeds)
    assert hidden.shape == (1, 16, 768) and pooled.shape == (1, 768)
    # A dynamic batch: the shape subgraph (Shape, Concat into Reshape/Expand) handles batch 2.
    feeds2 = {k: np.concatenate([v, v]) for k, v in feeds.items()}
    hidden2, _ = _run_ort(path, feeds2)
    np.testing.assert_allclose(hidden2[1], hidden[0], rtol=1e-4, atol=1e-4)


def test_torchvision_export(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    manifest = _build(tmp_path, ["squeezenet1_1"])
    e = manifest["squeezenet1_1"]
    m = onnx.load(e["path"])
    assert e["external_data"] is None and e["opset"] == 17
    assert "BatchNormalization" not in e["ops"]  # torch's constant folding at export
    out = _run_ort(e["path"], make_inputs(e))[0]
    assert out.shape == (1, 1000) and np.all(np.isfinite(out))
    assert [i.name for i in m.graph.input] == ["input"]
