// The generator's recipes for operator families: the operators current exporters
// add (more unary, binary, comparison, reduction, per-axis, normalization and
// element-placing operators, Einsum and Range), recurrent nets, attention, fused
// μGraph regions, and convolution, batch normalization and upsampling on [N, C, H, W]
// values. See generator.h.
#include <algorithm>
#include <cmath>

#include "fuzz/generator.h"
#include "mugraph/region.h"

namespace isomer::fuzz::detail {

Value Generator::unary_more(const Value& x) {
  static const char* const kPlain[] = {"Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "Softplus", "Mish", "Selu", "Swish"};
  // Functions with poles or bounded domains, on tanh(x) scaled into where each is tame.
  static const char* const kBounded[] = {"Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh", "Softsign"};
  switch (rnd(8)) {
    case 0:
    case 6: return op1(kPlain[rnd(10)], {x});
    case 4:
    case 7: return op1(kBounded[rnd(9)], {op1("Mul", {op1("Tanh", {x}), scalar(0.9)})});
    case 5: {
      Value acosh = op1("Acosh", {op1("Add", {op1("Mul", {x, x}), scalar(1)})});
      return op1("Div", {acosh, op1("Cast", {op1("Size", {x})}, {{"to", int64_t{1}}})});
    }
    case 1: return op1("Elu", {x}, {{"alpha", uniform(0.5, 2)}});
    case 2: return op1("Celu", {x}, {{"alpha", uniform(0.5, 2)}});
    default: return op1("ThresholdedRelu", {x}, {{"alpha", uniform(-0.5, 0.5)}});
  }
}

Value Generator::binary_more(const Value& x) {
  const Dims d = dims_of(x);
  switch (rnd(4)) {
    case 0: return op1("Mod", {x, positive(partner(x))}, {{"fmod", int64_t{1}}});
    case 1: return op1("Sum", {x, partner(x), partner(x)});
    case 2: return op1("Mean", {x, partner(x)});
    default: return op1("PRelu", {x, d.empty() || coin() ? scalar(uniform(0, 0.5)) : fconst({d.back()}, 0, 0.5)});
  }
}

Value Generator::compare_and_select(const Value& x) {
  static const char* const kCompare[] = {"Less", "LessOrEqual", "Greater", "GreaterOrEqual"};
  static const char* const kLogic[] = {"And", "Or", "Xor"};
  Value y = partner(x);
  Value c = op1(kCompare[rnd(4)], {x, y});
  switch (rnd(4)) {
    case 0: c = op1("Not", {c}); break;
    case 1: c = op1(kLogic[rnd(3)], {c, op1(kCompare[rnd(4)], {x, scalar(uniform(-0.5, 0.5))})}); break;
    case 2: c = op1("Or", {c, op1(coin() ? "IsNaN" : "IsInf", {x})}); break;
    default: break;
  }
  bools_.push_back(c);
  return op1("Where", {c, x, y});
}

Value Generator::reduce_more(const Value& x, const Dims& d) {
  const int64_t r = static_cast<int64_t>(d.size());
  if (r == 0) throw Error("scalar");
  static const char* const kReduce[] = {"ReduceMax", "ReduceMin",      "ReduceProd",     "ReduceSumSquare",
                                        "ReduceL1",  "ReduceL2",       "ReduceLogSum",   "ReduceLogSumExp"};
  const std::string op = kReduce[rnd(8)];
  Dims axes{rnd(r)};
  if (r > 1 && coin()) axes.push_back((axes[0] + 1) % r);
  Attributes a{{"axes", axes}, {"keepdims", int64_t{rnd(2)}}};
  return op1(op, {op == "ReduceLogSum" || op == "ReduceL2" ? positive(x) : x}, a);
}

std::vector<Value> Generator::along_axis(const Value& x, const Dims& d) {
  const int64_t r = static_cast<int64_t>(d.size());
  if (r == 0) throw Error("scalar");
  const int64_t axis = rnd(r) - (coin() ? r : 0);
  switch (rnd(3)) {
    case 0: {
      Attributes a{{"axis", axis}, {"keepdims", int64_t{rnd(2)}}, {"select_last_index", int64_t{rnd(2)}}};
      return {op1(coin() ? "ArgMax" : "ArgMin", {x}, a)};
    }
    case 1:
      return {op1("CumSum", {x, b_.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{axis}))},
                  {{"exclusive", int64_t{rnd(2)}}, {"reverse", int64_t{rnd(2)}}})};
    default: return {op1("LogSoftmax", {x}, {{"axis", axis}})};
  }
}

