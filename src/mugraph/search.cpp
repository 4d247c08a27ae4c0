#include "mugraph/search.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <deque>
#include <map>
#include <unordered_set>

#include "ir/error.h"

namespace isomer::mugraph {

namespace {

bool commutative(Op op) { return op == Op::Add || op == Op::Mul || op == Op::Max || op == Op::Min; }

uint64_t mask_of(const std::vector<int>& atoms) {
  uint64_t m = 0;
  for (int a : atoms) m |= uint64_t{1} << a;
  return m;
}

int build_stmt(EGraph& e, const Program& p, const std::vector<int>& cls, size_t i) {
  const Stmt& s = p.stmts[i];
  auto arg = [&](size_t k) { return cls[s.args[k]]; };
  switch (s.op) {
    case Op::Input: return e.add(leaf_node(static_cast<int>(i)));
    case Op::Const: return e.add(const_node(s.value));
    case Op::Add: return e.add(op_node(EKind::Add, {arg(0), arg(1)}));
    case Op::Sub: return e.add(op_node(EKind::Add, {arg(0), e.add(op_node(EKind::Mul, {e.add(const_node(-1)), arg(1)}))}));
    case Op::Mul: return e.add(op_node(EKind::Mul, {arg(0), arg(1)}));
    case Op::Div: return e.add(op_node(EKind::Div, {arg(0), arg(1)}));
    case Op::Neg: return e.add(op_node(EKind::Mul, {e.add(const_node(-1)), arg(0)}));
    case Op::Exp: return e.add(op_node(EKind::Exp, {arg(0)}));
    case Op::Sum: {
      int c = arg(0);
      for (int a : s.reduce) c = e.add(op_node(EKind::Sum, {c}, a));
      return c;
    }
    default: {
      ENode n;
      n.kind = EKind::Uf;
      n.data = static_cast<int64_t>(s.op);
      for (size_t k = 0; k < s.args.size(); ++k) n.kids[n.nkids++] = arg(k);
      return e.add(n);
    }
  }
}

std::vector<uint64_t> leaf_masks(const Program& p) {
  std::vector<uint64_t> m(p.stmts.size(), 0);
  for (size_t i = 0; i < p.stmts.size(); ++i) m[i] = mask_of(p.stmts[i].axes);
  return m;
}
std::vector<int64_t> extents(const Program& p) {
  std::vector<int64_t> e;
  for (const Atom& a : p.atoms) e.push_back(a.extent);
  return e;
}

}  // namespace

Target::Target(const Program& p, const SaturationLimits& limits, SaturationReport* report)
    : egraph(leaf_masks(p), extents(p)) {
  require(p.atoms.size() <= 64, "a region with more than 64 loop indices");
  std::vector<int> cls(p.stmts.size(), -1);
  for (size_t i = 0; i < p.stmts.size(); ++i) {
    cls[i] = build_stmt(egraph, p, cls, i);
    const Op op = p.stmts[i].op;
    if (is_elementwise(op) && std::find(ops.begin(), ops.end(), op) == ops.end()) ops.push_back(op);
  }
  std::sort(ops.begin(), ops.end());
  SaturationReport r = egraph.saturate(limits);
  if (report) *report = r;
  for (int& c : cls) c = egraph.find(c);
  stmt_class = cls;
  for (const IoTensor& o : p.outputs) output_class.push_back(cls[o.stmt]);
  constants = egraph.constants();
}

int op_class(const Target& t, const Program& p, const BlockGraph& g, size_t i, const std::vector<int>& classes) {
  (void)p;
  const EGraph& e = t.egraph;
  const BOp& op = g.ops[i];
  auto arg = [&](size_t k) { return classes[op.args[k]]; };
  for (int a : op.args)
    if (classes[a] < 0) return -1;
  auto nested_sum = [&](int c) {
    for (int a : op.reduce) {
      if (c < 0) return -1;
      c = e.lookup(op_node(EKind::Sum, {c}, a));
    }
    return c;
  };
  switch (op.kind) {
    case BKind::Input: return e.lookup(leaf_node(op.stmt));
    case BKind::Const: return e.lookup(const_node(op.value));
    case BKind::Matmul: return nested_sum(e.lookup(op_node(EKind::Mul, {arg(0), arg(1)})));
    case BKind::Reduce: return nested_sum(arg(0));
    case BKind::Accum: {
      int c = arg(0);
      // Partial sums of one atom collapse: the accumulator of sum(k, x) over the
      // chunks of k is sum(k, x) again.
      if (!((e.free_atoms(c) >> g.loop_atom) & 1)) return c;
      return e.lookup(op_node(EKind::Sum, {c}, g.loop_atom));
    }
    case BKind::Elementwise:
      switch (op.op) {
        case Op::Add: return e.lookup(op_node(EKind::Add, {arg(0), arg(1)}));
        case Op::Sub: {
          int m1 = e.lookup(const_node(-1));
          int nb = m1 < 0 ? -1 : e.lookup(op_node(EKind::Mul, {m1, arg(1)}));
          return nb < 0 ? -1 : e.lookup(op_node(EKind::Add, {arg(0), nb}));
        }
        case Op::Mul: return e.lookup(op_node(EKind::Mul, {arg(0), arg(1)}));
        case Op::Div: return e.lookup(op_node(EKind::Div, {arg(0), arg(1)}));
        case Op::Neg: {
          int m1 = e.lookup(const_node(-1));
          return m1 < 0 ? -1 : e.lookup(op_node(EKind::Mul, {m1, arg(0)}));
        }
        case Op::Exp: return e.lookup(op_node(EKind::Exp, {arg(0)}));
        default: {
          ENode n;
          n.kind = EKind::Uf;
          n.data = static_cast<int64_t>(op.op);
          for (size_t k = 0; k < op.args.size(); ++k) n.kids[n.nkids++] = arg(k);
          return e.lookup(n);
        }
      }
  }
  return -1;
}

namespace {

// One search over block graphs with a fixed loop choice.
class StructureSearch {
 public:
  StructureSearch(const Program& p, const Target& t, int loop_atom, const SearchOptions& o, LoopSearchStats* st)
      : p_(p), t_(t), opts_(o), st_(st) {
    base_.loop_atom = loop_atom;
    base_.chunk = 0;
    int target_ops = 0;
    for (const Stmt& s : p.stmts) target_ops += s.op != Op::Input && s.op != Op::Const;
    max_ops_ = target_ops + o.extra_ops;
    // The largest tile the target itself materializes (a product that only feeds a
    // sum is a matmul's and is never materialized): larger tiles are not searched.
    std::vector<int> users_all(p.stmts.size(), 0), users_sum(p.stmts.size(), 0);
    for (const Stmt& st : p.stmts)
      for (int a : st.args) ++users_all[a], users_sum[a] += st.op == Op::Sum;
    for (size_t i = 0; i < p.stmts.size(); ++i) {
      const Stmt& st = p.stmts[i];
      bool product_of_matmul = st.op == Op::Mul && users_all[i] > 0 && users_all[i] == users_sum[i];
      if (!product_of_matmul) max_atoms_ = std::max(max_atoms_, st.axes.size());
    }
  }

