#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "kernels/pointwise.h"
#include "kernels/vmath.h"
#include "strided_ref.h"

// The pointwise kernel (kernels/pointwise.h): strided, broadcast and blocked operands,
// conversions on load and store, specialized programs, rows split across threads.
namespace isomer::kernels {
namespace {


// y[b, s, d] = x[b, d, s] (a transposed view) * table[s, d] + 1 (a scalar broadcast):
// the rotary-embedding Mul on a transposed tensor, through every code path.
TEST(Pointwise, TransposedAndBroadcastOperands) {
  for (int64_t D : {64, 3}) {  // row mode, and short rows (gather mode)
    const int64_t B = 3, S = 37;
    std::vector<float> x(static_cast<size_t>(B * D * S)), table(static_cast<size_t>(S * D)), y(static_cast<size_t>(B * S * D));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 17) - 8;
    for (size_t i = 0; i < table.size(); ++i) table[i] = 0.5f + static_cast<float>(i % 5);
    float one = 1;
    PwProgram p;
    p.num_inputs = p.num_regs = 3;
    int m = p.emit(PwOp::Mul, 0, 1);
    p.results = {p.emit(PwOp::Add, m, 2)};
    std::vector<int64_t> dims = {B, S, D};
    StridedRef in[] = {ref(x.data(), DType::Float32, {D * S, 1, S}), ref(table.data(), DType::Float32, {0, D, 1}),
                       ref(&one, DType::Float32, {0, 0, 0})};
    StridedRef out[] = {ref(y.data(), DType::Float32, {S * D, D, 1})};
    run_pointwise(p, in, out, dims, 2);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < D; ++d)
          ASSERT_EQ(y[static_cast<size_t>((b * S + s) * D + d)], x[static_cast<size_t>((b * D + d) * S + s)] * table[static_cast<size_t>(s * D + d)] + 1)
              << b << " " << s << " " << d;
  }
}

TEST(Pointwise, ConvertsOnLoadAndStore) {
  // Where(int64 mask != 0, x, -inf) stored as float; Less of floats stored as bool;
  // a float stored as int8 converts as Cast does.
  std::vector<int64_t> mask = {0, 1, 1, 0, 5, 0};
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  float neg = -INFINITY;
  std::vector<float> y(6);
  std::vector<uint8_t> lt(6);
  std::vector<int8_t> i8(6);
  PwProgram p;
  p.num_inputs = p.num_regs = 3;
  int w = p.emit(PwOp::Where, 0, 1, 2);
  int scaled = p.emit(PwOp::Affine, 1, 0, 0, 100.f, -200.f);
  p.results = {w, p.emit(PwOp::Less, 1, 2), p.emit(PwOp::Trunc, scaled)};
  std::vector<int64_t> dims = {6};
  StridedRef in[] = {ref(mask.data(), DType::Int64, {1}), ref(x.data(), DType::Float32, {1}), ref(&neg, DType::Float32, {0})};
  StridedRef out[] = {ref(y.data(), DType::Float32, {1}), ref(lt.data(), DType::Bool, {1}), ref(i8.data(), DType::Int8, {1})};
  run_pointwise(p, in, out, dims);
  EXPECT_TRUE(std::isinf(y[0]) && y[0] < 0);
  EXPECT_EQ(y[1], 2);
  EXPECT_EQ(y[4], 5);
  for (uint8_t b : lt) EXPECT_EQ(b, 0);
  EXPECT_EQ(i8[0], -100);
  EXPECT_EQ(i8[1], 0);
  EXPECT_EQ(i8[2], 100);
  EXPECT_EQ(i8[3], -56);  // 200 wraps, as Cast converts (ir/float_to_int.h) and ONNX Runtime's does
}

