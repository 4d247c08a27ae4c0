#!/usr/bin/env python3
"""Mutation campaign: semantically hostile but well-formed ONNX models through the whole pipeline.

Takes real models (ONNX's node test cases from Debian's libonnx-testdata, small corpus and
sweep models), applies seeded mutations that keep the file parseable but make the model
hostile (bad dims, dtype lies, attributes out of range, memory bombs in shape tensors,
cycles, duplicate/missing names, broken If/Loop/Scan bodies, escaping external data,
NaN in shape constants, out-of-range run-time indices; and, in hostile_mutators_format.py,
sparse initializers, strings for numbers, odd-length float16 data, million-entry attributes,
deeply nested If, 10^5-node chains, external data past the file's end, non-UTF-8 names,
future opsets, broken nodes inside bodies, ...; and, in hostile_mutators_proto.py, damaged
protobuf bytes, model-local functions that recurse or mismatch their calls, untyped and
non-tensor graph inputs, odd IR versions and opsets, NUL and 10 kB names, empty tensors,
Slice at INT64's ends, Resize scales of 0 or NaN, Conv strides of 0), and runs
`isomer optimize`, `isomer run --no-onnxruntime` and `isomer run` on each under a
timeout and an address-space limit (and, with --commands, `isomer cost`, `show`,
`convert`, and the Python module's isomer.optimize and isomer.run in a child interpreter). Every outcome is classified:

  ok          exit 0 and (where ONNX Runtime runs the model too) the same outputs, or
              exit 1 with one "isomer: error: ..." line
  crash       killed by a signal (or an exit status of 128 and above)
  hang        ran past the timeout
  memory      ran out of memory (bad_alloc / "out of memory" / killed at the limit)
  unclear     failed without exactly one "isomer: error:" line, or a message that names
              neither the file nor a node
  bloated     `optimize` wrote a model (with its external data) over twice the input's
              bytes plus 1 MiB
  accepted    exit 0 although ONNX Runtime refuses the model (to be triaged: ORT is not
              the specification, but it is a good hint)
  wrong       isomer's outputs differ from ONNX Runtime's on the same inputs
  refused     `optimize` or `run` refused (with a clear message) a model ONNX Runtime
              runs on the same inputs: a valid model isomer must run, or an invalid one
              ONNX Runtime is lax about (to be triaged)
  triaged     "accepted", "wrong" or "refused", but of a class TRIAGED explains: ONNX Runtime is
              stricter than the ONNX specification, or the specification leaves the
              difference open (the reason goes into the record's detail)

Usage (reproducible: the seed fixes every mutation and every input):
  ISOMER_BIN=build/isomer .venv/bin/python scripts/hostile_campaign.py --seed 1 --count 300 \
      --out /tmp/hostile [--only MUTATOR] [--commands optimize,run_native,run]
It writes each failing mutant and its log under --out/<class>/ and prints counts by class.
The mutators live in scripts/hostile_mutators.py, scripts/hostile_mutators_format.py,
scripts/hostile_mutators_proto.py, scripts/hostile_mutators_semantic.py (control flow,
quantization, rare element types, sequences, hostile inputs files and command lines) and
scripts/hostile_mutators_resource.py (valid models that ask for unbounded time, memory or disk,
or a bloated output) and scripts/hostile_mutators_traps.py (external data through FIFOs, links
and odd numbers, int64 arithmetic that wraps, element data past its type's range, quantized
scales of 0, NaN or Inf) and scripts/hostile_mutators_numeric.py (integer and float values at
their types' edges through folding, rules, fusions and the runtime; graphs that blow the search up) and
scripts/hostile_mutators_scope.py (model-local functions beyond one call, attribute references
outside functions, opset imports that conflict, bodies that return outer values, outputs that
are inputs, megabytes of metadata) and scripts/hostile_mutators_extremes.py (axes of 0 elements
mid-graph, sizes from Shape arithmetic that wraps, attributes at the opset where they became
inputs, optional outputs wired or left "", values declared with 2^31 to 2^62 elements) and
scripts/hostile_mutators_storage.py (tensors of element type 0, values in another type's field or
in two, TensorProto's segment, value_info that contradicts an input or itself, 10^5 opset imports,
10^4 outputs of one node, a 50 MB doc_string) and scripts/hostile_mutators_fold.py (integer
arithmetic past its type folded at import or fed, extents from constants past int64 or below 0,
0-element inputs through each kind of operator, opaque operators over constants alone, an
initializer that is also a graph input) and scripts/hostile_mutators_container.py (values of rank 13
to 200, model paths that are not UTF-8 or hold a newline, chains of functions 20000 deep, names
spelled as isomer names the values it makes, attributes given twice).
A small fixed-seed subset runs in the tests (tests/python/test_hostile_campaign.py, --count 8).
"""
import argparse
import collections
import glob
import json
import os
import random
import re
import resource
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