  std::vector<BlockGraph> run() {
    auto t0 = std::chrono::steady_clock::now();
    // The root state: every input and every constant the target knows.
    Node root;
    root.parent = -1;
    nodes_.push_back(root);
    std::vector<BOp> start;
    for (size_t i = 0; i < p_.stmts.size(); ++i)
      if (p_.stmts[i].op == Op::Input) {
        BOp op;
        op.kind = BKind::Input;
        op.stmt = static_cast<int>(i);
        start.push_back(op);
      }
    std::vector<double> consts = t_.constants;
    for (const Stmt& s : p_.stmts)
      if (s.op == Op::Const && std::find(consts.begin(), consts.end(), s.value) == consts.end()) consts.push_back(s.value);
    std::sort(consts.begin(), consts.end());
    for (double c : consts) {
      BOp op;
      op.kind = BKind::Const;
      op.value = c;
      start.push_back(op);
    }
    BlockGraph g = base_;
    for (BOp& op : start) {
      std::string why;
      require(infer_op(p_, g, op, &why), "μGraph search: " + why);
      g.ops.push_back(op);
      ident_of_ = root_ident_;
      auto [c, id] = klass(g, g.ops.size() - 1, root_ecls_);
      root_ecls_.push_back(c);
      root_ident_.push_back(id);
    }
    root_ops_ = g.ops;
    std::deque<int> queue{0};
    std::vector<BlockGraph> found;
    st_->stop = "exhausted";
    while (!queue.empty()) {
      if (st_->states >= opts_.max_states) {
        st_->stop = "state limit";
        break;
      }
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > opts_.max_seconds) {
        st_->stop = "time limit";
        break;
      }
      int id = queue.front();
      queue.pop_front();
      ++st_->states;
      expand(id, queue, found);
      if (found.size() >= opts_.max_candidates) {
        st_->stop = "candidate limit";
        break;
      }
    }
    st_->candidates = found.size();
    st_->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return found;
  }

