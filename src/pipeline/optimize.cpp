#include "pipeline/optimize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "check/open_dims.h"
#include "cost/cost.h"
#include "ir/error.h"
#include "ir/run_limit.h"
#include "mugraph/fuse.h"
#include "pipeline/run_limit_default.h"
#include "runtime/runtime.h"
#include "search/eqsat.h"

namespace isomer {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string human_bytes(size_t n) {
  char buf[32];
  if (n >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", n / 1048576.0);
  else if (n >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", n / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%zu B", n);
  return buf;
}

// The rules that fired and can be switched off (not dce: a graph holds only what
// its outputs need; not the import's constant-to-initializer), in name order.
std::vector<std::string> switchable_rules(const std::map<std::string, size_t>& fired) {
  std::vector<std::string> out;
  for (const auto& [rule, count] : fired)
    if (count > 0 && rule != "dce" && rule != "constant-to-initializer") out.push_back(rule);
  return out;
}

// `opts` with `rules` switched off, each where it belongs (template pass or search rule).
OptimizeOptions without_rules(const OptimizeOptions& opts, const std::vector<std::string>& rules) {
  std::vector<std::string> templates = template_rule_names();
  OptimizeOptions o = opts;
  for (const std::string& rule : rules)
    (std::find(templates.begin(), templates.end(), rule) != templates.end() ? o.passes.disabled
                                                                             : o.search_options.disabled)
        .push_back(rule);
  return o;
}

// On a failed check, finds a rule whose removal makes the check pass.
std::string find_culprit(const Graph& g, const OptimizeOptions& opts, const std::map<std::string, size_t>& fired,
                         Engines& engines, const ModelInputs& inputs, const CheckOptions& co) {
  for (const std::string& rule : switchable_rules(fired)) {
    Graph h = rewrite_graph(g, without_rules(opts, {rule}), nullptr);
    CheckResult r = check_graphs(engines, g, h, inputs, co);
    engines.forget(h);
    if (r.status == CheckResult::Status::Passed) return rule;
  }
  return "";
}

}  // namespace

// NaN weights make a model compute NaN, so there is nothing to optimize or check;
// Inf in a weight tensor is as suspicious. A single-element Inf constant is the
// fill value of an attention mask (Where(mask, x, -inf)) and is legitimate.
namespace {

// The first element of `t` that is NaN, or Inf in a tensor of more than one element,
// read in place (widening a 4 GB model's weights to double took twice their size
// and most of the import's time); -1 when there is none.
int64_t first_nonfinite(const Tensor& t) {
  const char* p = t.bytes().data();
  auto scan = [&](auto widen, size_t size) -> int64_t {
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = widen(p + static_cast<size_t>(i) * size);
      if (std::isnan(v) || (std::isinf(v) && t.numel() > 1)) return i;
    }
    return -1;
  };
  auto bits16 = [](const char* q) {
    uint16_t b;
    std::memcpy(&b, q, 2);
    return b;
  };
  switch (t.dtype()) {
    case DType::Float32:
      return scan([](const char* q) { float f; std::memcpy(&f, q, 4); return static_cast<double>(f); }, 4);
    case DType::Float64: return scan([](const char* q) { double d; std::memcpy(&d, q, 8); return d; }, 8);
    case DType::Float16: return scan([&](const char* q) { return static_cast<double>(half_to_float(bits16(q))); }, 2);
    case DType::BFloat16:
      return scan([&](const char* q) { return static_cast<double>(bfloat16_to_float(bits16(q))); }, 2);
    default: {
      const std::vector<double> v = t.to_f64();
      for (size_t i = 0; i < v.size(); ++i)
        if (std::isnan(v[i]) || (std::isinf(v[i]) && v.size() > 1)) return static_cast<int64_t>(i);
      return -1;
    }
  }
}

}  // namespace

std::string nonfinite_weight(const Graph& g) {
  std::vector<NodePtr> order = g.topo_order();
  for (const NodePtr& n : order) {
    if (n->kind() != NodeKind::Constant || !is_float(n->value()->dtype())) continue;
    const int64_t i = first_nonfinite(*n->value());
    if (i < 0) continue;
    const bool nan = std::isnan(n->value()->f64_at(i));
    std::string what = n->name().empty() ? "a constant" : "initializer '" + n->name() + "'";
    for (const NodePtr& user : order) {
      bool uses = false;
      for (const Value& in : user->inputs()) uses = uses || in.node == n;
      if (uses) {
        what += " (input of node '" + (user->name().empty() ? user->op_type() : user->name()) + "')";
        break;
      }
    }
    return what + " holds " + (nan ? "NaN" : "Inf") + " at element " + std::to_string(i);
  }
  return "";
}

