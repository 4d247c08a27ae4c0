"""What a model offers its users, and how an optimized copy differs from it.

A user's code that feeds the original model must feed the optimized one unchanged:
the same graph inputs (names, order, element types, shapes with their symbolic dim
names, the default values of inputs that have one), the same outputs, an ai.onnx
opset no older, the other domains the model still uses, the IR version and the
model's own facts (producer, metadata, doc strings, graph name).
"""
import numpy as np
from onnx import numpy_helper


def _dims(value_info):
    t = value_info.type
    if not t.HasField("tensor_type"):
        return (t.WhichOneof("value"),)
    if not t.tensor_type.HasField("shape"):
        return None  # unknown rank
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.tensor_type.shape.dim)


def _signature(values):
    return [(v.name, v.type.tensor_type.elem_type if v.type.HasField("tensor_type") else v.type.WhichOneof("value"),
             _dims(v)) for v in values]


def _refines(want, got):
    """An output declared with unknown dims (or no shape) may be written with what they
    are; a dim the original gives a value or a name keeps it."""
    if want[:2] != got[:2] or want[2] is None:
        return want[:2] == got[:2]
    return got[2] is not None and len(want[2]) == len(got[2]) and all(
        w == "?" or w == g for w, g in zip(want[2], got[2]))


def input_defaults(model):
    """{input name: array}: the initializers the graph also lists as inputs (IR 4 on)."""
    if model.ir_version < 4:
        return {}
    names = {i.name for i in model.graph.input}
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if t.name in names}


def _opsets(model):
    return {("ai.onnx" if o.domain in ("", "ai.onnx") else o.domain): o.version for o in model.opset_import}


def _used_domains(model):
    used = {"ai.onnx" if n.domain in ("", "ai.onnx") else n.domain for n in model.graph.node}
    for f in model.functions:
        used.add(f.domain)
        used |= {"ai.onnx" if n.domain in ("", "ai.onnx") else n.domain for n in f.node}
    return used


def interface_differences(original, optimized, frozen=()):
    """The ways `optimized` breaks `original`'s interface, as sentences ([] when none).
    `frozen`: inputs the user asked to fold (--fold-overridable-inputs)."""
    out = []
    want_inputs = [s for s in _signature(original.graph.input) if s[0] not in frozen]
    if original.ir_version < 4:
        # Every initializer is listed as an input there; they are constants, not the interface.
        inits = {t.name for t in original.graph.initializer}
        want_inputs = [s for s in want_inputs if s[0] not in inits]
        got_inputs = [s for s in _signature(optimized.graph.input)
                      if s[0] not in {t.name for t in optimized.graph.initializer}]
    else:
        got_inputs = _signature(optimized.graph.input)
    if want_inputs != got_inputs:
        out.append(f"inputs {want_inputs} became {got_inputs}")
    want_defaults = {k: v for k, v in input_defaults(original).items() if k not in frozen}
    got_defaults = input_defaults(optimized)
    for name, value in want_defaults.items():
        if name not in got_defaults:
            out.append(f"input '{name}' lost its default value")
        elif got_defaults[name].dtype != value.dtype or not np.array_equal(got_defaults[name], value, equal_nan=True):
            out.append(f"input '{name}' has another default value")
    for name in set(got_defaults) - set(want_defaults):
        out.append(f"input '{name}' gained a default value")
    want_outputs, got_outputs = _signature(original.graph.output), _signature(optimized.graph.output)
    if len(want_outputs) != len(got_outputs) or not all(map(_refines, want_outputs, got_outputs)):
        out.append(f"outputs {want_outputs} became {got_outputs}")
    want, got = _opsets(original), _opsets(optimized)
    if got.get("ai.onnx", 0) < want.get("ai.onnx", 0):
        out.append(f"ai.onnx opset {want.get('ai.onnx')} became {got.get('ai.onnx')}")
    for domain in _used_domains(optimized):
        if domain not in got and domain != "ai.onnx":
            out.append(f"domain '{domain}' is used but not imported")
    for domain, version in want.items():
        if domain in _used_domains(optimized) and got.get(domain) != version:
            out.append(f"domain '{domain}' at opset {version} became {got.get(domain)}")
    if original.ir_version != optimized.ir_version:
        out.append(f"IR version {original.ir_version} became {optimized.ir_version}")
    for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
        if getattr(original, field) != getattr(optimized, field):
            out.append(f"model {field} {getattr(original, field)!r} became {getattr(optimized, field)!r}")
    if [(p.key, p.value) for p in original.metadata_props] != [(p.key, p.value) for p in optimized.metadata_props]:
        out.append("metadata_props changed")
    if original.graph.name != optimized.graph.name:
        out.append(f"graph name {original.graph.name!r} became {optimized.graph.name!r}")
    if original.graph.doc_string != optimized.graph.doc_string:
        out.append("graph doc_string changed")
    return out
