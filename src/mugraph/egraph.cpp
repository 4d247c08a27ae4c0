#include "mugraph/egraph.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>

#include "ir/error.h"
#include "mugraph/program.h"

namespace isomer::mugraph {

size_t ENodeHash::operator()(const ENode& n) const {
  uint64_t h = static_cast<uint64_t>(n.kind) * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(n.data);
  for (int i = 0; i < n.nkids; ++i) h = (h ^ static_cast<uint64_t>(n.kids[i] + 1)) * 0x100000001b3ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

ENode leaf_node(int stmt) {
  ENode n;
  n.kind = EKind::Leaf;
  n.data = stmt;
  return n;
}
ENode const_node(double v) {
  ENode n;
  n.kind = EKind::Const;
  if (v == 0) v = 0;  // -0 and 0 are one constant
  n.data = std::bit_cast<int64_t>(v);
  return n;
}
ENode op_node(EKind kind, std::initializer_list<int> kids, int64_t data) {
  ENode n;
  n.kind = kind;
  n.data = data;
  for (int k : kids) n.kids[n.nkids++] = k;
  // Commutative operators keep their operands in one order: rules still see both.
  return n;
}
double const_value(const ENode& n) { return std::bit_cast<double>(n.data); }

const std::vector<Axiom>& mirage_axioms() {
  static const std::vector<Axiom> axioms = {
      {"add-comm", "(+ ?a ?b) => (+ ?b ?a)"},
      {"mul-comm", "(* ?a ?b) => (* ?b ?a)"},
      {"add-assoc", "(+ ?a (+ ?b ?c)) => (+ (+ ?a ?b) ?c)"},
      {"add-assoc-r", "(+ (+ ?a ?b) ?c) => (+ ?a (+ ?b ?c))"},
      {"mul-assoc", "(* ?a (* ?b ?c)) => (* (* ?a ?b) ?c)"},
      {"mul-assoc-r", "(* (* ?a ?b) ?c) => (* ?a (* ?b ?c))"},
      {"distribute", "(* (+ ?a ?b) ?c) => (+ (* ?a ?c) (* ?b ?c))"},
      {"factor", "(+ (* ?a ?c) (* ?b ?c)) => (* (+ ?a ?b) ?c)"},
      {"div-add", "(/ (+ ?a ?b) ?c) => (+ (/ ?a ?c) (/ ?b ?c))"},
      {"add-div", "(+ (/ ?a ?c) (/ ?b ?c)) => (/ (+ ?a ?b) ?c)"},
      {"mul-div", "(* ?a (/ ?b ?c)) => (/ (* ?a ?b) ?c)"},
      {"div-mul", "(/ (* ?a ?b) ?c) => (* ?a (/ ?b ?c))"},
      {"div-div", "(/ (/ ?a ?b) ?c) => (/ ?a (* ?b ?c))"},
      {"div-by-product", "(/ ?a (* ?b ?c)) => (/ (/ ?a ?b) ?c)"},
      {"sum-comm", "(sum ?i (sum ?j ?x)) => (sum ?j (sum ?i ?x))"},
      {"sum-add", "(sum ?i (+ ?a ?b)) => (+ (sum ?i ?a) (sum ?i ?b))"},
      {"add-sum", "(+ (sum ?i ?a) (sum ?i ?b)) => (sum ?i (+ ?a ?b))"},
      {"sum-mul", "(sum ?i (* ?a ?b)) => (* (sum ?i ?a) ?b) if ?i !in ?b"},
      {"mul-sum", "(* (sum ?i ?a) ?b) => (sum ?i (* ?a ?b)) if ?i !in ?b"},
      {"sum-div", "(sum ?i (/ ?a ?b)) => (/ (sum ?i ?a) ?b) if ?i !in ?b"},
      {"div-sum", "(/ (sum ?i ?a) ?b) => (sum ?i (/ ?a ?b)) if ?i !in ?b"},
      {"mul-one", "(* ?a 1) => ?a"},
      {"div-one", "(/ ?a 1) => ?a"},
  };
  return axioms;
}

namespace {

// --- patterns -------------------------------------------------------------------
struct Pat {
  enum class T { Var, Node, Lit } t = T::Var;
  EKind kind = EKind::Leaf;
  int var = -1;       // Var: the class variable; Node(sum): the atom variable
  double lit = 0;
  std::vector<Pat> kids;
};

struct Rule {
  std::string name;
  Pat lhs, rhs;
  int cond_atom = -1, cond_var = -1;  // "if ?i !in ?x"
  int nvars = 0;
};

class PatParser {
 public:
  PatParser(const std::string& s, std::vector<std::string>& vars) : s_(s), vars_(vars) {}
  Pat parse() {
    skip();
    if (s_[i_] == '(') {
      ++i_;
      std::string head = word();
      Pat p;
      p.t = Pat::T::Node;
      if (head == "+") p.kind = EKind::Add;
      else if (head == "*") p.kind = EKind::Mul;
      else if (head == "/") p.kind = EKind::Div;
      else if (head == "exp") p.kind = EKind::Exp;
      else if (head == "sum") p.kind = EKind::Sum;
      else throw Error("axiom pattern: unknown head '" + head + "'");
      if (p.kind == EKind::Sum) {
        skip();
        p.var = var_id(word());
      }
      for (skip(); s_[i_] != ')'; skip()) p.kids.push_back(parse());
      ++i_;
      return p;
    }
    std::string w = word();
    Pat p;
    if (w[0] == '?') {
      p.t = Pat::T::Var;
      p.var = var_id(w);
    } else {
      p.t = Pat::T::Lit;
      p.lit = std::stod(w);
    }
    return p;
  }
  int var_id(const std::string& w) {
    require(!w.empty() && w[0] == '?', "axiom pattern: expected a variable, got '" + w + "'");
    auto it = std::find(vars_.begin(), vars_.end(), w);
    if (it != vars_.end()) return static_cast<int>(it - vars_.begin());
    vars_.push_back(w);
    return static_cast<int>(vars_.size()) - 1;
  }
  size_t pos() const { return i_; }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  std::string word() {
    skip();
    size_t b = i_;
    while (i_ < s_.size() && s_[i_] != ' ' && s_[i_] != '(' && s_[i_] != ')') ++i_;
    return s_.substr(b, i_ - b);
  }
  const std::string& s_;
  std::vector<std::string>& vars_;
  size_t i_ = 0;
};

Rule parse_rule(const Axiom& a) {
  Rule r;
  r.name = a.name;
  std::vector<std::string> vars;
  size_t arrow = a.text.find("=>");
  std::string lhs = a.text.substr(0, arrow), rest = a.text.substr(arrow + 2);
  std::string cond;
  if (size_t k = rest.find(" if "); k != std::string::npos) cond = rest.substr(k + 4), rest = rest.substr(0, k);
  r.lhs = PatParser(lhs, vars).parse();
  size_t before = vars.size();
  r.rhs = PatParser(rest, vars).parse();
  require(vars.size() == before, "axiom " + a.name + ": right side uses a variable the left does not bind");
  if (!cond.empty()) {
    std::istringstream in(cond);
    std::string i, notin, x;
    in >> i >> notin >> x;
    require(notin == "!in", "axiom " + a.name + ": condition must read '?i !in ?x'");
    PatParser p(cond, vars);
    r.cond_atom = p.var_id(i);
    r.cond_var = p.var_id(x);
    require(vars.size() == before, "axiom " + a.name + ": condition uses an unbound variable");
  }
  r.nvars = static_cast<int>(vars.size());
  return r;
}

const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = [] {
    std::vector<Rule> out;
    for (const Axiom& a : mirage_axioms()) out.push_back(parse_rule(a));
    return out;
  }();
  return r;
}

using Subst = std::vector<int64_t>;  // per variable: a class id or an atom; -1 unbound

}  // namespace

EGraph::EGraph(std::vector<uint64_t> leaf_atoms, std::vector<int64_t> atom_extents)
    : leaf_atoms_(std::move(leaf_atoms)), extents_(std::move(atom_extents)) {}

int EGraph::find(int c) const {
  while (parent_[c] != c) c = parent_[c] = parent_[parent_[c]];
  return c;
}

size_t EGraph::num_classes() const {
  size_t n = 0;
  for (size_t i = 0; i < parent_.size(); ++i) n += find(static_cast<int>(i)) == static_cast<int>(i);
  return n;
}

ENode EGraph::canon(ENode n) const {
  for (int i = 0; i < n.nkids; ++i) n.kids[i] = find(n.kids[i]);
  return n;
}

uint64_t EGraph::node_free(const ENode& n) const {
  switch (n.kind) {
    case EKind::Leaf: return leaf_atoms_.at(static_cast<size_t>(n.data));
    case EKind::Const: return 0;
    case EKind::Sum: return classes_[find(n.kids[0])].free & ~(uint64_t{1} << n.data);
    default: {
      uint64_t f = 0;
      for (int i = 0; i < n.nkids; ++i) f |= classes_[find(n.kids[i])].free;
      return f;
    }
  }
}

int EGraph::add(const ENode& n0) {
  ENode n = canon(n0);
  auto it = memo_.find(n);
  if (it != memo_.end()) return find(it->second);
  int id = static_cast<int>(classes_.size());
  classes_.push_back({{n}, node_free(n)});
  parent_.push_back(id);
  memo_.emplace(n, id);
  return id;
}

int EGraph::lookup(const ENode& n0) const {
  for (int i = 0; i < n0.nkids; ++i)
    if (n0.kids[i] < 0) return -1;
  auto it = memo_.find(canon(n0));
  return it == memo_.end() ? -1 : find(it->second);
}

void EGraph::merge(int a, int b) {
  a = find(a), b = find(b);
  if (a == b) return;
  if (classes_[a].nodes.size() < classes_[b].nodes.size()) std::swap(a, b);
  parent_[b] = a;
  classes_[a].nodes.insert(classes_[a].nodes.end(), classes_[b].nodes.begin(), classes_[b].nodes.end());
  classes_[a].free |= classes_[b].free;
  classes_[b].nodes.clear();
  dirty_ = true;
}

void EGraph::rebuild() {
  // Congruences found in a pass are merged after it: a merge appends the absorbed
  // class's nodes to the survivor's vector and clears the absorbed one's, and either
  // may be the vector the pass is walking.
  while (dirty_) {
    dirty_ = false;
    memo_.clear();
    std::vector<std::pair<int, int>> congruent;
    for (size_t c = 0; c < classes_.size(); ++c) {
      const int id = static_cast<int>(c);
      if (find(id) != id) continue;
      std::vector<ENode> kept;
      for (const ENode& n0 : classes_[c].nodes) {
        const ENode n = canon(n0);
        auto [it, fresh] = memo_.emplace(n, id);
        if (fresh)
          kept.push_back(n);
        else if (it->second != id)
          congruent.emplace_back(it->second, id);  // the other class keeps the node
      }
      classes_[c].nodes = std::move(kept);
    }
    for (const auto& [a, b] : congruent) merge(a, b);  // any real merge sets dirty_
  }
}

namespace {

struct Matcher {
  const EGraph& g;
  const std::vector<std::vector<ENode>>& nodes_of;  // per root class
  void match(const Pat& p, int cls, Subst s, std::vector<Subst>& out) const {
    cls = g.find(cls);
    if (p.t == Pat::T::Var) {
      if (s[p.var] >= 0 && s[p.var] != cls) return;
      s[p.var] = cls;
      out.push_back(std::move(s));
      return;
    }
    for (const ENode& n : nodes_of[cls]) {
      if (p.t == Pat::T::Lit) {
        if (n.kind == EKind::Const && const_value(n) == p.lit) out.push_back(s);
        continue;
      }
      if (n.kind != p.kind || n.nkids != static_cast<int>(p.kids.size())) continue;
      Subst s2 = s;
      if (p.kind == EKind::Sum) {
        if (s2[p.var] >= 0 && s2[p.var] != n.data) continue;
        s2[p.var] = n.data;
      }
      std::vector<Subst> cur{s2};
      for (int k = 0; k < n.nkids && !cur.empty(); ++k) {
        std::vector<Subst> next;
        for (const Subst& c : cur) match(p.kids[k], n.kids[k], c, next);
        cur = std::move(next);
      }
      out.insert(out.end(), cur.begin(), cur.end());
    }
  }
};

}  // namespace

SaturationReport EGraph::saturate(const SaturationLimits& limits) {
  SaturationReport rep;
  const auto& rs = rules();
  rep.applications.resize(rs.size() + 1);
  for (size_t i = 0; i < rs.size(); ++i) rep.applications[i].first = rs[i].name;
  rep.applications.back().first = "const-fold";
  auto t0 = std::chrono::steady_clock::now();
  rep.stop = "iteration limit";
  for (rep.iterations = 0; rep.iterations < limits.max_iterations; ++rep.iterations) {
    // Snapshot of every class's nodes (the matcher must not see this round's additions).
    std::vector<std::vector<ENode>> nodes_of(classes_.size());
    for (size_t c = 0; c < classes_.size(); ++c)
      if (find(static_cast<int>(c)) == static_cast<int>(c)) nodes_of[c] = classes_[c].nodes;
    Matcher m{*this, nodes_of};
    struct Pending {
      size_t rule;
      int cls;
      Subst s;
    };
    std::vector<Pending> todo;
    for (size_t r = 0; r < rs.size(); ++r) {
      for (size_t c = 0; c < nodes_of.size(); ++c) {
        if (nodes_of[c].empty()) continue;
        std::vector<Subst> found;
        m.match(rs[r].lhs, static_cast<int>(c), Subst(static_cast<size_t>(rs[r].nvars), -1), found);
        for (Subst& s : found) {
          if (rs[r].cond_atom >= 0 && (classes_[find(static_cast<int>(s[rs[r].cond_var]))].free >> s[rs[r].cond_atom]) & 1)
            continue;
          todo.push_back({r, static_cast<int>(c), std::move(s)});
        }
      }
    }
    size_t before_nodes = memo_.size();
    size_t merges_before = num_classes();
    std::function<int(const Pat&, const Subst&)> build = [&](const Pat& p, const Subst& s) -> int {
      if (p.t == Pat::T::Var) return find(static_cast<int>(s[p.var]));
      if (p.t == Pat::T::Lit) return add(const_node(p.lit));
      ENode n;
      n.kind = p.kind;
      if (p.kind == EKind::Sum) n.data = s[p.var];
      for (const Pat& k : p.kids) n.kids[n.nkids++] = build(k, s);
      return add(n);
    };
    for (const Pending& t : todo) {
      if (memo_.size() >= limits.max_nodes) break;
      int r = build(rs[t.rule].rhs, t.s);
      if (find(r) != find(t.cls)) {
        merge(r, t.cls);
        ++rep.applications[t.rule].second;
      }
    }
    // Constant folding.
    for (size_t c = 0; c < nodes_of.size(); ++c) {
      for (const ENode& n : nodes_of[c]) {
        if (n.kind != EKind::Add && n.kind != EKind::Mul && n.kind != EKind::Div) continue;
        std::optional<double> a, b;
        for (const ENode& k : nodes_of[static_cast<size_t>(n.kids[0])]) if (k.kind == EKind::Const) a = const_value(k);
        for (const ENode& k : nodes_of[static_cast<size_t>(n.kids[1])]) if (k.kind == EKind::Const) b = const_value(k);
        if (!a || !b) continue;
        double v = n.kind == EKind::Add ? *a + *b : n.kind == EKind::Mul ? *a * *b : *a / *b;
        if (!std::isfinite(v)) continue;
        int k = add(const_node(v));
        if (find(k) != find(static_cast<int>(c))) {
          merge(k, static_cast<int>(c));
          ++rep.applications.back().second;
        }
      }
    }
    rebuild();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (memo_.size() >= limits.max_nodes) {
      rep.stop = "node limit";
      ++rep.iterations;
      break;
    }
    if (memo_.size() == before_nodes && num_classes() == merges_before) {
      rep.stop = "saturated";
      ++rep.iterations;
      break;
    }
    if (secs > limits.max_seconds) {
      rep.stop = "time limit";
      ++rep.iterations;
      break;
    }
  }
  rep.nodes = memo_.size();
  rep.classes = num_classes();
  return rep;
}

std::vector<double> EGraph::constants() const {
  std::vector<double> out;
  for (const auto& [n, c] : memo_)
    if (n.kind == EKind::Const) out.push_back(const_value(n));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string EGraph::show(int c) const {
  // Smallest term by a bottom-up size fixpoint.
  std::vector<size_t> size(classes_.size(), SIZE_MAX);
  std::vector<ENode> best(classes_.size());
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = 0; k < classes_.size(); ++k) {
      if (find(static_cast<int>(k)) != static_cast<int>(k)) continue;
      for (const ENode& n : classes_[k].nodes) {
        size_t s = 1;
        for (int i = 0; i < n.nkids && s != SIZE_MAX; ++i) {
          size_t ks = size[find(n.kids[i])];
          s = ks == SIZE_MAX ? SIZE_MAX : s + ks;
        }
        if (s < size[k]) size[k] = s, best[k] = n, changed = true;
      }
    }
  }
  std::function<std::string(int)> term = [&](int cls) -> std::string {
    cls = find(cls);
    if (size[cls] == SIZE_MAX) return "?";
    const ENode& n = best[cls];
    std::ostringstream o;
    switch (n.kind) {
      case EKind::Leaf: return "s" + std::to_string(n.data);
      case EKind::Const: o << const_value(n); return o.str();
      case EKind::Add: return "(+ " + term(n.kids[0]) + " " + term(n.kids[1]) + ")";
      case EKind::Mul: return "(* " + term(n.kids[0]) + " " + term(n.kids[1]) + ")";
      case EKind::Div: return "(/ " + term(n.kids[0]) + " " + term(n.kids[1]) + ")";
      case EKind::Exp: return "(exp " + term(n.kids[0]) + ")";
      case EKind::Sum: return "(sum a" + std::to_string(n.data) + " " + term(n.kids[0]) + ")";
      case EKind::Uf: {
        std::string s = std::string("(") + op_name(static_cast<Op>(n.data));
        for (int i = 0; i < n.nkids; ++i) s += " " + term(n.kids[i]);
        return s + ")";
      }
    }
    return "?";
  };
  return term(c);
}

}  // namespace isomer::mugraph
