// ONNX Runtime's com.microsoft DynamicQuantizeLSTM, which its quantize_dynamic
// writes for every LSTM, on isomer's native recurrence (native_recurrence.cpp)
// rather than a round trip to ONNX Runtime per run.
//
// ONNX Runtime computes it as the LSTM with each product on integers: the layer
// input X (the rows of every step up to the longest sequence, all at once) and,
// per step, h (every batch row at once) go to uint8 on one scale and zero point
// each, as DynamicQuantizeLinear finds them; W [D, input, 4H] and R [D, H, 4H]
// are int8 or uint8 with, per direction, one zero point (ONNX Runtime refuses
// per-column zero points that differ) and one scale or one per column; the int32
// sums times the two scales are the products. Here X is quantized and
// dequantized again and multiplied by W dequantized once, when the graph is
// compiled (the same integers scaled, in float32, on oneDNN's matmul); each step's h
// is quantized and multiplied by R's integers in int32 where the CPU has AVX-512
// VNNI (kernels::gemm_panels_u8s8), by R dequantized elsewhere. The results differ
// from ONNX Runtime's only by float rounding (and so, rarely, by a rounding step
// of a quantized h). ONNX Runtime at more than one thread quantizes h in parts of
// the batch (batch > 4, or 2-4 with H <= 256); so does this, at the thread count
// the graph is compiled for.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <memory>

#include "kernels/quant.h"
#include "kernels/recurrent.h"
#include "ops/rnn.h"
#include "runtime/compiler.h"
#include "runtime/lower_quant.h"
#include "runtime/native.h"
#include "runtime/native_recurrence.h"
#include "runtime/opaque_attr.h"

