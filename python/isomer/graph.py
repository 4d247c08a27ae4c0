"""isomer.Graph: write models in Python, node by node, through the operator table.

    g = isomer.Graph()
    x = g.input("x", [1, 3, 32, 32])
    w = g.constant(np.random.rand(8, 3, 3, 3).astype(np.float32))
    y = g.relu(g.conv2d(x, w, pads=1))
    g.output(y, "y")
    model = g.to_onnx()            # onnx.ModelProto
    (out,) = g.evaluate({"x": x0})  # numpy arrays

`op()` is generic: any operator in the table, attributes as keyword arguments,
validated by the C++ shape rules as the node is made (a bad shape raises
isomer.Error at once). The named methods are thin wrappers over it. Nodes are
hash-consed: asking twice for the same operator on the same inputs gives one node.
"""

import numpy as np

from . import _core
from ._api import _as_array, _numpy_name, _to_model_proto, evaluate_graph

Value = _core.Value

# numpy / ONNX-style names -> isomer's short dtype names
_DTYPE_NAMES = {"float16": "f16", "half": "f16", "float32": "f32", "float": "f32", "float64": "f64",
                "double": "f64", "bfloat16": "bf16", "int8": "i8", "int16": "i16", "int32": "i32",
                "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
                "bool": "bool"}
_SHORT_NAMES = set(_DTYPE_NAMES.values())
# isomer's names -> ONNX TensorProto.DataType (Cast's `to`)
_ONNX_DTYPES = {"f32": 1, "u8": 2, "i8": 3, "u16": 4, "i16": 5, "i32": 6, "i64": 7, "bool": 9, "f16": 10,
                "f64": 11, "u32": 12, "u64": 13, "bf16": 16}


def dtype_name(dtype):
    """isomer's short name ("f32") for a numpy dtype, a numpy type or a name."""
    if isinstance(dtype, str) and dtype in _SHORT_NAMES:
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES:
        return _DTYPE_NAMES[dtype]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in _DTYPE_NAMES:
        raise _core.Error(f"unknown element type {dtype!r}")
    return _DTYPE_NAMES[name]


def _pair(v, n, what):
    """An int or a sequence -> a list of n ints (strides=2 -> [2, 2])."""
    if isinstance(v, (int, np.integer)):
        return [int(v)] * n
    v = [int(x) for x in v]
    if len(v) != n:
        raise _core.Error(f"{what} must be an int or {n} ints, got {len(v)}")
    return v


def _pads(v, spatial):
    """pads=1 -> all sides; (ph, pw) -> symmetric; 2*spatial values -> ONNX order as is."""
    if isinstance(v, (int, np.integer)):
        return [int(v)] * (2 * spatial)
    v = [int(x) for x in v]
    if len(v) == spatial:
        return v + v
    if len(v) != 2 * spatial:
        raise _core.Error(f"pads must be an int, {spatial} or {2 * spatial} ints, got {len(v)}")
    return v


