"""If/Loop/Scan bodies held to the rules the main graph is held to (src/onnx/subgraph_check.h).

isomer keeps a node with a subgraph opaque and writes its body back verbatim, so a broken
body used to pass through `optimize` unchecked, to fail wherever the model ran (or, with a
dangling name, to crash libonnx's shape inference). Each case breaks one rule inside a body;
every command must refuse it with one "isomer: error:" line naming the file and the path to
the node ("node 'loop' (Loop) body node 'add' (Add)"), and ONNX Runtime refuses each too, when it
loads the model or when it runs it.
Valid models with bodies (the control cases) must keep importing and computing what ONNX
Runtime computes.
"""
import os
import subprocess

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _loop(body_nodes, body_inputs=None, body_outputs=None, body_value_info=()):
    """y = Loop(3 trips, x) whose body adds 1 to the loop-carried value (as written, valid)."""
    body = helper.make_graph(
        body_nodes or [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
                       helper.make_node("Add", ["v_in", "one"], ["v_out"], name="add_3")],
        "body",
        body_inputs if body_inputs is not None else [_vi("i", I64, []), _vi("cond_in", B, []), _vi("v_in", F, [2])],
        body_outputs if body_outputs is not None else [_vi("cond_out", B, []), _vi("v_out", F, [2])],
        value_info=list(body_value_info))
    nodes = [helper.make_node("Loop", ["trips", "cond", "x"], ["y"], name="loop_0", body=body)]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(np.ones(2, np.float32), "one")]
    return _model(nodes, [_vi("x", F, [2])], [_vi("y", F, [2])], inits)


