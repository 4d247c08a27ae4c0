#include "check/compare.h"

#include <cmath>
#include <sstream>

#include "check/dynamic_quant_check.h"
#include "check/quant_check.h"
#include "ir/error.h"
#include "ir/run_limit.h"

namespace isomer {

std::string CheckResult::status_name() const {
  switch (status) {
    case Status::Passed: return "passed";
    case Status::Failed: return "failed";
    case Status::Skipped: return "skipped";
  }
  return "skipped";
}

CheckResult compare_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                            const std::vector<std::string>& names, double tolerance) {
  CheckResult r;
  r.status = CheckResult::Status::Passed;
  // NaN where both have NaN says nothing about the graphs' agreement: such elements are
  // counted, and an output NaN at every element makes the check inconclusive.
  std::string all_nan, some_nan;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string& name = i < names.size() ? names[i] : std::to_string(i);
    if (want[i].dims() != got[i].dims() || want[i].dtype() != got[i].dtype()) {
      r.status = CheckResult::Status::Failed;
      r.reason = "output '" + name + "' is " + to_string(got[i].type()) + ", expected " + to_string(want[i].type());
      r.worst_output = name;
      return r;
    }
    if (!is_numeric(want[i].dtype())) continue;
    std::vector<double> a = want[i].to_f64(), b = got[i].to_f64();
    double scale = 0, err = 0;
    bool nan_mismatch = false;
    size_t both_nan = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::isnan(a[k]) || std::isnan(b[k])) {
        nan_mismatch = nan_mismatch || std::isnan(a[k]) != std::isnan(b[k]);
        both_nan += std::isnan(a[k]) && std::isnan(b[k]);
        continue;
      }
      if (std::isinf(a[k]) || std::isinf(b[k])) {
        nan_mismatch = nan_mismatch || a[k] != b[k];
        continue;
      }
      scale = std::max(scale, std::fabs(a[k]));
      err = std::max(err, std::fabs(a[k] - b[k]));
    }
    double rel = err / std::max(scale, 1e-6);
    bool exact = !is_float(want[i].dtype());
    r.max_abs_error = std::max(r.max_abs_error, err);
    if (rel >= r.max_rel_error) {
      r.max_rel_error = rel;
      r.worst_output = name;
    }
    // A half-precision output carries its type's rounding (the engines may compute in
    // float32 or in half): it is compared at no less than 8 of its type's epsilon.
    const DType dt = want[i].dtype();
    const double tol = dt == DType::Float16    ? std::max(tolerance, 8 * 0x1p-10)
                       : dt == DType::BFloat16 ? std::max(tolerance, 8 * 0x1p-7)
                                               : tolerance;
    if (both_nan && both_nan == a.size() && all_nan.empty())
      all_nan = "output '" + name + "' is NaN at every element in both: nothing was compared";
    else if (both_nan && both_nan < a.size() && some_nan.empty())
      some_nan = std::to_string(both_nan) + " of " + std::to_string(a.size()) + " elements of output '" + name +
                 "' are NaN in both and were not compared";
    if (nan_mismatch || (exact ? err != 0 : rel > tol)) {
      r.status = CheckResult::Status::Failed;
      std::ostringstream msg;
      msg << "output '" << name << "' differs: "
          << (nan_mismatch ? "NaN/Inf in different places" : "max abs error " + std::to_string(err) +
                                                                 ", relative " + std::to_string(rel));
      if (r.reason.empty()) r.reason = msg.str();
    }
  }
  if (r.status == CheckResult::Status::Passed && !all_nan.empty()) {
    r.status = CheckResult::Status::Skipped;
    r.reason = all_nan;
  } else if (r.status == CheckResult::Status::Passed) {
    r.reason = some_nan;
  }
  return r;
}

