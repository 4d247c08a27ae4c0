"""What every corpus builder shares: a graph writer in the form current exporters use,
random weights from a fixed seed, saving (with external data), and the manifest entry.

A builder returns a `Built`: the ModelProto and the description of its inputs (shape,
dtype and the values that are valid for them), from which `inputs.make_inputs` makes
feeds that every engine accepts.
"""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# What torch.onnx.export(..., dynamo=True) in torch 2.x writes by default: IR version 10
# and the default opset 18 of its op library (torchlib).
DYNAMO_IR_VERSION = 10
DYNAMO_OPSET = 18
PRODUCER = "isomer-corpus"

NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
}
ONNX_TO_NAME = {TensorProto.FLOAT: "float32", TensorProto.INT64: "int64", TensorProto.INT32: "int32",
                TensorProto.BOOL: "bool"}


@dataclasses.dataclass
class InputSpec:
    """One graph input as the bench feeds it.

    shape: the concrete shape to feed; model_shape: as the model declares it (str for a
    symbolic dimension). values: {"kind": "normal", "std": s} or {"kind": "uniform",
    "low": a, "high": b} for floats, {"kind": "integer", "low": a, "high": b} for integer
    inputs, high exclusive (token ids in [0, vocab)).
    """
    name: str
    dtype: str
    shape: list
    values: dict
    model_shape: list | None = None

    def to_json(self):
        d = dataclasses.asdict(self)
        if d["model_shape"] is None:
            d["model_shape"] = list(self.shape)
        if self.values.get("kind") == "integer":
            d["range"] = [self.values["low"], self.values["high"]]  # [low, high)
        return d


def normal_input(name, shape, std=1.0, model_shape=None):
    return InputSpec(name, "float32", list(shape), {"kind": "normal", "std": std}, model_shape)


def uniform_input(name, shape, low=-1.0, high=1.0, model_shape=None):
    return InputSpec(name, "float32", list(shape), {"kind": "uniform", "low": low, "high": high}, model_shape)


def integer_input(name, shape, low, high, dtype="int64", model_shape=None):
    return InputSpec(name, dtype, list(shape), {"kind": "integer", "low": int(low), "high": int(high)}, model_shape)


@dataclasses.dataclass
class Built:
    """A model and what the manifest says about it."""
    model: onnx.ModelProto
    inputs: list
    made: str                 # how it was made, one sentence
    external_data: bool = True
    notes: str = ""
    extra: dict = dataclasses.field(default_factory=dict)
    onnx_path: str = ""       # set when the builder saved the model itself (torch export)


