// Tests of the pooling, normalization and reduction entries (pool.cpp,
// normalization.cpp, reduce.cpp): results against textbook loops and values from
// onnxruntime, shape rules, field semantics against float semantics, and the ONNX
// version hooks.
#include "ops_nn_util.h"

namespace isomer {
namespace {
using namespace nn_test;

// ---- Pools -------------------------------------------------------------------------

// Textbook 2-D pooling with explicit output extents (so ceil mode can be stated).
Vec naive_pool2d(const Vec& x, int64_t planes, int64_t H, int64_t W, Dims k, Dims s, Dims d, Dims pads, Dims out,
                 bool is_max, bool include_pad) {
  Vec y;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < out[0]; ++oh)
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        double best = -INFINITY, sum = 0;
        int64_t n = 0;
        for (int64_t kh = 0; kh < k[0]; ++kh)
          for (int64_t kw = 0; kw < k[1]; ++kw) {
            int64_t ih = oh * s[0] - pads[0] + kh * d[0], iw = ow * s[1] - pads[1] + kw * d[1];
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            double v = x[(p * H + ih) * W + iw];
            best = std::max(best, v);
            sum += v;
            ++n;
          }
        y.push_back(is_max ? best : sum / static_cast<double>(include_pad ? k[0] * k[1] : n));
      }
  return y;
}

TEST(OpsNnPool, MaxAndAverageMatchTextbookLoop) {
  struct Case {
    Dims k, s, d, pads;
    bool ceil;
  };
  const int64_t H = 9, W = 8;
  Vec x = random_values(2 * 3 * H * W, 50);
  for (const Case& c :
       {Case{{3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false}, Case{{2, 3}, {1, 2}, {2, 1}, {0, 1, 2, 0}, false},
        Case{{3, 2}, {2, 3}, {1, 1}, {0, 0, 1, 1}, true}, Case{{2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true}}) {
    Dims out;
    for (int i = 0; i < 2; ++i) {
      int64_t in = i == 0 ? H : W;
      double span = static_cast<double>(in + c.pads[i] + c.pads[2 + i] - ((c.k[i] - 1) * c.d[i] + 1)) / c.s[i];
      int64_t o = static_cast<int64_t>(c.ceil ? std::ceil(span) : std::floor(span)) + 1;
      if (c.ceil && (o - 1) * c.s[i] >= in + c.pads[i]) --o;
      out.push_back(o);
    }
    Attributes attrs{
        {"kernel_shape", c.k}, {"strides", c.s}, {"dilations", c.d}, {"pads", c.pads}, {"ceil_mode", int64_t{c.ceil}}};
    Tensor t = f64_tensor({2, 3, H, W}, x);
    Dims dims{2, 3, out[0], out[1]};
    expect_near(run("MaxPool", {t}, attrs), dims, naive_pool2d(x, 6, H, W, c.k, c.s, c.d, c.pads, out, true, false));
    expect_near(run("AveragePool", {t}, attrs), dims,
                naive_pool2d(x, 6, H, W, c.k, c.s, c.d, c.pads, out, false, false));
    attrs.set("count_include_pad", int64_t{1});
    expect_near(run("AveragePool", {t}, attrs), dims,
                naive_pool2d(x, 6, H, W, c.k, c.s, c.d, c.pads, out, false, true));
  }
}

TEST(OpsNnPool, CeilModeEdgesAsOnnxStates) {
  // Values from onnxruntime / the ONNX reference for these windows.
  Tensor x6 = f64_tensor({1, 1, 6}, {1, 2, 3, 4, 5, 6});
  Attributes ceil{{"kernel_shape", Dims{3}}, {"strides", Dims{2}}, {"ceil_mode", int64_t{1}}};
  expect_near(run("AveragePool", {x6}, ceil), {1, 1, 3}, {2, 4, 5.5});
  ceil.set("count_include_pad", int64_t{1});
  expect_near(run("AveragePool", {x6}, ceil), {1, 1, 3}, {2, 4, 11.0 / 3});
  // A window that would start in the right padding is dropped (ONNX spec; PyTorch).
  Tensor x5 = f64_tensor({1, 1, 5}, {1, 2, 3, 4, 5});
  Attributes drop{{"kernel_shape", Dims{2}}, {"strides", Dims{2}}, {"pads", Dims{1, 1}}, {"ceil_mode", int64_t{1}}};
  expect_near(run("MaxPool", {x5}, drop), {1, 1, 3}, {1, 3, 5});
}

TEST(OpsNnPool, AutoPadAndOneAndThreeDimensional) {
  Tensor x = f64_tensor({1, 1, 4}, {1, 2, 3, 4});
  expect_near(
      run("AveragePool", {x},
          {{"kernel_shape", Dims{3}}, {"auto_pad", std::string("SAME_UPPER")}, {"count_include_pad", int64_t{1}}}),
      {1, 1, 4}, {1, 2, 3, 7.0 / 3});
  expect_near(run("MaxPool", {x}, {{"kernel_shape", Dims{2}}, {"auto_pad", std::string("SAME_LOWER")}}), {1, 1, 4},
              {1, 2, 3, 4});
  expect_near(run("MaxPool", {x}, {{"kernel_shape", Dims{2}}, {"auto_pad", std::string("SAME_UPPER")}}), {1, 1, 4},
              {2, 3, 4, 4});
  expect_near(
      run("AveragePool", {x}, {{"kernel_shape", Dims{2}}, {"strides", Dims{2}}, {"auto_pad", std::string("VALID")}}),
      {1, 1, 2}, {1.5, 3.5});
  // 3-D: 2x2x2 average over a 2x2x3 volume.
  Vec v = random_values(12, 51);
  Tensor t = f64_tensor({1, 1, 2, 2, 3}, v);
  Vec want;
  for (int64_t w0 = 0; w0 < 2; ++w0) {
    double s = 0;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 2; ++k) s += v[(i * 2 + j) * 3 + w0 + k];
    want.push_back(s / 8);
  }
  expect_near(run("AveragePool", {t}, {{"kernel_shape", Dims{2, 2, 2}}}), {1, 1, 1, 1, 2}, want);
}

TEST(OpsNnPool, IntegerMaxPool) {
  Tensor x = Tensor::from_i64(DType::UInt8, {1, 1, 2, 2}, std::vector<int64_t>{7, 200, 3, 9});
  Tensor y = run("MaxPool", {x}, {{"kernel_shape", Dims{2, 2}}});
  EXPECT_EQ(y.dtype(), DType::UInt8);
  EXPECT_EQ(y.to_i64(), (std::vector<int64_t>{200}));
}

TEST(OpsNnPool, GlobalAveragePool) {
  Vec v = random_values(2 * 3 * 4 * 5, 52);
  Vec want;
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0;
    for (int64_t i = 0; i < 20; ++i) s += v[p * 20 + i];
    want.push_back(s / 20);
  }
  expect_near(run("GlobalAveragePool", {f64_tensor({2, 3, 4, 5}, v)}), {2, 3, 1, 1}, want);
  TensorType x{DType::Float32, {Dim::sym("N"), Dim(3), Dim::sym("H"), Dim::sym("W")}};
  EXPECT_EQ(infer("GlobalAveragePool", {x}).shape, (Shape{Dim::sym("N"), Dim(3), Dim(1), Dim(1)}));
}

