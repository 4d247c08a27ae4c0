"""Times an ONNX model under torch.compile (Inductor's C++ backend on the CPU), for the
benchmarks that compare isomer with it (scripts/bench_mugraph.py --torch-python).

torch >= 2 is large (gigabytes with its CUDA wheels) and is not in isomer's own virtual
environment, so this script runs under whatever Python has it:

    /path/to/torch-venv/bin/python scripts/torch_compile_onnx.py MODEL.onnx \
        --inputs in.npz --threads 1 --repeat 30 --json out.json --outputs out.npz

It needs torch, onnx and numpy there, nothing of isomer's. The model becomes a
torch.nn.Module that runs its nodes one by one with torch operators (weights are
buffers, as in a model written in PyTorch); values that depend only on constants and
static shapes (Shape, the shape arithmetic of exporters) are computed once, when the
module is built, so that the compiled graph holds only tensor work. That module is
compiled with torch.compile (default mode, the inductor backend) and timed after
warm-up: median of --repeat runs. The outputs go to --outputs for the caller to check
against its reference, and the JSON reports the median, the compile time and the
largest relative difference from eager torch. An operator outside the supported set
is reported as an error (exit status 2), naming it."""
import argparse
import json
import os
import statistics
import sys
import time

# This folder holds isomer's scripts, among them a profile.py that would shadow the
# standard library's profile module, which torch imports.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import numpy as np
import onnx
import torch
from onnx import numpy_helper

DTYPES = {1: torch.float32, 2: torch.uint8, 3: torch.int8, 6: torch.int32, 7: torch.int64, 9: torch.bool,
          10: torch.float16, 11: torch.float64, 16: torch.bfloat16}


class Unsupported(Exception):
    pass


class Node:
    """A node as plain Python data (protobuf containers stop torch.compile's tracing)."""

    def __init__(self, proto):
        self.op_type, self.name, self.domain = proto.op_type, proto.name, proto.domain
        self.input, self.output = list(proto.input), list(proto.output)
        self.attrs = {}
        for a in proto.attribute:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, onnx.TensorProto):
                v = numpy_helper.to_array(v).copy()
            elif isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, (list, tuple)):
                v = list(v)
            self.attrs[a.name] = v


def _ints(t):
    """A static 1-D tensor (shape, axes, sizes) as Python ints."""
    if isinstance(t, (torch.Tensor, np.ndarray)):
        t = t.reshape(-1).tolist()
    return [int(v) for v in (t if isinstance(t, list) else [t])]  # pure Python: traced code reads no tensor


def _axes(node, a, ins, n, rank):
    axes = a.get("axes")
    if axes is None and len(ins) > n and ins[n] is not None:
        axes = _ints(ins[n])
    return None if axes is None else [x % rank for x in axes]


def _reduce(fn):
    def run(node, a, ins):
        x = ins[0]
        axes = _axes(node, a, ins, 1, x.dim())
        keep = bool(a.get("keepdims", 1))
        if axes is None:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.dim()))
        return fn(x, axes, keep)
    return run


def _reshape(node, a, ins):
    x, shape = ins[0], _ints(ins[1])
    if not a.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _slice(node, a, ins):
    x = ins[0]
    starts, ends = _ints(ins[1]), _ints(ins[2])
    axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.dim()
    flips = []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax %= x.dim()
        n = x.shape[ax]
        if st > 0:
            s = max(0, min(n, s + n if s < 0 else s))
            e = max(0, min(n, e + n if e < 0 else e))
            index[ax] = slice(s, e, st)
        else:  # negative steps: torch has none; slice the reversed axis
            s = max(-1, min(n - 1, s + n if s < 0 else s))
            e = max(-1, min(n - 1, e + n if e < 0 else e))
            flips.append(ax)
            index[ax] = slice(n - 1 - s, n - 1 - e, -st)
    if flips:
        x = torch.flip(x, flips)
    return x[tuple(index)]


def _gemm(node, a, ins):
    x, w = ins[0], ins[1]
    if a.get("transA", 0):
        x = x.t()
    if a.get("transB", 0):
        w = w.t()
    y = a.get("alpha", 1.0) * (x @ w)
    if len(ins) > 2 and ins[2] is not None:
        y = y + a.get("beta", 1.0) * ins[2]
    return y


