// Operators that place elements by position, as exporters write them: Tile
// (repeat a tensor along each axis), Trilu (keep a triangle of each matrix: causal
// masks), GatherElements (take along an axis, index per element), GatherND (read
// slices at index tuples: torch's advanced indexing) and ScatterND (write slices at
// index tuples). Each is one kernel over the element type (see
// ops/layout_kernels.h): raw element bits for the float semantics, Fp and Sym for
// the field and symbolic ones; all are linear in their data.
#include <algorithm>

#include "ir/invalid_node.h"
#include "ir/shape_overflow.h"
#include "ops/layout_common.h"

namespace isomer {
using namespace ops;

namespace {

int64_t checked_index(int64_t i, int64_t extent, const char* op) {
  require(i >= -extent && i < extent, std::string(op) + " index " + std::to_string(i) +
                                          " is out of range for an axis of extent " + std::to_string(extent));
  return i < 0 ? i + extent : i;
}

// ---- Tile --------------------------------------------------------------------------

std::vector<TensorType> infer_tile(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  std::optional<int64_t> len = operand_length(ctx, 1, "Tile repeats");
  require(!len || *len == x.rank(), "Tile repeats has " + std::to_string(len.value_or(0)) +
                                        " values for an input of rank " + std::to_string(x.rank()));
  std::optional<std::vector<int64_t>> reps = constant_ints(ctx, 1);
  Shape out = unknown_dims(x.rank());
  for (int64_t a = 0; a < x.rank(); ++a) {
    if (!reps) continue;
    const int64_t r = (*reps)[a];
    require_valid(r >= 0, "Tile repeats has a negative value, " + std::to_string(r) + " for axis " + std::to_string(a));
    int64_t extent = 0;
    if (x.shape[a].is_static())
      if (__builtin_mul_overflow(x.shape[a].value, r, &extent))  // a bad model, never one to keep opaque
        throw ShapeOverflow("Tile repeats " + to_string(*reps) + " make an extent past int64 (" +
                            std::to_string(x.shape[a].value) + " x " + std::to_string(r) + ")");
    if (x.shape[a].is_static()) out[a] = extent;
    else if (r == 1) out[a] = x.shape[a];
    else if (r == 0) out[a] = 0;
  }
  return {{x.dtype, out}};
}

struct TileOp {
  static bool is_data(size_t i) { return i == 0; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const std::vector<int64_t>& reps = a.ints[1];
    require(static_cast<int64_t>(reps.size()) == x.rank(), "Tile repeats does not match the input's rank");
    const std::vector<int64_t> st = strides_of(x.dims);
    // The output's size first: repeats of 2^63 over an empty axis looped 2^63 times, and
    // over a non-empty one grew the index table until memory ran out.
    std::vector<int64_t> out_dims(x.dims.size());
    for (int64_t k = 0; k < x.rank(); ++k) {
      require(reps[k] >= 0, "Tile repeats has a negative value");
      require(!__builtin_mul_overflow(x.dims[k], reps[k], &out_dims[k]), "Tile repeats make an extent past int64");
    }
    if (require_allocatable(out_dims, sizeof(T), "Tile output") == 0) return {Array<T>(out_dims)};
    AxisTables tables;
    for (int64_t k = 0; k < x.rank(); ++k) {
      std::vector<int64_t> t;
      t.reserve(static_cast<size_t>(out_dims[k]));
      for (int64_t r = 0; r < reps[k]; ++r)
        for (int64_t i = 0; i < x.dims[k]; ++i) t.push_back(i * st[k]);
      tables.push_back(std::move(t));
    }
    return {gather_axes(x, tables)};
  }
};

// ---- Trilu -------------------------------------------------------------------------

std::vector<TensorType> infer_trilu(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require(x.rank() >= 2, "Trilu input must have rank >= 2, got " + to_string(x.shape));
  if (ctx.has_input(1)) {
    const TensorType& k = ctx.in(1);
    require(k.dtype == DType::Int64 && (k.rank() == 0 || num_elements(k.shape) == std::optional<int64_t>(1)),
            "Trilu k must be an int64 scalar");
  }
  return {x};
}

struct TriluOp {
  static bool is_data(size_t i) { return i == 0; }
  // upper: keep column j of row i where j - i >= k; lower: where j - i <= k.
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    Array<T> y = a.data[0];
    const int64_t k = a.has(1) ? a.ints[1].at(0) : 0;
    const bool upper = a.attrs.get_int("upper", 1) != 0;
    const int64_t rows = y.dims[y.dims.size() - 2], cols = y.dims.back();
    const int64_t mats = rows * cols != 0 ? y.numel() / (rows * cols) : 0;
    for (int64_t m = 0; m < mats; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          if (upper ? j - i < k : j - i > k) y.data[(m * rows + i) * cols + j] = T();
    return {y};
  }
};

// ---- GatherElements ----------------------------------------------------------------

std::vector<TensorType> infer_gather_elements(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &idx = ctx.in(1);
  require(idx.dtype == DType::Int64 || idx.dtype == DType::Int32, "GatherElements indices must be int64 or int32");
  require(idx.rank() == x.rank(), "GatherElements indices " + to_string(idx.shape) + " and data " +
                                      to_string(x.shape) + " differ in rank");
  const int64_t axis = axis_of(ctx.attrs, 0, x.rank(), "GatherElements");
  require_constant_indices(ctx, 1, [&](size_t) { return static_extent(x.shape[axis]); }, "GatherElements");
  return {{x.dtype, idx.shape}};
}

struct GatherElementsOp {
  static bool is_data(size_t i) { return i == 0; }
  // out[i_0, .., i_axis, ..] = x[i_0, .., index[i_0, .., i_axis, ..], ..]
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const int64_t axis = axis_of(a.attrs, 0, x.rank(), "GatherElements");
    const std::vector<int64_t>& idx_dims = a.dims[1];
    for (int64_t d = 0; d < x.rank(); ++d)
      require(d == axis || idx_dims[d] <= x.dims[d], "GatherElements indices " + to_string(idx_dims) +
                                                         " exceed the data " + to_string(x.dims));
    Array<T> out(idx_dims);
    const std::vector<int64_t> xs = strides_of(x.dims);
    // Walk the index tensor's positions; the data offset of the non-axis coordinates
    // follows the data's own strides.
    std::vector<int64_t> own = strides_of(idx_dims);
    for (int64_t n = 0; n < out.numel(); ++n) {
      int64_t rem = n, off = 0;
      for (int64_t d = 0; d < x.rank(); ++d) {
        const int64_t c = own[d] ? rem / own[d] : 0;
        rem -= c * own[d];
        off += d == axis ? checked_index(a.ints[1][n], x.dims[axis], "GatherElements") * xs[d] : c * xs[d];
      }
      out.data[n] = x.data[off];
    }
    return {out};
  }
};

// ---- GatherND ----------------------------------------------------------------------

// The first batch_dims axes of data and indices are shared; the last axis of the
// indices holds tuples of k coordinates into the data's next k axes; each tuple
// reads the slice of the remaining axes: out = indices[:-1] + data[batch_dims + k:].
std::vector<TensorType> infer_gather_nd(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &idx = ctx.in(1);
  require(idx.dtype == DType::Int64, "GatherND indices must be int64");
  require(idx.rank() >= 1 && x.rank() >= 1, "GatherND data and indices must have rank >= 1");
  const int64_t b = ctx.attrs.get_int("batch_dims", 0);
  require_valid(b >= 0 && b < std::min(x.rank(), idx.rank()),
                "GatherND batch_dims " + std::to_string(b) + " must be below both ranks (data " + to_string(x.shape) +
              ", indices " + to_string(idx.shape) + ")");
  const Dim& k = idx.shape.back();
  require(k.is_static(), "GatherND indices " + to_string(idx.shape) + " need a known last axis (the tuple length)");
  require(k.value >= 1 && b + k.value <= x.rank(), "GatherND index tuples of length " + std::to_string(k.value) +
                                                       " do not fit the data " + to_string(x.shape) +
                                                       " after " + std::to_string(b) + " batch axes");
  for (int64_t d = 0; d < b; ++d)
    require(!x.shape[d].is_static() || !idx.shape[d].is_static() || x.shape[d].value == idx.shape[d].value,
            "GatherND batch axis " + std::to_string(d) + " differs between data " + to_string(x.shape) +
                " and indices " + to_string(idx.shape));
  require_constant_indices(ctx, 1, [&](size_t n) { return static_extent(x.shape[b + n % k.value]); }, "GatherND");
  Shape out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), x.shape.begin() + b + k.value, x.shape.end());
  return {{x.dtype, out}};
}