TEST(Pointwise, IntegerArithmeticNeverTraps) {
  std::vector<int64_t> a = {7, -7, std::numeric_limits<int64_t>::min(), 5}, b = {2, 2, -1, 0};
  std::vector<int64_t> q(4), r(4);
  PwProgram p;
  p.compute = PwProgram::Compute::Int64;
  p.num_inputs = p.num_regs = 2;
  p.results = {p.emit(PwOp::Div, 0, 1), p.emit(PwOp::Mod, 0, 1)};
  std::vector<int64_t> dims = {4};
  StridedRef in[] = {ref(a.data(), DType::Int64, {1}), ref(b.data(), DType::Int64, {1})};
  StridedRef out[] = {ref(q.data(), DType::Int64, {1}), ref(r.data(), DType::Int64, {1})};
  run_pointwise(p, in, out, dims);
  EXPECT_EQ(q, (std::vector<int64_t>{3, -3, std::numeric_limits<int64_t>::min(), 0}));
  EXPECT_EQ(r, (std::vector<int64_t>{1, 1, 0, 0}));  // Mod takes the divisor's sign
}

// A narrower integer type inside an int64 program: WrapInt keeps the low bits (sign- or
// zero-extended), ToInt32 gives INT32_MIN where int32 has no value (a float -> int32 Cast).
TEST(Pointwise, IntegerWrapAndInt32Range) {
  constexpr int64_t kMin32 = std::numeric_limits<int32_t>::min();
  std::vector<int64_t> a = {200, -129, 70000, 3000000000, std::numeric_limits<int64_t>::min(), -7};
  std::vector<int64_t> s8(6), u16(6), i32(6);
  PwProgram p;
  p.compute = PwProgram::Compute::Int64;
  p.num_inputs = p.num_regs = 1;
  p.results = {p.emit(PwOp::WrapInt, 0, 0, 0, 8, 1), p.emit(PwOp::WrapInt, 0, 0, 0, 16, 0), p.emit(PwOp::ToInt32, 0)};
  std::vector<int64_t> dims = {6};
  StridedRef in[] = {ref(a.data(), DType::Int64, {1})};
  StridedRef out[] = {ref(s8.data(), DType::Int64, {1}), ref(u16.data(), DType::Int64, {1}), ref(i32.data(), DType::Int64, {1})};
  run_pointwise(p, in, out, dims);
  EXPECT_EQ(s8, (std::vector<int64_t>{-56, 127, 112, 0, 0, -7}));
  EXPECT_EQ(u16, (std::vector<int64_t>{200, 65407, 4464, 24064, 0, 65529}));
  EXPECT_EQ(i32, (std::vector<int64_t>{200, -129, 70000, kMin32, kMin32, -7}));
}

// SiLU as one division, x / (1 + e^-x), within a few ulps of the double-precision
// value over the whole range: underflow (-0 for very negative x), overflow of e^-x,
// zero, large x (x itself), a tail shorter than a vector, and NaN through.
TEST(Pointwise, SiluOverTheWholeRange) {
  std::vector<float> x;
  for (float v = -120.0f; v <= 120.0f; v += 0.37f) x.push_back(v);
  for (float v : {-88.8f, -87.4f, -1e-30f, 0.0f, 1e-30f, 88.8f, 1e30f, -1e30f}) x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> y(x.size(), 7.0f);
  PwProgram p;
  p.num_inputs = p.num_regs = 1;
  p.results = {p.emit(PwOp::Silu, 0)};
  const std::vector<StridedRef> in = {ref(x.data(), DType::Float32, {1})}, out = {ref(y.data(), DType::Float32, {1})};
  const int64_t n = static_cast<int64_t>(x.size());
  run_pointwise(p, in, out, std::span<const int64_t>(&n, 1), 1);
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    const double want = double(x[i]) / (1.0 + std::exp(-double(x[i])));
    // Below -88.7 e^-x overflows and the result is -0 where x e^x is about -1e-37.
    EXPECT_NEAR(y[i], want, 4e-7 * std::fabs(want) + 1e-35) << "x = " << x[i];
  }
}

