#include "fuzz/random_graph.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "check/compare.h"
#include "eval/evaluator.h"
#include "ir/error.h"
#include "mugraph/region.h"
#include "ops/op.h"

namespace isomer::fuzz {

namespace {

constexpr int64_t kMaxElements = 2048;  // keeps evaluation of a fuzz model in the millisecond range

using Dims = std::vector<int64_t>;

Dims dims_of(const Value& v) { return static_dims(v.type().shape, "fuzz value"); }

int64_t numel(const Dims& d) { return std::accumulate(d.begin(), d.end(), int64_t{1}, std::multiplies<>()); }

class Generator {
 public:
  Generator(uint64_t seed, const RandomGraphOptions& opts) : rng_(seed), opts_(opts) {}

  Graph run() {
    make_inputs();
    size_t made = 0;
    for (size_t attempt = 0; made < opts_.max_ops && attempt < opts_.max_ops * 8; ++attempt)
      if (try_recipe()) ++made;
    return finish();
  }

 private:
  std::mt19937_64 rng_;
  RandomGraphOptions opts_;
  GraphBuilder b_{/*dedupe=*/false};
  std::vector<Value> floats_, ints_, bools_;
  uint64_t next_uid_ = 1;
  int next_input_ = 0;

  // --- randomness -----------------------------------------------------------------
  // A choice among none (a rank-0 value has no axis) abandons the recipe.
  int64_t rnd(int64_t n) {
    if (n <= 0) throw Error("nothing to choose from");
    return static_cast<int64_t>(rng_() % static_cast<uint64_t>(n));
  }
  bool coin(int percent = 50) { return rnd(100) < percent; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * (static_cast<double>(rng_() >> 11) * 0x1.0p-53); }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(rnd(static_cast<int64_t>(v.size())))]; }
  // Recent values are picked more often, so chains get deep.
  Value pick_float() {
    size_t n = floats_.size();
    if (coin(60)) return floats_[n - 1 - static_cast<size_t>(rnd(std::min<int64_t>(3, static_cast<int64_t>(n))))];
    return pick(floats_);
  }
  Value pick_float_rank(int64_t rank) {
    std::vector<Value> fit;
    for (const Value& v : floats_)
      if (v.type().rank() == rank) fit.push_back(v);
    if (fit.empty()) throw Error("no value of rank " + std::to_string(rank));
    return coin(50) ? fit.back() : pick(fit);
  }

  // --- constants --------------------------------------------------------------------
  Value fconst(const Dims& dims, double lo = -1, double hi = 1) {
    std::vector<double> data(static_cast<size_t>(numel(dims)));
    bool integral = coin(20);  // integer-valued constants keep field semantics usable later
    for (double& x : data) x = integral ? std::round(uniform(lo, hi) * 2) / 2 : uniform(lo, hi);
    return b_.constant(Tensor::from_f64(DType::Float32, dims, data));
  }
  Value scalar(double x) { return b_.constant(Tensor::scalar_f32(static_cast<float>(x))); }
  Value iconst(const Dims& values) { return b_.constant(Tensor::vector_i64(values)); }