TEST(OpsNnPool, ShapeRulesAndIndicesOutput) {
  TensorType x{DType::Float32, {Dim::sym("N"), Dim(64), Dim(112), Dim::sym("W")}};
  Attributes attrs{{"kernel_shape", Dims{3, 3}}, {"strides", Dims{2, 2}}, {"pads", Dims{1, 1, 1, 1}}};
  EXPECT_EQ(infer("MaxPool", {x}, attrs).shape, (Shape{Dim::sym("N"), Dim(64), Dim(56), Dim::unknown()}));
  expect_error([&] { infer("MaxPool", {x}, {{"kernel_shape", Dims{3}}}); }, "kernel_shape");
  expect_error(
      [&] {
        infer("AveragePool", {{DType::Float32, make_shape({1, 1, 2, 2})}}, {{"kernel_shape", Dims{3, 3}}});
      },
      "exceeds");
  GraphBuilder b;
  Value in = b.input("x", x);
  expect_error([&] { b.op("MaxPool", {in}, attrs, 2); }, "Indices");
  OnnxForm form;
  form.attrs = attrs;
  form.inputs = {in};
  form.num_outputs = 2;
  EXPECT_NE(get_op("MaxPool").onnx_import(form, 12, b), "");
}

TEST(OpsNnPool, ImportResolvesAutoPadAndDropsCeilMode) {
  GraphBuilder b;
  OnnxForm form;
  form.attrs = {{"kernel_shape", Dims{3, 3}},
                {"strides", Dims{2, 2}},
                {"auto_pad", std::string("SAME_UPPER")},
                {"ceil_mode", int64_t{1}}};
  form.inputs = {b.input("x", {DType::Float32, make_shape({1, 1, 5, 6})})};
  ASSERT_EQ(get_op("AveragePool").onnx_import(form, 11, b), "");
  EXPECT_EQ(form.attrs.get_ints("pads"), (Dims{1, 0, 1, 1}));
  EXPECT_FALSE(form.attrs.has("auto_pad"));
  EXPECT_FALSE(form.attrs.has("ceil_mode"));
}