def _if(then_nodes, then_outputs, else_outputs=None, then_inputs=()):
    then_g = helper.make_graph(then_nodes, "then", list(then_inputs), then_outputs)
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="neg")], "else", [],
                               else_outputs or [_vi("e", F, [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if_0", then_branch=then_g, else_branch=else_g)]
    return _model(nodes, [_vi("c", B, []), _vi("x", F, [2])], [_vi("y", F, [2])])


def body_node_bad_attribute():
    m = _loop(None)
    m.graph.node[0].attribute[0].g.node[1].attribute.append(helper.make_attribute("bogus", 3))
    return m, "node 'loop_0' (Loop) body node 'add_3' (Add): not a valid Add-14 node"


def body_node_too_many_inputs():
    m = _loop(None)
    m.graph.node[0].attribute[0].g.node[1].input.extend(["one", "one"])
    return m, "node 'loop_0' (Loop) body node 'add_3' (Add): not a valid Add-14 node"


def body_node_unknown_operator():
    m = _loop(None)
    m.graph.node[0].attribute[0].g.node[1].op_type = "Frobnicate"
    return m, "node 'loop_0' (Loop) body node 'add_3' (Frobnicate): domain 'ai.onnx' has no operator Frobnicate"


def body_node_input_type_outside_constraint():
    body_in = [_vi("i", I64, []), _vi("cond_in", B, []), _vi("v_in", F, [2])]
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Add", ["cond_in", "cond_in"], ["b"], name="add_bools"),
             helper.make_node("Identity", ["v_in"], ["v_out"])]
    return _loop(nodes, body_in), "node 'loop_0' (Loop) body node 'add_bools' (Add): not a valid Add-14 node"


def body_reads_undefined_name():
    m = _loop(None)
    m.graph.node[0].attribute[0].g.node[1].input[1] = "ghost"
    return m, "node 'loop_0' (Loop) body node 'add_3' (Add) reads 'ghost', which nothing defines"


def body_output_shadows_outer_name():
    m = _loop(None)
    body = m.graph.node[0].attribute[0].g
    body.node[1].output[0] = "trips"
    body.output[1].name = "trips"
    return m, "output 'trips' redefines a name of the enclosing graph"


def body_output_defined_twice():
    m = _loop(None)
    body = m.graph.node[0].attribute[0].g
    body.node[1].output[0] = "cond_out"
    return m, "output 'cond_out' is already defined in the body"


def body_output_produced_by_nothing():
    m = _loop(None)
    m.graph.node[0].attribute[0].g.output[1].name = "nowhere"
    return m, "node 'loop_0' (Loop) body: output 'nowhere' is produced by no node"


def loop_body_missing_input():
    m = _loop(None, body_inputs=[_vi("cond_in", B, []), _vi("v_in", F, [2])])
    return m, "node 'loop_0' (Loop) body: has 2 inputs, but a Loop of 1 loop-carried value takes 3"


def loop_body_too_few_outputs():
    m = _loop([helper.make_node("Identity", ["cond_in"], ["cond_out"])], body_outputs=[_vi("cond_out", B, [])])
    return m, "node 'loop_0' (Loop) body: has 1 output, but a Loop of 1 loop-carried value yields at least 2"


def loop_condition_not_bool():
    nodes = [helper.make_node("Cast", ["cond_in"], ["cond_out"], to=F),
             helper.make_node("Add", ["v_in", "one"], ["v_out"])]
    m = _loop(nodes, body_outputs=[_vi("cond_out", F, []), _vi("v_out", F, [2])])
    return m, "the condition output 'cond_out' must be bool, it is f32"


def loop_carried_value_changes_type():
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Cast", ["v_in"], ["v_out"], to=I64)]
    m = _loop(nodes, body_outputs=[_vi("cond_out", B, []), _vi("v_out", I64, [2])])
    return m, "body: loop-carried value 0 changes type"


def body_value_info_type_lie():
    m = _loop(None, body_value_info=[_vi("v_out", I64, [2])])
    m.graph.node[0].attribute[0].g.output[1].type.tensor_type.elem_type = 0
    return m, "node 'loop_0' (Loop) body node 'add_3' (Add): output 'v_out' is declared i64, but ONNX infers f32"


def if_branch_with_input():
    m = _if([helper.make_node("Abs", ["x"], ["t"], name="abs")], [_vi("t", F, [2])], then_inputs=[_vi("z", F, [2])])
    return m, "node 'if_0' (If) then_branch: has 1 input, an If branch takes none"


def if_branch_output_count():
    m = _if([helper.make_node("Abs", ["x"], ["t"]), helper.make_node("Abs", ["x"], ["t2"])],
            [_vi("t", F, [2]), _vi("t2", F, [2])])
    return m, "node 'if_0' (If) then_branch: has 2 outputs, but the If node has 1"


def if_branches_disagree_on_type():
    m = _if([helper.make_node("Cast", ["x"], ["t"], to=I64)], [_vi("t", I64, [2])])
    return m, "then_branch and else_branch disagree on the type of output 0"


def nested_body_node_bad_attribute():
    """The check reaches a Loop inside an If branch (the path names both)."""
    inner = _loop(None).graph.node[0]
    inner.attribute[0].g.node[1].attribute.append(helper.make_attribute("bogus", 3))
    inner.output[0] = "y_loop"
    then_g = helper.make_graph([inner], "then", [], [_vi("y_loop", F, [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", F, [2])])
    nodes = [helper.make_node("If", ["c"], ["y"], name="if_0", then_branch=then_g, else_branch=else_g)]
    inits = [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "cond"),
             numpy_helper.from_array(np.ones(2, np.float32), "one")]
    m = _model(nodes, [_vi("c", B, []), _vi("x", F, [2])], [_vi("y", F, [2])], inits)
    return m, "node 'if_0' (If) then_branch node 'loop_0' (Loop) body node 'add_3' (Add): not a valid Add-14 node"


def scan_body_input_count():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "s_in"], ["s_out"])], "body",
                             [_vi("s_in", F, [2])], [_vi("s_out", F, [2])])
    nodes = [helper.make_node("Scan", ["s0", "xs"], ["s"], name="scan_0", body=body, num_scan_inputs=1)]
    m = _model(nodes, [_vi("s0", F, [2]), _vi("xs", F, [3, 2])], [_vi("s", F, [2])])
    return m, "node 'scan_0' (Scan) body: has 1 input, but the Scan node passes 1 state and 1 scan values"


CASES = [body_node_bad_attribute, body_node_too_many_inputs, body_node_unknown_operator,
         body_node_input_type_outside_constraint, body_reads_undefined_name, body_output_shadows_outer_name,
         body_output_defined_twice, body_output_produced_by_nothing, loop_body_missing_input, loop_body_too_few_outputs,
         loop_condition_not_bool, loop_carried_value_changes_type, body_value_info_type_lie, if_branch_with_input,
         if_branch_output_count, if_branches_disagree_on_type, nested_body_node_bad_attribute, scan_body_input_count]
COMMANDS = {"optimize": ["optimize", "{model}", "-o", "{out}", "--budget", "1"],
            "run-native": ["run", "--no-onnxruntime", "{model}"]}


def _ort_refuses(path):
    """ONNX Runtime refuses the model when it loads it or, some body rules, when it runs it."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        feeds = {i.name: np.ones([d if isinstance(d, int) else 2 for d in i.shape],
                                 np.bool_ if i.type == "tensor(bool)" else np.float32) for i in session.get_inputs()}
        session.run(None, feeds)
    except Exception:
        return True
    return False


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_broken_body_is_refused_naming_the_path(tmp_path, isomer_bin, make, command):
    model, fragment = make()
    path = tmp_path / f"{make.__name__}.onnx"
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "out.onnx"
    args = [a.format(model=str(path), out=str(out)) for a in COMMANDS[command]]
    proc = subprocess.run([isomer_bin] + args, capture_output=True, text=True, timeout=120)
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert 0 < proc.returncode < 128, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert len(lines) == 1 and lines[0].startswith("isomer: error: "), proc.stderr
    assert path.name in lines[0] and fragment in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.parametrize("make", CASES, ids=[c.__name__ for c in CASES])
def test_onnx_runtime_refuses_each_broken_body_too(tmp_path, make):
    path = tmp_path / "m.onnx"
    path.write_bytes(make()[0].SerializeToString())
    assert _ort_refuses(path), "ONNX Runtime runs this model: the check may refuse a valid one"


def _valid_models():
    loop = _loop(None)
    if_model = _if([helper.make_node("Abs", ["x"], ["t"], name="abs")], [_vi("t", F, [2])])
    # A body that reads outer names, passes a body input straight through and declares
    # value_info of the right type.
    shadow_free = _loop([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                         helper.make_node("Mul", ["v_in", "one"], ["m"]),
                         helper.make_node("Add", ["m", "one"], ["v_out"])],
                        body_value_info=[_vi("m", F, [2])])
    return {"loop": loop, "if": if_model, "loop_value_info": shadow_free}


@pytest.mark.parametrize("name", ["loop", "if", "loop_value_info"])
def test_valid_bodies_still_run_as_onnx_runtime_does(tmp_path, isomer_bin, name):
    model = _valid_models()[name]
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    feeds = {"x": np.array([0.5, -2.0], np.float32)}
    if name == "if":
        feeds["c"] = np.array(True)
    np.savez(tmp_path / "in.npz", **feeds)
    # isomer's runtime runs the node with a body natively (runtime/lower_control.h).
    proc = subprocess.run([isomer_bin, "run", str(path), "--inputs", str(tmp_path / "in.npz"),
                           "--outputs", str(tmp_path / "out.npz")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-6)
