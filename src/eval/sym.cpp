#include "eval/sym.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unordered_map>

#include "ir/error.h"
#include "ir/float_to_int.h"

namespace isomer {

namespace {

size_t mix(size_t h, uint64_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

size_t node_hash(const SymNode& n) {
  size_t h = static_cast<size_t>(n.kind);
  h = mix(h, n.var);
  h = mix(h, static_cast<uint64_t>(n.num));
  h = mix(h, static_cast<uint64_t>(n.den));
  h = mix(h, std::hash<std::string>()(n.text));
  for (Sym a : n.args) h = mix(h, a.id());
  return h;
}

bool same_node(const SymNode& a, const SymNode& b) {
  if (a.kind != b.kind || a.var != b.var || a.num != b.num || a.den != b.den || a.text != b.text ||
      a.args.size() != b.args.size())
    return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!a.args[i].identical(b.args[i])) return false;
  return true;
}

// Small rationals: num/den in lowest terms if it fits int64 (den > 0).
std::optional<std::pair<int64_t, int64_t>> normalized(__int128 num, __int128 den) {
  if (den == 0) return std::nullopt;
  if (den < 0) num = -num, den = -den;
  __int128 a = num < 0 ? -num : num, b = den;
  while (b != 0) {
    __int128 t = a % b;
    a = b;
    b = t;
  }
  if (a > 1) num /= a, den /= a;
  constexpr __int128 kMax = INT64_MAX;
  if (num > kMax || num < -kMax || den > kMax) return std::nullopt;
  return std::make_pair(static_cast<int64_t>(num), static_cast<int64_t>(den));
}

}  // namespace

struct SymArena {
  std::vector<SymNode> nodes;
  std::unordered_multimap<size_t, uint32_t> by_hash;

  SymArena() { reset(); }

  void reset() {
    nodes.clear();
    by_hash.clear();
    constant(0, 1);  // id 0
    constant(1, 1);  // id 1
  }

  Sym intern(SymNode n) {
    const size_t h = node_hash(n);
    auto [lo, hi] = by_hash.equal_range(h);
    for (auto it = lo; it != hi; ++it)
      if (same_node(nodes[it->second], n)) return Sym(it->second, 0);
    require(nodes.size() < UINT32_MAX, "symbolic expression arena is full");
    const auto id = static_cast<uint32_t>(nodes.size());
    nodes.push_back(std::move(n));
    by_hash.emplace(h, id);
    return Sym(id, 0);
  }

  Sym constant(int64_t num, int64_t den) {
    SymNode n;
    n.num = num;
    n.den = den;
    return intern(std::move(n));
  }

  Sym make(SymKind kind, std::vector<Sym> args, std::string text = {}) {
    SymNode n;
    n.kind = kind;
    n.args = std::move(args);
    n.text = std::move(text);
    return intern(std::move(n));
  }