void require_finite_weights(const Graph& g) {
  if (std::string what = nonfinite_weight(g); !what.empty())
    throw Error(what + ": refusing to optimize a model with non-finite weights (--allow-nonfinite accepts it)");
}

Engine target_engine(const std::string& target) {
  if (target == "isomer") return Engine::Runtime;
  if (target == "onnxruntime") return Engine::OnnxRuntime;
  throw Error("unknown target '" + target + "' (choose isomer or onnxruntime)");
}

namespace {

Graph rewrite_with_rules(const Graph& g, const OptimizeOptions& opts, std::map<std::string, size_t>* applied,
                         OptimizeReport* report, Graph* templates_only);

}  // namespace

Graph rewrite_graph(const Graph& g, const OptimizeOptions& in_opts, std::map<std::string, size_t>* applied,
                    OptimizeReport* report, Graph* templates_only) {
  OptimizeOptions opts = in_opts;
  auto& disabled = opts.search_options.disabled;
  const bool fuse = opts.mugraph && std::find(disabled.begin(), disabled.end(), "mugraph-fuse") == disabled.end();
  disabled.erase(std::remove(disabled.begin(), disabled.end(), "mugraph-fuse"), disabled.end());
  Graph out = rewrite_with_rules(g, opts, applied, report, templates_only);
  if (!fuse) return out;
  auto t0 = std::chrono::steady_clock::now();
  mugraph::FuseOptions fo;
  fo.threads = opts.threads;
  fo.search_states = opts.mugraph_states;
  fo.search_seconds = opts.mugraph_seconds;
  fo.measure = !opts.mugraph_untimed;
  fo.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  mugraph::FuseReport fr;
  out = mugraph::fuse_regions(out, fo, &fr);
  if (applied && fr.kept()) (*applied)["mugraph-fuse"] += fr.kept();
  if (report) {
    report->mugraph = fr.to_text();
    report->phase_seconds["mugraph"] = seconds_since(t0);
  }
  return out;
}

namespace {

Graph rewrite_with_rules(const Graph& g, const OptimizeOptions& opts, std::map<std::string, size_t>* applied,
                         OptimizeReport* report, Graph* templates_only) {
  const bool search = opts.search == "backtrack" || opts.search == "eqsat";
  require(opts.search == "none" || opts.search == "templates" || search,
          "unknown search '" + opts.search + "' (choose none, templates, backtrack or eqsat)");
  if (!search && !opts.search_options.disabled.empty())
    throw Error("cannot disable rule '" + opts.search_options.disabled[0] +
                "': no template rule has that name (verified rules only run with --search backtrack or eqsat)");
  if (templates_only) *templates_only = g;
  if (opts.search == "none") return g;
  auto t0 = std::chrono::steady_clock::now();
  PassStats stats;
  Graph out = simplify(g, opts.passes, &stats);
  if (templates_only) *templates_only = out;
  const Graph templates = out;
  const PassStats template_stats = stats;
  if (opts.search == "eqsat") {
    // The search's input leaves the `leave-to-search` fusions to the search, which has
    // them among its rules: MatMul+Add folded into Gemm first hides the product that
    // an RNN step's input shares with the other steps.
    PassOptions deferred = opts.passes;
    deferred.defer_to_search = true;
    stats = PassStats{};
    out = simplify(g, deferred, &stats);
  }
  if (applied) *applied = stats.applied;
  if (report) {
    report->phase_seconds["passes"] = seconds_since(t0);
    report->fold_skipped = template_stats.fold_skipped;
    for (const std::string& line : stats.fold_skipped)
      if (std::find(report->fold_skipped.begin(), report->fold_skipped.end(), line) == report->fold_skipped.end())
        report->fold_skipped.push_back(line);
  }
  if (!search) return out;

  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::string> paths = opts.rule_paths;
  if (paths.empty()) paths.push_back(default_rules_path());
  RuleSet set = load_rule_files(paths);
  for (const std::string& name : opts.search_options.disabled) {
    bool reversed = name.size() > 4 && name.ends_with("-rev");
    bool family = std::any_of(set.rules.begin(), set.rules.end(), [&](const Rule& r) { return r.family() == name; });
    require(set.find(name) || family || (reversed && set.find(name.substr(0, name.size() - 4))),
            "cannot disable rule '" + name + "': neither a template rule nor in the rule files");
  }
  std::vector<Rule> rules = search_rules(set, opts.search_options.disabled);
  // The search prices operators alone; the report's cost model prices whole graphs.
  std::string kind = opts.cost_model == "none" ? "analytic" : opts.cost_model;
  std::unique_ptr<cost::CostModel> model = cost::make_cost_model(kind, opts.cost_db, opts.cost_threads);
  SearchOptions so = opts.search_options;
  model->runtime_options().bindings = so.bindings;
  so.passes = opts.passes;
  if (!so.progress) so.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  SearchStats sst;
  if (opts.search == "eqsat") {
    out = eqsat_search(out, rules, *model, so, &sst);
    // Nothing it found was cheaper (by the minimum gain): the template passes' output
    // as `--search templates` writes it, with the fusions the search was left to make.
    if (sst.kept_input) {
      out = templates;
      if (applied) *applied = template_stats.applied;
    }
  } else {
    out = backtracking_search(out, rules, [&](const Node& n) { return model->op_ms(n); }, so, &sst);
  }
  if (applied)
    for (const auto& [name, n] : sst.rules_applied) (*applied)[name] += n;
  if (report) {
    report->search_stats = sst;
    report->rules_loaded = set.rules.size();
    report->phase_seconds["search"] = seconds_since(t1);
  }
  return out;
}

}  // namespace