TEST(OpsNnPool, ExportRejectsAttributesAnOlderOpsetLacks) {
  OnnxForm form;
  form.attrs = {{"kernel_shape", Dims{2}}, {"dilations", Dims{2}}};
  expect_error([&] { get_op("AveragePool").onnx_export(form, 17); }, "dilations");
  OnnxForm plain;
  plain.attrs = {{"kernel_shape", Dims{2}}, {"dilations", Dims{1}}, {"ceil_mode", int64_t{0}}};
  get_op("MaxPool").onnx_export(plain, 8);
  EXPECT_FALSE(plain.attrs.has("dilations"));
  EXPECT_FALSE(plain.attrs.has("ceil_mode"));
}

TEST(OpsNnPool, FieldMatchesFloat) {
  // Inputs are multiples of 2520 = lcm(1..9), so every window average is an integer.
  Vec v = small_ints(2 * 2 * 5 * 6, 53);
  for (double& x : v) x *= 2520;
  Tensor t = f64_tensor({2, 2, 5, 6}, v);
  for (int64_t include_pad : {0, 1}) {
    Attributes attrs{{"kernel_shape", Dims{3, 3}},
                     {"strides", Dims{2, 1}},
                     {"pads", Dims{1, 1, 1, 0}},
                     {"count_include_pad", include_pad},
                     {"ceil_mode", int64_t{1}}};
    expect_field_matches_float(one_op("AveragePool", {t}, attrs));
  }
  Vec g = small_ints(2 * 3 * 2 * 2, 54);
  for (double& x : g) x *= 4;
  expect_field_matches_float(one_op("GlobalAveragePool", {f64_tensor({2, 3, 2, 2}, g)}));
}

// ---- Normalizations ----------------------------------------------------------------

TEST(OpsNnNorm, BatchNormalization) {
  const Dims xd{2, 3, 2, 2};
  Vec x = random_values(24, 60), scale = random_values(3, 61), bias = random_values(3, 62), mean = random_values(3, 63),
      var = random_values(3, 64, 0.1, 2);
  const double eps = 1e-3;
  Vec want;
  for (int64_t i = 0; i < 24; ++i) {
    int64_t c = (i / 4) % 3;
    want.push_back((x[i] - mean[c]) / std::sqrt(var[c] + eps) * scale[c] + bias[c]);
  }
  std::vector<Tensor> args{f64_tensor(xd, x), f64_tensor({3}, scale), f64_tensor({3}, bias), f64_tensor({3}, mean),
                           f64_tensor({3}, var)};
  expect_near(run("BatchNormalization", args, {{"epsilon", eps}}), xd, want);
  TensorType p{DType::Float32, make_shape({3})};
  TensorType xs{DType::Float32, {Dim::sym("N"), Dim(3), Dim::sym("H"), Dim(5)}};
  EXPECT_EQ(infer("BatchNormalization", {xs, p, p, p, p}), xs);
  expect_error([&] { infer("BatchNormalization", {xs, p, p, {DType::Float32, make_shape({4})}, p}); }, "input_mean");
  expect_error([&] { infer("BatchNormalization", {xs, p, p, p, p}, {{"training_mode", int64_t{1}}}); }, "training");
}

