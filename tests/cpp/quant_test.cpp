// Quantization: the operators' semantics against hand-computed values (ONNX's
// examples among them), the runtime's integer steps against the reference
// evaluator, and the check's notion of "the same outputs" for quantized models
// (check/quant_check.h): rounding flips pass, a wrong zero point, scale or axis fails.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "check/compare.h"
#include "check/quant_check.h"
#include "eval/evaluator.h"
#include "ir/invalid_node.h"
#include "ops/op.h"
#include "runtime/runtime.h"
#include "runtime_test_util.h"

namespace isomer {
namespace {

using testing::random_tensor;

Tensor f32(std::vector<int64_t> dims, std::vector<double> v) { return Tensor::from_f64(DType::Float32, dims, v); }
Tensor ints(DType t, std::vector<int64_t> dims, std::vector<int64_t> v) { return Tensor::from_i64(t, dims, v); }

std::vector<Tensor> eval_op(std::string_view op, std::vector<Tensor> in, Attributes attrs = {}, size_t outs = 1) {
  EvalContext ctx{attrs, in, outs};
  return get_op(op).eval(ctx);
}

TEST(QuantOps, QuantizeRoundsHalfToEvenAndSaturates) {
  Tensor x = f32({8}, {0.5, 1.5, 2.5, -0.5, -1.5, 300, -300, 3.49});
  // uint8, zero point 0: halves to even, below 0 and above 255 saturate.
  Tensor y = eval_op("QuantizeLinear", {x, Tensor::scalar_f32(1)})[0];
  EXPECT_EQ(y.dtype(), DType::UInt8);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{0, 2, 2, 0, 0, 255, 0, 3}));
  // int8, scale 0.5, zero point -3: round(x / 0.5) - 3.
  Tensor z = eval_op("QuantizeLinear", {x, Tensor::scalar_f32(0.5), ints(DType::Int8, {}, {-3})})[0];
  EXPECT_EQ(z.dtype(), DType::Int8);
  EXPECT_EQ(z.to_i64(), (std::vector<int64_t>{-2, 0, 2, -4, -6, 127, -128, 4}));
}

TEST(QuantOps, PerAxisQuantizeAndDequantize) {
  // [2, 3] along axis 1: scales 1, 2, 4 and zero points 0, 10, 20.
  Tensor x = f32({2, 3}, {1, 5, 10, -1, -6, 100});
  Tensor s = f32({3}, {1, 2, 4});
  Tensor zp = ints(DType::UInt8, {3}, {0, 10, 20});
  Tensor q = eval_op("QuantizeLinear", {x, s, zp}, {{"axis", int64_t{1}}})[0];
  // 1/1+0, 5/2=2.5->2 +10, 10/4=2.5->2 +20; -1->0 (saturates), -6/2=-3 +10, 100/4=25 +20
  EXPECT_EQ(q.to_i64(), (std::vector<int64_t>{1, 12, 22, 0, 7, 45}));
  Tensor back = eval_op("DequantizeLinear", {q, s, zp}, {{"axis", int64_t{-1}}})[0];
  EXPECT_EQ(back.to_f64(), (std::vector<double>{1, 4, 8, 0, -6, 100}));
}

TEST(QuantOps, DynamicQuantizeLinearMatchesOnnxExample) {
  std::vector<Tensor> r = eval_op("DynamicQuantizeLinear", {f32({6}, {0, 2, -3, -2.5, 1.34, 0.5})}, {}, 3);
  EXPECT_FLOAT_EQ(static_cast<float>(r[1].f64_at(0)), 5.0f / 255.0f);
  EXPECT_EQ(r[2].i64_at(0), 153);
  EXPECT_EQ(r[0].to_i64(), (std::vector<int64_t>{153, 255, 0, 26, 221, 179}));
  // All zeros: scale 1 (as ONNX Runtime), zero point 0.
  std::vector<Tensor> z = eval_op("DynamicQuantizeLinear", {f32({3}, {0, 0, 0})}, {}, 3);
  EXPECT_EQ(z[1].f64_at(0), 1.0);
  EXPECT_EQ(z[2].i64_at(0), 0);
}

