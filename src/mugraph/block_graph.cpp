#include "mugraph/block_graph.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "ir/error.h"

namespace isomer::mugraph {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string atoms_text(const Program& p, const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + p.atoms[v[i]].name;
  return s + "]";
}

std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

int parse_atom(const Program& p, const std::string& s) {
  for (size_t i = 0; i < p.atoms.size(); ++i)
    if (p.atoms[i].name == s) return static_cast<int>(i);
  throw Error("μGraph text: unknown atom '" + s + "'");
}

std::vector<int> parse_atom_list(const Program& p, std::string s) {
  require(s.size() >= 2 && s.front() == '[' && s.back() == ']', "μGraph text: expected [atoms], got '" + s + "'");
  s = s.substr(1, s.size() - 2);
  std::vector<int> out;
  std::stringstream in(s);
  std::string a;
  while (std::getline(in, a, ','))
    if (!a.empty()) out.push_back(parse_atom(p, a));
  std::sort(out.begin(), out.end());
  return out;
}

int parse_ref(const std::string& s, size_t limit) {
  require(s.size() > 1 && s[0] == '%', "μGraph text: expected %op, got '" + s + "'");
  int v = std::stoi(s.substr(1));
  require(v >= 0 && static_cast<size_t>(v) < limit, "μGraph text: %" + s.substr(1) + " used before it is defined");
  return v;
}

}  // namespace

const GridDim* BlockGraph::grid_dim(int atom) const {
  for (const GridDim& d : grid)
    if (d.atom == atom) return &d;
  return nullptr;
}