namespace isomer::runtime {

namespace {

// The attributes rnn_config reads, from the kept NodeProto; nullopt for one of
// another type than LSTM's, or a layout (the operator has none).
std::optional<Attributes> lstm_attributes(const onnx::NodeProto& p) {
  Attributes a;
  for (const onnx::AttributeProto& at : p.attribute()) {
    const std::string& name = at.name();
    if (name == "direction" && at.type() == onnx::AttributeProto::STRING) a.set(name, at.s());
    else if ((name == "hidden_size" || name == "input_forget") && at.type() == onnx::AttributeProto::INT) a.set(name, at.i());
    else if (name == "clip" && at.type() == onnx::AttributeProto::FLOAT) a.set(name, static_cast<double>(at.f()));
    else if (name == "activations" && at.type() == onnx::AttributeProto::STRINGS)
      a.set(name, std::vector<std::string>(at.strings().begin(), at.strings().end()));
    else if ((name == "activation_alpha" || name == "activation_beta") && at.type() == onnx::AttributeProto::FLOATS)
      a.set(name, std::vector<double>(at.floats().begin(), at.floats().end()));
    else return std::nullopt;
  }
  return a;
}

// W or R ([D, K, 4H], int8 or uint8) in the LSTM's [D, 4H, K]: dequantized, (q -
// zero point of the direction) * scale of the direction or of the column, and as
// int8 (uint8 moved by -128, its zero points alike) with per direction its zero
// point and per row its scale. nullopt where ONNX Runtime would refuse the
// parameters.
struct QuantizedWeights {
  std::vector<float> dequantized;
  std::vector<int8_t> ints;
  std::vector<int32_t> zp;
  std::vector<float> scale;
};
std::optional<QuantizedWeights> quantized_weights(const Tensor& q, const Tensor& scale, const Tensor& zp, int64_t D,
                                                  int64_t K, int64_t GH) {
  const std::vector<int64_t> sd = scale.dims();
  if (zp.dims() != sd || !(sd == std::vector<int64_t>{D} || sd == std::vector<int64_t>{D, GH})) return std::nullopt;
  if (q.dims() != std::vector<int64_t>{D, K, GH} || zp.dtype() != q.dtype() || scale.dtype() != DType::Float32)
    return std::nullopt;
  const int64_t per = sd.size() == 2 ? GH : 1;
  const std::vector<double> s = scale.to_f64();
  const std::vector<int64_t> z = zp.to_i64(), v = q.to_i64();
  for (int64_t d = 0; d < D && per > 1; ++d)  // one zero point per direction: int8's 0, or uint8's all equal
    for (int64_t j = 0; j < GH; ++j)
      if (z[static_cast<size_t>(d * GH + j)] != (q.dtype() == DType::Int8 ? 0 : z[static_cast<size_t>(d * GH)]))
        return std::nullopt;
  const int64_t move = q.dtype() == DType::UInt8 ? 128 : 0;
  QuantizedWeights w;
  w.dequantized.resize(static_cast<size_t>(D * GH * K));
  w.ints.resize(static_cast<size_t>(D * GH * K));
  for (int64_t d = 0; d < D; ++d) {
    const int64_t zd = z[static_cast<size_t>(d * per)];
    w.zp.push_back(static_cast<int32_t>(zd - move));
    for (int64_t j = 0; j < GH; ++j) w.scale.push_back(static_cast<float>(s[static_cast<size_t>(d * per + (per > 1 ? j : 0))]));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < GH; ++j) {
        const int64_t value = v[static_cast<size_t>((d * K + k) * GH + j)];
        const size_t at = static_cast<size_t>((d * GH + j) * K + k);
        w.dequantized[at] = static_cast<float>(value - zd) * w.scale[static_cast<size_t>(d * GH + j)];
        w.ints[at] = static_cast<int8_t>(value - move);
      }
  }
  return w;
}

// The longest of `N` sequence lengths, each bounded to [0, T] (the recurrence
// reports one outside).
int64_t longest_of(const int32_t* lens, int64_t N, int64_t T) {
  int64_t rows = 0;
  for (int64_t b = 0; b < N; ++b) rows = std::max<int64_t>(rows, std::clamp<int64_t>(lens[b], 0, T));
  return rows;
}

// X quantized to uint8 on the range of its rows up to the longest sequence (the
// rows ONNX Runtime's input product takes) and dequantized again.
int quantized_input(Compiler& c, const Node& n, int x, int lens, int64_t T, int64_t N, int64_t I, int64_t longest) {
  const int y = c.new_value(DType::Float32, {T, N, I}, plain_md({T, N, I}, dt::f32), n.name() + ".Xq");
  std::vector<int> reads{x};
  if (lens >= 0) reads.push_back(lens);
  const int team = c.threads();
  add_native_step(c, step_info(n, "pointwise", "dynamic-quantize-dequantize u8 [" + std::to_string(T * N * I) + "]",
                               static_cast<double>(T * N * I)),
                  reads, {y}, [=](const std::vector<char*>& p) {
                    const float* in = reinterpret_cast<const float*>(p[0]);
                    float* out = reinterpret_cast<float*>(p[lens >= 0 ? 2 : 1]);
                    const int64_t rows = lens >= 0 ? longest_of(reinterpret_cast<const int32_t*>(p[1]), N, T) : longest;
                    const int64_t count = T * N * I;
                    const kernels::DynamicParams q = kernels::dynamic_params(in, rows * N * I, team);
                    const int32_t zp = q.zero_point;
                    std::vector<uint8_t> bytes(static_cast<size_t>(count));
                    kernels::quantize(in, bytes.data(), kernels::QType::U8, kernels::QShape{1, 1, count}, &q.scale, &zp, team);
                    kernels::dequantize(bytes.data(), kernels::QType::U8, out, kernels::QShape{1, 1, count}, &q.scale, &zp,
                                        team);
                  });
  return y;
}

// X W^T + Wb + Rb of every direction, [T N, D 4H], as ONNX Runtime's input product:
// X quantized to uint8 on the range of its rows up to the longest sequence, the int32
// sums over W's integers (kernels::gemm_panels_u8s8), corrected for both zero points
// and scaled by X's scale times the column's.
int quantized_input_product(Compiler& c, const Node& n, int x, int lens, int64_t T, int64_t N, int64_t I,
                            int64_t longest, const QuantizedWeights& w, const std::vector<double>& bias, int64_t D,
                            int64_t GH) {
  struct Product {
    std::vector<int8_t> packed;
    std::vector<int32_t> sums, zp;  // per column of every direction; per direction
    std::vector<float> scale, bias;  // per column of every direction
  };
  auto p = std::make_shared<Product>();
  const int64_t cols = D * GH, rows = T * N, stride = (I + 3) / 4 * 4;
  p->packed = kernels::pack_rows16_s8(w.ints.data(), cols, I);
  p->sums.assign(static_cast<size_t>(cols), 0);
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t k = 0; k < I; ++k) p->sums[static_cast<size_t>(j)] += w.ints[static_cast<size_t>(j * I + k)];
  p->zp = w.zp;
  p->scale = w.scale;
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < GH; ++j)
      p->bias.push_back(static_cast<float>(bias[static_cast<size_t>(d * 2 * GH + j)] +
                                           bias[static_cast<size_t>(d * 2 * GH + GH + j)]));
  const int y = c.new_value(DType::Float32, {rows, cols}, plain_md({rows, cols}, dt::f32), n.name() + ".XW");
  std::vector<int> reads{x};
  if (lens >= 0) reads.push_back(lens);
  add_native_step(c, step_info(n, "int8-matmul", "dynamic-quantize u8 x s8 [" + std::to_string(rows) + "," +
                                                    std::to_string(I) + "]x[" + std::to_string(I) + "," +
                                                    std::to_string(cols) + "]",
                               2.0 * static_cast<double>(rows * I * cols)),
                  reads, {y}, [=](const std::vector<char*>& ptr) {
                    const float* in = reinterpret_cast<const float*>(ptr[0]);
                    float* out = reinterpret_cast<float*>(ptr[lens >= 0 ? 2 : 1]);
                    const int64_t used = lens >= 0 ? longest_of(reinterpret_cast<const int32_t*>(ptr[1]), N, T) : longest;
                    const kernels::DynamicParams q = kernels::dynamic_params(in, used * N * I);
                    const int32_t zx = q.zero_point;
                    thread_local std::vector<uint8_t> bytes;
                    thread_local std::vector<int32_t> acc;
                    bytes.assign(static_cast<size_t>(rows * stride), 0);
                    acc.resize(static_cast<size_t>(rows * cols));
                    std::vector<const uint8_t*> row_at(static_cast<size_t>(rows));
                    std::vector<int32_t> row_sums(static_cast<size_t>(rows));
                    for (int64_t r = 0; r < rows; ++r) {
                      uint8_t* row = bytes.data() + r * stride;
                      kernels::quantize(in + r * I, row, kernels::QType::U8, kernels::QShape{1, 1, I}, &q.scale, &zx);
                      int32_t sum = 0;
                      for (int64_t k = 0; k < I; ++k) sum += row[k];
                      row_sums[static_cast<size_t>(r)] = sum, row_at[static_cast<size_t>(r)] = row;
                    }
                    kernels::gemm_panels_u8s8(p->packed.data(), row_at.data(), rows, acc.data(), cols, cols, I);
                    // Per column: X's zero point times W's sums, and the two scales' product.
                    std::vector<int32_t> moved(static_cast<size_t>(cols));
                    std::vector<float> mult(static_cast<size_t>(cols));
                    for (int64_t j = 0; j < cols; ++j) {
                      const int32_t zw = p->zp[static_cast<size_t>(j / GH)];
                      moved[static_cast<size_t>(j)] = static_cast<int32_t>(I) * zx * zw - zx * p->sums[static_cast<size_t>(j)];
                      mult[static_cast<size_t>(j)] = q.scale * p->scale[static_cast<size_t>(j)];
                    }
                    for (int64_t r = 0; r < rows; ++r)
                      for (int64_t d = 0; d < D; ++d) {
                        const int32_t by_row = p->zp[static_cast<size_t>(d)] * row_sums[static_cast<size_t>(r)];
                        const int32_t* a = acc.data() + r * cols + d * GH;
                        const int32_t* m = moved.data() + d * GH;
                        const float* sc = mult.data() + d * GH;
                        const float* b = p->bias.data() + d * GH;
                        float* o = out + r * cols + d * GH;
                        for (int64_t j = 0; j < GH; ++j) o[j] = static_cast<float>(a[j] + m[j] - by_row) * sc[j] + b[j];
                      }
                  });
  return y;
}

}  // namespace