namespace {

struct Ran {
  std::vector<Tensor> outputs;
  Engine engine = Engine::Reference;
  bool ok = false;
  std::string error;  // the first engine's error when none ran it
};

// Runs `g` on the first engine of `order` that can; `ok` false when none could.
Ran run_first(Engines& engines, const Graph& g, const std::vector<Engine>& order, const std::vector<Tensor>& inputs) {
  Ran r;
  for (Engine e : order) {
    std::string why;
    Prepared* p = engines.get(g, e, &why);
    if (p) {
      try {
        r.outputs = p->run(inputs);
        p->warm = true;
        r.engine = e;
        r.ok = true;
        return r;
      } catch (const Error& err) {
        why = err.what();
      }
    }
    if (r.error.empty()) r.error = engine_name(e) + ": " + why;
  }
  return r;
}

// Where the optimized graph runs: the target first.
std::vector<Engine> optimized_order(Engine target) {
  if (target == Engine::OnnxRuntime) return {Engine::OnnxRuntime, Engine::Runtime, Engine::Reference};
  return {Engine::Runtime, Engine::OnnxRuntime, Engine::Reference};
}

// Where the original runs: another engine than the optimized graph's (the same
// one only as the last resort).
std::vector<Engine> original_order(Engine optimized_on) {
  switch (optimized_on) {
    case Engine::Runtime: return {Engine::OnnxRuntimePlain, Engine::Reference};
    case Engine::OnnxRuntime:
    case Engine::OnnxRuntimePlain: return {Engine::Runtime, Engine::Reference, Engine::OnnxRuntimePlain};
    case Engine::Reference: return {Engine::OnnxRuntimePlain, Engine::Runtime, Engine::Reference};
  }
  return {Engine::Reference};
}

CheckResult compare_ran(const Ran& want, const Ran& got, const Graph& g, double tolerance) {
  CheckResult r;
  if (want.outputs.size() != got.outputs.size()) {
    r.status = CheckResult::Status::Failed;
    r.reason = "the optimized graph gave " + std::to_string(got.outputs.size()) + " outputs, the original " +
               std::to_string(want.outputs.size());
  } else {
    r = quantizes(g) ? compare_quantized_outputs(want.outputs, got.outputs, g.output_names(), tolerance,
                                                 output_quant_steps(g))
                     : compare_outputs(want.outputs, got.outputs, g.output_names(), tolerance);
  }
  r.method = engine_name(got.engine) + " against " + engine_name(want.engine);
  if (got.engine == want.engine) r.method = engine_name(got.engine);
  return r;
}

}  // namespace

namespace {

bool is_constant_zero(const Value& v) {
  const Tensor* t = v.present() ? v.constant() : nullptr;
  if (!t || t->numel() != 1) return false;
  return t->f64_at(0) == 0.0;
}

// Dropout is native in inference; one the importer kept opaque drops elements at
// random unless its training_mode is absent or false, or its ratio is 0 (torch's
// exporter writes training_mode true for a module exported in training mode, such as
// a Hugging Face model built with from_config and exported without .eval()).
bool random_dropout(const Node& n) {
  if (n.kind() != NodeKind::Opaque || n.op_type() != "Dropout") return false;
  const auto& in = n.inputs();
  if (in.size() < 3 || !in[2].present() || is_constant_zero(in[2])) return false;
  return !(in.size() >= 2 && is_constant_zero(in[1]));
}

}  // namespace

std::string random_outputs_reason(const Graph& g) {
  static const char* const kRandom[] = {"Bernoulli",         "Multinomial",       "RandomNormal",
                                        "RandomNormalLike",  "RandomUniform",     "RandomUniformLike"};
  for (const NodePtr& n : g.topo_order()) {
    for (const char* op : kRandom)
      if (n->op_type() == op) return describe(*n) + " draws random values: two runs cannot be compared";
    if (random_dropout(*n)) return describe(*n) + " drops at random (training mode): two runs cannot be compared";
  }
  return "";
}