Value Generator::normalize_more(const Value& x, const Dims& d) {
  const int64_t r = static_cast<int64_t>(d.size());
  if (r == 0) throw Error("scalar");
  if (r < 3 || coin()) {
    const int64_t axis = -1 - rnd(r);
    return op1("RMSNormalization", {x, fconst(Dims(d.end() + axis, d.end()), 0.5, 1.5)}, {{"axis", axis}});
  }
  const int64_t c = d[1];
  if (coin())
    return op1("LRN", {x}, {{"size", int64_t{1 + 2 * rnd(3)}}, {"alpha", 0.5}, {"beta", coin() ? 0.75 : 0.5},
                            {"bias", 1.0}});
  if (coin()) return op1("InstanceNormalization", {x, fconst({c}, 0.5, 1.5), fconst({c})});
  const int64_t groups = c % 2 == 0 && coin() ? 2 : 1;
  return op1("GroupNormalization", {x, fconst({c}, 0.5, 1.5), fconst({c})}, {{"num_groups", groups}});
}

Value Generator::place_elements(const Value& x, const Dims& d) {
  const int64_t r = static_cast<int64_t>(d.size());
  if (r == 0) throw Error("scalar");
  switch (rnd(11)) {
    case 0: {
      Dims reps;
      for (int64_t i = 0; i < r; ++i) reps.push_back(1 + rnd(2));
      return op1("Tile", {x, iconst(reps)});
    }
    case 1: {
      if (r < 2) throw Error("rank");
      std::vector<Value> in{x};
      if (coin()) in.push_back(b_.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{rnd(5) - 2})));
      // XLNet's EyeLike, a diagonal mask of a matrix's extents off by k: of a matrix
      // with a k, beside the triangle (no draw of its own, so the other recipes'
      // draws stay as they were).
      if (r == 2 && in.size() == 2) {
        const int64_t k = in[1].constant()->to_i64()[0];
        return op1("Mul", {op1("Trilu", in, {{"upper", int64_t{rnd(2)}}}), op1("EyeLike", {x}, {{"k", k}})});
      }
      return op1("Trilu", in, {{"upper", int64_t{rnd(2)}}});
    }
    case 2: {
      const int64_t axis = rnd(r);
      Dims idx_dims = d;
      idx_dims[axis] = 1 + rnd(3);
      std::vector<int64_t> idx(static_cast<size_t>(numel(idx_dims)));
      for (int64_t& i : idx) i = rnd(2 * d[axis]) - d[axis];
      return op1("GatherElements", {x, b_.constant(Tensor::from_i64(DType::Int64, idx_dims, idx))}, {{"axis", axis}});
    }
    case 3: {
      // Distinct rows of the first axis overwritten by constants.
      const int64_t n = 1 + rnd(d[0]);
      std::vector<int64_t> rows(static_cast<size_t>(d[0]));
      std::iota(rows.begin(), rows.end(), 0);
      std::shuffle(rows.begin(), rows.end(), rng_);
      rows.resize(static_cast<size_t>(n));
      Dims upd{n};
      upd.insert(upd.end(), d.begin() + 1, d.end());
      return op1("ScatterND", {x, b_.constant(Tensor::from_i64(DType::Int64, {n, 1}, rows)), fconst(upd)});
    }
    case 4: {
      // Slices at index tuples of k coordinates, after 0 or 1 batch axes (torch's advanced indexing).
      const int64_t b = r >= 2 && coin(30) ? 1 : 0;
      const int64_t k = 1 + rnd(r - b);
      Dims idx_dims(d.begin(), d.begin() + b);
      idx_dims.push_back(1 + rnd(3));
      idx_dims.push_back(k);
      std::vector<int64_t> idx(static_cast<size_t>(numel(idx_dims)));
      for (size_t i = 0; i < idx.size(); ++i) {
        const int64_t e = d[static_cast<size_t>(b) + i % static_cast<size_t>(k)];
        idx[i] = rnd(2 * e) - e;
      }
      return op1("GatherND", {x, b_.constant(Tensor::from_i64(DType::Int64, idx_dims, idx))}, {{"batch_dims", b}});
    }
    case 6: {
      const int64_t axis = rnd(r);
      return op(
          "TopK", {x},
          {{"k", int64_t{1 + rnd(d[axis])}}, {"axis", axis}, {"largest", int64_t{rnd(2)}}}, 2)[0];
    }
    case 7: {
      // max and min need opset 18; the generator's graphs are written at 17.
      static const char* const kReductions[] = {"none", "add", "mul"};
      const int64_t axis = rnd(r);
      Dims idx_dims = d;
      idx_dims[axis] = 1 + rnd(3);
      std::vector<int64_t> idx(static_cast<size_t>(numel(idx_dims)));
      for (int64_t& i : idx) i = rnd(2 * d[axis]) - d[axis];
      return op1("ScatterElements",
                 {x, b_.constant(Tensor::from_i64(DType::Int64, idx_dims, idx)), fconst(idx_dims)},
                 {{"axis", axis}, {"reduction", std::string(kReductions[rnd(3)])}});
    }
    case 8: {
      // A mask of one-hot rows (F.one_hot), indices in and out of [-depth, depth).
      const int64_t depth = d.back();
      Dims idx_dims(d.begin(), d.end() - 1);
      std::vector<int64_t> idx(static_cast<size_t>(numel(idx_dims)));
      for (int64_t& i : idx) i = rnd(2 * depth + 2) - depth - 1;
      Value hot = op1("OneHot", {b_.constant(Tensor::from_i64(DType::Int64, idx_dims, idx)),
                                 b_.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{depth})),
                                 fconst({2})});
      return op1("Mul", {x, hot});
    }
    case 9: {
      static const char* const kModes[] = {"nearest", "linear", "cubic"};
      static const char* const kPaddings[] = {"zeros", "border", "reflection"};
      Value img = pick_float_rank(4);
      const Dims id = dims_of(img);
      Value grid = fconst({id[0], 1 + rnd(4), 1 + rnd(4), 2}, -1.3, 1.3);
      return op1("GridSample", {img, grid},
                 {{"mode", std::string(kModes[rnd(3)])}, {"padding_mode", std::string(kPaddings[rnd(3)])},
                  {"align_corners", int64_t{rnd(2)}}});
    }
    case 10: {
      // torch.fft: a real signal (parts axis 1) or a complex one (x and -x), along
      // any axis (counted from either end), padded or cut by dft_length.
      const auto i64 = [&](int64_t v) { return b_.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{v})); };
      if (r == 2 && coin(40)) {
        // torch.stft: frames of a [B, N] signal, real or complex, by a window or a
        // frame_length, one-sided or not.
        const bool complex = coin();
        Value z = op1("Unsqueeze", {x, iconst({2})});
        if (complex) z = op1("Concat", {z, op1("Neg", {z})}, {{"axis", int64_t{2}}});
        const int64_t length = 1 + rnd(d[1]), step = 1 + rnd(3);
        std::vector<Value> in = {z, i64(step)};
        if (coin()) in.push_back(fconst({length}));
        else in.insert(in.end(), {Value(), i64(length)});
        return op1("STFT", in, {{"onesided", int64_t{complex ? 0 : rnd(2)}}});
      }
      Value z = op1("Unsqueeze", {x, iconst({r})});
      const bool complex = coin();
      if (complex) z = op1("Concat", {z, op1("Neg", {z})}, {{"axis", r}});
      const int64_t axis = rnd(r);
      const bool onesided = !complex && coin(30);
      return op1("DFT", {z, i64(1 + rnd(2 * d[axis])), i64(coin() ? axis : axis - r - 1)},
                 {{"inverse", int64_t{onesided ? 0 : rnd(2)}}, {"onesided", int64_t{onesided ? 1 : 0}}});
    }
    default: {
      // torch's nn.Fold: the columns of 1 x b blocks (x [N, C * b, L]) summed back into
      // a 1 x W image, at stride 1 or 2, padded or not.
      if (r == 3 && coin(40)) {
        std::vector<int64_t> bs;
        for (int64_t k = 1; k <= 4; ++k)
          if (d[1] % k == 0) bs.push_back(k);
        const int64_t b = pick(bs), s = 1 + rnd(2);
        int64_t p = rnd(2);
        if ((d[2] - 1) * s + b - 2 * p < 1) p = 0;
        const int64_t w = (d[2] - 1) * s + b - 2 * p;
        return op1("Col2Im", {x, iconst({1, w}), iconst({1, b})},
                   {{"strides", std::vector<int64_t>{1, s}}, {"pads", std::vector<int64_t>{0, p, 0, p}}});
      }
      return op1("GlobalMaxPool", {pick_float_rank(4)});
    }
  }
}