from hostile_mutators import MUTATORS as BASE_MUTATORS, _init_names
from hostile_mutators_format import MUTATORS as FORMAT_MUTATORS
from hostile_mutators_proto import MUTATORS as PROTO_MUTATORS
from hostile_mutators_semantic import MUTATORS as SEMANTIC_MUTATORS
from hostile_mutators_resource import MUTATORS as RESOURCE_MUTATORS
from hostile_mutators_traps import MUTATORS as TRAP_MUTATORS
from hostile_mutators_numeric import MUTATORS as NUMERIC_MUTATORS
from hostile_mutators_scope import MUTATORS as SCOPE_MUTATORS, TRIAGED as SCOPE_TRIAGED
from hostile_mutators_extremes import MUTATORS as EXTREME_MUTATORS, TRIAGED as EXTREME_TRIAGED
from hostile_mutators_storage import MUTATORS as STORAGE_MUTATORS, TRIAGED as STORAGE_TRIAGED
from hostile_mutators_fold import MUTATORS as FOLD_MUTATORS, TRIAGED as FOLD_TRIAGED
from hostile_mutators_container import MUTATORS as CONTAINER_MUTATORS, TRIAGED as CONTAINER_TRIAGED

MUTATORS = {**BASE_MUTATORS, **FORMAT_MUTATORS, **PROTO_MUTATORS, **SEMANTIC_MUTATORS, **RESOURCE_MUTATORS,
            **TRAP_MUTATORS, **NUMERIC_MUTATORS, **SCOPE_MUTATORS, **EXTREME_MUTATORS, **STORAGE_MUTATORS,
            **FOLD_MUTATORS, **CONTAINER_MUTATORS}

NODE_DIRS = ["/usr/share/libonnx-testdata/data/node", "/usr/share/onnx/data/node"]
# Operators whose node cases the campaign favours: shape tensors, indices, attributes
# with ranges, control flow.
FAVOURED = ["gather", "scatter", "reshape", "expand", "tile", "constantofshape", "range", "resize",
            "conv", "pool", "transpose", "concat", "split", "slice", "pad", "if", "loop", "scan",
            "topk", "onehot", "squeeze", "unsqueeze", "flatten", "gemm", "matmul", "softmax",
            "reduce", "cumsum", "depthtospace", "spacetodepth", "where", "einsum", "batchnorm",
            "layer_norm", "instancenorm", "lrn", "argmax", "trilu", "compress", "nonzero",
            "gridsample", "roialign", "upsample", "maxunpool", "eyelike", "shape", "size", "cast",
            "dequantize", "quantize", "lstm", "gru", "rnn", "center_crop", "col2im", "dft"]
# Whole models --real mutates unless --real-models names others: the corpus's (make corpus).
REAL_MODELS = ["build/corpus/squeezenet1_1.onnx", "build/corpus/gpt2_block.onnx", "build/corpus/nasrnn_b1.onnx"]


# --- sources -------------------------------------------------------------------------------

def node_cases():
    for d in NODE_DIRS:
        if os.path.isdir(d):
            cases = sorted(glob.glob(os.path.join(d, "*", "model.onnx")))
            return [c for c in cases if any(f in os.path.basename(os.path.dirname(c)) for f in FAVOURED)]
    return []


def load(path):
    m = onnx.load(path, load_external_data=False)
    return m


# --- triage ----------------------------------------------------------------------------------

