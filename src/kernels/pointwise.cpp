#include "kernels/pointwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include "ir/error.h"
#include "ir/float_to_int.h"
#include "ir/int_arith.h"
#include "ir/tensor.h"
#include "kernels/half.h"
#include "kernels/parallel.h"
#include "kernels/pointwise_elements.h"
#include "kernels/vector_isa.h"
#include "kernels/vmath.h"

namespace isomer::kernels {

namespace {

using namespace pointwise_elements;  // NOLINT: the file's element readers and writers

// --- the float32 instruction loop -------------------------------------------------

// fmax(0, fmin(1, t)): NaN gives 1.
inline float unit_clamp(float t) {
  const float u = t < 1.0f ? t : 1.0f;
  return u > 0.0f ? u : 0.0f;
}

// min(max(x, lo), hi) as comparisons that keep a NaN x (ONNX's Clip); lo > hi gives hi.
inline float clamp_nan(float x, float lo, float hi) {
  const float t = x < lo ? lo : x;
  return t > hi ? hi : t;
}

// Runs the program's instructions over n elements, the transcendental functions on
// vectors V (vmath.h); inlined into one entry point per instruction set below.
template <vmv::FloatVector V>
ISOMER_VINLINE void exec_f32_on(const PwInstr* code, size_t ncode, float* const* reg, int64_t n) {
  for (size_t k = 0; k < ncode; ++k) {
    const PwInstr& in = code[k];
    float* __restrict d = reg[in.dst];
    const float* __restrict a = reg[in.a];
    const float* __restrict b = reg[in.b];
    const float* __restrict c = reg[in.c];
    const float al = in.alpha, be = in.beta;
    switch (in.op) {
#define LOOP1(expr) \
  for (int64_t j = 0; j < n; ++j) { const float x = a[j]; d[j] = (expr); } \
  break
#define LOOP2(expr) \
  for (int64_t j = 0; j < n; ++j) { const float x = a[j], y = b[j]; d[j] = (expr); } \
  break
// Transcendental functions a vector V at a time. (A tail of 1 to L - 1 goes
// through the vector form too, zero-padded: a scalar transcendental costs about
// what a vector does.)
#define LOOPV(vexpr)                                                                       \
  {                                                                                        \
    constexpr int L = vmv::kLanes<V>;                                                      \
    int64_t j = 0;                                                                         \
    for (; j + L <= n; j += L) { const V x = vmv::load<V>(a + j); vmv::store(d + j, (vexpr)); } \
    if (j < n) {                                                                           \
      alignas(64) float t[L] = {};                                                         \
      for (int64_t l = 0; j + l < n; ++l) t[l] = a[j + l];                                 \
      { const V x = vmv::load<V>(t); vmv::store(t, (vexpr)); }                             \
      for (int64_t l = 0; j + l < n; ++l) d[j + l] = t[l];                                 \
    }                                                                                      \
  }                                                                                        \
  break
      case PwOp::Copy: LOOP1(x);
      case PwOp::Neg: LOOP1(-x);
      case PwOp::Abs: LOOP1(std::fabs(x));
      // Relu and Clip keep NaN (ONNX's max and min propagate it); Clip with min > max
      // gives max, as ONNX says (min(max(x, lo), hi)).
      case PwOp::Relu: LOOP1(x < 0.0f ? 0.0f : x);
      case PwOp::LeakyRelu: LOOP1(x >= 0.0f ? x : al * x);
      case PwOp::Sigmoid: LOOPV(vmv::sigmoid(x));
      case PwOp::Tanh: LOOPV(vmv::tanh(x));
      case PwOp::Exp: LOOPV(vmv::exp(x));
      case PwOp::Log: LOOP1(vm::log(x));
      case PwOp::Sqrt: LOOP1(std::sqrt(x));
      case PwOp::Rsqrt: LOOP1(1.0f / std::sqrt(x));
      // pow's rules where they differ from the square root's: x + 0 is +0 at -0, and -inf
      // is chosen apart (a compare and a blend a vector).
      case PwOp::PowHalf: LOOP1(x == -INFINITY ? INFINITY : std::sqrt(x + 0.0f));
      case PwOp::PowMinusHalf: LOOP1(x == -INFINITY ? 0.0f : 1.0f / std::sqrt(x + 0.0f));
      case PwOp::Reciprocal: LOOP1(1.0f / x);
      case PwOp::Erf: LOOPV(vmv::erf(x));
      case PwOp::GeluErf: LOOPV(vmv::gelu_erf(x));
      case PwOp::GeluTanh: LOOPV(vmv::gelu_tanh(x));
      case PwOp::Clip: LOOP1(clamp_nan(x, al, be));
      // fmax(0, fmin(1, t)) as comparisons, which vectorize (std::fmin and std::fmax
      // are a libm call an element: 12x ONNX Runtime's time on MobileNetV3's opset-13
      // x * HardSigmoid(x)). A NaN t gives 1, as fmin(1, NaN) does.
      case PwOp::HardSigmoid: LOOP1(unit_clamp(al * x + be));
      case PwOp::HardSwish: LOOP1(x * unit_clamp(x * (1.0f / 6.0f) + 0.5f));
      case PwOp::Softplus: LOOP1(x > 20.0f ? x : vm::log(1.0f + vm::exp(x)));
      case PwOp::Square: LOOP1(x * x);
      case PwOp::Floor: LOOP1(std::floor(x));
      case PwOp::Ceil: LOOP1(std::ceil(x));
      case PwOp::Round: LOOP1(std::nearbyint(x));
      case PwOp::Sign: LOOP1(x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x));
      case PwOp::Not: LOOP1(x == 0.0f ? 1.0f : 0.0f);
      case PwOp::Affine: LOOP1(al * x + be);
      case PwOp::PowConst: LOOP1(vm::pow(x, al));
      case PwOp::IsNaN: LOOP1(x != x ? 1.0f : 0.0f);
      case PwOp::Sin: LOOP1(std::sin(x));
      case PwOp::Cos: LOOP1(std::cos(x));
      case PwOp::Tan: LOOP1(std::tan(x));
      case PwOp::Asin: LOOP1(std::asin(x));
      case PwOp::Acos: LOOP1(std::acos(x));
      case PwOp::Atan: LOOP1(std::atan(x));
      case PwOp::Sinh: LOOP1(std::sinh(x));
      case PwOp::Cosh: LOOP1(std::cosh(x));
      case PwOp::Asinh: LOOP1(std::asinh(x));
      case PwOp::Acosh: LOOP1(std::acosh(x));
      case PwOp::Atanh: LOOP1(std::atanh(x));
      case PwOp::Softsign: LOOP1(x / (1.0f + std::fabs(x)));
      case PwOp::Elu: LOOP1(x >= 0.0f ? x : al * (vm::exp(x) - 1.0f));
      case PwOp::Selu: LOOP1(be * (x > 0.0f ? x : al * (vm::exp(x) - 1.0f)));
      case PwOp::Mish: LOOP1(x * vm::tanh(x > 20.0f ? x : vm::log(1.0f + vm::exp(x))));
      case PwOp::Silu: LOOPV(x / (vmv::splat<V>(1.0f) + vmv::exp(-x)));  // one division, not a reciprocal and a product
      case PwOp::Trunc: LOOP1(std::trunc(x));
      // max(0, x) + min(0, alpha (exp(x / alpha) - 1)); alpha > 0 makes the second term <= 0.
      case PwOp::Celu: LOOP1(x > 0.0f ? x : al * (vm::exp(x / al) - 1.0f));
      case PwOp::ThresholdedRelu: LOOP1(x > al ? x : 0.0f);
      case PwOp::IsInf:
        LOOP1(((al != 0.0f && x == std::numeric_limits<float>::infinity()) ||
               (be != 0.0f && x == -std::numeric_limits<float>::infinity()))
                  ? 1.0f
                  : 0.0f);
      case PwOp::Add: LOOP2(x + y);
      case PwOp::Sub: LOOP2(x - y);
      case PwOp::Mul: LOOP2(x * y);
      case PwOp::Div: LOOP2(x / y);
      // ONNX Max/Min propagate NaN.
      case PwOp::Max: LOOP2(x != x ? x : (x > y ? x : y));
      case PwOp::Min: LOOP2(x != x ? x : (x < y ? x : y));
      case PwOp::Pow: LOOP2(vm::pow(x, y));
      case PwOp::Mod: LOOP2(std::fmod(x, y) != 0.0f && ((std::fmod(x, y) < 0.0f) != (y < 0.0f)) ? std::fmod(x, y) + y
                                                                                                 : std::fmod(x, y));
      case PwOp::FMod: LOOP2(std::fmod(x, y));
      case PwOp::Equal: LOOP2(x == y ? 1.0f : 0.0f);
      case PwOp::Less: LOOP2(x < y ? 1.0f : 0.0f);
      case PwOp::LessEqual: LOOP2(x <= y ? 1.0f : 0.0f);
      case PwOp::Greater: LOOP2(x > y ? 1.0f : 0.0f);
      case PwOp::GreaterEqual: LOOP2(x >= y ? 1.0f : 0.0f);
      case PwOp::And: LOOP2((x != 0.0f && y != 0.0f) ? 1.0f : 0.0f);
      case PwOp::Or: LOOP2((x != 0.0f || y != 0.0f) ? 1.0f : 0.0f);
      case PwOp::Xor: LOOP2(((x != 0.0f) != (y != 0.0f)) ? 1.0f : 0.0f);
      case PwOp::PRelu: LOOP2(x < 0.0f ? x * y : x);
      case PwOp::Where:
        for (int64_t j = 0; j < n; ++j) d[j] = a[j] != 0.0f ? b[j] : c[j];
        break;
      case PwOp::WrapInt:
      case PwOp::ToInt32:
        throw Error(std::string("pointwise: ") + pw_name(in.op) + " is defined on integers only");
#undef LOOP1
#undef LOOP2
#undef LOOPV
    }
  }
}

ISOMER_TARGET_AVX512 void exec_f32_avx512(const PwInstr* code, size_t ncode, float* const* reg, int64_t n) {
  exec_f32_on<vm16::v16>(code, ncode, reg, n);
}
ISOMER_TARGET_AVX2 void exec_f32_avx2(const PwInstr* code, size_t ncode, float* const* reg, int64_t n) {
  exec_f32_on<vm8::v8>(code, ncode, reg, n);
}
void exec_f32_baseline(const PwInstr* code, size_t ncode, float* const* reg, int64_t n) {
  exec_f32_on<vm8::v8>(code, ncode, reg, n);
}

// The widest the CPU has (16 lanes under AVX-512), chosen once.
void exec_f32(const PwInstr* code, size_t ncode, float* const* reg, int64_t n) {
  using Exec = void (*)(const PwInstr*, size_t, float* const*, int64_t);
  static const Exec exec = [] {
    switch (best_vector_isa()) {
      case VectorIsa::Avx512: return exec_f32_avx512;
      case VectorIsa::Avx2: return exec_f32_avx2;
      default: return exec_f32_baseline;
    }
  }();
  exec(code, ncode, reg, n);
}

// --- the int64 instruction loop ---------------------------------------------------

void exec_i64(const PwInstr* code, size_t ncode, int64_t* const* reg, int64_t n) {
  for (size_t k = 0; k < ncode; ++k) {
    const PwInstr& in = code[k];
    int64_t* __restrict d = reg[in.dst];
    const int64_t* __restrict a = reg[in.a];
    const int64_t* __restrict b = reg[in.b];
    const int64_t* __restrict c = reg[in.c];
    const int64_t lo = saturate<int64_t>(in.alpha), hi = saturate<int64_t>(in.beta);
    switch (in.op) {
#define LOOP1(expr) \
  for (int64_t j = 0; j < n; ++j) { const int64_t x = a[j]; d[j] = (expr); } \
  break
#define LOOP2(expr) \
  for (int64_t j = 0; j < n; ++j) { const int64_t x = a[j], y = b[j]; d[j] = (expr); } \
  break
      case PwOp::Copy: LOOP1(x);
      case PwOp::Trunc: LOOP1(x);
      case PwOp::WrapInt: {  // the low alpha bits, sign- or zero-extended
        const int shift = 64 - static_cast<int>(in.alpha);
        const bool sign = in.beta != 0;
        for (int64_t j = 0; j < n; ++j) {
          const uint64_t low = static_cast<uint64_t>(a[j]) << shift;
          d[j] = sign ? static_cast<int64_t>(low) >> shift : static_cast<int64_t>(low >> shift);
        }
        break;
      }
      case PwOp::ToInt32: LOOP1(x == static_cast<int32_t>(x) ? x : std::numeric_limits<int32_t>::min());
      case PwOp::Neg: LOOP1(wrap_neg(x));
      case PwOp::Abs: LOOP1(wrap_abs(x));
      case PwOp::Relu: LOOP1(x > 0 ? x : 0);
      case PwOp::Clip: LOOP1(std::min(std::max(x, lo), hi));
      case PwOp::Square: LOOP1(wrap_mul(x, x));
      case PwOp::Sign: LOOP1(x > 0 ? 1 : (x < 0 ? -1 : 0));
      case PwOp::Not: LOOP1(x == 0 ? 1 : 0);
      // Integer arithmetic wraps (two's complement), as ONNX Runtime's does; division
      // by zero gives 0 rather than a trap (ir/int_arith.h).
      case PwOp::Add: LOOP2(wrap_add(x, y));
      case PwOp::Sub: LOOP2(wrap_sub(x, y));
      case PwOp::Mul: LOOP2(wrap_mul(x, y));
      case PwOp::Div: LOOP2(int_div(x, y).value_or(0));
      case PwOp::Max: LOOP2(x > y ? x : y);
      case PwOp::Min: LOOP2(x < y ? x : y);
      case PwOp::Mod: LOOP2(int_mod(x, y, false).value_or(0));
      case PwOp::FMod: LOOP2(int_mod(x, y, true).value_or(0));
      case PwOp::Equal: LOOP2(x == y ? 1 : 0);
      case PwOp::Less: LOOP2(x < y ? 1 : 0);
      case PwOp::LessEqual: LOOP2(x <= y ? 1 : 0);
      case PwOp::Greater: LOOP2(x > y ? 1 : 0);
      case PwOp::GreaterEqual: LOOP2(x >= y ? 1 : 0);
      case PwOp::And: LOOP2((x != 0 && y != 0) ? 1 : 0);
      case PwOp::Or: LOOP2((x != 0 || y != 0) ? 1 : 0);
      case PwOp::Xor: LOOP2(((x != 0) != (y != 0)) ? 1 : 0);
      case PwOp::Where:
        for (int64_t j = 0; j < n; ++j) d[j] = a[j] != 0 ? b[j] : c[j];
        break;
      default:
        throw Error(std::string("pointwise: ") + pw_name(in.op) + " is not defined on integers");
#undef LOOP1
#undef LOOP2
    }
  }
}

// --- the iteration space ----------------------------------------------------------

// The iteration space after dropping extent-1 dims, ordering the dims by the first
// result's strides (outermost first: a result written in a transposed order is
// walked in its memory order, so a transposed operand of the same order runs as
// one contiguous stream) and merging dims that every operand walks contiguously
// (stride[i] == stride[i+1] * dims[i+1]).
struct Space {
  std::vector<int64_t> dims;                   // outer ..., inner
  std::vector<std::vector<int64_t>> strides;   // per operand (inputs, then outputs)
  // Per operand: 0, or the inner dim is `period` elements of it repeated (see
  // fold_periodic); its inner stride is then 1 within the period.
  std::vector<int64_t> period;
};

// A short inner dim that some inputs repeat along the next dim out (stride 0
// there, unit stride inside) while every other operand walks both dims as one
// contiguous run: a per-channel scale over a channels-last image (the gate of a
// squeeze-excitation block, x[H, W, C] * s[C]). Left as rows of C, each row pays
// the program's per-instruction dispatch for a few dozen elements; folded, the
// rows are one long run and those inputs are read from a buffer holding their
// period repeated. Only where the folded run is long enough for row mode (>= 32).
void fold_periodic(Space& s, size_t num_inputs) {
  const size_t nd = s.dims.size();
  if (nd < 2) return;
  const int64_t inner = s.dims[nd - 1], outer = s.dims[nd - 2];
  if (inner >= kBlock || inner * outer < 32) return;
  bool any = false;
  for (size_t k = 0; k < s.strides.size(); ++k) {
    const int64_t so = s.strides[k][nd - 2], si = s.strides[k][nd - 1];
    const bool repeats = k < num_inputs && so == 0 && si == 1;
    if (!repeats && so != si * inner) return;
    any = any || repeats;
  }
  if (!any) return;
  for (size_t k = 0; k < s.strides.size(); ++k) {
    const int64_t si = s.strides[k][nd - 1];
    if (k < num_inputs && s.strides[k][nd - 2] == 0 && si == 1) s.period[k] = inner;
    s.strides[k].pop_back();
    s.strides[k].back() = si;
  }
  s.dims.pop_back();
  s.dims.back() *= inner;
}

Space normalize(std::span<const int64_t> dims, std::span<const StridedRef> in, std::span<const StridedRef> out) {
  const size_t nops = in.size() + out.size();
  auto ref = [&](size_t k) -> const StridedRef& { return k < in.size() ? in[k] : out[k - in.size()]; };
  Space s;
  s.strides.resize(nops);
  s.period.assign(nops, 0);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    s.dims.push_back(dims[d]);
    for (size_t k = 0; k < nops; ++k) s.strides[k].push_back(ref(k).strides[d]);
  }
  if (!out.empty()) {
    const std::vector<int64_t> key = s.strides[in.size()];
    std::vector<size_t> order(s.dims.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return key[x] > key[y]; });
    Space t;
    t.strides.resize(nops);
    t.period = s.period;
    for (size_t d : order) {
      t.dims.push_back(s.dims[d]);
      for (size_t k = 0; k < nops; ++k) t.strides[k].push_back(s.strides[k][d]);
    }
    s = std::move(t);
  }
  // Merge from the inside out.
  for (size_t d = s.dims.size(); d-- > 1;) {
    bool merge = true;
    for (size_t k = 0; k < nops && merge; ++k) merge = s.strides[k][d - 1] == s.strides[k][d] * s.dims[d];
    if (!merge) continue;
    s.dims[d - 1] *= s.dims[d];
    s.dims.erase(s.dims.begin() + static_cast<int64_t>(d));
    for (auto& st : s.strides) {
      st[d - 1] = st[d];
      st.erase(st.begin() + static_cast<int64_t>(d));
    }
  }
  if (s.dims.empty()) {
    s.dims.push_back(1);
    for (auto& st : s.strides) st.push_back(0);
  }
  fold_periodic(s, in.size());
  // Inner runs this short (a blocked layout's 8 lanes against a plain operand)
  // would run packed, a few rows to a block and each row copied alone; a long dim
  // walked with strides goes innermost instead.
  constexpr int64_t kShortRun = 32;
  if (s.dims.back() < kShortRun && s.dims.size() > 1) {
    const size_t longest = static_cast<size_t>(std::max_element(s.dims.begin(), s.dims.end() - 1) - s.dims.begin());
    if (s.dims[longest] >= 2 * kShortRun) {
      std::rotate(s.dims.begin() + static_cast<int64_t>(longest), s.dims.begin() + static_cast<int64_t>(longest) + 1,
                  s.dims.end());
      for (auto& st : s.strides)
        std::rotate(st.begin() + static_cast<int64_t>(longest), st.begin() + static_cast<int64_t>(longest) + 1, st.end());
    }
  }
  return s;
}

