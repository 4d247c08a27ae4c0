"""TASO's NasRNN, unrolled over 5 steps, as a PyTorch module exports it: 16 weight
matrices shared by the steps (8 gates on x, 8 on h), each gate t_i = x @ W1_i + h @ W2_i
as MatMul + MatMul + Add (torch.mm writes MatMul), then the cell's combination:

    m0 = relu(t0) + sigmoid(t3)     m1 = sigmoid(t1) + tanh(t2)
    m2 = sigmoid(t4) * tanh(t5)     m3 = sigmoid(t6) * relu(t7)
    m4 = sigmoid(m1) + tanh(m2)     m5 = tanh(m0) * tanh(m3)
    h  = tanh(tanh(m4) * tanh(m5))

The input is the whole sequence x [steps, batch, hidden]; step t reads x[t] (Gather with a
scalar index, what aten.select writes). The initial state is a weight, as in TASO's
graph (`graph.new_weight`), so h0 @ W2_i is constant in the first step.
"""
import numpy as np
from onnx import TensorProto

from corpus.common import Built, GraphWriter, normal_input

F32 = TensorProto.FLOAT


def nasrnn(batch, hidden=512, steps=5, seed=6):
    g = GraphWriter(f"nasrnn_b{batch}", seed)
    xs = g.input("x", F32, [steps, batch, hidden])
    w1 = [g.weight(f"cell.w_x.{i}", [hidden, hidden], fan_in=hidden) for i in range(8)]
    w2 = [g.weight(f"cell.w_h.{i}", [hidden, hidden], fan_in=hidden) for i in range(8)]
    h = g.tensor("h0", g.rng.uniform(-1.0, 1.0, (batch, hidden)).astype(np.float32))

    def act(kind, t):
        return g.op({"relu": "Relu", "sig": "Sigmoid", "tanh": "Tanh"}[kind], [t], out=kind)

    for step in range(steps):
        x = g.op("Gather", [xs, g.const(step, np.int64)], out="select", axis=0)
        t = [g.op("Add", [g.op("MatMul", [x, w1[i]], out="mm"), g.op("MatMul", [h, w2[i]], out="mm")], out="add")
             for i in range(8)]
        m0 = g.op("Add", [act("relu", t[0]), act("sig", t[3])], out="add")
        m1 = g.op("Add", [act("sig", t[1]), act("tanh", t[2])], out="add")
        m2 = g.op("Mul", [act("sig", t[4]), act("tanh", t[5])], out="mul")
        m3 = g.op("Mul", [act("sig", t[6]), act("relu", t[7])], out="mul")
        m4 = g.op("Add", [act("sig", m1), act("tanh", m2)], out="add")
        m5 = g.op("Mul", [act("tanh", m0), act("tanh", m3)], out="mul")
        h = act("tanh", g.op("Mul", [act("tanh", m4), act("tanh", m5)], out="mul"))
    g.output(h, F32, [batch, hidden], rename="h")
    return Built(g.model(doc=f"TASO NasRNN, batch {batch}, hidden {hidden}, {steps} steps"),
                 [normal_input("x", [steps, batch, hidden])],
                 made=f"onnx.helper, TASO's NasRNN cell (hidden {hidden}, {steps} steps unrolled, batch {batch}) as a "
                      "PyTorch module with shared weights exports it: per gate MatMul(x,W1)+MatMul(h,W2)+Add, "
                      "x[t] as Gather, h0 a weight",
                 extra={"batch": batch, "hidden": hidden, "steps": steps})
