// Contractions: MatMul, Gemm, Conv and ConvTranspose. All reduce to one templated GEMM
// kernel (C += A·B, ops/reference_gemm.h), instantiated for double (float semantics, accumulating in
// double), int64_t (integer tensors), Fp (field semantics) and float (constant folding
// of float32 MatMul and Gemm at the runtime's precision). Conv lowers to it
// through im2col, one [C/group · kernel, output positions] matrix per image and
// group. The same kernels at T = Sym give the symbolic semantics (eval/sym.h).
#include <algorithm>
#include <cmath>

#include "eval/sym.h"
#include "ir/float_to_int.h"
#include "ir/invalid_node.h"
#include "ops/kernels.h"
#include "ops/nn_common.h"
#include "ops/reference_gemm.h"

namespace isomer {
using namespace ops;

namespace {

// ---- MatMul ------------------------------------------------------------------------

// numpy matmul: a 1-D operand is a row (left) or column (right) vector whose unit
// dimension is dropped from the result; batch dimensions broadcast.
template <class T>
Array<T> matmul(const Array<T>& a, const Array<T>& b) {
  require(a.rank() >= 1 && b.rank() >= 1, "MatMul operands must have rank 1 or more");
  std::vector<int64_t> da = a.dims, db = b.dims;
  if (a.rank() == 1) da.insert(da.begin(), 1);
  if (b.rank() == 1) db.push_back(1);
  const int64_t M = da[da.size() - 2], K = da.back(), N = db.back();
  require(db[db.size() - 2] == K, "MatMul inner dimensions differ: " + to_string(a.dims) + " x " + to_string(b.dims));
  std::vector<int64_t> batch_a(da.begin(), da.end() - 2), batch_b(db.begin(), db.end() - 2);
  std::vector<int64_t> batch = broadcast_dims(batch_a, batch_b);
  std::vector<int64_t> out_dims = batch;
  out_dims.push_back(M);
  out_dims.push_back(N);
  Array<T> out(out_dims);
  const int64_t batches = num_elements(batch);
  if (num_elements(batch_b) == 1 && num_elements(batch_a) == batches) {
    // The right operand is one matrix: the batched left operand is one tall matrix.
    gemm_accumulate(batches * M, N, K, a.data.data(), K, b.data.data(), N, out.data.data(), N);
  } else {
    std::array<std::vector<int64_t>, 2> st{broadcast_strides(batch_a, batch), broadcast_strides(batch_b, batch)};
    for_each_broadcast<2>(batch, st, [&](int64_t n, const std::array<int64_t, 2>& o) {
      gemm_accumulate(M, N, K, a.data.data() + o[0] * M * K, K, b.data.data() + o[1] * K * N, N,
                      out.data.data() + n * M * N, N);
    });
  }
  if (b.rank() == 1) out.dims.pop_back();
  if (a.rank() == 1) out.dims.erase(out.dims.end() - (b.rank() == 1 ? 1 : 2));
  return out;
}

std::vector<TensorType> infer_matmul(const InferContext& ctx) {
  const TensorType &a = ctx.in(0), &b = ctx.in(1);
  require(is_numeric(a.dtype) && a.dtype != DType::Bool, "MatMul operands must be numeric");
  require(a.dtype == b.dtype, "MatMul operands have types " + std::string(dtype_name(a.dtype)) + " and " +
                                  std::string(dtype_name(b.dtype)));
  require(a.rank() >= 1 && b.rank() >= 1, "MatMul operands must have rank 1 or more");
  Shape sa = a.shape, sb = b.shape;
  if (a.rank() == 1) sa.insert(sa.begin(), Dim(1));
  if (b.rank() == 1) sb.push_back(Dim(1));
  const Dim &ka = sa.back(), &kb = sb[sb.size() - 2];
  require(!ka.is_static() || !kb.is_static() || ka.value == kb.value,
          "MatMul inner dimensions differ: " + to_string(a.shape) + " x " + to_string(b.shape));
  Shape out = broadcast_shapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
  if (a.rank() > 1) out.push_back(sa[sa.size() - 2]);
  if (b.rank() > 1) out.push_back(sb.back());
  return {{a.dtype, out}};
}

std::vector<Tensor> eval_matmul(const EvalContext& ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (is_float(a.dtype())) return {tensor(a.dtype(), matmul(f64(a), f64(b)))};
  return {tensor(a.dtype(), matmul(i64(a), i64(b)))};
}

// Constant folding: a float32 product summed in float (OpDef::fold).
std::vector<Tensor> fold_matmul(const EvalContext& ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32) return eval_matmul(ctx);
  return {tensor(matmul(f32(a), f32(b)))};
}

template <class T>
std::vector<Array<T>> exact_matmul(const Attributes&, std::span<const Array<T>> in) {
  return {matmul(in[0], in[1])};
}

// ---- Gemm --------------------------------------------------------------------------

template <class T>
Array<T> transposed_2d(const Array<T>& a) {
  const int64_t r = a.dims[0], c = a.dims[1];
  Array<T> t({c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) t.data[j * r + i] = a.data[i * c + j];
  return t;
}

template <class T>
bool present(const Array<T>& a) { return !a.dims.empty() || !a.data.empty(); }

// Y = alpha · op(A) · op(B) + beta · C, with C broadcast to [M, N] (nullptr = absent).
template <class T>
Array<T> gemm(const Array<T>& a_in, const Array<T>& b_in, const Array<T>* c, bool trans_a, bool trans_b, T alpha,
              T beta) {
  require(a_in.rank() == 2 && b_in.rank() == 2, "Gemm operands must be matrices");
  Array<T> a_t = trans_a ? transposed_2d(a_in) : Array<T>(), b_t = trans_b ? transposed_2d(b_in) : Array<T>();
  const Array<T>& a = trans_a ? a_t : a_in;
  const Array<T>& b = trans_b ? b_t : b_in;
  const int64_t M = a.dims[0], K = a.dims[1], N = b.dims[1];
  require(b.dims[0] == K, "Gemm inner dimensions differ: " + to_string(a.dims) + " x " + to_string(b.dims));
  Array<T> y({M, N});
  gemm_accumulate(M, N, K, a.data.data(), K, b.data.data(), N, y.data.data(), N);
  for (T& v : y.data) v = alpha * v;
  if (c) {
    require(c->rank() <= 2, "Gemm C must have rank 2 or less");
    std::array<std::vector<int64_t>, 1> st{broadcast_strides(c->dims, y.dims)};
    require(broadcast_dims(c->dims, y.dims) == y.dims,
            "Gemm C " + to_string(c->dims) + " does not broadcast to " + to_string(y.dims));
    for_each_broadcast<1>(
        y.dims, st, [&](int64_t n, const std::array<int64_t, 1>& o) { y.data[n] = y.data[n] + beta * c->data[o[0]]; });
  }
  return y;
}

std::vector<TensorType> infer_gemm(const InferContext& ctx) {
  const TensorType &a = ctx.in(0), &b = ctx.in(1);
  require(is_numeric(a.dtype) && a.dtype != DType::Bool, "Gemm operands must be numeric");
  require(a.dtype == b.dtype, "Gemm operands have different types");
  require(a.rank() == 2 && b.rank() == 2,
          "Gemm operands must be matrices, got " + to_string(a.shape) + " and " + to_string(b.shape));
  const bool ta = ctx.attrs.get_int("transA", 0) != 0, tb = ctx.attrs.get_int("transB", 0) != 0;
  const Dim &m = a.shape[ta ? 1 : 0], &ka = a.shape[ta ? 0 : 1];
  const Dim &kb = b.shape[tb ? 1 : 0], &n = b.shape[tb ? 0 : 1];
  require_valid(!ka.is_static() || !kb.is_static() || ka.value == kb.value,
          "Gemm inner dimensions differ: " + to_string(a.shape) + (ta ? "^T" : "") + " x " + to_string(b.shape) +
              (tb ? "^T" : ""));
  const Shape out{m, n};
  if (ctx.has_input(2)) {
    const TensorType& c = ctx.in(2);
    require(c.dtype == a.dtype, "Gemm C has a different type than A");
    require(c.rank() <= 2, "Gemm C must have rank 2 or less, got " + to_string(c.shape));
    // Unidirectional broadcast: each dim of C is 1 or the output's.
    for (size_t i = 0; i < c.shape.size(); ++i) {
      const Dim& cd = c.shape[i];
      const Dim& od = out[i + 2 - c.shape.size()];
      require(cd == Dim(1) || !cd.is_static() || !od.is_static() || cd.value == od.value,
              "Gemm C " + to_string(c.shape) + " does not broadcast to " + to_string(out));
    }
  }
  return {{a.dtype, out}};
}

std::vector<Tensor> eval_gemm(const EvalContext& ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  const bool ta = ctx.attrs.get_int("transA", 0) != 0, tb = ctx.attrs.get_int("transB", 0) != 0;
  const double alpha = ctx.attrs.get_float("alpha", 1.0), beta = ctx.attrs.get_float("beta", 1.0);
  // Integer inputs with integer scales compute exactly; other scales (fractions, or too
  // large for int64) in double.
  const std::optional<int64_t> int_alpha = exact_float_to_int<int64_t>(alpha);
  const std::optional<int64_t> int_beta = exact_float_to_int<int64_t>(beta);
  if (!is_float(a.dtype()) && int_alpha && int_beta) {
    Array<int64_t> c = ctx.has_input(2) ? i64(ctx.in(2)) : Array<int64_t>();
    return {tensor(a.dtype(), gemm(i64(a), i64(b), ctx.has_input(2) ? &c : nullptr, ta, tb, *int_alpha, *int_beta))};
  }
  Array<double> c = ctx.has_input(2) ? f64(ctx.in(2)) : Array<double>();
  return {tensor(a.dtype(), gemm(f64(a), f64(b), ctx.has_input(2) ? &c : nullptr, ta, tb, alpha, beta))};
}

// Constant folding: a float32 Gemm in float (OpDef::fold), its scales applied in float.
std::vector<Tensor> fold_gemm(const EvalContext& ctx) {
  const Tensor &a = ctx.in(0), &b = ctx.in(1);
  const bool has_c = ctx.has_input(2);
  if (a.dtype() != DType::Float32 || b.dtype() != DType::Float32 || (has_c && ctx.in(2).dtype() != DType::Float32))
    return eval_gemm(ctx);
  const bool ta = ctx.attrs.get_int("transA", 0) != 0, tb = ctx.attrs.get_int("transB", 0) != 0;
  const auto alpha = static_cast<float>(ctx.attrs.get_float("alpha", 1.0));
  const auto beta = static_cast<float>(ctx.attrs.get_float("beta", 1.0));
  Array<float> c = has_c ? f32(ctx.in(2)) : Array<float>();
  return {tensor(gemm(f32(a), f32(b), has_c ? &c : nullptr, ta, tb, alpha, beta))};
}

Fp integral_field_scalar(const Attributes& attrs, const std::string& name) {
  const double v = attrs.get_float(name, 1.0);
  require(v == std::floor(v) && std::fabs(v) < 9.0e15,
          "Gemm " + name + " " + std::to_string(v) + " is not an integer; it has no field value");
  return Fp::from_signed(checked_float_to_int<int64_t>(v, "Gemm " + name));
}

std::vector<FieldArray> field_gemm(const Attributes& attrs, std::span<const FieldArray> in) {
  const bool ta = attrs.get_int("transA", 0) != 0, tb = attrs.get_int("transB", 0) != 0;
  const FieldArray* c = in.size() > 2 && present(in[2]) ? &in[2] : nullptr;
  return {gemm(in[0], in[1], c, ta, tb, integral_field_scalar(attrs, "alpha"), integral_field_scalar(attrs, "beta"))};
}

// Over the reals alpha and beta are exact rationals.
std::vector<SymArray> sym_gemm(const Attributes& attrs, std::span<const SymArray> in) {
  const bool ta = attrs.get_int("transA", 0) != 0, tb = attrs.get_int("transB", 0) != 0;
  const SymArray* c = in.size() > 2 && present(in[2]) ? &in[2] : nullptr;
  return {gemm(in[0], in[1], c, ta, tb, Sym(attrs.get_float("alpha", 1.0)), Sym(attrs.get_float("beta", 1.0)))};
}

std::string import_gemm(OnnxForm& form, int64_t opset, GraphBuilder&) {
  // Opset < 7 said with `broadcast` whether C broadcasts; a C that does not need
  // it means the same with or without.
  form.attrs.erase("broadcast");
  return "";
}

// ---- Conv --------------------------------------------------------------------------

// Copies the windows of one group of `channels` input planes into rows of `col`:
// row (c, kernel cell) holds that cell's input value for every output position,
// zero where the window reaches into padding.
template <class T>
void im2col(const T* x, int64_t channels, const std::vector<WindowAxis>& axes, T* col) {
  const size_t r = axes.size();
  int64_t plane_in = 1, positions = 1, cells = 1;
  for (const WindowAxis& a : axes) {
    plane_in *= a.in;
    positions *= a.out;
    cells *= a.kernel;
  }
  const WindowAxis& last = axes[r - 1];
  const int64_t rows_out = positions / last.out;
  std::vector<int64_t> cell(r), pos(r);
  for (int64_t c = 0; c < channels; ++c) {
    std::fill(cell.begin(), cell.end(), 0);
    for (int64_t k = 0; k < cells; ++k) {
      T* row = col + (c * cells + k) * positions;
      // Output positions whose last-axis input index falls inside the input.
      const int64_t shift = cell[r - 1] * last.dilation - last.pad_begin;
      int64_t lo = 0, hi = last.out;
      while (lo < hi && lo * last.stride + shift < 0) ++lo;
      while (hi > lo && (hi - 1) * last.stride + shift >= last.in) --hi;
      std::fill(pos.begin(), pos.end(), 0);
      for (int64_t q = 0; q < rows_out; ++q) {
        T* dst = row + q * last.out;
        int64_t offset = 0;
        bool inside = true;
        for (size_t d = 0; d + 1 < r; ++d) {
          const int64_t i = pos[d] * axes[d].stride + cell[d] * axes[d].dilation - axes[d].pad_begin;
          inside = inside && i >= 0 && i < axes[d].in;
          offset = offset * axes[d].in + i;
        }
        if (!inside || lo >= hi) {
          std::fill(dst, dst + last.out, T());
        } else {
          const T* src = x + c * plane_in + offset * last.in + shift;
          std::fill(dst, dst + lo, T());
          for (int64_t o = lo; o < hi; ++o) dst[o] = src[o * last.stride];
          std::fill(dst + hi, dst + last.out, T());
        }
        for (int64_t d = static_cast<int64_t>(r) - 2; d >= 0; --d) {
          if (++pos[d] < axes[d].out) break;
          pos[d] = 0;
        }
      }
      for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
        if (++cell[d] < axes[d].kernel) break;
        cell[d] = 0;
      }
    }
  }
}

struct ConvParams {
  Window window;
  int64_t group = 1;
};

ConvParams conv_params(const Attributes& attrs, const std::vector<int64_t>& w_dims) {
  ConvParams p;
  p.group = attrs.get_int("group", 1);
  require_valid(p.group >= 1, "Conv group must be positive");
  std::vector<int64_t> kernel(w_dims.begin() + 2, w_dims.end());
  require_valid(attrs.get_ints("kernel_shape", kernel) == kernel, "Conv kernel_shape differs from the weight's shape");
  p.window = read_window(attrs, kernel);
  return p;
}

template <class T>
Array<T> conv(const Array<T>& x, const Array<T>& w, const Array<T>* bias, const ConvParams& p) {
  require(x.rank() >= 3 && w.rank() == x.rank(), "Conv needs [N, C, spatial...] input and weight of equal rank");
  const int64_t N = x.dims[0], C = x.dims[1], M = w.dims[0], Cg = w.dims[1], G = p.group;
  require(C == Cg * G && M % G == 0, "Conv channels do not match the weight and group");
  std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end());
  std::vector<WindowAxis> axes = plan_window(p.window, in);
  std::vector<int64_t> out_dims{N, M};
  int64_t positions = 1, plane_in = num_elements(in), cells = 1;
  bool pointwise = true;  // 1×1 kernel, stride 1, no padding: the input is its own im2col
  for (const WindowAxis& a : axes) {
    out_dims.push_back(a.out);
    positions *= a.out;
    cells *= a.kernel;
    pointwise = pointwise && a.kernel == 1 && a.stride == 1 && a.pad_begin == 0 && a.out == a.in;
  }
  const int64_t Mg = M / G, rows = Cg * cells;
  Array<T> y(out_dims);
  std::vector<T> col(pointwise ? 0 : static_cast<size_t>(rows * positions));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      const T* xg = x.data.data() + (n * C + g * Cg) * plane_in;
      if (!pointwise) im2col(xg, Cg, axes, col.data());
      T* yg = y.data.data() + (n * M + g * Mg) * positions;
      if (bias)
        for (int64_t m = 0; m < Mg; ++m)
          std::fill(yg + m * positions, yg + (m + 1) * positions, bias->data[g * Mg + m]);
      gemm_accumulate(Mg, positions, rows, w.data.data() + g * Mg * rows, rows, pointwise ? xg : col.data(), positions,
                      yg, positions);
    }
  }
  return y;
}

