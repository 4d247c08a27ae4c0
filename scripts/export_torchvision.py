#!/usr/bin/env python3
"""Export torchvision models (random weights) to ONNX for isomer's benchmarks.

Weights are random (weights=None, torch.manual_seed(0)): nothing is downloaded.
Models are exported in eval mode, batch 1, static shapes, opset 13, and by
default WITHOUT any of torch's own graph clean-up so the optimizer has work to
do: no constant folding, and BatchNormalization kept as its own node (inference
form) rather than fused into the Conv by torch's eval-mode peephole. --fold
turns both on (torch's pre-optimized export, a baseline to compare against).
--check runs each model with onnxruntime and compares with torch. Works with Debian's python3-torch 1.13 / python3-torchvision 0.14.

    .venv/bin/python scripts/export_torchvision.py --out build/models
    .venv/bin/python scripts/export_torchvision.py --out build/models --models resnet50,vit_b_16 --force
"""
import argparse
import os
import sys
import time
import warnings

import onnx
import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpus.cnn import random_model  # noqa: E402  (one recipe for random-weight CNNs)

OPSET = 13

# name -> (constructor kwargs, input height/width)
MODELS = {
    "resnet50": ({}, 224),
    "inception_v3": ({"aux_logits": False, "init_weights": False}, 299),
    "mobilenet_v2": ({}, 224),
    "squeezenet1_0": ({}, 224),
    "vit_b_16": ({}, 224),
}


def export(name, out_dir, fold, force, check):
    path = os.path.join(out_dir, f"{name}.onnx")
    if os.path.exists(path) and not force:
        n = len(onnx.load(path, load_external_data=False).graph.node)
        print(f"{path}: exists, {n} nodes (skipped; --force to redo)")
        return path
    kwargs, hw = MODELS[name]
    model = random_model(name, kwargs, hw, seed=0)
    x = torch.randn(1, 3, hw, hw)
    tmp = path + ".tmp"  # renamed on success, so a failed export leaves nothing to skip
    t0 = time.time()
    # Grad stays enabled on purpose: under no_grad, torch 1.13's nn.MultiheadAttention
    # (vit_b_16) takes its fused fast path, aten::_native_multi_head_attention,
    # which has no ONNX export. With grad enabled it traces the plain ops.
    with torch.enable_grad():
        torch.onnx.export(
            model,
            x,
            tmp,
            opset_version=OPSET,
            do_constant_folding=fold,
            # EVAL fuses Conv+BatchNorm while exporting; PRESERVE on a model in
            # eval mode exports BatchNormalization (inference, 1 output) as is.
            training=torch.onnx.TrainingMode.EVAL if fold else torch.onnx.TrainingMode.PRESERVE,
            input_names=["input"],
            output_names=["output"],
            export_params=True,
        )
    dt = time.time() - t0
    m = onnx.load(tmp)
    onnx.checker.check_model(m)
    os.replace(tmp, path)
    size = os.path.getsize(path) / 2**20
    msg = f"{path}: {len(m.graph.node)} nodes, {size:.1f} MiB, exported in {dt:.1f}s"
    if check:
        msg += ", " + compare(model, x, path)
    print(msg, flush=True)
    return path


def compare(model, x, path):
    import numpy as np
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": x.numpy()})[0]
    with torch.no_grad():
        want = model(x).numpy()
    err = float(np.max(np.abs(got - want)))
    scale = float(np.max(np.abs(want)))
    return f"onnxruntime max|diff| {err:.2e} (max|y| {scale:.2e})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of: " + ",".join(MODELS))
    ap.add_argument("--fold", action="store_true", help="enable torch's constant folding during export")
    ap.add_argument("--check", action="store_true", help="run with onnxruntime and compare with torch")
    ap.add_argument("--force", action="store_true", help="re-export even if the file exists")
    args = ap.parse_args(argv)

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, onnx {onnx.__version__}, opset {OPSET}")
    for n in names:
        export(n, args.out, args.fold, args.force, args.check)
    return 0


if __name__ == "__main__":
    sys.exit(main())