// A result written in the same transposed order as its operand (the runtime does
// this for attention's scaled q and k): the pass walks memory order.
TEST(Pointwise, ResultInTheOperandsTransposedOrder) {
  const int64_t B = 2, H = 3, S = 5, D = 4;  // logical [B, H, S, D], stored [B, S, H, D]
  std::vector<float> x(static_cast<size_t>(B * H * S * D)), y(x.size(), -1);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  PwProgram p;
  p.num_inputs = p.num_regs = 1;
  p.results = {p.emit(PwOp::Affine, 0, 0, 0, 0.5f, 0)};
  const std::vector<int64_t> dims = {B, H, S, D}, st = {S * H * D, D, H * D, 1};
  StridedRef in[] = {ref(x.data(), DType::Float32, st)};
  StridedRef out[] = {ref(y.data(), DType::Float32, st)};
  run_pointwise(p, in, out, dims, 1);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], 0.5f * x[i]) << i;
}

// Programs specialized to their known scalar operands: text in, text out.
TEST(Pointwise, SpecializedToKnownScalars) {
  // The exact GELU as exporters write it: Div(x, sqrt 2), Erf, Add 1, Mul x, Mul 0.5,
  // the constants as operands 1..3.
  PwProgram gelu;
  gelu.num_inputs = gelu.num_regs = 4;
  int d = gelu.emit(PwOp::Div, 0, 1), e = gelu.emit(PwOp::Erf, d), a = gelu.emit(PwOp::Add, e, 2);
  gelu.results = {gelu.emit(PwOp::Mul, gelu.emit(PwOp::Mul, 0, a), 3)};
  const std::vector<std::optional<float>> gk = {std::nullopt, 1.4142135f, 1.0f, 0.5f};
  SpecializedProgram g = specialize(gelu, gk);
  EXPECT_EQ(g.program.text(), "f32 in1: r1=GeluErf(r0) -> r1");
  EXPECT_EQ(g.operands, (std::vector<int>{0}));
  // Halved first: (x * 0.5) * (1 + erf(x * 0.7071)).
  PwProgram first;
  first.num_inputs = first.num_regs = 1;
  int h = first.emit(PwOp::Affine, 0, 0, 0, 0.5f, 0.0f);
  int p1 = first.emit(PwOp::Affine, first.emit(PwOp::Erf, first.emit(PwOp::Affine, 0, 0, 0, 0.70710678f, 0.0f)), 0, 0, 1.0f, 1.0f);
  first.results = {first.emit(PwOp::Mul, h, p1)};
  EXPECT_EQ(specialize(first, {}).program.text(), "f32 in1: r1=GeluErf(r0) -> r1");
  // GPT-2's tanh GELU: 0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3))), x^3 as Pow.
  PwProgram gpt;
  gpt.num_inputs = gpt.num_regs = 6;
  int cube = gpt.emit(PwOp::Pow, 0, 1);
  int inner = gpt.emit(PwOp::Mul, gpt.emit(PwOp::Add, 0, gpt.emit(PwOp::Mul, 2, cube)), 3);
  int th = gpt.emit(PwOp::Add, gpt.emit(PwOp::Tanh, inner), 4);
  gpt.results = {gpt.emit(PwOp::Mul, gpt.emit(PwOp::Mul, 0, 5), th)};
  const std::vector<std::optional<float>> k6 = {std::nullopt, std::nullopt, 0.044715f, 0.7978845608f, 1.0f, 0.5f};
  // Pow with a runtime exponent stays Pow; as PowConst (the exponent folded) it is a cube.
  EXPECT_NE(specialize(gpt, k6).program.text(), "f32 in1: r1=GeluTanh(r0) -> r1");
  gpt.code[0] = PwInstr{PwOp::PowConst, gpt.code[0].dst, 0, 0, 0, 3.0f, 0.0f};
  EXPECT_EQ(specialize(gpt, k6).program.text(), "f32 in1: r1=GeluTanh(r0) -> r1");
  // 3 - (x * 2 + 1) with the constants as operands: one Affine; y is read as is.
  PwProgram lin;
  lin.num_inputs = lin.num_regs = 5;
  int t = lin.emit(PwOp::Add, lin.emit(PwOp::Mul, 0, 1), 2);
  lin.results = {lin.emit(PwOp::Mul, lin.emit(PwOp::Sub, 3, t), 4)};
  SpecializedProgram l = specialize(lin, std::vector<std::optional<float>>{std::nullopt, 2.0f, 1.0f, 3.0f, std::nullopt});
  EXPECT_EQ(l.program.text(), "f32 in2: r2=Affine(r0)[-2,2] r3=Mul(r2,r1) -> r3");
  EXPECT_EQ(l.operands, (std::vector<int>{0, 4}));
  // SwiGLU's gate: silu(a) * b, silu exported as a * sigmoid(a).
  PwProgram swiglu;
  swiglu.num_inputs = swiglu.num_regs = 2;
  swiglu.results = {swiglu.emit(PwOp::Mul, swiglu.emit(PwOp::Mul, swiglu.emit(PwOp::Sigmoid, 0), 0), 1)};
  EXPECT_EQ(specialize(swiglu, {}).program.text(), "f32 in2: r2=Silu(r0) r3=Mul(r2,r1) -> r3");
  // Identity steps vanish; a result that is an operand is copied.
  PwProgram id;
  id.num_inputs = id.num_regs = 2;
  id.results = {id.emit(PwOp::Mul, id.emit(PwOp::Copy, 0), 1)};
  EXPECT_EQ(specialize(id, std::vector<std::optional<float>>{std::nullopt, 1.0f}).program.text(), "f32 in1: r1=Copy(r0) -> r1");
  // A constant numerator stays a division; a constant result is left alone.
  PwProgram recip;
  recip.num_inputs = recip.num_regs = 2;
  recip.results = {recip.emit(PwOp::Div, 1, 0)};
  EXPECT_EQ(specialize(recip, std::vector<std::optional<float>>{std::nullopt, 1.0f}).program.text(), recip.text());
}