template <class T>
struct Runner {
  const PwProgram& p;
  std::span<const StridedRef> in, out;
  Space s;
  int64_t inner = 1, rows = 1;
  bool packed = false;  // inner rows too short to run one at a time: several to a block
  std::vector<size_t> esize;

  Runner(const PwProgram& prog, std::span<const StridedRef> i, std::span<const StridedRef> o,
         std::span<const int64_t> dims)
      : p(prog), in(i), out(o), s(normalize(dims, i, o)) {
    inner = s.dims.back();
    for (size_t d = 0; d + 1 < s.dims.size(); ++d) rows *= s.dims[d];
    packed = inner < 32 && rows > 1;
    for (const StridedRef& r : in) esize.push_back(dtype_size(r.dtype));
    for (const StridedRef& r : out) esize.push_back(dtype_size(r.dtype));
    plan_segments();
  }

  int64_t total() const { return rows * inner; }

  void exec(T* const* reg, int64_t n) const {
    if constexpr (std::is_same_v<T, float>) exec_f32(p.code.data(), p.code.size(), reg, n);
    else exec_i64(p.code.data(), p.code.size(), reg, n);
  }

  // Row mode: elements [j0, j0 + n) of the row whose operand offsets are `base`.
  // How each operand's run along the inner dim is read, and whether each result
  // is computed straight into its output (dense, of the compute type, written by
  // an instruction of its own).
  enum class Read : uint8_t { InPlace, Broadcast, Strided, Convert, Periodic };

