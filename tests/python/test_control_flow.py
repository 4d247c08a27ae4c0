"""ONNX If and Loop on isomer's runtime (src/runtime/lower_control.cpp), against ONNX Runtime.

Each model is built here (onnx.helper, or a TorchScript module exported by torch), run with
`isomer run --print-steps`, and its outputs compared with ONNX Runtime's on the same inputs.
The steps say whether the node ran natively (an `if` or `loop` step) or went to ONNX Runtime
(an `onnxruntime` step, with the reason printed).
"""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
pytestmark = pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, t, shape)


def const(name, array):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(array), name))


def save(path, nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "cf", inputs, outputs, initializer=list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.save(m, path)
    return path


def run(path, feeds, tmp_path, *extra):
    """isomer's outputs, ONNX Runtime's, and isomer's stdout."""
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--threads", "1", "--print-steps", *extra],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    got = np.load(tmp_path / "out.npz")
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    for name, w in zip(names, want):
        assert got[name].shape == w.shape, (name, got[name].shape, w.shape)
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=name)
    return p.stdout


def top_kinds(stdout):
    """The kinds of the main graph's steps (body steps are printed indented further)."""
    return [line.split()[0] for line in stdout.splitlines() if line.startswith("  ") and not line.startswith("   ")
            and line.split() and line.split()[0] in {"if", "loop", "onnxruntime", "reference", "pointwise", "matmul",
                                                      "reduce", "copy", "reorder", "native"}]


def assert_native(stdout):
    assert "ONNX Runtime" not in stdout.split("latency")[0], stdout
    assert "onnxruntime " not in stdout, stdout


def if_model(path, then_shape=(3,), else_shape=(3,), cond_const=None):
    """If on (sum(x) > 0), or on a constant; then: x * w (w an initializer read from the
    enclosing graph) reshaped to then_shape, else: x - (x + 1) reshaped to else_shape."""
    then_nodes = [helper.make_node("Mul", ["x", "w"], ["t0"]), const("ts", np.array(then_shape, np.int64)),
                  helper.make_node("Reshape", ["t0", "ts"], ["t"])]
    else_nodes = [helper.make_node("Add", ["x", "one"], ["e0"]), helper.make_node("Sub", ["x", "e0"], ["e1"]),
                  const("es", np.array(else_shape, np.int64)), helper.make_node("Reshape", ["e1", "es"], ["e"])]
    then_g = helper.make_graph(then_nodes, "then", [], [vi("t", F, None)])
    else_g = helper.make_graph(else_nodes, "else", [], [vi("e", F, None)])
    if cond_const is None:
        cond_nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), const("zero", np.float32(0)),
                      helper.make_node("Greater", ["s", "zero"], ["c"])]
    else:
        cond_nodes = [const("c", np.array(cond_const))]
    nodes = cond_nodes + [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    inits = [numpy_helper.from_array(np.array([0.5, -2.0, 3.0], np.float32), "w"),
             numpy_helper.from_array(np.float32(1), "one")]
    return save(path, nodes, [vi("x", F, [3])], [vi("y", F, None)], inits)


def test_if_picks_its_branch_when_it_runs(tmp_path):
    path = if_model(tmp_path / "if.onnx")
    for x in (np.array([1, 2, 3], np.float32), np.array([-1, -2, 0.5], np.float32)):
        out = run(path, {"x": x}, tmp_path)
        assert_native(out)
        assert "if " in out


def test_if_whose_branches_differ_in_shape(tmp_path):
    """Branches of different output shapes: with the condition known when compiling only
    the chosen branch is compiled (native); known only when run, the output's shape
    depends on the data, and the node goes to ONNX Runtime, which says why."""
    for c in (True, False):
        path = if_model(tmp_path / f"ifc{c}.onnx", then_shape=(3, 1), else_shape=(1, 3), cond_const=c)
        out = run(path, {"x": np.array([1, 2, 3], np.float32)}, tmp_path)
        assert_native(out)
    path = if_model(tmp_path / "ifd.onnx", then_shape=(3, 1), else_shape=(1, 3))
    np.savez(tmp_path / "in.npz", x=np.array([1, 2, 3], np.float32))
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(tmp_path / "in.npz"), "--threads", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "different output types" in p.stdout + p.stderr, p.stdout + p.stderr


def loop_model(path, body_nodes, body_outputs, carried, scan=(), m=None, cond=None, pre=(), inputs=(),
               outputs=None, inits=()):
    """Loop(M, cond, n0...) with the given body, which reads n_in and whose node gives n_out, for
    each (n, type, shape) of `carried`."""
    body_in = [vi("i", I64, []), vi("cond_in", B, [])] + [vi(n + "_in", t, None) for n, t, _ in carried]
    body = helper.make_graph(body_nodes, "body", body_in, body_outputs)
    loop_outs = [n + "_out" for n, _, _ in carried] + [s + "_scan" for s in scan]
    node = helper.make_node("Loop", [m or "", cond or ""] + [n + "0" for n, _, _ in carried], loop_outs, body=body)
    outs = outputs or [vi(o, F, None) for o in loop_outs]
    return save(path, list(pre) + [node], list(inputs), outs, inits)


def test_loop_whose_condition_ends_it_early(tmp_path):
    """y = y * 2 + x while sum(y) < 100, at most 20 times: how often depends on x."""
    body = [helper.make_node("Mul", ["y_in", "two"], ["m"]), helper.make_node("Add", ["m", "x"], ["y"]),
            helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0), helper.make_node("Less", ["s", "limit"], ["c"])]
    path = loop_model(tmp_path / "early.onnx", body, [vi("c", B, []), vi("y", F, None)], [("y", F, [4])],
                      m="M", cond="go", pre=[const("M", np.int64(20)), const("go", np.array(True))],
                      inputs=[vi("x", F, [4]), vi("y0", F, [4])],
                      inits=[numpy_helper.from_array(np.float32(2), "two"),
                             numpy_helper.from_array(np.float32(100), "limit")])
    rng = np.random.default_rng(0)
    for scale in (0.1, 1.0, 30.0):
        out = run(path, {"x": (rng.random(4) * scale).astype(np.float32), "y0": np.ones(4, np.float32)}, tmp_path)
        assert_native(out)
        assert "loop " in out


