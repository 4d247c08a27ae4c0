"""A small fixed-seed run of the mutation campaign (scripts/hostile_campaign.py): no
mutant may crash isomer, hang it, exhaust its memory or fail without a clear message
naming the file. The full campaign (hundreds of mutants, minutes) is run by hand."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER_BIN = os.environ.get("ISOMER_BIN", os.path.join(REPO, "build", "isomer"))


def test_campaign_subset_has_no_crash_hang_or_unclear_error(tmp_path):
    if not os.path.exists(ISOMER_BIN):
        pytest.skip(f"no isomer binary at {ISOMER_BIN}")
    if not os.path.isdir("/usr/share/libonnx-testdata/data/node"):
        pytest.skip("no libonnx-testdata node cases")
    out = tmp_path / "campaign"
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "hostile_campaign.py"), "--seed", "3", "--count", "8",
                    "--commands", "run_native", "--timeout", "60", "--out", str(out), "--isomer", ISOMER_BIN],
                   capture_output=True, text=True, timeout=600)
    results = json.loads((out / "results.json").read_text())
    assert results, "the campaign ran no mutant"
    bad = [r for r in results if r["class"] in ("crash", "hang", "memory", "unclear")]
    assert not bad, json.dumps(bad, indent=1)


def _family_campaign(tmp_path, seed, count, only, commands, *extra):
    """The campaign's results for `count` mutants of the families `only` through `commands`."""
    if not os.path.exists(ISOMER_BIN):
        pytest.skip(f"no isomer binary at {ISOMER_BIN}")
    if not os.path.isdir("/usr/share/libonnx-testdata/data/node"):
        pytest.skip("no libonnx-testdata node cases (the campaign's sources)")
    out = tmp_path / "campaign"
    subprocess.run([sys.executable, os.path.join(REPO, "scripts", "hostile_campaign.py"), "--seed", str(seed),
                    "--count", str(count), "--only", only, "--commands", commands, "--timeout", "60",
                    "--out", str(out), "--isomer", ISOMER_BIN, *extra], capture_output=True, text=True, timeout=900)
    results = json.loads((out / "results.json").read_text())
    assert results, "the campaign ran no mutant"
    return results


def test_campaign_traps_on_every_command(tmp_path):
    """The seventh family (hostile_mutators_traps.py) through the commands the campaign
    added: `cost`, `show`, `convert` and the Python module's reference run. A FIFO as
    external data hung them; their errors named no file."""
    results = _family_campaign(tmp_path, 4, 8, "external_trap,int64_ends,data_range,quant_scale",
                               "run_native,cost,show,convert,py_run")
    assert {r["command"] for r in results} >= {"cost", "show", "convert", "py_run"}, results
    bad = [r for r in results if r["class"] in ("crash", "hang", "memory", "unclear")]
    assert not bad, json.dumps(bad, indent=1)


def test_campaign_extremes_on_every_command(tmp_path):
    """The tenth family (hostile_mutators_extremes.py: axes of 0 elements mid-graph, sizes
    from Shape arithmetic, attributes at the opset where they became inputs, optional
    outputs, values declared with 2^31+ elements) through every command."""
    results = _family_campaign(tmp_path, 5, 6, "empty_mid,shape_arith,attr_moved,optional_outputs,declared_huge",
                               "optimize,run_native,run,cost,show", "--budget", "1")
    bad = [r for r in results if r["class"] not in ("ok", "triaged")]
    assert not bad, json.dumps(bad, indent=1)


def test_campaign_storage_on_every_command(tmp_path):
    """The eleventh family (hostile_mutators_storage.py: tensors of element type 0, values in
    another type's field, segments, value_info that contradicts, counts no model has)
    through every command: each refused with one clear line or run as ONNX Runtime runs it."""
    results = _family_campaign(tmp_path, 6, 6, "undefined_type,data_field,segment,value_info_conflict",
                               "optimize,run_native,run,cost,show", "--budget", "1")
    bad = [r for r in results if r["class"] not in ("ok", "triaged")]
    assert not bad, json.dumps(bad, indent=1)


def test_campaign_fold_on_every_command(tmp_path):
    """The twelfth family (hostile_mutators_fold.py: integer arithmetic past its type, extents
    from constants past int64 or below 0, inputs of 0 elements, opaque operators over
    constants alone) through every command: each refused with one clear line or computed as
    ONNX Runtime (numpy, for integer overflow) computes it."""
    results = _family_campaign(tmp_path, 12, 8, "fold_wrap,extent_overflow,zero_size,const_opaque",
                               "optimize,run_native,run,cost,show", "--budget", "1")
    bad = [r for r in results if r["class"] not in ("ok", "triaged")]
    assert not bad, json.dumps(bad, indent=1)


def test_campaign_container_on_every_command(tmp_path):
    """The thirteenth family (hostile_mutators_container.py: values of rank 13 to 200, model
    paths that are not UTF-8 or hold a newline, function chains 20000 deep, names spelled as
    isomer names its values, attributes given twice) through every command, the Python
    module's optimize among them: each refused with one clear line or run as ONNX Runtime
    runs it."""
    results = _family_campaign(tmp_path, 15, 8, "high_rank,odd_path,function_chain,generated_names,dup_attr",
                               "optimize,run_native,run,cost,show,py_optimize", "--budget", "1")
    bad = [r for r in results if r["class"] not in ("ok", "triaged")]
    assert not bad, json.dumps(bad, indent=1)