# Classes of "accepted" and "wrong" results that are not isomer's to fix, each with why:
# (mutators (a regular expression), commands, regex on the mutation's note, on the detail, on isomer's stderr, reason).
TRIAGED = [
    ("nonfinite_shape", ("run_native", "run"), r"non-finite|Cast", r"NaN positions differ$",
     r"isomer: warning: .* holds (NaN|Inf) at element",
     "NaN where a max meets it is not defined by ONNX: oneDNN's Relu and MaxPool return the other operand (IEEE "
     "maxNum), ONNX Runtime's Relu keeps the NaN (its MaxPool does not); the numbers agree, and `run` warns of the "
     "non-finite weight"),
    ("opset", ("optimize",), r"^opset (node)?domain$", r"", r"",
     "a node of a vendor domain: ONNX Runtime refuses it for want of that domain's custom-op library, not because "
     "the model is invalid; `optimize` keeps it verbatim, `run` refuses it (a node of an ONNX domain that lacks its "
     "operator, such as ai.onnx.ml, isomer refuses)"),
    ("index|const_index", ("optimize", "cost"), r"run-time index", r"", r"",
     "the model is valid, the inputs the campaign feeds are not (an index out of range): `optimize` writes the "
     "model, `run` refuses the inputs"),
    ("index", ("optimize",), r"constant index", r"", r"",
     "an index out of range is an error when the node runs (ONNX Runtime fails only then); isomer refuses a constant "
     "one where it imports the node, but not inside an If/Loop/Scan body it keeps verbatim, and `optimize` does not "
     "run a model it leaves unchanged (`run` refuses it)"),
    ("numbers", ("optimize", "cost"), r"gather_runtime", r"", r"",
     "the model is valid, the inputs the campaign feeds are not (an index out of range): `optimize` writes the "
     "model, `cost` prices it without running it, `run` refuses the inputs"),
    ("attr", ("optimize", "run"), r"", r"ONNX Runtime runs it", r"is expected to have field",
     "an attribute whose value sits in another field than its type says (axes given as a float): onnx.checker "
     "refuses the node in these words; ONNX Runtime reads it anyway"),
    ("run_inputs", ("cost", "convert"), r"", r"^$", r"",
     "`cost` and `convert` take no inputs file: the inputs the campaign feeds (which ONNX Runtime refuses) say "
     "nothing of them"),
    ("sparse_init", ("convert",), r"valid$", r"^$", r"",
     "ONNX Runtime fails only when it runs the model on the source case's own data (NLLLoss's ignore index read "
     "by a GatherElements as an index out of range); `convert` rewrites the file without running it, `optimize` "
     "and `run` refuse it"),
    ("sparse_external", ("optimize",), r"sparse_external 500000x", r"ONNX Runtime runs it", r"out of memory",
     "a 2 GB initializer through the Python module, under the campaign's 6 GB address-space limit: "
     "isomer.optimize returns an onnx.ModelProto that holds the weight inline, besides the model it read; it "
     "refuses with one line naming the file (the CLI writes such a model with external data)"),
    ("names", ("optimize",), r"dup_node_names", r"ONNX Runtime cannot run the optimized model",
     r"", "node names repeated: onnx.checker accepts them, ONNX Runtime refuses them (as the IR's text asks); the "
     "model isomer writes keeps them as written, and its outputs match the reference with unique names"),
    ("typing", ("optimize", "run"), r"^typing ir [12]$", r"ONNX Runtime runs it", r"predates opset imports",
     "IR version 1 or 2 with opset imports, which came with IR 3: onnx.checker refuses it, ONNX Runtime runs it "
     "(and computes other outputs than at the model's true IR version)"),
    ("typing", ("optimize", "run", "convert", "py_optimize"), r"^typing ir 0$", r"ONNX Runtime runs it",
     r"unsupported IR version 0",
     "IR version 0 is no IR version (ONNX's Version enum starts them at 1 after _START_VERSION = 0; onnx.checker "
     "says the model does not have an ir_version set properly); ONNX Runtime runs it anyway"),
    ("opset", ("optimize", "run"), r"^opset dupopset$", r"ONNX Runtime runs it", r"twice, at opsets",
     "ai.onnx imported at two versions: onnx.checker does not object and ONNX Runtime takes the last, so which "
     "one the model means is not said; isomer refuses it naming both (the same import twice it runs)"),
    ("attr", ("optimize", "run"), r"", r"ONNX Runtime runs it", r"must be 0 or 1, got",
     "a flag ONNX states as 0 or 1 given another value: engines read it differently (ONNX Runtime keeps dims only "
     "for keepdims == 1), so the model has no one meaning and isomer refuses it"),
    ("typing", ("run",), r"^typing output_seq$", r"ONNX Runtime runs it", r"which isomer cannot take",
     "a graph output that is a sequence: `run` writes each output as one array of an npz, and neither isomer's "
     "runtime nor its bridge to ONNX Runtime holds a sequence there; it refuses naming the output (`optimize` writes "
     "the model; s30 seed 8300, mobilevit)"),
    ("typing", ("optimize",), r"^typing opset 6$", r"", r"",
     "an ai.onnx opset before 7: ONNX Runtime guarantees opset 7 on and lacks kernels of some older versions "
     "(And-1); isomer keeps nodes older than its forms opaque and `optimize` writes them back as they were (`run "
     "--no-onnxruntime` refuses them)"),
    ("run_inputs", ("run_native", "run"), r"nonfinite", r"NaN positions differ$", r"",
     "NaN where a max meets it is not defined by ONNX (see nonfinite_shape): oneDNN's Relu returns the other operand, "
     "ONNX Runtime's keeps the NaN; the numbers agree"),
    ("run_inputs", ("optimize", "run"), r"scalar_for_vector", r"ONNX Runtime runs it", r"the model declares",
     "an array of shape [1] for an input declared as a scalar: ONNX Runtime takes it, isomer holds given inputs to "
     "the declared shape and says so"),
    ("run_inputs", ("optimize",), r"_bomb", r"^$", r"",
     "the model is valid, the inputs are not (a run-time shape asking for terabytes): `optimize` leaves the model "
     "unchanged and does not run it, `run` refuses the inputs naming the allocation"),
    ("sequence", ("optimize",), r"", r"^$", r"",
     "a position, split or optional that is wrong only when the node runs (ONNX's inference accepts the model, "
     "ONNX Runtime fails at run time): isomer keeps sequence operators opaque, `optimize` writes the model unchanged "
     "without running it, and `run` refuses it"),
    ("rare_dtype", ("optimize",), r"cast_from_string|cast_to (BFLOAT16|FLOAT8|INT4|UINT4|UINT16)", r"^$", r"",
     "a valid Cast (strings that do not parse fail only when it runs; ONNX Runtime lacks some Cast kernels): "
     "`optimize` keeps it opaque and writes the model unchanged"),
    ("rare_dtype", ("run",), r"cast_to", r"ONNX Runtime runs it", r"Cast to unsupported type",
     "a string, float8 or int4 output: isomer's runtime and its ONNX Runtime bridge hold no such tensors (ONNX "
     "Runtime hands float8 to Python as uint8), and `run` says so"),
    ("numbers", ("optimize",), r"resize_scales 1000000000", r"^$", r"",
     "a valid Resize whose output needs 96 GB: ONNX Runtime runs out of memory; `optimize` writes it back unchanged "
     "without running it (`run` refuses it, naming the allocation)"),
    ("value_info_lie", ("optimize", "run"), r"", r"ONNX Runtime runs it", r"value_info declares",
     "value_info giving a value another element type than its node computes: ONNX's inference refuses the model "
     "(strict mode), ONNX Runtime ignores value_info; isomer refuses it naming both types"),
    ("many_inits", ("run_native", "run", "optimize", "convert", "py_optimize"), r"concat 100000", r"", r"",
     "valid: ONNX Runtime runs it, but takes 40-90 s to load 10^5 initializers on a busy machine, past the "
     "campaign's 60 s for its reference run or its run of the written model (isomer's outputs, and ONNX Runtime's "
     "of the written model, were compared by hand: 599983 each)"),
    ("long_loop", ("optimize",), r"^long_loop runs_long$", r"^$", r"",
     "valid: a Loop of 10^9 iterations that its condition never ends; ONNX Runtime's reference run passes the "
     "campaign's timeout, and `optimize` writes the model back without running the loop"),
    ("nonfinite_shape|quant_scale", ("optimize",), r"", r"ONNX Runtime runs it",
     r"refusing to optimize a model with non-finite",
     "a weight holding NaN or Inf: `optimize` refuses it by design, naming the initializer and its reader "
     "(docs/optimize.md; --allow-nonfinite accepts it), and `run` computes with it as ONNX Runtime does"),
    ("fold_bomb", ("run_native", "run"), r"^fold_bomb range \d+ Reduce\w+", r"max abs diff", r"",
     "a float32 reduction of Range(0, 10^8): ONNX Runtime's Range adds delta to a float32 running value, which "
     "stops growing at 2^24 (every element past index 2^24 is 16777216; the sum comes out 1.54e15 for 5.0e15); ONNX "
     "defines element i as start + i * delta, which isomer computes"),
    ("huge_attr|attr|int64_ends", ("optimize", "run"), r"", r"ONNX Runtime runs it",
     r"Unrecognized attribute|axis -?\d+ is out of range for rank",
     "an attribute the operator's schema does not have (onnx.checker refuses the node), or an axis outside the "
     "[-rank, rank-1] the operator's specification states (onnx.checker does not test it): ONNX Runtime ignores the "
     "attribute or takes the axis anyway; isomer refuses it naming the node"),
    (".*", ("show",), r"", r"", r"",
     "`show` summarizes a model without running it or checking what ONNX Runtime checks when it loads it (a "
     "node that fails only when it runs, a value past its type): it refuses only what isomer cannot import"),
    ("int64_ends", ("optimize",), r"tile_empty", r"^$", r"",
     "a Tile of an empty tensor by repeats of INT64_MAX: its output is empty and valid by ONNX's definition "
     "(ONNX Runtime refuses the repeats); isomer folds it to the empty tensor it is"),
    ("int64_ends", ("optimize",), r"pad_wrap|slice_step_min|split_wrap|range_wide|pool_pads|pool_kernel|conv_dil|"
     r"onehot_depth",
     r"^$", r"",
     "a Pad, Slice, Split, Range, OneHot, pooling or convolution whose amounts are int64s at their ends (sizes that "
     "wrap, pads past the kernel, outputs of terabytes): isomer keeps the node opaque or prices it as written, and "
     "`optimize` writes the model back unchanged without running it (`run` refuses it, naming the node)"),
    ("int_edges", ("optimize",), r" Relu int(32|64) ", r"^$", r"",
     "Relu of an integer type is valid since opset 14; ONNX Runtime has no kernel for it (\"Could not find an "
     "implementation for Relu(14)\"), and `optimize` writes it back (`run` computes it)"),
    ("function", ("optimize", "run_native", "run"), r"^function valid", r"^$", r"",
     "a well-formed function called in a model of an opset before 7 (the source's): isomer inlines the call and "
     "computes its body at that opset, ONNX Runtime inlines it too but has no kernel for it (\"Could not find an "
     "implementation for Relu(1)\"), as for the same nodes outside a function"),
    ("nonfinite_rules", ("optimize", "run_native", "run"), r"reduce_inf Reduce(Max|Min)$", r"NaN positions differ$", r"",
     "ReduceMax/ReduceMin of a row holding NaN: ONNX does not say (its Max and Min propagate NaN, which isomer's "
     "reductions do; ONNX Runtime's Eigen reductions skip it, depending on the order of the row)"),
    ("nonfinite_rules", ("run_native",), r"reduce_inf Reduce(L2|LogSumExp)$", r"infinities differ$", r"",
     "ReduceL2 of a row holding 3e38: its square overflows float32, not double; the reference evaluator (the "
     "Python module's reference run) computes in double and gives the finite norm, ONNX Runtime and isomer's "
     "runtime infinity (ONNX does not state the intermediate precision)"),
    ("nonfinite_rules", ("optimize", "run_native", "run"), r"(conv|matmul|gemm)_(relu|clip)", r"NaN positions differ$",
     r"",
     "NaN where a max meets it is not defined by ONNX (see nonfinite_shape): oneDNN's fused Relu and Clip post-ops "
     "return the bound, ONNX Runtime keeps the NaN; isomer's own kernels keep it, and the numbers agree"),
    ("nonfinite_feeds", ("run_native", "run"), r"LSTM|GRU|RNN", r"NaN positions differ$", r"",
     "a NaN in a recurrence's input or initial state: isomer's runtime and its reference evaluator carry it to "
     "every later step (440 NaN of an LSTM's output for one NaN in initial_h, s27 seed 5008); ONNX Runtime's LSTM "
     "gives numbers there (its activations bound the gates; ONNX states no NaN handling), and the numbers agree"),
    ("nonfinite_feeds", ("run_native", "run"), r"", r"NaN positions differ$", r"",
     "NaN where a max meets it is not defined by ONNX (see nonfinite_shape): oneDNN's Relu and Clip post-ops fused "
     "into a convolution or a product return the bound, ONNX Runtime keeps the NaN (`run --no-fuse` keeps it too); "
     "the numbers agree"),
    ("nonfinite_feeds", ("run_native", "run"), r"(nan|mixed) .*MaxPool", r"max abs diff", r"",
     "NaN in a MaxPool window (see nonfinite_shape): oneDNN's max skips it; ONNX Runtime's result depends on "
     "where it stands in the window (NaN at one output, a number below the window's largest at the next)"),
    ("nonfinite_feeds", ("run_native", "run"), r"(nan|mixed) .*GridSample", r"max abs diff", r"",
     "a NaN sampling coordinate names no position (ONNX does not say what it reads): isomer reads nothing there "
     "(the padding), ONNX Runtime converts NaN to an index, which C++ leaves undefined"),
    ("cast_edges", ("optimize",), r"nonfinite .* constant", r"ONNX Runtime runs it",
     r"refusing to optimize a model with non-finite",
     "a constant holding NaN or Inf: `optimize` refuses it by design, naming the initializer and its reader "
     "(docs/optimize.md; --allow-nonfinite accepts it), and `run` computes with it"),
    ("nonfinite_rules", ("optimize", "run_native", "run"), r"(layernorm|instancenorm)_const", r"max abs diff", r"",
     "a row of 1e30: its variance is 0, and isomer gives the bias as the formula does; ONNX Runtime's "
     "E[x^2] - E[x]^2 overflows float32 there (1e60) and gives 0"),
    ("shape_bomb|huge_extent", ("optimize",), r"^appended \w+ bomb|^huge_extent", r"", r"",
     "a valid model (a shape operator, or a Resize, Pad or ConvTranspose from valid attributes) whose output needs "
     "terabytes: ONNX Runtime runs out of memory; `optimize` writes it back unchanged without running it (`run` "
     "refuses it, naming the allocation)"),
    ("node_arity", ("optimize", "run"), r"", r"ONNX Runtime runs it", r"has input size \d+ not in range",
     "a node given more inputs than its operator takes (a Constant with three): ONNX's schema refuses it (onnx.checker "
     "says so in these words), ONNX Runtime ignores the extra inputs; isomer refuses it naming the node"),
    ("names", ("optimize", "run", "cost", "convert"), r"nul_name", r"", r"",
     "a value name holding a NUL byte is legal (a protobuf string holds any byte, and isomer keeps it); ONNX "
     "Runtime's Python binding cuts a feed's name at the NUL (\"Required inputs (['a\\x00bX']) are missing from "
     "input feed (['a', ...])\"), so the reference run cannot feed the model"),
] + SCOPE_TRIAGED + EXTREME_TRIAGED + STORAGE_TRIAGED + FOLD_TRIAGED + CONTAINER_TRIAGED


