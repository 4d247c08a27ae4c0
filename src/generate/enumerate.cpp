#include "generate/enumerate.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer::gen {
namespace {

constexpr double kExactLimit = 1099511627776.0;  // 2^40
constexpr uint64_t kRealTag = 0x5ea1ULL << 4;

uint64_t mix(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t hash_dims(uint64_t h, const std::vector<int64_t>& dims) {
  h = mix(h, dims.size());
  for (int64_t d : dims) h = mix(h, static_cast<uint64_t>(d));
  return h;
}

uint64_t fingerprint_field(const FieldArray& a) {
  uint64_t h = hash_dims(0x51, a.dims);
  for (const Fp& x : a.data) h = mix(h, x.value());
  return h;
}

uint64_t fingerprint_real(const Tensor& t) {
  uint64_t h = hash_dims(kRealTag, t.dims());
  for (double v : t.to_f64()) {
    if (v == 0) v = 0;  // -0 and 0 are the same value
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = mix(h, bits);
  }
  return h;
}

bool within_exact_range(const Tensor& t) {
  for (double v : t.to_f64())
    if (!(std::fabs(v) <= kExactLimit)) return false;
  return true;
}

int num_op_outputs(const OpVariant& v) { return v.split ? 2 : 1; }

std::vector<int64_t> split_sizes(const Family& f, LetterSum part, int64_t extent, size_t set) {
  int64_t first = sum_value(f, part, set);
  return {first, extent - first};
}

bool broadcastable(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
    int64_t x = a[a.size() - i], y = b[b.size() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// A cheap necessary condition for the shape rule to accept the operator (in one set):
// most candidate operators are ill-typed, and rejecting them here spares the shape
// rule's exception. Anything it lets through still goes through `infer`.
bool plausible(const OpVariant& v, const std::vector<const std::vector<int64_t>*>& in) {
  const std::vector<int64_t>& a = *in[0];
  if (v.op == "MatMul") return a.size() == 2 && in[1]->size() == 2 && a[1] == (*in[1])[0];
  if (v.op == "Add" || v.op == "Mul" || v.op == "Sub") return broadcastable(a, *in[1]);
  if (v.op == "Transpose") return a.size() == 2;
  if (v.op == "Concat" || v.op == "Split") {
    int64_t axis = v.attrs.get_int("axis", 0);
    if (axis >= static_cast<int64_t>(a.size())) return false;
    if (v.op == "Split") return true;
    const std::vector<int64_t>& b = *in[1];
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (static_cast<int64_t>(i) != axis && a[i] != b[i]) return false;
    return true;
  }
  if (v.op == "Conv") {
    const std::vector<int64_t>& w = *in[1];
    int64_t k = v.attrs.get_ints("kernel_shape")[0];
    return a.size() == 4 && w.size() == 4 && a[1] == w[1] && w[2] == k && w[3] == k;
  }
  if (v.op == "AveragePool" || v.op == "MaxPool") return a.size() == 4;
  return true;
}

// The shape rule in every set; out[output][set] = dims. False if a set rejects it.
bool infer_all(const Family& f, const OpInst& op, const std::vector<const std::vector<std::vector<int64_t>>*>& in,
               std::vector<std::vector<std::vector<int64_t>>>& out) {
  const OpVariant& v = f.ops[op.variant];
  const OpDef& def = get_op(v.op);
  size_t n_out = static_cast<size_t>(num_op_outputs(v));
  for (size_t s = 0; s < f.num_sets(); ++s) {
    std::vector<const std::vector<int64_t>*> here;
    for (const auto* dims : in) here.push_back(&(*dims)[s]);
    if (!plausible(v, here)) return false;
  }
  out.assign(n_out, std::vector<std::vector<int64_t>>(f.num_sets()));
  for (size_t s = 0; s < f.num_sets(); ++s) {
    std::vector<TensorType> types;
    std::vector<const Tensor*> constants;
    for (const auto* dims : in) {
      types.push_back(TensorType{DType::Float32, make_shape((*dims)[s])});
      constants.push_back(nullptr);
    }
    Tensor sizes;
    if (v.split) {
      const auto& x = (*in[0])[s];
      if (v.split_axis >= static_cast<int>(x.size())) return false;
      sizes = Tensor::vector_i64(split_sizes(f, op.part, x[static_cast<size_t>(v.split_axis)], s));
      if (sizes.to_i64()[1] <= 0) return false;
      types.push_back(sizes.type());
      constants.push_back(&sizes);
    }
    std::vector<TensorType> result;
    try {
      InferContext ctx{v.attrs, types, constants, n_out};
      result = def.infer(ctx);
    } catch (const Error&) {
      return false;
    }
    if (result.size() != n_out) return false;
    for (size_t k = 0; k < n_out; ++k) {
      std::vector<int64_t> dims;
      for (const Dim& d : result[k].shape) {
        if (!d.is_static() || d.value <= 0) return false;
        dims.push_back(d.value);
      }
      out[k][s] = std::move(dims);
    }
  }
  return true;
}

std::vector<FieldArray> apply_field(const Family& f, const OpInst& op, std::vector<FieldArray> args, size_t set) {
  const OpVariant& v = f.ops[op.variant];
  if (v.split) {
    int64_t extent = args[0].dims[static_cast<size_t>(v.split_axis)];
    FieldArray sizes({2});
    auto s = split_sizes(f, op.part, extent, set);
    sizes.data = {Fp(static_cast<uint64_t>(s[0])), Fp(static_cast<uint64_t>(s[1]))};
    args.push_back(std::move(sizes));
  }
  return get_op(v.op).eval_field(v.attrs, args);
}

std::vector<Tensor> apply_real(const Family& f, const OpInst& op, std::vector<Tensor> args, size_t set) {
  const OpVariant& v = f.ops[op.variant];
  if (v.split) {
    int64_t extent = args[0].dims()[static_cast<size_t>(v.split_axis)];
    args.push_back(Tensor::vector_i64(split_sizes(f, op.part, extent, set)));
  }
  EvalContext ctx{v.attrs, args, static_cast<size_t>(num_op_outputs(v))};
  return get_op(v.op).eval(ctx);
}

// First value index of each operator's outputs.
std::vector<size_t> first_values(const Family& f, const GraphCode& code) {
  std::vector<size_t> first;
  size_t next = f.vars.size();
  for (size_t i = 0; i < code.num_ops; ++i) {
    first.push_back(next);
    next += static_cast<size_t>(num_op_outputs(f.ops[code.ops[i].variant]));
  }
  first.push_back(next);
  return first;
}

bool op_key_less(const OpInst& a, const OpInst& b) {
  if (a.variant != b.variant) return a.variant < b.variant;
  if (a.in != b.in) return a.in < b.in;
  return a.part < b.part;
}

bool same_op(const OpInst& a, const OpInst& b) { return a.variant == b.variant && a.in == b.in && a.part == b.part; }

// Permutations of the variables that only exchange same-shaped ones (identity excluded).
std::vector<std::vector<size_t>> renamings(const Family& f) {
  std::vector<size_t> ident(f.vars.size());
  for (size_t i = 0; i < ident.size(); ++i) ident[i] = i;
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> p = ident;
  // Permutations of indices; keep those mapping every var to a same-shaped one.
  std::sort(p.begin(), p.end());
  do {
    bool ok = p != ident;
    for (size_t i = 0; ok && i < p.size(); ++i) ok = f.vars[i].dims == f.vars[p[i]].dims;
    if (ok) out.push_back(p);
  } while (std::next_permutation(p.begin(), p.end()));
  return out;
}

struct Val {
  std::vector<std::vector<int64_t>> dims;  // per shape set
  FieldArray field;
  Tensor real;
  bool poly = true;
  bool real_ok = true;
  uint64_t fp_field = 0, fp_real = 0, shape = 0;
  int uses = 0;
  bool from_op = false;
};

class Enumerator {
 public:
  Enumerator(const Family& f, uint8_t family_index, int max_ops, uint64_t seed, std::vector<GraphRecord>& out,
             EnumerateStats& stats)
      : f_(f), max_ops_(max_ops), out_(out), stats_(stats), renamings_(renamings(f)) {
    code_.family = family_index;
    auto field = random_field_vars(f, 0, seed);
    auto real = random_integer_vars(f, 0, seed);
    for (size_t i = 0; i < f.vars.size(); ++i) {
      Val v;
      for (size_t s = 0; s < f.num_sets(); ++s) v.dims.push_back(f.var_dims(i, s));
      v.field = std::move(field[i]);
      v.real = std::move(real[i]);
      finish_value(v);
      vals_.push_back(std::move(v));
    }
  }

  // Every operator that can be added to the current graph.
  std::vector<OpInst> candidates() const {
    std::vector<OpInst> out;
    for (size_t vi = 0; vi < f_.ops.size(); ++vi) {
      const OpVariant& v = f_.ops[vi];
      OpInst op;
      op.variant = static_cast<uint8_t>(vi);
      for (size_t a = 0; a < vals_.size(); ++a) {
        op.in = {static_cast<uint8_t>(a), kNone};
        if (v.arity == 1 && !v.split) {
          out.push_back(op);
        } else if (v.split) {
          std::vector<int64_t> extents;
          for (const auto& d : vals_[a].dims) {
            if (v.split_axis >= static_cast<int>(d.size())) break;
            extents.push_back(d[static_cast<size_t>(v.split_axis)]);
          }
          if (extents.size() != f_.num_sets()) continue;
          LetterSum m = decompose(f_, extents);
          if (sum_terms(m) < 2) continue;
          for (LetterSum part : proper_parts(m, f_.letters.size())) {
            op.part = part;
            out.push_back(op);
          }
          op.part = 0;
        } else {
          for (size_t b = 0; b < vals_.size(); ++b) {
            op.in = {static_cast<uint8_t>(a), static_cast<uint8_t>(b)};
            out.push_back(op);
          }
        }
      }
    }
    return out;
  }

  // The 0-operator graphs: one per variable.
  void emit_variables() {
    for (size_t i = 0; i < f_.vars.size(); ++i) {
      ++stats_.enumerated;
      code_.num_ops = 0;
      code_.poly = true;
      code_.num_outputs = 1;
      code_.outputs[0] = static_cast<uint8_t>(i);
      if (!canonical_under_renaming()) {
        ++stats_.renamed;
        continue;
      }
      GraphRecord r;
      r.code = code_;
      r.key = mix(mix(code_.family, 1), mix(vals_[i].fp_field, vals_[i].shape));  // as in emit()
      out_.push_back(r);
    }
  }

  // Adds `op`; records the graph and goes deeper. Returns false if `op` is not allowed.
  void add(const OpInst& op) {
    const OpVariant& v = f_.ops[op.variant];
    const size_t n = code_.num_ops;
    bool extend = true;
    // Sub(a, a) is the zero tensor: every graph built on it is a disguised constant.
    if (v.op == "Sub" && op.in[0] == op.in[1]) return;
    if (v.commutative && op.in[0] > op.in[1]) {
      if (n > 0) return;
      extend = false;  // Op(b, a) only as a graph of its own: commutativity itself
    }
    if (n > 0) {
      const OpInst& prev = code_.ops[n - 1];
      size_t prev_first = vals_.size() - static_cast<size_t>(num_op_outputs(f_.ops[prev.variant]));
      bool consumes_prev = false;
      for (uint8_t i : op.in) consumes_prev = consumes_prev || (i != kNone && i >= prev_first);
      if (!consumes_prev && !op_key_less(prev, op)) return;
      for (size_t i = 0; i < n; ++i)
        if (same_op(code_.ops[i], op)) return;
    }
    std::vector<const std::vector<std::vector<int64_t>>*> in_dims;
    for (uint8_t i : op.in)
      if (i != kNone) in_dims.push_back(&vals_[i].dims);
    std::vector<std::vector<std::vector<int64_t>>> out_dims;
    if (!infer_all(f_, op, in_dims, out_dims)) return;

    const OpDef& def = get_op(v.op);
    bool poly = def.eval_field != nullptr, real_ok = true;
    std::vector<FieldArray> fargs;
    std::vector<Tensor> rargs;
    for (uint8_t i : op.in) {
      if (i == kNone) continue;
      poly = poly && vals_[i].poly;
      real_ok = real_ok && vals_[i].real_ok;
      if (vals_[i].poly) fargs.push_back(vals_[i].field);
      rargs.push_back(vals_[i].real);
    }
    std::vector<FieldArray> fout;
    std::vector<Tensor> rout;
    try {
      if (poly) fout = apply_field(f_, op, std::move(fargs), 0);
      if (real_ok) rout = apply_real(f_, op, std::move(rargs), 0);
    } catch (const Error&) {
      return;  // an evaluation the shape rule allowed but the kernel refuses: skip the graph
    }
    for (size_t k = 0; k < out_dims.size(); ++k) {
      Val val;
      val.dims = std::move(out_dims[k]);
      val.poly = poly;
      val.real_ok = real_ok && within_exact_range(rout[k]);
      if (poly) val.field = std::move(fout[k]);
      if (real_ok) val.real = std::move(rout[k]);
      val.from_op = true;
      finish_value(val);
      vals_.push_back(std::move(val));
    }
    for (uint8_t i : op.in)
      if (i != kNone) ++vals_[i].uses;
    code_.ops[n] = op;
    code_.num_ops = static_cast<uint8_t>(n + 1);
    emit();
    if (extend && static_cast<int>(n + 1) < max_ops_)
      for (const OpInst& next : candidates()) add(next);
    code_.num_ops = static_cast<uint8_t>(n);
    for (uint8_t i : op.in)
      if (i != kNone) --vals_[i].uses;
    vals_.resize(vals_.size() - out_dims.size());
  }

 private:
  void finish_value(Val& v) const {
    v.shape = 0x5a;
    for (const auto& d : v.dims) v.shape = hash_dims(v.shape, d);
    if (v.poly) v.fp_field = fingerprint_field(v.field);
    if (v.real_ok) v.fp_real = fingerprint_real(v.real);
  }

  bool canonical_under_renaming() const {
    if (renamings_.empty()) return true;
    std::string mine = canonical_text(f_, code_, true);
    for (const auto& p : renamings_)
      if (canonical_text(f_, code_, true, p) < mine) return false;
    return true;
  }

  void emit() {
    ++stats_.enumerated;
    bool poly = true;
    for (size_t i = 0; i < code_.num_ops; ++i) poly = poly && get_op(f_.ops[code_.ops[i].variant].op).eval_field;
    std::vector<std::pair<uint64_t, size_t>> outs;  // (fingerprint, value)
    for (size_t i = f_.vars.size(); i < vals_.size(); ++i) {
      if (vals_[i].uses) continue;
      if (!poly && !vals_[i].real_ok) {
        ++stats_.no_fingerprint;
        return;
      }
      outs.emplace_back(mix(poly ? vals_[i].fp_field : vals_[i].fp_real, vals_[i].shape), i);
    }
    std::sort(outs.begin(), outs.end());
    for (size_t i = 1; i < outs.size(); ++i)
      if (outs[i].first == outs[i - 1].first) {
        ++stats_.no_fingerprint;  // the graph computes one value twice
        return;
      }
    code_.poly = poly;
    code_.num_outputs = static_cast<uint8_t>(outs.size());
    uint64_t key = mix(code_.family, outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      code_.outputs[i] = static_cast<uint8_t>(outs[i].second);
      key = mix(key, outs[i].first);
    }
    if (!canonical_under_renaming()) {
      ++stats_.renamed;
      return;
    }
    GraphRecord r;
    r.code = code_;
    r.key = key;
    out_.push_back(r);
  }

  const Family& f_;
  int max_ops_;
  std::vector<GraphRecord>& out_;
  EnumerateStats& stats_;
  std::vector<std::vector<size_t>> renamings_;
  std::vector<Val> vals_;
  GraphCode code_;
};

}  // namespace

size_t num_values(const Family& f, const GraphCode& code) { return first_values(f, code).back(); }

std::pair<int, int> value_origin(const Family& f, const GraphCode& code, size_t value) {
  if (value < f.vars.size()) return {-1, static_cast<int>(value)};
  auto first = first_values(f, code);
  for (size_t i = 0; i < code.num_ops; ++i)
    if (value < first[i + 1]) return {static_cast<int>(i), static_cast<int>(value - first[i])};
  throw Error("generator: value index out of range");
}

namespace {

// "Label(arg,arg)" ("Label/part(...)" for a Split) as the text of the operator's
// value; a Split's two values get "#0" and "#1" after it.
void set_op_text(const OpVariant& v, const OpInst& op, const std::vector<std::string>& args, size_t value,
                 std::vector<std::string>& text) {
  std::string s = v.label;
  if (v.split) s += "/" + std::to_string(op.part);
  s += "(";
  for (size_t k = 0; k < args.size(); ++k) s += (k ? "," : "") + args[k];
  s += ")";
  if (v.split) {
    text[value] = s + "#0";
    text[value + 1] = s + "#1";
  } else {
    text[value] = s;
  }
}

// A graph's text: its outputs' texts, sorted (output order does not matter).
std::string outputs_text(const GraphCode& code, const std::vector<std::string>& text) {
  std::vector<std::string> outs;
  for (size_t k = 0; k < code.num_outputs; ++k) outs.push_back(text[code.outputs[k]]);
  std::sort(outs.begin(), outs.end());
  std::string s;
  for (const std::string& o : outs) s += o + ";";
  return s;
}

}  // namespace

std::string canonical_text(const Family& f, const GraphCode& code, bool sort_commutative,
                           const std::vector<size_t>& rename) {
  auto first = first_values(f, code);
  std::vector<std::string> text(first.back());
  for (size_t i = 0; i < f.vars.size(); ++i) text[i] = f.vars[rename.empty() ? i : rename[i]].name;
  for (size_t i = 0; i < code.num_ops; ++i) {
    const OpInst& op = code.ops[i];
    const OpVariant& v = f.ops[op.variant];
    std::vector<std::string> args;
    for (uint8_t a : op.in)
      if (a != kNone) args.push_back(text[a]);
    if (sort_commutative && v.commutative) std::sort(args.begin(), args.end());
    set_op_text(v, op, args, first[i], text);
  }
  return outputs_text(code, text);
}

std::string ac_normal_text(const Family& f, const GraphCode& code) {
  auto first = first_values(f, code);
  // Per value: its text and, for Add/Mul, the flattened operand texts.
  std::vector<std::string> text(first.back());
  std::vector<std::vector<std::string>> operands(first.back());
  std::vector<std::string> kind(first.back());
  for (size_t i = 0; i < f.vars.size(); ++i) text[i] = f.vars[i].name;
  for (size_t i = 0; i < code.num_ops; ++i) {
    const OpInst& op = code.ops[i];
    const OpVariant& v = f.ops[op.variant];
    std::string s;
    if (v.op == "Add" || v.op == "Sub" || v.op == "Neg") {
      // Signed sums: Sub(a, b) = a + (-b), Neg(a) = -a; opposite terms cancel.
      auto terms_of = [&](uint8_t a) {
        return kind[a] == "sum" ? operands[a] : std::vector<std::string>{"+" + text[a]};
      };
      std::vector<std::string> terms = terms_of(op.in[0]);
      if (op.in[1] != kNone) {
        std::vector<std::string> b = terms_of(op.in[1]);
        if (v.op == "Sub")
          for (std::string& t : b) t[0] = t[0] == '+' ? '-' : '+';
        terms.insert(terms.end(), b.begin(), b.end());
      }
      if (v.op == "Neg")
        for (std::string& t : terms) t[0] = t[0] == '+' ? '-' : '+';
      std::sort(terms.begin(), terms.end());
      std::vector<std::string> kept;
      std::vector<char> gone(terms.size(), 0);
      for (size_t x = 0; x < terms.size(); ++x) {
        if (gone[x] || terms[x][0] != '+') continue;
        for (size_t y = 0; y < terms.size(); ++y)
          if (!gone[y] && terms[y][0] == '-' && terms[y].compare(1, std::string::npos, terms[x], 1) == 0) {
            gone[x] = gone[y] = 1;
            break;
          }
      }
      for (size_t x = 0; x < terms.size(); ++x)
        if (!gone[x]) kept.push_back(terms[x]);
      if (kept.size() == 1 && kept[0][0] == '+') {
        text[first[i]] = kept[0].substr(1);
        continue;
      }
      s = "Sum[";
      for (size_t k = 0; k < kept.size(); ++k) s += (k ? "," : "") + kept[k];
      text[first[i]] = s + "]";
      kind[first[i]] = "sum";
      operands[first[i]] = std::move(kept);
      continue;
    }
    if (v.commutative && v.op != "MatMul") {
      std::vector<std::string> flat;
      for (uint8_t a : op.in) {
        if (kind[a] == v.op) flat.insert(flat.end(), operands[a].begin(), operands[a].end());
        else flat.push_back(text[a]);
      }
      std::sort(flat.begin(), flat.end());
      s = v.op + "[";
      for (size_t k = 0; k < flat.size(); ++k) s += (k ? "," : "") + flat[k];
      s += "]";
      kind[first[i]] = v.op;
      operands[first[i]] = std::move(flat);
      text[first[i]] = s;
      continue;
    }
    std::vector<std::string> args;
    for (uint8_t a : op.in)
      if (a != kNone) args.push_back(text[a]);
    set_op_text(v, op, args, first[i], text);
  }
  return outputs_text(code, text);
}

std::string dedupe_text(const Family& f, const GraphCode& code) { return canonical_text(f, code, code.num_ops > 1); }

std::vector<std::string> op_texts(const Family& f, const GraphCode& code) {
  std::vector<std::string> out;
  for (size_t i = 0; i < code.num_ops; ++i) {
    GraphCode prefix = code;
    prefix.num_ops = static_cast<uint8_t>(i + 1);
    prefix.num_outputs = 1;
    prefix.outputs[0] = static_cast<uint8_t>(first_values(f, prefix)[i]);
    out.push_back(canonical_text(f, prefix, false));
  }
  return out;
}

std::vector<FieldArray> random_field_vars(const Family& f, size_t set, uint64_t seed) {
  std::mt19937_64 rng(mix(seed, 0xf1e1d + set));
  std::vector<FieldArray> out;
  for (size_t i = 0; i < f.vars.size(); ++i) {
    FieldArray a(f.var_dims(i, set));
    for (Fp& x : a.data) x = Fp(rng());
    out.push_back(std::move(a));
  }
  return out;
}

std::vector<Tensor> random_integer_vars(const Family& f, size_t set, uint64_t seed) {
  std::mt19937_64 rng(mix(seed, 0x1e7 + set));
  // Integers in [-9, 9] without -1, 0, 1: small enough to stay exact, varied enough
  // that a scalar rarely acts like an identity element by chance.
  std::uniform_int_distribution<int> u(-7, 8);
  std::vector<Tensor> out;
  for (size_t i = 0; i < f.vars.size(); ++i) {
    std::vector<int64_t> dims = f.var_dims(i, set);
    std::vector<double> v(static_cast<size_t>(num_elements(dims)));
    for (double& x : v) {
      int k = u(rng);
      x = k <= 0 ? k - 2 : k + 1;
    }
    out.push_back(Tensor::from_f64(DType::Float64, dims, v));
  }
  return out;
}

std::vector<FieldArray> eval_field_outputs(const Family& f, const GraphCode& code, size_t set,
                                           const std::vector<FieldArray>& vars) {
  std::vector<FieldArray> vals = vars;
  for (size_t i = 0; i < code.num_ops; ++i) {
    std::vector<FieldArray> args;
    for (uint8_t a : code.ops[i].in)
      if (a != kNone) args.push_back(vals[a]);
    for (FieldArray& r : apply_field(f, code.ops[i], std::move(args), set)) vals.push_back(std::move(r));
  }
  std::vector<FieldArray> out;
  for (size_t k = 0; k < code.num_outputs; ++k) out.push_back(vals[code.outputs[k]]);
  return out;
}

std::vector<Tensor> eval_real_outputs(const Family& f, const GraphCode& code, size_t set,
                                      const std::vector<Tensor>& vars, bool& exact) {
  std::vector<Tensor> vals = vars;
  exact = true;
  for (size_t i = 0; i < code.num_ops; ++i) {
    std::vector<Tensor> args;
    for (uint8_t a : code.ops[i].in)
      if (a != kNone) args.push_back(vals[a]);
    for (Tensor& r : apply_real(f, code.ops[i], std::move(args), set)) {
      exact = exact && within_exact_range(r);
      vals.push_back(std::move(r));
    }
  }
  std::vector<Tensor> out;
  for (size_t k = 0; k < code.num_outputs; ++k) out.push_back(vals[code.outputs[k]]);
  return out;
}

RecheckInputs recheck_inputs(const Family& f, uint64_t seed) {
  RecheckInputs in;
  for (size_t s = 0; s < f.num_sets(); ++s) {
    in.field.push_back(random_field_vars(f, s, mix(seed, 0xc4ec)));
    in.integer.emplace_back();
    for (uint64_t trial = 0; trial < 2; ++trial) in.integer.back().push_back(random_integer_vars(f, s, mix(seed, 0xc4ec + trial)));
  }
  return in;
}

RecheckValues recheck_values(const Family& f, const GraphCode& code, const RecheckInputs& in) {
  RecheckValues v;
  try {
    for (size_t s = 0; s < f.num_sets(); ++s) {
      if (code.poly) {
        for (FieldArray& out : eval_field_outputs(f, code, s, in.field[s])) v.field.push_back(std::move(out));
        continue;
      }
      for (const std::vector<Tensor>& vars : in.integer[s]) {
        bool exact = true;
        std::vector<Tensor> outs = eval_real_outputs(f, code, s, vars, exact);
        if (!exact) return {};
        for (const Tensor& t : outs) v.real.emplace_back(t.dims(), t.to_f64());
      }
    }
  } catch (const Error&) {
    return {};
  }
  v.valid = true;
  return v;
}

bool same_recheck_values(const RecheckValues& a, const RecheckValues& b) {
  if (!a.valid || !b.valid || a.field.size() != b.field.size() || a.real != b.real) return false;
  for (size_t k = 0; k < a.field.size(); ++k)
    if (a.field[k].dims != b.field[k].dims || a.field[k].data != b.field[k].data) return false;
  return true;
}

// Graphs of a bucket share the polynomial kind (fingerprints of the two kinds are
// tagged apart); a mixed pair is compared exactly in double like the rest.
bool recheck_pair(const Family& f, const GraphCode& a, const GraphCode& b, uint64_t seed) {
  if (a.num_outputs != b.num_outputs) return false;
  RecheckInputs in = recheck_inputs(f, seed);
  GraphCode ra = a, rb = b;
  ra.poly = rb.poly = a.poly && b.poly;
  return same_recheck_values(recheck_values(f, ra, in), recheck_values(f, rb, in));
}

std::vector<std::vector<int64_t>> value_dims(const Family& f, const GraphCode& code, size_t set) {
  std::vector<std::vector<std::vector<int64_t>>> all;  // value -> set -> dims
  for (size_t i = 0; i < f.vars.size(); ++i) {
    all.emplace_back();
    for (size_t s = 0; s < f.num_sets(); ++s) all.back().push_back(f.var_dims(i, s));
  }
  for (size_t i = 0; i < code.num_ops; ++i) {
    std::vector<const std::vector<std::vector<int64_t>>*> in;
    for (uint8_t a : code.ops[i].in)
      if (a != kNone) in.push_back(&all[a]);
    std::vector<std::vector<std::vector<int64_t>>> out;
    require(infer_all(f, code.ops[i], in, out), "generator: a recorded graph no longer type-checks");
    for (auto& o : out) all.push_back(std::move(o));
  }
  std::vector<std::vector<int64_t>> result;
  for (auto& v : all) result.push_back(v[set]);
  return result;
}

std::vector<GraphRecord> enumerate_graphs(const std::vector<Family>& families, int max_ops, int jobs,
                                          uint64_t seed, EnumerateStats& stats, const Shards& shards) {
  require(max_ops >= 0 && max_ops <= kMaxOps, "--max-ops must be between 0 and " + std::to_string(kMaxOps));
  require(families.size() < 255, "too many generator families");
  std::vector<GraphRecord> out;
  // Tasks: (family, first operator); each task's records are kept apart and joined in
  // task order, so the result does not depend on the number of threads.
  struct Task {
    size_t family;
    OpInst first;
  };
  std::vector<Task> tasks;
  for (size_t fi = 0; fi < families.size(); ++fi) {
    Enumerator e(families[fi], static_cast<uint8_t>(fi), max_ops, seed, out, stats);
    e.emit_variables();
    if (max_ops > 0)
      for (const OpInst& op : e.candidates()) tasks.push_back({fi, op});
  }
  std::vector<std::vector<GraphRecord>> results(tasks.size());
  std::vector<EnumerateStats> task_stats(tasks.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < tasks.size();) {
      if (!shards.mine(t)) continue;
      const Task& task = tasks[t];
      Enumerator e(families[task.family], static_cast<uint8_t>(task.family), max_ops, seed, results[t],
                   task_stats[t]);
      e.add(task.first);
    }
  };
  int threads = std::max(1, std::min<int>(jobs, static_cast<int>(tasks.size())));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool) th.join();
  // Every rank gets every prefix's records, joined in task order like one process's.
  exchange(
      shards, tasks.size(),
      [&](ShardWriter& w, size_t t) {
        w.put_vector(results[t]);
        w.put(task_stats[t]);
      },
      [&](ShardReader& r, size_t t) {
        results[t] = r.get_vector<GraphRecord>();
        task_stats[t] = r.get<EnumerateStats>();
      });
  for (size_t t = 0; t < tasks.size(); ++t) {
    out.insert(out.end(), results[t].begin(), results[t].end());
    std::vector<GraphRecord>().swap(results[t]);
    stats.enumerated += task_stats[t].enumerated;
    stats.no_fingerprint += task_stats[t].no_fingerprint;
    stats.renamed += task_stats[t].renamed;
  }
  return out;
}

}  // namespace isomer::gen
