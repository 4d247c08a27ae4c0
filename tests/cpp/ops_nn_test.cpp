// Tests of the contraction entries (linear.cpp: MatMul, Gemm, Conv): results
// against textbook loops written here, shape rules (errors, symbolic dims), field
// semantics against float semantics, and the ONNX version hooks. Pools,
// normalizations and reductions are in ops_nn_pool_test.cpp.
#include <array>

#include "ops/reference_gemm.h"
#include "ops_nn_util.h"

namespace isomer {
namespace {
using namespace nn_test;

// ---- MatMul ------------------------------------------------------------------------

// Textbook batched matmul on explicit [batch, M, K] x [batch, K, N] with per-batch
// operand indices.
Vec naive_matmul(const Vec& a, const Vec& b, int64_t M, int64_t K, int64_t N,
                 const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  Vec out;
  for (auto [ia, ib] : pairs)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[ia * M * K + i * K + k] * b[ib * K * N + k * N + j];
        out.push_back(s);
      }
  return out;
}

TEST(OpsNnMatMul, TwoDimensional) {
  Vec a = random_values(3 * 5, 1), b = random_values(5 * 4, 2);
  expect_near(run("MatMul", {f64_tensor({3, 5}, a), f64_tensor({5, 4}, b)}), {3, 4},
              naive_matmul(a, b, 3, 5, 4, {{0, 0}}));
}

TEST(OpsNnMatMul, LargeMatchesNaive) {
  // Exercises the tiled kernel's edges (row remainders, several column and depth tiles).
  const int64_t M = 7, K = 300, N = 517;
  Vec a = random_values(M * K, 3), b = random_values(K * N, 4);
  expect_near(run("MatMul", {f64_tensor({M, K}, a), f64_tensor({K, N}, b)}), {M, N},
              naive_matmul(a, b, M, K, N, {{0, 0}}));
}

// What every double kernel computes for C[i, j] of A[M×K]·B[K×N]: each product added
// over the depth in order (by a fused multiply-add where the CPU has AVX2 and FMA, as
// the portable kernel compiled for them contracts it), in blocks of 256 (the depth
// tile) each summed from zero and added to the result.
double kernel_order_sum(const Vec& a, const Vec& b, int64_t K, int64_t N, int64_t i, int64_t j) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool fused = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  constexpr bool fused = false;
#endif
  double c = 0;
  for (int64_t k0 = 0; k0 < K; k0 += 256) {
    double block = 0;
    for (int64_t k = k0; k < std::min(K, k0 + 256); ++k)
      block = fused ? std::fma(a[i * K + k], b[k * N + j], block) : block + a[i * K + k] * b[k * N + j];
    c = c + block;
  }
  return c;
}

TEST(OpsNnMatMul, DoubleSumsAreTheSameToTheBitOnEveryKernel) {
  // What the portable kernel computes, and so the hand-written AVX2 kernel must
  // (constant folding gives the same weights either way). Rows 6 + 6 + 1 and 4 + 4 + 4 + 1
  // (remainders of both kernels' tiles), depth 300 (two depth tiles), 517 columns
  // (two column blocks, a partial panel).
  const int64_t M = 13, K = 300, N = 517;
  Vec a = random_values(M * K, 21), b = random_values(K * N, 22);
  const Vec got = run("MatMul", {f64_tensor({M, K}, a), f64_tensor({K, N}, b)}).to_f64();
  ASSERT_EQ(got.size(), static_cast<size_t>(M * N));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) ASSERT_EQ(got[i * N + j], kernel_order_sum(a, b, K, N, i, j)) << "at " << i << "," << j;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
TEST(OpsNnMatMul, DoubleSumsDoNotDependOnTheThreadCount) {
  // A large product is split into bands of rows (or, with few rows, of columns) of
  // the result, one per thread (a thread per 30 MFLOP at most): every element is
  // still one thread's sum in the kernels' order, whatever the count (the cap is
  // taken as given, so 3 bands on any machine). 301 rows (bands of whole 6-row tiles
  // and a remainder) by 517 columns (a partial panel), 93 MFLOP; then 5 rows by 6000
  // columns, 60 MFLOP (split by columns).
  struct Restore {
    unsigned before = ops::gemm_set_max_threads(0);
    ~Restore() { ops::gemm_set_max_threads(before); }
  } restore;
  for (auto [M, K, N] : {std::array<int64_t, 3>{301, 300, 517}, std::array<int64_t, 3>{5, 1000, 6000}}) {
    Vec a = random_values(M * K, 31), b = random_values(K * N, 32), want;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) want.push_back(kernel_order_sum(a, b, K, N, i, j));
    for (unsigned threads : {1u, 2u, 3u, 0u}) {
      ops::gemm_set_max_threads(threads);
      const Vec got = run("MatMul", {f64_tensor({M, K}, a), f64_tensor({K, N}, b)}).to_f64();
      ASSERT_EQ(got.size(), want.size());
      for (size_t e = 0; e < want.size(); ++e)
        ASSERT_EQ(got[e], want[e]) << M << "x" << K << "x" << N << " on " << threads << " threads, at " << e;
    }
  }
}
#endif