Value Generator::einsum_or_range(const Value& x, const Dims& d) {
  const int64_t r = static_cast<int64_t>(d.size());
  if (r == 3 && coin(30)) return recurrent(x, d);
  if ((r == 3 || r == 4) && coin(25)) return attention(x, d);
  if ((r == 3 || r == 4) && coin(15)) return rotary(x, d);
  if (coin(10)) return quantized(x);
  if (coin(25)) {
    Value n = b_.constant(Tensor::scalar_f32(static_cast<float>(1 + rnd(6))));
    return op1("Range", {scalar(0), n, scalar(coin() ? 1 : 0.5)});
  }
  if (r < 2) throw Error("rank");
  switch (rnd(3)) {
    case 0: return op1("Einsum", {x, fconst({d.back(), 1 + rnd(4)})}, {{"equation", std::string("...j,jk->...k")}});
    case 1: return op1("Einsum", {x}, {{"equation", std::string("...ij->...ji")}});
    default: return op1("Einsum", {x}, {{"equation", std::string("...ij->...i")}});
  }
}

Value Generator::recurrent(const Value& x, const Dims& d) {
  static const char* const kOps[] = {"LSTM", "GRU", "RNN"};
  static const char* const kDirections[] = {"forward", "reverse", "bidirectional"};
  const int64_t which = rnd(3), gates = which == 0 ? 4 : which == 1 ? 3 : 1, hidden = 1 + rnd(4);
  const int64_t dirs = coin(30) ? 2 : 1, layout = rnd(2);
  const int64_t batch = d[layout == 0 ? 1 : 0];
  Attributes a{{"hidden_size", hidden}, {"layout", layout},
               {"direction", std::string(kDirections[dirs == 2 ? 2 : rnd(2)])}};
  if (which == 1) a.set("linear_before_reset", int64_t{rnd(2)});
  std::vector<Value> in{x, fconst({dirs, gates * hidden, d[2]}), fconst({dirs, gates * hidden, hidden})};
  in.push_back(coin() ? fconst({dirs, 2 * gates * hidden}) : Value{});
  in.push_back(Value{});  // sequence_lens
  const Dims state = layout == 0 ? Dims{dirs, batch, hidden} : Dims{batch, dirs, hidden};
  in.push_back(coin() ? fconst(state) : Value{});
  if (which == 0 && coin()) in.push_back(fconst(state));
  while (!in.back().present()) in.pop_back();
  const size_t outputs = 1 + static_cast<size_t>(rnd(which == 0 ? 3 : 2));
  std::vector<Value> out = op(kOps[which], in, a, outputs);
  return out[static_cast<size_t>(rnd(static_cast<int64_t>(outputs)))];
}