struct GatherNDOp {
  static bool is_data(size_t i) { return i == 0; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const std::vector<int64_t>& id = a.dims[1];
    const int64_t b = a.attrs.get_int("batch_dims", 0), k = id.empty() ? 0 : id.back();
    require(k >= 1 && b >= 0 && b + k <= x.rank() && b < static_cast<int64_t>(id.size()),
            "GatherND indices " + to_string(id) + " do not fit the data " + to_string(x.dims));
    int64_t batches = 1, tuples = 1, slice = 1;
    for (int64_t d = 0; d < b; ++d) {
      require(id[d] == x.dims[d], "GatherND batch axes differ between data and indices");
      batches *= x.dims[d];
    }
    for (size_t d = static_cast<size_t>(b); d + 1 < id.size(); ++d) tuples *= id[d];
    for (int64_t d = b + k; d < x.rank(); ++d) slice *= x.dims[d];
    std::vector<int64_t> out_dims(id.begin(), id.end() - 1);
    out_dims.insert(out_dims.end(), x.dims.begin() + b + k, x.dims.end());
    Array<T> out(out_dims);
    const std::vector<int64_t> st = strides_of(x.dims);
    const int64_t batch_stride = b > 0 ? st[b - 1] : x.numel();
    for (int64_t bi = 0; bi < batches; ++bi)
      for (int64_t t = 0; t < tuples; ++t) {
        const int64_t tuple = bi * tuples + t;
        int64_t off = bi * batch_stride;
        for (int64_t d = 0; d < k; ++d)
          off += checked_index(a.ints[1][tuple * k + d], x.dims[b + d], "GatherND") * st[b + d];
        std::copy_n(x.data.begin() + off, slice, out.data.begin() + tuple * slice);
      }
    return {out};
  }
};