GraphSummary summarize(const Graph& g) {
  GraphSummary s;
  s.histogram = g.op_histogram();
  for (const auto& [op, n] : s.histogram) s.nodes += n;
  s.constant_bytes = g.constant_bytes();
  return s;
}

namespace {

// The measured or analytic cost of the original and of what is written (a
// prediction, next to the guard's measurement).
void price(const Graph& g, const Graph& out, const OptimizeOptions& opts, OptimizeReport& rep) {
  std::string why;
  if (!runtime::is_runnable(g, &why) || !runtime::is_runnable(out, &why)) {
    rep.cost_note = why;
    return;
  }
  try {
    RunScope scope(2);  // each graph runs about once as it is profiled
    auto model = cost::make_cost_model(opts.cost_model, opts.cost_db, opts.cost_threads);
    rep.cost_before_ms = model->graph_ms(g);
    rep.cost_after_ms = model->graph_ms(out);
    rep.cost_model = model->name();
  } catch (const Error& e) {  // a cost is a report, never a reason to fail
    rep.cost_note = e.what();
    rep.cost_before_ms = rep.cost_after_ms = -1;
  }
}

}  // namespace

OptimizeResult optimize_graph(const Graph& g, const ImportStats& import_stats, const OptimizeOptions& given) {
  OptimizeOptions opts = given;
  // The model and its rewrites fixed at the inputs' extents once each (open_dims.h).
  FixedGraphs fixed_graphs;
  if (!opts.allow_nonfinite) require_finite_weights(g);
  const Engine target = target_engine(opts.target);
  OptimizeReport rep;
  rep.before.nodes = import_stats.onnx_nodes;
  rep.before.histogram = import_stats.onnx_histogram;
  rep.before.constant_bytes = g.constant_bytes();
  if (rep.before.histogram.empty()) rep.before = summarize(g);
  rep.opaque_nodes = import_stats.opaque_nodes;
  rep.opaque_reasons = import_stats.opaque_reasons;
  rep.inlined_calls = import_stats.inlined_calls;
  rep.frozen_inputs = import_stats.frozen_inputs;
  rep.seed = opts.check_options.seed;
  rep.check_requested = opts.check;
  rep.target = opts.target;
  rep.threads = opts.threads;
  for (const char* phase : {"passes", "search", "check", "guard", "cost"}) rep.phase_seconds[phase] = 0;
  if (opts.mugraph) rep.phase_seconds["mugraph"] = 0;

  // The inputs the check and the guard run both graphs on, made (or given inputs checked
  // against the model) before the search, so that an inputs file that does not fit fails first.
  // Drawn inputs give open dims the extents open_dims.h names (a batch 1, a sequence
  // 64) where the user did not bind them, or 1 where the model refuses those.
  // Inputs with a default value run on it unless the user gives another.
  const auto defaults = input_defaults(g);
  for (const auto& [name, value] : defaults) rep.overridable_inputs.push_back(name);
  ModelInputs inputs = opts.inputs.empty()
                           ? valid_random_inputs(g, opts.check_options.seed,
                                                 importable_drawn_bindings(g, opts.check_options.bindings))
                           : given_inputs(g, opts.inputs, opts.inputs_source.empty() ? "inputs" : opts.inputs_source,
                                          defaults);
  if (opts.inputs.empty()) use_defaults(g, defaults, &inputs);
  // The search prices a model with open dims at those extents too, as the check, the
  // guard and the report run it (it priced every open dim at 1: a sequence of 64 as
  // one token).
  for (const auto& [dim, extent] : inputs.bindings) opts.search_options.bindings.emplace(dim, extent);

  auto t0 = std::chrono::steady_clock::now();
  rep.search = opts.search;
  std::map<std::string, size_t> fired;
  Graph templates_only;
  Graph out = rewrite_graph(g, opts, &fired, &rep, &templates_only);
  rep.optimize_seconds = seconds_since(t0);

  rep.inputs_source = inputs.source;
  rep.input_notes = inputs.notes;
  rep.input_extents = inputs.bindings;
  // The check, the guard and the pricing run the model: a valid one may ask for hours.
  rep.run_limit_seconds = opts.run_limit_seconds > 0   ? opts.run_limit_seconds
                          : opts.run_limit_seconds < 0 ? 0
                                                       : default_run_limit_seconds(g);
  RunLimit run_limit(rep.run_limit_seconds, opts.run_limit_seconds > 0 ? "--run-limit"
                                                                       : "set from the model's size; --run-limit changes it");
  EngineOptions eo;
  eo.threads = opts.threads;
  eo.bindings = inputs.bindings;
  // The runtime runs both graphs as it will run them at these inputs: specialised to
  // their extents (the written model keeps its open dims).
  eo.input_shapes = open_input_shapes(g, inputs.tensors);
  eo.allow_onnxruntime = opts.check_options.allow_onnxruntime;
  eo.processor_clock = true;     // the guard's timings on either engine (engines.h)
  eo.one_cpu_per_thread = true;  // and on isomer's runtime one thread per CPU
  Engines engines(eo);
  for (const auto& [engine, factory] : opts.engine_factories) engines.set_factory(engine, factory);
  CheckOptions co = opts.check_options;
  co.target = target;
  co.bindings = inputs.bindings;

  if (opts.check) {
    auto t1 = std::chrono::steady_clock::now();
    rep.check = check_graphs(engines, g, out, inputs, co);
    if (rep.check.status == CheckResult::Status::Failed) rep.culprit = find_culprit(g, opts, fired, engines, inputs, co);
    rep.check_seconds = rep.phase_seconds["check"] = seconds_since(t1);
    // The guard times on isomer's runtime and ONNX Runtime with its optimizations;
    // the check's plain session would hold the model's weights while they run (a
    // candidate the guard has checked again prepares it anew).
    engines.forget(Engine::OnnxRuntimePlain);
  } else {
    rep.check.status = CheckResult::Status::Skipped;
    rep.check.reason = "switched off with --no-check";
  }

  std::map<std::string, size_t> written_rules = fired;
  if (opts.check && rep.check.status == CheckResult::Status::Skipped && !same_graph(g, out)) {
    // The check was asked for but could not compare the graphs, so nothing vouches
    // for the rewrite's outputs or its speed: fail closed and keep the original.
    // --no-check writes the rewritten graph unchecked.
    rep.guard.status = "skipped";
    rep.guard.kept = "original";
    rep.guard.reason = "the check could not run, so the original is kept (--no-check writes the rewrite unchecked)";
    rep.guard.graph = g;
    out = g;
    written_rules.clear();
  } else if (rep.check.status == CheckResult::Status::Failed && rep.check.engine_fault) {
    // The rewrite is right but the target engine computes it wrongly: writing it would
    // give users wrong outputs there, so the original is kept (and the fault named).
    rep.guard.status = "skipped";
    rep.guard.kept = "original";
    rep.guard.reason = rep.check.reason;
    if (!rep.culprit.empty()) rep.guard.reason += "; rule '" + rep.culprit + "' exposes it";
    rep.guard.reason += ": the original is kept";
    rep.guard.graph = g;
    out = g;
    written_rules.clear();
  } else if (rep.check.status != CheckResult::Status::Failed) {
    auto t2 = std::chrono::steady_clock::now();
    // Rewrites without some rules, each with the rules that made it.
    std::map<std::vector<std::string>, std::map<std::string, size_t>> applied_without;
    GuardContext ctx;
    ctx.engines = &engines;
    ctx.inputs = &inputs;
    ctx.rules = switchable_rules(fired);
    ctx.rewrite = [&](const std::vector<std::string>& disabled) {
      std::map<std::string, size_t> applied;
      Graph h = rewrite_graph(g, without_rules(opts, disabled), &applied);
      applied_without[disabled] = applied;
      return h;
    };
    if (opts.search == "backtrack" || opts.search == "eqsat") ctx.templates_only = templates_only;
    if (opts.check)
      ctx.check = [&](const Graph& candidate) {
        auto tc = std::chrono::steady_clock::now();
        CheckResult r = check_graphs(engines, g, candidate, inputs, co);
        rep.phase_seconds["check"] += seconds_since(tc);
        rep.check_seconds = rep.phase_seconds["check"];
        return r;
      };
    GuardOptions go = opts.guard_options;
    go.enabled = opts.guard;
    go.target = target;
    const double check_before = rep.phase_seconds["check"];
    rep.guard = run_guard(g, out, ctx, go);
    out = rep.guard.graph;
    if (rep.guard.kept == "original") {
      written_rules.clear();
    } else if (rep.guard.kept == "templates") {
      rewrite_graph(g, [&] {
        OptimizeOptions o = opts;
        o.search = "templates";
        o.search_options.disabled.clear();
        return o;
      }(), &written_rules);
    } else if (rep.guard.kept == "reverted") {
      std::vector<std::string> disabled;
      for (const RevertedRule& r : rep.guard.reverted) disabled.push_back(r.rule);
      written_rules = applied_without[disabled];
    }
    rep.phase_seconds["guard"] = seconds_since(t2) - (rep.phase_seconds["check"] - check_before);
  }
  rep.rules_applied = written_rules;
  // What the import already did: ONNX Constant nodes became constants (exported as
  // initializers), and nodes no output depends on were never part of the graph.
  auto constants = import_stats.onnx_histogram.find("Constant");
  size_t constant_nodes = constants == import_stats.onnx_histogram.end() ? 0 : constants->second;
  if (constant_nodes) rep.rules_applied["constant-to-initializer"] += constant_nodes;
  size_t imported_ops = g.num_ops();
  if (import_stats.onnx_nodes > constant_nodes + imported_ops)
    rep.rules_applied["dce"] += import_stats.onnx_nodes - constant_nodes - imported_ops;
  rep.after = summarize(out);
  // The check and the guard are done: what they prepared (compiled graphs, ONNX
  // Runtime sessions, each with its own copy of the weights) goes before pricing
  // compiles the graphs again.
  engines.clear();
  if (opts.cost_model != "none") {
    auto t3 = std::chrono::steady_clock::now();
    // Priced as they ran, at the inputs' extents.
    price(with_input_shapes(g, eo.input_shapes).value_or(g), with_input_shapes(out, eo.input_shapes).value_or(out),
          opts, rep);
    rep.phase_seconds["cost"] = seconds_since(t3);
  }
  rep.run_limit_exceeded = RunLimit::exceeded();
  return {std::move(out), std::move(rep)};
}

