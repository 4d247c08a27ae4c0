#!/usr/bin/env python3
"""Builds isomer's benchmark corpus: models exported the way people export them in 2026,
with random weights from fixed seeds (nothing is downloaded).

    .venv/bin/python scripts/corpus/build.py --out build/corpus            # all, skipping what exists
    .venv/bin/python scripts/corpus/build.py --only llama_block,gpt2_block --force
    .venv/bin/python scripts/corpus/build.py --list

Each model is <out>/<name>.onnx (+ <name>.onnx.data for external weights) and a sidecar
<name>.json; <out>/manifest.json collects the sidecars of every built model: family,
suites, how it was made, input names, shapes, dtypes and valid values (integer inputs
with their range [low, high)), outputs, node and parameter counts, and the self-check:
onnx.checker (full_check where it passes) and one ONNX Runtime run on valid inputs.
The torchvision models need Debian's torch; without it they are skipped with a note.
"""
import argparse
import collections
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from corpus import cnn, rnn, taso, transformer, vision  # noqa: E402
from corpus.common import ONNX_TO_NAME, count_params, save_model  # noqa: E402
from corpus.inputs import make_inputs  # noqa: E402

Spec = collections.namedtuple("Spec", "family suites build needs_torch")

CORPUS = ["corpus"]
BOTH = ["corpus", "taso"]


def _torch(name):
    return lambda path: cnn.build(name, path)


def _helper(fn, **kw):
    return lambda path: fn(**kw)


MODELS = {
    "resnet50": Spec("cnn", CORPUS, _torch("resnet50"), True),
    "mobilenet_v2": Spec("cnn", CORPUS, _torch("mobilenet_v2"), True),
    "squeezenet1_0": Spec("cnn", CORPUS, _torch("squeezenet1_0"), True),
    "squeezenet1_1": Spec("cnn", BOTH, _torch("squeezenet1_1"), True),
    "inception_v3": Spec("cnn", BOTH, _torch("inception_v3"), True),
    "densenet121": Spec("cnn", CORPUS, _torch("densenet121"), True),
    "resnext50_32x4d": Spec("cnn", BOTH, _torch("resnext50_32x4d"), True),
    "vgg19": Spec("cnn", BOTH, _torch("vgg19"), True),
    "bert_base": Spec("transformer", CORPUS, _helper(transformer.bert_base), False),
    "gpt2_block": Spec("transformer", CORPUS, _helper(transformer.gpt2_block), False),
    "llama_block": Spec("transformer", CORPUS, _helper(transformer.llama_block), False),
    "vit_s16": Spec("transformer", CORPUS, _helper(vision.vit_s16), False),
    "mlp_mixer_s16": Spec("mlp", CORPUS, _helper(vision.mlp_mixer_s16), False),
    "nasrnn_b1": Spec("rnn", BOTH, _helper(rnn.nasrnn, batch=1), False),
    "nasrnn_b16": Spec("rnn", BOTH, _helper(rnn.nasrnn, batch=16), False),
    "taso_bert": Spec("taso", ["taso"], _helper(taso.taso_bert), False),
    "nasnet_a": Spec("taso", ["taso"], _helper(taso.nasnet_a), False),
}


def _value_info(v):
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
    return {"name": v.name, "dtype": ONNX_TO_NAME.get(t.elem_type, str(t.elem_type)), "shape": dims}


def check(path, entry):
    """onnx.checker (full_check where it passes) and one ONNX Runtime run on valid inputs.
    Raises on a model that ONNX Runtime cannot load or run, or whose outputs are not finite."""
    import onnxruntime as ort

    result = {}
    try:
        onnx.checker.check_model(path, full_check=True)
        result["checker"] = "full_check passed"
    except Exception as e:  # full_check's strict shape inference is stricter than the spec
        onnx.checker.check_model(path)
        result["checker"] = f"passed (full_check: {str(e).splitlines()[0][:160]})"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = make_inputs(entry)
    t0 = time.perf_counter()
    outs = sess.run(None, feeds)
    ms = (time.perf_counter() - t0) * 1e3
    for o, a in zip(sess.get_outputs(), outs):
        if not np.all(np.isfinite(a)):
            raise RuntimeError(f"output {o.name} is not finite under ONNX Runtime")
    scale = max(float(np.max(np.abs(a))) for a in outs)
    result["onnxruntime"] = f"ran {ort.__version__}, 1 thread, first run {ms:.1f} ms, max |output| {scale:.3g}"
    return result


