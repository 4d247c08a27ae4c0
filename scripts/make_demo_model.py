#!/usr/bin/env python3
"""Build examples/demo.onnx: a small CNN whose graph is full of what a classic
graph optimizer removes, so `isomer optimize` has visible work to do.

    .venv/bin/python scripts/make_demo_model.py [--out examples/demo.onnx]

Deterministic (fixed numpy seed): rerunning writes the same bytes.

input [1,3,32,32]
  -> Identity
  -> Conv(3->16, bias) -> BatchNormalization -> Relu       conv+BN fold
  -> Dropout                                               no-op at inference
  -> Reshape to the same shape                             no-op
  -> Transpose[0,2,3,1] -> Transpose[0,3,1,2]              cancelling pair
  -> Conv(16->16, W = Mul(Wa, Wb)) -> BatchNormalization    constant folding, conv+BN fold
  -> Relu, Relu (same input) -> Add                        common subexpression
  -> Conv(16->32, stride 2, no bias) -> Add(bias[1,32,1,1]) bias into Conv
  -> Relu -> GlobalAveragePool -> Flatten -> Gemm(10) -> Softmax -> output [1,10]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8


def build():
    rng = np.random.RandomState(0)
    inits = []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def conv_w(cout, cin, k=3):
        return (rng.randn(cout, cin, k, k) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)

    def bn(prefix, c):
        return [
            const(f"{prefix}.scale", rng.uniform(0.5, 1.5, c).astype(np.float32)),
            const(f"{prefix}.bias", (rng.randn(c) * 0.1).astype(np.float32)),
            const(f"{prefix}.mean", (rng.randn(c) * 0.1).astype(np.float32)),
            const(f"{prefix}.var", rng.uniform(0.5, 1.5, c).astype(np.float32)),
        ]

    N = helper.make_node
    nodes = [
        N("Identity", ["input"], ["x"], name="identity"),
        # block 1: Conv + BN + Relu, then no-ops
        N("Conv", ["x", const("conv1.weight", conv_w(16, 3)), const("conv1.bias", (rng.randn(16) * 0.1).astype(np.float32))],
          ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c1"] + bn("bn1", 16), ["b1"], name="bn1", epsilon=1e-5),
        N("Relu", ["b1"], ["r1"], name="relu1"),
        N("Dropout", ["r1"], ["d1"], name="dropout"),
        N("Reshape", ["d1", const("reshape.shape", np.array([1, 16, 32, 32], np.int64))], ["s1"], name="reshape_same"),
        N("Transpose", ["s1"], ["t1"], name="to_nhwc", perm=[0, 2, 3, 1]),
        N("Transpose", ["t1"], ["t2"], name="to_nchw", perm=[0, 3, 1, 2]),
        # block 2: weight computed from two constants, Conv + BN, duplicated Relu
        N("Mul", [const("conv2.weight_a", conv_w(16, 16)),
                  const("conv2.weight_b", rng.uniform(0.5, 1.5, (16, 1, 1, 1)).astype(np.float32))],
          ["conv2.weight"], name="conv2_weight_mul"),
        N("Conv", ["t2", "conv2.weight"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        N("BatchNormalization", ["c2"] + bn("bn2", 16), ["b2"], name="bn2", epsilon=1e-5),
        N("Relu", ["b2"], ["r2a"], name="relu2a"),
        N("Relu", ["b2"], ["r2b"], name="relu2b"),
        N("Add", ["r2a", "r2b"], ["a2"], name="add_dup"),
        # block 3: Conv without bias, then a per-channel bias Add
        N("Conv", ["a2", const("conv3.weight", conv_w(32, 16))], ["c3"], name="conv3",
          kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        N("Add", ["c3", const("conv3.bias", (rng.randn(1, 32, 1, 1) * 0.1).astype(np.float32))], ["c3b"], name="conv3_bias"),
        N("Relu", ["c3b"], ["r3"], name="relu3"),
        # head
        N("GlobalAveragePool", ["r3"], ["gap"], name="gap"),
        N("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        N("Gemm", ["flat", const("fc.weight", (rng.randn(10, 32) * 0.3).astype(np.float32)),
                   const("fc.bias", (rng.randn(10) * 0.1).astype(np.float32))],
          ["logits"], name="fc", transB=1),
        N("Softmax", ["logits"], ["output"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "isomer_demo",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="isomer/scripts/make_demo_model.py")
    model.ir_version = IR_VERSION
    return model


def run_ort(path, x, optimize):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description="write the isomer demo ONNX model")
    ap.add_argument("--out", default=os.path.join(root, "examples", "demo.onnx"))
    args = ap.parse_args()

    model = build()
    onnx.checker.check_model(model, full_check=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    onnx.save(model, args.out)

    x = np.random.RandomState(1).randn(1, 3, 32, 32).astype(np.float32)
    y0 = run_ort(args.out, x, optimize=False)
    y1 = run_ort(args.out, x, optimize=True)
    assert y0.shape == (1, 10) and np.all(np.isfinite(y0)), y0
    assert abs(float(y0.sum()) - 1.0) < 1e-5, y0.sum()
    assert np.allclose(y0, y1, rtol=1e-5, atol=1e-6), np.abs(y0 - y1).max()
    print(f"{args.out}: {len(model.graph.node)} nodes, {os.path.getsize(args.out)} bytes")
    print("onnxruntime output:", np.array2string(y0[0], precision=4))


if __name__ == "__main__":
    main()