// The kernel's spatial extents if known: from the weight's static dims or from
// the kernel_shape attribute (which must agree).
std::optional<std::vector<int64_t>> conv_kernel(const Attributes& attrs, const TensorType& w) {
  const size_t r = w.shape.size() - 2;
  std::optional<std::vector<int64_t>> attr;
  if (attrs.has("kernel_shape")) {
    attr = attrs.get_ints("kernel_shape");
    require(attr->size() == r,
            "Conv kernel_shape has " + std::to_string(attr->size()) + " values, expected " + std::to_string(r));
  }
  std::vector<int64_t> kernel;
  for (size_t i = 0; i < r; ++i) {
    const Dim& d = w.shape[i + 2];
    if (!d.is_static()) return attr;
    if (attr && (*attr)[i] != d.value)
      throw InvalidNode("Conv kernel_shape " + to_string(*attr) + " differs from the weight's shape " + to_string(w.shape));
    kernel.push_back(d.value);
  }
  return kernel;
}

std::vector<TensorType> infer_conv(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &w = ctx.in(1);
  require_float(x, "Conv input");
  require(w.dtype == x.dtype, "Conv weight has a different type than the input");
  require(x.rank() >= 3, "Conv input must be [N, C, spatial...], got " + to_string(x.shape));
  require(w.rank() == x.rank(), "Conv weight " + to_string(w.shape) + " does not match input " + to_string(x.shape));
  const int64_t group = ctx.attrs.get_int("group", 1);
  require_valid(group >= 1, "Conv group must be positive, got " + std::to_string(group));
  const Dim &C = x.shape[1], &M = w.shape[0], &Cg = w.shape[1];
  if (C.is_static() && Cg.is_static())
    require_valid(C.value == Cg.value * group, "Conv input has " + std::to_string(C.value) + " channels, weight " +
                                             to_string(w.shape) + " with group " + std::to_string(group) + " expects " +
                                             std::to_string(Cg.value * group));
  if (C.is_static())
    require_valid(C.value % group == 0, "Conv group " + std::to_string(group) + " does not divide the " +
                                      std::to_string(C.value) + " input channels");
  if (M.is_static())
    require_valid(M.value % group == 0, "Conv group " + std::to_string(group) + " does not divide the " +
                                      std::to_string(M.value) + " output channels");
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.in(2);
    require(b.dtype == x.dtype, "Conv bias has a different type than the input");
    require(b.rank() == 1 && (!b.shape[0].is_static() || !M.is_static() || b.shape[0].value == M.value),
            "Conv bias " + to_string(b.shape) + " does not match weight " + to_string(w.shape));
  }
  Shape out{x.shape[0], M};
  std::optional<std::vector<int64_t>> kernel = conv_kernel(ctx.attrs, w);
  if (!kernel) {
    out.resize(x.shape.size(), Dim::unknown());
    return {{x.dtype, out}};
  }
  Window win = read_window(ctx.attrs, *kernel);
  for (size_t i = 0; i < win.rank(); ++i) out.push_back(window_output_dim(win, i, x.shape[i + 2]));
  return {{x.dtype, out}};
}

