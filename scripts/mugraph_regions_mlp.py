"""Single-region ONNX models of a LLaMA MLP's and a normalized projection's regions
(for scripts/bench_mugraph.py): SwiGLU's gate and up projections of one input with
their silu * mul epilogue (the search's two-accumulator kernel), the whole SwiGLU MLP
with its down projection, and RMSNorm / LayerNorm feeding a weight MatMul.
Run as a script to write them: python scripts/mugraph_regions_mlp.py OUTDIR."""
import os
import sys

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mugraph_regions import _c, _model  # noqa: E402  (one model builder for every region script)


def _w(rng, name, k, n):
    return _c(name, rng.uniform(-1, 1, (k, n)) / np.sqrt(k))


def swiglu_gate_up(rows, d, ffn):
    """silu(x Wg) * (x Wu): two projections of one input and their epilogue."""
    rng = np.random.default_rng(0)
    inits = [_w(rng, "wg", d, ffn), _w(rng, "wu", d, ffn)]
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"]), helper.make_node("MatMul", ["x", "wu"], ["u"]),
             helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["h"])]
    return _model(nodes, [("x", [1, rows, d])], ("h", [1, rows, ffn]), inits)


def swiglu_mlp(rows, d, ffn):
    """The whole SwiGLU MLP: down(silu(x Wg) * (x Wu))."""
    rng = np.random.default_rng(0)
    inits = [_w(rng, "wg", d, ffn), _w(rng, "wu", d, ffn), _w(rng, "wd", ffn, d)]
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"]), helper.make_node("MatMul", ["x", "wu"], ["u"]),
             helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["h"]), helper.make_node("MatMul", ["h", "wd"], ["y"])]
    return _model(nodes, [("x", [1, rows, d])], ("y", [1, rows, d]), inits)


def rmsnorm_matmul(rows, d, n):
    """RMSNorm as exporters write it, feeding a weight MatMul."""
    rng = np.random.default_rng(0)
    inits = [_c("two", 2), _c("eps", 1e-6), _c("gamma", rng.uniform(0.5, 1.5, d)), _w(rng, "w", d, n)]
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["mse"]), helper.make_node("Sqrt", ["mse"], ["r"]),
             helper.make_node("Reciprocal", ["r"], ["ir"]), helper.make_node("Mul", ["x", "ir"], ["xn"]),
             helper.make_node("Mul", ["gamma", "xn"], ["xg"]), helper.make_node("MatMul", ["xg", "w"], ["y"])]
    return _model(nodes, [("x", [1, rows, d])], ("y", [1, rows, n]), inits)


def layernorm_matmul(rows, d, n):
    rng = np.random.default_rng(0)
    inits = [_c("s", rng.uniform(0.5, 1.5, d)), _c("b", rng.uniform(-0.2, 0.2, d)), _w(rng, "w", d, n)]
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["xn"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["xn", "w"], ["y"])]
    return _model(nodes, [("x", [1, rows, d])], ("y", [1, rows, n]), inits)


PROGRAMS = {
    "swiglu_gate_up_128x1024x2816": lambda: swiglu_gate_up(128, 1024, 2816),
    "swiglu_mlp_128x1024x2816": lambda: swiglu_mlp(128, 1024, 2816),
    "rmsnorm_matmul_128x2048x2048": lambda: rmsnorm_matmul(128, 2048, 2048),
    "layernorm_matmul_128x1024x1024": lambda: layernorm_matmul(128, 1024, 1024),
}


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name, make in PROGRAMS.items():
        m = make()
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))
        print(os.path.join(out, name + ".onnx"))