# Commands triaged as the one they share a path with: the Python module's optimize and
# `convert` write a model as `optimize` does; the Python module's reference run computes
# outputs as `run --no-onnxruntime` does.
TRIAGE_AS = {"py_optimize": "optimize", "convert": "optimize", "py_run": "run_native"}


def triage(mutator, note, command, detail, stderr):
    names = {command, TRIAGE_AS.get(command, command)}  # an entry may name the command itself
    for mut, commands, note_re, detail_re, stderr_re, reason in TRIAGED:
        if re.fullmatch(mut, mutator) and names & set(commands) and re.search(note_re, note) and re.search(detail_re, detail) \
                and re.search(stderr_re, stderr):
            return reason
    return None


# --- running ---------------------------------------------------------------------------------

def _limit(mem_bytes):
    def f():
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.nice(10)
    return f


def run_isomer(cmd, timeout, mem, env):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout,
                           preexec_fn=_limit(mem), env=env)
        return p.returncode, p.stdout, p.stderr, time.time() - t0
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""), timeout


def _spellings(name):
    """How a message may spell a file name: as it is, with its bytes that are not UTF-8 as
    U+FFFD (stderr is read with errors="replace"), or with control bytes as \\xNN (isomer
    escapes them, as it does in names: hostile_mutators_scope.py's name_chars)."""
    shown = os.fsencode(name).decode("utf-8", "replace")
    return {name, shown, re.sub(r"[\x00-\x1f\x7f]", lambda c: "\\x%02x" % ord(c.group()), shown)}