Value Generator::attention(const Value& x, const Dims& d) {
  Attributes a;
  if (coin()) a.set("is_causal", int64_t{1});
  if (coin(20)) a.set("softcap", 2.0);
  if (coin(20)) a.set("scale", 0.25);
  const int64_t B = d[0], T = 1 + rnd(4), past = coin(25) ? 1 + rnd(3) : 0;
  int64_t Hq, Hk, D, S;
  std::vector<Value> in{x};
  if (d.size() == 4) {
    Hq = d[1], S = d[2], D = d[3];
    Hk = coin() ? 1 : Hq;
    in.push_back(fconst({B, Hk, T, D}));
    in.push_back(fconst({B, Hk, T, 1 + rnd(4)}));
  } else {
    S = d[1];
    Hq = d[2] % 2 == 0 && coin() ? 2 : 1;
    Hk = Hq == 2 && coin() ? 1 : Hq;
    D = d[2] / Hq;
    a.set("q_num_heads", Hq);
    a.set("kv_num_heads", Hk);
    in.push_back(fconst({B, T, Hk * D}));
    in.push_back(fconst({B, T, Hk * (1 + rnd(3))}));
  }
  const int64_t Dv = d.size() == 4 ? dims_of(in[2]).back() : dims_of(in[2]).back() / Hk;
  in.push_back(coin(30) ? fconst({S, past + T}) : Value{});
  if (past > 0) {
    in.push_back(fconst({B, Hk, past, D}));
    in.push_back(fconst({B, Hk, past, Dv}));
  }
  while (!in.back().present()) in.pop_back();
  const size_t outputs = past > 0 && coin() ? 3 : 1;
  std::vector<Value> out = op("Attention", in, a, outputs);
  return out[static_cast<size_t>(rnd(static_cast<int64_t>(outputs)))];
}