TEST(QuantOps, MatMulIntegerMatchesOnnxExample) {
  Tensor a = ints(DType::UInt8, {4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor b = ints(DType::UInt8, {3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor y = eval_op("MatMulInteger", {a, b, ints(DType::UInt8, {}, {12}), ints(DType::UInt8, {}, {0})})[0];
  EXPECT_EQ(y.dtype(), DType::Int32);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{-38, -83, -44, -98, -50, -113, -56, -128}));
  // Per-row zero points of A ([M]) subtract row by row.
  Tensor yr = eval_op("MatMulInteger", {a, b, ints(DType::UInt8, {4}, {11, 10, 9, 8})})[0];
  EXPECT_EQ(yr.to_i64(), (std::vector<int64_t>{-4 * 2 - 8 * 3, -4 * 5 - 8 * 6, -4 * 2 - 8 * 3, -4 * 5 - 8 * 6,
                                               -4 * 2 - 8 * 3, -4 * 5 - 8 * 6, -4 * 2 - 8 * 3, -4 * 5 - 8 * 6}));
}

TEST(QuantOps, QLinearMatMulRequantizesOnce) {
  // a - 1 = [[1, 2]], b - 0 = [[3], [4]]: acc = 11; 11 * (0.5 * 0.25 / 0.125) = 11, + 5.
  Tensor y = eval_op("QLinearMatMul", {ints(DType::UInt8, {1, 2}, {2, 3}), Tensor::scalar_f32(0.5),
                                       ints(DType::UInt8, {}, {1}), ints(DType::Int8, {2, 1}, {3, 4}),
                                       Tensor::scalar_f32(0.25), ints(DType::Int8, {}, {0}), Tensor::scalar_f32(0.125),
                                       ints(DType::UInt8, {}, {5})})[0];
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{16}));
}

TEST(QuantOps, ConvIntegerSubtractsZeroPointsAndPadsWithThem) {
  // 1x1x2x2 input, zero point 1, a 1x1x2x2 kernel of ones, pads 1: the padding is the
  // zero point, so it contributes 0.
  Tensor x = ints(DType::UInt8, {1, 1, 2, 2}, {2, 3, 4, 5});
  Tensor w = ints(DType::UInt8, {1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor y = eval_op("ConvInteger", {x, w, ints(DType::UInt8, {}, {1})},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}})[0];
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{1, 3, 2, 4, 10, 6, 3, 7, 4}));
}

TEST(QuantOps, ShapeRulesNameWhatIsWrong) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  try {
    b.op1("QuantizeLinear", {x, b.constant(f32({3}, {1, 1, 1})), b.constant(ints(DType::UInt8, {3}, {0, 0, 0}))},
          {{"axis", int64_t{5}}}, "q_bad_axis");
    FAIL() << "a bad axis was accepted";
  } catch (const InvalidNode& e) {
    EXPECT_NE(std::string(e.what()).find("axis 5 is out of range"), std::string::npos) << e.what();
  }
  try {
    b.op1("DequantizeLinear", {b.constant(ints(DType::Int8, {2, 3}, {0, 0, 0, 0, 0, 0})), b.constant(f32({3}, {1, 1, 1})),
                               b.constant(ints(DType::Int8, {2}, {0, 0}))},
          {}, "dq_bad_zp");
    FAIL() << "a zero point of another shape than its scale was accepted";
  } catch (const InvalidNode& e) {
    EXPECT_NE(std::string(e.what()).find("does not match the scale"), std::string::npos) << e.what();
  }
  EXPECT_THROW(b.op1("QuantizeLinear", {x, b.constant(f32({2}, {1, 1}))}, {{"axis", int64_t{1}}}), InvalidNode);
  EXPECT_THROW(b.op1("MatMulInteger", {b.constant(ints(DType::UInt8, {2, 3}, {0, 0, 0, 0, 0, 0})),
                                       b.constant(ints(DType::Int8, {3, 2}, {0, 0, 0, 0, 0, 0})),
                                       b.constant(ints(DType::Int8, {}, {0}))}),
               InvalidNode);  // A's zero point of B's type
}

// ---- The runtime's integer steps ---------------------------------------------------

struct Ran {
  std::vector<Tensor> want, got;
  std::vector<std::string> kinds;
};

Ran run_both(const Graph& g, int threads = 1) {
  Ran r;
  std::vector<Tensor> inputs = random_inputs(g, 11);
  r.want = evaluate(g, inputs);
  runtime::RuntimeOptions o;
  o.threads = threads;
  auto exe = runtime::compile(g, o);
  r.got = exe->run(inputs);
  for (const runtime::StepInfo& s : exe->steps()) r.kinds.push_back(s.kind);
  return r;
}
size_t count(const std::vector<std::string>& v, const std::string& k) { return std::count(v.begin(), v.end(), k); }

