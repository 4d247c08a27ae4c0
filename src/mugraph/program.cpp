#include "mugraph/program.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "ir/error.h"
#include "ops/op.h"

namespace isomer::mugraph {

namespace {

struct OpInfo {
  Op op;
  const char* name;
  int arity;  // -1: not elementwise
};
constexpr OpInfo kOps[] = {
    {Op::Input, "Input", -1}, {Op::Const, "Const", -1}, {Op::Add, "Add", 2},     {Op::Sub, "Sub", 2},
    {Op::Mul, "Mul", 2},      {Op::Div, "Div", 2},      {Op::Max, "Max", 2},     {Op::Min, "Min", 2},
    {Op::Where, "Where", 3},  {Op::Neg, "Neg", 1},      {Op::Exp, "Exp", 1},     {Op::Sqrt, "Sqrt", 1},
    {Op::Erf, "Erf", 1},      {Op::Tanh, "Tanh", 1},    {Op::Sigmoid, "Sigmoid", 1}, {Op::Relu, "Relu", 1},
    {Op::Log, "Log", 1},      {Op::Sum, "Sum", -1},
};

}  // namespace

const char* op_name(Op op) { return kOps[static_cast<int>(op)].name; }
int op_arity(Op op) { return kOps[static_cast<int>(op)].arity; }
bool is_elementwise(Op op) { return op_arity(op) > 0; }
bool parse_op(std::string_view s, Op* op) {
  for (const OpInfo& i : kOps)
    if (s == i.name) {
      *op = i.op;
      return true;
    }
  return false;
}

int64_t IoTensor::stride(const std::vector<Atom>& atoms, int atom) const {
  int64_t s = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    int64_t inner = 1;
    for (size_t k = dim_atoms[d].size(); k-- > 0;) {
      if (dim_atoms[d][k] == atom) return s * inner;
      inner *= atoms[dim_atoms[d][k]].extent;
    }
    s *= dims[d];
  }
  return 0;
}

std::vector<int> Program::reduced_atoms() const {
  std::vector<int> r;
  for (const Stmt& s : stmts)
    for (int a : s.reduce)
      if (std::find(r.begin(), r.end(), a) == r.end()) r.push_back(a);
  std::sort(r.begin(), r.end());
  return r;
}

std::string Program::to_string() const {
  std::ostringstream o;
  auto axes = [&](const std::vector<int>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + atoms[v[i]].name;
    return s + "]";
  };
  o << "atoms";
  for (const Atom& a : atoms) o << " " << a.name << "=" << a.extent;
  o << "\n";
  for (size_t i = 0; i < stmts.size(); ++i) {
    const Stmt& s = stmts[i];
    o << "  s" << i << axes(s.axes) << " = " << op_name(s.op);
    if (s.op == Op::Input) o << " " << inputs[s.input].name;
    if (s.op == Op::Const) o << " " << s.value;
    if (s.op == Op::Sum) o << axes(s.reduce);
    for (int a : s.args) o << " s" << a;
    o << "\n";
  }
  for (const IoTensor& t : outputs) o << "  out " << t.name << " = s" << t.stmt << "\n";
  return o.str();
}

namespace {

// A value of the body as the program sees it: a statement and how its dims map to
// atoms. Atom lists may name atoms that were later split or unified; norm() expands
// them through the rewrites (so copies never go stale).
struct Form {
  int stmt = -1;
  std::vector<int64_t> dims;
  std::vector<std::vector<int>> dim_atoms;
};

class Converter {
 public:
  explicit Converter(const Graph& body) : body_(body) {}

