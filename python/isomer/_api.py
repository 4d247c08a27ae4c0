"""isomer.optimize and isomer.run: the CLI's pipeline, called on in-memory models.

Models cross into C++ as serialized ONNX bytes (or as a path, so that external data
next to the file is found) and come back as onnx.ModelProto.
"""

import contextlib
import importlib.util
import os
import sys
import time

import numpy as np

# isomer's runtime uses OpenMP (libgomp, which reads its wait policy once, when it
# loads). Its default lets idle threads spin for ~300k iterations at every
# barrier, which on a busy machine steals the time of the threads they wait for
# (3-30x slower runs, see runtime.h). The CLI chooses a policy per process; a
# library cannot restart, so the module chooses by the same rule when it is
# imported, unless the user chose a policy: passive when other tasks are runnable
# beside a team on every CPU, else a short spin, with each run's team pinned one
# thread per CPU (runtime::why_runs_stay_unpinned). Under load 6-7 on the 2-core
# VM, 2 threads: SqueezeNet 1.1 3.2 ms a run passive, 10-17 ms with the spin;
# llama_block 19-24 vs 24-48 ms. The runtime names who set it
# (runtime::openmp_waits(), in reports): not the user, as long as the variable
# still has the value the module set (ISOMER_MODULE_<variable>; a child process
# given another inherits the marker, and that value is the user's).


def _other_runnable_tasks():
    """Runnable tasks besides this one, as runtime::other_runnable_tasks() counts them:
    the fewest of a few samples of /proc/loadavg's count ($ISOMER_RUNNABLE_TASKS for
    tests)."""
    given = os.environ.get("ISOMER_RUNNABLE_TASKS", "")
    if given.isdigit():
        return int(given)
    fewest = None
    for k in range(5):
        if k:
            time.sleep(0.002)
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return 0
        fewest = running if fewest is None else min(fewest, running)
    return max(0, fewest - 1)


def _choose_openmp_waits():
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return  # the user's choice
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    others = _other_runnable_tasks() if cpus > 1 else 0
    var, value = ("OMP_WAIT_POLICY", "PASSIVE") if others > 0 else ("GOMP_SPINCOUNT", "1000")
    os.environ[var] = value
    os.environ["ISOMER_MODULE_" + var] = value
    os.environ["ISOMER_MODULE_OPENMP_WHY"] = f"{others} other runnable tasks, {cpus} CPUs"


_choose_openmp_waits()

from . import _core  # noqa: E402 - after the OpenMP policy above
from ._report import Report

Error = _core.Error
Error.__module__ = "isomer"  # tracebacks say isomer.Error, the name users catch
Error.__doc__ = "Bad input or an unsupported construct; the message is the CLI's. A ValueError."


class CheckFailedError(Error):
    """The optimized model's outputs differ from the original's. Nothing is
    returned; `.report` says where (check_reason, and culprit_rule when one rule
    alone is responsible)."""

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


SEARCH_MODES = ("templates", "backtrack", "eqsat", "none")

# The check hands graphs with operators isomer cannot evaluate to ONNX Runtime in a
# Python subprocess ($ISOMER_PYTHON); prefer this interpreter when it has onnxruntime.
if "ISOMER_PYTHON" not in os.environ and importlib.util.find_spec("onnxruntime") is not None:
    os.environ["ISOMER_PYTHON"] = sys.executable


def _onnx():
    import onnx  # imported lazily: the builder and run() on bytes need no onnx package

    return onnx


def _model_source(model):
    """(source for _core: bytes or path str, base_dir, name for messages).

    base_dir goes as the path's bytes (os.fsencode): a file name need not be UTF-8."""
    if isinstance(model, (str, os.PathLike)):
        path = os.fsdecode(model)  # a missing file is the importer's error, worded as in the CLI
        return path, os.fsencode(os.path.dirname(os.path.abspath(path))), path
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "", "<bytes>"
    from .graph import Graph

    if isinstance(model, Graph):
        return model.build().to_onnx_bytes(), "", f"<isomer.Graph '{model.name}'>"
    if hasattr(model, "SerializeToString"):
        # onnx.ModelProto (duck-typed, so that onnx need not be importable here)
        try:
            data = model.SerializeToString()
        except ValueError as e:  # protobuf refuses messages over 2 GB
            raise Error(f"the model cannot be serialized in memory ({e}); save it with external data "
                        "and pass its path instead") from e
        return data, "", "<ModelProto>"
    raise TypeError(f"expected an onnx.ModelProto, a path, bytes or an isomer.Graph, not {type(model).__name__}")