def _split(node, a, ins):
    x = ins[0]
    axis = a.get("axis", 0) % x.dim()
    if len(ins) > 1 and ins[1] is not None:
        sizes = _ints(ins[1])
    elif "split" in a:
        sizes = list(a["split"])
    else:
        k = len(node.output)
        sizes = [-(-x.shape[axis] // k)] * k
        sizes[-1] = x.shape[axis] - sum(sizes[:-1])
    return tuple(torch.split(x, sizes, dim=axis))


def _layernorm(node, a, ins):
    x = ins[0]
    axis = a.get("axis", -1) % x.dim()
    shape = list(x.shape[axis:])
    bias = ins[2] if len(ins) > 2 else None
    return torch.nn.functional.layer_norm(x, shape, ins[1], bias, a.get("epsilon", 1e-5))


def _softmax(node, a, ins):
    return torch.softmax(ins[0], dim=a.get("axis", -1))


def _gather(node, a, ins):
    x, idx = ins[0], ins[1].long()
    axis = a.get("axis", 0) % x.dim()
    idx = torch.where(idx < 0, idx + x.shape[axis], idx)
    return torch.index_select(x, axis, idx.reshape(-1)).reshape(
        list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]))


def _constant(node, a, ins):
    if "value" in a:
        return torch.from_numpy(a["value"])
    for k, dt in (("value_float", torch.float32), ("value_int", torch.int64)):
        if k in a:
            return torch.tensor(a[k], dtype=dt)
    for k, dt in (("value_floats", torch.float32), ("value_ints", torch.int64)):
        if k in a:
            return torch.tensor(list(a[k]), dtype=dt)
    raise Unsupported(f"Constant {node.name!r}: attribute {list(a)}")


def _constant_of_shape(node, a, ins):
    value = torch.from_numpy(a["value"]) if "value" in a else torch.zeros(1)
    return value.reshape(()).expand(_ints(ins[0])).clone()


def _range(node, a, ins):
    start, limit, delta = (v.item() if isinstance(v, torch.Tensor) else v for v in ins[:3])
    return torch.arange(start, limit, delta, dtype=ins[0].dtype)


def _trilu(node, a, ins):
    k = _ints(ins[1])[0] if len(ins) > 1 and ins[1] is not None else 0
    return torch.triu(ins[0], k) if a.get("upper", 1) else torch.tril(ins[0], k)


def _padded(x, a, spatial, value=0.0):
    """Applies an ONNX `pads` attribute (begins, then ends) that torch's symmetric
    padding cannot express; returns the input and the symmetric padding left."""
    pads = list(a.get("pads", [0] * 2 * spatial))
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise Unsupported("auto_pad " + a["auto_pad"])
    begin, end = pads[:spatial], pads[spatial:]
    if begin == end:
        return x, begin
    flat = []
    for b, e in zip(reversed(begin), reversed(end)):
        flat += [b, e]
    return torch.nn.functional.pad(x, flat, value=value), [0] * spatial


def _conv(node, a, ins):
    x, w = ins[0], ins[1]
    spatial = x.dim() - 2
    x, pads = _padded(x, a, spatial)
    fn = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[spatial]
    return fn(x, w, ins[2] if len(ins) > 2 else None, list(a.get("strides", [1] * spatial)), pads,
              list(a.get("dilations", [1] * spatial)), a.get("group", 1))


def _pool(kind):
    def run(node, a, ins):
        x = ins[0]
        spatial = x.dim() - 2
        ceil = bool(a.get("ceil_mode", 0))
        x, pads = _padded(x, a, spatial, float("-inf") if kind == "max" else 0.0)
        k, st = list(a["kernel_shape"]), list(a.get("strides", [1] * spatial))
        if kind == "max":
            return {1: torch.nn.functional.max_pool1d, 2: torch.nn.functional.max_pool2d}[spatial](
                x, k, st, pads, list(a.get("dilations", [1] * spatial)), ceil_mode=ceil)
        return {1: torch.nn.functional.avg_pool1d, 2: torch.nn.functional.avg_pool2d}[spatial](
            x, k, st, pads, ceil_mode=ceil, count_include_pad=bool(a.get("count_include_pad", 0)))
    return run


