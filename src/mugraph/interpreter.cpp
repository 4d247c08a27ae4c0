#include "mugraph/interpreter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

#include "ir/error.h"

namespace isomer::mugraph {

namespace {

template <class T>
struct Arith;

template <>
struct Arith<double> {
  static double from(double v) { return v; }
  static double zero() { return 0; }
  static double one() { return 1; }
  static double neg_inf() { return -INFINITY; }
  static bool is_neg_inf(double x) { return x == -INFINITY; }
  static bool truthy(double c) { return c != 0; }
  static double exp(double x) { return std::exp(x); }
  static double shift(double m, double x) { return std::max(m, x); }
  static double apply(Op op, double a, double b, double c) {
    switch (op) {
      case Op::Add: return a + b;
      case Op::Sub: return a - b;
      case Op::Mul: return a * b;
      case Op::Div: return a / b;
      case Op::Max: return std::max(a, b);
      case Op::Min: return std::min(a, b);
      case Op::Where: return a != 0 ? b : c;
      case Op::Neg: return -a;
      case Op::Exp: return std::exp(a);
      case Op::Sqrt: return std::sqrt(a);
      case Op::Erf: return std::erf(a);
      case Op::Tanh: return std::tanh(a);
      case Op::Sigmoid: return 1.0 / (1.0 + std::exp(-a));
      case Op::Relu: return a > 0 ? a : 0.0;
      case Op::Log: return std::log(a);
      default: throw Error("μGraph interpreter: not an elementwise op");
    }
  }
};

template <>
struct Arith<FieldVal> {
  static FieldVal from(double v) { return FieldVal::of_double(v); }
  static FieldVal zero() { return FieldVal::of_int(0); }
  static FieldVal one() { return FieldVal::of_int(1); }
  static FieldVal neg_inf() { return FieldVal::neg_inf(); }
  static bool is_neg_inf(const FieldVal& x) { return x.kind == FieldVal::Kind::NegInf; }
  static bool truthy(const FieldVal& c) { return c.p != 0; }
  static FieldVal exp(const FieldVal& x) { return field_exp(x); }
  static FieldVal shift(const FieldVal& m, const FieldVal& x) { return field_shift(m, x); }
  static FieldVal apply(Op op, const FieldVal& a, const FieldVal& b, const FieldVal& c) {
    switch (op) {
      case Op::Add: return a + b;
      case Op::Sub: return a - b;
      case Op::Mul: return a * b;
      case Op::Div: return a / b;
      case Op::Max:
      case Op::Min: {
        // Uninterpreted but symmetric, as max and min are.
        bool swap = b.p < a.p;
        return field_uf(op_name(op), swap ? b : a, swap ? &a : &b);
      }
      case Op::Where: return a.p != 0 ? b : c;
      case Op::Neg: return FieldVal::of_int(0) - a;
      case Op::Exp: return field_exp(a);
      case Op::Sigmoid: return FieldVal::of_int(1) / (FieldVal::of_int(1) + field_exp(FieldVal::of_int(0) - a));
      case Op::Sqrt:
      case Op::Erf:
      case Op::Tanh:
      case Op::Relu:
      case Op::Log: return field_uf(op_name(op), a);
      default: throw Error("μGraph interpreter: not an elementwise op");
    }
  }
};

// A dense array over sorted atoms with given extents.
template <class T>
struct Tile {
  std::vector<int> axes;
  std::vector<int64_t> ext;
  std::vector<T> data;
  int64_t stride(int atom) const {
    int64_t s = 1;
    for (size_t k = axes.size(); k-- > 0;) {
      if (axes[k] == atom) return s;
      s *= ext[k];
    }
    return 0;
  }
};

// Iterates over the atoms `iter` (extents `ext`), keeping one offset per operand
// (strides[op][k]: operand op's stride along iter[k]); calls f(offsets).
template <class F>
void each_index(const std::vector<int64_t>& ext, const std::vector<std::vector<int64_t>>& strides, F&& f) {
  const size_t n = ext.size(), m = strides.size();
  for (int64_t e : ext)
    if (e <= 0) return;
  std::vector<int64_t> idx(n, 0), off(m, 0);
  while (true) {
    f(off.data());
    size_t k = n;
    while (k > 0) {
      --k;
      ++idx[k];
      for (size_t o = 0; o < m; ++o) off[o] += strides[o][k];
      if (idx[k] < ext[k]) break;
      for (size_t o = 0; o < m; ++o) off[o] -= strides[o][k] * ext[k];
      idx[k] = 0;
      if (k == 0) return;
    }
    if (n == 0) return;
  }
}

// Where a tile sits: origin and extent of every atom.
struct Window {
  std::vector<int64_t> origin, extent;
};

template <class T>
Tile<T> make_tile(const std::vector<int>& axes, const Window& w, T fill) {
  Tile<T> t;
  t.axes = axes;
  int64_t n = 1;
  for (int a : axes) t.ext.push_back(w.extent[a]), n *= w.extent[a];
  t.data.assign(static_cast<size_t>(n), fill);
  return t;
}

template <class T>
std::vector<int64_t> ext_of(const std::vector<int>& axes, const Window& w) {
  std::vector<int64_t> e;
  for (int a : axes) e.push_back(w.extent[a]);
  return e;
}

template <class T>
std::vector<int64_t> strides_along(const Tile<T>& t, const std::vector<int>& iter) {
  std::vector<int64_t> s;
  for (int a : iter) s.push_back(t.stride(a));
  return s;
}

// out = f(args) elementwise over out's atoms (args broadcast).
template <class T>
void elementwise(Op op, const std::vector<const Tile<T>*>& args, Tile<T>& out) {
  std::vector<std::vector<int64_t>> st{strides_along(out, out.axes)};
  for (const Tile<T>* a : args) st.push_back(strides_along(*a, out.axes));
  const T z = Arith<T>::zero();
  each_index(out.ext, st, [&](const int64_t* off) {
    const T& a = args[0]->data[off[1]];
    const T& b = args.size() > 1 ? args[1]->data[off[2]] : z;
    const T& c = args.size() > 2 ? args[2]->data[off[3]] : z;
    out.data[off[0]] = Arith<T>::apply(op, a, b, c);
  });
}

// out += sum over `reduce` of prod(args).
template <class T>
void contract(const std::vector<const Tile<T>*>& args, const std::vector<int>& reduce, const Window& w, Tile<T>& out) {
  std::vector<int> iter = out.axes;
  iter.insert(iter.end(), reduce.begin(), reduce.end());
  std::vector<int64_t> ext = ext_of<T>(iter, w);
  std::vector<std::vector<int64_t>> st{strides_along(out, iter)};
  for (const Tile<T>* a : args) st.push_back(strides_along(*a, iter));
  each_index(ext, st, [&](const int64_t* off) {
    T v = args[0]->data[off[1]];
    if (args.size() > 1) v = Arith<T>::apply(Op::Mul, v, args[1]->data[off[2]], v);
    out.data[off[0]] = Arith<T>::apply(Op::Add, out.data[off[0]], v, v);
  });
}

template <class T>
T power(const T& f, int k) {
  T r = Arith<T>::one();
  for (int i = 0; i < std::abs(k); ++i) r = Arith<T>::apply(Op::Mul, r, f, r);
  return k >= 0 ? r : Arith<T>::apply(Op::Div, Arith<T>::one(), r, r);
}

// Multiplies every element of t by fac[shift index]^k (fac over the shift atoms).
template <class T>
void rescale(Tile<T>& t, const Tile<T>& fac, int k) {
  if (k == 0) return;
  std::vector<std::vector<int64_t>> st{strides_along(t, t.axes), strides_along(fac, t.axes)};
  each_index(t.ext, st, [&](const int64_t* off) {
    t.data[off[0]] = Arith<T>::apply(Op::Mul, t.data[off[0]], power(fac.data[off[1]], k), t.data[off[0]]);
  });
}

template <class T>
class Runner {
 public:
  Runner(const Program& p, const BlockGraph& g, const Buffers<T>& in, Buffers<T>& out, const std::vector<uint8_t>& skip)
      : p_(p), g_(g), in_(in), out_(out), skip_(skip) {}