std::vector<int> row_atoms(const Program& p, const BlockGraph& g) {
  auto has = [](const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  std::vector<int> inner;  // unit-stride atoms of the outputs and inputs stay vector loops
  for (const std::vector<IoTensor>* ts : {&p.outputs, &p.inputs})
    for (const IoTensor& t : *ts)
      if (!t.dim_atoms.empty() && !t.dim_atoms.back().empty()) inner.push_back(t.dim_atoms.back().back());
  std::vector<int> rows;
  for (size_t a = 0; a < p.atoms.size(); ++a) {
    const int at = static_cast<int>(a);
    if (at == g.loop_atom || has(inner, at) || p.extent(at) == 1) continue;
    bool ok = !g.outputs.empty();
    for (const auto& [o, k] : g.outputs) ok = ok && has(g.ops[o].axes, at);
    for (const BOp& op : g.ops) {
      if (has(op.reduce, at)) ok = false;
      if (op.kind == BKind::Matmul && has(op.axes, at))
        for (int x : op.args) ok = ok && has(g.ops[x].axes, at);
    }
    if (ok) rows.push_back(at);
  }
  return rows;
}

int64_t BlockGraph::tile_extent(const Program& p, int atom, Phase phase) const {
  if (const GridDim* d = grid_dim(atom)) return std::min(d->tile, p.extent(atom));
  if (atom == loop_atom && phase == Phase::Loop) return std::min(chunk, p.extent(atom));
  return p.extent(atom);
}

int64_t BlockGraph::num_tiles(const Program& p) const {
  int64_t n = 1;
  for (const GridDim& d : grid) n *= (p.extent(d.atom) + d.tile - 1) / d.tile;
  return n;
}

int64_t BlockGraph::num_chunks(const Program& p) const {
  return loop_atom < 0 ? 1 : (p.extent(loop_atom) + chunk - 1) / chunk;
}

int64_t BlockGraph::chunks_per_split(const Program& p) const { return (num_chunks(p) + splits - 1) / splits; }

bool infer_op(const Program& p, const BlockGraph& g, BOp& op, std::string* why) {
  auto fail = [&](const std::string& s) {
    if (why) *why = s;
    return false;
  };
  auto arg = [&](size_t i) -> const BOp& { return g.ops[static_cast<size_t>(op.args[i])]; };
  for (int a : op.args)
    if (a < 0 || static_cast<size_t>(a) >= g.ops.size()) return fail("argument out of range");
  auto merged_phase = [&](Phase& out) {
    bool loop = false, post = false;
    for (size_t i = 0; i < op.args.size(); ++i) {
      loop = loop || arg(i).phase == Phase::Loop;
      post = post || arg(i).phase == Phase::Post;
    }
    if (loop && post) return false;
    out = post ? Phase::Post : loop ? Phase::Loop : Phase::Pre;
    return true;
  };
  op.partial = false;
  int partial_args = 0;
  bool other_pre = true;  // every argument that is not partial is computed before the loop
  for (size_t i = 0; i < op.args.size(); ++i) {
    if (arg(i).partial) ++partial_args;
    else other_pre = other_pre && arg(i).phase == Phase::Pre;
  }
  const char* nonlinear = "uses a partial sum over the loop's chunk nonlinearly (only its accumulator means something)";
  switch (op.kind) {
    case BKind::Input: {
      if (op.stmt < 0 || static_cast<size_t>(op.stmt) >= p.stmts.size() || p.stmts[op.stmt].op != Op::Input)
        return fail("input of a statement that is no input");
      op.axes = p.stmts[op.stmt].axes;
      op.phase = contains(op.axes, g.loop_atom) ? Phase::Loop : Phase::Pre;
      op.reduce.clear();
      return true;
    }
    case BKind::Const:
      op.axes.clear();
      op.phase = Phase::Pre;
      return op.args.empty() ? true : fail("a constant has no arguments");
    case BKind::Elementwise: {
      if (!is_elementwise(op.op) || static_cast<int>(op.args.size()) != op_arity(op.op))
        return fail(std::string("wrong arity for ") + op_name(op.op));
      std::vector<int> ax;
      for (size_t i = 0; i < op.args.size(); ++i) ax.insert(ax.end(), arg(i).axes.begin(), arg(i).axes.end());
      std::sort(ax.begin(), ax.end());
      ax.erase(std::unique(ax.begin(), ax.end()), ax.end());
      op.axes = ax;
      if (!merged_phase(op.phase)) return fail("mixes loop and post-loop tiles");
      if (partial_args > 0) {
        bool linear = false;
        switch (op.op) {
          case Op::Neg: linear = true; break;
          case Op::Add:
          case Op::Sub: linear = partial_args == 2; break;
          case Op::Mul: linear = partial_args == 1 && other_pre; break;
          case Op::Div: linear = partial_args == 1 && arg(0).partial && other_pre; break;
          default: break;
        }
        if (!linear) return fail(nonlinear);
        op.partial = true;
      }
      return true;
    }
    case BKind::Matmul:
    case BKind::Reduce: {
      size_t n = op.kind == BKind::Matmul ? 2 : 1;
      if (op.args.size() != n) return fail("wrong number of arguments");
      if (op.reduce.empty()) return fail("reduces over nothing");
      for (int r : op.reduce) {
        for (size_t i = 0; i < n; ++i)
          if (!contains(arg(i).axes, r)) return fail("reduces over an atom an operand lacks");
        if (g.grid_dim(r)) return fail("reduces over a grid atom");
      }
      std::vector<int> ax;
      for (size_t i = 0; i < n; ++i)
        for (int a : arg(i).axes)
          if (!contains(op.reduce, a) && !contains(ax, a)) ax.push_back(a);
      std::sort(ax.begin(), ax.end());
      op.axes = ax;
      if (!merged_phase(op.phase)) return fail("mixes loop and post-loop tiles");
      if (contains(op.reduce, g.loop_atom) && op.phase != Phase::Loop) return fail("reduces the loop atom outside the loop");
      if (partial_args > 1 || (partial_args == 1 && !other_pre)) return fail(nonlinear);
      op.partial = partial_args > 0 || (op.phase == Phase::Loop && contains(op.reduce, g.loop_atom));
      return true;
    }
    case BKind::Accum: {
      if (op.args.size() != 1) return fail("wrong number of arguments");
      if (arg(0).phase != Phase::Loop) return fail("accumulates a tile that is not computed in the loop");
      if (contains(arg(0).axes, g.loop_atom)) return fail("accumulates a tile still indexed by the loop atom");
      if (!arg(0).partial) return fail("accumulates a tile that is no partial sum over the loop atom");
      op.axes = arg(0).axes;
      op.phase = Phase::Post;
      return true;
    }
  }
  return fail("unknown op");
}

void check_block_graph(const Program& p, const BlockGraph& g) {
  std::vector<int> reduced = p.reduced_atoms();
  for (size_t i = 0; i < g.grid.size(); ++i) {
    const GridDim& d = g.grid[i];
    require(d.atom >= 0 && static_cast<size_t>(d.atom) < p.atoms.size() && d.tile >= 1, "μGraph: bad grid dim");
    for (size_t j = 0; j < i; ++j) require(g.grid[j].atom != d.atom, "μGraph: a grid atom twice");
    require(d.atom != g.loop_atom, "μGraph: the loop atom is a grid atom");
  }
  if (g.loop_atom >= 0) {
    require(static_cast<size_t>(g.loop_atom) < p.atoms.size() && contains(reduced, g.loop_atom),
            "μGraph: the loop runs over an atom the target does not sum over");
    require(g.chunk >= 1, "μGraph: loop chunk < 1");
  }
  require(g.splits >= 1 && (g.splits == 1 || g.loop_atom >= 0), "μGraph: a split without a loop");
  require(g.splits == 1 || (g.splits - 1) * g.chunks_per_split(p) < g.num_chunks(p),
          "μGraph: a split of the loop has no chunk");
  for (size_t i = 0; i < g.ops.size(); ++i) {
    BOp op = g.ops[i];
    for (int a : op.args) require(a < static_cast<int>(i), "μGraph: op %" + std::to_string(i) + " reads a later op");
    std::string why;
    require(infer_op(p, g, op, &why), "μGraph: op %" + std::to_string(i) + ": " + why);
    require(op.axes == g.ops[i].axes && op.phase == g.ops[i].phase,
            "μGraph: op %" + std::to_string(i) + " has inconsistent atoms or phase");
    if (op.phase == Phase::Post || op.phase == Phase::Pre)
      require(!contains(op.axes, g.loop_atom), "μGraph: op %" + std::to_string(i) + " keeps the loop atom outside the loop");
  }
  std::vector<int> seen(p.outputs.size(), 0);
  for (const auto& [o, k] : g.outputs) {
    require(o >= 0 && static_cast<size_t>(o) < g.ops.size() && k >= 0 && static_cast<size_t>(k) < p.outputs.size(),
            "μGraph: bad output");
    ++seen[k];
    const BOp& op = g.ops[o];
    require(op.axes == p.stmts[p.outputs[k].stmt].axes, "μGraph: output " + std::to_string(k) + " has the wrong atoms");
    require(op.phase == (g.loop_atom >= 0 ? Phase::Post : Phase::Pre),
            "μGraph: output " + std::to_string(k) + " is not final");
    for (const GridDim& d : g.grid)
      require(contains(op.axes, d.atom), "μGraph: grid atom " + p.atoms[d.atom].name + " is not in output " +
                                             std::to_string(k) + " (tiles would write the same elements)");
  }
  for (size_t k = 0; k < seen.size(); ++k) require(seen[k] == 1, "μGraph: output " + std::to_string(k) + " not written once");
}

std::string BlockGraph::to_text(const Program& p) const {
  std::ostringstream o;
  o << "grid";
  for (const GridDim& d : grid) o << " " << p.atoms[d.atom].name << ":" << d.tile;
  o << "\nloop ";
  if (loop_atom >= 0) o << p.atoms[loop_atom].name << ":" << chunk;
  else o << "none";
  if (splits > 1) o << " split " << splits;
  o << "\n";
  for (size_t i = 0; i < ops.size(); ++i) {
    const BOp& op = ops[i];
    o << "%" << i << " = ";
    switch (op.kind) {
      case BKind::Input: o << "input s" << op.stmt; break;
      case BKind::Const: o << "const " << num(op.value); break;
      case BKind::Elementwise: o << op_name(op.op); break;
      case BKind::Matmul: o << "matmul" << atoms_text(p, op.reduce); break;
      case BKind::Reduce: o << "reduce" << atoms_text(p, op.reduce); break;
      case BKind::Accum: o << "accum"; break;
    }
    for (int a : op.args) o << " %" << a;
    o << "\n";
  }
  for (const auto& [op, k] : outputs) o << "out %" << op << " " << k << "\n";
  return o.str();
}

std::string BlockGraph::summary(const Program& p) const {
  std::ostringstream o;
  o << "grid{";
  for (size_t i = 0; i < grid.size(); ++i) o << (i ? "," : "") << p.atoms[grid[i].atom].name << ":" << grid[i].tile;
  o << "} loop{";
  if (loop_atom >= 0) o << p.atoms[loop_atom].name << ":" << chunk;
  if (splits > 1) o << " split " << splits;
  o << "}";
  int acc = 0, mm = 0;
  for (const BOp& op : ops) acc += op.kind == BKind::Accum, mm += op.kind == BKind::Matmul;
  o << " ops=" << ops.size() << " matmuls=" << mm << " accumulators=" << acc;
  if (stab_exp >= 0) o << " online-softmax";
  return o.str();
}

BlockGraph parse_block_graph(const Program& p, const std::string& text) {
  BlockGraph g;
  std::istringstream in(text);
  std::string line;
  auto tokens = [](const std::string& l) {
    std::vector<std::string> t;
    std::istringstream s(l);
    std::string w;
    while (s >> w) t.push_back(w);
    return t;
  };
  while (std::getline(in, line)) {
    std::vector<std::string> t = tokens(line);
    if (t.empty()) continue;
    if (t[0] == "grid") {
      for (size_t i = 1; i < t.size(); ++i) {
        size_t c = t[i].find(':');
        require(c != std::string::npos, "μGraph text: grid entries read atom:tile");
        g.grid.push_back({parse_atom(p, t[i].substr(0, c)), std::stoll(t[i].substr(c + 1))});
      }
    } else if (t[0] == "loop") {
      require(t.size() == 2 || (t.size() == 4 && t[2] == "split"), "μGraph text: loop line");
      if (t.size() == 4) g.splits = std::stoll(t[3]);
      if (t[1] != "none") {
        size_t c = t[1].find(':');
        require(c != std::string::npos, "μGraph text: loop reads atom:chunk");
        g.loop_atom = parse_atom(p, t[1].substr(0, c));
        g.chunk = std::stoll(t[1].substr(c + 1));
      }
    } else if (t[0] == "out") {
      require(t.size() == 3, "μGraph text: out line");
      g.outputs.emplace_back(parse_ref(t[1], g.ops.size()), std::stoi(t[2]));
    } else {
      require(t.size() >= 3 && t[1] == "=" && t[0] == "%" + std::to_string(g.ops.size()),
              "μGraph text: ops are numbered in order: '" + line + "'");
      BOp op;
      const std::string& k = t[2];
      size_t first_arg = 3;
      Op eop;
      if (k == "input") {
        op.kind = BKind::Input;
        require(t.size() == 4 && t[3].size() > 1 && t[3][0] == 's', "μGraph text: input reads 'input sN'");
        op.stmt = std::stoi(t[3].substr(1));
        first_arg = 4;
      } else if (k == "const") {
        op.kind = BKind::Const;
        require(t.size() == 4, "μGraph text: const reads 'const value'");
        op.value = std::stod(t[3]);
        first_arg = 4;
      } else if (k.rfind("matmul", 0) == 0) {
        op.kind = BKind::Matmul;
        op.reduce = parse_atom_list(p, k.substr(6));
      } else if (k.rfind("reduce", 0) == 0) {
        op.kind = BKind::Reduce;
        op.reduce = parse_atom_list(p, k.substr(6));
      } else if (k == "accum") {
        op.kind = BKind::Accum;
      } else if (parse_op(k, &eop) && is_elementwise(eop)) {
        op.kind = BKind::Elementwise;
        op.op = eop;
      } else {
        throw Error("μGraph text: unknown op '" + k + "'");
      }
      for (size_t i = first_arg; i < t.size(); ++i) op.args.push_back(parse_ref(t[i], g.ops.size()));
      std::string why;
      require(infer_op(p, g, op, &why), "μGraph text: '" + line + "': " + why);
      g.ops.push_back(op);
    }
  }
  check_block_graph(p, g);
  stabilize(p, g);
  return g;
}

void stabilize(const Program& p, BlockGraph& g) {
  (void)p;
  g.stab_exp = -1;
  g.stab_axes.clear();
  for (BOp& op : g.ops) op.scale = 0;
  const size_t n = g.ops.size();
  // Users of each op.
  std::vector<std::vector<int>> users(n);
  for (size_t i = 0; i < n; ++i)
    for (int a : g.ops[i].args) users[a].push_back(static_cast<int>(i));
  // Atoms summed over on some path from op e to the outputs (Accum sums the loop atom).
  auto reduced_downstream = [&](int e) {
    std::vector<int> atoms;
    std::vector<int> stack{e};
    std::vector<bool> seen(n, false);
    while (!stack.empty()) {
      int i = stack.back();
      stack.pop_back();
      if (seen[i]) continue;
      seen[i] = true;
      const BOp& op = g.ops[i];
      if (op.kind == BKind::Matmul || op.kind == BKind::Reduce)
        for (int r : op.reduce) atoms.push_back(r);
      if (op.kind == BKind::Accum) atoms.push_back(g.loop_atom);
      for (int u : users[i]) stack.push_back(u);
    }
    return atoms;
  };
  int chosen = -1;
  std::vector<int> shift;
  for (size_t i = 0; i < n; ++i) {
    const BOp& op = g.ops[i];
    if (op.kind != BKind::Elementwise || op.op != Op::Exp) continue;
    std::vector<int> red = reduced_downstream(static_cast<int>(i));
    bool sums_own = false;
    for (int a : op.axes) sums_own = sums_own || contains(red, a);
    if (!sums_own) continue;
    if (chosen >= 0) return;  // one stabilizer per kernel: two exps stay as they are
    chosen = static_cast<int>(i);
    shift.clear();
    for (int a : op.axes)
      if (!contains(red, a)) shift.push_back(a);
  }
  if (chosen < 0) return;
  // Powers of exp(-m) along the data flow; the rule gives up where a tile would mix powers
  // in a sum or feed a scaled value to a nonlinear function.
  std::vector<int> scale(n, 0);
  scale[chosen] = 1;
  for (size_t i = static_cast<size_t>(chosen) + 1; i < n; ++i) {
    const BOp& op = g.ops[i];
    auto s = [&](size_t k) { return scale[op.args[k]]; };
    switch (op.kind) {
      case BKind::Input:
      case BKind::Const: break;
      case BKind::Matmul: scale[i] = s(0) + s(1); break;
      case BKind::Reduce:
      case BKind::Accum: scale[i] = s(0); break;
      case BKind::Elementwise:
        switch (op.op) {
          case Op::Mul: scale[i] = s(0) + s(1); break;
          case Op::Div: scale[i] = s(0) - s(1); break;
          case Op::Neg: scale[i] = s(0); break;
          case Op::Add:
          case Op::Sub:
            if (s(0) != s(1)) return;
            scale[i] = s(0);
            break;
          case Op::Where:
            if (s(1) != s(2) || s(0) != 0) return;
            scale[i] = s(1);
            break;
          default:
            for (size_t k = 0; k < op.args.size(); ++k)
              if (s(k) != 0) return;
        }
    }
    if (scale[i] != 0)
      for (int a : shift)
        if (!contains(op.axes, a)) return;  // a scaled tile must keep every atom m varies along
  }
  g.stab_exp = chosen;
  g.stab_axes = shift;
  for (size_t i = 0; i < n; ++i) g.ops[i].scale = scale[i];
}

}  // namespace isomer::mugraph