  // --- graph interface ----------------------------------------------------------------
  Dims random_dims(int64_t rank) {
    Dims d;
    for (int64_t i = 0; i < rank; ++i) d.push_back(1 + rnd(4));
    return d;
  }
  Value new_input(DType t, const Dims& dims) {
    std::string name = "in" + std::to_string(next_input_++);
    return b_.input(name, TensorType{t, make_shape(dims)});
  }
  void make_inputs() {
    int64_t n = 1 + rnd(2);
    for (int64_t i = 0; i < n; ++i) {
      int64_t rank = coin(45) ? 4 : 1 + rnd(3);
      Dims d = random_dims(rank);
      if (rank == 4) d = {1 + rnd(2), 1 + rnd(4), 3 + rnd(3), 3 + rnd(3)};
      floats_.push_back(new_input(DType::Float32, d));
    }
    if (opts_.int_input && coin(40)) ints_.push_back(new_input(DType::Int64, random_dims(1 + rnd(2))));
  }
  // Outputs: the last value, then values nobody reads (so that little of what was
  // made is dead), then any others.
  Graph finish() {
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

  // --- node construction ---------------------------------------------------------------
  std::vector<Value> op(std::string_view name, std::vector<Value> in, Attributes a = {}, size_t n = 0) {
    if (std::find(opts_.avoid_ops.begin(), opts_.avoid_ops.end(), name) != opts_.avoid_ops.end())
      throw Error("operator avoided");
    std::vector<Value> out = b_.op(name, std::move(in), std::move(a), n);
    for (const Value& v : out) require(numel(dims_of(v)) <= kMaxElements, "fuzz value too large");
    return out;
  }
  Value op1(std::string_view name, std::vector<Value> in, Attributes a = {}) { return op(name, std::move(in), a)[0]; }
  // A strictly positive value (>= 0.5) made from x: the domain of Log, Sqrt, Div, Pow.
  Value positive(const Value& x) { return op1("Add", {op1("Abs", {x}), scalar(0.5)}); }
  // A second operand that broadcasts against x.
  Value partner(const Value& x) {
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
  Value opaque(const Value& x) {
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

  bool try_recipe() {
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

  std::vector<Value> recipe() {
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

  // --- the operators current exporters add ---------------------------------------------
  Value unary_more(const Value& x) {
    static const char* const kPlain[] = {"Sin", "Cos", "Floor", "Ceil", "Round", "Sign", "Softplus", "Mish", "Selu"};
    switch (rnd(4)) {
      case 0: return op1(kPlain[rnd(9)], {x});
      case 1: return op1("Elu", {x}, {{"alpha", uniform(0.5, 2)}});
      case 2: return op1("Celu", {x}, {{"alpha", uniform(0.5, 2)}});
      default: return op1("ThresholdedRelu", {x}, {{"alpha", uniform(-0.5, 0.5)}});
    }
  }

  Value binary_more(const Value& x) {
    const Dims d = dims_of(x);
    switch (rnd(4)) {
      case 0: return op1("Mod", {x, positive(partner(x))}, {{"fmod", int64_t{1}}});
      case 1: return op1("Sum", {x, partner(x), partner(x)});
      case 2: return op1("Mean", {x, partner(x)});
      default: return op1("PRelu", {x, d.empty() || coin() ? scalar(uniform(0, 0.5)) : fconst({d.back()}, 0, 0.5)});
    }
  }

  // A bool mask from comparisons and logic, used by a Where (attention masks).
  Value compare_and_select(const Value& x) {
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

  Value reduce_more(const Value& x, const Dims& d) {
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

  std::vector<Value> along_axis(const Value& x, const Dims& d) {
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

  Value normalize_more(const Value& x, const Dims& d) {
    const int64_t r = static_cast<int64_t>(d.size());
    if (r == 0) throw Error("scalar");
    if (r < 3 || coin()) {
      const int64_t axis = -1 - rnd(r);
      return op1("RMSNormalization", {x, fconst(Dims(d.end() + axis, d.end()), 0.5, 1.5)}, {{"axis", axis}});
    }
    const int64_t c = d[1];
    if (coin()) return op1("InstanceNormalization", {x, fconst({c}, 0.5, 1.5), fconst({c})});
    const int64_t groups = c % 2 == 0 && coin() ? 2 : 1;
    return op1("GroupNormalization", {x, fconst({c}, 0.5, 1.5), fconst({c})}, {{"num_groups", groups}});
  }

  Value place_elements(const Value& x, const Dims& d) {
    const int64_t r = static_cast<int64_t>(d.size());
    if (r == 0) throw Error("scalar");
    switch (rnd(6)) {
      case 0: {
        Dims reps;
        for (int64_t i = 0; i < r; ++i) reps.push_back(1 + rnd(2));
        return op1("Tile", {x, iconst(reps)});
      }
      case 1: {
        if (r < 2) throw Error("rank");
        std::vector<Value> in{x};
        if (coin()) in.push_back(b_.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{rnd(5) - 2})));
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
      default: return op1("GlobalMaxPool", {pick_float_rank(4)});
    }
  }

  Value einsum_or_range(const Value& x, const Dims& d) {
    const int64_t r = static_cast<int64_t>(d.size());
    if (r == 3 && coin(30)) return recurrent(x, d);
    if ((r == 3 || r == 4) && coin(25)) return attention(x, d);
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

  // LSTM, GRU or RNN over x read as [seq, batch, input] (or, with layout 1, [batch, seq, input]).
  Value recurrent(const Value& x, const Dims& d) {
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

  // ONNX Attention with x as the queries: 4-D [B, heads, S, D] against one or as
  // many key/value heads, or 3-D [B, S, heads * D] with the heads dividing x's last
  // dim; sometimes causal, masked, softcapped or with a past.
  Value attention(const Value& x, const Dims& d) {
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

  // A fused μGraph region (no kernel: its body's semantics run) around a small chain.
  Value fused(const Value& x) {
    if (x.type().dtype != DType::Float32 || dims_of(x).empty()) throw Error("not a float tensor");
    GraphBuilder body;
    Value in = body.input("x", x.type());
    Value y = coin() ? body.op1("Mul", {body.op1("Sigmoid", {in}), in}) : body.op1("Softmax", {in}, {{"axis", int64_t{-1}}});
    return mugraph::make_fused_node(b_, body.finish({y}, {"y"}), "", {x}, "")[0];
  }

  Value batchnorm(const Value& x) {
    int64_t c = dims_of(x)[1];
    return op1("BatchNormalization", {x, fconst({c}, 0.5, 1.5), fconst({c}), fconst({c}), fconst({c}, 0.5, 2)},
               {{"epsilon", 1e-5}});
  }

  Value conv(const Value& x) {
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

  // ConvTranspose, Resize or a pixel shuffle of an [N, C, H, W] value.
  Value upsample(const Value& x) {
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
};

// Graph inputs nobody reads are dropped (cutting leaves some behind).
Graph drop_unused_inputs(const Graph& g) {
  std::unordered_set<const Node*> used;
  for (const NodePtr& n : g.topo_order())
    for (const Value& v : n->inputs()) used.insert(v.node.get());
  for (const Value& v : g.outputs()) used.insert(v.node.get());
  std::vector<NodePtr> inputs;
  for (const NodePtr& in : g.inputs())
    if (used.count(in.get())) inputs.push_back(in);
  return Graph(inputs, g.outputs(), g.output_names(), g.info());
}

// `g` with the outputs of `target` replaced by fresh graph inputs, or (bypass) by
// its input `bypass_input`, which must have the output's type.
Graph cut(const Graph& g, const Node* target, int bypass_input = -1) {
  GraphBuilder b(/*dedupe=*/false);
  std::unordered_map<const Node*, std::vector<Value>> map;
  for (const NodePtr& in : g.inputs()) map[in.get()] = {b.input(in->name(), in->output_types()[0])};
  auto mapped = [&](const Value& v) { return v.present() ? map.at(v.node.get()).at(v.index) : Value{}; };
  int cuts = 0;
  for (const NodePtr& n : g.topo_order()) {
    if (map.count(n.get())) continue;
    std::vector<Value> ins;
    for (const Value& v : n->inputs()) ins.push_back(mapped(v));
    if (n.get() == target && bypass_input >= 0) {
      map[n.get()] = {ins.at(static_cast<size_t>(bypass_input))};
    } else if (n.get() == target) {
      for (const TensorType& t : n->output_types())
        map[n.get()].push_back(b.input("cut" + std::to_string(cuts++), t));
    } else if (n->kind() == NodeKind::Constant) {
      map[n.get()] = {b.constant(*n->value(), n->name())};
    } else if (n->kind() == NodeKind::Opaque) {
      map[n.get()] = b.opaque(*n->opaque(), ins, n->output_types(), n->name());
    } else {
      map[n.get()] = b.op(n->op_type(), ins, n->attrs(), n->num_outputs(), n->name());
    }
  }
  std::vector<Value> outs;
  for (const Value& v : g.outputs()) outs.push_back(mapped(v));
  return drop_unused_inputs(b.finish(outs, g.output_names(), g.info()));
}

bool all_finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (is_float(t.dtype()))
      for (double x : t.to_f64())
        if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace

Graph random_graph(uint64_t seed, const RandomGraphOptions& opts) { return Generator(seed, opts).run(); }

std::vector<Tensor> evaluate_with_opaque(const Graph& g, const std::vector<Tensor>& inputs) {
  require(inputs.size() == g.inputs().size(), "wrong number of inputs");
  std::unordered_map<const Node*, std::vector<Tensor>> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[g.inputs()[i].get()] = {inputs[i]};
  for (const NodePtr& n : g.topo_order()) {
    if (values.count(n.get())) continue;
    if (n->kind() == NodeKind::Constant) {
      values[n.get()] = {*n->value()};
      continue;
    }
    require(n->kind() != NodeKind::Input, "input '" + n->name() + "' is not a graph input");
    std::vector<Tensor> args;
    for (const Value& v : n->inputs()) args.push_back(v.present() ? values.at(v.node.get()).at(v.index) : Tensor());
    if (n->kind() == NodeKind::Opaque) {
      const std::string& type = n->op_type();
      require((type == "Asinh" || type == "Atan") && args.size() == 1, describe(*n) + " is not a fuzz opaque node");
      std::vector<double> x = args[0].to_f64();
      for (double& e : x) e = type == "Asinh" ? std::asinh(e) : std::atan(e);
      values[n.get()] = {Tensor::from_f64(args[0].dtype(), args[0].dims(), x)};
      continue;
    }
    EvalContext ctx{n->attrs(), args, n->num_outputs()};
    try {
      values[n.get()] = n->op()->eval(ctx);
    } catch (const Error& e) {
      throw Error("evaluating " + describe(*n) + ": " + e.what());
    }
    require(values[n.get()].size() == n->num_outputs(), describe(*n) + " returned the wrong number of outputs");
  }
  std::vector<Tensor> out;
  for (const Value& v : g.outputs()) out.push_back(values.at(v.node.get()).at(v.index));
  return out;
}

Mismatch differential_check(const Graph& g, const Transform& transform, uint64_t seed, double tolerance) {
  std::vector<Tensor> inputs = random_inputs(g, seed);
  std::vector<Tensor> want;
  try {
    want = evaluate_with_opaque(g, inputs);
  } catch (const Error&) {
    return {};  // not a model we can judge
  }
  if (!all_finite(want)) return {};
  Mismatch m;
  m.judged = true;
  m.found = true;
  Graph h;
  try {
    h = transform(g);
  } catch (const Error& e) {
    m.what = std::string("transform threw: ") + e.what();
    return m;
  }
  if (h.inputs().size() != g.inputs().size() || h.outputs().size() != g.outputs().size()) {
    m.what = "transform changed the graph interface";
    return m;
  }
  std::vector<Tensor> got;
  try {
    got = evaluate_with_opaque(h, inputs);
  } catch (const Error& e) {
    m.what = std::string("evaluating the transformed graph threw: ") + e.what();
    return m;
  }
  CheckResult r = compare_outputs(want, got, g.output_names(), tolerance);
  m.found = r.status != CheckResult::Status::Passed;
  if (!m.found) return m;
  m.what = r.reason.empty() ? "outputs differ" : r.reason;
  return m;
}

Graph minimize(const Graph& g, const std::function<bool(const Graph&)>& still_fails) {
  Graph best = g;
  if (best.outputs().size() > 1)
    for (size_t i = 0; i < best.outputs().size(); ++i) {
      Graph one = drop_unused_inputs(Graph(best.inputs(), {best.outputs()[i]}, {best.output_names()[i]}, best.info()));
      if (still_fails(one)) {
        best = one;
        break;
      }
    }
  for (bool progress = true; progress;) {
    progress = false;
    std::vector<NodePtr> order = best.topo_order();
    for (auto it = order.rbegin(); it != order.rend() && !progress; ++it) {
      const Node& n = **it;
      if (n.kind() != NodeKind::Op && n.kind() != NodeKind::Opaque) continue;
      // Ways to remove n: cut it off (its outputs become inputs), or pass one of its
      // inputs of the same type through in its place.
      std::vector<int> ways{-1};
      for (size_t i = 0; n.num_outputs() == 1 && i < n.inputs().size(); ++i)
        if (n.inputs()[i].present() && n.inputs()[i].type() == n.output_types()[0]) ways.push_back(static_cast<int>(i));
      for (int way : ways) {
        Graph smaller;
        try {
          smaller = cut(best, &n, way);
        } catch (const Error&) {
          continue;  // e.g. a Reshape whose shape was computed by the node cut off
        }
        if (smaller.num_ops() < best.num_ops() && still_fails(smaller)) {
          best = smaller;
          progress = true;
          break;
        }
      }
    }
  }
  return best;
}

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
          "Mish", "Selu", "Elu", "Celu", "ThresholdedRelu", "Mod", "Sum", "Mean", "PRelu", "Less", "LessOrEqual",
          "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "ReduceMax", "ReduceMin",
          "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ArgMax",
          "ArgMin", "CumSum", "LogSoftmax", "RMSNormalization", "InstanceNormalization", "GroupNormalization",
          "Tile", "Trilu", "GatherElements", "GatherND", "ScatterND", "GlobalMaxPool", "Range", "Einsum", "MuGraph", "LSTM",
          "GRU", "RNN", "ConvTranspose", "Resize", "DepthToSpace", "SpaceToDepth", "Attention"};
}

}  // namespace isomer::fuzz