TEST(OpsNnNorm, BatchNormalizationImport) {
  GraphBuilder b;
  auto form_with = [&](Attributes attrs, size_t outputs) {
    OnnxForm f;
    f.attrs = std::move(attrs);
    f.num_outputs = outputs;
    for (int i = 0; i < 5; ++i)
      f.inputs.push_back(b.input("i" + std::to_string(b.inputs().size()), {DType::Float32, make_shape({3})}));
    return f;
  };
  const OpDef& bn = get_op("BatchNormalization");
  OnnxForm training = form_with({{"training_mode", int64_t{1}}}, 1);
  EXPECT_NE(bn.onnx_import(training, 15, b), "");
  OnnxForm stats = form_with({}, 3);
  EXPECT_NE(bn.onnx_import(stats, 15, b), "");
  OnnxForm per_activation = form_with({{"spatial", int64_t{0}}}, 1);
  EXPECT_NE(bn.onnx_import(per_activation, 7, b), "");
  OnnxForm old = form_with({{"spatial", int64_t{1}}, {"is_test", int64_t{1}}, {"epsilon", 1e-3}}, 1);
  EXPECT_EQ(bn.onnx_import(old, 6, b), "");
  EXPECT_EQ(old.attrs, (Attributes{{"epsilon", 1e-3}}));
}

TEST(OpsNnNorm, LayerNormalizationOverEveryAxis) {
  const Dims xd{2, 3, 4};
  Vec x = random_values(24, 70);
  for (int64_t axis = -3; axis < 3; ++axis) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    Dims block(xd.begin() + a, xd.end());
    const int64_t inner = count(block), outer = 24 / inner;
    Vec scale = random_values(inner, 71), bias = random_values(inner, 72), want;
    for (int64_t o = 0; o < outer; ++o) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < inner; ++i) m += x[o * inner + i] / inner;
      for (int64_t i = 0; i < inner; ++i) v += (x[o * inner + i] - m) * (x[o * inner + i] - m) / inner;
      for (int64_t i = 0; i < inner; ++i)
        want.push_back((x[o * inner + i] - m) / std::sqrt(v + 1e-5) * scale[i] + bias[i]);
    }
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_near(run("LayerNormalization", {f64_tensor(xd, x), f64_tensor(block, scale), f64_tensor(block, bias)},
                    {{"axis", axis}}),
                xd, want);
  }
  // A scale broadcast over the normalized block, no bias.
  Vec s = random_values(4, 73);
  Tensor y = run("LayerNormalization", {f64_tensor(xd, x), f64_tensor({1, 4}, s)}, {{"axis", int64_t{1}}});
  EXPECT_EQ(y.dims(), xd);
}

TEST(OpsNnNorm, LayerNormalizationShapesAndOutputs) {
  TensorType x{DType::Float32, {Dim::sym("B"), Dim::sym("S"), Dim(8)}};
  TensorType s{DType::Float32, make_shape({8})};
  EXPECT_EQ(infer("LayerNormalization", {x, s}), x);
  expect_error([&] { infer("LayerNormalization", {x, {DType::Float32, make_shape({7})}}); }, "broadcast");
  GraphBuilder b;
  OnnxForm form;
  form.inputs = {b.input("x", x), b.input("s", s)};
  form.num_outputs = 3;
  EXPECT_NE(get_op("LayerNormalization").onnx_import(form, 17, b), "");
  expect_error([&] { b.op("LayerNormalization", form.inputs, {}, 3); }, "not supported");
}

TEST(OpsNnNorm, SoftmaxAlongEachAxis) {
  const Dims xd{2, 3, 4};
  Vec x = random_values(24, 80, -5, 5);
  for (int64_t axis : {0, 1, 2, -1}) {
    const int64_t a = axis < 0 ? axis + 3 : axis;
    const Dims st{12, 4, 1};
    Vec want(24);
    for (int64_t i = 0; i < 24; ++i) {
      const int64_t base = i - ((i / st[a]) % xd[a]) * st[a];
      double sum = 0;
      for (int64_t k = 0; k < xd[a]; ++k) sum += std::exp(x[base + k * st[a]]);
      want[i] = std::exp(x[i]) / sum;
    }
    SCOPED_TRACE("axis " + std::to_string(axis));
    expect_near(run("Softmax", {f64_tensor(xd, x)}, {{"axis", axis}}), xd, want, 1e-12);
  }
  // Large inputs do not overflow.
  expect_near(run("Softmax", {f64_tensor({1, 3}, {1000, 1001, 1002})}), {1, 3},
              {std::exp(-2.0) / (1 + std::exp(-1.0) + std::exp(-2.0)),
               std::exp(-1.0) / (1 + std::exp(-1.0) + std::exp(-2.0)), 1 / (1 + std::exp(-1.0) + std::exp(-2.0))},
              1e-12);
}