  void run_tile(int64_t tile) {
    const size_t na = p_.atoms.size();
    Window w;
    w.origin.assign(na, 0);
    w.extent.resize(na);
    for (size_t a = 0; a < na; ++a) w.extent[a] = p_.atoms[a].extent;
    int64_t rest = tile;
    for (size_t k = g_.grid.size(); k-- > 0;) {
      const GridDim& d = g_.grid[k];
      int64_t n = (p_.extent(d.atom) + d.tile - 1) / d.tile;
      int64_t i = rest % n;
      rest /= n;
      w.origin[d.atom] = i * d.tile;
      w.extent[d.atom] = std::min(d.tile, p_.extent(d.atom) - i * d.tile);
    }
    const size_t n = g_.ops.size();
    std::vector<Tile<T>> tiles(n);
    Tile<T> m, fac;  // the stabilizer's shift and rescale factor, over stab_axes
    bool have_m = false;
    auto run_phase = [&](Phase ph, const Window& win) {
      for (size_t i = 0; i < n; ++i)
        if (g_.ops[i].phase == ph && g_.ops[i].kind != BKind::Accum) compute(i, win, tiles, m, fac, have_m);
    };
    run_phase(Phase::Pre, w);
    std::vector<size_t> accs;
    for (size_t i = 0; i < n; ++i)
      if (g_.ops[i].kind == BKind::Accum) accs.push_back(i);
    if (g_.loop_atom >= 0) {
      const int la = g_.loop_atom;
      const int64_t chunks = g_.num_chunks(p_), per = g_.chunks_per_split(p_);
      const bool stab_loop = g_.stab_exp >= 0 && g_.ops[g_.stab_exp].phase == Phase::Loop;
      // Each split: its own accumulators and running maximum (have_m false: none yet).
      std::vector<std::vector<Tile<T>>> part(static_cast<size_t>(g_.splits));
      std::vector<Tile<T>> part_m(static_cast<size_t>(g_.splits));
      std::vector<bool> part_have(static_cast<size_t>(g_.splits), false);
      const bool have_m0 = have_m;
      const Tile<T> m0 = m;
      for (int64_t sp = 0; sp < g_.splits; ++sp) {
        have_m = have_m0, m = m0;
        for (size_t i : accs) tiles[i] = make_tile<T>(g_.ops[i].axes, w, Arith<T>::zero());
        for (int64_t c = sp * per; c < std::min(chunks, (sp + 1) * per); ++c) {
          if (!skip_.empty() && skip_[static_cast<size_t>(tile * chunks + c)]) continue;
          Window lw = w;
          lw.origin[la] = c * g_.chunk;
          lw.extent[la] = std::min(g_.chunk, p_.extent(la) - c * g_.chunk);
          run_phase(Phase::Loop, lw);
          for (size_t i : accs) {
            const BOp& op = g_.ops[i];
            if (stab_loop) rescale(tiles[i], fac, op.scale);
            contract<T>({&tiles[op.args[0]]}, {}, lw, tiles[i]);
          }
        }
        for (size_t i : accs) part[static_cast<size_t>(sp)].push_back(tiles[i]);
        part_m[static_cast<size_t>(sp)] = m, part_have[static_cast<size_t>(sp)] = have_m;
      }
      if (g_.splits > 1) combine(accs, part, part_m, part_have, stab_loop, w, tiles, m, have_m);
      run_phase(Phase::Post, w);
    }
    // Outputs (unscaled: multiplied by exp(m)^scale).
    for (const auto& [o, k] : g_.outputs) {
      Tile<T> t = tiles[o];
      if (g_.ops[o].scale != 0) {
        Tile<T> em = m;
        for (T& v : em.data) v = Arith<T>::exp(v);
        rescale(t, em, g_.ops[o].scale);
      }
      const IoTensor& io = p_.outputs[k];
      std::vector<int64_t> st, ost;
      int64_t base = 0;
      for (int a : t.axes) {
        int64_t s = io.stride(p_.atoms, a);
        ost.push_back(s);
        base += w.origin[a] * s;
      }
      st = strides_along(t, t.axes);
      std::vector<T>& dst = out_[k];
      each_index(t.ext, {st, ost}, [&](const int64_t* off) { dst[base + off[1]] = t.data[off[0]]; });
    }
  }

