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
                                      const std::vector<std::optional<double>>& steps) {
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
    double worst = 0, scale = 0, err = 0, sum = 0;
    size_t off = 0, compared = 0;
    bool nan_mismatch = false;
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::isnan(a[k]) || std::isnan(b[k])) {
        nan_mismatch = nan_mismatch || std::isnan(a[k]) != std::isnan(b[k]);
        continue;
      }
      sum += (b[k] - a[k]) / s;
      ++compared;
      const double d = std::fabs(a[k] - b[k]);
      err = std::max(err, d);
      scale = std::max(scale, std::fabs(a[k]));
      worst = std::max(worst, d / s);
      off += d / s >= 0.5;
    }
    const double rel = err / std::max(scale, 1e-6);
    r.max_abs_error = std::max(r.max_abs_error, err);
    if (rel >= r.max_rel_error) {
      r.max_rel_error = rel;
      r.worst_output = name;
    }
    const size_t allowed = static_cast<size_t>(kMaxOffFraction * static_cast<double>(a.size()));
    const double bias = compared ? sum / static_cast<double>(compared) : 0;
    const double bias_bound = kMaxBias + 2 / std::sqrt(std::max<double>(static_cast<double>(compared), 1));
    std::ostringstream line;
    line << "output '" << name << "' (quantized, step " << s << "): " << off << " of " << a.size()
         << " elements off by a step or more (at most " << allowed << " allowed), at most " << worst
         << " steps (at most " << kMaxSteps << "), mean difference " << bias << " steps (at most " << bias_bound << ")";
    if (nan_mismatch || worst > kMaxSteps || off > allowed || std::fabs(bias) > bias_bound) {
      if (r.status != CheckResult::Status::Failed) r.reason = line.str() + (nan_mismatch ? "; NaN in different places" : "");
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

}  // namespace isomer
