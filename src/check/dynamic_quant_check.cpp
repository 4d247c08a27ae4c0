#include "check/dynamic_quant_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "ir/error.h"

namespace isomer {

namespace {

bool is_dynamic_quantize(const Node& n) {
  return n.kind() == NodeKind::Op && n.op_type() == "DynamicQuantizeLinear" && n.num_outputs() == 3;
}

// ONNX Runtime's DynamicQuantizeLSTM, which quantizes its input and every step's h.
bool is_quantized_recurrence(const Node& n) {
  return n.kind() == NodeKind::Opaque && n.opaque()->domain == "com.microsoft" && n.op_type() == "DynamicQuantizeLSTM";
}

std::vector<NodePtr> nodes_where(const Graph& g, bool (*pred)(const Node&)) {
  std::vector<NodePtr> out;
  for (const NodePtr& n : g.topo_order())
    if (pred(*n)) out.push_back(n);
  return out;
}
std::vector<NodePtr> dynamic_quantizations(const Graph& g) { return nodes_where(g, is_dynamic_quantize); }
std::vector<NodePtr> quantized_recurrences(const Graph& g) { return nodes_where(g, is_quantized_recurrence); }

std::string recurrence_output(size_t k, uint32_t i) {
  return "isomer_dqlstm" + std::to_string(k) + "_" + std::to_string(i);
}

// `g` with each quantization's three outputs, then each quantized recurrence's
// outputs, after its own outputs.
Graph with_quantizations_as_outputs(const Graph& g, const std::vector<NodePtr>& dq, const std::vector<NodePtr>& rq) {
  std::vector<Value> outs = g.outputs();
  std::vector<std::string> names = g.output_names();
  for (size_t k = 0; k < dq.size(); ++k)
    for (uint32_t i = 0; i < 3; ++i) {
      outs.push_back(dq[k]->output(i));
      names.push_back("isomer_dq" + std::to_string(k) + "_" + std::to_string(i));
    }
  for (size_t k = 0; k < rq.size(); ++k)
    for (uint32_t i = 0; i < rq[k]->num_outputs(); ++i) {
      outs.push_back(rq[k]->output(i));
      names.push_back(recurrence_output(k, i));
    }
  return Graph(g.inputs(), std::move(outs), std::move(names), g.info());
}

// `g` cut at its quantizations: each one's outputs become three graph inputs (after
// the model's own), each one's input an output (after the model's own). A quantized
// recurrence's outputs become graph inputs too (after those), read by what follows
// it; the recurrence itself still runs on what comes before, its outputs last.
Graph cut_at_quantizations(const Graph& g, const std::vector<NodePtr>& dq, const std::vector<NodePtr>& rq) {
  std::vector<NodePtr> fed(3 * dq.size()), fed_recurrences;
  std::vector<Value> x(dq.size()), recurrences;
  Graph cut = rebuild(g, [&](const Node& n, const std::vector<Value>& in, GraphBuilder& b) -> std::vector<Value> {
    if (is_quantized_recurrence(n)) {
      const size_t k = std::find_if(rq.begin(), rq.end(), [&](const NodePtr& d) { return d.get() == &n; }) - rq.begin();
      require(k < rq.size(), "a DynamicQuantizeLSTM the check did not list");
      std::vector<Value> own = b.opaque(*n.opaque(), in, n.output_types(), n.name()), outs;
      recurrences.insert(recurrences.end(), own.begin(), own.end());
      for (uint32_t i = 0; i < n.num_outputs(); ++i) {
        outs.push_back(b.input(recurrence_output(k, i), n.output_types()[i]));
        fed_recurrences.push_back(outs.back().node);
      }
      return outs;
    }
    if (!is_dynamic_quantize(n)) return {};
    const size_t k = std::find_if(dq.begin(), dq.end(), [&](const NodePtr& d) { return d.get() == &n; }) - dq.begin();
    require(k < dq.size(), "a DynamicQuantizeLinear the check did not list");
    std::vector<Value> outs;
    for (uint32_t i = 0; i < 3; ++i) {
      outs.push_back(b.input("isomer_dq" + std::to_string(k) + "_" + std::to_string(i), n.output_types()[i]));
      fed[3 * k + i] = outs.back().node;
    }
    x[k] = in[0];
    return outs;
  });
  std::vector<NodePtr> inputs = g.inputs();
  inputs.insert(inputs.end(), fed.begin(), fed.end());
  inputs.insert(inputs.end(), fed_recurrences.begin(), fed_recurrences.end());
  std::vector<Value> outs = cut.outputs();
  std::vector<std::string> names = g.output_names();
  for (size_t k = 0; k < dq.size(); ++k) {
    outs.push_back(x[k]);
    names.push_back("isomer_dq" + std::to_string(k) + "_x");
  }
  for (size_t i = 0; i < recurrences.size(); ++i) {
    outs.push_back(recurrences[i]);
    names.push_back("isomer_dqlstm_" + std::to_string(i) + "_ort");
  }
  return Graph(std::move(inputs), std::move(outs), std::move(names), g.info());
}

double round_half_even(double v) { return std::nearbyint(v); }

// How isomer's quantization (y, scale, zero point) of x differs from DynamicQuantizeLinear
// of ONNX Runtime's x; "" where only by flips at ties, counted in *flips.
std::string quantization_differs(const Tensor& x, const Tensor& y, const Tensor& scale, const Tensor& zero_point,
                                 size_t* flips) {
  const std::vector<double> xs = x.to_f64(), ys = y.to_f64();
  if (xs.size() != ys.size()) return "its input has " + std::to_string(xs.size()) + " elements, its output " +
                                    std::to_string(ys.size());
  double lo = 0, hi = 0, largest = 0;
  for (double v : xs) {
    if (!std::isfinite(v)) return "";  // DynamicQuantizeLinear of Inf or NaN is not defined
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    largest = std::max(largest, std::fabs(v));
  }
  const double s = scale.f64_at(0), zp = zero_point.f64_at(0);
  const double want_s = static_cast<float>(static_cast<float>(hi - lo) / 255.0f);
  char buf[200];
  if (!(std::fabs(s - want_s) <= kScaleSlack * std::max(want_s, 1e-30))) {
    std::snprintf(buf, sizeof buf, "scale %.9g where its input gives %.9g", s, want_s);
    return buf;
  }
  if (!(s > 0)) return "";  // all zero: every element is the zero point, checked below
  const double slack = kTieSlack * largest / s;  // in steps
  const double z = -lo / s;
  const double want_zp = std::clamp(round_half_even(z), 0.0, 255.0);
  if (zp != want_zp && !(std::fabs(zp - want_zp) == 1 && std::fabs(std::fabs(z - std::floor(z)) - 0.5) <= slack)) {
    std::snprintf(buf, sizeof buf, "zero point %g where its input gives %g", zp, want_zp);
    return buf;
  }
  const double qmin = y.dtype() == DType::Int8 ? -128 : 0, qmax = qmin + 255;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i] / s;
    const double want = std::clamp(round_half_even(v) + zp, qmin, qmax);
    if (ys[i] == want) continue;
    // A flip: one step, towards a tie that v lies at (within the slack).
    const double tie = std::min(ys[i], want) - zp + 0.5;
    if (std::fabs(ys[i] - want) == 1 && std::fabs(v - tie) <= slack) {
      ++*flips;
      continue;
    }
    std::snprintf(buf, sizeof buf, "element %zu is %g where its input %.9g (%.6g steps) gives %g", i, ys[i], xs[i], v,
                  want);
    return buf;
  }
  return "";
}

}  // namespace