@contextlib.contextmanager
def _naming(source, name):
    """Errors about a model given as a path name the file, as the CLI's do (the core
    names it where it reads the file, not where it later refuses a node or a weight);
    running out of memory is an isomer.Error that says so, not a bare MemoryError."""
    # The core's messages hold a name's bytes that are not UTF-8 as U+FFFD.
    shown = os.fsencode(name).decode("utf-8", "replace") if isinstance(source, str) else name
    try:
        yield
    except Error as e:
        text = str(e)
        if not isinstance(source, str) or shown in text or os.path.basename(shown) in text:
            raise
        if isinstance(e, CheckFailedError):
            raise
        raise Error(f"{shown}: {text}") from None
    except MemoryError:
        where = f"{shown}: " if isinstance(source, str) else ""
        raise Error(where + "out of memory (the model asks for more memory than this machine has)") from None


def _input_shapes(input_shapes):
    if input_shapes is None:
        return {}
    if not isinstance(input_shapes, dict):
        raise TypeError(f"input_shapes must be a dict name -> list of ints, not {type(input_shapes).__name__}")
    out = {}
    for name, dims in input_shapes.items():
        if not isinstance(name, str):
            raise TypeError(f"input_shapes: input names must be str, not {type(name).__name__}")
        try:
            dims = [int(d) if isinstance(d, (int, np.integer)) and not isinstance(d, bool) else None
                    for d in dims]
        except TypeError:
            raise TypeError(f"input_shapes['{name}'] must be a list of ints") from None
        if any(d is None for d in dims):
            raise TypeError(f"input_shapes['{name}'] must be a list of ints")
        out[name] = dims
    return out


def _count(name, v):
    """`v` as a non-negative int (a seed, a thread count), or TypeError/ValueError naming `name`."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int, not {type(v).__name__}")
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"{name}={v} is out of range (0 to 2^64 - 1)")
    return int(v)


def _number(name, v, at_least=0.0):
    """`v` as a finite float of at least `at_least` (a budget; a tolerance, which may be
    negative to fail every check on purpose)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, not {type(v).__name__}")
    if not (at_least <= float(v) < float("inf")):
        raise ValueError(f"{name}={v} must be a finite number" + (f" of at least {at_least:g}" if at_least > -np.inf
                                                                  else ""))
    return float(v)


def _to_model_proto(data):
    model = _onnx().ModelProto()
    model.ParseFromString(data)
    return model


TARGETS = ("isomer", "onnxruntime")