def _pad(node, a, ins):
    """ONNX Pad (opset 11+: pads, constant value and axes as inputs; before, attributes)
    as torch's pad, whose flat list runs from the last axis backwards. reflect and edge
    pad only the trailing two or three axes in torch."""
    x = ins[0]
    mode = a.get("mode", "constant")
    pads = _ints(ins[1]) if len(ins) > 1 and ins[1] is not None else list(a["pads"])
    axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(x.dim()))
    axes = [ax % x.dim() for ax in axes]
    value = a.get("value", 0.0)
    if len(ins) > 2 and ins[2] is not None:
        value = ins[2].reshape(-1)[0].item() if isinstance(ins[2], torch.Tensor) else float(ins[2])
    begin, end = [0] * x.dim(), [0] * x.dim()
    for k, ax in enumerate(axes):
        begin[ax], end[ax] = pads[k], pads[k + len(axes)]
    padded = [ax for ax in range(x.dim()) if begin[ax] or end[ax]]
    if not padded:
        return x
    first = min(padded)
    flat = []
    for ax in reversed(range(first, x.dim())):
        flat += [begin[ax], end[ax]]
    if mode == "constant":
        return torch.nn.functional.pad(x, flat, value=value)
    torch_mode = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}.get(mode)
    if torch_mode is None or x.dim() - first > 3 or x.dim() - first >= x.dim():
        raise Unsupported(f"Pad {node.name!r}: mode {mode} over axes {padded} of a rank-{x.dim()} tensor")
    return torch.nn.functional.pad(x, flat, mode=torch_mode)


def _batchnorm(node, a, ins):
    return torch.nn.functional.batch_norm(ins[0], ins[3], ins[4], ins[1], ins[2], False, 0.0, a.get("epsilon", 1e-5))


def _clip(node, a, ins):
    lo = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("min")
    hi = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("max")
    return torch.clamp(ins[0], lo, hi)


OPS = {
    "Add": lambda n, a, i: i[0] + i[1],
    "Sub": lambda n, a, i: i[0] - i[1],
    "Mul": lambda n, a, i: i[0] * i[1],
    "Div": lambda n, a, i: i[0] / i[1] if i[0].is_floating_point() else torch.div(i[0], i[1], rounding_mode="trunc"),
    "Pow": lambda n, a, i: torch.pow(i[0], i[1]),
    "Sqrt": lambda n, a, i: torch.sqrt(i[0]),
    "Reciprocal": lambda n, a, i: torch.reciprocal(i[0]),
    "Neg": lambda n, a, i: -i[0],
    "Abs": lambda n, a, i: torch.abs(i[0]),
    "Exp": lambda n, a, i: torch.exp(i[0]),
    "Log": lambda n, a, i: torch.log(i[0]),
    "Erf": lambda n, a, i: torch.erf(i[0]),
    "Tanh": lambda n, a, i: torch.tanh(i[0]),
    "Sigmoid": lambda n, a, i: torch.sigmoid(i[0]),
    "Relu": lambda n, a, i: torch.relu(i[0]),
    "Gelu": lambda n, a, i: torch.nn.functional.gelu(i[0], approximate=a.get("approximate", "none")),
    "Max": lambda n, a, i: torch.stack(torch.broadcast_tensors(*i)).amax(0),
    "Min": lambda n, a, i: torch.stack(torch.broadcast_tensors(*i)).amin(0),
    "Where": lambda n, a, i: torch.where(i[0], i[1], i[2]),
    "Equal": lambda n, a, i: i[0] == i[1],
    "Less": lambda n, a, i: i[0] < i[1],
    "Greater": lambda n, a, i: i[0] > i[1],
    "Not": lambda n, a, i: torch.logical_not(i[0]),
    "And": lambda n, a, i: torch.logical_and(i[0], i[1]),
    "Or": lambda n, a, i: torch.logical_or(i[0], i[1]),
    "Cast": lambda n, a, i: i[0].to(DTYPES[a["to"]]),
    "Identity": lambda n, a, i: i[0],
    "MatMul": lambda n, a, i: torch.matmul(i[0], i[1]),
    "Gemm": _gemm,
    "Softmax": _softmax,
    "LayerNormalization": _layernorm,
    "ReduceMean": _reduce(lambda x, ax, k: x.mean(dim=ax, keepdim=k)),
    "ReduceSum": _reduce(lambda x, ax, k: x.sum(dim=ax, keepdim=k)),
    "ReduceMax": _reduce(lambda x, ax, k: x.amax(dim=ax, keepdim=k)),
    "Transpose": lambda n, a, i: i[0].permute(list(a["perm"]) if "perm" in a else list(range(i[0].dim()))[::-1]),
    "Reshape": _reshape,
    "Flatten": lambda n, a, i: i[0].reshape(int(np.prod(i[0].shape[:a.get("axis", 1) % max(i[0].dim(), 1)])), -1),
    "Unsqueeze": lambda n, a, i: i[0].reshape(_unsqueezed(list(i[0].shape), list(a["axes"]) if "axes" in a
                                                           else _ints(i[1]))),
    "Squeeze": lambda n, a, i: _squeeze(i[0], list(a["axes"]) if "axes" in a else
                                        (_ints(i[1]) if len(i) > 1 and i[1] is not None else None)),
    "Expand": lambda n, a, i: i[0].expand(torch.broadcast_shapes(tuple(i[0].shape), tuple(_ints(i[1])))),
    "Concat": lambda n, a, i: torch.cat([t for t in i if t is not None], dim=a["axis"]),
    "Split": _split,
    "Slice": _slice,
    "Gather": _gather,
    "Shape": lambda n, a, i: torch.tensor(list(i[0].shape)[a.get("start", 0):a.get("end", i[0].dim())],
                                          dtype=torch.int64),
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "Trilu": _trilu,
    "Conv": _conv,
    "MaxPool": _pool("max"),
    "AveragePool": _pool("avg"),
    "GlobalAveragePool": lambda n, a, i: i[0].mean(dim=list(range(2, i[0].dim())), keepdim=True),
    "BatchNormalization": _batchnorm,
    "Pad": _pad,
    "Clip": _clip,
    "HardSigmoid": lambda n, a, i: torch.clamp(a.get("alpha", 0.2) * i[0] + a.get("beta", 0.5), 0, 1),
    "HardSwish": lambda n, a, i: torch.nn.functional.hardswish(i[0]),
}


