// The generator's core: randomness, constants, the graph's inputs and outputs,
// node construction, and the dispatch over recipes (with the recipes for single
// operators inline). See generator.h.
#include "fuzz/generator.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace isomer::fuzz {
namespace detail {

Value Generator::pick_float_rank(int64_t rank) {
  std::vector<Value> fit;
  for (const Value& v : floats_)
    if (v.type().rank() == rank) fit.push_back(v);
  if (fit.empty()) throw Error("no value of rank " + std::to_string(rank));
  return coin(50) ? fit.back() : pick(fit);
}

Value Generator::fconst(const Dims& dims, double lo, double hi) {
  std::vector<double> data(static_cast<size_t>(numel(dims)));
  bool integral = coin(20);  // integer-valued constants keep field semantics usable later
  for (double& x : data) x = integral ? std::round(uniform(lo, hi) * 2) / 2 : uniform(lo, hi);
  return b_.constant(Tensor::from_f64(DType::Float32, dims, data));
}

Dims Generator::random_dims(int64_t rank) {
  Dims d;
  for (int64_t i = 0; i < rank; ++i) d.push_back(1 + rnd(4));
  return d;
}

Value Generator::new_input(DType t, const Dims& dims) {
  std::string name = "in" + std::to_string(next_input_++);
  return b_.input(name, TensorType{t, make_shape(dims)});
}

void Generator::make_inputs() {
  int64_t n = 1 + rnd(2);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rank = coin(45) ? 4 : 1 + rnd(3);
    Dims d = random_dims(rank);
    if (rank == 4) d = {1 + rnd(2), 1 + rnd(4), 3 + rnd(3), 3 + rnd(3)};
    floats_.push_back(new_input(DType::Float32, d));
  }
  if (opts_.int_input && coin(40)) ints_.push_back(new_input(DType::Int64, random_dims(1 + rnd(2))));
}

Graph Generator::finish() {
  std::unordered_set<Value, ValueHash> read;
  for (const auto* pool : {&floats_, &ints_, &bools_})
    for (const Value& v : *pool)
      for (const Value& in : v.node->inputs()) read.insert(in);
  std::vector<Value> unread, others;
  for (const auto* pool : {&floats_, &ints_, &bools_})
    for (const Value& v : *pool) {
      if (v.node->kind() == NodeKind::Constant || v == floats_.back()) continue;
      (read.count(v) ? others : unread).push_back(v);
    }
  std::shuffle(unread.begin(), unread.end(), rng_);
  std::shuffle(others.begin(), others.end(), rng_);
  unread.insert(unread.end(), others.begin(), others.end());
  std::vector<Value> outs{floats_.back()};
  size_t want = 1 + static_cast<size_t>(rnd(static_cast<int64_t>(opts_.max_outputs) + 1));
  for (size_t i = 0; i < unread.size() && outs.size() < want; ++i)
    if (std::find(outs.begin(), outs.end(), unread[i]) == outs.end()) outs.push_back(unread[i]);
  std::vector<std::string> names;
  for (size_t i = 0; i < outs.size(); ++i) names.push_back("out" + std::to_string(i));
  return b_.finish(outs, names);
}

Value Generator::partner(const Value& x) {
  Dims d = dims_of(x);
  switch (rnd(5)) {
    case 0: {
      for (const Value& v : floats_)
        if (v != x && dims_of(v) == d) return v;
      return fconst(d);
    }
    case 1: return fconst(d);
    case 2: return d.empty() ? scalar(uniform(-1, 1)) : fconst({d.back()});
    case 3: return scalar(uniform(-2, 2));
    default: {
      Dims e = d;
      if (!e.empty()) e[0] = 1;
      return fconst(e);
    }
  }
}

Value Generator::opaque(const Value& x) {
  OpaqueInfo info;
  info.op_type = coin() ? "Asinh" : "Atan";
  onnx::NodeProto proto;
  proto.set_op_type(info.op_type);
  proto.add_input("x");
  proto.add_output("y");
  info.node_proto = proto.SerializeAsString();
  info.uid = next_uid_++;
  return b_.opaque(std::move(info), {x}, {x.type()})[0];
}

bool Generator::try_recipe() {
  try {
    std::vector<Value> made = recipe();
    for (const Value& v : made) {
      DType t = v.type().dtype;
      if (t == DType::Float32) floats_.push_back(v);
      else if (t == DType::Int64) ints_.push_back(v);
      else if (t == DType::Bool) bools_.push_back(v);
    }
    return !made.empty();
  } catch (const Error&) {
    return false;  // the shape rules rejected this combination; try another
  }
}