 private:
  void compute(size_t i, const Window& w, std::vector<Tile<T>>& tiles, Tile<T>& m, Tile<T>& fac, bool& have_m) {
    const BOp& op = g_.ops[i];
    Tile<T>& out = tiles[i];
    switch (op.kind) {
      case BKind::Input: {
        const Stmt& s = p_.stmts[op.stmt];
        const IoTensor& io = p_.inputs[s.input];
        out = make_tile<T>(op.axes, w, Arith<T>::zero());
        std::vector<int64_t> ist;
        int64_t base = 0;
        for (int a : op.axes) {
          int64_t st = io.stride(p_.atoms, a);
          ist.push_back(st);
          base += w.origin[a] * st;
        }
        const std::vector<T>& src = in_[s.input];
        each_index(out.ext, {strides_along(out, out.axes), ist},
                 [&](const int64_t* off) { out.data[off[0]] = src[base + off[1]]; });
        return;
      }
      case BKind::Const:
        out = make_tile<T>({}, w, Arith<T>::from(op.value));
        return;
      case BKind::Elementwise: {
        out = make_tile<T>(op.axes, w, Arith<T>::zero());
        if (static_cast<int>(i) == g_.stab_exp) {
          stabilized_exp(op, w, tiles[op.args[0]], out, m, fac, have_m);
          return;
        }
        std::vector<const Tile<T>*> args;
        for (int a : op.args) args.push_back(&tiles[a]);
        elementwise(op.op, args, out);
        return;
      }
      case BKind::Matmul:
      case BKind::Reduce: {
        out = make_tile<T>(op.axes, w, Arith<T>::zero());
        std::vector<const Tile<T>*> args;
        for (int a : op.args) args.push_back(&tiles[a]);
        contract(args, op.reduce, w, out);
        return;
      }
      case BKind::Accum: return;
    }
  }