  const SymNode& at(Sym s) const { return nodes.at(s.id()); }
  // A constant that fits num/den (big decimal constants are not folded).
  const SymNode* small_const(Sym s) const {
    const SymNode& n = at(s);
    return n.kind == SymKind::Const && n.text.empty() ? &n : nullptr;
  }
};

namespace {
SymArena& arena() {
  thread_local SymArena a;
  return a;
}

bool is_const(Sym s, int64_t v) {
  const SymNode* n = arena().small_const(s);
  return n && n->num == v && n->den == 1;
}
}  // namespace

const SymNode& sym_node(Sym s) { return arena().at(s); }
size_t sym_arena_size() { return arena().nodes.size(); }
void sym_arena_reset() { arena().reset(); }

Sym::Sym(double v) {
  require(std::isfinite(v), "the value " + std::to_string(v) + " is not a real number");
  if (v == 0) return;
  // v = m * 2^shift with m an odd integer (|m| < 2^53).
  int e = 0;
  const double f = std::frexp(v, &e);
  int64_t m = checked_float_to_int<int64_t>(std::ldexp(f, 53), "a real constant");  // |f| < 1: fits
  int shift = e - 53;
  while (m % 2 == 0) m /= 2, ++shift;
  if (shift >= 0 && shift < 62) {
    if (auto r = normalized(static_cast<__int128>(m) << shift, 1)) {
      *this = arena().constant(r->first, r->second);
      return;
    }
  } else if (shift < 0 && shift > -63) {
    *this = arena().constant(m, int64_t{1} << -shift);
    return;
  }
  // Outside int64 num/den: glibc prints a double's exact decimal expansion.
  std::vector<char> buf(1600);
  std::snprintf(buf.data(), buf.size(), "%.1100f", v);
  std::string s(buf.data());
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  SymNode n;
  n.text = s;
  *this = arena().intern(std::move(n));
}

Sym Sym::rational(int64_t num, int64_t den) {
  auto r = normalized(num, den);
  require(r.has_value(), "invalid rational " + std::to_string(num) + "/" + std::to_string(den));
  return arena().constant(r->first, r->second);
}

Sym Sym::var(uint32_t index) {
  SymNode n;
  n.kind = SymKind::Var;
  n.var = index;
  return arena().intern(std::move(n));
}

Sym Sym::apply(std::string_view fn, std::span<const Sym> args) {
  return arena().make(SymKind::Apply, std::vector<Sym>(args.begin(), args.end()), std::string(fn));
}

Sym operator+(Sym a, Sym b) {
  SymArena& ar = arena();
  if (a.id() == 0) return b;
  if (b.id() == 0) return a;
  // One n-ary sum: nested sums flattened in, small constants folded into one term,
  // x and -x cancelled, terms sorted, so sums of the same terms in any order and
  // grouping (a convolution over permuted channels, a + (b + c)) are one node.
  std::vector<Sym> terms;
  for (Sym s : {a, b}) {
    const SymNode& n = ar.at(s);
    if (n.kind == SymKind::Add)
      terms.insert(terms.end(), n.args.begin(), n.args.end());
    else
      terms.push_back(s);
  }
  __int128 num = 0, den = 1;
  bool folded = false;
  std::vector<Sym> rest;
  for (Sym s : terms) {
    const SymNode* c = ar.small_const(s);
    std::optional<std::pair<int64_t, int64_t>> sum;
    if (c) sum = normalized(num * c->den + static_cast<__int128>(c->num) * den, den * c->den);
    if (!sum) {
      rest.push_back(s);
      continue;
    }
    num = sum->first, den = sum->second;
    folded = true;
  }
  // x + (-x): drop one of each (terms may repeat: x + x stays two terms).
  std::sort(rest.begin(), rest.end(), [](Sym x, Sym y) { return x.id() < y.id(); });
  std::vector<char> gone(rest.size(), 0);
  for (size_t i = 0; i < rest.size(); ++i) {
    const SymNode& n = ar.at(rest[i]);
    if (n.kind != SymKind::Neg) continue;
    const uint32_t want = n.args[0].id();
    auto it = std::lower_bound(rest.begin(), rest.end(), want, [](Sym x, uint32_t id) { return x.id() < id; });
    for (; it != rest.end() && it->id() == want; ++it)
      if (size_t k = static_cast<size_t>(it - rest.begin()); !gone[k]) {
        gone[k] = gone[i] = 1;
        break;
      }
  }
  std::vector<Sym> kept;
  for (size_t i = 0; i < rest.size(); ++i)
    if (!gone[i]) kept.push_back(rest[i]);
  if (folded && num != 0) {
    Sym c = ar.constant(static_cast<int64_t>(num), static_cast<int64_t>(den));
    kept.insert(std::lower_bound(kept.begin(), kept.end(), c, [](Sym x, Sym y) { return x.id() < y.id(); }), c);
  }
  if (kept.empty()) return Sym();
  if (kept.size() == 1) return kept[0];
  return ar.make(SymKind::Add, std::move(kept));
}

Sym operator*(Sym a, Sym b) {
  SymArena& ar = arena();
  if (a.id() == 0 || b.id() == 0) return Sym();
  if (a.id() == 1) return b;
  if (b.id() == 1) return a;
  if (is_const(a, -1)) return -b;
  if (is_const(b, -1)) return -a;
  const SymNode *ca = ar.small_const(a), *cb = ar.small_const(b);
  if (ca && cb)
    if (auto r = normalized(static_cast<__int128>(ca->num) * cb->num, static_cast<__int128>(ca->den) * cb->den))
      return ar.constant(r->first, r->second);
  if (b.id() < a.id()) std::swap(a, b);
  return ar.make(SymKind::Mul, {a, b});
}

Sym operator-(Sym a) {
  SymArena& ar = arena();
  if (a.id() == 0) return a;
  if (const SymNode* c = ar.small_const(a)) return ar.constant(-c->num, c->den);
  const SymNode& n = ar.at(a);
  if (n.kind == SymKind::Neg) return n.args[0];
  return ar.make(SymKind::Neg, {a});
}

Sym operator/(Sym a, Sym b) {
  SymArena& ar = arena();
  // By value: interning a constant may grow the arena and move the node.
  if (const SymNode* cb = ar.small_const(b); cb && cb->num != 0) {
    const int64_t num = cb->num, den = cb->den;
    return a * ar.constant(den, 1) * Sym::rational(1, num);
  }
  if (b.id() == 1) return a;
  return ar.make(SymKind::Div, {a, b});
}

namespace {
// max(a, b) or min(a, b) as one n-ary node: operands of the same kind are flattened
// in, constants folded to the one extreme constant, and the operands sorted and
// made unique, so every order and grouping of maxima over the same operands (Relu
// after MaxPool, MaxPool of a concatenation, ...) is the same node.
Sym extremum(SymKind kind, Sym a, Sym b) {
  SymArena& ar = arena();
  std::vector<Sym> args;
  for (Sym s : {a, b}) {
    const SymNode& n = ar.at(s);
    if (n.kind == kind)
      args.insert(args.end(), n.args.begin(), n.args.end());
    else
      args.push_back(s);
  }
  // Small constants: keep the largest (Max) or smallest (Min).
  std::optional<Sym> extreme;
  std::vector<Sym> rest;
  for (Sym s : args) {
    const SymNode* c = ar.small_const(s);
    if (!c) {
      rest.push_back(s);
      continue;
    }
    if (extreme) {
      const SymNode* x = ar.small_const(*extreme);
      const __int128 l = static_cast<__int128>(c->num) * x->den, r = static_cast<__int128>(x->num) * c->den;
      if (kind == SymKind::Max ? l <= r : l >= r) continue;
    }
    extreme = s;
  }
  if (extreme) rest.push_back(*extreme);
  std::sort(rest.begin(), rest.end(), [](Sym x, Sym y) { return x.id() < y.id(); });
  rest.erase(std::unique(rest.begin(), rest.end(), [](Sym x, Sym y) { return x.identical(y); }), rest.end());
  if (rest.size() == 1) return rest[0];
  return ar.make(kind, std::move(rest));
}

Sym select(SymKind kind, Sym a, Sym b, Sym t, Sym e) {
  SymArena& ar = arena();
  if (t.identical(e)) return t;
  const SymNode *ca = ar.small_const(a), *cb = ar.small_const(b);
  if (ca && cb) {
    const __int128 l = static_cast<__int128>(ca->num) * cb->den, r = static_cast<__int128>(cb->num) * ca->den;
    return (kind == SymKind::IteGt ? l > r : l >= r) ? t : e;
  }
  if (kind == SymKind::IteGe && a.identical(b)) return t;
  if (kind == SymKind::IteGt && a.identical(b)) return e;
  // (a > b ? a : b) and (a >= b ? a : b) are max(a, b); with the branches swapped, min.
  if (t.identical(a) && e.identical(b)) return extremum(SymKind::Max, a, b);
  if (t.identical(b) && e.identical(a)) return extremum(SymKind::Min, a, b);
  return ar.make(kind, {a, b, t, e});
}
}  // namespace

Sym select_gt(Sym a, Sym b, Sym t, Sym e) { return select(SymKind::IteGt, a, b, t, e); }
Sym select_ge(Sym a, Sym b, Sym t, Sym e) { return select(SymKind::IteGe, a, b, t, e); }

std::optional<int64_t> sym_int(Sym s) {
  const SymNode* c = arena().small_const(s);
  if (c && c->den == 1) return c->num;
  return std::nullopt;
}

std::vector<int64_t> sym_ints(const SymArray& a) {
  std::vector<int64_t> out;
  out.reserve(a.data.size());
  for (Sym s : a.data) {
    std::optional<int64_t> v = sym_int(s);
    require(v.has_value(), "an integer operand (shape, axes or indices) is not a constant: " + to_string(s));
    out.push_back(*v);
  }
  return out;
}

namespace {
void print(Sym s, std::string& out, size_t max_chars) {
  if (out.size() > max_chars) return;
  const SymNode& n = sym_node(s);
  auto args = [&](const char* sep) {
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) out += sep;
      print(n.args[i], out, max_chars);
    }
  };
  switch (n.kind) {
    case SymKind::Const:
      out += n.text.empty() ? std::to_string(n.num) + (n.den != 1 ? "/" + std::to_string(n.den) : "") : n.text;
      return;
    case SymKind::Var: out += "v" + std::to_string(n.var); return;
    case SymKind::Add: out += "("; args(" + "); out += ")"; return;
    case SymKind::Mul: out += "("; args(" * "); out += ")"; return;
    case SymKind::Div: out += "("; args(" / "); out += ")"; return;
    case SymKind::Neg: out += "-"; args(""); return;
    case SymKind::IteGt:
    case SymKind::IteGe:
      out += n.kind == SymKind::IteGt ? "gt(" : "ge(";
      args(", ");
      out += ")";
      return;
    case SymKind::Max:
    case SymKind::Min:
      out += n.kind == SymKind::Max ? "max(" : "min(";
      args(", ");
      out += ")";
      return;
    case SymKind::Apply: out += n.text + "("; args(", "); out += ")"; return;
  }
}
}  // namespace

std::string to_string(Sym s, size_t max_chars) {
  std::string out;
  print(s, out, max_chars);
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

}  // namespace isomer