std::vector<Tensor> eval_conv(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  ConvParams p = conv_params(ctx.attrs, ctx.in(1).dims());
  Array<double> bias = ctx.has_input(2) ? f64(ctx.in(2)) : Array<double>();
  return {tensor(x.dtype(), conv(f64(x), f64(ctx.in(1)), ctx.has_input(2) ? &bias : nullptr, p))};
}

template <class T>
std::vector<Array<T>> exact_conv(const Attributes& attrs, std::span<const Array<T>> in) {
  ConvParams p = conv_params(attrs, in[1].dims);
  return {conv(in[0], in[1], in.size() > 2 && present(in[2]) ? &in[2] : nullptr, p)};
}

std::string import_conv(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (!form.attrs.has("auto_pad") || form.inputs.size() < 2) return "";
  const TensorType &x = form.inputs[0].type(), &w = form.inputs[1].type();
  if (x.rank() < 3 || w.rank() != x.rank()) return "";  // the shape rule will say what is wrong
  std::optional<std::vector<int64_t>> kernel = conv_kernel(form.attrs, w);
  if (!kernel) return "";
  resolve_auto_pad(form.attrs, read_window(form.attrs, *kernel), Shape(x.shape.begin() + 2, x.shape.end()));
  return "";
}

// ---- ConvTranspose -----------------------------------------------------------------

