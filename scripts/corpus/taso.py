"""The two models of the TASO/Tensat benchmark suite that no model zoo has, rebuilt from
the papers' descriptions (and TASO's example graphs) with random weights:

- TASO's BERT: x [1024, 1024] (batch 16 x seq 64), Relu, then 8 attention layers, each
  q, k, v = x W (three [1024, 1024] MatMuls), Reshape (16, 64, 16, 64) and Transpose
  (0, 2, 1, 3), softmax(q @ k) @ v (TASO multiplies k untransposed, valid because seq =
  head dim = 64; the softmax is this rebuild's, see taso_bert), transposed and reshaped
  back, times W_out.
- NasNet-A: a 7x7/2 stem conv (64) + Relu and a 3x3/2 max pool, then 3 stages of 5 normal
  cells and 1 reduction cell at 128/256/512 channels (the reduction cell uses the doubled
  width), input 224. Separable conv = depthwise k x k + 1x1; "squeeze" = 1x1 conv + Relu;
  a previous input of another resolution is fitted by a 3x3/2 conv + Relu.

Both are written as plain ONNX (what TASO's graphs say, in PyTorch's padding conventions:
symmetric pads k//2, AveragePool counting the padding as nn.AvgPool2d does by default).
"""
import math

from onnx import TensorProto

from corpus.common import Built, GraphWriter, normal_input, uniform_input

F32 = TensorProto.FLOAT


def taso_bert(layers=8, rows=1024, hidden=1024, batch=16, seq=64, heads=16, seed=7):
    """TASO's graph multiplies (q @ k) @ v with no softmax, which makes every layer
    homogeneous of degree 3 in its input: over 8 layers an input 4% off in scale (two
    random draws of the same distribution are) ends 1.04^(3^8) = 1e37 off, so outputs
    overflow on almost every input and no check of an optimized model can pass. This
    rebuild puts a Softmax (last axis) on q @ k, as BERT has: each layer is then linear
    in v and activations keep their scale. The matmuls, reshapes and transposes, which
    are what the search rewrites (the Q/K/V merge), are TASO's."""
    g = GraphWriter("taso_bert", seed)
    head_dim = hidden // heads
    assert rows == batch * seq and head_dim == seq, "TASO's graph multiplies q @ k untransposed: seq = head dim"
    x_in = g.input("x", F32, [rows, hidden])
    t = g.op("Relu", [x_in], out="relu")
    for i in range(layers):
        ws = [g.weight(f"layers.{i}.{n}", [hidden, hidden], fan_in=hidden) for n in ["wq", "wk", "wv", "wo"]]
        qkv = []
        for w in ws[:3]:
            p = g.op("MatMul", [t, w], out="matmul")
            p = g.op("Reshape", [p, g.i64([batch, seq, heads, head_dim])], out="reshape")
            qkv.append(g.op("Transpose", [p], out="transpose", perm=[0, 2, 1, 3]))
        a = g.op("MatMul", [qkv[0], qkv[1]], out="matmul")
        a = g.op("Softmax", [a], out="softmax", axis=-1)
        a = g.op("MatMul", [a, qkv[2]], out="matmul")
        a = g.op("Transpose", [a], out="transpose", perm=[0, 2, 1, 3])
        a = g.op("Reshape", [a, g.i64([rows, hidden])], out="reshape")
        t = g.op("MatMul", [a, ws[3]], out="matmul")
    g.output(t, F32, [rows, hidden], rename="output")
    return Built(g.model(doc="TASO's BERT benchmark graph, with a softmax on q @ k"),
                 [uniform_input("x", [rows, hidden], -1.0, 1.0)],
                 made=f"onnx.helper, TASO's BERT graph ({layers} layers on [{rows},{hidden}], batch {batch} x seq "
                      f"{seq}, {heads} heads of {head_dim}: Q/K/V MatMuls, Reshape/Transpose, q@k, @v, back, W_out) "
                      "plus a Softmax on q@k, which TASO's graph lacks (without it outputs overflow float32)",
                 notes="TASO's graph has no softmax; this one has, so that outputs stay finite on any input",
                 extra={"layers": layers, "rows": rows, "hidden": hidden, "heads": heads})