TEST(QuantRuntime, QuantizeDequantizeAreExact) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3, 5, 7})});
  Value q = b.op1("QuantizeLinear", {x, b.constant(Tensor::scalar_f32(0.01f)), b.constant(ints(DType::UInt8, {}, {128}))});
  Value qa = b.op1("QuantizeLinear", {x, b.constant(f32({3}, {0.01, 0.02, 0.005})),
                                      b.constant(ints(DType::Int8, {3}, {0, -5, 7}))});
  Value d = b.op1("DequantizeLinear", {qa, b.constant(f32({3}, {0.01, 0.02, 0.005})),
                                       b.constant(ints(DType::Int8, {3}, {0, -5, 7}))});
  Graph g = b.finish({q, qa, d}, {"q", "qa", "d"});
  for (int threads : {1, 2}) {
    Ran r = run_both(g, threads);
    for (size_t i = 0; i < r.want.size(); ++i) EXPECT_TRUE(r.want[i].same_as(r.got[i])) << "output " << i;
    EXPECT_EQ(count(r.kinds, "quantize"), 2u);
    EXPECT_EQ(count(r.kinds, "dequantize"), 1u);
  }
}

// quantize_dynamic's pattern: DynamicQuantizeLinear, MatMulInteger, Cast, Mul.
TEST(QuantRuntime, DynamicQuantizedMatMulIsOneScaledIntegerMatMul) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 5, 16})});
  std::vector<Value> dq = b.op("DynamicQuantizeLinear", {x}, {}, 3);
  Tensor wf = random_tensor({16, 8}, 3, -127, 127);
  std::vector<int64_t> wi;
  for (double v : wf.to_f64()) wi.push_back(static_cast<int64_t>(std::lround(v)));
  Value w = b.constant(ints(DType::Int8, {16, 8}, wi));
  Value mm = b.op1("MatMulInteger", {dq[0], w, dq[2], b.constant(ints(DType::Int8, {}, {0}))});
  Value cast = b.op1("Cast", {mm}, {{"to", int64_t{1}}});
  Value scale = b.op1("Mul", {dq[1], b.constant(Tensor::scalar_f32(0.02f))});
  Graph g = b.finish({b.op1("Mul", {cast, scale})}, {"y"});
  Ran r = run_both(g);
  EXPECT_TRUE(r.want[0].same_as(r.got[0]));
  EXPECT_EQ(count(r.kinds, "int8-matmul"), 1u);
  EXPECT_EQ(count(r.kinds, "dynamic-quantize"), 1u);
  EXPECT_EQ(count(r.kinds, "reference"), 0u);
}