  // The splits' accumulators into `tiles`: m = the largest of their maxima (the
  // stabilizer's shift over the field), each split's accumulator rescaled by
  // exp(m_split - m)^scale as the loop rescales between chunks, then summed. A split
  // that ran no chunk (all skipped) adds nothing.
  void combine(const std::vector<size_t>& accs, const std::vector<std::vector<Tile<T>>>& part,
               const std::vector<Tile<T>>& part_m, const std::vector<bool>& part_have, bool stab_loop, const Window& w,
               std::vector<Tile<T>>& tiles, Tile<T>& m, bool& have_m) {
    if (stab_loop) {
      m = make_tile<T>(g_.stab_axes, w, Arith<T>::neg_inf());
      for (size_t sp = 0; sp < part.size(); ++sp)
        if (part_have[sp])
          for (size_t k = 0; k < m.data.size(); ++k) m.data[k] = Arith<T>::shift(m.data[k], part_m[sp].data[k]);
      have_m = true;
    }
    for (size_t j = 0; j < accs.size(); ++j) {
      const BOp& op = g_.ops[accs[j]];
      Tile<T>& acc = tiles[accs[j]];
      acc = make_tile<T>(op.axes, w, Arith<T>::zero());
      for (size_t sp = 0; sp < part.size(); ++sp) {
        Tile<T> t = part[sp][j];
        if (stab_loop && op.scale != 0) {
          if (!part_have[sp]) continue;
          Tile<T> fac = m;
          for (size_t k = 0; k < fac.data.size(); ++k) {
            const T& mo = part_m[sp].data[k];
            fac.data[k] = Arith<T>::is_neg_inf(mo) ? Arith<T>::zero()
                                                   : Arith<T>::exp(Arith<T>::apply(Op::Sub, mo, m.data[k], mo));
          }
          rescale(t, fac, op.scale);
        }
        contract<T>({&t}, {}, w, acc);
      }
    }
  }