def build_one(name, out_dir, force, do_check):
    spec = MODELS[name]
    path = os.path.join(out_dir, name + ".onnx")
    sidecar = os.path.join(out_dir, name + ".json")
    if os.path.exists(path) and os.path.exists(sidecar) and not force:
        print(f"  {name:16s} exists (skipped; --force rebuilds)", flush=True)
        return "skipped"
    if spec.needs_torch and not cnn.torch_available():
        print(f"  {name:16s} SKIPPED: needs torch and torchvision (Debian python3-torch, python3-torchvision)",
              flush=True)
        return "no-torch"
    print(f"  {name:16s} building ...", flush=True)
    t0 = time.time()
    work = os.path.join(out_dir, f".tmp-{name}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    tmp_path = os.path.join(work, name + ".onnx")
    built = spec.build(tmp_path)
    if not built.onnx_path:
        save_model(built.model, tmp_path, built.external_data)
    data = tmp_path + ".data"
    model = onnx.load(tmp_path, load_external_data=False)
    entry = {
        "name": name,
        "family": spec.family,
        "suites": spec.suites,
        "file": name + ".onnx",
        "external_data": name + ".onnx.data" if os.path.exists(data) else None,
        "made": built.made,
        "notes": built.notes,
        "inputs": [i.to_json() for i in built.inputs],
        "outputs": [_value_info(o) for o in model.graph.output],
        "ir_version": model.ir_version,
        "opset": max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "nodes": len(model.graph.node),
        "ops": dict(sorted(collections.Counter(n.op_type for n in model.graph.node).items())),
        "params": count_params(model),
        "bytes": os.path.getsize(tmp_path) + (os.path.getsize(data) if os.path.exists(data) else 0),
    }
    entry.update(built.extra)
    if do_check:
        entry["check"] = check(tmp_path, entry)
    entry["build_seconds"] = round(time.time() - t0, 1)
    for f in (path, path + ".data"):
        if os.path.exists(f):
            os.remove(f)
    os.replace(tmp_path, path)
    if os.path.exists(data):
        os.replace(data, path + ".data")
        os.chmod(path + ".data", 0o644)  # onnx creates it private; the model file is 0644
    shutil.rmtree(work, ignore_errors=True)
    with open(sidecar + ".tmp", "w") as f:
        json.dump(entry, f, indent=2)
    os.replace(sidecar + ".tmp", sidecar)
    size = entry["bytes"] / 2**20
    print(f"  {name:16s} {entry['nodes']:5d} nodes, {entry['params'] / 1e6:7.2f} M params, {size:7.1f} MiB, "
          f"{entry['build_seconds']:5.1f} s" + (f"; {entry['check']['onnxruntime']}" if do_check else ""),
          flush=True)
    return "built"


def write_manifest(out_dir):
    models = []
    for name in MODELS:
        sidecar = os.path.join(out_dir, name + ".json")
        if os.path.exists(sidecar) and os.path.exists(os.path.join(out_dir, name + ".onnx")):
            with open(sidecar) as f:
                models.append(json.load(f))
    manifest = {"generated_by": "scripts/corpus/build.py", "onnx": onnx.__version__, "models": models}
    path = os.path.join(out_dir, "manifest.json")
    with open(path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=2)
    os.replace(path + ".tmp", path)
    return path, len(models)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="build/corpus", help="output directory (default build/corpus)")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--suite", default="", help="only the models of this suite (corpus or taso)")
    ap.add_argument("--force", action="store_true", help="rebuild models that exist")
    ap.add_argument("--no-check", action="store_true", help="skip onnx.checker and the ONNX Runtime run")
    ap.add_argument("--list", action="store_true", help="list the models and exit")
    args = ap.parse_args(argv)
    if args.list:
        for name, s in MODELS.items():
            print(f"{name:16s} {s.family:12s} {','.join(s.suites)}")
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}; --list shows them")
    if args.suite:
        names = [n for n in names if args.suite in MODELS[n].suites]
    os.makedirs(args.out, exist_ok=True)
    print(f"corpus: {len(names)} models into {args.out} (onnx {onnx.__version__})", flush=True)
    t0 = time.time()
    status = {}
    for name in names:
        try:
            status[name] = build_one(name, args.out, args.force, not args.no_check)
        except Exception as e:  # report, go on with the others, fail at the end
            print(f"  {name:16s} FAILED: {type(e).__name__}: {e}", flush=True)
            status[name] = "failed"
    path, n = write_manifest(args.out)
    counts = collections.Counter(status.values())
    print(f"corpus: {', '.join(f'{v} {k}' for k, v in counts.items())} in {time.time() - t0:.0f} s; "
          f"{path} lists {n} models", flush=True)
    return 1 if counts.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