def classify(rc, err, model_path, ort_ok, out_path=None):
    # `run`'s notice that a slow run goes on (every 10 s, on stderr) is no part of a failure's message.
    lines = [l for l in err.splitlines() if l.strip() and not l.startswith("isomer: still running ")]
    if rc is None:
        return "hang"
    # Running out of memory is a failure unless isomer says so cleanly, naming the file.
    if any(l in ("isomer: error: out of memory", "isomer: error: std::bad_alloc") for l in lines) or \
            (("max_size()" in err or "length_error" in err) and os.path.basename(model_path) not in err):
        return "memory"
    if rc < 0 or rc >= 128:
        return "crash"
    if rc == 0:
        return "accepted" if ort_ok is False else "ok"
    errs = [l for l in lines if l.startswith("isomer: error: ")]
    if len(errs) != 1 or len(lines) != 1:
        return "unclear"
    named = [os.path.basename(model_path), "inputs.npz"] + ([os.path.basename(out_path) or out_path] if out_path else [])
    if not any(s in errs[0] for n in named for s in _spellings(n)):
        return "unclear"
    return "ok"


# The Python module in a child interpreter (an abort shows as its exit status): its
# isomer.Error is printed as the CLI prints its errors, anything else (a traceback, a
# TypeError, a MemoryError) is left as it came and classified unclear.
PY_DRIVER = r"""
import sys
import numpy as np
mode, path, out, feeds, budget = sys.argv[1:6]
import isomer
f = dict(np.load(feeds)) if feeds else {}
try:
    if mode == "py_optimize":
        m, _ = isomer.optimize(path, budget=float(budget), threads=1, inputs=f)
        import onnx
        onnx.save(m, out)
    else:
        outs = isomer.run(path, f, engine="reference")
        try:
            import onnx
            names = [o.name for o in onnx.load(path, load_external_data=False).graph.output]
        except Exception:
            names = []
        if len(names) != len(outs):
            names = [f"output_{i}" for i in range(len(outs))]
        np.savez(out, **dict(zip(names, outs)))
except isomer.Error as e:
    sys.stderr.write(f"isomer: error: {e}\n")
    sys.exit(1)
"""