bool lower_dynamic_quantize_lstm(Compiler& c, const Node& n) {
  onnx::NodeProto p;
  if (!p.ParseFromString(n.opaque()->node_proto)) return false;
  const std::optional<Attributes> attrs = lstm_attributes(p);
  if (!attrs) return false;
  RnnConfig cfg;
  try {
    cfg = rnn_config("LSTM", *attrs);
  } catch (const Error&) {
    return false;  // ONNX Runtime says what is wrong
  }
  const auto& in = n.inputs();
  if (in.size() < 12 || n.num_outputs() < 1 || !native_recurrence_supports(n, cfg)) return false;
  // An output left out before one that is not would shift the recurrence's outputs;
  // and without Y, ONNX Runtime's step product reads a finished row's last state
  // where Y's zeros are read here.
  for (int o = 0; o < p.output_size(); ++o)
    if (p.output(o).empty()) return false;
  for (size_t k : {size_t{0}, size_t{3}, size_t{5}, size_t{6}})
    if (in[k].present() && in[k].type().dtype != DType::Float32) return false;
  for (const TensorType& t : n.output_types())
    if (t.dtype != DType::Float32) return false;
  const Tensor *w = c.known(in[1]), *r = c.known(in[2]), *b = in[3].present() ? c.known(in[3]) : nullptr;
  const Tensor *ws = c.known(in[8]), *wz = c.known(in[9]), *rs = c.known(in[10]), *rz = c.known(in[11]);
  if (!w || !r || (in[3].present() && !b) || !ws || !wz || !rs || !rz) return false;
  const std::vector<int64_t> xd = c.dims(in[0]);
  if (xd.size() != 3 || r->rank() != 3) return false;
  const int64_t T = xd[0], N = xd[1], I = xd[2], D = cfg.directions, H = r->dims()[1], GH = 4 * H;
  if (T < 1 || N < 1 || (cfg.hidden > 0 && cfg.hidden != H)) return false;
  RecurrenceGiven given;
  std::optional<QuantizedWeights> wq = quantized_weights(*w, *ws, *wz, D, I, GH),
                                   rq = quantized_weights(*r, *rs, *rz, D, H, GH);
  if (!wq || !rq) return false;
  given.w = wq->dequantized;
  given.r = std::move(rq->dequantized);
  given.r_int = std::move(rq->ints);
  given.r_zp = std::move(rq->zp);
  given.r_scale = std::move(rq->scale);
  if (b && b->dims() != std::vector<int64_t>{D, 2 * GH}) return false;
  given.bias = b ? b->to_f64() : std::vector<double>(static_cast<size_t>(D * 2 * GH), 0.0);
  given.quantize_h = true;
  // ONNX Runtime splits the batch among its threads (batch over 4, or 2-4 with H up
  // to 256), each part's h on a range of its own: isomer follows it at the thread
  // count the graph is compiled for.
  const int64_t threads = std::max(1, c.opts().threads);
  if (N > 4 || (N >= 2 && H <= 256)) given.h_chunk = (N + threads - 1) / threads;

  // The rows X's range is taken over: up to the longest sequence.
  int64_t longest = T;
  int lens = -1;
  if (in[4].present()) {
    if (const Tensor* l = c.known(in[4])) {
      longest = 0;
      for (int64_t v : l->to_i64()) longest = std::max(longest, std::clamp<int64_t>(v, 0, T));
    } else {
      lens = c.as_plain(c.id(in[4]));
    }
  }
  const int x = c.as_plain(c.id(in[0]));
  if (kernels::integer_panels_available())
    given.product = quantized_input_product(c, n, x, lens, T, N, I, longest, *wq, given.bias, D, GH);
  else
    given.x = quantized_input(c, n, x, lens, T, N, I, longest);
  lower_native_recurrence(c, n, cfg, T, N, I, H, &given);
  return true;
}

}  // namespace isomer::runtime
