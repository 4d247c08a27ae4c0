// The recurrent operators LSTM, GRU and RNN, as ONNX defines them (opset 7 on;
// `layout` came with 14): shape rule and float reference semantics. They have no
// field or symbolic semantics (sigmoid and tanh are not polynomial, and a
// recurrence over a symbolic number of steps is no fixed term), so the rule
// generator and the e-graph treat them as opaque but known: their shapes flow
// downstream and rewrites around them still apply.
#include "ops/rnn.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <variant>

#include "ir/invalid_node.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct ActivationInfo {
  std::string_view name;
  bool alpha = false, beta = false;  // which parameters it takes
  double default_alpha = NAN, default_beta = NAN;  // NAN: none, the attribute must give it
};

// ONNX's list of activation functions for recurrent operators.
constexpr ActivationInfo kActivations[] = {
    {"Relu"},
    {"Tanh"},
    {"Sigmoid"},
    {"Affine", true, true},
    {"LeakyRelu", true, false, 0.01},
    {"ThresholdedRelu", true, false, 1.0},
    {"ScaledTanh", true, true},
    {"HardSigmoid", true, true, 0.2, 0.5},
    {"Elu", true, false, 1.0},
    {"Softsign"},
    {"Softplus"},
};

std::vector<std::string> strings_attr(const Attributes& a, const std::string& name) {
  const AttrValue* v = a.find(name);
  if (!v) return {};
  if (const auto* s = std::get_if<std::vector<std::string>>(v)) return *s;
  if (const auto* s = std::get_if<std::string>(v)) return {*s};
  throw Error("attribute '" + name + "' must be a list of strings");
}

}  // namespace

double RnnActivation::operator()(double x) const {
  // Names are checked by rnn_config; compare the common ones first.
  if (name == "Sigmoid") return 1.0 / (1.0 + std::exp(-x));
  if (name == "Tanh") return std::tanh(x);
  if (name == "Relu") return x > 0 ? x : 0;
  if (name == "Affine") return alpha * x + beta;
  if (name == "LeakyRelu") return x >= 0 ? x : alpha * x;
  if (name == "ThresholdedRelu") return x > alpha ? x : 0;
  if (name == "ScaledTanh") return alpha * std::tanh(beta * x);
  if (name == "HardSigmoid") return std::max(0.0, std::min(1.0, alpha * x + beta));
  if (name == "Elu") return x >= 0 ? x : alpha * (std::exp(x) - 1);
  if (name == "Softsign") return x / (1 + std::abs(x));
  if (name == "Softplus") return std::log1p(std::exp(x));
  throw Error("unknown activation '" + name + "'");
}

bool RnnConfig::default_activations() const {
  static const char* const kLstm[] = {"Sigmoid", "Tanh", "Tanh"};
  static const char* const kGru[] = {"Sigmoid", "Tanh"};
  static const char* const kRnn[] = {"Tanh"};
  const char* const* want = cell == RnnCell::Lstm ? kLstm : cell == RnnCell::Gru ? kGru : kRnn;
  for (size_t i = 0; i < activations.size(); ++i)
    if (activations[i].name != want[i % static_cast<size_t>(per_direction)]) return false;
  return true;
}

bool RnnConfig::relu_rnn() const {
  return cell == RnnCell::Rnn &&
         std::all_of(activations.begin(), activations.end(), [](const RnnActivation& a) { return a.name == "Relu"; });
}