// ---- ScatterND ---------------------------------------------------------------------

std::vector<TensorType> infer_scatter_nd(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &idx = ctx.in(1), &upd = ctx.in(2);
  require(idx.dtype == DType::Int64, "ScatterND indices must be int64");
  require(upd.dtype == x.dtype, "ScatterND updates have another type than the data");
  require(idx.rank() >= 1, "ScatterND indices must have rank >= 1");
  const std::string r = ctx.attrs.get_string("reduction", "none");
  require(r == "none" || r == "add" || r == "mul" || r == "max" || r == "min", "ScatterND reduction '" + r + "' is unknown");
  const Dim& k = idx.shape.back();
  if (k.is_static()) {
    require(k.value <= x.rank(), "ScatterND index tuples are longer than the data's rank");
    require(upd.rank() == idx.rank() - 1 + x.rank() - k.value,
            "ScatterND updates " + to_string(upd.shape) + " do not match indices " + to_string(idx.shape) +
                " and data " + to_string(x.shape));
    // Index value k addresses axis k % (tuple length) of the data.
    require_constant_indices(ctx, 1, [&](size_t n) { return k.value ? static_extent(x.shape[n % k.value]) : std::nullopt; },
                             "ScatterND");
  }
  return {x};
}

template <class T>
T scatter_combine(const std::string& r, T old, T v) {
  if (r == "none") return v;
  if constexpr (std::is_same_v<T, double> || std::is_same_v<T, Fp> || std::is_same_v<T, Sym>) {
    if (r == "add") return old + v;
    if (r == "mul") return old * v;
    if constexpr (!std::is_same_v<T, Fp>) return r == "max" ? select_gt(v, old, v, old) : select_gt(old, v, v, old);
  } else if constexpr (std::is_same_v<T, int64_t>) {  // max and min on keys (eval_scatter_nd)
    if (r == "add") return wrap_add(old, v);
    if (r == "mul") return wrap_mul(old, v);
    return r == "max" ? std::max(old, v) : std::min(old, v);
  }
  throw Error("ScatterND reduction '" + r + "' has no semantics on these elements");
}

