"""The ninth family of the hostile-model campaign (scripts/hostile_campaign.py): what a model
says about where its names and operators come from. Model-local functions beyond one call
(nested, attribute references passed down, default attribute values, their own opset, an If
inside the body, a call inside a Loop body, outputs left unused or never produced, names from
outside the function, a standard operator's name in a foreign domain, tensors in external data), opset
imports that name one domain twice or a training domain, attributes that refer to a function
attribute outside any function or whose declared type is not the one set, Constant nodes with
two values or none, graph outputs that are graph inputs or initializers or listed twice,
model metadata in megabytes or a training_info graph over the initializers, and names that hold
a newline, a carriage return or a terminal escape.

Each mutator builds a small model of its own (the source is ignored) and returns (model, note)
or (model, note, bad_index), as hostile_mutators_semantic.py's do.
"""
import os

import numpy as np
from onnx import AttributeProto, TensorProto, helper

from hostile_mutators_semantic import _init, _model, _vi

FN = "local.fn"


def _fn(name, inputs, outputs, nodes, attributes=(), opset=21, domain=FN, defaults=()):
    f = helper.make_function(domain, name, inputs, outputs, nodes,
                             [helper.make_opsetid("", opset), helper.make_opsetid(FN, 1)], attributes=list(attributes))
    f.attribute_proto.extend(defaults)
    return f


def _ref(name, ref, kind=AttributeProto.FLOAT):
    a = AttributeProto()
    a.name, a.ref_attr_name, a.type = name, ref, kind
    return a