class GraphWriter:
    """Builds a graph node by node the way torch's dynamo exporter names and lays it out:
    values named after the aten op that made them (`matmul_3`), initializers after the
    module path of the parameter (`layers.0.attn.q_proj.weight`), small constants as
    named scalar initializers (`val_7`), nodes named `node_<Op>_<n>`.
    """

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.inputs = []
        self.outputs = []
        self._counts = {}
        self._names = set()
        self._consts = {}

    # --- names ------------------------------------------------------------------
    def fresh(self, base):
        base = base.replace("::", "_")
        n = self._counts.get(base, 0)
        while True:
            name = base if n == 0 else f"{base}_{n}"
            n += 1
            if name not in self._names:
                self._counts[base] = n
                self._names.add(name)
                return name

    # --- graph edges ------------------------------------------------------------
    def input(self, name, elem_type, shape):
        self._names.add(name)
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, shape))
        return name

    def output(self, value, elem_type, shape, rename=None):
        """Marks `value` as a graph output (renamed through an Identity-free rewrite of
        its producer when `rename` is given, as torch names outputs)."""
        if rename and rename != value:
            for node in self.nodes:
                node.output[:] = [rename if o == value else o for o in node.output]
                node.input[:] = [rename if i == value else i for i in node.input]
            self._names.add(rename)
            value = rename
        self.outputs.append(helper.make_tensor_value_info(value, elem_type, shape))
        return value

    # --- initializers -----------------------------------------------------------
    def tensor(self, name, array):
        """An initializer with exactly this value."""
        array = np.asarray(array)
        name = self.fresh(name)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, name, shape, std=None, fan_in=None):
        """A random float32 weight, N(0, std^2); std defaults to 1/sqrt(fan_in) so
        activations keep their scale through a matmul or convolution."""
        if std is None:
            fan_in = fan_in if fan_in is not None else shape[0]
            std = 1.0 / math.sqrt(fan_in)
        return self.tensor(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def bias(self, name, n, std=0.02):
        return self.tensor(name, (self.rng.standard_normal(n) * std).astype(np.float32))

    def ones(self, name, n):
        return self.tensor(name, np.ones(n, np.float32))

    def zeros(self, name, n):
        return self.tensor(name, np.zeros(n, np.float32))

    def const(self, value, dtype=np.float32):
        """A small constant (scalar or short vector) as a shared `val_<n>` initializer,
        as the exporter's constant lifting writes them."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.tensor("val", array)
        return self._consts[key]

    def i64(self, values):
        return self.const(values, np.int64)

    # --- nodes ------------------------------------------------------------------
    def op(self, op_type, inputs, out=None, n_out=1, **attrs):
        """Appends one node; returns its output name (a list for n_out > 1)."""
        base = out or op_type.lower()
        outs = [self.fresh(base) for _ in range(n_out)]
        node = helper.make_node(op_type, list(inputs), outs, name=self.fresh(f"node_{op_type}"), **attrs)
        self.nodes.append(node)
        return outs[0] if n_out == 1 else outs

    def model(self, opset=DYNAMO_OPSET, ir_version=DYNAMO_IR_VERSION, doc=""):
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                                  producer_name=PRODUCER, doc_string=doc)
        model.ir_version = ir_version
        return model

    # --- the decompositions torch's op library (torchlib) writes -----------------
    def linear(self, x, in_f, out_f, prefix, bias=True, std=None):
        """nn.Linear on a 3-D input: MatMul with the weight, then Add of the bias. torchlib
        writes Transpose(weight) + MatMul; the exporter's optimizer folds the transpose of
        the initializer, so the file holds the weight as [in, out]."""
        w = self.weight(prefix + ".weight", [in_f, out_f], std=std, fan_in=in_f)
        y = self.op("MatMul", [x, w], out="linear")
        if bias:
            y = self.op("Add", [y, self.bias(prefix + ".bias", out_f)], out="linear")
        return y

    def layer_norm(self, x, n, prefix, eps=1e-5):
        """aten.layer_norm at opset >= 17: one LayerNormalization over the last axis."""
        w = self.tensor(prefix + ".weight", (1.0 + 0.1 * self.rng.standard_normal(n)).astype(np.float32))
        b = self.bias(prefix + ".bias", n)
        return self.op("LayerNormalization", [x, w, b], out="layer_norm", axis=-1, epsilon=eps)

    def gelu_erf(self, x):
        """aten.gelu(approximate='none') below opset 20: x * (erf(x / sqrt 2) + 1) * 0.5."""
        t = self.op("Div", [x, self.const(math.sqrt(2.0))], out="div")
        t = self.op("Erf", [t], out="erf")
        t = self.op("Add", [t, self.const(1.0)], out="add")
        t = self.op("Mul", [x, t], out="mul")
        return self.op("Mul", [t, self.const(0.5)], out="gelu")

    def gelu_tanh(self, x):
        """GPT-2's NewGELU as the module writes it, op by op:
        0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
        t = self.op("Pow", [x, self.const(3.0)], out="pow")
        t = self.op("Mul", [self.const(0.044715), t], out="mul")
        t = self.op("Add", [x, t], out="add")
        t = self.op("Mul", [self.const(math.sqrt(2.0 / math.pi)), t], out="mul")
        t = self.op("Tanh", [t], out="tanh")
        t = self.op("Add", [self.const(1.0), t], out="add")
        t = self.op("Mul", [x, t], out="mul")
        return self.op("Mul", [self.const(0.5), t], out="mul")

    def sdpa(self, q, k, v, head_dim, mask=None, bool_mask=None):
        """F.scaled_dot_product_attention as torchlib decomposes it at opset 18: the
        scale is split as sqrt(scale) multiplied into q and into the transposed k (one
        Mul each), then MatMul, the mask added (a bool mask first turned into 0/-inf by
        Where), Softmax on the last axis, MatMul with v."""
        sqrt_scale = self.const(math.sqrt(1.0 / math.sqrt(head_dim)))
        qs = self.op("Mul", [q, sqrt_scale], out="mul")
        kt = self.op("Transpose", [k], out="transpose", perm=[0, 1, 3, 2])
        ks = self.op("Mul", [kt, sqrt_scale], out="mul")
        scores = self.op("MatMul", [qs, ks], out="matmul")
        if bool_mask is not None:
            mask = self.op("Where", [bool_mask, self.const(0.0), self.const(-np.inf)], out="where")
        if mask is not None:
            scores = self.op("Add", [scores, mask], out="add")
        probs = self.op("Softmax", [scores], out="softmax", axis=-1)
        return self.op("MatMul", [probs, v], out="matmul")


def save_model(model, path, external_data):
    """Writes `path` (and `path`.data with the weights when external_data, as torch's
    exporter does: one file beside the model, named after it)."""
    for f in (path, path + ".data"):
        if os.path.exists(f):
            os.remove(f)
    if external_data:
        onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=os.path.basename(path) + ".data", size_threshold=1024)
    else:
        onnx.save_model(model, path)


def count_params(model):
    n = 0
    for t in model.graph.initializer:
        n += int(np.prod(t.dims)) if len(t.dims) else 1
    return n


def causal_mask_bool(n):
    """A lower-triangular bool matrix: True where a query may attend to a key."""
    return np.tril(np.ones((n, n), dtype=np.bool_))