// A blocked operand (8 lanes innermost) plus a plain one, into the blocked layout
// (ViT's position embedding added to the patch convolution's output): the walk
// goes along the long dim with strides instead of gathering 8-lane runs.
TEST(Pointwise, BlockedAgainstPlainOperands) {
  const int64_t S = 70, B = 5, L = 8;  // logical [S, B * L]; blocked: [B][S][L]
  std::vector<float> x(static_cast<size_t>(S * B * L)), e(x.size()), y(x.size(), -1);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(i);
    e[i] = 0.25f * static_cast<float>(i % 13);
  }
  PwProgram p;
  p.num_inputs = p.num_regs = 2;
  p.results = {p.emit(PwOp::Add, 0, 1)};
  const std::vector<int64_t> dims = {S, B, L}, blocked = {L, S * L, 1}, plain = {B * L, L, 1};
  StridedRef in[] = {ref(x.data(), DType::Float32, blocked), ref(e.data(), DType::Float32, plain)};
  StridedRef out[] = {ref(y.data(), DType::Float32, blocked)};
  run_pointwise(p, in, out, dims, 2);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t l = 0; l < L; ++l) {
        const size_t at = static_cast<size_t>(b * S * L + s * L + l), pe = static_cast<size_t>(s * B * L + b * L + l);
        ASSERT_EQ(y[at], x[at] + e[pe]) << s << " " << b << " " << l;
      }
}