// The adjoint of Conv: input pixel i of each axis scatters its kernel to outputs
// i * stride - pad_begin + k * dilation. Computed as a GEMM into columns
// (W_g^T · x_g: one row per output channel and kernel cell) and col2im.

}  // namespace

namespace ops {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::vector<int64_t> deconv_ints(const Attributes& attrs, const std::string& name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(n, dflt));
  require_valid(v.size() == n, "ConvTranspose " + name + " has " + std::to_string(v.size()) + " values, expected " +
                             std::to_string(n));
  return v;
}

}  // namespace

// Follows the ONNX reference: output_shape (spatial, or with N and C) or a SAME
// auto_pad fix the output extents, and the pads are whatever gives them,
// split with the odd one at the start except for SAME_UPPER.
std::vector<DeconvAxis> plan_deconv(const Attributes& attrs, const std::vector<int64_t>& kernel,
                                    const std::vector<int64_t>& in) {
  const size_t r = kernel.size();
  const std::vector<int64_t> strides = deconv_ints(attrs, "strides", r, 1),
                             dilations = deconv_ints(attrs, "dilations", r, 1),
                             out_pad = deconv_ints(attrs, "output_padding", r, 0),
                             pads = deconv_ints(attrs, "pads", 2 * r, 0);
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  require_valid(auto_pad == "NOTSET" || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" || auto_pad == "VALID",
          "ConvTranspose auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got " + auto_pad);
  std::optional<std::vector<int64_t>> out_shape;
  if (attrs.has("output_shape")) {
    std::vector<int64_t> os = attrs.get_ints("output_shape");
    require_valid(os.size() == r || os.size() == r + 2, "ConvTranspose output_shape " + to_string(os) + " does not have " +
                                                       std::to_string(r) + " spatial extents");
    out_shape = std::vector<int64_t>(os.end() - static_cast<int64_t>(r), os.end());
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    out_shape = std::vector<int64_t>(r);
    for (size_t i = 0; i < r; ++i) (*out_shape)[i] = in[i] * strides[i];
  }
  std::vector<DeconvAxis> axes(r);
  for (size_t i = 0; i < r; ++i) {
    DeconvAxis& a = axes[i];
    a.in = in[i], a.kernel = kernel[i], a.stride = strides[i], a.dilation = dilations[i], a.out_pad = out_pad[i];
    require_valid(a.stride >= 1 && a.dilation >= 1, "ConvTranspose strides and dilations must be positive");
    require_valid(a.out_pad >= 0 && (a.out_pad < a.stride || a.out_pad < a.dilation),
            "ConvTranspose output_padding " + to_string(out_pad) + " must be less than the stride or the dilation");
    const int64_t full = a.stride * (a.in - 1) + a.out_pad + (a.kernel - 1) * a.dilation + 1;
    if (out_shape) {
      const int64_t total = full - (*out_shape)[i];
      a.pad_begin = auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
      a.pad_end = total - a.pad_begin;
    } else if (auto_pad != "VALID") {
      a.pad_begin = pads[i], a.pad_end = pads[r + i];
      require(a.pad_begin >= 0 && a.pad_end >= 0, "ConvTranspose pads must not be negative, got " + to_string(pads));
    }
    a.out = full - a.pad_begin - a.pad_end;
    require_valid(a.out >= 1, "ConvTranspose output would be empty along spatial axis " + std::to_string(i));
  }
  return axes;
}

}  // namespace ops