def test_zero_trip_loops(tmp_path):
    """M = 0 fed at run time (the carried value comes out as it went in), and M = 0 known
    when compiling with a scan output (of length 0)."""
    body = [helper.make_node("Add", ["y_in", "x"], ["y"]), helper.make_node("Identity", ["cond_in"], ["c"]),
            helper.make_node("Mul", ["y", "x"], ["z"])]
    path = loop_model(tmp_path / "zero.onnx", body, [vi("c", B, []), vi("y", F, None), vi("z", F, None)],
                      [("y", F, [3])], scan=["z"], m="M", pre=[const("M", np.int64(0))],
                      inputs=[vi("x", F, [3]), vi("y0", F, [3])])
    out = run(path, {"x": np.arange(3, dtype=np.float32), "y0": np.ones(3, np.float32)}, tmp_path)
    assert_native(out)
    body = [helper.make_node("Add", ["y_in", "x"], ["y"]), helper.make_node("Identity", ["cond_in"], ["c"])]
    path = loop_model(tmp_path / "zero_fed.onnx", body, [vi("c", B, []), vi("y", F, None)], [("y", F, [3])],
                      m="M", inputs=[vi("M", I64, []), vi("x", F, [3]), vi("y0", F, [3])])
    for trips in (0, 3):
        out = run(path, {"M": np.array(trips, np.int64), "x": np.arange(3, dtype=np.float32), "y0": np.ones(3, np.float32)},
                  tmp_path)
        assert_native(out)


def test_loop_with_scan_outputs_and_captures(tmp_path):
    """A fixed trip count (constant M, condition passed through): each iteration's h is
    stacked. The body reads a weight (an initializer) and a value the main graph computes
    at run time (x * 3) from the enclosing scope, and its iteration number."""
    body = [helper.make_node("MatMul", ["h_in", "W"], ["a"]), helper.make_node("Add", ["a", "x3"], ["b"]),
            helper.make_node("Cast", ["i"], ["fi"], to=F), helper.make_node("Mul", ["fi", "tenth"], ["ft"]),
            helper.make_node("Add", ["b", "ft"], ["c0"]), helper.make_node("Tanh", ["c0"], ["h"]),
            helper.make_node("Identity", ["cond_in"], ["c"]), helper.make_node("Identity", ["h"], ["hs"])]
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "W"),
             numpy_helper.from_array(np.float32(0.1), "tenth")]
    pre = [const("three", np.float32(3)), helper.make_node("Mul", ["x", "three"], ["x3"]),
           const("M", np.int64(6))]
    path = loop_model(tmp_path / "scan.onnx", body, [vi("c", B, []), vi("h", F, None), vi("hs", F, None)],
                      [("h", F, [2, 8])], scan=["hs"], m="M", pre=pre, inputs=[vi("x", F, [2, 8]), vi("h0", F, [2, 8])],
                      inits=inits)
    out = run(path, {"x": rng.standard_normal((2, 8)).astype(np.float32),
                     "h0": rng.standard_normal((2, 8)).astype(np.float32)}, tmp_path)
    assert_native(out)
    assert "matmul" in out or "gemm" in out, out