def command_line(args, cmd_name, given, outp, npz, feeds_path):
    """The command line of one of the campaign's commands on model `given`."""
    if cmd_name == "optimize":
        cmd = [args.isomer, "optimize", given, "-o", outp, "--budget", str(args.budget), "--threads", "1"]
        return cmd + (["--inputs", feeds_path] if feeds_path else [])
    if cmd_name in ("run", "run_native"):
        cmd = [args.isomer, "run", given, "--threads", "1", "--outputs", npz]
        if cmd_name == "run_native":
            cmd.append("--no-onnxruntime")
        return cmd + (["--inputs", feeds_path] if feeds_path else [])
    if cmd_name == "cost":
        return [args.isomer, "cost", given, "--threads", "1", "--cost", "analytic"]
    if cmd_name == "cost_measured":
        return [args.isomer, "cost", given, "--threads", "1", "--cost-db", os.path.join(os.path.dirname(npz), "c.db")]
    if cmd_name == "show":
        return [args.isomer, "show", given]
    if cmd_name == "convert":
        return [args.isomer, "convert", given, "-o", outp]
    if cmd_name in ("py_optimize", "py_run"):
        return [sys.executable, "-c", PY_DRIVER, cmd_name, given, outp if cmd_name == "py_optimize" else npz,
                feeds_path, str(args.budget)]
    raise ValueError(f"unknown campaign command {cmd_name}")


WRITES_MODEL = ("optimize", "convert", "py_optimize")  # compared with ONNX Runtime on the model they write
COMPUTES = ("run", "run_native", "py_run")  # compared with ONNX Runtime on the outputs they compute


def model_bytes(path):
    """A model file's bytes plus those of the external data files next to it that it names."""
    if not os.path.exists(path):
        return 0
    total = os.path.getsize(path)
    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return total
    files = {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
    for f in files:
        full = os.path.join(os.path.dirname(path), f)
        if os.path.isfile(full):
            total += os.path.getsize(full)
    return total


def ort_outputs(path, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(None, feeds)))


def _ort_child(path, feeds_path, out_path, mem):
    """ONNX Runtime in a child process: a hostile model must not take the campaign down."""
    code = ("import sys, numpy as np; sys.path.insert(0, %r); import hostile_campaign as h; "
            "f = dict(np.load(%r)) if %r else {}; o = h.ort_outputs(%r, f); np.savez(%r, **o)"
            % (os.path.dirname(os.path.abspath(__file__)), feeds_path, feeds_path, path, out_path))
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           preexec_fn=_limit(mem))
        return p.returncode == 0
    except subprocess.TimeoutExpired:
        return False


def make_feeds(m, rng, bad_index):
    """Inputs for every graph input, from its declared type (dynamic dims -> 2)."""
    feeds = {}
    inits = _init_names(m.graph)
    np_rng = np.random.default_rng(rng.randrange(1 << 30))
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):  # a sequence, map or optional: no reference run
            return None
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 2 for d in tt.shape.dim]
        if any(d < 0 or d > 4096 for d in dims) or int(np.prod(dims, dtype=np.float64)) > (1 << 22):
            return None
        try:
            dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        except Exception:
            return None
        if dt == np.bool_:
            a = np_rng.random(dims) < 0.5
        elif np.issubdtype(dt, np.integer):
            a = np_rng.integers(0, 2, dims).astype(dt)
        elif np.issubdtype(dt, np.floating):
            a = np_rng.standard_normal(dims).astype(dt)
        else:
            return None
        if bad_index and vi.name == bad_index[0] and a.size:
            a = a.copy()
            a.reshape(-1)[rng.randrange(a.size)] = np.array(bad_index[1]).astype(dt) if dt != np.int32 \
                else np.int32(np.clip(bad_index[1], -(1 << 31), (1 << 31) - 1))
        feeds[vi.name] = a
    return feeds