namespace {

template <class T>
Array<T> conv_transpose(const Array<T>& x, const Array<T>& w, const Array<T>* bias, const Attributes& attrs) {
  require(x.rank() >= 3 && w.rank() == x.rank(), "ConvTranspose needs [N, C, spatial...] input and weight of equal rank");
  const int64_t G = attrs.get_int("group", 1);
  require_valid(G >= 1, "ConvTranspose group must be positive");
  const int64_t N = x.dims[0], C = x.dims[1], Mg = w.dims[1], M = Mg * G;
  require(w.dims[0] == C && C % G == 0, "ConvTranspose channels do not match the weight and group");
  const std::vector<int64_t> kernel(w.dims.begin() + 2, w.dims.end()), in(x.dims.begin() + 2, x.dims.end());
  const std::vector<DeconvAxis> axes = plan_deconv(attrs, kernel, in);
  const size_t r = axes.size();
  const int64_t Cg = C / G, cells = num_elements(kernel), positions = num_elements(in);
  std::vector<int64_t> out_dims{N, M};
  for (const DeconvAxis& a : axes) out_dims.push_back(a.out);
  Array<T> y(out_dims);
  const int64_t plane_out = num_elements(out_dims) / std::max<int64_t>(N * M, 1);
  // For each axis, the output index of every (kernel cell, input index) pair, -1 outside.
  std::vector<std::vector<int64_t>> target(r);
  for (size_t d = 0; d < r; ++d)
    for (int64_t k = 0; k < axes[d].kernel; ++k)
      for (int64_t i = 0; i < axes[d].in; ++i) {
        const int64_t o = i * axes[d].stride - axes[d].pad_begin + k * axes[d].dilation;
        target[d].push_back(o >= 0 && o < axes[d].out ? o : -1);
      }
  std::vector<T> wt(static_cast<size_t>(Mg * cells * Cg)), col(static_cast<size_t>(Mg * cells * positions));
  std::vector<int64_t> cell(r), pos(r);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      // wt[m·cells + k][c] = w[g·Cg + c][m][k]
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t mk = 0; mk < Mg * cells; ++mk) wt[mk * Cg + c] = w.data[(g * Cg + c) * Mg * cells + mk];
      std::fill(col.begin(), col.end(), T());
      gemm_accumulate(Mg * cells, positions, Cg, wt.data(), Cg, x.data.data() + (n * C + g * Cg) * positions,
                      positions, col.data(), positions);
      for (int64_t m = 0; m < Mg; ++m) {
        T* yp = y.data.data() + (n * M + g * Mg + m) * plane_out;
        if (bias) std::fill(yp, yp + plane_out, bias->data[g * Mg + m]);
        std::fill(cell.begin(), cell.end(), 0);
        for (int64_t k = 0; k < cells; ++k) {
          const T* src = col.data() + (m * cells + k) * positions;
          std::fill(pos.begin(), pos.end(), 0);
          for (int64_t p = 0; p < positions; ++p) {
            int64_t at = 0;
            bool inside = true;
            for (size_t d = 0; d < r && inside; ++d) {
              const int64_t o = target[d][cell[d] * axes[d].in + pos[d]];
              inside = o >= 0;
              at = at * axes[d].out + o;
            }
            if (inside) yp[at] = yp[at] + src[p];
            for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
              if (++pos[d] < axes[d].in) break;
              pos[d] = 0;
            }
          }
          for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
            if (++cell[d] < axes[d].kernel) break;
            cell[d] = 0;
          }
        }
      }
    }
  return y;
}