TEST(QuantRuntime, IntegerContractionsMatchTheReference) {
  GraphBuilder b;
  Value x = b.input("x", {DType::UInt8, make_shape({1, 4, 9, 9})});
  Value a = b.input("a", {DType::UInt8, make_shape({3, 6})});
  std::vector<int64_t> wv, mv;
  for (int i = 0; i < 8 * 4 * 3 * 3; ++i) wv.push_back((i * 37) % 255 - 127);
  for (int i = 0; i < 6 * 5; ++i) mv.push_back((i * 53) % 255 - 127);
  Value w = b.constant(ints(DType::Int8, {8, 4, 3, 3}, wv));
  Value ci = b.op1("ConvInteger", {x, w, b.constant(ints(DType::UInt8, {}, {3}))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  std::vector<int64_t> bias;
  for (int i = 0; i < 8; ++i) bias.push_back(i * 1000 - 3000);
  Value qc = b.op1("QLinearConv", {x, b.constant(Tensor::scalar_f32(0.02f)), b.constant(ints(DType::UInt8, {}, {3})), w,
                                   b.constant(f32({8}, {0.01, 0.02, 0.03, 0.01, 0.005, 0.02, 0.01, 0.04})),
                                   b.constant(ints(DType::Int8, {8}, std::vector<int64_t>(8, 0))),
                                   b.constant(Tensor::scalar_f32(0.5f)), b.constant(ints(DType::UInt8, {}, {100})),
                                   b.constant(ints(DType::Int32, {8}, bias))},
                   {{"strides", std::vector<int64_t>{2, 2}}});
  Value qm = b.op1("QLinearMatMul", {a, b.constant(Tensor::scalar_f32(0.03f)), b.constant(ints(DType::UInt8, {}, {7})),
                                     b.constant(ints(DType::Int8, {6, 5}, mv)), b.constant(Tensor::scalar_f32(0.02f)),
                                     b.constant(ints(DType::Int8, {}, {0})), b.constant(Tensor::scalar_f32(0.05f)),
                                     b.constant(ints(DType::Int8, {}, {-3}))});
  Graph g = b.finish({ci, qc, qm}, {"ci", "qc", "qm"});
  Ran r = run_both(g);
  EXPECT_TRUE(r.want[0].same_as(r.got[0]));  // int32 accumulators: exact
  // Requantized outputs: oneDNN and the reference round the same float32 products.
  for (size_t i : {1u, 2u}) {
    std::vector<int64_t> want = r.want[i].to_i64(), got = r.got[i].to_i64();
    ASSERT_EQ(want.size(), got.size());
    size_t off = 0;
    for (size_t k = 0; k < want.size(); ++k) off += want[k] != got[k];
    EXPECT_EQ(off, 0u) << "output " << i;
  }
  EXPECT_EQ(count(r.kinds, "int8-conv"), 2u);
  EXPECT_EQ(count(r.kinds, "int8-matmul"), 1u);
}

// u8 weights with zero points other than 128 (per tensor and per output channel;
// ONNX Runtime's quantizer writes them for asymmetric weights), one group, 4
// groups and depthwise, padded unevenly, strided and dilated: one integer
// convolution plus the window sums' correction, never the reference kernel;
// the int32 accumulators exact, the requantized outputs equal to the reference's.
TEST(QuantRuntime, U8WeightsWithZeroPointsRunAsIntegerConvolutions) {
  for (int64_t groups : {1, 4, 8}) {
    for (bool per_channel : {false, true}) {
     for (bool strided : {false, true}) {
      SCOPED_TRACE(std::to_string(groups) + (per_channel ? " groups, per channel" : " groups, per tensor") +
                   (strided ? ", strided and dilated" : ""));
      GraphBuilder b;
      Value x = b.input("x", {DType::UInt8, make_shape({1, 8, 9, 9})});
      std::vector<int64_t> wv, zv, bias;
      for (int64_t i = 0; i < 8 * (8 / groups) * 9; ++i) wv.push_back((i * 53 + 7) % 256);
      for (int64_t m = 0; m < 8; ++m) zv.push_back(per_channel ? 90 + 9 * m : 101), bias.push_back(m * 700 - 2500);
      const std::vector<int64_t> zd = per_channel ? std::vector<int64_t>{8} : std::vector<int64_t>{};
      Value w = b.constant(ints(DType::UInt8, {8, 8 / groups, 3, 3}, wv));
      Value wz = b.constant(ints(DType::UInt8, zd, per_channel ? zv : std::vector<int64_t>{101}));
      Value xz = b.constant(ints(DType::UInt8, {}, {120}));
      Attributes a = {{"group", groups}, {"pads", std::vector<int64_t>{1, 0, 1, 2}}};
      if (strided) a.set("strides", std::vector<int64_t>{2, 3}), a.set("dilations", std::vector<int64_t>{2, 1});
      Value ci = b.op1("ConvInteger", {x, w, xz, per_channel ? b.constant(ints(DType::UInt8, {}, {77})) : wz}, a);
      std::vector<double> ws;
      for (int64_t m = 0; m < 8; ++m) ws.push_back(per_channel ? 0.002 + 0.001 * static_cast<double>(m) : 0.004);
      Value qc = b.op1("QLinearConv", {x, b.constant(Tensor::scalar_f32(0.02f)), xz, w,
                                       per_channel ? b.constant(f32({8}, ws)) : b.constant(Tensor::scalar_f32(0.004f)), wz,
                                       b.constant(Tensor::scalar_f32(0.1f)), b.constant(ints(DType::UInt8, {}, {128})),
                                       b.constant(ints(DType::Int32, {8}, bias))},
                       a);
      Graph g = b.finish({ci, qc}, {"ci", "qc"});
      for (int threads : {1, 2}) {
        Ran r = run_both(g, threads);
        EXPECT_TRUE(r.want[0].same_as(r.got[0]));
        EXPECT_TRUE(r.want[1].same_as(r.got[1]));
        EXPECT_EQ(count(r.kinds, "reference"), 0u);
        EXPECT_EQ(count(r.kinds, "zero-point"), 2u);
      }
     }
    }
  }
}

// QOperator models max-pool their quantized activations (ResNet's stem: QLinearConv
// -> MaxPool on u8). MaxPool of u8 and s8 runs on oneDNN's integer pooling, exactly,
// channels-last after an integer convolution and plain from an input; the
// reference kernel took 4.4 ms of a ResNet-18's 14.6.
TEST(QuantRuntime, MaxPoolOfIntegersRunsOnAPoolingPrimitive) {
  for (DType t : {DType::UInt8, DType::Int8}) {
    SCOPED_TRACE(dtype_name(t));
    GraphBuilder b;
    Value x = b.input("x", {t, make_shape({1, 8, 11, 11})});
    std::vector<int64_t> wv;
    for (int64_t i = 0; i < 8 * 8 * 9; ++i) wv.push_back((i * 37 + 5) % 255 - 127);
    const int64_t zp = t == DType::UInt8 ? 120 : -3;
    Value xz = b.constant(ints(t, {}, {zp}));
    Value conv = b.op1("QLinearConv", {x, b.constant(Tensor::scalar_f32(0.02f)), xz, b.constant(ints(DType::Int8, {8, 8, 3, 3}, wv)),
                                       b.constant(Tensor::scalar_f32(0.004f)), b.constant(ints(DType::Int8, {}, {0})),
                                       b.constant(Tensor::scalar_f32(0.1f)), xz},
                       {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
    const Attributes pool = {{"kernel_shape", std::vector<int64_t>{3, 3}}, {"strides", std::vector<int64_t>{2, 2}},
                             {"pads", std::vector<int64_t>{1, 1, 0, 1}}};
    Value after_conv = b.op1("MaxPool", {conv}, pool);
    Value of_input = b.op1("MaxPool", {x}, pool);
    Graph g = b.finish({after_conv, of_input}, {"after_conv", "of_input"});
    for (int threads : {1, 2}) {
      Ran r = run_both(g, threads);
      EXPECT_TRUE(r.want[0].same_as(r.got[0]));
      EXPECT_TRUE(r.want[1].same_as(r.got[1]));
      EXPECT_EQ(count(r.kinds, "reference"), 0u);
      EXPECT_EQ(count(r.kinds, "pool"), 2u);
    }
  }
}

// QOperator DenseNet: a dequantized integer convolution's (channels-last) output
// feeds a float BatchNormalization and Relu, then is quantized again. The batch norm
// reads the channels-last floats where they lie (it had reordered them to NCHW, where
// oneDNN's batch norm is 10x slower): two reorders, the input's to channels-last and
// the output's back, and none between.
TEST(QuantRuntime, BatchNormOfADequantizedConvolutionStaysChannelsLast) {
  GraphBuilder b;
  Value x = b.input("x", {DType::UInt8, make_shape({1, 8, 9, 9})});
  std::vector<int64_t> wv;
  for (int64_t i = 0; i < 16 * 8 * 9; ++i) wv.push_back((i * 29 + 3) % 255 - 127);
  Value xz = b.constant(ints(DType::UInt8, {}, {110})), yz = b.constant(ints(DType::UInt8, {}, {100}));
  Value ys = b.constant(Tensor::scalar_f32(0.1f));
  Value conv = b.op1("QLinearConv", {x, b.constant(Tensor::scalar_f32(0.02f)), xz, b.constant(ints(DType::Int8, {16, 8, 3, 3}, wv)),
                                     b.constant(Tensor::scalar_f32(0.004f)), b.constant(ints(DType::Int8, {}, {0})), ys, yz},
                     {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value d = b.op1("DequantizeLinear", {conv, ys, yz});
  std::vector<double> var(16), scale(16), shift(16), mean(16);
  for (int i = 0; i < 16; ++i) var[i] = 0.5 + 0.1 * i, scale[i] = 1.0 - 0.05 * i, shift[i] = 0.1 * i - 0.4, mean[i] = 0.2 * i - 1.0;
  auto v16 = [&](const std::vector<double>& v) { return b.constant(Tensor::from_f64(DType::Float32, {16}, v)); };
  Value bn = b.op1("Relu", {b.op1("BatchNormalization", {d, v16(scale), v16(shift), v16(mean), v16(var)})});
  Value q = b.op1("QuantizeLinear", {bn, b.constant(Tensor::scalar_f32(0.05f)), yz});
  Graph g = b.finish({q}, {"q"});
  for (int threads : {1, 2}) {
    Ran r = run_both(g, threads);
    std::vector<double> want = r.want[0].to_f64(), got = r.got[0].to_f64();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(std::abs(want[i] - got[i]), 1.0) << i;  // a rounding flip
    EXPECT_EQ(count(r.kinds, "batchnorm"), 1u);
    EXPECT_EQ(count(r.kinds, "reorder"), 2u) << [&] {
      std::string k;
      for (const std::string& s : r.kinds) k += s + " ";
      return k;
    }();
  }
}

// A QDQ convolution as quantize_static writes it: DQ(x), DQ(w) per channel, DQ(bias
// int32 at scale s_x s_w) -> Conv -> Relu -> Q -> DQ. The weights' scales run along
// w_axis (0 is right; 1, of the same extent, is the wrong axis). With `pad_first`,
// the input is first padded with zeros between a DQ and a Q of its own parameters
// (quantize_static's form of F.pad before a convolution).
Graph qdq_conv(int32_t out_zp, float out_scale, int64_t w_axis, std::vector<int64_t> pad_first = {}) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({1, 6, 10, 10})});
  const float xs = 2.0f / 255.0f;
  auto q = [&](Value v) {
    return b.op1("QuantizeLinear", {v, b.constant(Tensor::scalar_f32(xs)), b.constant(ints(DType::UInt8, {}, {128}))});
  };
  auto dq = [&](Value v) {
    return b.op1("DequantizeLinear", {v, b.constant(Tensor::scalar_f32(xs)), b.constant(ints(DType::UInt8, {}, {128}))});
  };
  Value xd = dq(q(x));
  if (!pad_first.empty())
    xd = dq(q(b.op1("Pad", {xd, b.constant(Tensor::from_i64(DType::Int64, {8}, pad_first))})));
  std::vector<int64_t> wv;
  for (int i = 0; i < 6 * 6 * 3 * 3; ++i) wv.push_back((i * 41) % 255 - 127);
  std::vector<double> ws = {0.004, 0.003, 0.005, 0.002, 0.006, 0.004};
  Value wd = b.op1("DequantizeLinear", {b.constant(ints(DType::Int8, {6, 6, 3, 3}, wv)), b.constant(f32({6}, ws)),
                                        b.constant(ints(DType::Int8, {6}, std::vector<int64_t>(6, 0)))},
                   {{"axis", w_axis}});
  std::vector<double> bs;
  for (double s : ws) bs.push_back(static_cast<double>(xs * static_cast<float>(s)));
  Value bd = b.op1("DequantizeLinear", {b.constant(ints(DType::Int32, {6}, {500, -300, 0, 1200, -50, 7})),
                                        b.constant(f32({6}, bs)), b.constant(ints(DType::Int32, {6}, std::vector<int64_t>(6, 0)))},
                   {{"axis", int64_t{0}}});
  Value conv = b.op1("Conv", {xd, wd, bd}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  Value relu = b.op1("Relu", {conv});
  Value yq = b.op1("QuantizeLinear", {relu, b.constant(Tensor::scalar_f32(0.02f)), b.constant(ints(DType::UInt8, {}, {0}))});
  Value y = b.op1("DequantizeLinear", {yq, b.constant(Tensor::scalar_f32(out_scale)), b.constant(ints(DType::UInt8, {}, {out_zp}))});
  return b.finish({y}, {"y"});
}

TEST(QuantRuntime, QdqConvolutionRunsAsOneIntegerConvolution) {
  Graph g = qdq_conv(0, 0.02f, 0);
  Ran r = run_both(g);
  EXPECT_EQ(count(r.kinds, "int8-conv"), 1u);
  EXPECT_EQ(count(r.kinds, "conv"), 0u);
  // The reference emulates in float, the runtime sums integers: equal up to rounding flips.
  CheckResult c = compare_quantized_outputs(r.want, r.got, {"y"}, 1e-3, output_quant_steps(g));
  EXPECT_EQ(c.status, CheckResult::Status::Passed) << c.reason;
  EXPECT_LE(c.max_abs_error, 0.02 + 1e-6);
}

// The requantized Pad is the integer convolution's own padding (by the zero point,
// 128): no float Pad, Quantize or Dequantize step runs for it.
TEST(QuantRuntime, RequantizedZeroPadIsTheIntegerConvolutionsPadding) {
  Graph g = qdq_conv(0, 0.02f, 0, {0, 0, 2, 0, 0, 0, 1, 3});
  for (int threads : {1, 2}) {
    Ran r = run_both(g, threads);
    EXPECT_EQ(count(r.kinds, "int8-conv"), 1u);
    EXPECT_EQ(count(r.kinds, "pad"), 0u);
    EXPECT_EQ(count(r.kinds, "dequantize"), 1u);  // the output's
    EXPECT_EQ(count(r.kinds, "quantize"), 1u);    // the input's
    CheckResult c = compare_quantized_outputs(r.want, r.got, {"y"}, 1e-3, output_quant_steps(g));
    EXPECT_EQ(c.status, CheckResult::Status::Passed) << c.reason;
    EXPECT_LE(c.max_abs_error, 0.02 + 1e-6);
  }
}

TEST(QuantCheck, RoundingFlipsPassAndShiftsFail) {
  const double s = 0.5;
  std::vector<double> base;
  for (int i = 0; i < 400; ++i) base.push_back(s * (i % 37));
  std::vector<double> flipped = base, shifted = base, scaled = base;
  flipped[3] += s;
  flipped[200] -= s;
  for (double& v : shifted) v += s;  // a zero point one off
  for (double& v : scaled) v *= 1.25;
  const std::vector<std::optional<double>> steps = {s};
  auto cmp = [&](const std::vector<double>& got) {
    return compare_quantized_outputs({f32({400}, base)}, {f32({400}, got)}, {"y"}, 1e-3, steps);
  };
  CheckResult ok = cmp(flipped);
  EXPECT_EQ(ok.status, CheckResult::Status::Passed) << ok.reason;
  EXPECT_NE(ok.reason.find("2 of 400 elements off by a step"), std::string::npos) << ok.reason;
  EXPECT_EQ(cmp(shifted).status, CheckResult::Status::Failed);
  EXPECT_EQ(cmp(scaled).status, CheckResult::Status::Failed);
}

// Two valid references that drifted apart. Elements are shifted by a step where
// (i % 10) is listed: `plus` up, `minus` down.
std::vector<double> shifted_steps(const std::vector<double>& base, double s, std::vector<int> plus,
                                  std::vector<int> minus) {
  std::vector<double> v = base;
  for (size_t i = 0; i < v.size(); ++i) {
    for (int p : plus) v[i] += static_cast<int>(i % 10) == p ? s : 0;
    for (int m : minus) v[i] -= static_cast<int>(i % 10) == m ? s : 0;
  }
  return v;
}

TEST(QuantCheck, EitherOfTwoValidRoundingsMatches) {
  const double s = 0.5;
  std::vector<double> as_written;
  for (int i = 0; i < 400; ++i) as_written.push_back(s * (i % 37));
  const std::vector<std::optional<double>> steps = {s};
  auto cmp = [&](const std::vector<double>& deployed, const std::vector<double>* written_ref,
                 const std::vector<double>& got, bool* written) {
    std::vector<Tensor> w;
    if (written_ref) w.push_back(f32({400}, *written_ref));
    return compare_quantized_with_references({f32({400}, deployed)}, w, {f32({400}, got)}, {"y"}, 1e-3, steps, written);
  };
  bool written = true;
  // The deployed reference rounds 30% of the elements up: a bias against the model as
  // written, which isomer computes. Against the deployed one alone that fails.
  const std::vector<double> biased = shifted_steps(as_written, s, {0, 1, 2}, {});
  EXPECT_EQ(cmp(biased, nullptr, as_written, &written).status, CheckResult::Status::Failed);
  EXPECT_FALSE(written);
  CheckResult both = cmp(biased, &as_written, as_written, &written);
  EXPECT_EQ(both.status, CheckResult::Status::Passed) << both.reason;
  EXPECT_TRUE(written);
  EXPECT_NE(both.reason.find("with its optimizations on: output 'y'"), std::string::npos) << both.reason;
  // A zero point one off matches neither.
  const std::vector<double> shifted = shifted_steps(as_written, s, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {});
  EXPECT_EQ(cmp(biased, &as_written, shifted, &written).status, CheckResult::Status::Failed);
}

// A reference with an infinity where the other has a number does not widen the
// bound on steps without end: an element six steps off still fails.
TEST(QuantCheck, AnInfiniteSpreadDoesNotWidenTheBounds) {
  const double s = 0.5;
  std::vector<double> as_written;
  for (int i = 0; i < 400; ++i) as_written.push_back(s * (i % 37));
  std::vector<double> deployed = as_written, got = as_written;
  deployed[7] = std::numeric_limits<double>::infinity();
  got[100] += 6 * s;
  bool written = true;
  CheckResult c = compare_quantized_with_references({f32({400}, deployed)}, {f32({400}, as_written)},
                                                    {f32({400}, got)}, {"y"}, 1e-3, {s}, &written);
  EXPECT_EQ(c.status, CheckResult::Status::Failed) << c.reason;
}

// Equal infinities in both agree and leave the statistics finite; an infinity
// where the other holds a number fails.
TEST(QuantCheck, EqualInfinitiesAgreeAndUnequalOnesFail) {
  const double s = 0.5, inf = std::numeric_limits<double>::infinity();
  std::vector<double> want;
  for (int i = 0; i < 400; ++i) want.push_back(s * (i % 37));
  want[5] = inf;
  std::vector<double> got = want;
  auto cmp = [&](const std::vector<double>& g) {
    return compare_quantized_outputs({f32({400}, want)}, {f32({400}, g)}, {"y"}, 1e-3, {s});
  };
  CheckResult same = cmp(got);
  EXPECT_EQ(same.status, CheckResult::Status::Passed) << same.reason;
  EXPECT_EQ(same.reason.find("nan"), std::string::npos) << same.reason;
  got[5] = 3;
  CheckResult other = cmp(got);
  EXPECT_EQ(other.status, CheckResult::Status::Failed) << other.reason;
  EXPECT_NE(other.reason.find("infinite where the other is not"), std::string::npos) << other.reason;
}

// Rounding drift through a deep network: many elements a step or two off, without a
// direction or a trend with the value, passes however many; a scale 2% off, which
// moves only the largest values by a step, fails on its trend.
TEST(QuantCheck, DriftWithoutTrendPassesAndASmallScaleErrorFails) {
  const double s = 0.5;
  std::vector<double> want;
  for (int i = 0; i < 1000; ++i) want.push_back(s * ((i * 7) % 81 - 40));
  const std::vector<std::optional<double>> steps = {s};
  auto cmp = [&](const std::vector<double>& got) {
    return compare_quantized_outputs({f32({1000}, want)}, {f32({1000}, got)}, {"y"}, 1e-3, steps);
  };
  std::vector<double> drift = shifted_steps(want, s, {0, 3, 6, 8}, {1, 4, 7, 9});
  drift[12] += 2 * s;
  drift[15] -= 2 * s;
  CheckResult ok = cmp(drift);
  EXPECT_EQ(ok.status, CheckResult::Status::Passed) << ok.reason;
  EXPECT_NE(ok.reason.find("802 of 1000 elements off"), std::string::npos) << ok.reason;
  std::vector<double> scaled = want;
  for (double& v : scaled) v = s * std::nearbyint(v * 1.02 / s);
  CheckResult bad = cmp(scaled);
  EXPECT_EQ(bad.status, CheckResult::Status::Failed) << bad.reason;
  EXPECT_NE(bad.reason.find("trend"), std::string::npos) << bad.reason;
  // Too few elements to tell a trend: the count of those off decides.
  std::vector<double> few(want.begin(), want.begin() + 40), few_drift(drift.begin() + 20, drift.begin() + 60);
  for (size_t k = 0; k < few.size(); ++k) few_drift[k] = few[k] + (drift[k + 20] - want[k + 20]);
  EXPECT_EQ(compare_quantized_outputs({f32({40}, few)}, {f32({40}, few_drift)}, {"y"}, 1e-3, steps).status,
            CheckResult::Status::Failed);
}

TEST(QuantCheck, WrongZeroPointScaleOrAxisIsCaught) {
  CheckOptions o;
  o.allow_onnxruntime = false;  // isomer's runtime against the reference evaluator
  const Graph original = qdq_conv(0, 0.02f, 0);
  // An equivalent graph (another output scale written the same) passes, in steps.
  CheckResult same = compare_graphs(original, qdq_conv(0, 0.02f, -4), o);
  EXPECT_EQ(same.status, CheckResult::Status::Passed) << same.reason;
  EXPECT_EQ(compare_graphs(original, qdq_conv(1, 0.02f, 0), o).status, CheckResult::Status::Failed);
  EXPECT_EQ(compare_graphs(original, qdq_conv(0, 0.025f, 0), o).status, CheckResult::Status::Failed);
  EXPECT_EQ(compare_graphs(original, qdq_conv(0, 0.02f, 1), o).status, CheckResult::Status::Failed);
}

TEST(QuantCheck, FloatOutputsAreHeldToTheReferencesOwnSpread) {
  // Two references that differ by 1% (ONNX Runtime with and without its
  // optimizations on a dynamically quantized model): 2% is allowed, 5% is not, and
  // references that agree keep the tolerance.
  std::vector<double> base(64);
  for (size_t i = 0; i < base.size(); ++i) base[i] = std::sin(0.37 * static_cast<double>(i));
  auto shifted = [&](double by) {
    std::vector<double> v = base;
    v[7] += by;
    return std::vector<Tensor>{Tensor::from_f64(DType::Float32, {64}, v)};
  };
  const std::vector<std::string> names{"y"};
  const double bound = rounding_spread_tolerance(shifted(0), shifted(0.01), names, 1e-3);
  EXPECT_NEAR(bound, kSpreadFactor * 0.01, 2e-4);  // relative to max |y|, just under 1
  EXPECT_EQ(compare_outputs(shifted(0), shifted(-0.015), names, bound).status, CheckResult::Status::Passed);
  EXPECT_EQ(compare_outputs(shifted(0), shifted(0.05), names, bound).status, CheckResult::Status::Failed);
  EXPECT_DOUBLE_EQ(rounding_spread_tolerance(shifted(0), shifted(0), names, 1e-3), 1e-3);
}

}  // namespace
}  // namespace isomer