std::vector<Value> Generator::recipe() {
  Value x = pick_float();
  Dims d = dims_of(x);
  int64_t r = static_cast<int64_t>(d.size());
  switch (rnd(opts_.opaque ? 35 : 34)) {
    case 0: {
      static const char* const kPlain[] = {"Relu", "Sigmoid", "HardSwish", "Tanh", "Erf", "Neg", "Abs", "Identity"};
      return {op1(kPlain[rnd(8)], {x})};
    }
    case 1:
      switch (rnd(4)) {
        case 0: return {op1("LeakyRelu", {x}, {{"alpha", uniform(0.01, 0.5)}})};
        case 1: return {op1("HardSigmoid", {x}, {{"alpha", uniform(0.1, 0.5)}, {"beta", uniform(0.2, 0.8)}})};
        case 2: return {op1("Gelu", {x}, {{"approximate", std::string(coin() ? "none" : "tanh")}})};
        default: return {op1("Exp", {op1("Clip", {x, scalar(-3), scalar(3)})})};
      }
    case 2: {
      static const char* const kPositive[] = {"Log", "Sqrt", "Reciprocal"};
      return {op1(kPositive[rnd(3)], {positive(x)})};
    }
    case 3: {
      Value lo = coin(70) ? scalar(-uniform(0, 1)) : Value{};
      Value hi = coin(70) ? scalar(uniform(0, 1)) : Value{};
      return {op1("Clip", {x, lo, hi})};
    }
    case 4: {
      std::vector<Value> out = op("Dropout", {x}, {}, coin() ? 2 : 1);
      return out;
    }
    case 5: {
      if (!ints_.empty() && coin()) return {op1("Cast", {pick(ints_)}, {{"to", int64_t{1}}})};
      return {op1("Cast", {x}, {{"to", int64_t{1}}})};
    }
    case 6:
    case 7: {
      static const char* const kBinary[] = {"Add", "Sub", "Mul", "Max", "Min"};
      Value y = partner(x);
      return {coin() ? op1(kBinary[rnd(5)], {x, y}) : op1(kBinary[rnd(5)], {y, x})};
    }
    case 8: {
      if (coin()) return {op1("Div", {x, positive(partner(x))})};
      static const double kExponents[] = {2, 0.5, 3, -1};
      return {op1("Pow", {positive(x), scalar(kExponents[rnd(4)])})};
    }
    case 9: {
      // Equal on integers only: float equality flips on rounding differences.
      Value a = ints_.empty() ? op1("Shape", {x}) : pick(ints_);
      Value c = op1("Equal", {a, coin() ? iconst({rnd(4)}) : a});
      bools_.push_back(c);
      std::vector<Value> fits;
      for (const Value& v : floats_)
        if (v.type().rank() >= c.type().rank()) fits.push_back(v);
      Value y = fits.empty() ? fconst(dims_of(c)) : pick(fits);
      return {op1("Where", {c, y, partner(y)})};
    }
    case 10: {
      if (r == 0) throw Error("scalar");
      Dims w{d.back(), 1 + rnd(4)};
      return {coin(80) ? op1("MatMul", {x, fconst(w)}) : op1("MatMul", {fconst({1 + rnd(3), d[0]}), x})};
    }
    case 11: {
      Value a = r == 2 ? x : op1("Flatten", {x}, {{"axis", int64_t{r > 1 ? 1 : 0}}});
      Dims ad = dims_of(a);
      int64_t n = 1 + rnd(4);
      bool tb = coin();
      Value w = fconst(tb ? Dims{n, ad[1]} : Dims{ad[1], n});
      Attributes attrs{{"transB", int64_t{tb}}};
      if (coin(30)) attrs.set("alpha", uniform(0.5, 2));
      std::vector<Value> in{a, w};
      if (coin(70)) in.push_back(fconst(coin() ? Dims{n} : Dims{ad[0], n}));
      Value g = op1("Gemm", in, attrs);
      if (coin(40)) return {batchnorm(g)};
      return {g};
    }
    case 12:
    case 13: return {conv(coin(50) ? pick_float_rank(4) : x)};
    case 14: {
      Value v = pick_float_rank(4);
      if (coin(25)) return {op1("GlobalAveragePool", {v})};
      int64_t k = 1 + rnd(3), s = 1 + rnd(2), p = rnd(k);
      Attributes a{{"kernel_shape", std::vector<int64_t>{k, k}}, {"strides", std::vector<int64_t>{s, s}},
                   {"pads", std::vector<int64_t>{p, p, p, p}}};
      if (coin()) return {op1("MaxPool", {v}, a)};
      a.set("count_include_pad", int64_t{rnd(2)});
      return {op1("AveragePool", {v}, a)};
    }
    case 15: {
      if (r < 2) throw Error("rank");
      return {batchnorm(x)};
    }
    case 16: {
      if (r == 0) throw Error("scalar");
      int64_t axis = -1 - rnd(r);
      Dims nd(d.begin() + (r + axis), d.end());
      std::vector<Value> in{x, fconst(nd, 0.5, 1.5)};
      if (coin()) in.push_back(fconst(nd));
      if (coin()) return {op1("Softmax", {x}, {{"axis", axis}})};
      return {op1("LayerNormalization", in, {{"axis", axis}})};
    }
    case 17: {
      if (r == 0) throw Error("scalar");
      int64_t keep = rnd(2);
      Dims axes{rnd(r)};
      if (r > 1 && coin()) axes.push_back((axes[0] + 1) % r);
      if (coin()) return {op1("ReduceMean", {x}, {{"axes", axes}, {"keepdims", keep}})};
      return {op1("ReduceSum", {x, iconst(axes)}, {{"keepdims", keep}})};
    }
    case 18: {
      if (r == 0) throw Error("scalar");
      int64_t axis = rnd(r);
      std::vector<Value> parts{x};
      for (int64_t i = rnd(3); i > 0; --i) parts.push_back(coin() ? x : fconst(d));
      return {op1("Concat", parts, {{"axis", axis}})};
    }
    case 19: {
      int64_t axis = rnd(r);
      if (r == 0 || d[axis] < 2) throw Error("too small to split");
      int64_t first = 1 + rnd(d[axis] - 1);
      if (coin()) return op("Split", {x, iconst({first, d[axis] - first})}, {{"axis", axis}}, 2);
      return op("Split", {x}, {{"axis", axis}}, 2);
    }
    case 20: {
      std::vector<int64_t> perm(static_cast<size_t>(r));
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng_);
      Value t = op1("Transpose", {x}, {{"perm", perm}});
      if (!coin(40)) return {t};
      std::vector<int64_t> inv(perm.size());  // the inverse: a pair the passes remove
      for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      return {op1("Transpose", {t}, {{"perm", coin() ? inv : perm}})};
    }
    case 21: {
      int64_t n = numel(d);
      Dims shape;
      switch (rnd(4)) {
        case 0: shape = d; break;  // a no-op reshape
        case 1: shape = {n}; break;
        case 2: shape = {-1, d.empty() ? 1 : d.back()}; break;
        default: shape = {1, n}; break;
      }
      Value y = op1("Reshape", {x, iconst(shape)});
      if (coin(30)) y = op1("Reshape", {y, coin() ? iconst(d) : op1("Shape", {x})});  // chain, or shape folding
      return {y};
    }
    case 22: {
      if (coin()) return {op1("Flatten", {x}, {{"axis", int64_t{rnd(r + 1)}}})};
      int64_t axis = rnd(r + 1);
      Value u = op1("Unsqueeze", {x, iconst({axis})});
      if (coin()) return {op1("Squeeze", {u, iconst({axis})})};
      return {u};
    }
    case 23: {
      if (r == 0) throw Error("scalar");
      int64_t axis = rnd(r), n = d[axis];
      int64_t start = rnd(n), end = start + 1 + rnd(n - start);
      if (coin(25)) start = 0, end = n;  // a no-op slice
      std::vector<Value> in{x, iconst({start}), iconst({end}), iconst({axis})};
      if (coin()) in.push_back(iconst({1 + rnd(2)}));
      return {op1("Slice", in)};
    }
    case 24: {
      if (r == 0) throw Error("scalar");
      int64_t axis = rnd(r);
      Dims idx;
      for (int64_t i = 1 + rnd(3); i > 0; --i) idx.push_back(rnd(d[axis]));
      Value indices = iconst(idx);
      if (d[axis] >= 4 && !ints_.empty() && coin() && ints_.back().node->kind() == NodeKind::Input)
        indices = ints_.back();  // random_inputs gives integers in [0, 4)
      return {op1("Gather", {x, indices}, {{"axis", axis}})};
    }
    case 25: {
      if (r == 0) throw Error("scalar");
      Dims pads(static_cast<size_t>(2 * r), 0);
      if (!coin(25))
        for (int64_t& p : pads) p = rnd(2);
      static const char* const kModes[] = {"constant", "reflect", "edge"};
      std::string mode = kModes[rnd(3)];
      std::vector<Value> in{x, iconst(pads)};
      if (mode == "constant" && coin()) in.push_back(scalar(uniform(-1, 1)));
      Value p = op1("Pad", in, {{"mode", mode}});
      if (coin(30)) {  // Expand: to the same shape (a no-op) or along a new leading axis
        Dims to = dims_of(p);
        if (coin()) to.insert(to.begin(), 2);
        return {op1("Expand", {p, iconst(to)})};
      }
      if (coin(20)) {
        Value filled = op1("ConstantOfShape", {iconst(dims_of(p))},
                           {{"value", Tensor::from_f64(DType::Float32, {1}, std::vector<double>{uniform(-1, 1)})}});
        return {op1("Add", {p, filled})};
      }
      return {p};
    }
    case 26: return {unary_more(x)};
    case 27: return {binary_more(x)};
    case 28: return {compare_and_select(x)};
    case 29: return {reduce_more(x, d)};
    case 30: return along_axis(x, d);
    case 31: return {normalize_more(x, d)};
    case 32: return {place_elements(x, d)};
    case 33: return {einsum_or_range(x, d)};
    default:
      if (opts_.opaque && coin(60)) return {opaque(x)};
      if (coin(15)) return {fused(x)};
      // A common subexpression: the same operator on the same inputs again.
      for (size_t i = floats_.size(); i-- > 0;) {
        const Node& n = *floats_[i].node;
        if (n.kind() != NodeKind::Op || !n.op()->props.deterministic) continue;
        std::vector<Value> again = op(n.op_type(), n.inputs(), n.attrs(), n.num_outputs());
        return {op1("Add", {floats_[i], again[floats_[i].index]})};
      }
      return {op1("Add", {op1("Mul", {fconst({2}), fconst({2})}), scalar(1)})};  // constants to fold
  }
}

}  // namespace detail