  // exp(x - m): m the maximum of x over the atoms not in stab_axes (running across
  // loop iterations when the exp is in the loop), fac = exp(m_old - m_new).
  void stabilized_exp(const BOp& op, const Window& w, const Tile<T>& x, Tile<T>& out, Tile<T>& m, Tile<T>& fac,
                      bool& have_m) {
    Tile<T> cm = make_tile<T>(g_.stab_axes, w, Arith<T>::neg_inf());
    each_index(x.ext, {strides_along(x, x.axes), strides_along(cm, x.axes)}, [&](const int64_t* off) {
      cm.data[off[1]] = Arith<T>::shift(cm.data[off[1]], x.data[off[0]]);
    });
    bool running = op.phase == Phase::Loop && have_m;
    fac = make_tile<T>(g_.stab_axes, w, Arith<T>::one());
    if (running) {
      for (size_t k = 0; k < cm.data.size(); ++k) {
        T mo = m.data[k];
        T mn = Arith<T>::shift(mo, cm.data[k]);
        if (Arith<T>::is_neg_inf(mn)) fac.data[k] = Arith<T>::one();
        else if (Arith<T>::is_neg_inf(mo)) fac.data[k] = Arith<T>::zero();
        else fac.data[k] = Arith<T>::exp(Arith<T>::apply(Op::Sub, mo, mn, mo));
        m.data[k] = mn;
      }
    } else {
      m = cm;
      have_m = true;
    }
    each_index(out.ext, {strides_along(out, out.axes), strides_along(x, out.axes), strides_along(m, out.axes)},
             [&](const int64_t* off) {
               const T& mv = m.data[off[2]];
               out.data[off[0]] = Arith<T>::is_neg_inf(mv)
                                      ? Arith<T>::zero()
                                      : Arith<T>::exp(Arith<T>::apply(Op::Sub, x.data[off[1]], mv, mv));
             });
  }

  const Program& p_;
  const BlockGraph& g_;
  const Buffers<T>& in_;
  Buffers<T>& out_;
  const std::vector<uint8_t>& skip_;
};

}  // namespace

template <class T>
Buffers<T> evaluate_program(const Program& p, const Buffers<T>& inputs) {
  Window w;
  w.origin.assign(p.atoms.size(), 0);
  for (const Atom& a : p.atoms) w.extent.push_back(a.extent);
  std::vector<Tile<T>> v(p.stmts.size());
  for (size_t i = 0; i < p.stmts.size(); ++i) {
    const Stmt& s = p.stmts[i];
    Tile<T>& out = v[i];
    switch (s.op) {
      case Op::Input: {
        const IoTensor& io = p.inputs[s.input];
        out = make_tile<T>(s.axes, w, Arith<T>::zero());
        std::vector<int64_t> ist;
        for (int a : s.axes) ist.push_back(io.stride(p.atoms, a));
        const std::vector<T>& src = inputs[s.input];
        each_index(out.ext, {strides_along(out, out.axes), ist},
                 [&](const int64_t* off) { out.data[off[0]] = src[off[1]]; });
        break;
      }
      case Op::Const: out = make_tile<T>({}, w, Arith<T>::from(s.value)); break;
      case Op::Sum:
        out = make_tile<T>(s.axes, w, Arith<T>::zero());
        contract<T>({&v[s.args[0]]}, s.reduce, w, out);
        break;
      default: {
        out = make_tile<T>(s.axes, w, Arith<T>::zero());
        std::vector<const Tile<T>*> args;
        for (int a : s.args) args.push_back(&v[a]);
        elementwise(s.op, args, out);
      }
    }
  }
  Buffers<T> outs;
  for (const IoTensor& io : p.outputs) {
    const Tile<T>& t = v[io.stmt];
    int64_t n = 1;
    for (int64_t d : io.dims) n *= d;
    std::vector<T> dst(static_cast<size_t>(n));
    std::vector<int64_t> ost;
    for (int a : t.axes) ost.push_back(io.stride(p.atoms, a));
    each_index(t.ext, {strides_along(t, t.axes), ost}, [&](const int64_t* off) { dst[off[1]] = t.data[off[0]]; });
    outs.push_back(std::move(dst));
  }
  return outs;
}

std::vector<float> constant_values(const Tensor& t) {
  if (t.dtype() == DType::Float32) {
    const float* f = reinterpret_cast<const float*>(t.bytes().data());
    return std::vector<float>(f, f + t.numel());
  }
  std::vector<float> out;
  if (t.dtype() == DType::Bool)
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.f64_at(i) != 0.0 ? 1.0f : 0.0f);
  return out;
}

bool fills_like_neg_inf(double v) { return v <= -1e38; }

FieldVal field_constant(double v) { return FieldVal::of_double(fills_like_neg_inf(v) ? -INFINITY : v); }