def _external(name, array, wd, location=None):
    """A float tensor whose data is in the file w_<name>.bin of `wd` (`location`: where it says it is)."""
    with open(os.path.join(wd, f"w_{name}.bin"), "wb") as f:
        f.write(array.tobytes())
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=array.shape, data_location=TensorProto.EXTERNAL)
    for k, v in (("location", location or f"w_{name}.bin"), ("offset", "0"), ("length", str(array.nbytes))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def _with_fns(nodes, inputs, outputs, fns, inits=(), opset=21):
    m = _model(nodes, inputs, outputs, inits, opset=opset)
    m.functions.extend(fns)
    m.opset_import.append(helper.make_opsetid(FN, 1))
    return m


def m_function_scope(m, rng, wd):
    """Model-local functions in the ways one call does not show: nested calls, attributes passed
    down by reference or defaulted, a body at another opset, control flow inside or around the
    call, outputs unused or unproduced, outer names, standard names in a foreign domain."""
    how = rng.choice(["nested", "nested_ref", "default_attr", "default_overridden", "own_opset", "if_inside",
                      "if_returns_input", "default_type_lies",
                      "in_loop", "unused_output", "unproduced_output", "outer_name", "std_name_foreign",
                      "std_name_std_domain", "empty_body", "ref_type_mismatch", "input_twice", "external_const",
                      "external_escape", "overload", "overload_missing"])
    x, y = _vi("x", TensorProto.FLOAT, [2, 3]), _vi("y", TensorProto.FLOAT, None)
    relu_neg = [helper.make_node("Relu", ["a"], ["r"]), helper.make_node("Neg", ["r"], ["b"])]
    call = helper.make_node("F", ["x"], ["y"], domain=FN)
    inits, opset = [], 21
    if how == "nested":
        fns = [_fn("F", ["a"], ["b"], [helper.make_node("G", ["a"], ["t"], domain=FN),
                                       helper.make_node("Abs", ["t"], ["b"])]),
               _fn("G", ["a"], ["b"], relu_neg)]
    elif how in ("nested_ref", "ref_type_mismatch"):
        inner = helper.make_node("LeakyRelu", ["a"], ["b"])
        inner.attribute.append(_ref("alpha", "slope"))
        mid = helper.make_node("G", ["a"], ["b"], domain=FN)
        mid.attribute.append(_ref("slope", "s", AttributeProto.FLOAT if how == "nested_ref" else AttributeProto.INT))
        fns = [_fn("F", ["a"], ["b"], [mid], attributes=["s"]), _fn("G", ["a"], ["b"], [inner], attributes=["slope"])]
        call = helper.make_node("F", ["x"], ["y"], domain=FN, s=0.125 if how == "nested_ref" else 3)
    elif how in ("default_attr", "default_overridden", "default_type_lies"):
        inner = helper.make_node("LeakyRelu", ["a"], ["b"])
        inner.attribute.append(_ref("alpha", "slope"))
        fns = [_fn("F", ["a"], ["b"], [inner],
                   defaults=[helper.make_attribute("slope", 0.3 if how != "default_type_lies" else 3)])]
        if how == "default_overridden":
            call = helper.make_node("F", ["x"], ["y"], domain=FN, slope=0.05)
    elif how == "own_opset":
        # The body speaks opset 11 (Squeeze's axes an attribute); the graph opset 21.
        body = [helper.make_node("Unsqueeze", ["a"], ["u"], axes=[0]), helper.make_node("Squeeze", ["u"], ["b"], axes=[0])]
        fns = [_fn("F", ["a"], ["b"], body, opset=11)]
    elif how in ("if_inside", "if_returns_input"):
        then = helper.make_graph([helper.make_node("Relu", ["a"], ["tb"])], "then", [], [_vi("tb")]) \
            if how == "if_inside" else helper.make_graph([], "then", [], [_vi("a", dims=[2, 3])])
        other = helper.make_graph([helper.make_node("Neg", ["a"], ["eb"])], "else", [], [_vi("eb")])
        body = [helper.make_node("ReduceSum", ["a"], ["s"], keepdims=0),
                helper.make_node("Constant", [], ["z"], value=helper.make_tensor("z", TensorProto.FLOAT, [], [0.0])),
                helper.make_node("Greater", ["s", "z"], ["c"]),
                helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=other)]
        fns = [_fn("F", ["a"], ["b"], body)]
    elif how == "in_loop":
        body = helper.make_graph([helper.make_node("F", ["v"], ["v2"], domain=FN),
                                  helper.make_node("Identity", ["cond"], ["cond2"])], "body",
                                 [_vi("i", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("v")],
                                 [_vi("cond2", TensorProto.BOOL, []), _vi("v2")])
        inits = [_init("n", 3), _init("t", True, np.bool_)]
        fns = [_fn("F", ["a"], ["b"], relu_neg)]
        call = helper.make_node("Loop", ["n", "t", "x"], ["y"], body=body)
    elif how in ("unused_output", "unproduced_output"):
        body = relu_neg + ([helper.make_node("Abs", ["a"], ["c"])] if how == "unused_output" else [])
        fns = [_fn("F", ["a"], ["b", "c"], body)]
        call = helper.make_node("F", ["x"], ["y", "yc"] if how == "unproduced_output" else ["y"], domain=FN)
    elif how == "outer_name":
        # A function has no outer scope: "x" inside it is nothing.
        fns = [_fn("F", ["a"], ["b"], [helper.make_node("Add", ["a", "x"], ["b"])])]
    elif how == "std_name_foreign":
        # "Relu" of the local domain is the function (Sigmoid), not ONNX's Relu.
        fns = [_fn("Relu", ["a"], ["b"], [helper.make_node("Sigmoid", ["a"], ["b"])])]
        call = helper.make_node("Relu", ["x"], ["y"], domain=FN)
    elif how == "std_name_std_domain":
        fns = [_fn("Relu", ["a"], ["b"], [helper.make_node("Sigmoid", ["a"], ["b"])], domain="")]
        call = helper.make_node("Relu", ["x"], ["y"])
    elif how in ("external_const", "external_escape"):
        # A Constant inside the body whose data is in a file beside the model (or outside its folder).
        t = _external("cw", np.arange(6, dtype=np.float32).reshape(2, 3), wd,
                      "w.bin" if how == "external_const" else "../" * 8 + "etc/passwd")
        fns = [_fn("F", ["a"], ["b"], [helper.make_node("Constant", [], ["c"], value=t),
                                       helper.make_node("Add", ["a", "c"], ["b"])])]
    elif how in ("overload", "overload_missing"):
        # IR 10's overloads: two functions F, told apart by the name a call gives.
        fns = []
        for overload, op in (("relu", "Relu"), ("neg", "Neg")):
            f = _fn("F", ["a"], ["b"], [helper.make_node(op, ["a"], ["b"])])
            f.overload = overload
            fns.append(f)
        call.overload = "neg" if how == "overload" else rng.choice(["", "other"])
    elif how == "empty_body":
        fns = [_fn("F", ["a"], ["a"], [])]
    else:  # input_twice
        fns = [_fn("F", ["a", "c"], ["b"], [helper.make_node("Sub", ["a", "c"], ["b"])])]
        call = helper.make_node("F", ["x", "x"], ["y"], domain=FN)
    nodes = [call]
    if how == "unproduced_output":
        nodes.append(helper.make_node("Identity", ["yc"], ["y2"]))
        return _with_fns(nodes, [x], [y, _vi("y2")], fns, inits, opset), f"function_scope {how}"
    return _with_fns(nodes, [x], [y], fns, inits, opset), f"function_scope {how}"


def m_opset_scope(m, rng, wd):
    """Opset imports that name the standard domain twice (as "" and "ai.onnx"), nodes that spell
    the standard domain "ai.onnx", training and ML domains, an operator used at an opset where
    its form differs."""
    how = rng.choice(["alias_nodes", "alias_conflict", "training", "ml_imported", "ml_missing", "old_form"])
    x, y = _vi("x", TensorProto.FLOAT, [2, 3]), _vi("y", TensorProto.FLOAT, None)
    if how in ("alias_nodes", "alias_conflict"):
        nodes = [helper.make_node("Relu", ["x"], ["r"], domain="ai.onnx"), helper.make_node("Neg", ["r"], ["y"])]
        m = _model(nodes, [x], [y])
        if how == "alias_conflict":
            m.opset_import.append(helper.make_opsetid("ai.onnx", 11))
        return m, f"opset_scope {how}"
    if how == "training":
        inits = [_init("lr", 0.1, np.float32), _init("step", 1)]
        nodes = [helper.make_node("Adagrad", ["lr", "step", "x", "x", "x"], ["y", "h"],
                                  domain="ai.onnx.preview.training")]
        m = _model(nodes, [x], [y, _vi("h")], inits)
        m.opset_import.append(helper.make_opsetid("ai.onnx.preview.training", 1))
        return m, f"opset_scope {how}"
    if how in ("ml_imported", "ml_missing"):
        nodes = [helper.make_node("Normalizer", ["x"], ["n"], domain="ai.onnx.ml", norm="L2"),
                 helper.make_node("Relu", ["n"], ["y"])]
        m = _model(nodes, [x], [y])
        if how == "ml_imported":
            m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
        return m, f"opset_scope {how}"
    # old_form: Squeeze with its axes as an attribute at opset 21 (an input since 13).
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0]), helper.make_node("Squeeze", ["u"], ["y"], axes=[0])]
    return _model(nodes, [x], [y]), f"opset_scope {how}"


