"""Hostile inputs of the campaign's sixth family (scripts/hostile_mutators_semantic.py): each
class it found, rebuilt here as a small file.

- Inputs files: a FIFO or a directory given as --inputs (a FIFO hung isomer), an npz whose
  compressed entry claims gigabytes (allocated before zlib found it short), a .npy shape
  that is not a number (an uncaught std::invalid_argument) are refused with one line; a
  Fortran-ordered array (legal) runs and matches its C-ordered copy; an array named for no
  input is refused by `run` and `optimize` alike.
- Command lines: -o onto a directory or into a folder that does not exist is refused before
  any work, naming the path; --input-shape twice for one input with other dims is refused.
- Scan with a direction other than 0 or 1 is refused (it ran); a Scan whose axes are out
  of range, whose attribute lists have another length than its scan inputs, or with no
  scan input, and a Loop whose condition is not a single bool or whose trip count is not
  a single int64, are refused where they are imported (`optimize` wrote them back).
- An operator given a float8 or int4 initializer that its version does not take (Add-14)
  is refused naming the node (`optimize` wrote it back: the kept initializer had no type
  the schema check could see).
- QuantizeLinear with a float8 zero point: ONNX Runtime hands float8 values to Python as
  uint8, which isomer took as uint8, computing other outputs; `run` now matches ONNX Runtime.
"""
import os
import subprocess

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from hostile_util import isomer_cli, one_error  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))


def _isomer(isomer_bin, *args, timeout=120):
    return isomer_cli(isomer_bin, *args, timeout=timeout)


