"""Single-region ONNX models for timing μGraph kernels (scripts/bench_mugraph.py):
memory-bound programs at LLaMA-style and corpus shapes, each written as an exporter
writes it (RMSNorm as Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul, attention with the
scale as a Mul and a causal additive mask)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, output, inits):
    g = helper.make_graph(nodes, "region", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(output[0], TensorProto.FLOAT, output[1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _c(name, v):
    return numpy_helper.from_array(np.asarray(v, np.float32), name)


def rmsnorm(rows, d):
    rng = np.random.default_rng(0)
    inits = [_c("two", 2), _c("eps", 1e-6), _c("gamma", rng.uniform(0.5, 1.5, d))]
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]), helper.make_node("Sqrt", ["mse"], ["r"]),
             helper.make_node("Reciprocal", ["r"], ["ir"]), helper.make_node("Mul", ["x", "ir"], ["xn"]),
             helper.make_node("Mul", ["gamma", "xn"], ["y"])]
    return _model(nodes, [("x", [1, rows, d])], ("y", [1, rows, d]), inits)


def layernorm_gelu(rows, d):
    rng = np.random.default_rng(0)
    inits = [_c("s", rng.uniform(0.5, 1.5, d)), _c("b", rng.uniform(-0.2, 0.2, d)), _c("rt2", np.sqrt(2)),
             _c("one", 1), _c("half", 0.5)]
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5),
             helper.make_node("Div", ["y", "rt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["y", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"])]
    return _model(nodes, [("x", [1, rows, d])], ("g", [1, rows, d]), inits)


def softmax(heads, s):
    mask = np.triu(np.full((s, s), -1e9, np.float32), 1)[None, None]
    inits = [_c("scale", 0.125), _c("mask", mask)]
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"]), helper.make_node("Add", ["xs", "mask"], ["xm"]),
             helper.make_node("Softmax", ["xm"], ["y"], axis=-1)]
    return _model(nodes, [("x", [1, heads, s, s])], ("y", [1, heads, s, s]), inits)


def swiglu_epilogue(rows, d, down):
    """silu(g) * u feeding the down projection (the epilogue between the MLP's matmuls)."""
    rng = np.random.default_rng(0)
    inits = [_c("w", rng.uniform(-0.05, 0.05, (d, down)))]
    nodes = [helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["y"])]
    return _model(nodes, [("g", [1, rows, d]), ("u", [1, rows, d])], ("y", [1, rows, down]), inits)


def attention(heads, kv, s, dh):
    """Causal GQA attention: q [1,H,S,D], k/v [1,KV,S,D] expanded, scale split over q and k^T."""
    rep = heads // kv
    mask = np.triu(np.full((s, s), -np.inf, np.float32), 1)[None, None]
    c = float(dh) ** -0.25
    inits = [_c("c", c), _c("mask", mask), numpy_helper.from_array(np.array([2], np.int64), "ax2"),
             numpy_helper.from_array(np.array([1, kv, rep, s, dh], np.int64), "ek"),
             numpy_helper.from_array(np.array([1, heads, s, dh], np.int64), "rk")]
    nodes = [helper.make_node("Unsqueeze", ["k", "ax2"], ["k1"]), helper.make_node("Expand", ["k1", "ek"], ["k2"]),
             helper.make_node("Reshape", ["k2", "rk"], ["k3"]), helper.make_node("Unsqueeze", ["v", "ax2"], ["v1"]),
             helper.make_node("Expand", ["v1", "ek"], ["v2"]), helper.make_node("Reshape", ["v2", "rk"], ["v3"]),
             helper.make_node("Mul", ["q", "c"], ["qs"]), helper.make_node("Transpose", ["k3"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["kt", "c"], ["ks"]), helper.make_node("MatMul", ["qs", "ks"], ["sc"]),
             helper.make_node("Add", ["sc", "mask"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v3"], ["o"])]
    return _model(nodes, [("q", [1, heads, s, dh]), ("k", [1, kv, s, dh]), ("v", [1, kv, s, dh])],
                  ("o", [1, heads, s, dh]), inits)


def attention_decode(heads, kv, t, dh):
    """GQA decode: one new query row per head, q [1,H,1,D], against a cached KV of t
    positions, k/v [1,KV,t,D] expanded over the query heads; no mask (the new token
    attends every cached position)."""
    rep = heads // kv
    c = float(dh) ** -0.25
    inits = [_c("c", c), numpy_helper.from_array(np.array([2], np.int64), "ax2"),
             numpy_helper.from_array(np.array([1, kv, rep, t, dh], np.int64), "ek"),
             numpy_helper.from_array(np.array([1, heads, t, dh], np.int64), "rk")]
    nodes = [helper.make_node("Unsqueeze", ["k", "ax2"], ["k1"]), helper.make_node("Expand", ["k1", "ek"], ["k2"]),
             helper.make_node("Reshape", ["k2", "rk"], ["k3"]), helper.make_node("Unsqueeze", ["v", "ax2"], ["v1"]),
             helper.make_node("Expand", ["v1", "ek"], ["v2"]), helper.make_node("Reshape", ["v2", "rk"], ["v3"]),
             helper.make_node("Mul", ["q", "c"], ["qs"]), helper.make_node("Transpose", ["k3"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["kt", "c"], ["ks"]), helper.make_node("MatMul", ["qs", "ks"], ["sc"]),
             helper.make_node("Softmax", ["sc"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v3"], ["o"])]
    return _model(nodes, [("q", [1, heads, 1, dh]), ("k", [1, kv, t, dh]), ("v", [1, kv, t, dh])],
                  ("o", [1, heads, 1, dh]), inits)


def attention_nomask(heads, s, dh):
    """ViT/BERT-style attention: q [1,H,S,D], k/v [1,H,S,D], the scale on q and k^T, no mask."""
    c = float(dh) ** -0.25
    nodes = [helper.make_node("Mul", ["q", "c"], ["qs"]), helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["kt", "c"], ["ks"]), helper.make_node("MatMul", ["qs", "ks"], ["sc"]),
             helper.make_node("Softmax", ["sc"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["o"])]
    return _model(nodes, [("q", [1, heads, s, dh]), ("k", [1, heads, s, dh]), ("v", [1, heads, s, dh])],
                  ("o", [1, heads, s, dh]), [_c("c", c)])


REGIONS = {
    "rmsnorm_128x1024": lambda: rmsnorm(128, 1024),
    "rmsnorm_512x2048": lambda: rmsnorm(512, 2048),
    "layernorm_gelu_128x768": lambda: layernorm_gelu(128, 768),
    "softmax_16x128": lambda: softmax(16, 128),
    "softmax_8x512": lambda: softmax(8, 512),
    "swiglu_epilogue_128x2816": lambda: swiglu_epilogue(128, 2816, 1024),
    "attention_gqa_16x4_128": lambda: attention(16, 4, 128, 64),
    "attention_gqa_32x8_512": lambda: attention(32, 8, 512, 64),
    "attention_vit_6x197": lambda: attention_nomask(6, 197, 64),
    "attention_gqa_32x8_1024": lambda: attention(32, 8, 1024, 64),
    "attention_decode_32x8_4096": lambda: attention_decode(32, 8, 4096, 64),
    # More grid sizes for the GPU's block tiling rule (cuda_tiling): a causal grid
    # between 128 and 512, ViT-B's 12 heads, BERT-base's 12 heads of 128.
    "attention_gqa_32x8_256": lambda: attention(32, 8, 256, 64),
    "attention_vit_12x197": lambda: attention_nomask(12, 197, 64),
    "attention_bert_12x128": lambda: attention_nomask(12, 128, 64),
}