class _Nas:
    def __init__(self, g):
        self.g = g
        self.shapes = {}

    def conv(self, x, c_in, c_out, k, stride=1, group=1, relu=False, name="conv"):
        g = self.g
        w = g.weight(f"{name}.weight", [c_out, c_in // group, k, k],
                     std=math.sqrt((2.0 if relu else 1.0) / (c_in // group * k * k)))
        y = g.op("Conv", [x, w], out="convolution", kernel_shape=[k, k], strides=[stride, stride],
                 pads=[k // 2] * 4, dilations=[1, 1], group=group)
        c, h = self.shapes[x][0], self.shapes[x][1]
        self.shapes[y] = (c_out, (h + 2 * (k // 2) - k) // stride + 1)
        assert c == c_in, (c, c_in)
        if relu:
            r = g.op("Relu", [y], out="relu")
            self.shapes[r] = self.shapes[y]
            y = r
        return y

    def _keep(self, y, x, stride=1):
        self.shapes[y] = (self.shapes[x][0], (self.shapes[x][1] - 1) // stride + 1)
        return y

    def sep(self, x, c, k, stride, name):
        t = self.conv(x, c, c, k, stride, group=c, name=name + ".depthwise")
        return self.conv(t, c, c, 1, name=name + ".pointwise")

    def avg(self, x, stride):
        y = self.g.op("AveragePool", [x], out="avg_pool2d", kernel_shape=[3, 3], strides=[stride, stride],
                      pads=[1, 1, 1, 1], count_include_pad=1)
        return self._keep(y, x, stride=stride)

    def maxp(self, x, stride):
        y = self.g.op("MaxPool", [x], out="max_pool2d", kernel_shape=[3, 3], strides=[stride, stride],
                      pads=[1, 1, 1, 1])
        return self._keep(y, x, stride=stride)

    def add(self, a, b):
        y = self.g.op("Add", [a, b], out="add")
        return self._keep(y, a)

    def concat(self, xs):
        y = self.g.op("Concat", xs, out="cat", axis=1)
        self.shapes[y] = (sum(self.shapes[x][0] for x in xs), self.shapes[xs[0]][1])
        return y

    def squeeze_fit(self, prev, cur, c, name):
        cur = self.conv(cur, self.shapes[cur][0], c, 1, relu=True, name=name + ".squeeze")
        if self.shapes[prev][1] == self.shapes[cur][1]:
            prev = self.conv(prev, self.shapes[prev][0], c, 1, relu=True, name=name + ".fit")
        else:
            prev = self.conv(prev, self.shapes[prev][0], c, 3, 2, relu=True, name=name + ".fit")
        return prev, cur

    def normal_cell(self, prev, cur, c, name):
        prev, cur = self.squeeze_fit(prev, cur, c, name)
        outs = [self.add(self.sep(cur, c, 3, 1, name + ".s0"), cur),
                self.add(self.sep(prev, c, 3, 1, name + ".s1"), self.sep(cur, c, 3, 1, name + ".s2")),
                self.add(self.avg(cur, 1), prev),
                self.add(self.avg(prev, 1), self.avg(prev, 1)),
                self.add(self.sep(prev, c, 3, 1, name + ".s3"), self.sep(prev, c, 3, 1, name + ".s4"))]
        return self.concat(outs)

    def reduction_cell(self, prev, cur, c, name):
        prev, cur = self.squeeze_fit(prev, cur, c, name)
        o0 = self.add(self.sep(prev, c, 7, 2, name + ".s0"), self.sep(cur, c, 5, 2, name + ".s1"))
        o1 = self.add(self.maxp(cur, 2), self.sep(prev, c, 7, 2, name + ".s2"))
        o2 = self.add(self.avg(cur, 2), self.sep(prev, c, 5, 2, name + ".s3"))
        o3 = self.add(self.maxp(cur, 2), self.sep(o0, c, 3, 1, name + ".s4"))
        o4 = self.add(self.avg(o0, 1), o1)
        return self.concat([o0, o1, o2, o3, o4])


def nasnet_a(size=224, channels=128, stages=3, normal_cells=5, seed=8):
    g = GraphWriter("nasnet_a", seed)
    n = _Nas(g)
    x = g.input("input", F32, [1, 3, size, size])
    n.shapes[x] = (3, size)
    t = n.conv(x, 3, 64, 7, 2, relu=True, name="stem")
    t = n.maxp(t, 2)
    c = channels
    for s in range(stages):
        prev = cur = t
        for j in range(normal_cells):
            prev, cur = cur, n.normal_cell(prev, cur, c, f"stage{s}.normal{j}")
        c *= 2
        t = n.reduction_cell(prev, cur, c, f"stage{s}.reduction")
    c_out, hw = n.shapes[t]
    g.output(t, F32, [1, c_out, hw, hw], rename="output")
    return Built(g.model(doc="NasNet-A as in TASO's benchmark graph"),
                 [normal_input("input", [1, 3, size, size])],
                 made=f"onnx.helper, TASO's NasNet-A graph (stem, {stages} stages of {normal_cells} normal + 1 "
                      f"reduction cell, channels {channels}/{channels * 2}/{channels * 4}, input {size}), PyTorch "
                      "padding conventions",
                 extra={"size": size, "channels": channels, "stages": stages, "normal_cells": normal_cells})