TEST(OpsNnMatMul, VectorOperandsDropTheirUnitDim) {
  Vec a = random_values(4, 5), m = random_values(4 * 3, 6), v = random_values(3, 7);
  expect_near(run("MatMul", {f64_tensor({4}, a), f64_tensor({4, 3}, m)}), {3}, naive_matmul(a, m, 1, 4, 3, {{0, 0}}));
  expect_near(run("MatMul", {f64_tensor({4, 3}, m), f64_tensor({3}, v)}), {4}, naive_matmul(m, v, 4, 3, 1, {{0, 0}}));
  Vec w = random_values(4, 8);
  expect_near(run("MatMul", {f64_tensor({4}, a), f64_tensor({4}, w)}), {}, naive_matmul(a, w, 1, 4, 1, {{0, 0}}));
  // A vector against a batch of matrices.
  Vec bm = random_values(2 * 4 * 3, 9);
  expect_near(run("MatMul", {f64_tensor({4}, a), f64_tensor({2, 4, 3}, bm)}), {2, 3},
              naive_matmul(a, bm, 1, 4, 3, {{0, 0}, {0, 1}}));
}

TEST(OpsNnMatMul, BroadcastBatchDims) {
  // [2,1,3,4] x [3,4,2] -> [2,3,3,2]; a's batch (i,0) pairs with b's batch j.
  Vec a = random_values(2 * 3 * 4, 10), b = random_values(3 * 4 * 2, 11);
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) pairs.push_back({i, j});
  expect_near(run("MatMul", {f64_tensor({2, 1, 3, 4}, a), f64_tensor({3, 4, 2}, b)}), {2, 3, 3, 2},
              naive_matmul(a, b, 3, 4, 2, pairs));
  // Batched left operand against one matrix (the flattened fast path).
  Vec c = random_values(4 * 2, 12);
  expect_near(run("MatMul", {f64_tensor({2, 3, 4}, a), f64_tensor({4, 2}, c)}), {2, 3, 2},
              naive_matmul(a, c, 3, 4, 2, {{0, 0}, {1, 0}}));
}

TEST(OpsNnMatMul, IntegerTensorsComputeExactly) {
  Tensor a = Tensor::from_i64(DType::Int64, {2, 2}, std::vector<int64_t>{1, 2, 3, 4});
  Tensor b = Tensor::from_i64(DType::Int64, {2, 1}, std::vector<int64_t>{5, 6});
  Tensor y = run("MatMul", {a, b});
  EXPECT_EQ(y.dtype(), DType::Int64);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{17, 39}));
}

TEST(OpsNnMatMul, ShapeRule) {
  TensorType a{DType::Float32, {Dim::sym("batch"), Dim(8), Dim(16)}};
  TensorType b{DType::Float32, make_shape({16, 4})};
  EXPECT_EQ(infer("MatMul", {a, b}), (TensorType{DType::Float32, {Dim::sym("batch"), Dim(8), Dim(4)}}));
  TensorType ka{DType::Float32, {Dim(2), Dim::sym("K")}};
  EXPECT_EQ(infer("MatMul", {ka, b}).shape, make_shape({2, 4}));  // symbolic K is assumed to match
  expect_error(
      [&] {
        infer("MatMul", {{DType::Float32, make_shape({2, 3})}, {DType::Float32, make_shape({4, 5})}});
      },
      "inner dimensions");
  expect_error(
      [&] {
        infer("MatMul", {{DType::Float32, make_shape({2, 3, 4})}, {DType::Float32, make_shape({5, 4, 2})}});
      },
      "broadcast");
  expect_error(
      [&] {
        infer("MatMul", {{DType::Float32, make_shape({2, 3})}, {DType::Float64, make_shape({3, 5})}});
      },
      "types");
}