  Program run() {
    for (size_t i = 0; i < body_.inputs().size(); ++i) add_input(*body_.inputs()[i]);
    for (const NodePtr& n : body_.topo_order()) {
      if (n->kind() == NodeKind::Input || n->kind() == NodeKind::Constant) continue;
      require(n->kind() == NodeKind::Op, describe(*n) + ": an opaque operator cannot be fused");
      try {
        convert(*n);
      } catch (const Error& e) {
        throw Error(describe(*n) + ": " + e.what());
      }
    }
    for (size_t i = 0; i < body_.outputs().size(); ++i) {
      Form f = form(body_.outputs()[i]);
      IoTensor t;
      t.name = body_.output_names()[i];
      t.dtype = body_.outputs()[i].type().dtype;
      require(t.dtype == DType::Float32, "region output '" + t.name + "' is not float32");
      t.dims = f.dims;
      t.dim_atoms = f.dim_atoms;
      t.stmt = f.stmt;
      outputs_.push_back(t);
    }
    return finish();
  }

 private:
  const Graph& body_;
  std::vector<Atom> atoms_;
  std::vector<std::vector<int>> rewrite_;  // per atom: what replaced it (empty: still an atom)
  std::vector<Stmt> stmts_;
  std::vector<IoTensor> inputs_, outputs_;
  std::unordered_map<Value, Form, ValueHash> forms_;
  std::map<double, int> consts_;

  // --- atoms ------------------------------------------------------------------
  int new_atom(int64_t extent) {
    atoms_.push_back({"a" + std::to_string(atoms_.size()), extent});
    rewrite_.emplace_back();
    return static_cast<int>(atoms_.size()) - 1;
  }
  void expand_into(int a, std::vector<int>& out) const {
    if (rewrite_[a].empty()) {
      out.push_back(a);
      return;
    }
    for (int b : rewrite_[a]) expand_into(b, out);
  }
  std::vector<int> norm_list(const std::vector<int>& l) const {
    std::vector<int> out;
    for (int a : l) expand_into(a, out);
    return out;
  }
  std::vector<int> norm_set(const std::vector<int>& l) const {
    std::vector<int> out = norm_list(l);
    std::sort(out.begin(), out.end());
    require(std::adjacent_find(out.begin(), out.end()) == out.end(),
            "one value would be indexed twice by the same index (such as x @ x^T); not expressible");
    return out;
  }
  Form norm(Form f) const {
    for (auto& l : f.dim_atoms) l = norm_list(l);
    return f;
  }
  const std::vector<int> axes(int stmt) const { return norm_set(stmts_[stmt].axes); }

  // Splits `a` (major first) into atoms of extents e1 and extent/e1.
  void split(int a, int64_t e1) {
    int64_t e = atoms_[a].extent;
    require(e1 > 1 && e % e1 == 0 && e1 < e, "dims do not line up");
    int hi = new_atom(e1), lo = new_atom(e / e1);
    rewrite_[a] = {hi, lo};
  }
  void unify(int a, int b) {
    if (a == b) return;
    require(atoms_[a].extent == atoms_[b].extent, "dims do not line up");
    rewrite_[b] = {a};
  }

  // Makes two atom lists of one dim the same atoms (splitting where they cut differently).
  void align(const std::vector<int>& l1_in, const std::vector<int>& l2_in) {
    for (size_t i = 0;; ++i) {
      std::vector<int> l1 = norm_list(l1_in), l2 = norm_list(l2_in);
      if (i >= l1.size() || i >= l2.size()) {
        require(l1.size() == l2.size(), "dims do not line up");
        return;
      }
      int a = l1[i], b = l2[i];
      int64_t ea = atoms_[a].extent, eb = atoms_[b].extent;
      if (ea > eb) split(a, eb);
      else if (eb > ea) split(b, ea);
      l1 = norm_list(l1_in), l2 = norm_list(l2_in);
      unify(l1[i], l2[i]);
    }
  }

  // Regroups a sequence of atoms (major to minor) into `dims`.
  std::vector<std::vector<int>> regroup(const std::vector<int>& seq_in, const std::vector<int64_t>& dims) {
    std::vector<std::vector<int>> out(dims.size());
    size_t k = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      int64_t need = dims[d];
      while (need > 1) {
        std::vector<int> seq = norm_list(seq_in);
        require(k < seq.size(), "reshape does not line up");
        int a = seq[k];
        int64_t e = atoms_[a].extent;
        if (e > need) {
          require(e % need == 0, "reshape splits a dim unevenly");
          split(a, need);
          a = rewrite_[a][0];
          e = need;
        }
        require(need % e == 0, "reshape splits a dim unevenly");
        out[d].push_back(a);
        need /= e;
        ++k;
      }
    }
    require(k == norm_list(seq_in).size(), "reshape does not line up");
    return out;
  }