std::vector<TensorType> infer_conv_transpose(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &w = ctx.in(1);
  require_float(x, "ConvTranspose input");
  require(w.dtype == x.dtype, "ConvTranspose weight has a different type than the input");
  require(x.rank() >= 3, "ConvTranspose input must be [N, C, spatial...], got " + to_string(x.shape));
  require(w.rank() == x.rank(),
          "ConvTranspose weight " + to_string(w.shape) + " does not match input " + to_string(x.shape));
  const int64_t group = ctx.attrs.get_int("group", 1);
  require_valid(group >= 1, "ConvTranspose group must be positive, got " + std::to_string(group));
  const Dim &C = x.shape[1], &Cw = w.shape[0], &Mg = w.shape[1];
  if (C.is_static() && Cw.is_static())
    require(C.value == Cw.value, "ConvTranspose input has " + std::to_string(C.value) + " channels, weight " +
                                     to_string(w.shape) + " expects " + std::to_string(Cw.value));
  if (C.is_static())
    require_valid(C.value % group == 0, "ConvTranspose group " + std::to_string(group) + " does not divide the " +
                                      std::to_string(C.value) + " input channels");
  const Dim M = Mg.is_static() ? Dim(Mg.value * group) : group == 1 ? Mg : Dim::unknown();
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.in(2);
    require(b.dtype == x.dtype, "ConvTranspose bias has a different type than the input");
    require(b.rank() == 1 && (!b.shape[0].is_static() || !M.is_static() || b.shape[0].value == M.value),
            "ConvTranspose bias " + to_string(b.shape) + " does not match weight " + to_string(w.shape) +
                " with group " + std::to_string(group));
  }
  const size_t r = x.shape.size() - 2;
  std::vector<int64_t> kernel, in;
  bool known = true;
  for (size_t i = 0; i < r; ++i) {
    known = known && w.shape[i + 2].is_static() && x.shape[i + 2].is_static();
    kernel.push_back(w.shape[i + 2].is_static() ? w.shape[i + 2].value : 1);
    in.push_back(x.shape[i + 2].is_static() ? x.shape[i + 2].value : 1);
  }
  if (ctx.attrs.has("kernel_shape"))
    require_valid(ctx.attrs.get_ints("kernel_shape") == kernel || !known,
            "ConvTranspose kernel_shape " + to_string(ctx.attrs.get_ints("kernel_shape")) +
                " differs from the weight's shape " + to_string(w.shape));
  // Checks the attributes even where the extents are not known.
  const std::vector<DeconvAxis> axes = plan_deconv(ctx.attrs, kernel, in);
  Shape out{x.shape[0], M};
  for (size_t i = 0; i < r; ++i) out.push_back(known ? Dim(axes[i].out) : Dim::unknown());
  return {{x.dtype, out}};
}

