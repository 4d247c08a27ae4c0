#include "parallel/compute.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"
#include "ops/op.h"
#include "parallel/lower.h"

namespace isomer::parallel {

namespace {

double numel(const TensorType& t) {
  std::optional<int64_t> n = num_elements(t.shape);
  return n ? static_cast<double>(*n) : 0;
}

double numel(const std::vector<int64_t>& d) {
  double n = 1;
  for (int64_t x : d) n *= static_cast<double>(x);
  return n;
}

// Bytes one block reads and writes: its inputs' and outputs' blocks.
double block_bytes(const ParallelGraph& pg, int i, const OpConfig& c) {
  double bytes = 0;
  for (int j = 0; j < static_cast<int>(pg.operands(i).size()); ++j)
    if (pg.operands(i)[static_cast<size_t>(j)].kind != Operand::Kind::Absent)
      bytes += pg.in_block_numel(i, c, j) * static_cast<double>(pg.in_elem_size(i, j));
  for (int o = 0; o < static_cast<int>(pg.node(i).num_outputs()); ++o)
    bytes += pg.out_block_numel(i, c, o) * static_cast<double>(pg.elem_size(i, o));
  return bytes;
}

}  // namespace

bool is_view_op(const Node& n) {
  static const char* views[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  return n.kind() == NodeKind::Op &&
         std::any_of(std::begin(views), std::end(views), [&](const char* v) { return n.op_type() == v; });
}

double op_flops(const Node& n) {
  if (n.kind() != NodeKind::Op || n.output_types().empty()) return 0;
  const std::string& op = n.op_type();
  const double out = numel(n.output_types()[0]);
  auto in = [&](size_t i) -> const TensorType& { return n.inputs()[i].type(); };
  if (op == "MatMul") return 2 * out * (in(0).rank() ? static_cast<double>(in(0).shape.back().value) : 1);
  if (op == "Gemm") {
    const bool ta = n.attrs().get_int("transA", 0) != 0;
    return 2 * out * static_cast<double>(in(0).shape[ta ? 0 : 1].value) + out;
  }
  if (op == "Conv") {
    double k = 1;
    const TensorType& w = in(1);
    for (size_t d = 1; d < w.shape.size(); ++d) k *= static_cast<double>(w.shape[d].value);
    return 2 * out * k;
  }
  if (op == "MaxPool" || op == "AveragePool") {
    double k = 1;
    for (int64_t x : n.attrs().get_ints("kernel_shape", {})) k *= static_cast<double>(x);
    return out * k;
  }
  if (op == "GlobalAveragePool" || op == "ReduceSum" || op == "ReduceMean") return numel(in(0));
  if (op == "LayerNormalization") return 8 * out;
  if (op == "Softmax") return 5 * out;
  if (op == "BatchNormalization") return 2 * out;
  static const char* transcendental[] = {"Erf", "Gelu", "Tanh", "Exp", "Log", "Sigmoid", "Pow", "Sqrt"};
  if (std::any_of(std::begin(transcendental), std::end(transcendental), [&](const char* t) { return op == t; }))
    return 8 * out;
  if (n.op()->props.elementwise) return out;
  return 0;  // operators that move data: priced by their bytes
}

double RatesModel::op_ms(const ParallelGraph& pg, int i, const OpConfig& c) {
  const Node& n = pg.node(i);
  if (is_view_op(n)) return 0;
  const double flops = op_flops(n) / static_cast<double>(pg.work_split(i, c));
  const double compute = flops / (rates_.tflops * 1e12);
  const double memory = block_bytes(pg, i, c) / (rates_.memory_gbytes_per_s * 1e9);
  return (std::max(compute, memory) + rates_.launch_us * 1e-6) * 1e3;
}

double RatesModel::copy_ms(double bytes) {
  return (2 * bytes / (rates_.memory_gbytes_per_s * 1e9) + rates_.launch_us * 1e-6) * 1e3;
}

CostModelCompute::CostModelCompute(const std::string& model, const std::string& db, int threads)
    : CostModelCompute(cost::make_cost_model(model, db, threads), cost::peak_rates(db, threads).gbytes_per_s) {}

CostModelCompute::CostModelCompute(std::unique_ptr<cost::CostModel> model, double copy_gbytes_per_s)
    : model_(std::move(model)), copy_gbytes_per_s_(copy_gbytes_per_s) {
  model_->runtime_options().delegate_opaque = false;
}

double CostModelCompute::op_ms(const ParallelGraph& pg, int i, const OpConfig& c) {
  const Node& n = pg.node(i);
  if (n.kind() != NodeKind::Op || is_view_op(n)) return 0;
  // The block as a one-operator graph: inputs at the block's shapes, weights as
  // constants (zeros: the time does not depend on their values).
  GraphBuilder b;
  std::vector<Value> ins;
  std::string key = n.op_type() + std::to_string(n.attrs().hash());
  const Mesh& mesh = pg.mesh();
  for (int j = 0; j < static_cast<int>(n.inputs().size()); ++j) {
    const Value& v = n.inputs()[static_cast<size_t>(j)];
    if (!v.present()) {
      ins.emplace_back();
      key += "|-";
      continue;
    }
    const std::vector<int64_t> local = local_dims(pg.in_dims(i, j), pg.input_layout(i, c, j), mesh);
    key += "|" + to_string(local) + std::to_string(static_cast<int>(v.type().dtype));
    if (const Tensor* t = v.constant()) {
      // Small integer operands (shapes, axes, indices) keep their values.
      if (!is_float(t->dtype()) && t->numel() <= 64) {
        Tensor s = slice_block(*t, pg.input_layout(i, c, j), mesh, 0);
        ins.push_back(b.constant(s));
        for (int64_t x : s.to_i64()) key += "," + std::to_string(x);
      } else {
        ins.push_back(b.constant(Tensor(t->dtype(), local, std::string(static_cast<size_t>(numel(local)) * dtype_size(t->dtype()), '\0'))));
        key += "c";
      }
    } else {
      ins.push_back(b.input("in" + std::to_string(j), {v.type().dtype, make_shape(local)}));
    }
  }
  key += "#" + pg.config_text(i, c);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  std::vector<Value> outs = build_local_op(b, pg, i, c, std::move(ins), 0);
  const double ms = model_->op_ms(*outs.at(0).node);
  memo_.emplace(std::move(key), ms);
  return ms;
}

double CostModelCompute::copy_ms(double bytes) { return 2 * bytes / (copy_gbytes_per_s_ * 1e9) * 1e3 + 2e-3; }

std::unique_ptr<ComputeModel> make_compute_model(const Cluster& c) {
  if (c.device) return std::make_unique<RatesModel>(*c.device);
  return std::make_unique<CostModelCompute>(c.cost_model, c.cost_db, c.threads_per_device);
}

}  // namespace isomer::parallel
