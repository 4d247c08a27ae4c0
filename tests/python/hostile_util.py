"""What the hostile-input tests share: running the CLI, and the one-line refusal they expect."""
import os
import subprocess
import sys


def isomer_cli(isomer_bin, *args, timeout=120):
    return subprocess.run([isomer_bin, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def python_child(code, *args, timeout=60):
    """`code` in a child interpreter that imports what this one does (the build's isomer
    module among it): a signal there must not end the tests."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def one_error(p, *wants):
    """Exit 1 with exactly one line, "isomer: error: ...", holding every one of `wants`."""
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("isomer: error: "), p.stderr
    for w in wants:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def ort_outputs(path, feeds):
    """The first output of ONNX Runtime's run of the model, its graph optimizations off."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def save_model(tmp_path, name, nodes, inputs, outputs, inits=(), opset=18):
    """A graph of `nodes` saved as <tmp_path>/<name>.onnx (IR 8, ai.onnx at `opset`); its path."""
    import onnx
    from onnx import helper
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = tmp_path / f"{name}.onnx"
    onnx.save(m, str(path))
    return path