TEST(OpsNnMatMul, FieldMatchesFloat) {
  expect_field_matches_float(
      one_op("MatMul", {f64_tensor({2, 1, 3, 4}, small_ints(24, 13)), f64_tensor({3, 4, 5}, small_ints(60, 14))}));
  expect_field_matches_float(
      one_op("MatMul", {f64_tensor({4}, small_ints(4, 15)), f64_tensor({4, 2}, small_ints(8, 16))}));
}

// ---- Gemm --------------------------------------------------------------------------

Vec naive_gemm(const Vec& a, const Vec& b, const Vec* c, const Dims& c_dims, int64_t M, int64_t K, int64_t N, bool ta,
               bool tb, double alpha, double beta) {
  Vec out;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += (ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
      double cv = 0;
      if (c) {
        int64_t ci = c_dims.size() == 2 ? (c_dims[0] == 1 ? 0 : i) : 0,
                cj = c_dims.empty() ? 0 : (c_dims.back() == 1 ? 0 : j);
        cv = (*c)[ci * (c_dims.empty() ? 1 : c_dims.back()) + cj];
      }
      out.push_back(alpha * s + beta * cv);
    }
  return out;
}

TEST(OpsNnGemm, AttributesAndBiasShapes) {
  const int64_t M = 3, K = 5, N = 4;
  uint64_t seed = 20;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const Dims& cd : {Dims{}, Dims{1}, Dims{N}, Dims{1, N}, Dims{M, 1}, Dims{M, N}}) {
        Vec a = random_values(M * K, ++seed), b = random_values(K * N, ++seed), c = random_values(count(cd), ++seed);
        Attributes attrs{{"alpha", 0.5}, {"beta", -2.0}, {"transA", int64_t{ta}}, {"transB", int64_t{tb}}};
        Tensor y = run("Gemm",
                       {f64_tensor(ta ? Dims{K, M} : Dims{M, K}, a), f64_tensor(tb ? Dims{N, K} : Dims{K, N}, b),
                        f64_tensor(cd, c)},
                       attrs);
        expect_near(y, {M, N}, naive_gemm(a, b, &c, cd, M, K, N, ta, tb, 0.5, -2.0));
      }
  Vec a = random_values(M * K, 1), b = random_values(K * N, 2);
  expect_near(run("Gemm", {f64_tensor({M, K}, a), f64_tensor({K, N}, b)}), {M, N},
              naive_gemm(a, b, nullptr, {}, M, K, N, false, false, 1, 1));
}

TEST(OpsNnGemm, ShapeRule) {
  TensorType a{DType::Float32, {Dim::sym("n"), Dim(8)}};
  TensorType b{DType::Float32, make_shape({10, 8})};
  TensorType c{DType::Float32, make_shape({10})};
  EXPECT_EQ(infer("Gemm", {a, b, c}, {{"transB", int64_t{1}}}).shape, (Shape{Dim::sym("n"), Dim(10)}));
  expect_error([&] { infer("Gemm", {a, b, c}); }, "inner dimensions");
  expect_error(
      [&] {
        infer("Gemm", {a, b, {DType::Float32, make_shape({3})}}, {{"transB", int64_t{1}}});
      },
      "broadcast");
  expect_error([&] { infer("Gemm", {{DType::Float32, make_shape({2, 3, 4})}, b}); }, "matrices");
}

TEST(OpsNnGemm, FieldMatchesFloatForIntegerScalars) {
  Attributes attrs{{"alpha", 3.0}, {"beta", -2.0}, {"transA", int64_t{1}}};
  expect_field_matches_float(one_op("Gemm",
                                    {f64_tensor({4, 3}, small_ints(12, 21)), f64_tensor({4, 5}, small_ints(20, 22)),
                                     f64_tensor({1, 5}, small_ints(5, 23))},
                                    attrs));
  OneOp fractional =
      one_op("Gemm", {f64_tensor({2, 2}, small_ints(4, 1)), f64_tensor({2, 2}, small_ints(4, 2))}, {{"alpha", 0.5}});
  std::vector<FieldArray> in{{{2, 2}, std::vector<Fp>(4, Fp(1))}, {{2, 2}, std::vector<Fp>(4, Fp(1))}};
  expect_error([&] { evaluate_field(fractional.graph, in); }, "not an integer");
}

TEST(OpsNnGemm, ImportDropsLegacyBroadcast) {
  GraphBuilder b;
  OnnxForm form;
  form.attrs.set("broadcast", int64_t{1});
  EXPECT_EQ(get_op("Gemm").onnx_import(form, 6, b), "");
  EXPECT_FALSE(form.attrs.has("broadcast"));
}