// A per-channel gate over a channels-last image, y[n, h, w, c] = x[n, h, w, c] *
// s[n, c] + bias (squeeze-excitation's Mul): rows of C fold into one run per image,
// s read as its period repeated (also converted from float64, also as two
// operands of different periods), at channel counts below, at and above a block.
TEST(Pointwise, PerChannelGateOverChannelsLast) {
  for (int64_t C : {3, 24, 40, 96, 255}) {
    const int64_t N = 2, H = 7, W = 9;
    std::mt19937 rng(static_cast<unsigned>(C));
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<float> x(static_cast<size_t>(N * H * W * C)), s(static_cast<size_t>(N * C)), y(x.size(), -1);
    std::vector<double> t(static_cast<size_t>(C));
    for (float& v : x) v = u(rng);
    for (float& v : s) v = u(rng);
    for (double& v : t) v = u(rng);
    float bias = 0.5f;
    PwProgram p;
    p.num_inputs = p.num_regs = 4;
    const int m = p.emit(PwOp::Mul, 0, 1);
    const int a = p.emit(PwOp::Add, m, 2);
    p.results = {p.emit(PwOp::Sub, a, 3)};
    const std::vector<int64_t> dims = {N, C, H, W};  // logical NCHW, stored NHWC
    StridedRef in[] = {ref(x.data(), DType::Float32, {H * W * C, 1, W * C, C}),
                       ref(s.data(), DType::Float32, {C, 1, 0, 0}), ref(&bias, DType::Float32, {0, 0, 0, 0}),
                       ref(t.data(), DType::Float64, {0, 1, 0, 0})};
    StridedRef out[] = {ref(y.data(), DType::Float32, {H * W * C, 1, W * C, C})};
    run_pointwise(p, in, out, dims, 2);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < H * W; ++i)
        for (int64_t c = 0; c < C; ++c) {
          const size_t at = static_cast<size_t>((n * H * W + i) * C + c);
          const float want = x[at] * s[static_cast<size_t>(n * C + c)] + bias - static_cast<float>(t[static_cast<size_t>(c)]);
          ASSERT_EQ(y[at], want) << C << " " << n << " " << i << " " << c;
        }
  }
}

// A dense tensor folds into one row; its blocks are shared between the threads
// (before, one row was one unit of work and a second thread never started). The
// split must not move any element: every length, odd ones included, in place and
// out of place, with a converted operand, equals the one-thread run.
TEST(Pointwise, OneDenseRowSplitsByBlocksAcrossThreads) {
  for (int64_t n : {int64_t{1}, kBlock - 1, 3 * kBlock + 17, int64_t{100003}}) {
    std::mt19937 rng(static_cast<unsigned>(n));
    std::uniform_real_distribution<float> u(-6, 6);
    std::vector<float> x(static_cast<size_t>(n));
    std::vector<double> t(static_cast<size_t>(n));
    for (float& v : x) v = u(rng);
    for (double& v : t) v = u(rng);
    const float bias = 0.25f;
    PwProgram p;  // x * sigmoid(x) + bias - t
    p.num_inputs = p.num_regs = 3;
    const int sg = p.emit(PwOp::Sigmoid, 0);
    const int m = p.emit(PwOp::Mul, 0, sg);
    const int a = p.emit(PwOp::Add, m, 1);
    p.results = {p.emit(PwOp::Sub, a, 2)};
    const std::vector<int64_t> dims = {n};
    auto run = [&](int threads, bool in_place) {
      std::vector<float> io = x, y(x.size(), -1);
      StridedRef in[] = {ref(io.data(), DType::Float32, {1}), ref(&bias, DType::Float32, {0}),
                         ref(t.data(), DType::Float64, {1})};
      StridedRef out[] = {ref(in_place ? io.data() : y.data(), DType::Float32, {1})};
      run_pointwise(p, in, out, dims, threads);
      return in_place ? io : y;
    };
    const std::vector<float> one = run(1, false);
    for (size_t i = 0; i < one.size(); i += 97) {
      const double xi = x[i];
      ASSERT_NEAR(one[i], xi / (1 + std::exp(-xi)) + bias - static_cast<float>(t[i]), 1e-5) << n << " " << i;
    }
    EXPECT_EQ(run(2, false), one) << n;
    EXPECT_EQ(run(2, true), one) << n;
  }
  // A per-channel gate over a channels-last image of one batch folds into one row
  // read with a periodic operand: each block starts at its own phase of the period.
  for (int64_t C : {24, 40, 255}) {
    const int64_t H = 57, W = 61;
    std::mt19937 rng(static_cast<unsigned>(C));
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<float> x(static_cast<size_t>(H * W * C)), sc(static_cast<size_t>(C));
    for (float& v : x) v = u(rng);
    for (float& v : sc) v = u(rng);
    PwProgram p;
    p.num_inputs = p.num_regs = 2;
    p.results = {p.emit(PwOp::Mul, 0, 1)};
    const std::vector<int64_t> dims = {1, C, H, W};
    auto run = [&](int threads) {
      std::vector<float> y(x.size(), -1);
      StridedRef in[] = {ref(x.data(), DType::Float32, {H * W * C, 1, W * C, C}),
                         ref(sc.data(), DType::Float32, {C, 1, 0, 0})};
      StridedRef out[] = {ref(y.data(), DType::Float32, {H * W * C, 1, W * C, C})};
      run_pointwise(p, in, out, dims, threads);
      return y;
    };
    const std::vector<float> two = run(2);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(two[i], x[i] * sc[i % static_cast<size_t>(C)]) << C << " " << i;
  }
}

