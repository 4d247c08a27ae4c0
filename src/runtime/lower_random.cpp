// Native lowering of the random operators the optimizer keeps opaque: Dropout in
// training mode (a module exported without .eval()). The optimizer never merges,
// folds or checks them (their outputs differ from run to run), and they used to run
// on ONNX Runtime node by node, a round trip to its helper process each (about 0.2
// ms: 4 of them made a small OPT model 3.7x ONNX Runtime). Each run of the step
// draws anew (kernels/random.h): from the node's seed where it has one, so two
// executables of one model draw the same masks run for run, else from a seed drawn
// when the model is compiled. Forms the kernels do not take are still delegated.
#include <atomic>
#include <cstring>
#include <memory>
#include <random>

#include <onnx/onnx_pb.h>

#include "ir/node.h"
#include "kernels/random.h"
#include "runtime/compiler.h"
#include "runtime/native.h"
#include "runtime/opaque_attr.h"

namespace isomer::runtime {

namespace {

// A scalar operand read when the step runs: a compile-time value, or a buffer of
// a type the step can read (float32, float64, bool).
struct Scalar {
  std::optional<double> fixed;
  int id = -1;
  DType dtype = DType::Undefined;

  double read(const char* p) const {
    if (fixed) return *fixed;
    switch (dtype) {
      case DType::Float32: {
        float f;
        std::memcpy(&f, p, sizeof f);
        return f;
      }
      case DType::Float64: {
        double d;
        std::memcpy(&d, p, sizeof d);
        return d;
      }
      default: return *reinterpret_cast<const uint8_t*>(p) != 0;  // Bool
    }
  }
};

// The scalar at input k of n, or nullopt where it is not one the step can read.
std::optional<Scalar> scalar_operand(Compiler& c, const Node& n, size_t k, double absent) {
  Scalar s;
  if (k >= n.inputs().size() || !n.inputs()[k].present()) {
    s.fixed = absent;
    return s;
  }
  const Value& v = n.inputs()[k];
  const int id = c.id(v);
  const RtValue& r = c.val(id);
  if (num_elements(r.dims) != 1) return std::nullopt;
  if (r.known) {
    s.fixed = r.known->f64_at(0);
    return s;
  }
  if (r.dtype != DType::Float32 && r.dtype != DType::Float64 && r.dtype != DType::Bool) return std::nullopt;
  s.id = c.as_plain(id);
  s.dtype = r.dtype;
  return s;
}

// `n` passed runs_natively: float32 data, and a bool mask if any.
bool lower_dropout(Compiler& c, const Node& n, const onnx::NodeProto& proto) {
  std::optional<Scalar> ratio, training;
  if (const onnx::AttributeProto* is_test = proto_attr(proto, "is_test")) {
    // Opset 6 and before: the ratio an attribute, training when is_test is 0.
    if (is_test->i() != 0) return false;  // the importer makes that the identity
    const onnx::AttributeProto* r = proto_attr(proto, "ratio");
    ratio = Scalar{r ? std::optional<double>(r->f()) : std::optional<double>(0.5)};
    training = Scalar{1.0};
  } else {
    ratio = scalar_operand(c, n, 1, 0.5);
    training = scalar_operand(c, n, 2, 0.0);
  }
  if (!ratio || !training) return false;
  const int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t> dims = c.val(x).dims;
  std::vector<int> reads{x}, writes;
  const int ratio_at = ratio->id >= 0 ? static_cast<int>(reads.size()) : -1;
  if (ratio->id >= 0) reads.push_back(ratio->id);
  const int training_at = training->id >= 0 ? static_cast<int>(reads.size()) : -1;
  if (training->id >= 0) reads.push_back(training->id);
  writes.push_back(c.new_value(DType::Float32, dims, plain_md(dims, dt::f32), n.name()));
  if (n.num_outputs() == 2) {
    auto type = dnnl_type(DType::Bool);
    writes.push_back(c.new_value(DType::Bool, dims, type ? plain_md(dims, *type) : md_t(), n.name()));
  }
  const onnx::AttributeProto* seed_attr = proto_attr(proto, "seed");
  const uint64_t seed = seed_attr ? static_cast<uint64_t>(seed_attr->i()) : std::random_device{}();
  auto runs = std::make_shared<std::atomic<uint64_t>>(0);
  const int64_t count = num_elements(dims);
  const int threads = c.threads();
  const size_t first_write = reads.size();
  const std::string who = describe(n);
  const Scalar r = *ratio, t = *training;
  StepInfo info = step_info(n, "random", "dropout " + to_string(dims) + (seed_attr ? " seeded" : ""),
                            static_cast<double>(count) * 8);
  add_native_step(c, std::move(info), reads, writes, [=](const std::vector<char*>& p) {
    const double rv = r.read(ratio_at >= 0 ? p[ratio_at] : nullptr);
    const bool train = t.read(training_at >= 0 ? p[training_at] : nullptr) != 0;
    const auto* in = reinterpret_cast<const float*>(p[0]);
    auto* out = reinterpret_cast<float*>(p[first_write]);
    bool* mask = writes.size() > 1 ? reinterpret_cast<bool*>(p[first_write + 1]) : nullptr;
    if (!train || rv == 0.0) {  // the identity, every element kept
      if (out != in) std::memcpy(out, in, static_cast<size_t>(count) * sizeof(float));
      if (mask) std::memset(mask, 1, static_cast<size_t>(count));
      return;
    }
    require(rv > 0.0 && rv < 1.0, who + ": ratio " + std::to_string(rv) + " is outside [0, 1)");
    kernels::dropout(in, out, mask, count, rv, kernels::random_key(seed, runs->fetch_add(1)), threads);
  });
  for (size_t k = 0; k < writes.size(); ++k) c.bind(n.output(static_cast<uint32_t>(k)), writes[k]);
  return true;
}

}  // namespace

bool runs_natively(const Node& n) {
  if (n.kind() != NodeKind::Opaque || !n.opaque()->domain.empty() || n.op_type() != "Dropout") return false;
  // What the types tell before shapes are concrete (lower_dropout checks the rest:
  // scalar operands, which ONNX requires).
  const auto& in = n.inputs();
  if (in.empty() || !in[0].present() || in[0].type().dtype != DType::Float32) return false;
  if (n.num_outputs() < 1 || n.num_outputs() > 2) return false;
  // The mask is bool from opset 12 on; opset 6's is of the data's type.
  if (n.num_outputs() == 2 && n.output_types()[1].dtype != DType::Bool) return false;
  for (size_t k = 1; k < in.size() && k < 3; ++k) {
    if (!in[k].present() || in[k].constant()) continue;
    const DType t = in[k].type().dtype;
    if (t != DType::Float32 && t != DType::Float64 && t != DType::Bool) return false;
  }
  return true;
}

bool lower_random(Compiler& c, const Node& n) {
  if (!runs_natively(n)) return false;
  onnx::NodeProto proto;
  if (!proto.ParseFromString(n.opaque()->node_proto)) return false;
  return lower_dropout(c, n, proto);
}

}  // namespace isomer::runtime