  // --- statements ---------------------------------------------------------------
  int add_stmt(Stmt s) {
    stmts_.push_back(std::move(s));
    return static_cast<int>(stmts_.size()) - 1;
  }
  int constant(double v) {
    auto it = consts_.find(v);
    if (it != consts_.end()) return it->second;
    Stmt s;
    s.op = Op::Const;
    s.value = v;
    return consts_[v] = add_stmt(s);
  }
  int elementwise(Op op, std::vector<int> args) {
    Stmt s;
    s.op = op;
    for (int a : args) {
      std::vector<int> ax = axes(a);
      s.axes.insert(s.axes.end(), ax.begin(), ax.end());
    }
    std::sort(s.axes.begin(), s.axes.end());
    s.axes.erase(std::unique(s.axes.begin(), s.axes.end()), s.axes.end());
    s.args = std::move(args);
    return add_stmt(s);
  }
  // Sum over `over`; atoms the value does not depend on multiply by their extent.
  int sum(int arg, const std::vector<int>& over_in) {
    std::vector<int> over = norm_list(over_in), ax = axes(arg);
    Stmt s;
    s.op = Op::Sum;
    s.args = {arg};
    int64_t factor = 1;
    for (int a : over) {
      if (std::find(ax.begin(), ax.end(), a) != ax.end()) s.reduce.push_back(a);
      else factor *= atoms_[a].extent;
    }
    std::sort(s.reduce.begin(), s.reduce.end());
    for (int x : ax)
      if (std::find(s.reduce.begin(), s.reduce.end(), x) == s.reduce.end()) s.axes.push_back(x);
    int r = s.reduce.empty() ? arg : add_stmt(s);
    if (factor != 1) r = elementwise(Op::Mul, {r, constant(static_cast<double>(factor))});
    return r;
  }

  // --- values ---------------------------------------------------------------------
  void add_input(const Node& in) {
    const TensorType& t = in.output_types()[0];
    require(is_static(t.shape), "region input '" + in.name() + "' has a dynamic shape");
    require(t.dtype == DType::Float32 || t.dtype == DType::Bool,
            "region input '" + in.name() + "' is " + std::string(dtype_name(t.dtype)));
    IoTensor io;
    io.name = in.name();
    io.dtype = t.dtype;
    io.dims = static_dims(t.shape);
    Stmt s;
    s.op = Op::Input;
    s.input = static_cast<int>(inputs_.size());
    for (int64_t d : io.dims) {
      std::vector<int> l;
      if (d > 1) {
        l.push_back(new_atom(d));
        s.axes.push_back(l.back());
      }
      io.dim_atoms.push_back(l);
    }
    io.stmt = add_stmt(s);
    forms_[in.output(0)] = Form{io.stmt, io.dims, io.dim_atoms};
    inputs_.push_back(io);
  }

  Form form(const Value& v) {
    auto it = forms_.find(v);
    if (it != forms_.end()) return norm(it->second);
    const Tensor* c = v.constant();
    require(c != nullptr, "value from outside the region");
    require(c->numel() == 1, "a constant tensor inside a region (constants other than scalars are inputs)");
    require(c->dtype() == DType::Float32 || c->dtype() == DType::Float64, "a non-float constant");
    Form f;
    f.stmt = constant(c->f64_at(0));
    f.dims = c->dims();
    f.dim_atoms.assign(f.dims.size(), {});
    return forms_[v] = f;
  }