std::vector<Tensor> eval_conv_transpose(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  Array<double> bias = ctx.has_input(2) ? f64(ctx.in(2)) : Array<double>();
  return {tensor(x.dtype(), conv_transpose(f64(x), f64(ctx.in(1)), ctx.has_input(2) ? &bias : nullptr, ctx.attrs))};
}

template <class T>
std::vector<Array<T>> exact_conv_transpose(const Attributes& attrs, std::span<const Array<T>> in) {
  return {conv_transpose(in[0], in[1], in.size() > 2 && present(in[2]) ? &in[2] : nullptr, attrs)};
}

// With static extents, auto_pad and output_shape become the explicit pads they
// stand for, so that the canonical form has one way to say each geometry.
std::string import_conv_transpose(OnnxForm& form, int64_t, GraphBuilder&) {
  if ((!form.attrs.has("auto_pad") && !form.attrs.has("output_shape")) || form.inputs.size() < 2) return "";
  const TensorType &x = form.inputs[0].type(), &w = form.inputs[1].type();
  if (x.rank() < 3 || w.rank() != x.rank()) return "";  // the shape rule will say what is wrong
  std::vector<int64_t> kernel, in;
  for (size_t i = 2; i < x.shape.size(); ++i) {
    if (!x.shape[i].is_static() || !w.shape[i].is_static()) return "";
    kernel.push_back(w.shape[i].value);
    in.push_back(x.shape[i].value);
  }
  const std::vector<DeconvAxis> axes = plan_deconv(form.attrs, kernel, in);
  std::vector<int64_t> pads(2 * axes.size());
  for (size_t i = 0; i < axes.size(); ++i) pads[i] = axes[i].pad_begin, pads[axes.size() + i] = axes[i].pad_end;
  for (int64_t p : pads)
    if (p < 0) return "";  // an output larger than the full one: kept as written
  form.attrs.erase("auto_pad");
  form.attrs.erase("output_shape");
  form.attrs.set("pads", pads);
  return "";
}

}  // namespace