// ---- Conv --------------------------------------------------------------------------

struct ConvCase {
  int64_t n = 1, c = 1, m = 1, group = 1;
  Dims in, kernel, strides, dilations, pads;  // pads: begins then ends
  bool bias = false;
};

Dims conv_out_dims(const ConvCase& k) {
  Dims out{k.n, k.m};
  const size_t r = k.in.size();
  for (size_t i = 0; i < r; ++i)
    out.push_back((k.in[i] + k.pads[i] + k.pads[r + i] - ((k.kernel[i] - 1) * k.dilations[i] + 1)) / k.strides[i] + 1);
  return out;
}

// The textbook loop, over three spatial axes (fewer axes are padded with unit ones).
Vec naive_conv(const ConvCase& k0, const Vec& x, const Vec& w, const Vec& bias) {
  ConvCase k = k0;
  while (k.in.size() < 3) {
    k.in.insert(k.in.begin(), 1);
    k.kernel.insert(k.kernel.begin(), 1);
    k.strides.insert(k.strides.begin(), 1);
    k.dilations.insert(k.dilations.begin(), 1);
    size_t r = k.pads.size() / 2;
    k.pads.insert(k.pads.begin() + static_cast<std::ptrdiff_t>(r), 0);
    k.pads.insert(k.pads.begin(), 0);
  }
  Dims o = conv_out_dims(k);
  const int64_t cg = k.c / k.group, mg = k.m / k.group;
  Vec y;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t od = 0; od < o[2]; ++od)
        for (int64_t oh = 0; oh < o[3]; ++oh)
          for (int64_t ow = 0; ow < o[4]; ++ow) {
            double s = k.bias ? bias[m] : 0.0;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < k.kernel[0]; ++kd)
                for (int64_t kh = 0; kh < k.kernel[1]; ++kh)
                  for (int64_t kw = 0; kw < k.kernel[2]; ++kw) {
                    int64_t id = od * k.strides[0] - k.pads[0] + kd * k.dilations[0];
                    int64_t ih = oh * k.strides[1] - k.pads[1] + kh * k.dilations[1];
                    int64_t iw = ow * k.strides[2] - k.pads[2] + kw * k.dilations[2];
                    if (id < 0 || id >= k.in[0] || ih < 0 || ih >= k.in[1] || iw < 0 || iw >= k.in[2]) continue;
                    int64_t ci = (m / mg) * cg + c;
                    s += x[(((n * k.c + ci) * k.in[0] + id) * k.in[1] + ih) * k.in[2] + iw] *
                         w[(((m * cg + c) * k.kernel[0] + kd) * k.kernel[1] + kh) * k.kernel[2] + kw];
                  }
            y.push_back(s);
          }
  return y;
}

struct ConvData {
  std::vector<Tensor> args;
  Vec x, w, b;
};

ConvData conv_data(const ConvCase& k, uint64_t seed, bool integers = false) {
  ConvData d;
  Dims xd{k.n, k.c}, wd{k.m, k.c / k.group};
  xd.insert(xd.end(), k.in.begin(), k.in.end());
  wd.insert(wd.end(), k.kernel.begin(), k.kernel.end());
  d.x = integers ? small_ints(count(xd), seed) : random_values(count(xd), seed);
  d.w = integers ? small_ints(count(wd), seed + 1) : random_values(count(wd), seed + 1);
  d.b = integers ? small_ints(k.m, seed + 2) : random_values(k.m, seed + 2);
  d.args = {f64_tensor(xd, d.x), f64_tensor(wd, d.w)};
  if (k.bias) d.args.push_back(f64_tensor({k.m}, d.b));
  return d;
}

Attributes conv_attrs(const ConvCase& k) {
  return {{"group", k.group}, {"strides", k.strides}, {"dilations", k.dilations}, {"pads", k.pads}};
}