class Graph:
    """A graph being built. Values returned by its methods are isomer.Value objects
    (dtype, shape, op_type); mark results with output() and finish with to_onnx(),
    evaluate() or build()."""

    def __init__(self, name="isomer", opset=17):
        self.name = name
        self.opset = int(opset)
        self._builder = _core.Builder()
        self._outputs = []
        self._output_names = []

    # ---- leaves and outputs ------------------------------------------------------

    def input(self, name, shape, dtype="float32"):
        """A graph input. shape: ints, str for a symbolic dim ("batch"), None for unknown."""
        return self._builder.input(name, dtype_name(dtype), list(shape))

    def constant(self, value, dtype=None, name=""):
        """A constant tensor (weights). Arrays keep their dtype unless dtype is given;
        Python numbers default to float32."""
        if dtype is not None:
            a = np.asarray(value, dtype=_numpy_name(dtype_name(dtype)))
        elif isinstance(value, (np.ndarray, np.generic)):
            a = np.asarray(value)
        else:
            a = np.asarray(value)
            if a.dtype == np.float64:
                a = a.astype(np.float32)
        return self._builder.constant(_as_array(a, None, "constant"), name)

    def output(self, value, name=None):
        """Marks `value` as a graph output (named `name`, default "output<i>")."""
        if not isinstance(value, Value):
            raise TypeError(f"output() takes an isomer.Value, not {type(value).__name__}")
        self._outputs.append(value)
        self._output_names.append(name or f"output{len(self._outputs) - 1}")
        return value

    @property
    def outputs(self):
        return list(zip(self._output_names, self._outputs))

    # ---- the generic operator ----------------------------------------------------

    def op(self, op_type, inputs, *, num_outputs=0, name="", **attrs):
        """Adds an operator node of the operator table. inputs: Values, None for an
        omitted optional input, numpy arrays or Python numbers (made constants of the
        first Value input's dtype). Attributes are keyword arguments in ONNX opset-17
        form. Returns a Value, or a tuple of Values for several outputs."""
        if isinstance(inputs, Value):
            inputs = [inputs]
        like = next((v.dtype for v in inputs if isinstance(v, Value)), "f32")
        values = [v if v is None or isinstance(v, Value) else self._const_like(v, like) for v in inputs]
        out = self._builder.op(op_type, values, attrs, num_outputs, name)
        return out[0] if len(out) == 1 else tuple(out)

    def _const_like(self, v, dtype):
        if isinstance(v, (np.ndarray, np.generic)):
            return self.constant(v)
        return self.constant(v, dtype=dtype)

    def _ints(self, v):
        return self.constant(np.asarray(v, dtype=np.int64).reshape(-1))

    # ---- named conveniences (thin wrappers over op) ---------------------------------

    def relu(self, x): return self.op("Relu", [x])
    def sigmoid(self, x): return self.op("Sigmoid", [x])
    def tanh(self, x): return self.op("Tanh", [x])
    def exp(self, x): return self.op("Exp", [x])
    def log(self, x): return self.op("Log", [x])
    def sqrt(self, x): return self.op("Sqrt", [x])
    def neg(self, x): return self.op("Neg", [x])
    def abs(self, x): return self.op("Abs", [x])
    def erf(self, x): return self.op("Erf", [x])
    def identity(self, x): return self.op("Identity", [x])
    def leaky_relu(self, x, alpha=0.01): return self.op("LeakyRelu", [x], alpha=alpha)
    def gelu(self, x, approximate="none"): return self.op("Gelu", [x], approximate=approximate)

    def add(self, a, b): return self.op("Add", [a, b])
    def sub(self, a, b): return self.op("Sub", [a, b])
    def mul(self, a, b): return self.op("Mul", [a, b])
    def div(self, a, b): return self.op("Div", [a, b])
    def pow(self, a, b): return self.op("Pow", [a, b])
    def maximum(self, *xs): return self.op("Max", list(xs))
    def minimum(self, *xs): return self.op("Min", list(xs))

    def clip(self, x, min=None, max=None):
        return self.op("Clip", [x, min, max])

    def cast(self, x, dtype):
        return self.op("Cast", [x], to=_ONNX_DTYPES[dtype_name(dtype)])

    def matmul(self, a, b): return self.op("MatMul", [a, b])

    def gemm(self, a, b, c=None, alpha=1.0, beta=1.0, trans_a=False, trans_b=False):
        return self.op("Gemm", [a, b, c], alpha=alpha, beta=beta, transA=int(trans_a), transB=int(trans_b))

    def conv2d(self, x, w, b=None, strides=1, pads=0, dilations=1, group=1):
        return self.op("Conv", [x, w, b], strides=_pair(strides, 2, "strides"), pads=_pads(pads, 2),
                       dilations=_pair(dilations, 2, "dilations"), group=group)

    def batch_norm(self, x, scale, bias, mean, var, epsilon=1e-5):
        return self.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=epsilon)

    def layer_norm(self, x, scale, bias=None, axis=-1, epsilon=1e-5):
        return self.op("LayerNormalization", [x, scale, bias], axis=axis, epsilon=epsilon)

    def max_pool2d(self, x, kernel, strides=None, pads=0):
        kernel = _pair(kernel, 2, "kernel")
        return self.op("MaxPool", [x], kernel_shape=kernel, strides=_pair(strides or kernel, 2, "strides"),
                       pads=_pads(pads, 2))

    def avg_pool2d(self, x, kernel, strides=None, pads=0):
        kernel = _pair(kernel, 2, "kernel")
        return self.op("AveragePool", [x], kernel_shape=kernel, strides=_pair(strides or kernel, 2, "strides"),
                       pads=_pads(pads, 2))

    def global_avg_pool(self, x): return self.op("GlobalAveragePool", [x])
    def softmax(self, x, axis=-1): return self.op("Softmax", [x], axis=axis)

    def reduce_mean(self, x, axes, keepdims=True):
        return self.op("ReduceMean", [x], axes=list(axes), keepdims=int(keepdims))

    def reduce_sum(self, x, axes, keepdims=True):
        return self.op("ReduceSum", [x, self._ints(axes)], keepdims=int(keepdims))

    def reshape(self, x, shape): return self.op("Reshape", [x, self._ints(shape)])
    def transpose(self, x, perm): return self.op("Transpose", [x], perm=list(perm))
    def flatten(self, x, axis=1): return self.op("Flatten", [x], axis=axis)
    def concat(self, xs, axis): return self.op("Concat", list(xs), axis=axis)
    def squeeze(self, x, axes): return self.op("Squeeze", [x, self._ints(axes)])
    def unsqueeze(self, x, axes): return self.op("Unsqueeze", [x, self._ints(axes)])

    def split(self, x, sizes, axis=0):
        return self.op("Split", [x, self._ints(sizes)], axis=axis, num_outputs=len(sizes))

    # ---- finishing -----------------------------------------------------------------

    def build(self):
        """The finished, immutable graph (isomer._core.Graph)."""
        return self._builder.finish(self._outputs, self._output_names, self.opset, self.name)

    def to_onnx(self):
        """The graph as an onnx.ModelProto (opset `self.opset`)."""
        return _to_model_proto(self.build().to_onnx_bytes())

    def to_bytes(self):
        """The graph as a serialized ONNX model."""
        return self.build().to_onnx_bytes()

    def evaluate(self, inputs):
        """Runs the graph with the reference evaluator: inputs as a dict by name or a
        list in input order; returns the outputs as numpy arrays."""
        return evaluate_graph(self.build(), inputs)

    def __repr__(self):
        return f"isomer.Graph('{self.name}', {len(self._outputs)} outputs)"