OpDef def_MatMul() {
  OpDef d;
  d.name = "MatMul";
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = 9;
  d.props.linear_in = {0, 1};
  d.infer = infer_matmul;
  d.eval = eval_matmul;
  d.fold = fold_matmul;
  d.eval_field = exact_matmul<Fp>;
  d.eval_sym = exact_matmul<Sym>;
  d.lower = Lowering::MatMul;
  return d;
}

OpDef def_Gemm() {
  OpDef d;
  d.name = "Gemm";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.min_opset = 13;
  d.attributes = {{"alpha", "float"}, {"beta", "float"}, {"transA", "int"}, {"transB", "int"}};
  d.infer = infer_gemm;
  d.eval = eval_gemm;
  d.fold = fold_gemm;
  d.eval_field = field_gemm;
  d.eval_sym = sym_gemm;
  d.onnx_import = import_gemm;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "alpha", 1.0);
    set_default(a, "beta", 1.0);
    set_default(a, "transA", int64_t{0});
    set_default(a, "transB", int64_t{0});
    return a;
  };
  d.lower = Lowering::Gemm;
  return d;
}

OpDef def_Conv() {
  OpDef d;
  d.name = "Conv";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.min_opset = 11;
  d.attributes = {{"auto_pad", "string"},   {"dilations", "ints"}, {"group", "int"},
                  {"kernel_shape", "ints"}, {"pads", "ints"},      {"strides", "ints"}};
  d.props.linear_in = {0, 1};  // without the bias B; with it, affine
  d.infer = infer_conv;
  d.eval = eval_conv;
  d.eval_field = exact_conv<Fp>;
  d.eval_sym = exact_conv<Sym>;
  d.onnx_import = import_conv;
  d.canonical_attrs = [](const Attributes& a, std::span<const TensorType> in) {
    return canonical_window_attrs(a, in, true);
  };
  d.lower = Lowering::Conv;
  return d;
}

OpDef def_ConvTranspose() {
  OpDef d;
  d.name = "ConvTranspose";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.min_opset = 11;
  d.attributes = {{"auto_pad", "string"}, {"dilations", "ints"},      {"group", "int"},
                  {"kernel_shape", "ints"}, {"output_padding", "ints"}, {"output_shape", "ints"},
                  {"pads", "ints"},         {"strides", "ints"}};
  d.props.linear_in = {0, 1};  // without the bias B; with it, affine
  d.infer = infer_conv_transpose;
  d.eval = eval_conv_transpose;
  d.eval_field = exact_conv_transpose<Fp>;
  d.eval_sym = exact_conv_transpose<Sym>;
  d.onnx_import = import_conv_transpose;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> in) {
    Attributes a = attrs;
    const int64_t r = input_rank(in, 0) - 2;
    if (r < 1 || a.has("auto_pad") || a.has("output_shape")) return a;
    a.erase("kernel_shape");
    set_default(a, "group", int64_t{1});
    set_default(a, "strides", std::vector<int64_t>(static_cast<size_t>(r), 1));
    set_default(a, "dilations", std::vector<int64_t>(static_cast<size_t>(r), 1));
    set_default(a, "output_padding", std::vector<int64_t>(static_cast<size_t>(r), 0));
    set_default(a, "pads", std::vector<int64_t>(static_cast<size_t>(2 * r), 0));
    return a;
  };
  d.lower = Lowering::ConvTranspose;
  return d;
}

}  // namespace isomer