  // Per thread: each periodic input's period (Space::period) repeated to cover a
  // block at any phase, and the element offset it was read from (-1: not yet).
  struct Repeats {
    std::vector<std::vector<T>> buf;
    std::vector<int64_t> from;
  };
  std::vector<Read> reads;
  std::vector<bool> direct;
  // A program that only copies an input to its one result, stored converted (a
  // Cast): the store reads the input's run itself, with no pass through scratch.
  bool store_input = false;

  void plan_segments() {
    const size_t ni = in.size();
    for (size_t k = 0; k < ni; ++k) {
      const int64_t st = s.strides[k].back();
      const bool native = (std::is_same_v<T, float> && in[k].dtype == DType::Float32) ||
                          (std::is_same_v<T, int64_t> && in[k].dtype == DType::Int64);
      reads.push_back(s.period[k] ? Read::Periodic
                      : st == 1 && native ? Read::InPlace
                      : st == 0 ? Read::Broadcast
                      : native ? Read::Strided : Read::Convert);
    }
    for (size_t k = 0; k < out.size(); ++k) {
      const bool native = (std::is_same_v<T, float> && out[k].dtype == DType::Float32) ||
                          (std::is_same_v<T, int64_t> && out[k].dtype == DType::Int64);
      bool unique = true;
      for (size_t o = 0; o < out.size(); ++o) unique = unique && (o == k || p.results[o] != p.results[k]);
      direct.push_back(native && unique && s.strides[ni + k].back() == 1 && p.results[k] >= p.num_inputs);
    }
    store_input = out.size() == 1 && !direct[0] && p.code.size() == 1 && p.code[0].op == PwOp::Copy &&
                  p.code[0].a < p.num_inputs && p.results[0] == p.code[0].dst;
  }