  // Broadcast of several forms (numpy rules): the result's dims and atom lists.
  Form broadcast(const std::vector<Form>& fs) {
    size_t rank = 0;
    for (const Form& f : fs) rank = std::max(rank, f.dims.size());
    Form out;
    out.dims.assign(rank, 1);
    out.dim_atoms.assign(rank, {});
    for (size_t d = 0; d < rank; ++d) {
      const std::vector<int>* first = nullptr;
      for (const Form& f : fs) {
        size_t off = rank - f.dims.size();
        if (d < off || f.dims[d - off] == 1) continue;
        if (!first) {
          first = &f.dim_atoms[d - off];
          out.dims[d] = f.dims[d - off];
          continue;
        }
        require(f.dims[d - off] == out.dims[d], "operand dims do not broadcast");
        align(*first, f.dim_atoms[d - off]);
      }
      if (first) out.dim_atoms[d] = *first;
    }
    return norm(out);
  }

  void bind(const Node& n, const Form& f) { forms_[n.output(0)] = f; }
  Form with_stmt(Form f, int stmt) {
    f.stmt = stmt;
    return f;
  }

  Form elementwise_node(Op op, const Node& n) {
    std::vector<Form> fs;
    for (const Value& v : n.inputs()) fs.push_back(form(v));
    Form out = broadcast(fs);
    std::vector<int> args;
    for (const Form& f : fs) args.push_back(f.stmt);
    out.stmt = elementwise(op, args);
    return out;
  }

  std::vector<int> atoms_of_dims(const Form& f, const std::vector<int64_t>& dims) {
    std::vector<int> r;
    for (int64_t a : dims)
      for (int x : f.dim_atoms[static_cast<size_t>(a)]) r.push_back(x);
    return r;
  }
  std::vector<int64_t> norm_axes(std::vector<int64_t> ax, size_t rank) {
    for (int64_t& a : ax) {
      if (a < 0) a += static_cast<int64_t>(rank);
      require(a >= 0 && a < static_cast<int64_t>(rank), "axis out of range");
    }
    return ax;
  }
  std::vector<int64_t> const_ints(const Value& v) {
    const Tensor* t = v.constant();
    require(t != nullptr, "a shape or axes input that is not a constant");
    return t->to_i64();
  }
  double scalar_of(const Value& v) {
    const Tensor* t = v.constant();
    require(t != nullptr && t->numel() == 1, "needs a scalar constant");
    return t->f64_at(0);
  }

  // a: [..., m, k] times b: [..., k, n] (already padded to rank >= 2).
  Form matmul(Form a, Form b, bool drop_m, bool drop_n) {
    size_t ra = a.dims.size(), rb = b.dims.size();
    require(a.dims[ra - 1] == b.dims[rb - 2], "contraction dims differ");
    align(a.dim_atoms[ra - 1], b.dim_atoms[rb - 2]);
    a = norm(a), b = norm(b);
    Form ba, bb;
    ba.dims.assign(a.dims.begin(), a.dims.end() - 2);
    ba.dim_atoms.assign(a.dim_atoms.begin(), a.dim_atoms.end() - 2);
    bb.dims.assign(b.dims.begin(), b.dims.end() - 2);
    bb.dim_atoms.assign(b.dim_atoms.begin(), b.dim_atoms.end() - 2);
    Form out = broadcast({ba, bb});
    a = norm(a), b = norm(b);
    out.stmt = sum(elementwise(Op::Mul, {a.stmt, b.stmt}), a.dim_atoms[ra - 1]);
    if (!drop_m) out.dims.push_back(a.dims[ra - 2]), out.dim_atoms.push_back(a.dim_atoms[ra - 2]);
    if (!drop_n) out.dims.push_back(b.dims[rb - 1]), out.dim_atoms.push_back(b.dim_atoms[rb - 1]);
    out = norm(out);
    std::vector<int> flat;
    for (const auto& l : out.dim_atoms) flat.insert(flat.end(), l.begin(), l.end());
    norm_set(flat);  // throws on an atom used by two dims
    return out;
  }