bool quantizes_dynamically(const Graph& g) {
  return !dynamic_quantizations(g).empty() || !quantized_recurrences(g).empty();
}

CheckResult check_fed_dynamic_quantization(Engines& engines, const Graph& g, const std::vector<Tensor>& inputs,
                                           const std::vector<Tensor>& got, double tolerance) {
  CheckResult r;
  const std::vector<NodePtr> dq = dynamic_quantizations(g), rq = quantized_recurrences(g);
  if (dq.empty() && rq.empty()) {
    r.reason = "no DynamicQuantizeLinear";
    return r;
  }
  const size_t n_out = g.outputs().size();
  size_t n_rec = 0;  // the quantized recurrences' outputs
  for (const NodePtr& n : rq) n_rec += n->num_outputs();
  std::vector<Tensor> iso, ort;
  const Graph ext = with_quantizations_as_outputs(g, dq, rq);
  const Graph cut = cut_at_quantizations(g, dq, rq);
  for (auto [graph, engine, result] : {std::tuple{&ext, Engine::Runtime, &iso}, {&cut, Engine::OnnxRuntime, &ort}}) {
    std::string why;
    Prepared* p = engines.get(*graph, engine, &why);
    try {
      if (p) {
        std::vector<Tensor> feed = inputs;
        if (engine == Engine::OnnxRuntime) feed.insert(feed.end(), iso.begin() + static_cast<long>(n_out), iso.end());
        *result = p->run(feed);
      }
    } catch (const Error& e) {
      why = e.what();
      p = nullptr;
    }
    engines.forget(*graph);
    if (!p) {
      r.reason = engine_name(engine) + " cannot run the model cut at its DynamicQuantizeLinear nodes: " + why;
      return r;
    }
  }
  require(iso.size() == n_out + 3 * dq.size() + n_rec && ort.size() == n_out + dq.size() + n_rec,
          "the cut model's outputs miscounted");
  // Each quantized recurrence within one uint8 step of its outputs' scale of ONNX
  // Runtime's on the same inputs: a rounding flip of one step's h moves what follows
  // by a fraction of such a step (0.05-0.18 of one in the 4 of 40 random 60-step
  // LSTMs of hidden size 128 where one flipped), a wrong kernel by far more.
  for (size_t k = 0, at = 0; k < rq.size(); ++k) {
    const size_t count = rq[k]->num_outputs();
    const auto first = static_cast<long>(3 * dq.size() + at);
    const std::vector<Tensor> mine(iso.begin() + static_cast<long>(n_out) + first,
                                   iso.begin() + static_cast<long>(n_out) + first + static_cast<long>(count));
    const auto theirs_at = ort.begin() + static_cast<long>(n_out + dq.size() + at);
    const std::vector<Tensor> theirs(theirs_at, theirs_at + static_cast<long>(count));
    std::vector<std::string> names;
    for (uint32_t i = 0; i < count; ++i) names.push_back("output " + std::to_string(i));
    const CheckResult c = compare_outputs(theirs, mine, names, std::max(tolerance, 1.0 / 255));
    if (c.status == CheckResult::Status::Failed) {
      r.status = CheckResult::Status::Failed;
      r.reason = describe(*rq[k]) + " computes otherwise than ONNX Runtime on the same inputs: " + c.reason;
      return r;
    }
    at += count;
  }
  size_t flips = 0, elements = 0;
  for (size_t k = 0; k < dq.size(); ++k) {
    const Tensor& y = iso[n_out + 3 * k];
    elements += static_cast<size_t>(y.numel());
    std::string why = quantization_differs(ort[n_out + k], y, iso[n_out + 3 * k + 1], iso[n_out + 3 * k + 2], &flips);
    if (!why.empty()) {
      r.status = CheckResult::Status::Failed;
      r.reason = describe(*dq[k]) + " quantizes what ONNX Runtime computes from isomer's earlier quantizations "
                 "otherwise: " + why;
      return r;
    }
  }
  const std::vector<Tensor> want(ort.begin(), ort.begin() + static_cast<long>(n_out));
  r = compare_outputs(want, got, g.output_names(), tolerance);
  char buf[200];
  std::snprintf(buf, sizeof buf, "ONNX Runtime fed isomer's %zu DynamicQuantizeLinear results: %zu of %zu quantized "
                "elements a rounding tie apart", dq.size(), flips, elements);
  if (!rq.empty())
    std::snprintf(buf + std::strlen(buf), sizeof buf - std::strlen(buf),
                  "; and its %zu DynamicQuantizeLSTM results, each within the tolerance of its own", rq.size());
  r.reason = r.reason.empty() ? buf : std::string(buf) + "; " + r.reason;
  return r;
}

}  // namespace isomer