  // Copies input k's run of n elements at src (inner stride st) into dst, converted
  // to the compute type (its Read kind, Periodic aside).
  void load_run(size_t k, const char* src, int64_t st, int64_t n, T* dst) const {
    switch (reads[k]) {
      case Read::InPlace: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T)); break;
      case Read::Broadcast: {
        const T v = element_as<T>(src, in[k].dtype);
        for (int64_t j = 0; j < n; ++j) dst[j] = v;
        break;
      }
      case Read::Strided: {
        const T* f = reinterpret_cast<const T*>(src);
        for (int64_t j = 0; j < n; ++j) dst[j] = f[j * st];
        break;
      }
      default: convert<T>(src, st, in[k].dtype, n, dst); break;
    }
  }

  // Stores n values v of result k at dst (inner stride st), converted to its type.
  void store_run(size_t k, char* dst, int64_t st, const T* v, int64_t n) const {
    const size_t o = in.size() + k;
    const bool native = (std::is_same_v<T, float> && out[k].dtype == DType::Float32) ||
                        (std::is_same_v<T, int64_t> && out[k].dtype == DType::Int64);
    if (native && st == 1) {
      std::memcpy(dst, v, static_cast<size_t>(n) * sizeof(T));
    } else if (native) {
      T* d = reinterpret_cast<T*>(dst);
      for (int64_t j = 0; j < n; ++j) d[j * st] = v[j];
    } else if (!store_half(dst, st, out[k].dtype, v, n)) {
      for (int64_t j = 0; j < n; ++j) store_element<T>(dst + j * st * static_cast<int64_t>(esize[o]), out[k].dtype, v[j]);
    }
  }

  void run_segment(const int64_t* base, int64_t j0, int64_t n, T* scratch, T** reg, Repeats& rep,
                   const T* const* staged = nullptr) const {
    const size_t ni = in.size();
    for (size_t k = 0; k < ni; ++k) {
      if (staged && staged[k]) {  // this row's run, gathered by run_tiles
        reg[k] = const_cast<T*>(staged[k]);
        continue;
      }
      const int64_t st = s.strides[k].back();
      const char* src = static_cast<const char*>(in[k].data) + (base[k] + j0 * st) * static_cast<int64_t>(esize[k]);
      T* dst = scratch + static_cast<int64_t>(k) * kBlock;
      reg[k] = dst;
      switch (reads[k]) {
        case Read::InPlace: reg[k] = const_cast<T*>(reinterpret_cast<const T*>(src)); break;
        case Read::Broadcast:
        case Read::Strided:
        case Read::Convert: load_run(k, src, st, n, dst); break;
        case Read::Periodic: {
          const int64_t period = s.period[k];
          std::vector<T>& b = rep.buf[k];
          if (rep.from[k] != base[k]) {
            b.resize(static_cast<size_t>(period + kBlock));
            convert<T>(static_cast<const char*>(in[k].data) + base[k] * static_cast<int64_t>(esize[k]), 1, in[k].dtype,
                       period, b.data());
            for (int64_t j = period; j < period + kBlock; ++j) b[j] = b[j - period];
            rep.from[k] = base[k];
          }
          reg[k] = b.data() + j0 % period;
          break;
        }
      }
    }
    auto out_ptr = [&](size_t k) {
      const int64_t st = s.strides[ni + k].back();
      return static_cast<char*>(const_cast<void*>(out[k].data)) + (base[ni + k] + j0 * st) * static_cast<int64_t>(esize[ni + k]);
    };
    if (store_input) {
      reg[p.results[0]] = reg[p.code[0].a];
    } else {
      for (size_t k = 0; k < out.size(); ++k)
        if (p.results[k] >= p.num_inputs)
          reg[p.results[k]] = direct[k] ? reinterpret_cast<T*>(out_ptr(k)) : scratch + static_cast<int64_t>(p.results[k]) * kBlock;
      exec(reg, n);
    }
    for (size_t k = 0; k < out.size(); ++k)
      if (!direct[k]) store_run(k, out_ptr(k), s.strides[ni + k].back(), reg[p.results[k]], n);
  }

  // True when an input walks the rows with unit stride and the inner dim with a
  // long one (a transposed view: MLP-Mixer's token-mixing output added to the
  // residual, read as [channels, tokens]): one row at a time then reads one
  // element per cache line, and a power-of-two stride puts those lines into a
  // few L1 sets, which thrash. Such a space runs in tiles (see run_tiles).
  bool transposed_input(size_t k) const {
    const size_t nd = s.dims.size();
    if (!std::is_same_v<T, float> || in[k].dtype != DType::Float32 || nd < 2 || rows != s.dims[nd - 2]) return false;
    const int64_t col = s.strides[k].back();
    return s.strides[k][nd - 2] == 1 && (col > 16 || col < -16);
  }
  bool tiled() const {
    if (s.dims.size() < 2 || inner < kTileCols || rows < kTileRows) return false;
    for (size_t k = 0; k < in.size(); ++k)
      if (transposed_input(k)) return true;
    return false;
  }

  static constexpr int64_t kTileRows = 16, kTileCols = 64;

  // Rows [r0, r1) of a space with one row dim (the others of extent 1) in tiles
  // of kTileRows x kTileCols. A transposed input's tile is first gathered row-major
  // into a buffer, reading its columns, which are contiguous in memory, whole.
  void run_tiles(int64_t r0, int64_t r1, T* scratch, T** reg, Repeats& rep) const {
    const size_t nops = s.strides.size(), rd = s.dims.size() - 2, ni = in.size();
    std::vector<int64_t> base(nops);
    std::vector<std::vector<T>> buf(ni);
    std::vector<const T*> staged(ni, nullptr);
    for (size_t k = 0; k < ni; ++k)
      if (transposed_input(k)) buf[k].resize(static_cast<size_t>(kTileRows * kTileCols));
    for (int64_t t0 = r0; t0 < r1; t0 += kTileRows) {
      const int64_t tr = std::min(t0 + kTileRows, r1) - t0;
      for (int64_t j0 = 0; j0 < inner; j0 += kTileCols) {
        const int64_t n = std::min(kTileCols, inner - j0);
        for (size_t k = 0; k < ni; ++k) {
          if (buf[k].empty()) continue;
          const float* src = static_cast<const float*>(in[k].data) + in[k].offset + t0 * s.strides[k][rd];
          const int64_t cs = s.strides[k].back();
          T* b = buf[k].data();
          for (int64_t j = 0; j < n; ++j) {
            const float* col = src + (j0 + j) * cs;
            for (int64_t r = 0; r < tr; ++r) b[r * kTileCols + j] = col[r];
          }
        }
        for (int64_t r = 0; r < tr; ++r) {
          for (size_t k = 0; k < nops; ++k)
            base[k] = (k < ni ? in[k].offset : out[k - ni].offset) + (t0 + r) * s.strides[k][rd];
          for (size_t k = 0; k < ni; ++k) staged[k] = buf[k].empty() ? nullptr : buf[k].data() + r * kTileCols;
          run_segment(base.data(), j0, n, scratch, reg, rep, staged.data());
        }
      }
    }
  }

  // Row mode over rows [r0, r1).
  void run_rows(int64_t r0, int64_t r1, T* scratch, T** reg, Repeats& rep) const {
    if (tiled()) {
      run_tiles(r0, r1, scratch, reg, rep);
      return;
    }
    const size_t nops = s.strides.size(), nd = s.dims.size();
    std::vector<int64_t> idx(nd, 0), base(nops, 0);
    int64_t rem = r0;
    for (size_t d = nd - 1; d-- > 0;) {
      idx[d] = rem % s.dims[d];
      rem /= s.dims[d];
    }
    for (size_t k = 0; k < nops; ++k) {
      base[k] = (k < in.size() ? in[k].offset : out[k - in.size()].offset);
      for (size_t d = 0; d + 1 < nd; ++d) base[k] += idx[d] * s.strides[k][d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t j0 = 0; j0 < inner; j0 += kBlock) run_segment(base.data(), j0, std::min(kBlock, inner - j0), scratch, reg, rep);
      for (size_t d = nd - 1; d-- > 0;) {  // odometer over the outer dims
        if (++idx[d] < s.dims[d]) {
          for (size_t k = 0; k < nops; ++k) base[k] += s.strides[k][d];
          break;
        }
        for (size_t k = 0; k < nops; ++k) base[k] -= s.strides[k][d] * (s.dims[d] - 1);
        idx[d] = 0;
      }
    }
  }

  // Row mode on the only row: its elements [j0, j1), a block at a time.
  void run_blocks(int64_t j0, int64_t j1, T* scratch, T** reg, Repeats& rep) const {
    std::vector<int64_t> base(s.strides.size());
    for (size_t k = 0; k < base.size(); ++k) base[k] = k < in.size() ? in[k].offset : out[k - in.size()].offset;
    for (int64_t j = j0; j < j1; j += kBlock) run_segment(base.data(), j, std::min(kBlock, j1 - j), scratch, reg, rep);
  }

  // Packed mode over rows [r0, r1) of a space whose rows are too short to run one at
  // a time (a head of 16 read through a transpose: [batch, seq, heads, 16] as [batch,
  // heads, seq, 16]): `pack` rows side by side fill a block, each operand's rows copied
  // in whole (a transposed view's rows are contiguous), so the program's dispatch is
  // paid once per block and no offset is computed element by element.
  int64_t pack() const { return std::max<int64_t>(1, kBlock / inner); }

  void run_packed(int64_t r0, int64_t r1, T* scratch, T** reg) const {
    const size_t nops = s.strides.size(), nd = s.dims.size(), ni = in.size();
    std::vector<int64_t> idx(nd, 0), base(nops, 0), bases(nops * static_cast<size_t>(pack()));
    int64_t rem = r0;
    for (size_t d = nd - 1; d-- > 0;) {
      idx[d] = rem % s.dims[d];
      rem /= s.dims[d];
    }
    for (size_t k = 0; k < nops; ++k) {
      base[k] = k < ni ? in[k].offset : out[k - ni].offset;
      for (size_t d = 0; d + 1 < nd; ++d) base[k] += idx[d] * s.strides[k][d];
    }
    for (int64_t g0 = r0; g0 < r1; g0 += pack()) {
      const int64_t nr = std::min(pack(), r1 - g0);
      for (int64_t r = 0; r < nr; ++r) {
        for (size_t k = 0; k < nops; ++k) bases[static_cast<size_t>(r) * nops + k] = base[k];
        for (size_t d = nd - 1; d-- > 0;) {  // odometer over the outer dims
          if (++idx[d] < s.dims[d]) {
            for (size_t k = 0; k < nops; ++k) base[k] += s.strides[k][d];
            break;
          }
          for (size_t k = 0; k < nops; ++k) base[k] -= s.strides[k][d] * (s.dims[d] - 1);
          idx[d] = 0;
        }
      }
      for (size_t k = 0; k < ni; ++k) {
        const int64_t st = s.strides[k].back();
        T* dst = scratch + static_cast<int64_t>(k) * kBlock;
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t at = bases[static_cast<size_t>(r) * nops + k] * static_cast<int64_t>(esize[k]);
          load_run(k, static_cast<const char*>(in[k].data) + at, st, inner, dst + r * inner);
        }
        reg[k] = dst;
      }
      for (size_t k = 0; k < out.size(); ++k)
        if (p.results[k] >= p.num_inputs) reg[p.results[k]] = scratch + static_cast<int64_t>(p.results[k]) * kBlock;
      exec(reg, nr * inner);
      for (size_t k = 0; k < out.size(); ++k)
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t at = bases[static_cast<size_t>(r) * nops + ni + k] * static_cast<int64_t>(esize[ni + k]);
          store_run(k, static_cast<char*>(const_cast<void*>(out[k].data)) + at, s.strides[ni + k].back(),
                    reg[p.results[k]] + r * inner, inner);
        }
    }
  }

  void run(int threads) const {
    const int64_t work = total();
    if (work == 0) return;
    // Enough work per thread to pay for waking it (~20 us of elementwise work).
    const int64_t per_thread = 16384 / std::max<int64_t>(1, static_cast<int64_t>(p.code.size()));
    int team = threads > 0 ? threads : omp_get_max_threads();
    team = static_cast<int>(std::clamp<int64_t>(work / std::max<int64_t>(per_thread, 1), 1, team));
    // A tensor whose elements fold into one dense row (most elementwise steps: a
    // SiLU on a convolution's output, an Add of two equal shapes) splits by blocks
    // of that row, or a second thread would never start.
    const bool one_row = !packed && rows == 1;
    const int64_t units = packed ? (rows + pack() - 1) / pack() : one_row ? (work + kBlock - 1) / kBlock : rows;
    team = static_cast<int>(std::min<int64_t>(team, units));
    auto body = [&](int t, int nt) {
      std::vector<T> scratch(static_cast<size_t>(p.num_regs) * kBlock);
      std::vector<T*> reg(static_cast<size_t>(p.num_regs));
      for (int r = p.num_inputs; r < p.num_regs; ++r) reg[static_cast<size_t>(r)] = scratch.data() + static_cast<int64_t>(r) * kBlock;
      const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
      Repeats rep{std::vector<std::vector<T>>(in.size()), std::vector<int64_t>(in.size(), -1)};
      if (packed) run_packed(u0 * pack(), std::min(rows, u1 * pack()), scratch.data(), reg.data());
      else if (one_row) run_blocks(u0 * kBlock, std::min(inner, u1 * kBlock), scratch.data(), reg.data(), rep);
      else run_rows(u0, u1, scratch.data(), reg.data(), rep);
    };
    parallel_teams(team, body);
  }
};

}  // namespace

