#include "check/quant_check.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace isomer {

namespace {

bool is_quantizing(const Node& n) {
  static const char* const kOps[] = {"QuantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
                                     "QLinearAdd",     "QLinearMul",            "QLinearConcat", "QLinearSigmoid",
                                     "QLinearLeakyRelu", "QLinearAveragePool",  "QLinearGlobalAveragePool",
                                     "DynamicQuantizeMatMul", "QGemm", "QAttention"};
  for (const char* op : kOps)
    if (n.op_type() == op) return true;
  return false;
}

bool is_view(const Node& n) {
  static const char* const kViews[] = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"};
  if (n.kind() != NodeKind::Op) return false;
  for (const char* op : kViews)
    if (n.op_type() == op) return true;
  return false;
}

std::optional<double> step_of(Value v) {
  if (v.type().dtype == DType::UInt8 || v.type().dtype == DType::Int8) return 1.0;
  while (v.present() && is_view(*v.node)) v = v.node->inputs()[0];
  if (!v.present() || v.node->op_type() != "DequantizeLinear") return std::nullopt;
  const Tensor* s = v.node->inputs()[1].constant();
  if (!s || s->numel() != 1) return std::nullopt;
  const double step = std::fabs(s->f64_at(0));
  if (!(step > 0) || !std::isfinite(step)) return std::nullopt;
  return step;
}

// What one quantized output's differences are, in steps, from one pass over it. NaN
// is compared by place; equal infinities agree, unequal ones make the output
// unbounded. `slope` is how much `got - want` grows with `want`, both in steps: the
// least-squares slope of the difference on the centred reference, with its standard
// error. A wrong scale makes the difference proportional to the value (a slope of its
// relative error); rounding drift does not.
struct StepStats {
  size_t compared = 0, off = 0;
  double worst = 0, mean = 0, max_abs = 0, max_want = 0;
  bool nan_mismatch = false, unbounded = false;
  bool has_trend = false;
  double slope = 0, standard_error = 0;
};

StepStats step_stats(const std::vector<double>& want, const std::vector<double>& got, double step) {
  StepStats st;
  double sw = 0, sd = 0, sww = 0, swd = 0, sdd = 0;
  for (size_t k = 0; k < want.size() && k < got.size(); ++k) {
    if (std::isnan(want[k]) || std::isnan(got[k])) {
      st.nan_mismatch = st.nan_mismatch || std::isnan(want[k]) != std::isnan(got[k]);
      continue;
    }
    const double diff = got[k] - want[k];
    if (!std::isfinite(diff)) {
      st.unbounded = st.unbounded || want[k] != got[k];
      continue;
    }
    const double w = want[k] / step, d = diff / step;
    ++st.compared;
    st.worst = std::max(st.worst, std::fabs(d));
    st.off += std::fabs(d) >= 0.5;
    st.max_abs = std::max(st.max_abs, std::fabs(diff));
    st.max_want = std::max(st.max_want, std::fabs(want[k]));
    sw += w;
    sd += d;
    sww += w * w;
    swd += w * d;
    sdd += d * d;
  }
  const double n = static_cast<double>(st.compared);
  if (n == 0) return st;
  st.mean = sd / n;
  // Centred sums; the values are a few hundred steps at most, so doubles hold them exactly enough.
  const double cww = sww - sw * sw / n, cwd = swd - sw * sd / n, cdd = sdd - sd * sd / n;
  if (n < kMinForTrend || !(cww > 0)) return st;
  st.slope = cwd / cww;
  st.standard_error = std::sqrt(std::max(0.0, cdd - st.slope * cwd) / (n - 2)) / std::sqrt(cww);
  st.has_trend = true;
  return st;
}

}  // namespace

bool quantizes(const Graph& g) {
  for (const NodePtr& n : g.topo_order())
    if (is_quantizing(*n)) return true;
  return false;
}

std::vector<std::optional<double>> output_quant_steps(const Graph& g) {
  std::vector<std::optional<double>> steps;
  for (const Value& v : g.outputs()) steps.push_back(step_of(v));
  return steps;
}

double rounding_spread_tolerance(const std::vector<Tensor>& a, const std::vector<Tensor>& b,
                                 const std::vector<std::string>& names, double tolerance) {
  if (a.size() != b.size()) return tolerance;
  const CheckResult spread = compare_outputs(a, b, names, 0);
  return std::max(tolerance, kSpreadFactor * spread.max_rel_error);
}

