// A constant Add or Mul between a DequantizeLinear and a QuantizeLinear as one
// step. quantize_static writes a linear layer's bias and attention's 1/sqrt(d)
// scaling in float between QDQ pairs:
//
//   q_y = Q(DQ(q_x) + b)       (b a constant scalar, or one per last-axis column)
//   q_y = Q(DQ(q_x) * k)
//
// which ran as three steps (dequantize, pointwise, quantize) over a tensor of a
// few kilobytes. The step here computes each element as those three do and in the
// same roundings: the dequantized value, then the sum or product, then the
// quantization, each in its own loop over a block in L1 (so that no FMA contracts
// the product with the sum: rounded once where the three steps round twice).
#include <algorithm>

#include "kernels/parallel.h"
#include "runtime/lower_quant.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

constexpr int64_t kBlockElements = 1024;

// The constant of `op` other than `x`, as float32 values that broadcast to dims
// along the last axis only (one value, or one per column); nullopt otherwise.
std::optional<std::vector<float>> column_constant(Compiler& c, const Node& op, const Value& x,
                                                  const std::vector<int64_t>& dims) {
  const Value& k = op.inputs()[op.inputs()[0] == x ? 1 : 0];
  const Tensor* t = k == x ? nullptr : c.peek_known(k);
  if (!t || t->dtype() != DType::Float32 || dims.empty() || t->rank() > static_cast<int64_t>(dims.size()))
    return std::nullopt;
  const int64_t n = t->numel();
  if (n != 1) {
    if (t->dims().back() != dims.back() || n != dims.back()) return std::nullopt;
  }
  std::vector<float> v;
  for (double d : t->to_f64()) v.push_back(static_cast<float>(d));
  return v;
}

}  // namespace

bool lower_qdq_affine(Compiler& c, const Node& dq) {
  if (!c.opts().fuse) return false;
  const Value out = dq.output(0);
  const DType xt = dq.inputs()[0].type().dtype;
  const Node* op = c.sole_consumer(out);
  if ((xt != DType::UInt8 && xt != DType::Int8) || !op || op->kind() != NodeKind::Op || !c.takeable(*op) ||
      (op->op_type() != "Add" && op->op_type() != "Mul") || op->inputs().size() != 2 ||
      op->output_types()[0].dtype != DType::Float32)
    return false;
  const Node* q = c.sole_consumer(op->output(0));
  if (!q || q->op_type() != "QuantizeLinear" || !c.takeable(*q) || q->inputs()[0] != op->output(0)) return false;
  const DType yt = q->output_types()[0].dtype;
  const auto xp = scalar_quant_params(c, dq), yp = scalar_quant_params(c, *q);
  if ((yt != DType::UInt8 && yt != DType::Int8) || !xp || !yp) return false;
  int x = c.id(dq.inputs()[0]);
  const std::vector<int64_t> dims = c.val(x).dims;
  if (!is_static(op->output_types()[0].shape) || static_dims(op->output_types()[0].shape) != dims) return false;
  auto k = column_constant(c, *op, out, dims);
  if (!k) return false;
  // One value maps element to element in any dense layout (a transposed view of
  // the integers); one per column needs the columns last in memory.
  const auto strides = c.strides_of(x);
  const bool keep_layout = k->size() == 1 && strides && fills_its_memory(c.val(x), strides);
  if (!keep_layout) x = c.as_plain(x);
  const dt y_dt = yt == DType::UInt8 ? dt::u8 : dt::s8;
  const int y = keep_layout ? c.new_value(yt, dims, md_t(to_dims(dims), y_dt, to_dims(*strides)), q->name())
                            : plain_output(c, yt, dims, q->name());
  const bool add = op->op_type() == "Add";
  const int64_t count = num_elements(dims), cols = k->size() == 1 ? 1 : dims.back();
  const auto in_t = *quant_type(xt), out_t = *quant_type(yt);
  const int team = kernels::team_for_work(quant_team(c), static_cast<double>(count) * 6 / kernels::kTeamBytes);
  add_native_step(c,
                  step_info(*op, "quantize-affine",
                            "dequantize-" + op->op_type() + "-quantize " + std::string(dtype_name(xt)) + "->" +
                                std::string(dtype_name(yt)) + to_string(dims) + (cols > 1 ? " per-column" : " scalar"),
                            3.0 * static_cast<double>(count)),
                  {x}, {y},
                  [k = *k, xp = *xp, yp = *yp, add, count, cols, in_t, out_t, team, xs = dtype_size(xt),
                   ys = dtype_size(yt)](const std::vector<char*>& ptr) {
                    kernels::parallel_teams(team, [&](int t, int n) {
                      const int64_t blocks = (count + kBlockElements - 1) / kBlockElements;
                      float buf[kBlockElements];
                      for (int64_t blk = blocks * t / n; blk < blocks * (t + 1) / n; ++blk) {
                        const int64_t b = blk * kBlockElements, len = std::min(kBlockElements, count - b);
                        kernels::QShape s;
                        s.inner = len;
                        kernels::dequantize(ptr[0] + b * static_cast<int64_t>(xs), in_t, buf, s, &xp.first,
                                            &xp.second, 1);
                        if (cols == 1) {
                          const float v = k[0];
                          for (int64_t i = 0; i < len; ++i) buf[i] = add ? buf[i] + v : buf[i] * v;
                        } else {
                          for (int64_t i = 0, j = b % cols; i < len; ++i, j = j + 1 == cols ? 0 : j + 1)
                            buf[i] = add ? buf[i] + k[static_cast<size_t>(j)] : buf[i] * k[static_cast<size_t>(j)];
                        }
                        kernels::quantize(buf, ptr[1] + b * static_cast<int64_t>(ys), out_t, s, &yp.first,
                                          &yp.second, 1);
                      }
                    });
                  });
  c.bind(q->output(0), y);
  c.mark_done(*op);
  c.mark_done(*q);
  return true;
}

}  // namespace isomer::runtime