def optimize(model, search="eqsat", budget=10.0, check=True, input_shapes=None, *, rules=None, seed=0,
             tolerance=1e-3, disable=None, allow_nonfinite=False, cost="measured", target="isomer", threads=0,
             inputs=None, guard=True, extractor="ilp", guard_target_only=False, mugraph=False, mugraph_states=0,
             mugraph_seconds=30.0, mugraph_untimed=False, fold_overridable_inputs=False):
    """Optimizes a model the way `isomer optimize` does.

    model: an onnx.ModelProto, a path to a .onnx file, serialized bytes or an
        isomer.Graph. Pass a path for models with external data.
    search: "eqsat" (default: the template passes, then equality saturation over
        the verified rules with extraction that sees merges), "templates" (the
        template passes alone: folding, CSE, DCE, fusions), "backtrack" (the
        template passes, then the cost-based backtracking search over verified
        rules) or "none" (no rewrites; import, check and export only).
    budget: seconds the search may take.
    extractor: for search="eqsat", "ilp" (exact, CBC, warm-started from greedy) or
        "greedy".
    rules: rule files or directories for the search (default: isomer's shipped
        rules/, see load_rules).
    check: run the original and the optimized model on the same inputs and
        compare them; on a mismatch raise CheckFailedError (nothing is returned).
    target: the engine the model will run on, "isomer" (isomer's runtime) or
        "onnxruntime" (ONNX Runtime with all graph optimizations). The returned
        model is never slower than the input there: the guard times both,
        takes out rules that made it slower, and returns the original when
        nothing was faster (report.kept, report.reverted say what happened).
    threads: threads of the engines the check and the guard run on (0: every core).
    inputs: {input name: numpy array} for the check and the guard; default:
        random ones (seed) drawn so that the model can run on them (indices in
        range, shapes that fit, non-zero divisors).
    guard: False skips the timing (the model is returned even if slower).
    guard_target_only: True times only on `target`. By default the guard also
        confirms on the other engine (isomer's runtime <-> ONNX Runtime) that
        the returned model is not slower there, and otherwise falls back to the
        template passes alone or the original (report.guard_confirm says what
        it found; skipped where the other engine cannot run the model).
    mugraph: True also fuses attention, normalization, SwiGLU and softmax regions
        into generated kernels found by the μGraph search, like --mugraph
        (verified, compiled, kept where measured faster; written as
        ai.isomer.mugraph functions whose body is the original subgraph).
        mugraph_states bounds each loop choice of a region's search (0: the
        search's default), mugraph_seconds is its safety net in seconds, and
        mugraph_untimed keeps each region's best verified kernel without timing
        it (then only the guard's timing of the whole model catches a slower one).
    input_shapes: {input name: [dims]} fixes input dims, like --input-shape.
    fold_overridable_inputs: True takes initializers the model also lists as
        graph inputs (default values a user may override, as ONNX Runtime lets
        them) for constants, like --fold-overridable-inputs: they fold, and the
        returned model no longer has those inputs (report.frozen_inputs names
        them). By default they stay inputs with their default values.
    tolerance: relative tolerance of the check; disable: rule names to leave out.
    allow_nonfinite: accept NaN/Inf weights (refused by default, like the CLI).
    cost: cost model for the report's before/after time and the search:
        "measured" (cached on disk), "analytic" or "none".

    Returns (onnx.ModelProto, Report). The report's fields are those of
    --report-json.
    """
    if search not in SEARCH_MODES:
        raise ValueError(f"search={search!r} is not available; choose one of: "
                         + ", ".join(repr(m) for m in SEARCH_MODES))
    if cost not in ("measured", "analytic", "none"):
        raise ValueError(f"cost={cost!r}: choose 'measured', 'analytic' or 'none'")
    if extractor not in ("ilp", "greedy"):
        raise ValueError(f"extractor={extractor!r}: choose 'ilp' or 'greedy'")
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: choose " + " or ".join(repr(t) for t in TARGETS))
    if inputs is None:
        inputs = {}
    if not isinstance(inputs, dict):
        raise TypeError(f"inputs must be a dict name -> numpy array, not {type(inputs).__name__}")
    arrays = {}
    for k, v in inputs.items():
        if not isinstance(k, str):
            raise TypeError(f"inputs: input names must be str, not {type(k).__name__}")
        a = np.asarray(v)
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        arrays[k] = _c_order(a)
    disabled = [] if disable is None else ([disable] if isinstance(disable, str) else list(disable))
    if rules is not None and not isinstance(rules, (str, os.PathLike, list, tuple)):
        raise TypeError(f"rules must be a path or a list of paths, not {type(rules).__name__}")
    rule_paths = [] if rules is None else ([os.fspath(rules)] if isinstance(rules, (str, os.PathLike))
                                           else [os.fspath(r) for r in rules])
    seed, threads = _count("seed", seed), _count("threads", threads)
    mugraph_states = _count("mugraph_states", mugraph_states)
    mugraph_seconds = _number("mugraph_seconds", mugraph_seconds)
    budget, tolerance = _number("budget", budget), _number("tolerance", tolerance, at_least=-np.inf)
    source, base_dir, name = _model_source(model)
    input_name = os.fsencode(name) if isinstance(source, str) else b""
    with _naming(source, name):
        data, document, text = _core.optimize_model(source, base_dir, input_name, _input_shapes(input_shapes),
                                                    search, disabled, bool(check), int(seed), float(tolerance),
                                                    bool(allow_nonfinite), float(budget), rule_paths, cost, target,
                                                    int(threads), bool(guard), arrays,
                                                    extractor, bool(guard_target_only), bool(mugraph),
                                                    int(mugraph_states), float(mugraph_seconds),
                                                    bool(mugraph_untimed), bool(fold_overridable_inputs))
    report = Report.from_json(document, text)
    if data is None:
        message = f"{name}: the optimized model does not match the original ({report.check_reason})"
        if report.culprit_rule:
            message += f"; rule '{report.culprit_rule}' is responsible"
        raise CheckFailedError(message + "; no model was returned", report)
    return _to_model_proto(data), report