TEST(OpsNnConv, MatchesTextbookLoopOverAttributeCombinations) {
  std::mt19937_64 rng(42);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int cases = 0;
  for (int r = 1; r <= 3; ++r) {
    for (int trial = 0; trial < 40; ++trial) {
      ConvCase k;
      k.group = pick(1, 3);
      k.c = k.group * pick(1, 2);
      k.m = k.group * pick(1, 2);
      k.n = pick(1, 2);
      k.bias = pick(0, 1) == 1;
      for (int i = 0; i < r; ++i) {
        k.kernel.push_back(pick(1, 3));
        k.strides.push_back(pick(1, 3));
        k.dilations.push_back(pick(1, 2));
        k.in.push_back(pick(r == 3 ? 3 : 4, r == 3 ? 6 : 9));
      }
      for (int i = 0; i < 2 * r; ++i) k.pads.push_back(pick(0, 2));
      bool fits = true;
      for (int i = 0; i < r; ++i)
        fits = fits && k.in[i] + k.pads[i] + k.pads[r + i] >= (k.kernel[i] - 1) * k.dilations[i] + 1;
      if (!fits) continue;
      ConvData d = conv_data(k, 100 + static_cast<uint64_t>(trial) * 7 + static_cast<uint64_t>(r));
      SCOPED_TRACE("rank " + std::to_string(r) + " trial " + std::to_string(trial));
      expect_near(run("Conv", d.args, conv_attrs(k)), conv_out_dims(k), naive_conv(k, d.x, d.w, d.b));
      ++cases;
    }
  }
  EXPECT_GT(cases, 90);
}

TEST(OpsNnConv, PointwiseAndDepthwise) {
  ConvCase pw{.n = 2,
              .c = 6,
              .m = 4,
              .group = 1,
              .in = {5, 7},
              .kernel = {1, 1},
              .strides = {1, 1},
              .dilations = {1, 1},
              .pads = {0, 0, 0, 0},
              .bias = true};
  ConvData d = conv_data(pw, 7);
  expect_near(run("Conv", d.args, conv_attrs(pw)), conv_out_dims(pw), naive_conv(pw, d.x, d.w, d.b));
  ConvCase dw{.n = 1,
              .c = 4,
              .m = 4,
              .group = 4,
              .in = {6, 6},
              .kernel = {3, 3},
              .strides = {2, 2},
              .dilations = {1, 1},
              .pads = {1, 1, 1, 1},
              .bias = false};
  ConvData e = conv_data(dw, 8);
  expect_near(run("Conv", e.args, conv_attrs(dw)), conv_out_dims(dw), naive_conv(dw, e.x, e.w, e.b));
}

TEST(OpsNnConv, AutoPadMatchesExplicitPads) {
  ConvCase k{.n = 1,
             .c = 2,
             .m = 3,
             .group = 1,
             .in = {7, 6},
             .kernel = {3, 2},
             .strides = {2, 3},
             .dilations = {1, 2},
             .pads = {},
             .bias = true};
  ConvData d = conv_data(k, 9);
  for (std::string mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    ConvCase e = k;
    Dims begins, ends;
    for (size_t i = 0; i < 2; ++i) {
      int64_t eff = (k.kernel[i] - 1) * k.dilations[i] + 1;
      int64_t out = (k.in[i] + k.strides[i] - 1) / k.strides[i];
      int64_t total = mode == "VALID" ? 0 : std::max<int64_t>(0, (out - 1) * k.strides[i] + eff - k.in[i]);
      begins.push_back(mode == "SAME_LOWER" ? total - total / 2 : total / 2);
      ends.push_back(total - begins.back());
    }
    e.pads = begins;
    e.pads.insert(e.pads.end(), ends.begin(), ends.end());
    Attributes attrs{{"auto_pad", mode}, {"strides", k.strides}, {"dilations", k.dilations}};
    SCOPED_TRACE(mode);
    expect_near(run("Conv", d.args, attrs), conv_out_dims(e), naive_conv(e, d.x, d.w, d.b));

    // The import hook turns auto_pad into the same explicit pads.
    GraphBuilder b;
    OnnxForm form;
    form.attrs = attrs;
    for (size_t i = 0; i < d.args.size(); ++i)
      form.inputs.push_back(b.input("x" + std::to_string(i), d.args[i].type()));
    ASSERT_EQ(get_op("Conv").onnx_import(form, 11, b), "");
    EXPECT_FALSE(form.attrs.has("auto_pad"));
    EXPECT_EQ(form.attrs.get_ints("pads", {0, 0, 0, 0}), e.pads);
  }
}