def compare(a_path, b_path, tol=1e-3):
    a, b = np.load(a_path, allow_pickle=True), np.load(b_path, allow_pickle=True)
    for k in b.files:
        if k not in a.files:
            continue
        x, y = a[k], b[k]
        if x.dtype == object or y.dtype == object:  # a sequence or map output: not compared
            continue
        if x.shape != y.shape:
            return f"output {k}: shape {x.shape} vs {y.shape}"
        if x.dtype.kind in "fc":
            # Values where both are numbers first: a NaN in another place is a lesser
            # difference (see TRIAGED), a wrong number never is.
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            ok = ~np.isnan(xf) & ~np.isnan(yf)
            fin = ok & np.isfinite(xf) & np.isfinite(yf)
            scale = max(1.0, float(np.abs(yf[fin]).max()) if fin.any() else 1.0)
            if fin.any() and float(np.abs(xf[fin] - yf[fin]).max()) > tol * scale:
                return f"output {k}: max abs diff {float(np.abs(xf[fin] - yf[fin]).max())}"
            if not np.array_equal(xf[ok & ~fin], yf[ok & ~fin]):
                return f"output {k}: infinities differ"
            if not np.array_equal(np.isnan(xf), np.isnan(yf)):
                return f"output {k}: NaN positions differ"
        elif not np.array_equal(x, y):
            return f"output {k}: values differ"
    return None


RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def draws_random(m):
    """Whether the model's outputs depend on random draws (a random operator, or a Dropout
    given a training_mode input, as dynamo exports of training-mode models have): its
    outputs differ between engines by design and are not compared."""
    nodes = list(m.graph.node)
    for f in m.functions:
        nodes += list(f.node)
    return any(n.op_type in RANDOM_OPS or (n.op_type == "Dropout" and len(n.input) > 2 and n.input[2])
               for n in nodes)