TEST(OpsNnNorm, SoftmaxOpsetVersions) {
  GraphBuilder b;
  const OpDef& sm = get_op("Softmax");
  auto form_for = [&](Dims dims, Attributes attrs) {
    OnnxForm f;
    f.attrs = std::move(attrs);
    f.inputs = {b.input("x" + std::to_string(b.inputs().size()), {DType::Float32, make_shape(dims)})};
    return f;
  };
  OnnxForm rank2 = form_for({4, 10}, {});  // default axis 1 = the last axis
  EXPECT_EQ(sm.onnx_import(rank2, 11, b), "");
  EXPECT_EQ(rank2.attrs.get_int("axis"), 1);
  OnnxForm trailing_ones = form_for({1, 1000, 1, 1}, {});  // flattening [1000, 1, 1] is per-axis
  EXPECT_EQ(sm.onnx_import(trailing_ones, 11, b), "");
  OnnxForm rank3 = form_for({2, 3, 4}, {});
  EXPECT_NE(sm.onnx_import(rank3, 11, b), "");
  OnnxForm new_form = form_for({2, 3, 4}, {{"axis", int64_t{1}}});
  EXPECT_EQ(sm.onnx_import(new_form, 13, b), "");

  OnnxForm last = form_for({2, 3, 4}, {});
  sm.onnx_export(last, 11);
  EXPECT_EQ(last.attrs.get_int("axis"), 2);
  OnnxForm middle = form_for({2, 3, 4}, {{"axis", int64_t{1}}});
  expect_error([&] { sm.onnx_export(middle, 11); }, "cannot be written");
  sm.onnx_export(middle, 13);  // fine at 13
}

// ---- Reductions --------------------------------------------------------------------

Vec sum_axis1(const Vec& x, int64_t a, int64_t b, int64_t c) {
  Vec out(static_cast<size_t>(a * c), 0.0);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) out[i * c + k] += x[(i * b + j) * c + k];
  return out;
}

TEST(OpsNnReduce, ReduceSumWithAxesInput) {
  Vec x = random_values(24, 90);
  GraphBuilder b;
  Value in = b.input("x", {DType::Float64, make_shape({2, 3, 4})});
  Value axes = b.constant(Tensor::vector_i64({-2}));
  Value keep = b.op1("ReduceSum", {in, axes});
  Value drop = b.op1("ReduceSum", {in, axes}, {{"keepdims", int64_t{0}}});
  Value all = b.op1("ReduceSum", {in});
  Value noop = b.op1("ReduceSum", {in, b.constant(Tensor::vector_i64({}))}, {{"noop_with_empty_axes", int64_t{1}}});
  Graph g = b.finish({keep, drop, all, noop}, {"keep", "drop", "all", "noop"});
  std::vector<Tensor> out = evaluate(g, {f64_tensor({2, 3, 4}, x)});
  expect_near(out[0], {2, 1, 4}, sum_axis1(x, 2, 3, 4));
  expect_near(out[1], {2, 4}, sum_axis1(x, 2, 3, 4));
  double total = 0;
  for (double v : x) total += v;
  expect_near(out[2], {1, 1, 1}, {total});
  expect_near(out[3], {2, 3, 4}, x);
}

TEST(OpsNnReduce, ReduceSumWithRuntimeAxes) {
  GraphBuilder b;
  Value in = b.input("x", {DType::Float64, {Dim::sym("N"), Dim(3), Dim(4)}});
  Value axes = b.input("axes", {DType::Int64, make_shape({1})});
  Value keep = b.op1("ReduceSum", {in, axes});
  EXPECT_EQ(keep.type().shape, Shape(3, Dim::unknown()));
  Value drop = b.op1("ReduceSum", {in, axes}, {{"keepdims", int64_t{0}}});
  EXPECT_EQ(drop.type().shape.size(), 2u);
  Graph g = b.finish({keep, drop}, {"keep", "drop"});
  Vec x = random_values(24, 91);
  std::vector<Tensor> out = evaluate(g, {f64_tensor({2, 3, 4}, x), Tensor::vector_i64({1})});
  expect_near(out[0], {2, 1, 4}, sum_axis1(x, 2, 3, 4));
  expect_near(out[1], {2, 4}, sum_axis1(x, 2, 3, 4));
  Value unknown_count = b.input("axes2", {DType::Int64, {Dim::sym("k")}});
  expect_error([&] { b.op1("ReduceSum", {in, unknown_count}, {{"keepdims", int64_t{0}}}); }, "unknown rank");
  expect_error([&] { b.op1("ReduceSum", {in, b.constant(Tensor::vector_i64({1, -2}))}); }, "repeat");
}