CheckResult compare_quantized_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                                      const std::vector<std::string>& names, double tolerance,
                                      const std::vector<std::optional<double>>& steps,
                                      const std::vector<StepBounds>& bounds) {
  // The outputs without a step, as usual; those with one below.
  std::vector<Tensor> fw, fg;
  std::vector<std::string> fn;
  for (size_t i = 0; i < want.size(); ++i)
    if (i >= steps.size() || !steps[i]) {
      fw.push_back(want[i]);
      fg.push_back(got[i]);
      fn.push_back(i < names.size() ? names[i] : std::to_string(i));
    }
  CheckResult r = compare_outputs(fw, fg, fn, tolerance);
  std::ostringstream bound;
  for (size_t i = 0; i < want.size() && i < steps.size(); ++i) {
    if (!steps[i]) continue;
    const std::string name = i < names.size() ? names[i] : std::to_string(i);
    if (want[i].dims() != got[i].dims() || want[i].dtype() != got[i].dtype()) {
      r.status = CheckResult::Status::Failed;
      r.reason = "output '" + name + "' is " + to_string(got[i].type()) + ", expected " + to_string(want[i].type());
      return r;
    }
    const std::vector<double> a = want[i].to_f64(), b = got[i].to_f64();
    const double s = *steps[i];
    const StepStats st = step_stats(a, b, s);
    const double rel = st.max_abs / std::max(st.max_want, 1e-6);
    r.max_abs_error = std::max(r.max_abs_error, st.max_abs);
    if (rel >= r.max_rel_error) {
      r.max_rel_error = rel;
      r.worst_output = name;
    }
    const StepBounds bound_i = i < bounds.size() ? bounds[i] : StepBounds{};
    const size_t allowed = static_cast<size_t>(bound_i.off_fraction * static_cast<double>(a.size()));
    const double bias_bound = kMaxBias + 2 / std::sqrt(std::max<double>(static_cast<double>(st.compared), 1));
    const double slope_bound = kMaxSlope + 4 * st.standard_error;
    std::ostringstream line;
    line << "output '" << name << "' (quantized, step " << s << "): " << st.off << " of " << a.size()
         << " elements off by a step or more (at most " << allowed << " allowed"
         << (st.has_trend ? " without a trend" : "") << "), at most " << st.worst << " steps (at most "
         << bound_i.max_steps << "), mean difference " << st.mean << " steps (at most " << bias_bound << ")";
    if (st.has_trend) line << ", trend " << st.slope << " steps a step (at most " << slope_bound << ")";
    if (st.unbounded) line << ", infinite where the other is not";
    const bool scaled = st.has_trend && std::fabs(st.slope) > slope_bound;
    // Many elements a step or two off are rounding drift when the differences have
    // neither a direction nor a trend with the value; where there are too few
    // elements to tell a trend, their count decides.
    const bool too_many = st.off > allowed && (!st.has_trend || st.worst >= 2.5);
    if (st.nan_mismatch || st.unbounded || st.worst > bound_i.max_steps || too_many || scaled ||
        std::fabs(st.mean) > bias_bound) {
      if (r.status != CheckResult::Status::Failed)
        r.reason = line.str() + (st.nan_mismatch ? "; NaN in different places" : "");
      r.status = CheckResult::Status::Failed;
    } else {
      bound << (bound.tellp() > 0 ? "; " : "") << line.str();
    }
  }
  if (r.status == CheckResult::Status::Passed) {
    const std::string b = bound.str();
    if (!b.empty()) r.reason = r.reason.empty() ? b : r.reason + "; " + b;
  } else if (r.status == CheckResult::Status::Skipped && want.size() != fw.size() && r.reason.find("NaN") != std::string::npos) {
    r.status = CheckResult::Status::Passed;  // the float outputs were all NaN, the quantized ones compared
  }
  return r;
}

CheckResult compare_quantized_with_references(const std::vector<Tensor>& deployed,
                                              const std::vector<Tensor>& as_written,
                                              const std::vector<Tensor>& got, const std::vector<std::string>& names,
                                              double tolerance, const std::vector<std::optional<double>>& steps,
                                              bool* against_as_written) {
  *against_as_written = false;
  if (as_written.size() != deployed.size()) return compare_quantized_outputs(deployed, got, names, tolerance, steps);
  // The bounds widen to what the two references differ by, with room.
  std::vector<StepBounds> bounds(deployed.size());
  for (size_t i = 0; i < deployed.size() && i < steps.size(); ++i) {
    if (!steps[i] || deployed[i].dims() != as_written[i].dims()) continue;
    // NaN and infinities are left out: the comparison itself holds those.
    const std::vector<double> a = deployed[i].to_f64();
    const StepStats st = step_stats(a, as_written[i].to_f64(), *steps[i]);
    const double n = static_cast<double>(std::max<size_t>(a.size(), 1));
    bounds[i].off_fraction = std::min(1.0, std::max(kMaxOffFraction, kSpreadFactor * static_cast<double>(st.off) / n));
    bounds[i].max_steps = std::max(kMaxSteps, std::ceil(kSpreadFactor * st.worst));
  }
  CheckResult c = compare_quantized_outputs(deployed, got, names, tolerance, steps, bounds);
  if (c.status != CheckResult::Status::Failed) return c;
  CheckResult p = compare_quantized_outputs(as_written, got, names, tolerance, steps, bounds);
  if (p.status != CheckResult::Status::Passed) return c;
  *against_as_written = true;
  p.reason += (p.reason.empty() ? "" : "; ") + std::string("with its optimizations on: ") + c.reason;
  return p;
}

}  // namespace isomer