OptimizeReport optimize_file(const std::string& in_path, const std::string& out_path, const OptimizeOptions& opts) {
  ImportStats stats;
  auto t0 = std::chrono::steady_clock::now();
  Graph g = import_onnx_file(in_path, opts.import, &stats);
  const double import_seconds = seconds_since(t0);
  const bool large = g.constant_bytes() >= kLargeGraphBytes;
  if (large)
    std::fprintf(stderr, "isomer: imported %s in %.1f s (%.1f MB of weights)\n", in_path.c_str(), import_seconds,
                 static_cast<double>(g.constant_bytes()) / 1e6);
  if (!opts.allow_nonfinite) {
    try {
      require_finite_weights(g);
    } catch (const Error& e) {
      throw Error(in_path + ": " + e.what());
    }
  }
  OptimizeResult r = optimize_graph(g, stats, opts);
  r.report.phase_seconds["import"] = import_seconds;
  r.report.input_path = in_path;
  r.report.output_path = out_path;
  if (r.report.check.status == CheckResult::Status::Failed && !r.report.check.engine_fault) {
    std::string msg = in_path + ": the optimized model does not match the original (" + r.report.check.reason + ")";
    if (!r.report.culprit.empty()) msg += "; rule '" + r.report.culprit + "' is responsible";
    throw Error(msg + "; nothing was written");
  }
  if (!out_path.empty()) {
    if (large) std::fprintf(stderr, "isomer: writing %s\n", out_path.c_str());
    auto t1 = std::chrono::steady_clock::now();
    r.report.written = export_onnx_file(r.graph, out_path).describe();
    r.report.phase_seconds["write"] = seconds_since(t1);
  }
  return r.report;
}