TEST(OpsNnReduce, ReduceMean) {
  Vec x = random_values(24, 92);
  Vec want = sum_axis1(x, 2, 3, 4);
  for (double& v : want) v /= 3;
  expect_near(run("ReduceMean", {f64_tensor({2, 3, 4}, x)}, {{"axes", Dims{1}}, {"keepdims", int64_t{0}}}), {2, 4},
              want);
  TensorType sym{DType::Float32, {Dim::sym("B"), Dim::sym("S"), Dim(8)}};
  EXPECT_EQ(infer("ReduceMean", {sym}, {{"axes", Dims{-1}}}).shape, (Shape{Dim::sym("B"), Dim::sym("S"), Dim(1)}));
  EXPECT_EQ(infer("ReduceMean", {sym}, {{"keepdims", int64_t{0}}}).shape, Shape{});
  expect_error([&] { infer("ReduceMean", {sym}, {{"axes", Dims{3}}}); }, "out of range");
}

TEST(OpsNnReduce, OpsetHooks) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  // ReduceSum opset 11: axes attribute -> constant input, and back.
  OnnxForm sum11;
  sum11.attrs = {{"axes", Dims{1}}, {"keepdims", int64_t{0}}};
  sum11.inputs = {x};
  const OpDef& rs = get_op("ReduceSum");
  ASSERT_EQ(rs.onnx_import(sum11, 11, b), "");
  ASSERT_EQ(sum11.inputs.size(), 2u);
  ASSERT_NE(sum11.inputs[1].constant(), nullptr);
  EXPECT_EQ(sum11.inputs[1].constant()->to_i64(), (Dims{1}));
  EXPECT_FALSE(sum11.attrs.has("axes"));
  rs.onnx_export(sum11, 11);
  EXPECT_EQ(sum11.inputs.size(), 1u);
  EXPECT_EQ(sum11.attrs.get_ints("axes"), (Dims{1}));
  OnnxForm runtime_axes;
  runtime_axes.inputs = {x, b.input("axes", {DType::Int64, make_shape({1})})};
  expect_error([&] { rs.onnx_export(runtime_axes, 11); }, "non-constant");

  // ReduceMean opset 18: constant axes input -> attribute, and back.
  const OpDef& rm = get_op("ReduceMean");
  OnnxForm mean18;
  mean18.inputs = {x, b.constant(Tensor::vector_i64({-1}))};
  ASSERT_EQ(rm.onnx_import(mean18, 18, b), "");
  EXPECT_EQ(mean18.inputs.size(), 1u);
  EXPECT_EQ(mean18.attrs.get_ints("axes"), (Dims{-1}));
  rm.onnx_export(mean18, 18);
  ASSERT_EQ(mean18.inputs.size(), 2u);
  EXPECT_EQ(mean18.inputs[1].constant()->to_i64(), (Dims{-1}));
  EXPECT_FALSE(mean18.attrs.has("axes"));
  OnnxForm runtime_mean;
  runtime_mean.inputs = {x, b.input("axes2", {DType::Int64, make_shape({1})})};
  EXPECT_NE(rm.onnx_import(runtime_mean, 18, b), "");
  OnnxForm noop_mean;
  noop_mean.attrs = {{"noop_with_empty_axes", int64_t{1}}};
  noop_mean.inputs = {x};
  EXPECT_NE(rm.onnx_import(noop_mean, 18, b), "");
}

TEST(OpsNnReduce, FieldMatchesFloat) {
  GraphBuilder b;
  Value in = b.input("x", {DType::Float64, make_shape({2, 3, 4})});
  Value s = b.op1("ReduceSum", {in, b.constant(Tensor::vector_i64({0, -1}))}, {{"keepdims", int64_t{0}}});
  Value m = b.op1("ReduceMean", {in}, {{"axes", Dims{1}}});
  Graph g = b.finish({s, m}, {"s", "m"});
  Vec x = small_ints(24, 93);
  for (double& v : x) v *= 3;  // means over 3 elements are integers
  expect_field_matches_float({g, {f64_tensor({2, 3, 4}, x)}});
}

}  // namespace
}  // namespace isomer