def m_attr_scope(m, rng, wd):
    """Attributes that are not what they say: a reference to a function attribute in the main
    graph, a declared type that is not the field set, the same attribute twice, Constant nodes
    with two values, none, or a sparse one."""
    how = rng.choice(["ref_outside", "type_lies", "type_undefined", "twice", "const_two", "const_none",
                      "const_sparse", "const_ints", "const_string"])
    x, y = _vi("x", TensorProto.FLOAT, [2, 3]), _vi("y", TensorProto.FLOAT, None)
    if how == "ref_outside":
        n = helper.make_node("LeakyRelu", ["x"], ["y"])
        n.attribute.append(_ref("alpha", "slope"))
        return _model([n], [x], [y]), f"attr_scope {how}"
    if how in ("type_lies", "type_undefined"):
        n = helper.make_node("Softmax", ["x"], ["y"], axis=0)
        n.attribute[0].type = AttributeProto.FLOAT if how == "type_lies" else AttributeProto.UNDEFINED
        return _model([n], [x], [y]), f"attr_scope {how}"
    if how == "twice":
        n = helper.make_node("Softmax", ["x"], ["y"], axis=0)
        n.attribute.append(helper.make_attribute("axis", 1))
        return _model([n], [x], [y]), f"attr_scope {how}"
    t = helper.make_tensor("c", TensorProto.FLOAT, [2, 3], [1, 2, 3, 4, 5, 6])
    const = helper.make_node("Constant", [], ["c"], value=t)
    if how == "const_two":
        const.attribute.append(helper.make_attribute("value_float", 2.0))
    elif how == "const_none":
        del const.attribute[:]
    elif how == "const_sparse":
        values = helper.make_tensor("v", TensorProto.FLOAT, [2], [5.0, 7.0])
        idx = helper.make_tensor("i", TensorProto.INT64, [2], [1, 4])
        const = helper.make_node("Constant", [], ["c"], sparse_value=helper.make_sparse_tensor(values, idx, [2, 3]))
    elif how == "const_ints":
        const = helper.make_node("Constant", [], ["ci"], value_ints=[1, 2, 3])
        return _model([const, helper.make_node("Cast", ["ci"], ["cf"], to=TensorProto.FLOAT),
                       helper.make_node("Add", ["x", "cf"], ["y"])], [x], [y]), f"attr_scope {how}"
    else:  # const_string: a string constant the graph outputs next to the numbers
        const = helper.make_node("Constant", [], ["cs"], value_string="hostile")
        return _model([const, helper.make_node("Relu", ["x"], ["y"])], [x],
                      [y, _vi("cs", TensorProto.STRING, [])]), f"attr_scope {how}"
    return _model([const, helper.make_node("Add", ["x", "c"], ["y"])], [x], [y]), f"attr_scope {how}"