@pytest.fixture()
def relu_model(tmp_path):
    """y = Relu(x) * 2 over x[N, 3]."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "r"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "relu.onnx"
    onnx.save(m, str(path))
    return path


def _x(seed=0):
    return np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)


# --- inputs files ---------------------------------------------------------------------------

def test_fifo_or_directory_as_inputs_is_refused(isomer_bin, relu_model, tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    for bad in (fifo, tmp_path):
        p = _isomer(isomer_bin, "run", relu_model, "--inputs", bad, timeout=60)  # a FIFO hung here
        one_error(p, "relu.onnx", str(bad), "not a regular file")


def test_compressed_entry_claiming_gigabytes_is_refused(isomer_bin, relu_model, tmp_path):
    path = tmp_path / "lie.npz"
    np.savez_compressed(path, x=_x())
    data = bytearray(path.read_bytes())
    cd = data.index(b"PK\x01\x02")
    data[cd + 24:cd + 28] = (0xF0000000).to_bytes(4, "little")  # the uncompressed size
    path.write_bytes(bytes(data))
    p = _isomer(isomer_bin, "run", relu_model, "--inputs", path)
    one_error(p, "lie.npz", "claims 4026531840 bytes")


def test_npy_shape_that_is_no_number_is_refused(isomer_bin, relu_model, tmp_path):
    path = tmp_path / "shape.npz"
    np.savez(path, x=_x())
    data = path.read_bytes()
    assert b"(2, 3)" in data
    path.write_bytes(data.replace(b"(2, 3)", b"(2, q)"))
    p = _isomer(isomer_bin, "run", relu_model, "--inputs", path)
    one_error(p, "shape.npz", "'q' is not a dimension")


def test_fortran_ordered_array_runs_as_its_c_ordered_copy(isomer_bin, relu_model, tmp_path):
    x = _x(1)
    outs = []
    for name, arr in (("c", x), ("f", np.asfortranarray(x))):
        np.savez(tmp_path / f"{name}.npz", x=arr)
        p = _isomer(isomer_bin, "run", relu_model, "--inputs", tmp_path / f"{name}.npz", "--outputs",
                    tmp_path / f"{name}.out.npz", "--no-onnxruntime")
        assert p.returncode == 0, p.stderr
        outs.append(np.load(tmp_path / f"{name}.out.npz")["y"])
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], np.maximum(x, 0) * 2, rtol=1e-6)


def test_array_for_no_input_is_refused_by_run_and_optimize(isomer_bin, relu_model, tmp_path):
    path = tmp_path / "extra.npz"
    np.savez(path, x=_x(), ghost=np.ones(2, np.float32))
    p = _isomer(isomer_bin, "run", relu_model, "--inputs", path)
    one_error(p, "extra.npz", "'ghost', which is no input")
    p = _isomer(isomer_bin, "optimize", relu_model, "-o", tmp_path / "o.onnx", "--inputs", path, "--budget", "1")
    one_error(p, "extra.npz", "'ghost', which is no input")
    assert not (tmp_path / "o.onnx").exists()


# --- command lines ----------------------------------------------------------------------------

@pytest.mark.parametrize("out, want", [(".", "is a directory"), ("no/such/o.onnx", "'no/such' does not exist"),
                                       ("relu.onnx/o.onnx", "is not a folder")])
def test_output_path_that_cannot_be_written_is_refused_first(isomer_bin, relu_model, tmp_path, out, want):
    p = subprocess.run([isomer_bin, "optimize", "relu.onnx", "-o", out, "--budget", "1"], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    line = one_error(p, out, want)
    assert "tmp" not in line  # not the temporary file's name, after the search
    assert "eqsat" not in p.stdout + p.stderr  # refused before any work
    p = _isomer(isomer_bin, "run", relu_model, "--outputs", tmp_path / "no" / "o.npz")
    one_error(p, "'" + str(tmp_path / "no") + "' does not exist")


def test_input_shape_given_twice_with_other_dims_is_refused(isomer_bin, relu_model, tmp_path):
    p = _isomer(isomer_bin, "run", relu_model, "--input-shape", "x:2,3", "--input-shape", "x:4,3")
    one_error(p, "relu.onnx", "--input-shape given twice for 'x'")
    p = _isomer(isomer_bin, "run", relu_model, "--input-shape", "x:2,3", "--input-shape", "x:2,3")
    assert p.returncode == 0, p.stderr  # the same dims twice do not conflict


# --- models -----------------------------------------------------------------------------------

def test_scan_direction_other_than_0_or_1_is_refused(isomer_bin, tmp_path):
    vi = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Add", ["s_in", "row"], ["s_out"]),
                              helper.make_node("Add", ["row", "row"], ["r2"])], "body",
                             [vi("s_in", TensorProto.FLOAT, [3]), vi("row", TensorProto.FLOAT, [3])],
                             [vi("s_out", TensorProto.FLOAT, [3]), vi("r2", TensorProto.FLOAT, [3])])
    for direction, valid in ((1, True), (2, False)):
        scan = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="the_scan", body=body, num_scan_inputs=1,
                                scan_input_directions=[direction])
        g = helper.make_graph([scan], "g", [vi("x", TensorProto.FLOAT, [2, 3])],
                              [vi("s", TensorProto.FLOAT, None), vi("ys", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.zeros(3, np.float32), "s0")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
        m.ir_version = 8
        path = tmp_path / f"scan{direction}.onnx"
        onnx.save(m, str(path))
        np.savez(tmp_path / "in.npz", x=_x())
        p = _isomer(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz",
                    "--no-onnxruntime")
        if valid:
            assert p.returncode == 0, p.stderr
            np.testing.assert_allclose(np.load(tmp_path / "o.npz")["ys"], _x()[::-1] * 2, rtol=1e-6)
        else:
            one_error(p, f"scan{direction}.onnx", "Scan", "scan_input_directions holds 2, not 0 or 1")


def _loop_model(path, cond):
    vi = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                              helper.make_node("Neg", ["v_in"], ["v_out"])], "body",
                             [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []),
                              vi("v_in", TensorProto.FLOAT, [2, 3])],
                             [vi("c_out", TensorProto.BOOL, []), vi("v_out", TensorProto.FLOAT, [2, 3])])
    loop = helper.make_node("Loop", ["trip", "cond", "x"], ["y"], name="the_loop", body=body)
    g = helper.make_graph([loop], "g", [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])],
                          [numpy_helper.from_array(np.array(3, np.int64), "trip"), numpy_helper.from_array(cond, "cond")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("cond, want", [(np.array(1.0, np.float32), "the condition 'cond' is f32, a Loop's is bool"),
                                        (np.array([True, False]), "the condition 'cond' has a dim of 2")])
def test_loop_condition_that_is_not_a_single_bool_is_refused(isomer_bin, tmp_path, cond, want):
    path = tmp_path / "loop.onnx"
    _loop_model(path, cond)
    for cmd in (["optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1"], ["run", path]):
        one_error(_isomer(isomer_bin, *cmd), "loop.onnx", "the_loop", want)
    assert not (tmp_path / "o.onnx").exists()
    _loop_model(path, np.array([True]))  # a one-element condition is a single bool
    np.savez(tmp_path / "in.npz", x=_x())
    p = _isomer(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], -_x(), rtol=1e-6)  # Neg three times


@pytest.mark.parametrize("op", ["Scan", "Loop"])
def test_a_value_handed_to_a_body_of_another_type_is_refused(isomer_bin, tmp_path, op):
    """A Scan whose state starts as strings (or a Loop carrying int64) into a float body:
    ONNX Runtime refuses the model; isomer kept the node opaque and `optimize` wrote it back."""
    vi = helper.make_tensor_value_info
    if op == "Scan":
        body = helper.make_graph([helper.make_node("Add", ["s_in", "row"], ["s_out"]),
                                  helper.make_node("Identity", ["row"], ["r2"])], "body",
                                 [vi("s_in", TensorProto.FLOAT, [3]), vi("row", TensorProto.FLOAT, [3])],
                                 [vi("s_out", TensorProto.FLOAT, [3]), vi("r2", TensorProto.FLOAT, [3])])
        node = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="the_scan", body=body, num_scan_inputs=1)
        outs = [vi("s", TensorProto.FLOAT, None), vi("ys", TensorProto.FLOAT, None)]
        init = numpy_helper.from_array(np.array(["a", "b", "c"], dtype=object), "s0")
        want = "'s0' is str, but the body takes it as 's_in', f32"
    else:
        body = helper.make_graph([helper.make_node("Identity", ["c_in"], ["c_out"]),
                                  helper.make_node("Neg", ["v_in"], ["v_out"])], "body",
                                 [vi("i", TensorProto.INT64, []), vi("c_in", TensorProto.BOOL, []),
                                  vi("v_in", TensorProto.FLOAT, [3])],
                                 [vi("c_out", TensorProto.BOOL, []), vi("v_out", TensorProto.FLOAT, [3])])
        node = helper.make_node("Loop", ["", "", "s0"], ["s"], name="the_loop", body=body)
        outs = [vi("s", TensorProto.FLOAT, None)]
        init = numpy_helper.from_array(np.arange(3, dtype=np.int64), "s0")
        want = "'s0' is i64, but the body takes it as 'v_in', f32"
    g = helper.make_graph([node], "g", [vi("x", TensorProto.FLOAT, [2, 3])], outs, [init])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "body_types.onnx"
    onnx.save(m, str(path))
    for cmd in (["optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1"], ["run", path]):
        one_error(_isomer(isomer_bin, *cmd), "body_types.onnx", node.name, want)
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("attrs, want", [({"num_scan_inputs": 0}, "num_scan_inputs is 0"),
                                         ({"num_scan_inputs": 1, "scan_input_axes": [2]},
                                          "scan_input_axes holds 2 for scan input 'x' of rank 2"),
                                         ({"num_scan_inputs": 1, "scan_input_directions": [0, 1]},
                                          "scan_input_directions has 2 entries, for 1 scan inputs"),
                                         ({"num_scan_inputs": 1, "scan_output_directions": [3]},
                                          "scan_output_directions holds 3, not 0 or 1"),
                                         ({"num_scan_inputs": 2},
                                          "scan input 'x' has 2 slices along its scan axis, another scan input 3")])
def test_scan_attributes_out_of_range_are_refused_by_optimize(isomer_bin, tmp_path, attrs, want):
    vi = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Add", ["s_in", "row"], ["s_out"]),
                              helper.make_node("Neg", ["row"], ["r2"])], "body",
                             [vi("s_in", TensorProto.FLOAT, [3]), vi("row", TensorProto.FLOAT, [3])],
                             [vi("s_out", TensorProto.FLOAT, [3]), vi("r2", TensorProto.FLOAT, [3])])
    scan = helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="the_scan", body=body, **attrs)
    g = helper.make_graph([scan], "g", [vi("x", TensorProto.FLOAT, [2, 3])],
                          [vi("s", TensorProto.FLOAT, None), vi("ys", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.zeros(3, np.float32), "s0")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "scan.onnx"
    onnx.save(m, str(path))
    p = _isomer(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1")
    one_error(p, "scan.onnx", "the_scan", want)
    assert not (tmp_path / "o.onnx").exists()


def test_quantize_with_float8_zero_point_matches_onnxruntime(isomer_bin, tmp_path):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "sc", "zp"], ["y"])]
    inits = [numpy_helper.from_array(np.array([0.05], np.float32), "sc"),
             helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [0.0])]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / "f8.onnx"
    onnx.save(m, str(path))
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert (want < 0).any()  # float8 keeps signs: a uint8 reading would clamp them to 0
    p = _isomer(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT8E4M3FN, TensorProto.INT4])
def test_rare_typed_initializer_into_an_operator_that_does_not_take_it_is_refused(isomer_bin, tmp_path, dtype):
    vi = helper.make_tensor_value_info
    w = helper.make_tensor("w", dtype, [2, 4], [1, 2, 3, 0, 1, 2, 3, 0])
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="the_add")], "g",
                          [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, None)], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / "rare.onnx"
    onnx.save(m, str(path))
    with pytest.raises(Exception):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    p = _isomer(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1")
    one_error(p, "rare.onnx", "the_add", "input 'w' is element type %d, which Add-14 does not take" % dtype)
    assert not (tmp_path / "o.onnx").exists()


def test_float8_cast_round_trip_matches_onnxruntime(isomer_bin, tmp_path):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Cast", ["x"], ["r"], to=TensorProto.FLOAT8E4M3FN),
             helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / "f8cast.onnx"
    onnx.save(m, str(path))
    x = (np.random.default_rng(3).standard_normal((2, 4)) * 10).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert not np.array_equal(want, x)  # float8 rounds
    p = _isomer(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["y"], want)


# --- the Python API and --budget -----------------------------------------------------------------

@pytest.mark.parametrize("kw, err, want", [({"budget": "fast"}, TypeError, "budget must be a number"),
                                          ({"budget": float("nan")}, ValueError, "budget=nan"),
                                          ({"budget": -1.0}, ValueError, "budget=-1.0"),
                                          ({"tolerance": float("inf")}, ValueError, "tolerance=inf"),
                                          ({"seed": -1}, ValueError, "seed=-1 is out of range"),
                                          ({"seed": 1.5}, TypeError, "seed must be an int"),
                                          ({"threads": "2"}, TypeError, "threads must be an int"),
                                          ({"rules": 5}, TypeError, "rules must be a path")])
def test_python_optimize_refuses_arguments_of_the_wrong_type_or_range(relu_model, kw, err, want):
    isomer = pytest.importorskip("isomer")
    with pytest.raises(err, match=want.replace("(", r"\(").replace(".", r"\.")):
        isomer.optimize(str(relu_model), **kw)


@pytest.mark.parametrize("budget", ["nan", "-1", "inf"])
def test_budget_that_is_no_number_of_seconds_is_refused(isomer_bin, relu_model, tmp_path, budget):
    p = _isomer(isomer_bin, "optimize", relu_model, "-o", tmp_path / "o.onnx", "--budget", budget)
    one_error(p, "relu.onnx", "--budget", "is not a number of seconds")
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("attrs, scale, want", [({"axis": 1, "block_size": -2}, [[0.5], [0.25]], "block_size -2 is negative"),
                                                ({"axis": 1}, [[0.5], [0.25]], "a scale of rank 2 without block_size")])
def test_dequantize_with_a_block_form_that_is_not_one_is_refused(isomer_bin, tmp_path, attrs, scale, want):
    vi = helper.make_tensor_value_info
    inits = [numpy_helper.from_array(np.arange(8, dtype=np.int8).reshape(2, 4), "q"),
             numpy_helper.from_array(np.array(scale, np.float32), "sc")]
    nodes = [helper.make_node("DequantizeLinear", ["q", "sc"], ["d"], name="the_dq", **attrs),
             helper.make_node("Add", ["d", "x"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 4])], [vi("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    path = tmp_path / "dq.onnx"
    onnx.save(m, str(path))
    with pytest.raises(Exception):  # ONNX Runtime refuses it when it loads or runs the node
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": _x().repeat(2, 1)[:, :4]})
    p = _isomer(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1")
    one_error(p, "dq.onnx", "the_dq", want)
    assert not (tmp_path / "o.onnx").exists()


def test_input_shape_asking_for_terabytes_is_refused_before_allocating(isomer_bin, relu_model, tmp_path):
    for cmd in (["optimize", relu_model, "-o", tmp_path / "o.onnx", "--budget", "1"], ["run", relu_model]):
        p = _isomer(isomer_bin, *cmd, "--input-shape", "x:1048576,1048576")
        one_error(p, "relu.onnx", "[1048576,1048576] needs 4.0 TiB, more than the")


@pytest.mark.parametrize("index", [3, -4, 1 << 62])
def test_constant_gather_index_out_of_a_static_axis_is_refused(isomer_bin, tmp_path, index):
    """The --real campaign's find: a Gather of a constant index past a static axis was kept
    opaque (the reason said so) and `optimize` wrote the model, which ONNX Runtime cannot run."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Gather", ["x", "i"], ["g"], name="the_gather", axis=1),
             helper.make_node("Relu", ["g"], ["y"])]
    g = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(index, np.int64), "i")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "gather.onnx"
    onnx.save(m, str(path))
    p = _isomer(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1")
    one_error(p, "gather.onnx", "the_gather", f"Gather index {index} is out of range for an axis of extent 3")
    assert not (tmp_path / "o.onnx").exists()
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array(-3, np.int64), "i"))  # in range: runs
    onnx.save(m, str(path))
    np.savez(tmp_path / "in.npz", x=_x())
    p = _isomer(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["y"], np.maximum(_x()[:, 0], 0), rtol=1e-6)


@pytest.mark.parametrize("to", [TensorProto.COMPLEX64, TensorProto.COMPLEX128, 99])
def test_cast_to_a_type_no_cast_produces_is_refused(isomer_bin, tmp_path, to):
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], name="the_cast", to=to)], "g",
                          [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", to if to != 99 else TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = tmp_path / "cast.onnx"
    onnx.save(m, str(path))
    p = _isomer(isomer_bin, "optimize", path, "-o", tmp_path / "o.onnx", "--budget", "1")
    one_error(p, "cast.onnx", "the_cast", "which no version of Cast produces")
    assert not (tmp_path / "o.onnx").exists()