TEST(OpsNnConv, ImportKeepsAutoPadForSymbolicSpatialDims) {
  GraphBuilder b;
  OnnxForm form;
  form.attrs = {{"auto_pad", std::string("SAME_UPPER")}};
  form.inputs = {b.input("x", {DType::Float32, {Dim(1), Dim(3), Dim::sym("h"), Dim(8)}}),
                 b.input("w", {DType::Float32, make_shape({4, 3, 3, 3})})};
  ASSERT_EQ(get_op("Conv").onnx_import(form, 11, b), "");
  EXPECT_EQ(form.attrs.get_string("auto_pad"), "SAME_UPPER");
  // SAME padding with stride 1 keeps the symbolic extent.
  Value y = b.op1("Conv", form.inputs, form.attrs);
  EXPECT_EQ(y.type().shape, (Shape{Dim(1), Dim(4), Dim::sym("h"), Dim(8)}));
}

TEST(OpsNnConv, ShapeRuleWithSymbolicDims) {
  TensorType x{DType::Float32, {Dim::sym("N"), Dim(8), Dim::sym("H"), Dim(10)}};
  TensorType w{DType::Float32, make_shape({16, 8, 3, 3})};
  // 3x3, pad 1, stride 1: spatial extents are kept, symbols included.
  EXPECT_EQ(infer("Conv", {x, w}, {{"pads", Dims{1, 1, 1, 1}}}).shape,
            (Shape{Dim::sym("N"), Dim(16), Dim::sym("H"), Dim(10)}));
  // Stride 2: a symbolic extent becomes unknown, a static one is computed.
  EXPECT_EQ(infer("Conv", {x, w}, {{"pads", Dims{1, 1, 1, 1}}, {"strides", Dims{2, 2}}}).shape,
            (Shape{Dim::sym("N"), Dim(16), Dim::unknown(), Dim(5)}));
  // kernel_shape may be given; then a symbolic weight is fine.
  TensorType ws{DType::Float32, {Dim(16), Dim(8), Dim::sym("kh"), Dim::sym("kw")}};
  EXPECT_EQ(infer("Conv", {x, ws}, {{"kernel_shape", Dims{3, 3}}}).shape[3], Dim(8));
  EXPECT_EQ(infer("Conv", {x, ws}).shape[3], Dim::unknown());
}

TEST(OpsNnConv, ShapeErrors) {
  TensorType x{DType::Float32, make_shape({1, 8, 10, 10})};
  expect_error([&] { infer("Conv", {x, {DType::Float32, make_shape({16, 4, 3, 3})}}); }, "channels");
  expect_error(
      [&] {
        infer("Conv", {x, {DType::Float32, make_shape({16, 4, 3, 3})}}, {{"group", int64_t{3}}});
      },
      "group");
  expect_error(
      [&] {
        infer("Conv", {x, {DType::Float32, make_shape({15, 2, 3, 3})}}, {{"group", int64_t{4}}});
      },
      "output channels");
  expect_error([&] { infer("Conv", {x, {DType::Float32, make_shape({16, 8, 3})}}); }, "does not match");
  expect_error(
      [&] {
        infer("Conv", {x, {DType::Float32, make_shape({16, 8, 3, 3})}}, {{"kernel_shape", Dims{5, 5}}});
      },
      "kernel_shape");
  expect_error(
      [&] {
        infer("Conv", {x, {DType::Float32, make_shape({16, 8, 3, 3})}, {DType::Float32, make_shape({8})}});
      },
      "bias");
  expect_error([&] { infer("Conv", {x, {DType::Float32, make_shape({16, 8, 11, 3})}}); }, "exceeds");
  expect_error(
      [&] {
        infer("Conv", {x, {DType::Float32, make_shape({16, 8, 3, 3})}}, {{"strides", Dims{1}}});
      },
      "strides");
}

TEST(OpsNnConv, FieldMatchesFloat) {
  ConvCase k{.n = 2,
             .c = 4,
             .m = 6,
             .group = 2,
             .in = {6, 5},
             .kernel = {3, 2},
             .strides = {2, 1},
             .dilations = {1, 2},
             .pads = {1, 0, 2, 1},
             .bias = true};
  ConvData d = conv_data(k, 31, /*integers=*/true);
  expect_field_matches_float(one_op("Conv", d.args, conv_attrs(k)));
  ConvCase k3{.n = 1,
              .c = 2,
              .m = 2,
              .group = 1,
              .in = {3, 4, 3},
              .kernel = {2, 2, 2},
              .strides = {1, 2, 1},
              .dilations = {1, 1, 2},
              .pads = {0, 1, 1, 1, 0, 0},
              .bias = false};
  ConvData e = conv_data(k3, 32, true);
  expect_field_matches_float(one_op("Conv", e.args, conv_attrs(k3)));
}

}  // namespace
}  // namespace isomer