  void convert(const Node& n) {
    const std::string& t = n.op_type();
    const Attributes& at = n.attrs();
    static const std::map<std::string, Op> binary = {{"Add", Op::Add}, {"Sub", Op::Sub}, {"Mul", Op::Mul},
                                                     {"Div", Op::Div}, {"Max", Op::Max}, {"Min", Op::Min}};
    static const std::map<std::string, Op> unary_ops = {{"Neg", Op::Neg},   {"Exp", Op::Exp},
                                                        {"Sqrt", Op::Sqrt}, {"Erf", Op::Erf},
                                                        {"Tanh", Op::Tanh}, {"Sigmoid", Op::Sigmoid},
                                                        {"Relu", Op::Relu}, {"Log", Op::Log}};
    for (const TensorType& ty : n.output_types())
      require(ty.dtype == DType::Float32, "not a float32 operator");
    if (auto it = binary.find(t); it != binary.end()) {
      require(n.inputs().size() == 2, "variadic form");
      bind(n, elementwise_node(it->second, n));
      return;
    }
    if (auto it = unary_ops.find(t); it != unary_ops.end()) {
      Form x = form(n.inputs()[0]);
      bind(n, with_stmt(x, elementwise(it->second, {x.stmt})));
      return;
    }
    if (t == "Where") {
      require(n.inputs()[0].type().dtype == DType::Bool, "condition is not bool");
      bind(n, elementwise_node(Op::Where, n));
      return;
    }
    if (t == "Identity" || (t == "Dropout" && n.num_outputs() == 1) ||
        (t == "Cast" && n.inputs()[0].type().dtype == DType::Float32)) {
      bind(n, form(n.inputs()[0]));
      return;
    }
    if (t == "Reciprocal") {
      Form x = form(n.inputs()[0]);
      bind(n, with_stmt(x, elementwise(Op::Div, {constant(1.0), x.stmt})));
      return;
    }
    if (t == "Pow") {
      Form x = form(n.inputs()[0]);
      require(n.inputs()[1].type().shape.size() <= x.dims.size(), "Pow exponent of higher rank");
      double e = scalar_of(n.inputs()[1]);
      int s;
      if (e == 1) s = x.stmt;
      else if (e == 2) s = elementwise(Op::Mul, {x.stmt, x.stmt});
      else if (e == 3) s = elementwise(Op::Mul, {elementwise(Op::Mul, {x.stmt, x.stmt}), x.stmt});
      else if (e == 0.5) s = elementwise(Op::Sqrt, {x.stmt});
      else if (e == -1) s = elementwise(Op::Div, {constant(1.0), x.stmt});
      else if (e == -0.5) s = elementwise(Op::Div, {constant(1.0), elementwise(Op::Sqrt, {x.stmt})});
      else throw Error("Pow with exponent " + std::to_string(e));
      bind(n, with_stmt(x, s));
      return;
    }
    if (t == "Gelu") {
      Form x = form(n.inputs()[0]);
      int xs = x.stmt, r;
      if (at.get_string("approximate", "none") == "tanh") {
        int cube = elementwise(Op::Mul, {elementwise(Op::Mul, {xs, xs}), xs});
        int inner = elementwise(Op::Add, {xs, elementwise(Op::Mul, {constant(0.044715), cube})});
        int th = elementwise(Op::Tanh, {elementwise(Op::Mul, {constant(std::sqrt(2.0 / M_PI)), inner})});
        r = elementwise(Op::Mul, {elementwise(Op::Mul, {constant(0.5), xs}), elementwise(Op::Add, {constant(1.0), th})});
      } else {
        int e = elementwise(Op::Erf, {elementwise(Op::Mul, {xs, constant(M_SQRT1_2)})});
        r = elementwise(Op::Mul, {elementwise(Op::Mul, {constant(0.5), xs}), elementwise(Op::Add, {constant(1.0), e})});
      }
      bind(n, with_stmt(x, r));
      return;
    }
    if (t == "Softmax") {
      Form x = form(n.inputs()[0]);
      int64_t axis = norm_axes({at.get_int("axis", -1)}, x.dims.size())[0];
      int e = elementwise(Op::Exp, {x.stmt});
      int s = sum(e, x.dim_atoms[static_cast<size_t>(axis)]);
      bind(n, with_stmt(x, elementwise(Op::Div, {e, s})));
      return;
    }
    if (t == "LayerNormalization") {
      require(n.num_outputs() == 1, "LayerNormalization's mean and inverse deviation outputs are used");
      Form x = form(n.inputs()[0]);
      int64_t axis = norm_axes({at.get_int("axis", -1)}, x.dims.size())[0];
      std::vector<int64_t> nd;
      int64_t count = 1;
      for (int64_t d = axis; d < static_cast<int64_t>(x.dims.size()); ++d) nd.push_back(d), count *= x.dims[d];
      std::vector<int> red = atoms_of_dims(x, nd);
      double inv = 1.0 / static_cast<double>(count);
      int mean = elementwise(Op::Mul, {sum(x.stmt, red), constant(inv)});
      int c = elementwise(Op::Sub, {x.stmt, mean});
      int var = elementwise(Op::Mul, {sum(elementwise(Op::Mul, {c, c}), red), constant(inv)});
      int rs = elementwise(Op::Sqrt, {elementwise(Op::Add, {var, constant(at.get_float("epsilon", 1e-5))})});
      Form y = with_stmt(x, elementwise(Op::Div, {c, rs}));
      Form sc = form(n.inputs()[1]);
      Form out = broadcast({y, sc});
      out.stmt = elementwise(Op::Mul, {y.stmt, sc.stmt});
      if (n.inputs().size() > 2 && n.inputs()[2].present()) {
        Form b = form(n.inputs()[2]);
        Form o2 = broadcast({out, b});
        o2.stmt = elementwise(Op::Add, {out.stmt, b.stmt});
        out = o2;
      }
      bind(n, out);
      return;
    }
    if (t == "ReduceMean" || t == "ReduceSum") {
      Form x = form(n.inputs()[0]);
      std::vector<int64_t> ax;
      if (n.inputs().size() > 1 && n.inputs()[1].present()) ax = const_ints(n.inputs()[1]);
      else ax = at.get_ints("axes", {});
      if (ax.empty()) {
        require(at.get_int("noop_with_empty_axes", 0) == 0, "a reduction over no axes");
        ax.resize(x.dims.size());
        std::iota(ax.begin(), ax.end(), 0);
      }
      ax = norm_axes(ax, x.dims.size());
      int64_t count = 1;
      for (int64_t a : ax) count *= x.dims[static_cast<size_t>(a)];
      int s = sum(x.stmt, atoms_of_dims(x, ax));
      if (t == "ReduceMean") s = elementwise(Op::Mul, {s, constant(1.0 / static_cast<double>(count))});
      Form f;
      f.stmt = s;
      bool keep = at.get_int("keepdims", 1) != 0;
      for (size_t d = 0; d < x.dims.size(); ++d) {
        bool reduced = std::find(ax.begin(), ax.end(), static_cast<int64_t>(d)) != ax.end();
        if (!reduced) f.dims.push_back(x.dims[d]), f.dim_atoms.push_back(x.dim_atoms[d]);
        else if (keep) f.dims.push_back(1), f.dim_atoms.push_back({});
      }
      bind(n, f);
      return;
    }
    if (t == "MatMul") {
      Form a = form(n.inputs()[0]), b = form(n.inputs()[1]);
      bool drop_m = a.dims.size() == 1, drop_n = b.dims.size() == 1;
      if (drop_m) a.dims.insert(a.dims.begin(), 1), a.dim_atoms.insert(a.dim_atoms.begin(), std::vector<int>{});
      if (drop_n) b.dims.push_back(1), b.dim_atoms.push_back({});
      bind(n, matmul(a, b, drop_m, drop_n));
      return;
    }
    if (t == "Gemm") {
      Form a = form(n.inputs()[0]), b = form(n.inputs()[1]);
      if (at.get_int("transA", 0)) std::swap(a.dims[0], a.dims[1]), std::swap(a.dim_atoms[0], a.dim_atoms[1]);
      if (at.get_int("transB", 0)) std::swap(b.dims[0], b.dims[1]), std::swap(b.dim_atoms[0], b.dim_atoms[1]);
      Form out = matmul(a, b, false, false);
      double alpha = at.get_float("alpha", 1.0), beta = at.get_float("beta", 1.0);
      if (alpha != 1.0) out.stmt = elementwise(Op::Mul, {out.stmt, constant(alpha)});
      if (n.inputs().size() > 2 && n.inputs()[2].present()) {
        Form c = form(n.inputs()[2]);
        Form r = broadcast({out, c});
        int cs = beta != 1.0 ? elementwise(Op::Mul, {c.stmt, constant(beta)}) : c.stmt;
        r.stmt = elementwise(Op::Add, {out.stmt, cs});
        out = r;
      }
      bind(n, out);
      return;
    }
    if (t == "Transpose") {
      Form x = form(n.inputs()[0]);
      std::vector<int64_t> perm = at.get_ints("perm", {});
      if (perm.empty())
        for (size_t i = x.dims.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
      Form f;
      f.stmt = x.stmt;
      for (int64_t p : perm) f.dims.push_back(x.dims[p]), f.dim_atoms.push_back(x.dim_atoms[p]);
      bind(n, f);
      return;
    }
    if (t == "Reshape" || t == "Flatten" || t == "Squeeze" || t == "Unsqueeze") {
      Form x = form(n.inputs()[0]);
      std::vector<int64_t> dims = static_dims(n.output_types()[0].shape);
      std::vector<int> seq;
      for (const auto& l : x.dim_atoms) seq.insert(seq.end(), l.begin(), l.end());
      Form f;
      f.dim_atoms = regroup(seq, dims);
      f.dims = dims;
      f.stmt = x.stmt;
      bind(n, norm(f));
      return;
    }
    if (t == "Expand") {
      Form x = form(n.inputs()[0]);
      std::vector<int64_t> dims = static_dims(n.output_types()[0].shape);
      Form f;
      f.stmt = x.stmt;
      f.dims = dims;
      f.dim_atoms.assign(dims.size(), {});
      size_t off = dims.size() - x.dims.size();
      for (size_t d = 0; d < dims.size(); ++d) {
        if (d >= off && x.dims[d - off] == dims[d]) f.dim_atoms[d] = x.dim_atoms[d - off];
        else if (dims[d] > 1) f.dim_atoms[d] = {new_atom(dims[d])};
      }
      bind(n, f);
      return;
    }
    throw Error(t + " is not an operator region programs express");
  }

  Program finish() {
    Program p;
    std::vector<int> remap(atoms_.size(), -1);
    auto use = [&](int a) {
      if (remap[a] < 0) {
        remap[a] = static_cast<int>(p.atoms.size());
        p.atoms.push_back({"a" + std::to_string(p.atoms.size()), atoms_[a].extent});
      }
      return remap[a];
    };
    auto map_list = [&](std::vector<int> l) {
      l = norm_list(l);
      for (int& a : l) a = use(a);
      return l;
    };
    auto map_set = [&](const std::vector<int>& l) {
      std::vector<int> s = norm_set(l);
      for (int& a : s) a = use(a);
      std::sort(s.begin(), s.end());
      return s;
    };
    for (IoTensor& t : inputs_)
      for (auto& l : t.dim_atoms) l = map_list(l);
    for (Stmt& s : stmts_) s.axes = map_set(s.axes), s.reduce = map_set(s.reduce);
    for (IoTensor& t : outputs_) {
      std::vector<int> flat;
      for (auto& l : t.dim_atoms) {
        l = norm_list(l);
        for (int& a : l) {
          require(remap[a] >= 0, "region output '" + t.name + "' is broadcast along a dim it does not compute");
          a = remap[a];
        }
        flat.insert(flat.end(), l.begin(), l.end());
      }
      std::sort(flat.begin(), flat.end());
      require(flat == stmts_[t.stmt].axes, "region output '" + t.name + "' does not map its dims one to one");
    }
    p.stmts = std::move(stmts_);
    p.inputs = std::move(inputs_);
    p.outputs = std::move(outputs_);
    return p;
  }
};

}  // namespace

Program from_body(const Graph& body) { return Converter(body).run(); }

}  // namespace isomer::mugraph