Graph random_graph(uint64_t seed, const RandomGraphOptions& opts) { return detail::Generator(seed, opts).run(); }

std::vector<std::string> generated_op_types() {
  return {"Relu",      "LeakyRelu", "Sigmoid",   "HardSigmoid",       "HardSwish",         "Tanh",
          "Erf",       "Gelu",      "Exp",       "Log",               "Sqrt",              "Reciprocal",
          "Neg",       "Abs",       "Clip",      "Identity",          "Dropout",           "Cast",
          "Add",       "Sub",       "Mul",       "Div",               "Pow",               "Max",
          "Min",       "Equal",     "Where",     "MatMul",            "Gemm",              "Conv",
          "MaxPool",   "AveragePool", "GlobalAveragePool", "BatchNormalization", "LayerNormalization", "Softmax",
          "ReduceMean", "ReduceSum", "Concat",   "Split",             "Transpose",         "Reshape",
          "Flatten",   "Squeeze",   "Unsqueeze", "Slice",             "Gather",            "Pad",
          "Expand",    "Shape",     "ConstantOfShape", "Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "Softplus",
          "Mish", "Swish", "Selu", "Elu", "Celu", "ThresholdedRelu", "Mod", "Sum", "Mean", "PRelu", "Less", "LessOrEqual",
          "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "ReduceMax", "ReduceMin",
          "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ArgMax",
          "ArgMin", "CumSum", "LogSoftmax", "RMSNormalization", "InstanceNormalization", "GroupNormalization", "LRN",
          "Tile", "Trilu", "GatherElements", "GatherND", "ScatterND", "GlobalMaxPool", "Range", "Einsum", "MuGraph", "LSTM",
          "GRU", "RNN", "ConvTranspose", "Resize", "DepthToSpace", "SpaceToDepth", "Attention", "QuantizeLinear",
          "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv",
          "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softsign", "Size", "TopK",
          "ScatterElements", "OneHot", "GridSample", "DFT", "STFT", "EyeLike", "RotaryEmbedding", "Col2Im"};
}

}  // namespace isomer::fuzz