 private:
  struct Node {
    int parent = -1;
    BOp op;
    int ecls = -1, ident = -1;
    int depth = 0;
  };

  // The op's abstract-expression class (-1: none) and its identity in states: the
  // class itself with pruning, a structural id without (every well-formed tile kept).
  std::pair<int, int> klass(const BlockGraph& g, size_t i, const std::vector<int>& ecls) {
    int c = op_class(t_, p_, g, i, ecls);
    if (opts_.prune) return {c, c};
    const BOp& op = g.ops[i];
    std::vector<int64_t> key{static_cast<int64_t>(op.kind), static_cast<int64_t>(op.op), op.stmt,
                             static_cast<int64_t>(std::bit_cast<uint64_t>(op.value) >> 1)};
    for (int a : op.args) key.push_back(ident_of_[a]);
    for (int r : op.reduce) key.push_back(1000 + r);
    auto it = ids_.emplace(key, static_cast<int>(ids_.size())).first;
    return {c, it->second};
  }

  void state_of(int id, BlockGraph& g, std::vector<int>& ecls, std::vector<int>& ident) {
    std::vector<int> chain;
    for (int k = id; k > 0; k = nodes_[k].parent) chain.push_back(k);
    g = base_;
    g.ops = root_ops_;
    ecls = root_ecls_;
    ident = root_ident_;
    for (size_t k = chain.size(); k-- > 0;) {
      g.ops.push_back(nodes_[chain[k]].op);
      ecls.push_back(nodes_[chain[k]].ecls);
      ident.push_back(nodes_[chain[k]].ident);
    }
    ident_of_ = ident;
  }

  uint64_t state_key(const BlockGraph& g, const std::vector<int>& cls) {
    std::vector<uint64_t> items;
    for (size_t i = 0; i < g.ops.size(); ++i)
      items.push_back((static_cast<uint64_t>(cls[i]) << 2) | static_cast<uint64_t>(g.ops[i].phase));
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
    uint64_t h = 1469598103934665603ull;
    for (uint64_t x : items) h = (h ^ x) * 1099511628211ull, h ^= h >> 29;
    return h;
  }

  bool is_goal(const BlockGraph& g, const std::vector<int>& ecls, std::vector<int>* outs) {
    Phase final_phase = g.loop_atom >= 0 ? Phase::Post : Phase::Pre;
    outs->clear();
    for (size_t k = 0; k < t_.output_class.size(); ++k) {
      int hit = -1;
      for (size_t i = 0; i < g.ops.size() && hit < 0; ++i) {
        if (ecls[i] == t_.output_class[k] && g.ops[i].phase == final_phase && g.ops[i].axes == p_.stmts[p_.outputs[k].stmt].axes)
          hit = static_cast<int>(i);
      }
      if (hit < 0) return false;
      outs->push_back(hit);
    }
    return true;
  }

  BlockGraph extract(const BlockGraph& g, const std::vector<int>& outs) {
    std::vector<bool> live(g.ops.size(), false);
    for (int o : outs) live[o] = true;
    for (size_t i = g.ops.size(); i-- > 0;)
      if (live[i])
        for (int a : g.ops[i].args) live[a] = true;
    BlockGraph r = base_;
    std::vector<int> remap(g.ops.size(), -1);
    for (size_t i = 0; i < g.ops.size(); ++i) {
      if (!live[i]) continue;
      BOp op = g.ops[i];
      for (int& a : op.args) a = remap[a];
      remap[i] = static_cast<int>(r.ops.size());
      r.ops.push_back(op);
    }
    for (size_t k = 0; k < outs.size(); ++k) r.outputs.emplace_back(remap[outs[k]], static_cast<int>(k));
    return r;
  }