def test_nested_if_inside_loop(tmp_path):
    """Each iteration adds or subtracts the main graph's v by the parity of the iteration
    number: the inner If reads `v` two scopes up and `y_in` one scope up."""
    then_g = helper.make_graph([helper.make_node("Add", ["y_in", "v"], ["t"])], "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["y_in", "v"], ["e"])], "else", [], [vi("e", F, None)])
    body = [helper.make_node("Mod", ["i", "two"], ["r"]), helper.make_node("Equal", ["r", "zero"], ["even"]),
            helper.make_node("If", ["even"], ["yy"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Mul", ["yy", "half"], ["y"]), helper.make_node("Identity", ["cond_in"], ["c"])]
    pre = [helper.make_node("Relu", ["x"], ["v"])]
    inits = [numpy_helper.from_array(np.int64(2), "two"), numpy_helper.from_array(np.int64(0), "zero"),
             numpy_helper.from_array(np.float32(0.75), "half")]
    path = loop_model(tmp_path / "nested.onnx", body, [vi("c", B, []), vi("y", F, None)], [("y", F, [5])],
                      m="M", pre=pre, inputs=[vi("M", I64, []), vi("x", F, [5]), vi("y0", F, [5])], inits=inits)
    rng = np.random.default_rng(2)
    out = run(path, {"M": np.array(7, np.int64), "x": rng.standard_normal(5).astype(np.float32),
                     "y0": rng.standard_normal(5).astype(np.float32)}, tmp_path)
    assert_native(out)
    assert "    if " in out, out  # the If inside the loop's body, native too


def test_loop_whose_carried_value_grows(tmp_path):
    """y = concat(y, y[-1:] + 1) four times: a shape that changes every iteration, planned
    iteration by iteration since the trip count is known when compiling."""
    body = [const("start", np.array([-1], np.int64)), const("end", np.array([2 ** 62], np.int64)),
            helper.make_node("Slice", ["y_in", "start", "end"], ["last"]),
            helper.make_node("Add", ["last", "one"], ["nxt"]),
            helper.make_node("Concat", ["y_in", "nxt"], ["y"], axis=0), helper.make_node("Identity", ["cond_in"], ["c"])]
    path = loop_model(tmp_path / "grow.onnx", body, [vi("c", B, []), vi("y", F, None)], [("y", F, [2])],
                      m="M", cond="go", pre=[const("M", np.int64(4)), const("go", np.array(True))],
                      inputs=[vi("y0", F, [2])], inits=[numpy_helper.from_array(np.float32(1), "one")])
    out = run(path, {"y0": np.array([3, 5], np.float32)}, tmp_path)
    assert_native(out)
    assert "y_out" in out and "f32[6]" in out, out


def test_loop_of_sequences_stays_on_onnx_runtime(tmp_path):
    """A sequence carried through the loop: not a tensor, so the node is delegated whole,
    and the run says why."""
    body = [helper.make_node("SequenceInsert", ["s_in", "x"], ["s"]), helper.make_node("Identity", ["cond_in"], ["c"])]
    body_g = helper.make_graph(body, "body", [vi("i", I64, []), vi("cond_in", B, []),
                                              helper.make_tensor_sequence_value_info("s_in", F, None)],
                               [vi("c", B, []), helper.make_tensor_sequence_value_info("s", F, None)])
    nodes = [const("M", np.int64(3)), helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
             helper.make_node("Loop", ["M", "", "s0"], ["s_out"], body=body_g),
             helper.make_node("ConcatFromSequence", ["s_out"], ["y"], axis=0)]
    path = save(tmp_path / "seq.onnx", nodes, [vi("x", F, [2])], [vi("y", F, None)])
    np.savez(tmp_path / "in.npz", x=np.array([1, 2], np.float32))
    p = subprocess.run([ISOMER, "run", str(path), "--inputs", str(tmp_path / "in.npz"), "--outputs",
                        str(tmp_path / "out.npz"), "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], np.array([1, 2] * 3, np.float32))
    assert "ONNX Runtime" in p.stdout, p.stdout


def test_scripted_torch_model_with_if_and_loop(tmp_path):
    """What torch.jit.script + torch.onnx.export write for Python control flow: an If on a
    data-dependent condition and a Loop over the batch, both native, matching ONNX Runtime."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)

    class Ctrl(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(8, 8)

        def forward(self, x):
            if x.sum() > 0:
                y = self.l(x)
            else:
                y = -x
            for i in range(x.size(0)):
                y = y + torch.tanh(self.l(y)) * float(i)
            return y

    for opset in (13, 17):
        path = tmp_path / f"ctrl{opset}.onnx"
        torch.onnx.export(torch.jit.script(Ctrl().eval()), (torch.randn(4, 8),), str(path), opset_version=opset,
                          input_names=["x"], output_names=["y"])
        rng = np.random.default_rng(3)
        for sign in (1, -1):
            x = (np.abs(rng.standard_normal((4, 8))) * sign).astype(np.float32)
            out = run(path, {"x": x}, tmp_path)
            assert_native(out)
            assert "if " in out and "loop " in out, out
        # Native means it needs no ONNX Runtime at all.
        run(path, {"x": x}, tmp_path, "--no-onnxruntime")


def test_scan_along_axis_one_in_reverse(tmp_path):
    """Scan (opset 16): a running state over x's columns read last to first, each step's
    output written as a column (output axis 1) forward, another row-stacked in reverse; the
    body reads a weight and a run-time value of the enclosing graph."""
    body = [helper.make_node("Mul", ["col", "w"], ["a"]), helper.make_node("Add", ["s_in", "a"], ["s0"]),
            helper.make_node("Add", ["s0", "b"], ["s"]), helper.make_node("Tanh", ["s"], ["o1"]),
            helper.make_node("Neg", ["s"], ["o2"])]
    body_g = helper.make_graph(body, "body", [vi("s_in", F, [3]), vi("col", F, [3])],
                               [vi("s", F, [3]), vi("o1", F, [3]), vi("o2", F, [3])])
    nodes = [helper.make_node("Relu", ["x0"], ["b"]),
             helper.make_node("Scan", ["s0_init", "x"], ["s_final", "cols", "rows"], body=body_g, num_scan_inputs=1,
                              scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1, 0],
                              scan_output_directions=[0, 1])]
    rng = np.random.default_rng(4)
    path = save(tmp_path / "scan.onnx", nodes, [vi("s0_init", F, [3]), vi("x", F, [3, 5]), vi("x0", F, [3])],
                [vi("s_final", F, [3]), vi("cols", F, [3, 5]), vi("rows", F, [5, 3])],
                [numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "w")], opset=16)
    out = run(path, {"s0_init": rng.standard_normal(3).astype(np.float32),
                     "x": rng.standard_normal((3, 5)).astype(np.float32),
                     "x0": rng.standard_normal(3).astype(np.float32)}, tmp_path)
    assert_native(out)
    assert "scan " in out, out


def test_optimize_keeps_control_flow_and_its_output_runs(tmp_path):
    """`isomer optimize` leaves the bodies as they were (the nodes are opaque to it) and
    writes a valid model that runs natively again."""
    path = tmp_path / "nested.onnx"
    then_g = helper.make_graph([helper.make_node("Add", ["y_in", "v"], ["t"])], "then", [], [vi("t", F, None)])
    else_g = helper.make_graph([helper.make_node("Sub", ["y_in", "v"], ["e"])], "else", [], [vi("e", F, None)])
    body = [helper.make_node("Greater", ["i", "one"], ["late"]),
            helper.make_node("If", ["late"], ["y"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Identity", ["cond_in"], ["c"])]
    pre = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["v"])]
    loop_model(path, body, [vi("c", B, []), vi("y", F, None)], [("y", F, [4])], m="M", pre=pre,
               inputs=[vi("M", I64, []), vi("x", F, [4]), vi("y0", F, [4])],
               outputs=[vi("y_out", F, [4])],
               inits=[numpy_helper.from_array(np.int64(1), "one"), numpy_helper.from_array(np.float32(2), "two")])
    out = tmp_path / "opt.onnx"
    p = subprocess.run([ISOMER, "optimize", str(path), "-o", str(out), "--search", "templates", "--threads", "1"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    written = onnx.load(str(out))
    onnx.checker.check_model(written)
    bodies = [a.g for n in written.graph.node if n.op_type == "Loop" for a in n.attribute if a.name == "body"]
    original = [a.g for n in onnx.load(str(path)).graph.node if n.op_type == "Loop" for a in n.attribute]
    assert [b.SerializeToString() for b in bodies] == [b.SerializeToString() for b in original]
    rng = np.random.default_rng(5)
    feeds = {"M": np.array(4, np.int64), "x": rng.standard_normal(4).astype(np.float32),
             "y0": rng.standard_normal(4).astype(np.float32)}
    assert_native(run(out, feeds, tmp_path))
