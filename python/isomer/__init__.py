"""isomer: a superoptimizer for ONNX tensor graphs, from Python.

    import onnx, isomer
    model_opt, report = isomer.optimize(onnx.load("model.onnx"))
    print(report)                      # the table `isomer optimize` prints
    report.nodes_before, report.nodes_after, report.rules_applied, report.check

    outputs = isomer.run(model_opt, {"input": x})   # reference evaluator, numpy in/out
    outputs = isomer.run(model_opt, {"input": x}, engine="runtime")   # oneDNN CPU runtime
    isomer.benchmark(model_opt)["latency_ms_median"]                  # on the runtime

    rules = isomer.load_rules()        # the shipped, verified rule set
    found = isomer.generate_rules(max_ops=2)   # discover rules; found.rules.save(path)
    checked = isomer.verify_rules("my.rules")  # Z3 + finite-field verdicts
    model_opt, report = isomer.optimize(model, search="backtrack", budget=30)

    g = isomer.Graph()                 # write graphs in Python
    x = g.input("x", [1, 3, 32, 32])
    g.output(g.relu(x), "y")
    model = g.to_onnx()

Failures raise isomer.Error (a ValueError) with the CLI's message; a failed check
raises isomer.CheckFailedError carrying the report.
"""

from ._api import (
    SEARCH_MODES,
    CheckFailedError,
    Error,
    GeneratedRules,
    benchmark,
    generate_rules,
    load_rules,
    operator_schema,
    operators,
    optimize,
    parse_rules,
    run,
    template_rules,
    valid_inputs,
    verify_rules,
)
from ._core import Rule, RuleSet
from ._core import __version__
from ._report import Report
from .graph import Graph, Value, dtype_name

__all__ = [
    "CheckFailedError",
    "Error",
    "GeneratedRules",
    "benchmark",
    "Graph",
    "Report",
    "Rule",
    "RuleSet",
    "SEARCH_MODES",
    "Value",
    "__version__",
    "dtype_name",
    "generate_rules",
    "load_rules",
    "operator_schema",
    "operators",
    "optimize",
    "parse_rules",
    "run",
    "template_rules",
    "valid_inputs",
    "verify_rules",
]