struct ScatterNDOp {
  static bool is_data(size_t i) { return i != 1; }
  // Copies the data, then for each index tuple (the last axis of `indices`)
  // combines the slice of updates into the slice of data it names, in order.
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    Array<T> y = a.data[0];
    const Array<T>& upd = a.data[2];
    const std::vector<int64_t>& idx_dims = a.dims[1];
    const int64_t k = idx_dims.back(), tuples = k ? static_cast<int64_t>(a.ints[1].size()) / k : 0;
    require(k <= y.rank(), "ScatterND index tuples are longer than the data's rank");
    int64_t slice = 1;
    for (int64_t d = k; d < y.rank(); ++d) slice *= y.dims[d];
    require(upd.numel() == tuples * slice, "ScatterND updates do not match the indices and data");
    const std::vector<int64_t> st = strides_of(y.dims);
    const std::string r = a.attrs.get_string("reduction", "none");
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t off = 0;
      for (int64_t d = 0; d < k; ++d) off += checked_index(a.ints[1][t * k + d], y.dims[d], "ScatterND") * st[d];
      for (int64_t i = 0; i < slice; ++i) y.data[off + i] = scatter_combine(r, y.data[off + i], upd.data[t * slice + i]);
    }
    return {y};
  }
};

// Reductions other than none combine values: they run on doubles, or exactly on int64
// (max and min on keys, where a uint64 orders as unsigned), not raw bits.
std::vector<Tensor> eval_scatter_nd(const EvalContext& ctx) {
  const std::string r = ctx.attrs.get_string("reduction", "none");
  if (r == "none") return eval_layout<ScatterNDOp>(ctx);
  const DType t = ctx.in(0).dtype();
  if (!is_float(t)) {
    const bool keys = r == "max" || r == "min";
    auto load = [&](const Tensor& x) { return keys ? ordered_i64(x) : i64(x); };
    LayoutArgs<int64_t> args{ctx.attrs, {load(ctx.in(0)), {}, load(ctx.in(2))}, {{}, ints_of(ctx.in(1)), {}},
                             {ctx.in(0).dims(), ctx.in(1).dims(), ctx.in(2).dims()}, {true, true, true}, 1};
    Array<int64_t> y = ScatterNDOp::run(args)[0];
    return {keys ? tensor_of_keys(t, std::move(y)) : tensor(t, y)};
  }
  LayoutArgs<double> args{ctx.attrs, {f64(ctx.in(0)), {}, f64(ctx.in(2))}, {{}, ints_of(ctx.in(1)), {}},
                          {ctx.in(0).dims(), ctx.in(1).dims(), ctx.in(2).dims()}, {true, true, true}, 1};
  return {tensor(ctx.in(0).dtype(), ScatterNDOp::run(args)[0])};
}

}  // namespace

OpDef def_Tile() {
  OpDef d = layout_op("Tile", 2, 2, 6);
  d.infer = infer_tile;
  set_semantics<TileOp>(d);
  d.lower = Lowering::Tile;
  return d;
}

OpDef def_Trilu() {
  OpDef d = layout_op("Trilu", 1, 2, 14);
  d.attributes = {{"upper", "int"}};
  d.props.shape_only = false;  // it zeroes elements
  d.infer = infer_trilu;
  set_semantics<TriluOp>(d);
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "upper", int64_t{1});
    return a;
  };
  d.lower = Lowering::Trilu;
  return d;
}

OpDef def_GatherElements() {
  OpDef d = layout_op("GatherElements", 2, 2, 11);
  d.attributes = {{"axis", "int"}};
  d.infer = infer_gather_elements;
  set_semantics<GatherElementsOp>(d);
  d.canonical_attrs = canonical_axis_of_input0<0>;
  d.lower = Lowering::GatherElements;
  return d;
}

OpDef def_GatherND() {
  OpDef d = layout_op("GatherND", 2, 2, 11);
  d.attributes = {{"batch_dims", "int"}};
  d.infer = infer_gather_nd;
  set_semantics<GatherNDOp>(d);
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "batch_dims", int64_t{0});
    return a;
  };
  d.lower = Lowering::GatherND;
  return d;
}

OpDef def_ScatterND() {
  OpDef d = layout_op("ScatterND", 3, 3, 11);
  d.attributes = {{"reduction", "string"}};
  d.props.shape_only = false;
  d.props.linear_in = {};
  d.infer = infer_scatter_nd;
  set_semantics<ScatterNDOp>(d);
  d.eval = eval_scatter_nd;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "reduction", std::string("none"));
    return a;
  };
  d.lower = Lowering::ScatterND;
  return d;
}

}  // namespace isomer