# Inputs that hold shapes, axes, sizes or bounds. A static one is passed as a list of
# Python ints, so that the compiled code never reads a tensor's values (a graph break).
SHAPE_INPUTS = {"Reshape": {1}, "Expand": {1}, "Unsqueeze": {1}, "Squeeze": {1}, "Slice": {1, 2, 3, 4},
                "Split": {1}, "ReduceMean": {1}, "ReduceSum": {1}, "ReduceMax": {1}, "ConstantOfShape": {0},
                "Trilu": {1}, "Pad": {1, 3}}


def _unsqueezed(shape, axes):
    rank = len(shape) + len(axes)
    for ax in sorted(x % rank for x in axes):
        shape.insert(ax, 1)
    return shape


def _squeeze(x, axes):
    if axes is None:
        return x.reshape([d for d in x.shape if d != 1])
    axes = {ax % x.dim() for ax in axes}
    return x.reshape([d for k, d in enumerate(x.shape) if k not in axes])


class OnnxModule(torch.nn.Module):
    """The model's nodes run one by one; `static` holds the values computed at build time."""

    def __init__(self, model, example):
        super().__init__()
        g = model.graph
        self.nodes = [Node(n) for n in g.node]
        for n in self.nodes:
            if n.op_type not in OPS:
                raise Unsupported(f"node {n.name or n.output[0]!r}: operator {n.op_type} (domain "
                                  f"{n.domain or 'ai.onnx'}) is not in this script's set")
            if n.domain not in ("", "ai.onnx"):
                raise Unsupported(f"node {n.name or n.output[0]!r}: domain {n.domain}")
        self.input_names = [i.name for i in g.input if i.name not in {t.name for t in g.initializer}]
        self.output_names = [o.name for o in g.output]
        self.weights = {}
        for k, t in enumerate(g.initializer):
            self.register_buffer(f"w{k}", torch.from_numpy(numpy_helper.to_array(t).copy()))
            self.weights[t.name] = f"w{k}"
        self.attrs = [n.attrs for n in self.nodes]
        # One eager run: what depends only on constants and shapes is kept as a constant
        # (small ones: shape arithmetic, not weights, which stay buffers).
        self.static = {}
        env = {name: getattr(self, b) for name, b in self.weights.items()}
        static = {name for name, t in env.items() if t.numel() <= 64 and not t.is_floating_point()}
        env.update(zip(self.input_names, example))
        for n, a in zip(self.nodes, self.attrs):
            ins = [env[i] if i else None for i in n.input]
            outs = OPS[n.op_type](n, a, ins)
            outs = outs if isinstance(outs, tuple) else (outs,)
            is_static = n.op_type in ("Shape", "Constant") or all(i in static for i in n.input if i)
            for name, v in zip(n.output, outs):
                env[name] = v
                if is_static and v.numel() <= 64:
                    static.add(name)
                    self.static[name] = v
        for name in static:
            if name in self.weights:
                self.static[name] = env[name]
        self.skip = [all(o in self.static for o in n.output) for n in self.nodes]
        self.static_ints = {name: _ints(v.reshape(-1)) for name, v in self.static.items()
                            if not v.is_floating_point() and v.dim() <= 1}
        # A constant exponent as a Python number, as code written in PyTorch has it
        # (x.pow(2)): a tensor exponent makes both eager torch and Inductor call the
        # general pow, ten times slower.
        self.scalar_exponent = {}
        for k, n in enumerate(self.nodes):
            w = n.input[1] if n.op_type == "Pow" and len(n.input) > 1 else None
            if w in self.weights and getattr(self, self.weights[w]).numel() == 1 and n.input[0] in env and \
                    env[n.input[0]].dim() >= getattr(self, self.weights[w]).dim():
                self.scalar_exponent[k] = getattr(self, self.weights[w]).item()

    def forward(self, *inputs):
        env = dict(self.static)
        env.update({name: getattr(self, b) for name, b in self.weights.items() if name not in env})
        env.update(zip(self.input_names, inputs))
        for k, (n, a, skip) in enumerate(zip(self.nodes, self.attrs, self.skip)):
            if skip:
                continue
            shape_inputs = SHAPE_INPUTS.get(n.op_type, ())
            ins = [None if not i else self.static_ints[i] if j in shape_inputs and i in self.static_ints else env[i]
                   for j, i in enumerate(n.input)]
            if k in self.scalar_exponent:
                ins[1] = self.scalar_exponent[k]
            outs = OPS[n.op_type](n, a, ins)
            outs = outs if isinstance(outs, tuple) else (outs,)
            env.update(zip(n.output, outs))
        return tuple(env[o] for o in self.output_names)