void run_pointwise_tile(const PwProgram& p, const float* first, int64_t ld_first, std::span<const StridedRef> rest,
                        int64_t r0, int64_t rows, int64_t c0, int64_t cols, float* out, int64_t ld_out,
                        const int64_t* shift) {
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(kMaxRegs) * kBlock);
  float* reg[kMaxRegs];
  for (int r = 0; r < p.num_regs; ++r) reg[r] = scratch.data() + static_cast<int64_t>(r) * kBlock;
  // Each operand's elements for rows [i, i + n) of the tile, `n` rows side by side.
  auto gather = [&](int64_t i, int64_t n) {
    for (size_t k = 0; k < rest.size(); ++k) {
      const StridedRef& o = rest[k];
      float* dst = scratch.data() + static_cast<int64_t>(k + 1) * kBlock;
      const int64_t es = static_cast<int64_t>(dtype_size(o.dtype)), st = o.strides[1];
      for (int64_t q = 0; q < n; ++q) {
        const int64_t base = o.offset + (shift ? shift[k] : 0) + (r0 + i + q) * o.strides[0] + c0 * st;
        const char* src = static_cast<const char*>(o.data) + base * es;
        float* d = dst + q * cols;
        if (o.dtype == DType::Float32 && st == 1) {
          std::memcpy(d, src, static_cast<size_t>(cols) * sizeof(float));
        } else if (st == 0) {
          const float v = element_as<float>(src, o.dtype);
          for (int64_t j = 0; j < cols; ++j) d[j] = v;
        } else {
          convert<float>(src, st, o.dtype, cols, d);
        }
      }
      reg[k + 1] = dst;
    }
  };
  // The tile's rows lie side by side in `first` (a full panel): one pass of the
  // program over all of them; the program's per-instruction cost is paid once per
  // tile instead of once per row of 16 (an erf GELU cost 4 ns per element so).
  if (ld_first == cols && rows > 1 && rows * cols <= kBlock) {
    reg[0] = const_cast<float*>(first);
    gather(0, rows);
    exec_f32(p.code.data(), p.code.size(), reg, rows * cols);
    for (int64_t i = 0; i < rows; ++i)
      std::memcpy(out + i * ld_out, reg[p.results[0]] + i * cols, static_cast<size_t>(cols) * sizeof(float));
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    reg[0] = const_cast<float*>(first + i * ld_first);
    for (size_t k = 0; k < rest.size(); ++k) {
      const StridedRef& o = rest[k];
      float* dst = scratch.data() + static_cast<int64_t>(k + 1) * kBlock;
      const int64_t base = o.offset + (shift ? shift[k] : 0) + (r0 + i) * o.strides[0] + c0 * o.strides[1],
                    st = o.strides[1];
      if (o.dtype == DType::Float32 && st == 1) {
        reg[k + 1] = const_cast<float*>(static_cast<const float*>(o.data) + base);
        continue;
      }
      const int64_t es = static_cast<int64_t>(dtype_size(o.dtype));
      const char* src = static_cast<const char*>(o.data) + base * es;
      if (st == 0) {
        const float v = element_as<float>(src, o.dtype);
        for (int64_t j = 0; j < cols; ++j) dst[j] = v;
      } else {
        convert<float>(src, st, o.dtype, cols, dst);
      }
      reg[k + 1] = dst;
    }
    exec_f32(p.code.data(), p.code.size(), reg, cols);
    std::memcpy(out + i * ld_out, reg[p.results[0]], static_cast<size_t>(cols) * sizeof(float));
  }
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * std::max<int64_t>(dims[i], 1);
  return s;
}

void run_pointwise(const PwProgram& p, std::span<const StridedRef> inputs, std::span<const StridedRef> outputs,
                   std::span<const int64_t> dims, int threads) {
  require(static_cast<int>(inputs.size()) == p.num_inputs, "pointwise: operand count does not match the program");
  require(outputs.size() == p.results.size(), "pointwise: result count does not match the program");
  require(dims.size() <= static_cast<size_t>(kMaxRank), "pointwise: rank above " + std::to_string(kMaxRank));
  for (const StridedRef& r : inputs) require(r.strides.size() == dims.size(), "pointwise: operand rank mismatch");
  for (const StridedRef& r : outputs) require(r.strides.size() == dims.size(), "pointwise: result rank mismatch");
  for (int64_t d : dims)
    if (d == 0) return;
  if (p.compute == PwProgram::Compute::Float32) Runner<float>(p, inputs, outputs, dims).run(threads);
  else Runner<int64_t>(p, inputs, outputs, dims).run(threads);
}

}  // namespace isomer::kernels