RnnConfig rnn_config(std::string_view op, const Attributes& attrs) {
  RnnConfig c;
  c.cell = op == "LSTM" ? RnnCell::Lstm : op == "GRU" ? RnnCell::Gru : RnnCell::Rnn;
  c.gates = c.cell == RnnCell::Lstm ? 4 : c.cell == RnnCell::Gru ? 3 : 1;
  c.per_direction = c.cell == RnnCell::Lstm ? 3 : c.cell == RnnCell::Gru ? 2 : 1;

  const std::string direction = attrs.get_string("direction", "forward");
  require_valid(direction == "forward" || direction == "reverse" || direction == "bidirectional",
          "direction '" + direction + "' is none of forward, reverse, bidirectional");
  c.directions = direction == "bidirectional" ? 2 : 1;
  c.reverse = direction == "reverse";

  if (attrs.has("hidden_size")) {
    c.hidden = attrs.get_int("hidden_size");
    require_valid(c.hidden > 0, "hidden_size must be positive, not " + std::to_string(c.hidden));
  }
  c.layout = attrs.get_int("layout", 0);
  require_valid(c.layout == 0 || c.layout == 1, "layout must be 0 or 1, not " + std::to_string(c.layout));
  if (attrs.has("clip")) {
    c.has_clip = true;
    c.clip = attrs.get_float("clip");
    require_valid(c.clip > 0, "clip must be positive, not " + std::to_string(c.clip));
  }
  const int64_t input_forget = attrs.get_int("input_forget", 0);
  require_valid(input_forget == 0 || (input_forget == 1 && c.cell == RnnCell::Lstm),
          c.cell == RnnCell::Lstm ? "input_forget must be 0 or 1" : "input_forget is an LSTM attribute");
  c.input_forget = input_forget == 1;
  const int64_t lbr = attrs.get_int("linear_before_reset", 0);
  require_valid(lbr == 0 || (lbr == 1 && c.cell == RnnCell::Gru),
          c.cell == RnnCell::Gru ? "linear_before_reset must be 0 or 1" : "linear_before_reset is a GRU attribute");
  c.linear_before_reset = lbr == 1;

  std::vector<std::string> names = strings_attr(attrs, "activations");
  const size_t per = static_cast<size_t>(c.per_direction), want = per * static_cast<size_t>(c.directions);
  if (names.empty()) {
    static const char* const kDefaults[][3] = {{"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh"}, {"Tanh"}};
    for (size_t i = 0; i < want; ++i) names.emplace_back(kDefaults[static_cast<int>(c.cell)][i % per]);
  }
  require_valid(names.size() == want, "activations lists " + std::to_string(names.size()) + " functions; " +
                                    std::string(op) + " with " + std::to_string(c.directions) +
                                    " direction(s) takes " + std::to_string(want));
  const std::vector<double> alphas = attrs.get_floats("activation_alpha", {});
  const std::vector<double> betas = attrs.get_floats("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& a : kActivations)
      if (lower(std::string(a.name)) == lower(name)) info = &a;
    require_valid(info != nullptr, "activation '" + name + "' is not one of ONNX's recurrent activation functions");
    RnnActivation act{std::string(info->name), info->default_alpha, info->default_beta};
    // The parameter lists are consumed in order by the functions that take them.
    if (info->alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    require_valid(!(info->alpha && std::isnan(act.alpha)) && !(info->beta && std::isnan(act.beta)),
            "activation " + act.name + " needs activation_alpha and activation_beta values");
    c.activations.push_back(std::move(act));
  }
  return c;
}

namespace {

// ---- shape rule ---------------------------------------------------------------------

// a and b must agree where both are known; the known one wins.
Dim unify(const Dim& a, const Dim& b, const std::string& what) {
  if (a.is_static() && b.is_static())
    require_valid(a.value == b.value, what + ": " + std::to_string(a.value) + " vs " + std::to_string(b.value));
  return a.is_static() ? a : b;
}

Dim times(const Dim& d, int64_t k) { return d.is_static() ? Dim(d.value * k) : Dim::unknown(); }

void expect_shape(const TensorType& t, const std::vector<Dim>& want, const std::string& what) {
  require_valid(t.rank() == static_cast<int64_t>(want.size()),
          what + " must have rank " + std::to_string(want.size()) + ", not " + std::to_string(t.rank()));
  for (size_t i = 0; i < want.size(); ++i) unify(t.shape[i], want[i], what + " dim " + std::to_string(i));
}

std::vector<TensorType> infer_rnn(std::string_view op, const InferContext& ctx) {
  const RnnConfig c = rnn_config(op, ctx.attrs);
  const TensorType& x = ctx.in(0);
  require_valid(is_float(x.dtype), "X must be a float tensor");
  require_valid(x.rank() == 3, "X must have rank 3 ([seq, batch, input] or, with layout 1, [batch, seq, input])");
  const Dim seq = x.shape[c.layout == 0 ? 0 : 1], batch = x.shape[c.layout == 0 ? 1 : 0], input = x.shape[2];
  const TensorType &w = ctx.in(1), &r = ctx.in(2);
  for (const auto& [t, what] : {std::pair{&w, "W"}, std::pair{&r, "R"}}) {
    require_valid(t->dtype == x.dtype, std::string(what) + " must have X's type");
    require_valid(t->rank() == 3, std::string(what) + " must have rank 3");
  }
  Dim hidden = c.hidden > 0 ? Dim(c.hidden) : r.shape[2];
  if (!hidden.is_static() && w.shape[1].is_static()) hidden = Dim(w.shape[1].value / c.gates);
  const Dim dirs(c.directions), rows = times(hidden, c.gates);
  expect_shape(w, {dirs, rows, input}, "W ([directions, gates*hidden, input])");
  expect_shape(r, {dirs, rows, hidden}, "R ([directions, gates*hidden, hidden])");
  if (ctx.has_input(3)) {
    require_valid(ctx.in(3).dtype == x.dtype, "B must have X's type");
    expect_shape(ctx.in(3), {dirs, times(hidden, 2 * c.gates)}, "B ([directions, 2*gates*hidden])");
  }
  if (ctx.has_input(4)) {
    require_valid(ctx.in(4).dtype == DType::Int32, "sequence_lens must be int32");
    expect_shape(ctx.in(4), {batch}, "sequence_lens ([batch])");
  }
  const std::vector<Dim> state = c.layout == 0 ? std::vector<Dim>{dirs, batch, hidden} : std::vector<Dim>{batch, dirs, hidden};
  const char* state_form = c.layout == 0 ? " ([directions, batch, hidden])" : " ([batch, directions, hidden])";
  for (size_t k : {size_t{5}, size_t{6}}) {
    if (static_cast<int64_t>(k) >= c.max_inputs() || !ctx.has_input(k)) continue;
    const std::string what = k == 5 ? "initial_h" : "initial_c";
    require_valid(ctx.in(k).dtype == x.dtype, what + " must have X's type");
    expect_shape(ctx.in(k), state, what + state_form);
  }
  if (c.cell == RnnCell::Lstm && ctx.has_input(7)) {
    require_valid(ctx.in(7).dtype == x.dtype, "P must have X's type");
    expect_shape(ctx.in(7), {dirs, times(hidden, 3)}, "P ([directions, 3*hidden])");
  }
  const size_t outputs = ctx.num_outputs == 0 ? static_cast<size_t>(c.max_outputs()) : ctx.num_outputs;
  require_valid(outputs <= static_cast<size_t>(c.max_outputs()),
          std::string(op) + " has " + std::to_string(c.max_outputs()) + " outputs, not " + std::to_string(outputs));
  const Shape y = c.layout == 0 ? Shape{seq, dirs, batch, hidden} : Shape{batch, seq, dirs, hidden};
  std::vector<TensorType> out{{x.dtype, y}};
  while (out.size() < outputs) out.push_back({x.dtype, Shape(state.begin(), state.end())});
  return out;
}

// ---- reference semantics -------------------------------------------------------------

// The operator computed in double precision, one direction and batch entry at a time.
class Recurrence {
 public:
  Recurrence(std::string_view op, const EvalContext& ctx) : c_(rnn_config(op, ctx.attrs)), ctx_(ctx) {
    const std::vector<int64_t>& xd = ctx.in(0).dims();
    seq_ = xd[c_.layout == 0 ? 0 : 1];
    batch_ = xd[c_.layout == 0 ? 1 : 0];
    input_ = xd[2];
    hidden_ = ctx.in(2).dims()[2];
    x_ = ctx.in(0).to_f64();
    w_ = ctx.in(1).to_f64();
    r_ = ctx.in(2).to_f64();
    const int64_t g = c_.gates, d = c_.directions;
    b_ = ctx.has_input(3) ? ctx.in(3).to_f64() : std::vector<double>(static_cast<size_t>(d * 2 * g * hidden_), 0.0);
    if (ctx.has_input(4)) lens_ = ctx.in(4).to_i64();
    else lens_.assign(static_cast<size_t>(batch_), seq_);
    for (int64_t n : lens_)
      require(n >= 0 && n <= seq_, "sequence_lens value " + std::to_string(n) + " is outside [0, " +
                                       std::to_string(seq_) + "]");
    if (ctx.has_input(5)) h0_ = ctx.in(5).to_f64();
    if (c_.cell == RnnCell::Lstm && ctx.has_input(6)) c0_ = ctx.in(6).to_f64();
    if (c_.cell == RnnCell::Lstm && ctx.has_input(7)) p_ = ctx.in(7).to_f64();
    y_.assign(static_cast<size_t>(seq_ * d * batch_ * hidden_), 0.0);
    yh_.assign(static_cast<size_t>(d * batch_ * hidden_), 0.0);
    yc_ = yh_;
  }

  std::vector<Tensor> run() {
    for (int64_t d = 0; d < c_.directions; ++d)
      for (int64_t b = 0; b < batch_; ++b) run_one(d, b);
    const DType t = ctx_.in(0).dtype();
    const int64_t d = c_.directions;
    const std::vector<int64_t> y_dims = c_.layout == 0 ? std::vector<int64_t>{seq_, d, batch_, hidden_}
                                                       : std::vector<int64_t>{batch_, seq_, d, hidden_};
    const std::vector<int64_t> s_dims = c_.layout == 0 ? std::vector<int64_t>{d, batch_, hidden_}
                                                       : std::vector<int64_t>{batch_, d, hidden_};
    std::vector<Tensor> out{Tensor::from_f64(t, y_dims, y_)};
    if (ctx_.num_outputs > 1) out.push_back(Tensor::from_f64(t, s_dims, yh_));
    if (ctx_.num_outputs > 2) out.push_back(Tensor::from_f64(t, s_dims, yc_));
    return out;
  }

 private:
  // Offsets of [seq, dirs, batch, hidden] and [dirs, batch, hidden] tensors in the node's layout.
  int64_t y_at(int64_t t, int64_t d, int64_t b) const {
    const int64_t dirs = c_.directions;
    return (c_.layout == 0 ? ((t * dirs + d) * batch_ + b) : ((b * seq_ + t) * dirs + d)) * hidden_;
  }
  int64_t state_at(int64_t d, int64_t b) const {
    return (c_.layout == 0 ? d * batch_ + b : b * c_.directions + d) * hidden_;
  }
  int64_t x_at(int64_t t, int64_t b) const { return (c_.layout == 0 ? t * batch_ + b : b * seq_ + t) * input_; }

  // `clip` bounds the gates' inputs; ONNX Runtime leaves LSTM's h(C) unclipped, and so does this.
  double act(int64_t d, int64_t k, double v, bool clip = true) const {
    if (clip && c_.has_clip) v = std::clamp(v, -c_.clip, c_.clip);
    return c_.activations[static_cast<size_t>(d * c_.per_direction + k)](v);
  }

  // Row `row` of direction d's W (or R) times vector v of length n.
  double dot(const std::vector<double>& m, int64_t d, int64_t row, int64_t n, const double* v) const {
    const double* w = m.data() + (d * c_.gates * hidden_ + row) * n;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += w[i] * v[i];
    return s;
  }

  void run_one(int64_t d, int64_t b) {
    const int64_t H = hidden_, G = c_.gates, len = lens_[static_cast<size_t>(b)];
    const bool reverse = c_.reverse || d == 1;
    std::vector<double> h(static_cast<size_t>(H), 0.0), cell(static_cast<size_t>(H), 0.0);
    if (!h0_.empty()) std::copy_n(h0_.begin() + state_at(d, b), H, h.begin());
    if (!c0_.empty()) std::copy_n(c0_.begin() + state_at(d, b), H, cell.begin());
    const double* wb = b_.data() + d * 2 * G * H;
    const double* rb = wb + G * H;
    std::vector<double> xw(static_cast<size_t>(G * H)), hr(static_cast<size_t>(G * H)), next(static_cast<size_t>(H));
    for (int64_t step = 0; step < len; ++step) {
      const int64_t t = reverse ? len - 1 - step : step;
      const double* x = x_.data() + x_at(t, b);
      for (int64_t row = 0; row < G * H; ++row) {
        xw[row] = dot(w_, d, row, input_, x) + wb[row];
        hr[row] = dot(r_, d, row, H, h.data()) + rb[row];
      }
      if (c_.cell == RnnCell::Lstm) {
        const double* p = p_.empty() ? nullptr : p_.data() + d * 3 * H;  // P is [i, o, f]
        for (int64_t j = 0; j < H; ++j) {
          const double i = act(d, 0, xw[j] + hr[j] + (p ? p[j] * cell[j] : 0));
          const double f = c_.input_forget ? 1 - i : act(d, 0, xw[2 * H + j] + hr[2 * H + j] + (p ? p[2 * H + j] * cell[j] : 0));
          const double g = act(d, 1, xw[3 * H + j] + hr[3 * H + j]);
          cell[j] = f * cell[j] + i * g;
          const double o = act(d, 0, xw[H + j] + hr[H + j] + (p ? p[H + j] * cell[j] : 0));
          next[j] = o * act(d, 2, cell[j], false);
        }
      } else if (c_.cell == RnnCell::Gru) {
        std::vector<double> reset(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) reset[j] = act(d, 0, xw[H + j] + hr[H + j]);
        if (!c_.linear_before_reset) {
          // (r * h) R_h^T: the reset applies before the product.
          std::vector<double> rh(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) rh[j] = reset[j] * h[j];
          for (int64_t j = 0; j < H; ++j) hr[2 * H + j] = dot(r_, d, 2 * H + j, H, rh.data()) + rb[2 * H + j];
        }
        for (int64_t j = 0; j < H; ++j) {
          const double z = act(d, 0, xw[j] + hr[j]);
          const double cand = act(d, 1, xw[2 * H + j] + (c_.linear_before_reset ? reset[j] * hr[2 * H + j] : hr[2 * H + j]));
          next[j] = (1 - z) * cand + z * h[j];
        }
      } else {
        for (int64_t j = 0; j < H; ++j) next[j] = act(d, 0, xw[j] + hr[j]);
      }
      h = next;
      std::copy(h.begin(), h.end(), y_.begin() + y_at(t, d, b));
    }
    // A sequence of length 0 leaves its final states zero, not the initial ones, as
    // ONNX Runtime does.
    if (len == 0) return;
    std::copy(h.begin(), h.end(), yh_.begin() + state_at(d, b));
    std::copy(cell.begin(), cell.end(), yc_.begin() + state_at(d, b));
  }

  RnnConfig c_;
  const EvalContext& ctx_;
  int64_t seq_ = 0, batch_ = 0, input_ = 0, hidden_ = 0;
  std::vector<double> x_, w_, r_, b_, h0_, c0_, p_, y_, yh_, yc_;
  std::vector<int64_t> lens_;
};

template <RnnCell Cell>
constexpr std::string_view name_of() {
  return Cell == RnnCell::Lstm ? "LSTM" : Cell == RnnCell::Gru ? "GRU" : "RNN";
}

template <RnnCell Cell>
std::vector<TensorType> infer(const InferContext& ctx) {
  return infer_rnn(name_of<Cell>(), ctx);
}

template <RnnCell Cell>
std::vector<Tensor> eval(const EvalContext& ctx) {
  return Recurrence(name_of<Cell>(), ctx).run();
}

// `layout` came with opset 14; earlier opsets have layout 0 only.
void export_rnn(OnnxForm& form, int64_t opset) {
  if (opset >= 14) return;
  require(form.attrs.get_int("layout", 0) == 0, "layout=1 cannot be written at opset " + std::to_string(opset));
  form.attrs.erase("layout");
}

template <RnnCell Cell>
OpDef rnn_op() {
  OpDef d;
  d.name = name_of<Cell>();
  d.min_inputs = 3;
  d.max_inputs = Cell == RnnCell::Lstm ? 8 : 6;
  d.min_opset = 7;  // opset 1's forms had output_sequence and other differences
  d.attributes = {{"activation_alpha", "floats"}, {"activation_beta", "floats"}, {"activations", "strings"},
                  {"clip", "float"},             {"direction", "string"},        {"hidden_size", "int"},
                  {"layout", "int"}};
  if (Cell == RnnCell::Lstm) d.attributes.push_back({"input_forget", "int"});
  if (Cell == RnnCell::Gru) d.attributes.push_back({"linear_before_reset", "int"});
  d.infer = infer<Cell>;
  d.eval = eval<Cell>;
  d.onnx_export = export_rnn;
  d.lower = Lowering::Recurrent;
  return d;
}

}  // namespace

OpDef def_LSTM() { return rnn_op<RnnCell::Lstm>(); }
OpDef def_GRU() { return rnn_op<RnnCell::Gru>(); }
OpDef def_RNN() { return rnn_op<RnnCell::Rnn>(); }

}  // namespace isomer