namespace {

// Whether every row of constant input `in` along `loop` (every index of its other
// atoms) has a value above the fill (see fills_like_neg_inf).
bool every_row_unfilled(const Program& p, int in, int loop, const std::vector<float>& data) {
  const IoTensor& io = p.inputs[in];
  std::vector<int64_t> ext, st;
  for (int a : p.stmts[io.stmt].axes)
    if (a != loop) ext.push_back(p.extent(a)), st.push_back(io.stride(p.atoms, a));
  const int64_t n = p.extent(loop), ls = io.stride(p.atoms, loop);
  bool ok = true;
  each_index(ext, {st}, [&](const int64_t* off) {
    bool kept = false;
    for (int64_t j = 0; j < n && !kept; ++j) kept = !fills_like_neg_inf(data[static_cast<size_t>(off[0] + j * ls)]);
    ok = ok && kept;
  });
  return ok;
}

}  // namespace

std::vector<uint8_t> skip_table(const Program& p, const BlockGraph& g,
                                const std::vector<std::vector<float>>& constant_inputs) {
  if (g.loop_atom < 0) return {};
  bool any_const = false;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (g.ops[i].kind == BKind::Input && g.ops[i].phase == Phase::Loop) {
      int in = p.stmts[g.ops[i].stmt].input;
      any_const = any_const || (static_cast<size_t>(in) < constant_inputs.size() && !constant_inputs[in].empty());
    }
  if (!any_const) return {};
  enum Abs : uint8_t { Unknown, Zero, NegInf };
  const int64_t tiles = g.num_tiles(p), chunks = g.num_chunks(p);
  std::vector<uint8_t> table(static_cast<size_t>(tiles * chunks), 0);
  std::map<std::vector<int64_t>, Abs> memo;  // (input, origins) -> class
  std::map<int, bool> fill_masks;              // input -> its finite fill masks as -inf does
  bool skipped_any = false;
  for (int64_t t = 0; t < tiles; ++t) {
    Window w;
    w.origin.assign(p.atoms.size(), 0);
    for (const Atom& a : p.atoms) w.extent.push_back(a.extent);
    int64_t rest = t;
    for (size_t k = g.grid.size(); k-- > 0;) {
      const GridDim& d = g.grid[k];
      int64_t n = (p.extent(d.atom) + d.tile - 1) / d.tile;
      int64_t i = rest % n;
      rest /= n;
      w.origin[d.atom] = i * d.tile;
      w.extent[d.atom] = std::min(d.tile, p.extent(d.atom) - i * d.tile);
    }
    for (int64_t c = 0; c < chunks; ++c) {
      w.origin[g.loop_atom] = c * g.chunk;
      w.extent[g.loop_atom] = std::min(g.chunk, p.extent(g.loop_atom) - c * g.chunk);
      std::vector<Abs> abs(g.ops.size(), Unknown);
      for (size_t i = 0; i < g.ops.size(); ++i) {
        const BOp& op = g.ops[i];
        auto a = [&](size_t k) { return abs[op.args[k]]; };
        switch (op.kind) {
          case BKind::Input: {
            int in = p.stmts[op.stmt].input;
            if (static_cast<size_t>(in) >= constant_inputs.size() || constant_inputs[in].empty()) break;
            std::vector<int64_t> key{in};
            for (int x : op.axes) key.push_back(w.origin[x]), key.push_back(w.extent[x]);
            auto it = memo.find(key);
            if (it != memo.end()) {
              abs[i] = it->second;
              break;
            }
            const IoTensor& io = p.inputs[in];
            std::vector<int64_t> ext, st;
            int64_t base = 0;
            for (int x : op.axes) {
              ext.push_back(w.extent[x]);
              st.push_back(io.stride(p.atoms, x));
              base += w.origin[x] * st.back();
            }
            bool all_zero = true, all_ninf = true;
            const std::vector<float>& data = constant_inputs[in];
            auto fill = fill_masks.find(in);
            if (fill == fill_masks.end()) fill = fill_masks.emplace(in, every_row_unfilled(p, in, g.loop_atom, data)).first;
            each_index(ext, {st}, [&](const int64_t* off) {
              float v = data[base + off[0]];
              all_zero = all_zero && v == 0.0f;
              all_ninf = all_ninf && (v == -INFINITY || (fill->second && fills_like_neg_inf(v)));
            });
            abs[i] = memo[key] = all_ninf ? NegInf : all_zero ? Zero : Unknown;
            break;
          }
          case BKind::Const:
            abs[i] = op.value == 0 ? Zero : op.value == -INFINITY ? NegInf : Unknown;
            break;
          case BKind::Elementwise:
            switch (op.op) {
              case Op::Add:
                abs[i] = (a(0) == NegInf || a(1) == NegInf) ? NegInf : (a(0) == Zero && a(1) == Zero) ? Zero : Unknown;
                break;
              case Op::Sub:
                abs[i] = (a(0) == NegInf && a(1) != NegInf) ? NegInf : (a(0) == Zero && a(1) == Zero) ? Zero : Unknown;
                break;
              case Op::Mul: abs[i] = ((a(0) == Zero && a(1) != NegInf) || (a(1) == Zero && a(0) != NegInf)) ? Zero : Unknown; break;
              case Op::Div: abs[i] = (a(0) == Zero && a(1) == Unknown) ? Zero : Unknown; break;
              case Op::Neg: abs[i] = a(0) == Zero ? Zero : Unknown; break;
              case Op::Exp: abs[i] = a(0) == NegInf ? Zero : Unknown; break;
              // Where(keep, x, y) where keep is all false (a causal mask's tile above
              // the diagonal) is y.
              case Op::Where: abs[i] = a(0) == Zero ? a(2) : Unknown; break;
              default: abs[i] = Unknown;
            }
            break;
          case BKind::Matmul:
            abs[i] = ((a(0) == Zero && a(1) != NegInf) || (a(1) == Zero && a(0) != NegInf)) ? Zero : Unknown;
            break;
          case BKind::Reduce: abs[i] = a(0) == Zero ? Zero : Unknown; break;
          case BKind::Accum: break;
        }
      }
      bool skip = true;
      for (const BOp& op : g.ops)
        if (op.kind == BKind::Accum && abs[op.args[0]] != Zero) skip = false;
      // The iteration must not move the running maximum either: the exp's argument is all -inf.
      if (g.stab_exp >= 0 && g.ops[g.stab_exp].phase == Phase::Loop && abs[g.ops[g.stab_exp].args[0]] != NegInf)
        skip = false;
      if (skip) table[static_cast<size_t>(t * chunks + c)] = 1, skipped_any = true;
    }
  }
  if (!skipped_any) return {};
  return table;
}