def campaign(args):
    rng = random.Random(args.seed)
    sources = node_cases()
    wanted = [p for pat in args.real_models.split(",") if pat for p in sorted(glob.glob(pat))] \
        if args.real_models else REAL_MODELS
    real = [p for p in wanted if os.path.exists(p)] if args.real else []
    names = sorted(MUTATORS) if not args.only else args.only.split(",")
    commands = args.commands.split(",")
    env = dict(os.environ)
    env.setdefault("ISOMER_PYTHON", sys.executable)
    # The Python module's commands import the build's isomer (its _core) and the sources'.
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.path.dirname(os.path.abspath(args.isomer)), "python"),
                                         os.path.join(repo, "python")] + env.get("PYTHONPATH", "").split(os.pathsep))
    counts = collections.Counter()
    by_mut = collections.defaultdict(collections.Counter)
    os.makedirs(args.out, exist_ok=True)
    results = []
    for case in range(args.count):
        crng = random.Random(rng.randrange(1 << 62))
        src = crng.choice(real) if real and crng.random() < args.real_fraction else crng.choice(sources)
        mut = crng.choice(names)
        wd = os.path.join(args.out, "work", f"{case:05d}")
        os.makedirs(wd, exist_ok=True)
        m = load(src)
        if src in real and any(t.data_location == TensorProto.EXTERNAL for t in m.graph.initializer):
            onnx.load_external_data_for_model(m, os.path.dirname(src))
        try:
            r = MUTATORS[mut](m, crng, wd)
        except Exception as e:  # a mutator that does not apply to this model
            print(f"# case {case}: mutator {mut} skipped on {src}: {e}", file=sys.stderr)
            r = None
        if r is None:
            continue
        bad_index = r[2] if len(r) > 2 else None
        m, note = r[0], r[1]
        # A legal model ONNX Runtime refuses (it is stricter than the specification) comes
        # with a model it runs that means the same: that one gives the reference outputs.
        reference = r[4] if len(r) > 4 else None
        # Hostile inputs files and command lines (hostile_mutators_semantic.py).
        run = r[5] if len(r) > 5 else {}
        if "setup" in run:
            run["setup"](wd)
        path = os.path.join(wd, "model.onnx")
        data = m.SerializeToString()
        patch = r[3] if len(r) > 3 else []
        if callable(patch):  # byte-level damage (hostile_mutators_proto.py)
            data = patch(data)
        else:
            for old, new in patch:  # bytes the protobuf library will not write itself
                data = data.replace(old, new)
        with open(path, "wb") as f:
            f.write(data)
        feeds = run["feeds"] if "feeds" in run else make_feeds(m, crng, bad_index)
        feeds_path = ""
        if feeds is not None:
            feeds_path = os.path.join(wd, "inputs.npz")
            np.savez(feeds_path, **feeds)
        if "inputs_bytes" in run:  # a damaged inputs file: no reference run
            feeds, feeds_path = None, os.path.join(wd, "inputs.npz")
            with open(feeds_path, "wb") as f:
                f.write(run["inputs_bytes"])
        ort_path = os.path.join(wd, "ort.npz")
        ort_model = path
        if reference is not None:
            ort_model = os.path.join(wd, "reference.onnx")
            onnx.save(reference, ort_model)
        ort_ok = _ort_child(ort_model, feeds_path, ort_path, args.mem) \
            if feeds is not None and not run.get("no_reference") else None
        if ort_ok and (bad_index or draws_random(m) or run.get("no_reference")):
            # ORT's behaviour on out-of-range indices is not a reference, nor are random draws.
            ort_ok = None
        if ort_ok is False and feeds is not None and \
                [i.name for i in m.graph.input] == [i.name for i in load(src).graph.input]:
            # The same random feeds may fail the unmutated source (a Resize scale drawn
            # negative): then ONNX Runtime's refusal says nothing of the mutation.
            if not _ort_child(src, feeds_path, os.path.join(wd, "src_ort.npz"), args.mem):
                ort_ok = None
        given = os.path.join(wd, run["model"]) if "model" in run else path
        # The Python module takes arrays, not an inputs file: a damaged file is the CLI's case alone.
        # The Python module takes arrays, not an inputs file, and writes no file of its own
        # (an -o of the command line, or its flags, say nothing of it).
        skip = ("py_optimize", "py_run") if "inputs_bytes" in run or "output" in run or "args" in run else ()
        for cmd_name in [c for c in commands if c in run.get("commands", commands) and c not in skip]:
            outp = os.path.join(wd, f"{cmd_name}.out.onnx")
            if "output" in run:
                outp = given if run["output"] == "@model" else os.path.join(wd, run["output"])
            npz = os.path.join(wd, f"{cmd_name}.npz")
            cmd = command_line(args, cmd_name, given, outp, npz, feeds_path)
            cmd += run.get("args", []) if cmd_name in ("optimize", "run", "run_native") else []
            rc, out, err, secs = run_isomer(cmd, args.timeout, args.mem, env)
            cls = classify(rc, err, given, ort_ok, outp if cmd_name in WRITES_MODEL else None)
            detail = ""
            if cls == "ok" and rc == 0 and cmd_name in WRITES_MODEL and \
                    model_bytes(outp) > 2 * model_bytes(given) + (1 << 20):
                cls, detail = "bloated", f"{model_bytes(given)} bytes in, {model_bytes(outp)} out"
            if cls == "ok" and rc == 1 and ort_ok and cmd_name in ("optimize", "run", "py_optimize", "convert"):
                cls, detail = "refused", "ONNX Runtime runs it"
            if cls == "ok" and rc == 0 and ort_ok and cmd_name in COMPUTES and os.path.exists(npz):
                detail = compare(npz, ort_path) or ""
                if detail:
                    cls = "wrong"
            if cls == "ok" and rc == 0 and ort_ok and cmd_name in WRITES_MODEL and os.path.exists(outp):
                opt_npz = os.path.join(wd, "opt_ort.npz")
                if _ort_child(outp, feeds_path, opt_npz, args.mem):
                    detail = compare(opt_npz, ort_path) or ""
                    if detail:
                        cls = "wrong"
                else:
                    cls, detail = "wrong", "ONNX Runtime cannot run the optimized model"
            if cls in ("accepted", "wrong", "refused"):
                why = triage(mut, note, cmd_name, detail, err)
                if why:
                    cls, detail = "triaged", (detail + "; " if detail else "") + why
            counts[cls] += 1
            by_mut[mut][cls] += 1
            rec = {"case": case, "source": src, "mutator": mut, "note": note, "command": cmd_name, "class": cls,
                   "rc": rc, "secs": round(secs, 2), "stderr": err.strip().splitlines()[-3:], "detail": detail,
                   "ort_ok": ort_ok}
            results.append(rec)
            if cls != "ok":
                print(json.dumps(rec), flush=True)
                keep = os.path.join(args.out, cls)
                os.makedirs(keep, exist_ok=True)
                stem = os.path.join(keep, f"{case:05d}_{cmd_name}_{mut}")
                if len(data) < (1 << 20):  # real models' mutants are rebuilt from the seed instead
                    with open(stem + ".onnx", "wb") as f:
                        f.write(data)
                if feeds_path:
                    os.replace(feeds_path, stem + ".npz") if cmd_name == commands[-1] else \
                        open(stem + ".npz", "wb").write(open(feeds_path, "rb").read())
                with open(stem + ".log", "w") as f:
                    f.write(json.dumps(rec, indent=1) + "\n--- stdout\n" + out + "\n--- stderr\n" + err)
        if not args.keep_work:
            subprocess.run(["rm", "-rf", wd])
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=0)
    print("by class:", dict(counts))
    for k in sorted(by_mut):
        print(f"  {k:18s} {dict(by_mut[k])}")
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--out", default="/tmp/hostile")
    ap.add_argument("--only", default="")
    ap.add_argument("--commands", default="optimize,run_native,run",
                    help="of optimize, run_native, run, cost (analytic), cost_measured, show, convert, "
                         "py_optimize (isomer.optimize), py_run (isomer.run, the reference evaluator)")
    ap.add_argument("--isomer", default=os.environ.get("ISOMER_BIN", "build/isomer"))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--mem", type=int, default=6 << 30, help="address-space limit per process (bytes)")
    ap.add_argument("--budget", type=float, default=2)
    ap.add_argument("--real", action="store_true", help="also mutate whole models (REAL_MODELS, or --real-models)")
    ap.add_argument("--real-models", default="", help="comma-separated paths or globs of the whole models --real mutates")
    ap.add_argument("--real-fraction", type=float, default=0.1)
    ap.add_argument("--keep-work", action="store_true")
    args = ap.parse_args()
    counts = campaign(args)
    bad = sum(v for k, v in counts.items() if k not in ("ok", "triaged"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
