"""torchvision CNNs exported the way users export them: Debian's torch 1.13 /
torchvision 0.14, the TorchScript exporter (`torch.onnx.export`) at opset 17 with its
defaults (eval mode, do_constant_folding=True, which folds BatchNormalization into the
convolutions), batch 1, random weights (weights=None, a fixed seed; nothing downloaded).
Some are exported with a dynamic batch axis, as users who serve batches do.

Random BatchNorm statistics (mean 0, var 1) would shrink the activations of a deep
network layer by layer until the output is the classifier's bias; every BatchNorm is
calibrated on a random batch first, as trained statistics would keep the scale.
"""
import os
import time
import warnings

from corpus.common import Built, normal_input

OPSET = 17

# name -> (torchvision constructor, kwargs, input size, dynamic batch axis)
MODELS = {
    "resnet50": ("resnet50", {}, 224, True),
    "mobilenet_v2": ("mobilenet_v2", {}, 224, True),
    "squeezenet1_0": ("squeezenet1_0", {}, 224, False),
    "squeezenet1_1": ("squeezenet1_1", {}, 224, False),
    "inception_v3": ("inception_v3", {"aux_logits": False, "init_weights": False}, 299, True),
    "densenet121": ("densenet121", {}, 224, True),
    "resnext50_32x4d": ("resnext50_32x4d", {}, 224, False),
    "vgg19": ("vgg19", {}, 224, False),
}


def torch_available():
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        return True
    except ImportError:
        return False


def random_model(ctor, kwargs, hw, seed=0):
    """torchvision's `ctor` with random weights (a fixed seed), in eval mode, fit to export.

    Some inits zero whole weight matrices (vit_b_16's classifier head), which would make
    the output identically 0 and any numeric check vacuous: those get random values.
    Every BatchNorm is calibrated on a random batch (one training-mode pass with
    momentum 1) so activations keep their scale, as trained statistics would.
    """
    import torch
    import torchvision

    torch.manual_seed(seed)
    model = getattr(torchvision.models, ctor)(weights=None, **kwargs).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(0.0, 0.02)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if bns:
        for m in bns:
            m.momentum = 1.0
        model.train()
        with torch.no_grad():
            model(torch.randn(4, 3, hw, hw))
        model.eval()
    return model


def export(name, path, seed=0):
    """Exports torchvision's `name` to `path` (written through a temporary file)."""
    import torch
    import torchvision

    ctor, kwargs, hw, dynamic = MODELS[name]
    model = random_model(ctor, kwargs, hw, seed)
    x = torch.randn(1, 3, hw, hw)
    tmp = path + ".tmp"
    kw = {}
    if dynamic:
        kw["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, tmp, opset_version=OPSET, input_names=["input"], output_names=["output"], **kw)
    os.replace(tmp, path)
    return time.time() - t0, torch.__version__, torchvision.__version__, dynamic, hw


def build(name, path, seed=0):
    """Exports and describes one torchvision model (saved by torch itself)."""
    import onnx

    seconds, tv, tvv, dynamic, hw = export(name, path, seed)
    model = onnx.load(path, load_external_data=False)
    shape = [1, 3, hw, hw]
    return Built(model, [normal_input("input", shape, model_shape=(["batch"] if dynamic else [1]) + shape[1:])],
                 made=f"torch {tv} / torchvision {tvv} torch.onnx.export (TorchScript), opset {OPSET}, "
                      f"do_constant_folding=True (BatchNorm folded), random weights (seed {seed}), batch 1, {hw}x{hw}"
                      + (", dynamic batch axis" if dynamic else ""),
                 external_data=False, onnx_path=path, extra={"export_seconds": round(seconds, 1)})