  void expand(int id, std::deque<int>& queue, std::vector<BlockGraph>& found) {
    BlockGraph g;
    std::vector<int> ecls, ident;
    state_of(id, g, ecls, ident);
    const size_t n = g.ops.size();
    // try_op appends the candidate op and pops it again while the loops below walk
    // the axes of g's ops: room for it now, so that no append moves them.
    g.ops.reserve(n + 1);
    std::vector<int> uses(n, 0);
    for (const BOp& op : g.ops)
      for (int a : op.args) ++uses[a];
    int dangling = 0;
    for (size_t i = 0; i < n; ++i)
      dangling += uses[i] == 0 && g.ops[i].kind != BKind::Input && g.ops[i].kind != BKind::Const;
    const int depth = nodes_[id].depth;
    if (depth >= max_ops_) return;
    std::unordered_set<uint64_t> have;
    for (size_t i = 0; i < n; ++i) have.insert((static_cast<uint64_t>(ident[i]) << 2) | static_cast<uint64_t>(g.ops[i].phase));

    auto try_op = [&](BOp op) {
      ++st_->generated;
      for (int a : op.args) (void)a;
      if (!infer_op(p_, g, op, nullptr)) return;
      if (op.axes.size() > max_atoms_) return;
      if (op.phase != Phase::Loop && std::find(op.axes.begin(), op.axes.end(), g.loop_atom) != op.axes.end()) return;
      g.ops.push_back(op);
      auto [c, idn] = klass(g, n, ecls);
      g.ops.pop_back();
      if (idn < 0) return;  // pruned: not a subexpression of the target
      uint64_t item = (static_cast<uint64_t>(idn) << 2) | static_cast<uint64_t>(op.phase);
      if (have.count(item)) return;  // computes what a tile already holds
      int freed = 0;
      std::vector<int> args = op.args;
      std::sort(args.begin(), args.end());
      args.erase(std::unique(args.begin(), args.end()), args.end());
      for (int a : args)
        freed += uses[a] == 0 && g.ops[a].kind != BKind::Input && g.ops[a].kind != BKind::Const;
      if (dangling - freed + 1 > opts_.max_dangling) return;
      // The child state.
      g.ops.push_back(op);
      std::vector<int> cident = ident, cecls = ecls;
      cident.push_back(idn);
      cecls.push_back(c);
      uint64_t key = state_key(g, cident);
      if (!seen_.insert(key).second) {
        g.ops.pop_back();
        return;
      }
      std::vector<int> outs;
      bool goal = is_goal(g, cecls, &outs);
      if (goal) {
        BlockGraph r = extract(g, outs);
        std::string text = r.to_text(p_);
        if (texts_.insert(text).second) found.push_back(std::move(r));
      }
      g.ops.pop_back();
      Node nd;
      nd.parent = id;
      nd.op = op;
      nd.ecls = c;
      nd.ident = idn;
      nd.depth = depth + 1;
      nodes_.push_back(std::move(nd));
      if (!goal) queue.push_back(static_cast<int>(nodes_.size()) - 1);
    };

    std::vector<int> tiles;  // candidate operands (constants only where an op takes one)
    for (size_t i = 0; i < n; ++i) tiles.push_back(static_cast<int>(i));
    auto is_const = [&](int i) { return g.ops[i].kind == BKind::Const; };
    for (Op f : t_.ops) {
      int ar = op_arity(f);
      if (ar == 1) {
        for (int a : tiles)
          if (!is_const(a)) {
            BOp op;
            op.kind = BKind::Elementwise;
            op.op = f;
            op.args = {a};
            try_op(op);
          }
      } else if (ar == 2) {
        for (int a : tiles)
          for (int b : tiles) {
            if (is_const(a) && is_const(b)) continue;
            if (commutative(f) && b < a) continue;
            BOp op;
            op.kind = BKind::Elementwise;
            op.op = f;
            op.args = {a, b};
            try_op(op);
          }
      } else if (ar == 3) {
        for (int c : tiles) {
          if (g.ops[c].kind != BKind::Input || p_.inputs[p_.stmts[g.ops[c].stmt].input].dtype != DType::Bool) continue;
          for (int a : tiles)
            for (int b : tiles) {
              BOp op;
              op.kind = BKind::Elementwise;
              op.op = f;
              op.args = {c, a, b};
              try_op(op);
            }
        }
      }
    }
    for (int a : tiles)
      for (int b : tiles) {
        if (b < a || is_const(a) || is_const(b)) continue;
        for (int r : g.ops[a].axes) {
          if (std::find(g.ops[b].axes.begin(), g.ops[b].axes.end(), r) == g.ops[b].axes.end()) continue;
          BOp op;
          op.kind = BKind::Matmul;
          op.args = {a, b};
          op.reduce = {r};
          try_op(op);
        }
      }
    for (int a : tiles) {
      if (is_const(a)) continue;
      for (int r : g.ops[a].axes) {
        BOp op;
        op.kind = BKind::Reduce;
        op.args = {a};
        op.reduce = {r};
        try_op(op);
      }
      if (g.loop_atom >= 0 && g.ops[a].phase == Phase::Loop) {
        BOp op;
        op.kind = BKind::Accum;
        op.args = {a};
        try_op(op);
      }
    }
  }

