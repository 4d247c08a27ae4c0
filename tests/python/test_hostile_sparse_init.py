"""Sparse initializers (SparseTensorProto in graph.sparse_initializer): valid ONNX that
ONNX Runtime densifies when it loads the model. isomer refused them ("reads 'w', which
nothing defines"); import now densifies them (src/onnx/sparse_initializer.h), and refuses,
naming the tensor, indices out of range and a dense form far larger than what is stored.
"""
import os
import subprocess

import pytest

onnx = pytest.importorskip("onnx")
np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _sparse_model(tmp_path, name, values, indices, dims):
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(numpy_helper.from_array(np.asarray(values, np.float32), "w"))
    sp.indices.CopyFrom(numpy_helper.from_array(np.asarray(indices, np.int64), ""))
    sp.dims.extend(dims)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add_w")], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    g.sparse_initializer.append(sp)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path


def _run(isomer_bin, *args):
    return subprocess.run([isomer_bin, *map(str, args)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("form", ["linear", "coordinates"])
def test_sparse_initializer_runs_as_onnxruntime_runs_it(isomer_bin, tmp_path, form):
    indices = [1, 4, 11] if form == "linear" else [[0, 1], [1, 0], [2, 3]]
    path = _sparse_model(tmp_path, form, [1.5, -2.0, 7.0], indices, [3, 4])
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for extra in (["--no-onnxruntime"], []):
        p = _run(isomer_bin, "run", path, "--inputs", tmp_path / "in.npz", "--outputs", tmp_path / "out.npz", *extra)
        assert p.returncode == 0, p.stderr
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["y"], want, rtol=1e-6)
    out = tmp_path / "opt.onnx"
    p = _run(isomer_bin, "optimize", path, "-o", out, "--inputs", tmp_path / "in.npz", "--budget", "1", "--threads", "1")
    assert p.returncode == 0, p.stderr
    got = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("case", ["index_past_end", "coordinate_out_of_range", "indices_shape", "dense_bloat"])
def test_bad_sparse_initializer_is_refused(isomer_bin, tmp_path, case):
    values, indices, dims = [1.0, 2.0], [0, 5], [2, 2]
    want = "index 5 of value 1 is out of range for 4 elements"
    if case == "coordinate_out_of_range":
        indices, want = [[0, 0], [0, 9]], "coordinate 9 on axis 1 is out of range for extent 2"
    elif case == "indices_shape":
        indices, want = [[0], [1]], "need int64[2] or int64[2, 2]"
    elif case == "dense_bloat":
        indices, dims, want = [0, 1], [1 << 16, 1 << 12], "its dense form takes 1.0 GiB"
    path = _sparse_model(tmp_path, case, values, indices, dims)
    for args in (["optimize", path, "-o", tmp_path / "out.onnx"], ["run", path]):
        p = _run(isomer_bin, *args)
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        assert p.returncode == 1 and len(lines) == 1, p.stderr
        for part in (path.name, "sparse initializer 'w'", want):
            assert part in lines[0], lines[0]
    assert not os.path.exists(tmp_path / "out.onnx")