template <class T>
void interpret(const Program& p, const BlockGraph& g, const Buffers<T>& inputs, Buffers<T>& outputs,
               const std::vector<int64_t>& tiles, const std::vector<uint8_t>& skip) {
  require(inputs.size() == p.inputs.size() && outputs.size() == p.outputs.size(), "μGraph interpreter: wrong buffers");
  require(skip.empty() || static_cast<int64_t>(skip.size()) == g.num_tiles(p) * g.num_chunks(p),
          "μGraph interpreter: skip table of the wrong size");
  if (!tiles.empty()) {
    Runner<T> r(p, g, inputs, outputs, skip);
    for (int64_t t : tiles) r.run_tile(t);
    return;
  }
  const int64_t n = g.num_tiles(p);
  std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 1) if (std::is_same_v<T, double>)
  for (int64_t t = 0; t < n; ++t) {
    try {
      Runner<T> rt(p, g, inputs, outputs, skip);
      rt.run_tile(t);
    } catch (...) {
#pragma omp critical
      err = std::current_exception();
    }
  }
  if (err) std::rethrow_exception(err);
}

template Buffers<double> evaluate_program(const Program&, const Buffers<double>&);
template Buffers<FieldVal> evaluate_program(const Program&, const Buffers<FieldVal>&);
template void interpret(const Program&, const BlockGraph&, const Buffers<double>&, Buffers<double>&,
                        const std::vector<int64_t>&, const std::vector<uint8_t>&);
template void interpret(const Program&, const BlockGraph&, const Buffers<FieldVal>&, Buffers<FieldVal>&,
                        const std::vector<int64_t>&, const std::vector<uint8_t>&);

}  // namespace isomer::mugraph