  const Program& p_;
  const Target& t_;
  const SearchOptions& opts_;
  LoopSearchStats* st_;
  BlockGraph base_;
  int max_ops_ = 0;
  size_t max_atoms_ = 0;
  std::vector<Node> nodes_;
  std::vector<BOp> root_ops_;
  std::vector<int> root_ecls_, root_ident_, ident_of_;
  std::unordered_set<uint64_t> seen_;
  std::unordered_set<std::string> texts_;
  std::map<std::vector<int64_t>, int> ids_;
};

}  // namespace

BlockGraph direct_translation(const Program& p) {
  BlockGraph g;
  std::vector<int> users_all(p.stmts.size(), 0), users_sum(p.stmts.size(), 0);
  for (const Stmt& st : p.stmts)
    for (int a : st.args) ++users_all[a], users_sum[a] += st.op == Op::Sum;
  std::vector<int> op_of(p.stmts.size(), -1);
  for (size_t i = 0; i < p.stmts.size(); ++i) {
    const Stmt& s = p.stmts[i];
    BOp op;
    if (s.op == Op::Input) {
      op.kind = BKind::Input;
      op.stmt = static_cast<int>(i);
    } else if (s.op == Op::Const) {
      op.kind = BKind::Const;
      op.value = s.value;
    } else if (s.op == Op::Sum) {
      const Stmt& a = p.stmts[s.args[0]];
      bool product = a.op == Op::Mul && users_all[s.args[0]] == users_sum[s.args[0]];
      bool shared = product;
      for (int r : s.reduce)
        for (int k = 0; k < 2 && product; ++k)
          shared = shared && std::find(p.stmts[a.args[k]].axes.begin(), p.stmts[a.args[k]].axes.end(), r) !=
                                 p.stmts[a.args[k]].axes.end();
      if (shared) {
        op.kind = BKind::Matmul;
        op.args = {op_of[a.args[0]], op_of[a.args[1]]};
      } else {
        op.kind = BKind::Reduce;
        op.args = {op_of[s.args[0]]};
      }
      op.reduce = s.reduce;
    } else {
      op.kind = BKind::Elementwise;
      op.op = s.op;
      for (int a : s.args) op.args.push_back(op_of[a]);
    }
    bool skip = false;
    for (int a : op.args) skip = skip || a < 0;
    if (skip) continue;  // a matmul's product: never made
    std::string why;
    require(infer_op(p, g, op, &why), "direct translation: " + why);
    op_of[i] = static_cast<int>(g.ops.size());
    g.ops.push_back(op);
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) g.outputs.emplace_back(op_of[p.outputs[k].stmt], static_cast<int>(k));
  // Drop what no output needs (the products matmuls absorbed).
  std::vector<bool> live(g.ops.size(), false);
  for (const auto& [o, k] : g.outputs) live[o] = true;
  for (size_t i = g.ops.size(); i-- > 0;)
    if (live[i])
      for (int a : g.ops[i].args) live[a] = true;
  BlockGraph r;
  std::vector<int> remap(g.ops.size(), -1);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    if (!live[i]) continue;
    BOp op = g.ops[i];
    for (int& a : op.args) a = remap[a];
    remap[i] = static_cast<int>(r.ops.size());
    r.ops.push_back(op);
  }
  for (const auto& [o, k] : g.outputs) r.outputs.emplace_back(remap[o], k);
  return r;
}

std::string SearchStats::stop_text() const {
  std::string s = saturation.stop + ";";
  for (size_t i = 0; i < loops.size(); ++i) s += (i ? ", " : " ") + loops[i].loop + " " + loops[i].stop;
  return s;
}

bool SearchStats::timed_out() const {
  bool t = saturation.stop == "time limit";
  for (const auto& l : loops) t = t || l.stop == "time limit";
  return t;
}

std::vector<BlockGraph> search_structures(const Program& p, const SearchOptions& opts, SearchStats* stats) {
  SearchStats local;
  SearchStats& st = stats ? *stats : local;
  Target t(p, opts.saturation, &st.saturation);
  std::vector<int> loops{-1};
  for (int a : p.reduced_atoms()) loops.push_back(a);
  std::vector<BlockGraph> all;
  for (int l : loops) {
    LoopSearchStats ls;
    ls.loop = l < 0 ? "none" : p.atoms[l].name;
    StructureSearch s(p, t, l, opts, &ls);
    std::vector<BlockGraph> found = s.run();
    all.insert(all.end(), found.begin(), found.end());
    st.loops.push_back(ls);
  }
  return all;
}

}  // namespace isomer::mugraph