def valid_inputs(model, *, seed=0, input_shapes=None):
    """Random inputs the model can run on, as {input name: numpy array}: what
    optimize's check and guard use without `inputs=`. Integer inputs are drawn by
    what their consumers need (indices within the indexed axis, shapes and axes
    that fit the data, non-zero divisors); see src/check/inputs.h. Raises
    isomer.Error saying why when no such inputs exist. Open dims take the extents
    optimize's check draws them at: a batch 1, a sequence 64, an image side 224, others
    1 (src/check/open_dims.h); input_shapes sets them."""
    source, base_dir, name = _model_source(model)
    with _naming(source, name):
        arrays, _notes = _core.valid_inputs(source, base_dir, _input_shapes(input_shapes), int(seed))
    return dict(arrays)


def _numpy_name(isomer_dtype):
    return _ISOMER_TO_NUMPY.get(isomer_dtype, isomer_dtype)


_ISOMER_TO_NUMPY = {"f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
                    "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
                    "u64": "uint64", "bool": "bool"}


def _c_order(a):
    """`a` C-contiguous, its rank kept (np.ascontiguousarray makes a 0-d array 1-d before
    numpy 2, and a scalar input then had the wrong shape)."""
    return np.asarray(a, order="C")


def _as_array(value, declared_dtype, what):
    """A C-contiguous, native-endian numpy array. Arrays keep their dtype (a wrong one is
    reported by the evaluator); Python scalars and lists take the declared dtype."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        a = np.asarray(value)
        if not a.dtype.isnative:
            a = a.astype(a.dtype.newbyteorder("="))
        return _c_order(a)
    try:
        return _c_order(np.asarray(value, dtype=_numpy_name(declared_dtype)))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: cannot make a {_numpy_name(declared_dtype)} array of "
                        f"{type(value).__name__} ({e})") from None


def evaluate_graph(graph, inputs):
    """Runs a _core.Graph on inputs given as a list (graph input order) or a dict by name."""
    return graph.evaluate(_ordered_arrays(graph, inputs))


ENGINES = ("reference", "runtime")


def _ordered_arrays(graph, inputs):
    """Inputs given as a dict by name or a list in order -> arrays in input order."""
    declared = graph.inputs  # [(name, dtype, shape)]
    names = [n for n, _, _ in declared]
    if isinstance(inputs, dict):
        unknown = [k for k in inputs if k not in names]
        if unknown:
            raise Error(f"no graph input named '{unknown[0]}' (inputs: {', '.join(names)})")
        # An input with a default value (an initializer the model lists as an input)
        # takes it when not given, as ONNX Runtime does.
        defaults = graph.input_defaults
        missing = [n for n in names if n not in inputs and n not in defaults]
        if missing:
            raise Error(f"no value given for graph input '{missing[0]}'")
        ordered = [inputs[n] if n in inputs else defaults[n] for n in names]
    else:
        ordered = list(inputs)
        if len(ordered) != len(names):
            raise Error(f"the graph has {len(names)} inputs ({', '.join(names)}), {len(ordered)} given")
    return [_as_array(v, dt, f"input '{n}'") for v, (n, dt, _) in zip(ordered, declared)]


def _fixed_to(source, base_dir, graph, fixed, input_shapes, frozen=False):
    """The model loaded again with its open input dims fixed as `fixed` ({input name:
    dims}) says, as input_shapes fixes them (`isomer run` does the same): the runtime's
    fusions (RMSNorm, rotary embeddings, attention) match static shapes only. The graph
    as loaded where no dim is open or the fixed dims do not load. `frozen`: loaded as
    _for_run loaded it."""
    given = _input_shapes(input_shapes)
    fixed = {k: v for k, v in fixed.items() if k not in given}
    if not fixed:
        return graph
    try:
        return _core.load_model(source, base_dir, {**given, **fixed}, frozen)
    except Error:
        return graph


def _fixed_to_arrays(source, base_dir, graph, arrays, input_shapes, frozen=False):
    """_fixed_to at the extents of the arrays the model will run on."""
    fixed = {}
    for (name, _, shape), a in zip(graph.inputs, arrays):
        if any(not isinstance(d, int) for d in shape) and len(shape) == np.ndim(a):
            fixed[name] = [int(d) for d in np.shape(a)]
    return _fixed_to(source, base_dir, graph, fixed, input_shapes, frozen)


def _for_run(source, base_dir, graph, inputs, input_shapes):
    """A run on the runtime that gives none of the inputs with a default value (an
    initializer the model also lists as an input) computes with those values: the model
    is loaded again with them as constants, as `isomer run` loads it, so the runtime
    folds and packs them (a Conv whose weight was such an input ran on the reference
    kernel). Returns (graph, frozen)."""
    defaults = graph.input_defaults
    given = inputs if isinstance(inputs, dict) else {}
    if not defaults or isinstance(inputs, (list, tuple)) or any(n in given for n in defaults):
        return graph, False
    return _core.load_model(source, base_dir, _input_shapes(input_shapes), True), True


def run(model, inputs, *, input_shapes=None, engine="reference", threads=0):
    """Runs a model and returns its outputs as a list of numpy arrays, in the model's
    output order.

    model: an onnx.ModelProto, a path, bytes or an isomer.Graph.
    inputs: a dict {input name: array} or a list in the model's input order.
    engine: "reference", isomer's reference evaluator (float64 inside each
      operator, results rounded to each value's type: slow, exact), or "runtime",
      isomer's oneDNN CPU runtime (what `isomer run` uses; operators isomer does not
      know run on ONNX Runtime), with `threads` threads (0: every core). A model
      whose later shapes depend on the data (a detector's box decoding and
      suppression) runs split there, as `isomer run` runs it: the nodes up to where
      the shapes stop being known on the runtime, the rest on ONNX Runtime.
    """
    if engine not in ENGINES:
        raise Error(f"unknown engine '{engine}' (choose {' or '.join(ENGINES)})")
    source, base_dir, name = _model_source(model)
    with _naming(source, name):
        graph = _core.load_model(source, base_dir, _input_shapes(input_shapes))
        if engine == "reference":
            return evaluate_graph(graph, inputs)
        graph, frozen = _for_run(source, base_dir, graph, inputs, input_shapes)
        arrays = _ordered_arrays(graph, inputs)
        graph = _fixed_to_arrays(source, base_dir, graph, arrays, input_shapes, frozen)
        return graph.run_on_runtime(arrays, int(threads))


def benchmark(model, inputs=None, *, input_shapes=None, threads=0, repeat=20, warmup=5, seed=0):
    """End-to-end latency of a model on isomer's CPU runtime (what `isomer run --bench`
    measures), as a dict: latency_ms_median / _min / _max / _mean, latency_ms (every
    timed run), repeats, warmup, threads, steps and step_kinds (how many steps of
    each kind: conv, matmul, eltwise, ..., reference, onnxruntime).

    inputs: as for run(); None draws random ones from `seed` that the model can run on
    (indices within the axis they index, as optimize's check draws them; open dims at
    the extents their names suggest: a batch 1, a sequence 64, an image side 224,
    others 1; input_shapes sets them). The model runs with its open dims fixed to the
    inputs' extents, as `isomer run` runs it.
    """
    if repeat < 1 or warmup < 0:
        raise Error("benchmark needs repeat >= 1 and warmup >= 0")
    source, base_dir, name = _model_source(model)
    with _naming(source, name):
        graph = _core.load_model(source, base_dir, _input_shapes(input_shapes))
        graph, frozen = _for_run(source, base_dir, graph, inputs, input_shapes)
        if inputs is None:
            arrays = []
            graph = _fixed_to(source, base_dir, graph, graph.drawn_input_shapes, input_shapes, frozen)
        else:
            arrays = _ordered_arrays(graph, inputs)
            graph = _fixed_to_arrays(source, base_dir, graph, arrays, input_shapes, frozen)
        return graph.benchmark(arrays, int(threads), int(warmup), int(repeat), int(seed))


def template_rules():
    """Names of the template rules (what `disable=` accepts and reports count)."""
    return list(_core.template_rule_names())


def operators():
    """Names of the operators isomer understands natively (the operator table)."""
    return list(_core.op_names())


def operator_schema(name):
    """{"name", "min_inputs", "max_inputs" (-1: variadic), "attributes": {name: kind}}."""
    return dict(_core.op_schema(name))


def load_rules(path=None):
    """Reads a rule file (or every *.rules file of a directory) into an isomer.RuleSet.

    Without a path: isomer's shipped rule set (the rules/ directory, or $ISOMER_RULES).
    A RuleSet is a sequence of isomer.Rule (name, verdict, usable, reason, text, ...);
    str() gives the file text, .save(path) writes it.
    """
    return _core.load_rules(os.fspath(path) if path is not None else _core.default_rules_path())


def parse_rules(text, file="<rules>"):
    """Parses rule-file text into an isomer.RuleSet (errors name file:line)."""
    return _core.parse_rules(text, file)


def verify_rules(rules, *, timeout=10.0, jobs=1, z3=True, seed=0x150E7):
    """Verifies rules like `isomer rules verify`: Z3 proof first, else the random
    finite-field test for polynomial rules, else unknown with the reason.

    rules: an isomer.RuleSet, or a path to a rule file.
    Returns a new RuleSet with each rule's verdict recorded (rule.verdict is
    "proved", "tested", "refuted" or "unknown"; rule.usable says whether the
    optimizer may apply it). str() of it is the rule file with verdict lines.
    """
    if not isinstance(rules, _core.RuleSet):
        rules = load_rules(rules)
    return _core.verify_rules(rules, float(timeout), int(jobs), bool(z3), int(seed))


class GeneratedRules:
    """What isomer.generate_rules found: `.rules` (an isomer.RuleSet of the usable,
    verified rules), `.counts` (stage -> how many were left), `.seconds` (stage ->
    time) and `.rejected` ([(name, verdict, reason)] for rules that were not
    written)."""

    __slots__ = ("rules", "counts", "seconds", "rejected")

    def __init__(self, rules, counts, seconds, rejected):
        self.rules, self.counts, self.seconds, self.rejected = rules, dict(counts), dict(seconds), list(rejected)

    def __repr__(self):
        return (f"GeneratedRules({len(self.rules)} rules, {len(self.rejected)} rejected, "
                f"{sum(self.seconds.values()):.1f} s)")


def generate_rules(max_ops=3, ops=None, *, jobs=0, seed=0x15033E7, timeout=10.0, rlimit=300000,
                   keep_implied=False):
    """Enumerates every graph of up to `max_ops` operators (ops: an operator subset,
    default the whole palette), pairs the equivalent ones and verifies each pair,
    like `isomer rules generate`. Deterministic for given arguments. Pairs that the
    smaller accepted rules already join are dropped unless keep_implied=True.

    Returns a GeneratedRules; `.rules.save(path)` writes the rule file.
    """
    ops = [] if ops is None else ([ops] if isinstance(ops, str) else list(ops))
    rules, counts, seconds, rejected = _core.generate_rules(int(max_ops), ops, int(jobs), int(seed),
                                                           float(timeout), int(rlimit), bool(keep_implied))
    return GeneratedRules(rules, counts, seconds, rejected)