def m_output_scope(m, rng, wd):
    """Graph outputs that are graph inputs or initializers themselves, or named twice, or also
    fed on to another node; a subgraph output that is an outer value; the scan output of a
    Loop that runs no iteration."""
    how = rng.choice(["output_is_input", "output_is_init", "output_twice", "output_is_input_and_more",
                      "output_fed_on", "branch_outer", "input_twice", "loop_none", "branch_sparse"])
    x = _vi("x", TensorProto.FLOAT, [2, 3])
    w = _init("w", np.arange(6).reshape(2, 3), np.float32)
    if how == "output_is_input":
        return _model([], [x], [_vi("x", TensorProto.FLOAT, [2, 3])]), f"output_scope {how}"
    if how == "output_is_init":
        return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y"), _vi("w", TensorProto.FLOAT, [2, 3])],
                      [w]), f"output_scope {how}"
    if how == "output_twice":
        return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y"), _vi("y")]), f"output_scope {how}"
    if how == "output_is_input_and_more":
        return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("x", TensorProto.FLOAT, [2, 3]), _vi("y")]), \
            f"output_scope {how}"
    if how == "output_fed_on":
        nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "w"], ["y"])]
        return _model(nodes, [x], [_vi("r"), _vi("y")], [w]), f"output_scope {how}"
    if how == "branch_outer":
        then = helper.make_graph([], "then", [], [_vi("x", TensorProto.FLOAT, [2, 3])])
        other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [], [_vi("n")])
        nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                 helper.make_node("Greater", ["s", "z"], ["c"]),
                 helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
        return _model(nodes, [x], [_vi("y")], [_init("z", 0.0, np.float32)]), f"output_scope {how}"
    if how == "branch_sparse":
        # A branch reads a sparse initializer of its own (its values in a file beside the model).
        values = _external("sw", np.array([5.0, 7.0], np.float32), wd)
        then = helper.make_graph([helper.make_node("Add", ["x", "sw"], ["tb"])], "then", [], [_vi("tb")])
        then.sparse_initializer.append(helper.make_sparse_tensor(values, _init("i", [1, 4]), [2, 3]))
        other = helper.make_graph([helper.make_node("Neg", ["x"], ["n"])], "else", [], [_vi("n")])
        nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                 helper.make_node("Greater", ["s", "z"], ["c"]),
                 helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
        return _model(nodes, [x], [_vi("y")], [_init("z", 0.0, np.float32)]), f"output_scope {how}"
    if how == "loop_none":
        # A Loop that runs no iteration: its scan output is 0 elements of the body's [2, 3].
        body = helper.make_graph([helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Add", ["v", "x"], ["v2"]),
                                  helper.make_node("Mul", ["v", "x"], ["sc"])], "body",
                                 [_vi("i", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("v", dims=[2, 3])],
                                 [_vi("c2", TensorProto.BOOL, []), _vi("v2", dims=[2, 3]), _vi("sc", dims=[2, 3])])
        trips, cond = rng.choice([(0, True), (-1, True), (-(1 << 63), True), (3, False)])
        inits = [_init("v0", np.zeros((2, 3)), np.float32), _init("trip", trips), _init("cond", cond, np.bool_)]
        return _model([helper.make_node("Loop", ["trip", "cond", "v0"], ["y", "scan"], body=body)], [x],
                      [_vi("y"), _vi("scan")], inits), f"output_scope {how} {trips} {cond}"
    # input_twice: the same graph input declared twice
    return _model([helper.make_node("Relu", ["x"], ["y"])], [x, _vi("x", TensorProto.FLOAT, [2, 3])], [_vi("y")]), \
        f"output_scope {how}"


def m_metadata(m, rng, wd):
    """Megabytes of doc strings and metadata, many metadata entries, a key twice, and a
    training_info graph that initializes the weights the graph uses."""
    how = rng.choice(["doc_mb", "node_doc_mb", "props_many", "props_dup", "training_info", "producer_nul"])
    x = _vi("x", TensorProto.FLOAT, [2, 3])
    w = _init("w", np.arange(6).reshape(2, 3), np.float32)
    nodes = [helper.make_node("Mul", ["x", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    m = _model(nodes, [x], [_vi("y")], [w])
    big = "d" * rng.choice([1 << 20, 8 << 20])
    if how == "doc_mb":
        m.doc_string = big
        m.graph.doc_string = big
    elif how == "node_doc_mb":
        for n in m.graph.node:
            n.doc_string = big
    elif how == "props_many":
        helper.set_model_props(m, {f"k{i}": "v" * 100 for i in range(rng.choice([10_000, 100_000]))})
    elif how == "props_dup":
        m.metadata_props.add(key="k", value="1")
        m.metadata_props.add(key="k", value="2")
    elif how == "training_info":
        init = helper.make_graph([helper.make_node("Constant", [], ["w"], value=helper.make_tensor(
            "w0", TensorProto.FLOAT, [2, 3], [0.5] * 6))], "init", [], [_vi("w", TensorProto.FLOAT, [2, 3])])
        ti = m.training_info.add()
        ti.initialization.CopyFrom(init)
        ti.initialization_binding.add(key="w", value="w")
    else:
        m.producer_name = "hostile\x00producer"
        m.producer_version = "\n" * 10
    return m, f"metadata {how}"


def m_name_chars(m, rng, wd):
    """Node and value names holding a newline, a carriage return, a terminal escape or a
    right-to-left override, in a model with a fault that an error names them by, or none."""
    how = rng.choice(["newline", "carriage_return", "terminal_escape", "bidi", "tab"])
    where = rng.choice(["node", "value"])
    fault = rng.random() < 0.7
    odd = {"newline": "a\nb", "carriage_return": "a\rb", "terminal_escape": "a\x1b[2Jb", "bidi": "a\u202eb",
           "tab": "a\tb"}[how]
    out = odd if where == "value" else "y"
    nodes = [helper.make_node("Softmax", ["x"], [out], axis=5 if fault else 1, name=odd if where == "node" else "sm")]
    if where == "value":
        nodes.append(helper.make_node("Identity", [out], ["y"]))
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [2, 3])], [_vi("y")]), \
        f"name_chars {how} {where} {'fault' if fault else 'valid'}"


# Classes of this family's results that are not isomer's to fix, in the campaign's TRIAGED form:
# (mutators, commands, note, detail, stderr (regular expressions), reason).
TRIAGED = [
    ("attr_scope", ("optimize", "run_native", "run", "cost"), r"type_undefined$", r"", r"",
     "an attribute whose type field is UNDEFINED: onnx.checker and ONNX Runtime refuse it; isomer reads it by the "
     "field it fills (as older exporters left the type unset) and writes it back typed, which ONNX Runtime runs"),
    ("attr_scope", ("optimize", "run"), r"const_two$", r"ONNX Runtime runs it", r"needs exactly one value attribute",
     "a Constant with two values: ONNX's Constant takes exactly one (onnx.checker refuses the node); ONNX Runtime "
     "takes one of them"),
    ("attr_scope", ("optimize", "run"), r"ref_outside$", r"ONNX Runtime runs it", r"not in a function body",
     "ONNX's IR allows ref_attr_name only inside a function body (onnx.checker does not test it); ONNX Runtime "
     "reads the attribute's unset value field (0); isomer refuses it naming the node"),
    ("attr_scope", ("run",), r"const_string$", r"ONNX Runtime runs it", r"has type str",
     "a string output: isomer's runtime and its ONNX Runtime bridge hold no string tensors, and `run` says so"),
    ("function_scope", ("optimize", "run_native", "run"), r"empty_body$", r"^$", r"",
     "a function of no nodes that returns its input: onnx.checker accepts it, ONNX Runtime's function loader "
     "refuses it (\"!(it.GetName().empty())\"); isomer inlines the call as a copy of its input, which `run` "
     "computes and `optimize` writes (ONNX Runtime runs that)"),
    ("function_scope", ("optimize", "run"), r"outer_name$", r"ONNX Runtime runs it", r"which no input of the function",
     "a function body that reads a name of the graph: a function has no enclosing scope (onnx.checker refuses "
     "it); ONNX Runtime inlines the body into a graph where the name happens to exist"),
    ("metadata", ("optimize", "run"), r"training_info$", r"ONNX Runtime runs it", r"training_info",
     "a model with training_info: its bindings name initializers `optimize` may fold or rename, so isomer refuses "
     "it by design, naming the field; ONNX Runtime ignores training_info"),
    ("opset_scope", ("optimize", "run"), r"alias_conflict$", r"ONNX Runtime runs it", r"twice, at opsets",
     "\"\" and \"ai.onnx\" are one domain, imported at two opsets: the model says two things of itself; ONNX "
     "Runtime takes one of them"),
    ("opset_scope", ("optimize", "run"), r"ml_missing$", r"ONNX Runtime runs it", r"imports no opset of it",
     "a node of ai.onnx.ml in a model that imports no opset of that domain: onnx.checker refuses it, ONNX Runtime "
     "assumes a version"),
    ("opset_scope", ("optimize",), r"training$", r"^$", r"",
     "a node of ai.onnx.preview.training (Adagrad): valid ONNX, but ONNX Runtime's inference build registers no "
     "training operators; `optimize` keeps it verbatim, `run` refuses it"),
]

MUTATORS = {f.__name__[2:]: f for f in [m_function_scope, m_opset_scope, m_attr_scope, m_output_scope, m_metadata, m_name_chars]}