CheckResult check_graphs(Engines& engines, const Graph& original, const Graph& optimized, const ModelInputs& inputs,
                         const CheckOptions& opts) {
  require(original.inputs().size() == optimized.inputs().size() &&
              original.outputs().size() == optimized.outputs().size(),
          "the optimized graph's interface differs from the original's");
  if (same_graph(original, optimized)) {  // nothing was rewritten: nothing to run
    CheckResult same;
    same.status = CheckResult::Status::Passed;
    same.method = "identical graphs";
    return same;
  }
  CheckResult skipped;
  if (std::string random = random_outputs_reason(original); !random.empty()) {
    skipped.reason = random;
    return skipped;
  }
  if (!inputs.ok()) {
    skipped.reason = "no valid inputs: " + inputs.impossible;
    return skipped;
  }
  std::vector<Engine> order = optimized_order(opts.target);
  if (!opts.allow_onnxruntime) order = {Engine::Runtime, Engine::Reference};
  Ran got = run_first(engines, optimized, order, inputs.tensors);
  if (std::string limit = RunLimit::exceeded(); !limit.empty()) {  // every later run would fail the same way
    skipped.reason = limit;
    return skipped;
  }
  if (!got.ok) {
    Ran orig = run_first(engines, original, order, inputs.tensors);
    if (!orig.ok) {
      skipped.reason = "the model does not run on the " + inputs.source + " inputs (" + orig.error + ")";
      return skipped;
    }
    CheckResult r;
    r.status = CheckResult::Status::Failed;
    r.method = engine_name(orig.engine);
    r.reason = "the optimized graph does not run where the original does (" + got.error + ")";
    return r;
  }
  // Each engine that prepared a large graph holds its weights again (a compiled graph
  // its packed copy, ONNX Runtime's helper its own): the one that ran the rewrite lets
  // go before another prepares the original (the guard prepares it anew if it times it).
  if (original.constant_bytes() >= kLargeGraphBytes) engines.forget(optimized);
  std::vector<Engine> want_order = original_order(got.engine);
  // A quantized model runs as deployed: ONNX Runtime with its optimizations on runs
  // QDQ groups on integer kernels, as isomer's runtime does (check/quant_check.h).
  if (got.engine == Engine::Runtime && quantizes(original)) want_order.insert(want_order.begin(), Engine::OnnxRuntime);
  if (!opts.allow_onnxruntime)
    std::erase_if(want_order, [](Engine e) { return e == Engine::OnnxRuntime || e == Engine::OnnxRuntimePlain; });
  if (want_order.empty()) want_order = {Engine::Reference};
  Ran want = run_first(engines, original, want_order, inputs.tensors);
  if (std::string limit = RunLimit::exceeded(); !limit.empty()) {
    skipped.reason = limit;
    return skipped;
  }
  if (!want.ok) {
    skipped.reason = "the original does not run on the " + inputs.source + " inputs (" + want.error + ")";
    return skipped;
  }
  CheckResult fast = compare_ran(want, got, original, opts.tolerance);
  if (fast.status != CheckResult::Status::Failed || (got.engine == Engine::Reference && want.engine == Engine::Reference))
    return fast;
  // The engines disagree: the reference evaluator says whether the graphs do.
  Ran ref_want = run_first(engines, original, {Engine::Reference}, inputs.tensors);
  Ran ref_got = run_first(engines, optimized, {Engine::Reference}, inputs.tensors);
  if (!ref_want.ok || !ref_got.ok) return fast;
  CheckResult ref = compare_ran(ref_want, ref_got, original, opts.tolerance);
  if (ref.status != CheckResult::Status::Passed) return ref;
  ref.reason = fast.method + " disagreed (" + fast.reason + "); the reference evaluator finds the graphs equal";
  if (got.engine == Engine::Reference) return ref;
  // The graphs are equal, but is the engine that ran the rewrite right on it? If it
  // computes the original right and the rewrite wrong, the rewrite exposes a fault of
  // that engine: a model written for it would give wrong outputs there.
  CheckResult on_got = compare_ran(ref_got, got, original, opts.tolerance);
  if (on_got.status != CheckResult::Status::Failed) return ref;
  // A dynamically quantized rewrite whose outputs a rounding flip carried apart is
  // no fault of the engine when ONNX Runtime, fed the engine's own quantizations,
  // agrees (check/dynamic_quant_check.h).
  if (got.engine == Engine::Runtime && opts.allow_onnxruntime && quantizes_dynamically(optimized)) {
    CheckResult fed = check_fed_dynamic_quantization(engines, optimized, inputs.tensors, got.outputs, opts.tolerance);
    if (fed.status == CheckResult::Status::Passed) {
      ref.reason += "; " + engine_name(got.engine) + " on the rewrite matches with " + fed.reason;
      return ref;
    }
  }
  Ran orig_there = run_first(engines, original, {got.engine}, inputs.tensors);
  if (!orig_there.ok || compare_ran(ref_want, orig_there, original, opts.tolerance).status == CheckResult::Status::Failed) {
    ref.reason += "; " + engine_name(got.engine) + " is as far from it on the original";
    return ref;
  }
  on_got.engine_fault = true;
  on_got.reason = engine_name(got.engine) + " computes the rewritten graph wrongly (" + on_got.reason +
                  ") and the original right; the reference evaluator finds the graphs equal";
  return on_got;
}

CheckResult compare_graphs(const Graph& original, const Graph& optimized, const CheckOptions& opts) {
  EngineOptions eo;
  eo.bindings = opts.bindings;
  eo.allow_onnxruntime = opts.allow_onnxruntime;
  Engines engines(eo);
  return check_graphs(engines, original, optimized, valid_random_inputs(original, opts.seed, opts.bindings), opts);
}

}  // namespace isomer