// Rows shorter than 32 (a head of 16 read through a transpose, as a rotary
// embedding reads [batch, seq, heads, 16] as [batch, heads, seq, 16]) run packed,
// several rows to a block: every operand kind (a transposed view, a row broadcast
// over batch and heads, a scalar, a float64 operand converted), a dense and a
// transposed result, odd row lengths, one and two threads.
TEST(Pointwise, ShortRowsThroughATransposeRunPacked) {
  for (int64_t D : {2, 3, 16, 31}) {
    const int64_t B = 2, S = 9, H = 4;
    std::mt19937 rng(static_cast<unsigned>(D));
    std::uniform_real_distribution<float> u(-2, 2);
    std::vector<float> x(static_cast<size_t>(B * S * H * D)), c(static_cast<size_t>(S * D));
    std::vector<double> t(x.size());
    for (float& v : x) v = u(rng);
    for (float& v : c) v = u(rng);
    for (double& v : t) v = u(rng);
    const float half = 0.5f;
    PwProgram p;  // (x * c + t) * 0.5, and x - c
    p.num_inputs = p.num_regs = 4;
    const int m = p.emit(PwOp::Mul, 0, 1);
    const int a = p.emit(PwOp::Add, m, 3);
    p.results = {p.emit(PwOp::Mul, a, 2), p.emit(PwOp::Sub, 0, 1)};
    const std::vector<int64_t> dims = {B, H, S, D};                       // x stored [B, S, H, D]
    const std::vector<int64_t> xs = {S * H * D, D, H * D, 1}, ds = {H * S * D, S * D, D, 1};
    auto run = [&](int threads) {
      std::vector<float> y(x.size(), -1), z(x.size(), -1);
      StridedRef in[] = {ref(x.data(), DType::Float32, xs), ref(c.data(), DType::Float32, {0, 0, D, 1}),
                         ref(&half, DType::Float32, {0, 0, 0, 0}), ref(t.data(), DType::Float64, ds)};
      StridedRef out[] = {ref(y.data(), DType::Float32, ds), ref(z.data(), DType::Float32, xs)};
      run_pointwise(p, in, out, dims, threads);
      return std::make_pair(y, z);
    };
    const auto [y, z] = run(1);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t d = 0; d < D; ++d) {
            const size_t xi = static_cast<size_t>(b * xs[0] + h * xs[1] + i * xs[2] + d);
            const size_t di = static_cast<size_t>(b * ds[0] + h * ds[1] + i * ds[2] + d);
            const float cv = c[static_cast<size_t>(i * D + d)];
            ASSERT_EQ(y[di], (x[xi] * cv + static_cast<float>(t[di])) * half) << D << " " << di;
            ASSERT_EQ(z[xi], x[xi] - cv) << D << " " << xi;
          }
    EXPECT_EQ(run(2), std::make_pair(y, z)) << D;
  }
}

}  // namespace
}  // namespace isomer::kernels