def _rel_err(eager, out):
    err = 0.0
    for e, o in zip(eager, out):
        if e.is_floating_point():
            d = (e.double() - o.double()).abs().max().item()
            err = max(err, d / max(e.double().abs().max().item(), 1e-30))
    return err


def _timed(compiled, example, warmup, repeat):
    for _ in range(warmup):
        compiled(*example)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        compiled(*example)
        times.append((time.perf_counter() - t) * 1e3)
    return times


def serve(compiled, example, eager, out, compile_s, a, output_names):
    if a.outputs:
        np.savez(a.outputs, **{n: o.detach().numpy() for n, o in zip(output_names, out)})
    print(json.dumps({"ready": True, "compile_s": compile_s, "max_rel_err_vs_eager": _rel_err(eager, out),
                      "torch": torch.__version__}), flush=True)
    with torch.no_grad():
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] == "quit":
                break
            if words[0] == "time":
                print(json.dumps(_timed(compiled, example, int(words[1]), int(words[2]))), flush=True)
            else:
                print(json.dumps({"error": "unknown command " + words[0]}), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--inputs", required=True, help=".npz keyed by input name")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", help="write {median_ms, compile_s, max_rel_err_vs_eager, torch} here")
    ap.add_argument("--outputs", help="write the compiled model's outputs here (.npz keyed by output name)")
    ap.add_argument("--serve", action="store_true",
                    help="compile, write --outputs, print one JSON line, then answer `time WARMUP REPEAT` lines "
                         "on stdin with a JSON list of milliseconds (for benchmarks that interleave engines)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = onnx.load(a.model)
    feeds = np.load(a.inputs)
    try:
        names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
        example = [torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names]
        module = OnnxModule(model, example).eval()
    except Unsupported as e:
        print(f"torch_compile_onnx: {a.model}: {e}", file=sys.stderr)
        return 2
    with torch.no_grad():
        eager = module(*example)
        compiled = torch.compile(module)
        t0 = time.perf_counter()
        out = compiled(*example)
        compile_s = time.perf_counter() - t0
        if a.serve:
            return serve(compiled, example, eager, out, compile_s, a, module.output_names)
        times = _timed(compiled, example, a.warmup, a.repeat)
    err = _rel_err(eager, out)
    result = {"median_ms": statistics.median(times), "min_ms": min(times), "compile_s": compile_s,
              "max_rel_err_vs_eager": err, "torch": torch.__version__, "threads": a.threads}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.outputs:
        np.savez(a.outputs, **{n: o.detach().numpy() for n, o in zip(module.output_names, out)})
    print(f"torch.compile {torch.__version__}: median {result['median_ms']:.3f} ms (compile {compile_s:.1f} s, "
          f"max rel err vs eager {err:.1e})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
