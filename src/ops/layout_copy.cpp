// Operators that copy selected elements of their inputs: Concat, Split, Slice,
// Gather, Pad, Expand (the relabelling ones, Transpose, Reshape, Flatten, Squeeze,
// Unsqueeze, are in ops/layout.cpp).
//
// Each operator has a shape rule (symbolic dims pass through where the math
// allows) and one templated kernel `Op::run` that serves both the float semantics
// (on raw element bits, so every dtype is copied exactly) and the field and
// symbolic semantics (see ops/layout_kernels.h). In the field, integer operands
// (pads, indices, starts/ends) are read back from F_p as small signed integers:
// they must have magnitude below p/2, so INT64_MAX-style Slice sentinels have no
// field value.
//
// Properties: every entry is shape_only and linear in its data input 0. Concat is
// linear in every input and Split in its one data input; linear_in lists only
// input 0 for all of them. Pad is linear only when its fill value is 0.
#include <algorithm>
#include <map>
#include <numeric>

#include "ops/layout_common.h"

namespace isomer {
using namespace ops;

namespace {

// ---- Concat ------------------------------------------------------------------------

std::vector<TensorType> infer_concat(const InferContext& ctx) {
  TensorType out = ctx.in(0);
  const int64_t axis = axis_of(ctx.attrs, std::nullopt, out.rank(), "Concat");
  int64_t static_sum = 0;
  int dynamic = 0;
  Dim lone;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorType& t = ctx.in(i);
    require(t.dtype == out.dtype && t.rank() == out.rank(),
            "Concat input " + std::to_string(i) + " is " + to_string(t) + ", input 0 is " + to_string(ctx.in(0)));
    for (int64_t a = 0; a < out.rank(); ++a)
      if (a != axis)
        out.shape[a] = merge_dim(out.shape[a], t.shape[a],
                                 "Concat inputs " + to_string(ctx.in(0)) + " and " + to_string(t) +
                                     " differ outside axis " + std::to_string(axis));
    if (t.shape[axis].is_static()) {
      static_sum += t.shape[axis].value;
    } else {
      ++dynamic;
      lone = t.shape[axis];
    }
  }
  out.shape[axis] = dynamic == 0 ? Dim(static_sum) : dynamic == 1 && static_sum == 0 ? lone : Dim::unknown();
  return {out};
}

struct ConcatOp {
  static bool is_data(size_t) { return true; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const std::vector<int64_t>& d0 = a.dims[0];
    const int64_t axis = axis_of(a.attrs, std::nullopt, static_cast<int64_t>(d0.size()), "Concat");
    std::vector<const Array<T>*> parts;
    for (size_t i = 0; i < a.data.size(); ++i) {
      bool ok = a.dims[i].size() == d0.size();
      for (size_t k = 0; ok && k < d0.size(); ++k) ok = static_cast<int64_t>(k) == axis || a.dims[i][k] == d0[k];
      require(ok, "Concat inputs " + list(d0) + " and " + list(a.dims[i]) + " differ outside axis " +
                      std::to_string(axis));
      parts.push_back(&a.data[i]);
    }
    return {concat_arrays(parts, axis)};
  }
};


// ---- Split -------------------------------------------------------------------------

void check_split_sizes(const std::vector<int64_t>& sizes, const Dim& extent, size_t num_outputs) {
  require(num_outputs == 0 || sizes.size() == num_outputs, "Split sizes " + list(sizes) + " give " +
                                                               std::to_string(sizes.size()) + " outputs, " +
                                                               std::to_string(num_outputs) + " requested");
  require(!sizes.empty(), "Split needs at least one output");
  // Sizes that are negative, or add up past int64 or to another extent than the
  // axis's, break Split's definition: the node is refused, not kept opaque.
  int64_t sum = 0;
  for (int64_t s : sizes) {
    require_valid(s >= 0, "Split sizes " + list(sizes) + " contain a negative size");
    require_valid(!__builtin_add_overflow(sum, s, &sum), "Split sizes " + list(sizes) + " add up past int64");
  }
  require_valid(!extent.is_static() || sum == extent.value, "Split sizes " + list(sizes) + " do not add up to extent " +
                                                                std::to_string(extent.value));
}

std::vector<TensorType> infer_split(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const int64_t axis = axis_of(ctx.attrs, 0, x.rank(), "Split");
  const Dim extent = x.shape[axis];
  size_t n = ctx.num_outputs;
  std::optional<std::vector<int64_t>> sizes;
  if (ctx.has_input(1)) {
    std::optional<int64_t> len = operand_length(ctx, 1, "Split sizes");
    sizes = constant_ints(ctx, 1);
    if (sizes) {
      check_split_sizes(*sizes, extent, n);
      n = sizes->size();
    } else if (n == 0) {
      require(len.has_value(), "Split with dynamic sizes of unknown length needs the number of outputs");
      n = static_cast<size_t>(*len);
    }
  } else {
    require(n > 0, "Split without a split input needs the number of outputs");
    if (extent.is_static()) sizes = equal_split(extent.value, static_cast<int64_t>(n));
  }
  require(n > 0, "Split needs at least one output");
  std::vector<TensorType> out(n, x);
  for (size_t k = 0; k < n; ++k)
    out[k].shape[axis] = sizes ? Dim((*sizes)[k]) : n == 1 ? extent : Dim::unknown();
  return out;
}

struct SplitOp {
  static bool is_data(size_t i) { return i == 0; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const int64_t axis = axis_of(a.attrs, 0, x.rank(), "Split");
    std::vector<int64_t> sizes;
    if (a.has(1)) {
      sizes = a.ints[1];
      check_split_sizes(sizes, Dim(x.dims[axis]), a.num_outputs);
    } else {
      // The field evaluator does not know how many outputs the node has.
      require(a.num_outputs > 0, "Split without a split input: the number of outputs is not known here");
      sizes = equal_split(x.dims[axis], static_cast<int64_t>(a.num_outputs));
    }
    AxisTables tables = full_tables(x.dims);
    const int64_t stride = strides_of(x.dims)[axis];
    std::vector<Array<T>> out;
    int64_t offset = 0;
    for (int64_t s : sizes) {
      tables[axis] = axis_range(s, offset, 1, stride);
      out.push_back(gather_axes(x, tables));
      offset += s;
    }
    return out;
  }
};


// ---- Slice -------------------------------------------------------------------------

// Slicing a symbolic axis is known only when it takes the whole axis (forwards,
// or backwards with step -1) through sentinels no real extent can reach.
bool takes_whole_axis(int64_t start, int64_t end, int64_t step) {
  constexpr int64_t kHuge = int64_t{1} << 62;
  if (step == 1) return (start == 0 || start <= -kHuge) && end >= kHuge;
  if (step == -1) return (start == -1 || start >= kHuge) && end <= -kHuge;
  return false;
}

std::vector<int64_t> default_axes(size_t n) {
  std::vector<int64_t> axes(n);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

void check_slice_lengths(const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                         const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  require(ends.size() == starts.size() && axes.size() == starts.size() && steps.size() == starts.size(),
          "Slice starts " + list(starts) + ", ends " + list(ends) + ", axes " + list(axes) + " and steps " +
              list(steps) + " differ in length");
}

std::vector<TensorType> infer_slice(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  TensorType out = x;
  std::optional<int64_t> len = operand_length(ctx, 1, "Slice starts");
  operand_length(ctx, 2, "Slice ends");
  if (ctx.has_input(3)) operand_length(ctx, 3, "Slice axes");
  if (ctx.has_input(4)) operand_length(ctx, 4, "Slice steps");
  std::optional<std::vector<int64_t>> starts = constant_ints(ctx, 1), ends = constant_ints(ctx, 2);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) axes = constant_ints(ctx, 3);
  else if (len) axes = default_axes(static_cast<size_t>(*len));
  if (!axes) {  // which axes change is unknown
    out.shape = unknown_dims(x.rank());
    return {out};
  }
  std::vector<int64_t> ax = normalized_axes(*axes, x.rank(), "Slice");
  std::optional<std::vector<int64_t>> steps =
      ctx.has_input(4) ? constant_ints(ctx, 4) : std::optional(std::vector<int64_t>(ax.size(), 1));
  if (!starts || !ends || !steps) {
    for (int64_t a : ax) out.shape[a] = Dim::unknown();
    return {out};
  }
  check_slice_lengths(*starts, *ends, *axes, *steps);
  for (size_t i = 0; i < ax.size(); ++i) {
    const Dim& d = x.shape[ax[i]];
    const int64_t start = (*starts)[i], end = (*ends)[i], step = (*steps)[i];
    require(step != 0, "Slice step must not be 0");
    if (d.is_static()) out.shape[ax[i]] = slice_axis(start, end, step, d.value).count;
    else if (!takes_whole_axis(start, end, step)) out.shape[ax[i]] = Dim::unknown();
  }
  return {out};
}

struct SliceOp {
  static bool is_data(size_t i) { return i == 0; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const std::vector<int64_t>& starts = a.ints[1];
    const std::vector<int64_t> axes = a.has(3) ? a.ints[3] : default_axes(starts.size());
    const std::vector<int64_t> steps = a.has(4) ? a.ints[4] : std::vector<int64_t>(starts.size(), 1);
    check_slice_lengths(starts, a.ints[2], axes, steps);
    std::vector<int64_t> ax = normalized_axes(axes, x.rank(), "Slice");
    std::vector<int64_t> st = strides_of(x.dims);
    AxisTables tables = full_tables(x.dims);
    for (size_t i = 0; i < ax.size(); ++i) {
      AxisSlice s = slice_axis(starts[i], a.ints[2][i], steps[i], x.dims[ax[i]]);
      tables[ax[i]] = axis_range(s.count, s.start, s.step, st[ax[i]]);
    }
    return {gather_axes(x, tables)};
  }
};


// ---- Gather ------------------------------------------------------------------------

// An index out of range is an error ONNX states; known at import (a constant index into
// a static axis), the node is refused rather than kept opaque and written back.
void check_index(int64_t i, int64_t extent, bool at_import = false) {
  if (i >= -extent && i < extent) return;
  const std::string why =
      "Gather index " + std::to_string(i) + " is out of range for an axis of extent " + std::to_string(extent);
  if (at_import) throw InvalidNode(why);
  throw Error(why);
}

std::vector<TensorType> infer_gather(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const TensorType& idx = ctx.in(1);
  require(idx.dtype == DType::Int64 || idx.dtype == DType::Int32, "Gather indices must be int32 or int64");
  const int64_t axis = axis_of(ctx.attrs, 0, x.rank(), "Gather");
  if (std::optional<std::vector<int64_t>> v = constant_ints(ctx, 1); v && x.shape[axis].is_static())
    for (int64_t i : *v) check_index(i, x.shape[axis].value, /*at_import=*/true);
  TensorType out{x.dtype, Shape(x.shape.begin(), x.shape.begin() + axis)};
  out.shape.insert(out.shape.end(), idx.shape.begin(), idx.shape.end());
  out.shape.insert(out.shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  return {out};
}

struct GatherOp {
  static bool is_data(size_t i) { return i == 0; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const int64_t axis = axis_of(a.attrs, 0, x.rank(), "Gather");
    const int64_t extent = x.dims[axis], stride = strides_of(x.dims)[axis];
    // Gather over flattened indices is a per-axis table; the index dims go back after.
    AxisTables tables = full_tables(x.dims);
    tables[axis].clear();
    for (int64_t i : a.ints[1]) {
      check_index(i, extent);
      tables[axis].push_back((i < 0 ? i + extent : i) * stride);
    }
    Array<T> out = gather_axes(x, tables);
    out.dims.assign(x.dims.begin(), x.dims.begin() + axis);
    out.dims.insert(out.dims.end(), a.dims[1].begin(), a.dims[1].end());
    out.dims.insert(out.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
    return {out};
  }
};


// ---- Pad ---------------------------------------------------------------------------

std::string pad_mode(const Attributes& attrs) {
  std::string mode = attrs.get_string("mode", "constant");
  require(mode == "constant" || mode == "reflect" || mode == "edge", "Pad mode '" + mode + "' is not supported");
  return mode;
}

// Checks one axis of Pad and returns its output extent. An extent below 0 or past int64
// breaks Pad's definition: known at import (pads from Shape arithmetic that folds), the
// node is refused rather than kept opaque and written back.
int64_t padded_extent(int64_t extent, int64_t lo, int64_t hi, const std::string& mode) {
  int64_t n = 0;
  require_valid(!__builtin_add_overflow(extent, lo, &n) && !__builtin_add_overflow(n, hi, &n),
                "Pad of " + std::to_string(lo) + " and " + std::to_string(hi) + " makes an extent past int64");
  require_valid(n >= 0, "Pad of " + std::to_string(lo) + " and " + std::to_string(hi) + " removes more than extent " +
                            std::to_string(extent));
  if (mode == "edge") require(extent > 0 || (lo <= 0 && hi <= 0), "Pad mode 'edge' on an empty axis");
  if (mode == "reflect")
    require((lo <= 0 || lo < extent) && (hi <= 0 || hi < extent),
            "Pad mode 'reflect' needs pads below the extent " + std::to_string(extent));
  return n;
}

// Source offsets of one padded axis; -1 marks the fill value.
std::vector<int64_t> pad_table(int64_t extent, int64_t lo, int64_t hi, const std::string& mode, int64_t stride) {
  const int64_t n = padded_extent(extent, lo, hi, mode);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t o = 0; o < n; ++o) {
    int64_t i = o - lo;
    if (i < 0 || i >= extent) {
      if (mode == "constant") {
        t[o] = -1;
        continue;
      }
      if (mode == "edge") i = std::clamp<int64_t>(i, 0, extent - 1);
      else i = i < 0 ? -i : 2 * (extent - 1) - i;  // reflect, edge not repeated
    }
    t[o] = i * stride;
  }
  return t;
}

std::vector<TensorType> infer_pad(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const std::string mode = pad_mode(ctx.attrs);
  operand_length(ctx, 1, "Pad pads");
  if (ctx.has_input(2))
    require(ctx.in(2).dtype == x.dtype && num_elements(ctx.in(2).shape) == std::optional<int64_t>(1),
            "Pad constant_value must be one element of the data's type, got " + to_string(ctx.in(2)));
  TensorType out = x;
  std::optional<std::vector<int64_t>> pads = constant_ints(ctx, 1);
  if (!pads) {
    out.shape = unknown_dims(x.rank());
    return {out};
  }
  require(static_cast<int64_t>(pads->size()) == 2 * x.rank(),
          "Pad pads " + list(*pads) + " must have 2 * rank = " + std::to_string(2 * x.rank()) + " entries");
  for (int64_t a = 0; a < x.rank(); ++a) {
    const int64_t lo = (*pads)[a], hi = (*pads)[a + x.rank()];
    const Dim& d = x.shape[a];
    if (d.is_static()) out.shape[a] = padded_extent(d.value, lo, hi, mode);
    else if (lo != 0 || hi != 0) out.shape[a] = Dim::unknown();
  }
  return {out};
}

struct PadOp {
  static bool is_data(size_t i) { return i == 0 || i == 2; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    const std::string mode = pad_mode(a.attrs);
    const std::vector<int64_t>& pads = a.ints[1];
    const int64_t rank = x.rank();
    require(static_cast<int64_t>(pads.size()) == 2 * rank, "Pad pads " + list(pads) + " must have 2 * rank = " +
                                                               std::to_string(2 * rank) + " entries");
    std::vector<int64_t> st = strides_of(x.dims);
    // The output's size before any table: an empty output with an axis padded by 2^40
    // built that axis's table of 2^40 entries (the same in Expand below).
    std::vector<int64_t> out_dims(static_cast<size_t>(rank));
    for (int64_t k = 0; k < rank; ++k) out_dims[k] = padded_extent(x.dims[k], pads[k], pads[k + rank], mode);
    if (require_allocatable(out_dims, sizeof(T), "Pad output") == 0) return {Array<T>(out_dims)};
    AxisTables tables;
    for (int64_t k = 0; k < rank; ++k) tables.push_back(pad_table(x.dims[k], pads[k], pads[k + rank], mode, st[k]));
    const T fill = a.has(2) ? a.data[2].data.at(0) : T();
    return {gather_axes(x, tables, fill)};
  }
};


// ---- Expand ------------------------------------------------------------------------

std::vector<TensorType> infer_expand(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  std::optional<int64_t> len = operand_length(ctx, 1, "Expand shape");
  if (std::optional<std::vector<int64_t>> shape = constant_ints(ctx, 1)) {
    for (int64_t v : *shape) require_valid(v >= 0, "Expand shape " + list(*shape) + " has a negative dimension");
    try {
      return {{x.dtype, broadcast_shapes(x.shape, make_shape(*shape))}};
    } catch (const Error& e) {  // extents that do not broadcast: no Expand ONNX defines
      throw InvalidNode("Expand shape " + list(*shape) + ": " + e.what());
    }
  }
  require(len.has_value(), "Expand with a dynamic shape of unknown length has unknown rank");
  // Where the input's extent is static and not 1 the output keeps it.
  const int64_t rank = std::max(x.rank(), *len);
  Shape out = unknown_dims(rank);
  for (int64_t a = rank - x.rank(); a < rank; ++a) {
    const Dim& d = x.shape[a - (rank - x.rank())];
    if (d.is_static() && d.value != 1) out[a] = d;
  }
  return {{x.dtype, out}};
}

struct ExpandOp {
  static bool is_data(size_t i) { return i == 0; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    std::vector<int64_t> out_dims = broadcast_dims(x.dims, a.ints[1]);
    if (require_allocatable(out_dims, sizeof(T), "Expand output") == 0) return {Array<T>(out_dims)};
    std::vector<int64_t> st = broadcast_strides(x.dims, out_dims);
    AxisTables tables;
    for (size_t k = 0; k < out_dims.size(); ++k) tables.push_back(axis_range(out_dims[k], 0, 1, st[k]));
    return {gather_axes(x, tables)};
  }
};

}  // namespace

OpDef def_Concat() {
  OpDef d = layout_op("Concat", 1, -1, 11);
  d.attributes = {{"axis", "int"}};
  d.infer = infer_concat;
  set_semantics<ConcatOp>(d);
  d.onnx_import = import_concat;
  d.canonical_attrs = canonical_axis_of_input0<0>;
  d.lower = Lowering::Concat;
  return d;
}

OpDef def_Split() {
  OpDef d = layout_op("Split", 1, 2, 13);
  d.attributes = {{"axis", "int"}};
  d.infer = infer_split;
  set_semantics<SplitOp>(d);
  d.onnx_import = import_split;
  d.onnx_export = export_split;
  d.canonical_attrs = canonical_axis_of_input0<0>;
  d.lower = Lowering::Split;
  return d;
}

OpDef def_Slice() {
  OpDef d = layout_op("Slice", 3, 5, 11);
  d.infer = infer_slice;
  set_semantics<SliceOp>(d);
  d.onnx_import = import_slice;
  d.onnx_export = export_slice;
  d.lower = Lowering::Slice;
  return d;
}

OpDef def_Gather() {
  // Gather-1 is Gather-11 without negative axes and indices: the same operator on
  // every model it accepts, and written back with a non-negative axis.
  OpDef d = layout_op("Gather", 2, 2, 1);
  d.attributes = {{"axis", "int"}};
  d.infer = infer_gather;
  set_semantics<GatherOp>(d);
  d.canonical_attrs = canonical_axis_of_input0<0>;
  d.lower = Lowering::Gather;
  return d;
}

OpDef def_Pad() {
  OpDef d = layout_op("Pad", 2, 3, 11);
  d.attributes = {{"mode", "string"}};
  d.infer = infer_pad;
  set_semantics<PadOp>(d);
  d.onnx_import = import_pad;
  d.onnx_export = export_pad;
  d.lower = Lowering::Pad;
  return d;
}

OpDef def_Expand() {
  OpDef d = layout_op("Expand", 2, 2, 8);
  d.infer = infer_expand;
  set_semantics<ExpandOp>(d);
  d.lower = Lowering::Expand;
  return d;
}

namespace ops {

// ONNX Slice on one axis: negative starts/ends count from the end, then both are
// clamped ([0, d] for positive steps, [0, d-1] / [-1, d-1] for negative ones), so
// INT64_MAX / INT64_MIN sentinels mean "to the end" / "to the beginning".
AxisSlice slice_axis(int64_t start, int64_t end, int64_t step, int64_t extent) {
  require(step != 0, "Slice step must not be 0");
  if (start < 0) start += extent;  // no overflow: extent >= 0
  if (end < 0) end += extent;
  AxisSlice s;
  s.step = step;
  if (step > 0) {
    s.start = std::clamp<int64_t>(start, 0, extent);
    end = std::clamp<int64_t>(end, 0, extent);
    s.count = end > s.start ? 1 + (end - s.start - 1) / step : 0;
  } else if (extent > 0) {
    s.start = std::clamp<int64_t>(start, 0, extent - 1);
    end = std::clamp<int64_t>(end, -1, extent - 1);
    const int64_t stride = step == INT64_MIN ? INT64_MAX : -step;
    s.count = s.start > end ? 1 + (s.start - end - 1) / stride : 0;
  }
  return s;
}

}  // namespace ops
}  // namespace isomer