std::string OptimizeReport::to_json() const {
  nlohmann::ordered_json j;
  j["input"] = input_path;
  j["output"] = output_path;
  j["nodes_before"] = before.nodes;
  j["nodes_after"] = after.nodes;
  j["weight_bytes_before"] = before.constant_bytes;
  j["weight_bytes_after"] = after.constant_bytes;
  j["op_types_before"] = before.histogram;
  j["op_types_after"] = after.histogram;
  j["opaque_nodes"] = opaque_nodes;
  j["opaque_reasons"] = opaque_reasons;
  j["inlined_calls"] = inlined_calls;
  j["frozen_inputs"] = frozen_inputs;
  j["overridable_inputs"] = overridable_inputs;
  j["optimize_seconds"] = optimize_seconds;
  j["cost_model"] = cost_model;
  j["cost_before_ms"] = cost_before_ms >= 0 ? nlohmann::ordered_json(cost_before_ms) : nlohmann::ordered_json();
  j["cost_after_ms"] = cost_after_ms >= 0 ? nlohmann::ordered_json(cost_after_ms) : nlohmann::ordered_json();
  if (!cost_note.empty()) j["cost_note"] = cost_note;
  j["check"] = check.status_name();
  j["check_reason"] = check.reason;
  j["check_method"] = check.method;
  j["check_engine_fault"] = check.engine_fault;
  j["check_seconds"] = check_seconds;
  j["check_seed"] = seed;
  j["max_abs_error"] = check.max_abs_error;
  j["max_rel_error"] = check.max_rel_error;
  if (!culprit.empty()) j["culprit_rule"] = culprit;
  j["inputs"] = inputs_source;
  j["input_notes"] = input_notes;
  j["input_extents"] = input_extents;
  j["target"] = target;
  j["threads"] = threads;
  auto ms_or_null = [](double ms) { return ms >= 0 ? nlohmann::ordered_json(ms) : nlohmann::ordered_json(); };
  j["latency_before_ms"] = ms_or_null(guard.before_ms);
  j["latency_after_ms"] = ms_or_null(guard.after_ms);
  j["kept"] = guard.kept;
  j["reverted"] = nlohmann::ordered_json::array();
  for (const RevertedRule& r : guard.reverted) j["reverted"].push_back({{"rule", r.rule}, {"slowdown", r.slowdown}});
  j["guard"] = guard.status;
  j["guard_engine"] = guard.engine == Engine::OnnxRuntime ? "onnxruntime" : "isomer";
  j["guard_reason"] = guard.reason;
  const auto& cmp = guard.comparison;
  j["guard_ratio"] = cmp ? nlohmann::ordered_json(cmp->ratio) : nlohmann::ordered_json();
  j["guard_noise"] = cmp ? nlohmann::ordered_json(cmp->noise) : nlohmann::ordered_json();
  j["guard_load_average"] = guard.load_average >= 0 ? nlohmann::ordered_json(guard.load_average) : nlohmann::ordered_json();
  j["guard_overloaded"] = guard.overloaded();
  j["guard_rounds"] = cmp ? nlohmann::ordered_json(cmp->rounds) : nlohmann::ordered_json();
  j["guard_openmp_waits"] = guard.openmp_waits.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(guard.openmp_waits);
  j["guard_runtime_clock"] =
      guard.runtime_clock.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(guard.runtime_clock);
  j["guard_runtime_threads"] =
      guard.runtime_threads.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(guard.runtime_threads);
  j["guard_onnxruntime_clock"] =
      guard.onnxruntime_clock.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(guard.onnxruntime_clock);
  j["guard_comparisons"] = guard.comparisons;
  // The confirmation on the other engine (pipeline/guard.h).
  j["guard_confirm"] = guard.confirm_status;
  j["guard_confirm_engine"] = guard.confirm_engine == Engine::OnnxRuntime ? "onnxruntime" : "isomer";
  j["guard_confirm_reason"] = guard.confirm_reason;
  const auto& ccmp = guard.confirm_comparison;
  j["guard_confirm_before_ms"] = ccmp ? nlohmann::ordered_json(ccmp->before_ms) : nlohmann::ordered_json();
  j["guard_confirm_after_ms"] = ccmp ? nlohmann::ordered_json(ccmp->after_ms) : nlohmann::ordered_json();
  j["guard_confirm_ratio"] = ccmp ? nlohmann::ordered_json(ccmp->ratio) : nlohmann::ordered_json();
  j["guard_confirm_noise"] = ccmp ? nlohmann::ordered_json(ccmp->noise) : nlohmann::ordered_json();
  j["guard_confirm_verdict"] = ccmp ? nlohmann::ordered_json(ccmp->verdict_text()) : nlohmann::ordered_json();
  j["guard_log"] = guard.log;
  j["phase_seconds"] = phase_seconds;
  j["written"] = written;
  j["rules_applied"] = rules_applied;
  j["search"] = search;
  if (!mugraph.empty()) j["mugraph"] = mugraph;
  j["run_limit_seconds"] = run_limit_seconds > 0 ? nlohmann::ordered_json(run_limit_seconds) : nlohmann::ordered_json();
  j["run_limit_exceeded"] = run_limit_exceeded;
  j["fold_skipped"] = fold_skipped;
  if (search == "backtrack" || search == "eqsat") {
    j["search_rules_loaded"] = rules_loaded;
    search_stats.to_json(j);
  }
  // Names in it are the model's bytes, which need not be UTF-8 (ONNX Runtime runs such a
  // model): JSON cannot hold them, so they are written with U+FFFD in their place.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string OptimizeReport::to_text() const {
  std::ostringstream out;
  std::map<std::string, std::pair<size_t, size_t>> rows;
  for (const auto& [op, n] : before.histogram) rows[op].first = n;
  for (const auto& [op, n] : after.histogram) rows[op].second = n;
  char line[160];
  std::snprintf(line, sizeof line, "  %-28s %8s %8s\n", "operator", "before", "after");
  out << line;
  for (const auto& [op, c] : rows) {
    std::snprintf(line, sizeof line, "  %-28s %8zu %8zu%s\n", op.c_str(), c.first, c.second,
                  c.first != c.second ? "  *" : "");
    out << line;
  }
  std::snprintf(line, sizeof line, "  %-28s %8zu %8zu\n", "total nodes", before.nodes, after.nodes);
  out << line;
  std::snprintf(line, sizeof line, "  %-28s %8s %8s\n", "weights", human_bytes(before.constant_bytes).c_str(),
                human_bytes(after.constant_bytes).c_str());
  out << line;
  if (inlined_calls) out << "  (" << inlined_calls << " call(s) of model-local functions inlined)\n";
  // ONNX Runtime warns of them too: nothing that reads them folds, and the runtime's
  // kernels that want constant weights (Conv's) take its reference path.
  if (!overridable_inputs.empty())
    out << "  (" << overridable_inputs.size() << " input(s) with a default value kept as inputs the user may feed, "
        << "not folded: --fold-overridable-inputs folds them)\n";
  if (!frozen_inputs.empty()) {
    out << "  (" << frozen_inputs.size() << " overridable input(s) frozen to their initializer, no longer inputs:";
    for (size_t i = 0; i < frozen_inputs.size() && i < 10; ++i) out << (i ? ", " : " ") << frozen_inputs[i];
    if (frozen_inputs.size() > 10) out << ", ... and " << frozen_inputs.size() - 10 << " more";
    out << ")\n";
  }
  if (opaque_nodes) out << "  (" << opaque_nodes << " operator(s) kept as opaque nodes)\n";
  // Why, node by node (the importer's words, as `isomer show` prints them); a few.
  constexpr size_t kShown = 10;
  for (size_t i = 0; i < opaque_reasons.size() && i < kShown; ++i) out << "    opaque: " << opaque_reasons[i] << "\n";
  if (opaque_reasons.size() > kShown) out << "    ... and " << opaque_reasons.size() - kShown << " more\n";
  out << "\nrules applied:\n";
  if (rules_applied.empty()) out << "  (none)\n";
  for (const auto& [rule, n] : rules_applied) {
    std::snprintf(line, sizeof line, "  %-28s %8zu\n", rule.c_str(), n);
    out << line;
  }
  for (size_t i = 0; i < fold_skipped.size() && i < kShown; ++i) out << "  fold skipped: " << fold_skipped[i] << "\n";
  if (fold_skipped.size() > kShown) out << "  ... and " << fold_skipped.size() - kShown << " more folds skipped\n";
  std::snprintf(line, sizeof line, "\noptimized in %.3f s\n", optimize_seconds);
  out << line;
  if (search == "backtrack" || search == "eqsat") out << search_stats.to_text(rules_loaded);
  if (cost_before_ms >= 0 && cost_after_ms >= 0) {
    std::snprintf(line, sizeof line, "predicted on isomer's runtime (%s cost): %.3f ms -> %.3f ms (%.2fx)\n",
                  cost_model.c_str(), cost_before_ms, cost_after_ms,
                  cost_after_ms > 0 ? cost_before_ms / cost_after_ms : 1.0);
    out << line;
  } else if (!cost_note.empty()) {
    out << "predicted: not priced (" << cost_note << ")\n";
  }
  if (!mugraph.empty()) out << mugraph;
  out << "inputs: " << inputs_source;
  if (!input_extents.empty()) out << ", open dims at " << extents_text(input_extents);
  out << "\n";
  for (const std::string& note : input_notes) out << "  " << note << "\n";
  out << "check: " << check.status_name();
  if (check.status != CheckResult::Status::Skipped) {
    std::snprintf(line, sizeof line, " (%s, max abs error %.3g, max rel error %.3g)", check.method.c_str(),
                  check.max_abs_error, check.max_rel_error);
    out << line;
  }
  if (!check.reason.empty()) out << ": " << check.reason;
  out << "\n";
  const std::string engine = target == "onnxruntime" ? "ONNX Runtime" : "isomer's runtime";
  out << "target: " << engine << ", " << (threads > 1 ? std::to_string(threads) + " threads" : threads == 1 ? "1 thread" : "all threads") << "\n";
  out << "guard: " << guard.status;
  if (!guard.reason.empty()) out << " (" << guard.reason << ")";
  out << "\n";
  if (guard.overloaded()) {
    std::snprintf(line, sizeof line, "  the machine was busy (load average %.1f on %u cores): its timings are noisy; ",
                  guard.load_average, guard.cores);
    out << line << "optimize again on a quiet machine for a firmer verdict\n";
  }
  for (const std::string& entry : guard.log) out << "  " << entry << "\n";
  if (guard.before_ms >= 0 && guard.after_ms >= 0) {
    std::snprintf(line, sizeof line, "latency on %s: %.3f ms -> %.3f ms", engine_name(guard.engine).c_str(), guard.before_ms,
                  guard.after_ms);
    out << line;
    if (guard.comparison) out << " (" << guard.comparison->paired_verdict_text() << ")";
    out << "\n";
  }
  if (guard.status == "measured") {
    const std::string other = engine_name(guard.confirm_engine);
    if (guard.confirm_comparison && (guard.confirm_status == "confirmed" || guard.confirm_status == "slower")) {
      const SpeedComparison& c = *guard.confirm_comparison;
      std::snprintf(line, sizeof line, "%s on %s: %.3f ms -> %.3f ms (%s)",
                    guard.confirm_status == "confirmed" ? "confirmed" : "slower", other.c_str(), c.before_ms,
                    c.after_ms, c.paired_verdict_text().c_str());
      out << line << "\n";
    } else if (guard.confirm_status == "skipped") {
      out << "not confirmed on " << other << ": " << guard.confirm_reason << "\n";
    } else if (guard.confirm_status == "off") {
      out << "not confirmed on " << other << ": switched off\n";
    }
  }
  if (!run_limit_exceeded.empty())
    out << "run limit: " << run_limit_exceeded << ": the runs after it were skipped\n";
  out << "kept: " << guard.kept << "\n";
  // Rules the guard took out while bisecting a slowdown; written only when the model
  // written is the rewrite without them.
  out << "reverted:";
  if (guard.reverted.empty()) out << " (none)";
  else if (guard.kept != "reverted") out << " none written (" << guard.kept << " kept); tried without";
  for (size_t i = 0; i < guard.reverted.size(); ++i) {
    std::snprintf(line, sizeof line, "%s %s (made it %.2fx slower)", i ? "," : "", guard.reverted[i].rule.c_str(),
                  guard.reverted[i].slowdown);
    out << line;
  }
  out << "\nphases:";
  const char* sep = "";
  for (const char* phase : {"import", "passes", "search", "mugraph", "check", "guard", "cost", "write"}) {
    const bool always = std::string(phase) != "mugraph" && std::string(phase) != "import" && std::string(phase) != "write";
    auto it = phase_seconds.find(phase);
    if (it == phase_seconds.end() && !always) continue;
    std::snprintf(line, sizeof line, "%s %s %.3f s", sep, phase, it == phase_seconds.end() ? 0.0 : it->second);
    out << line;
    sep = ",";
  }
  out << "\n";
  if (!written.empty()) out << "written: " << written << "\n";
  return out.str();
}

}  // namespace isomer