Value Generator::rotary(const Value& x, const Dims& d) {
  // Head size: the last dim of a 4-D x; of a 3-D one, split into 2 heads when that
  // leaves an even size, else 1.
  const bool split = d.size() == 3 && d[2] % 4 == 0 && coin();
  const int64_t B = d[0], S = d.size() == 4 ? d[2] : d[1], head = d.back() / (split ? 2 : 1);
  if (head % 2 != 0) return attention(x, d);
  Attributes a;
  if (d.size() == 3) a.set("num_heads", int64_t{split ? 2 : 1});
  if (coin(30)) a.set("interleaved", int64_t{1});
  const int64_t rot = head > 2 && coin(30) ? 2 * (1 + rnd(head / 2 - 1)) : head;
  if (rot != head) a.set("rotary_embedding_dim", rot);
  if (coin(25)) return op1("RotaryEmbedding", {x, fconst({B, S, rot / 2}), fconst({B, S, rot / 2})}, a);
  const int64_t positions = S + rnd(4);
  std::vector<int64_t> ids(static_cast<size_t>(B * S));
  for (int64_t& i : ids) i = rnd(positions);
  Value pos = b_.constant(Tensor::from_i64(DType::Int64, {B, S}, ids));
  return op1("RotaryEmbedding", {x, fconst({positions, rot / 2}), fconst({positions, rot / 2}), pos}, a);
}

Value Generator::fused(const Value& x) {
  if (x.type().dtype != DType::Float32 || dims_of(x).empty()) throw Error("not a float tensor");
  GraphBuilder body;
  Value in = body.input("x", x.type());
  Value y = coin() ? body.op1("Mul", {body.op1("Sigmoid", {in}), in}) : body.op1("Softmax", {in}, {{"axis", int64_t{-1}}});
  return mugraph::make_fused_node(b_, body.finish({y}, {"y"}), "", {x}, "")[0];
}

Value Generator::batchnorm(const Value& x) {
  int64_t c = dims_of(x)[1];
  return op1("BatchNormalization", {x, fconst({c}, 0.5, 1.5), fconst({c}), fconst({c}), fconst({c}, 0.5, 2)},
             {{"epsilon", 1e-5}});
}

Value Generator::conv(const Value& x) {
  Dims d = dims_of(x);
  if (d.size() != 4) throw Error("Conv needs rank 4");
  int64_t c = d[1];
  int64_t group = c % 2 == 0 && coin(30) ? 2 : 1;
  int64_t m = group * (1 + rnd(3));
  int64_t k = 1 + rnd(3), s = 1 + rnd(2), p = rnd(2);
  std::vector<Value> in{x, fconst({m, c / group, k, k})};
  if (coin()) in.push_back(fconst({m}));
  Attributes a{{"kernel_shape", std::vector<int64_t>{k, k}},
               {"strides", std::vector<int64_t>{s, s}},
               {"pads", std::vector<int64_t>{p, p, p, p}}};
  if (group > 1) a.set("group", group);
  Value y = op1("Conv", in, a);
  switch (rnd(6)) {  // the patterns the Conv fusions look for, and decoders' upsampling
    case 0: return batchnorm(y);
    case 1: return op1("Add", {y, fconst({m, 1, 1})});
    case 2: return op1("Mul", {y, fconst({m, 1, 1})});
    case 3: return upsample(y);
    default: return y;
  }
}

Value Generator::upsample(const Value& x) {
  const Dims d = dims_of(x);
  const int64_t c = d[1];
  switch (rnd(4)) {
    case 0: {
      const int64_t m = 1 + rnd(3), k = 1 + rnd(3), s = 1 + rnd(2), p = rnd(k);
      std::vector<Value> in{x, fconst({c, m, k, k})};
      if (coin()) in.push_back(fconst({m}));
      return op1("ConvTranspose", in,
                 {{"strides", std::vector<int64_t>{s, s}}, {"pads", std::vector<int64_t>{p, p, p, p}},
                  {"output_padding", std::vector<int64_t>{s - 1, s - 1}}});
    }
    case 1: {
      Attributes a{{"mode", std::string(coin() ? "nearest" : "linear")}};
      if (coin()) a.set("coordinate_transformation_mode", std::string(coin() ? "asymmetric" : "align_corners"));
      const double f = coin() ? 2.0 : 1.5;
      Value scales = b_.constant(Tensor::from_f64(DType::Float32, {4}, std::vector<double>{1, 1, f, f}));
      return op1("Resize", {x, Value{}, scales}, a);
    }
    case 2: return op1("DepthToSpace", {op1("Concat", {x, x, x, x}, {{"axis", int64_t{1}}})},
                       {{"blocksize", int64_t{2}}, {"mode", std::string(coin() ? "DCR" : "CRD")}});
    default: {
      if (d[2] % 2 || d[3] % 2) return op1("SpaceToDepth", {op1("Concat", {x, x}, {{"axis", int64_t{2}}})},
                                           {{"blocksize", int64_t{1}}});
      return op1("SpaceToDepth", {x}, {{"blocksize", int64_t{2}}});
    }
  }
}

// Quantization on constants only: the optimizer's folding paths see them, and no
// run-time value is rounded (a rewrite may reorder the float sums before a
// QuantizeLinear, which moves a rounding step: the differential checks compare
// floats). Each pattern gives [1, n] for x's last extent n; their sum is added to x.
Value Generator::quantized(const Value& x) {
  const Dims d = dims_of(x);
  const int64_t n = d.empty() ? 1 : d.back();
  auto q8 = [&](const Dims& dims, DType t) {
    std::vector<int64_t> v(static_cast<size_t>(numel(dims)));
    for (int64_t& e : v) e = t == DType::UInt8 ? rnd(256) : rnd(256) - 128;
    return b_.constant(Tensor::from_i64(t, dims, v));
  };
  auto zp = [&](DType t) { return b_.constant(Tensor::from_i64(t, {}, std::vector<int64_t>{rnd(5)})); };
  auto sc = [&](double lo, double hi) { return scalar(uniform(lo, hi)); };
  // Per-axis quantize and dequantize.
  Value s = op1("Reshape", {fconst({1, n}, 0.05, 0.2), iconst({n})});
  Value q = op1("QuantizeLinear", {fconst({1, n}), s, q8({n}, DType::Int8)}, {{"axis", int64_t{1}}});
  Value r = op1("DequantizeLinear", {q, s, q8({n}, DType::Int8)}, {{"axis", int64_t{1}}});
  // quantize_dynamic's pattern.
  std::vector<Value> dq = op("DynamicQuantizeLinear", {fconst({1, 4})}, {}, 3);
  Value mm = op1("MatMulInteger", {dq[0], q8({4, n}, DType::Int8), dq[2], zp(DType::Int8)});
  r = op1("Add", {r, op1("Mul", {op1("Cast", {mm}, {{"to", int64_t{1}}}), op1("Mul", {dq[1], sc(0.001, 0.01)})})});
  // The QOperator contractions.
  Value qm = op1("QLinearMatMul", {q8({1, 4}, DType::UInt8), sc(0.01, 0.1), zp(DType::UInt8), q8({4, n}, DType::Int8),
                                   sc(0.01, 0.1), zp(DType::Int8), sc(0.5, 1), zp(DType::UInt8)});
  r = op1("Add", {r, op1("DequantizeLinear", {qm, sc(0.01, 0.1), zp(DType::UInt8)})});
  Value xq = q8({1, 2, 3, 3}, DType::UInt8), w = q8({n, 2, 3, 3}, DType::Int8);
  Value c = coin() ? op1("Cast", {op1("ConvInteger", {xq, w, zp(DType::UInt8)})}, {{"to", int64_t{1}}})
                   : op1("DequantizeLinear", {op1("QLinearConv", {xq, sc(0.01, 0.1), zp(DType::UInt8), w, sc(0.001, 0.01),
                                                                  zp(DType::Int8), sc(0.5, 1), zp(DType::UInt8)}),
                                              sc(0.01, 0.1), zp(DType::UInt8)});
  r = op1("Add", {r, op1("Reshape", {c, iconst({1, n})})});
  return op1("Add", {x, r});
}

}  // namespace isomer::fuzz::detail
