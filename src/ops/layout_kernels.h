#pragma once
// Kernels for operators that move data without computing (ops/layout.cpp,
// ops/shape.cpp). Each kernel is a template over the element type T and only
// copies elements, so one kernel serves both semantics:
//  - float semantics run it on the tensor's raw element bits (T = an unsigned
//    integer of the element's size), which keeps every dtype bit-exact (NaN
//    payloads, -0.0, float16, bool, uint64 ...);
//  - field semantics run it on Fp, symbolic semantics (eval/sym.h) on Sym.
// An operator states its semantics once as `template <class T> run(const
// LayoutArgs<T>&)`; eval_layout / field_layout adapt it to the two hooks. Operators
// that only relabel dims state `view_dims` instead (eval_view / field_view).
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "eval/sym.h"
#include "ir/invalid_node.h"
#include "ops/kernels.h"

namespace isomer::ops {

// For each output axis, the source offset (already multiplied by the input's
// stride) of each index along that axis; a negative entry means "fill value".
using AxisTables = std::vector<std::vector<int64_t>>;

// Table of `count` offsets start, start+step, ... along an axis of stride `stride`.
inline std::vector<int64_t> axis_range(int64_t count, int64_t start, int64_t step, int64_t stride) {
  std::vector<int64_t> t(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) t[i] = (start + i * step) * stride;
  return t;
}

// Identity tables: every axis of `dims` taken whole.
inline AxisTables full_tables(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st = strides_of(dims);
  AxisTables t;
  for (size_t a = 0; a < dims.size(); ++a) t.push_back(axis_range(dims[a], 0, 1, st[a]));
  return t;
}

// out[o_0, ..., o_k] = in[sum_a tables[a][o_a]], or `fill` where any entry is
// negative. Output dims are the table lengths. Transpose, Slice, Split, Pad,
// Expand and Gather are all this kernel with different tables.
template <class T>
Array<T> gather_axes(const Array<T>& in, const AxisTables& tables, T fill = T()) {
  std::vector<int64_t> dims;
  for (const auto& t : tables) dims.push_back(static_cast<int64_t>(t.size()));
  Array<T> out(dims);
  if (out.data.empty()) return out;
  if (tables.empty()) {  // scalar
    out.data[0] = in.data[0];
    return out;
  }
  const int64_t rank = static_cast<int64_t>(tables.size());
  const std::vector<int64_t>& last = tables.back();
  std::vector<int64_t> idx(rank, 0);
  size_t n = 0;
  while (true) {
    int64_t base = 0;
    bool filled = false;
    for (int64_t a = 0; a + 1 < rank; ++a) {
      int64_t off = tables[a][idx[a]];
      if (off < 0) filled = true;
      base += off;
    }
    for (int64_t off : last) out.data[n++] = (filled || off < 0) ? fill : in.data[base + off];
    int64_t a = rank - 2;
    for (; a >= 0; --a) {
      if (++idx[a] < dims[a]) break;
      idx[a] = 0;
    }
    if (a < 0) break;
  }
  return out;
}

// Concatenation of arrays of equal rank along `axis` (other dims already checked).
template <class T>
Array<T> concat_arrays(const std::vector<const Array<T>*>& parts, int64_t axis) {
  std::vector<int64_t> dims = parts[0]->dims;
  dims[axis] = 0;
  for (const Array<T>* p : parts) dims[axis] += p->dims[axis];
  Array<T> out(dims);
  int64_t outer = 1;
  for (int64_t a = 0; a < axis; ++a) outer *= dims[a];
  size_t n = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const Array<T>* p : parts) {
      const int64_t block = p->numel() / std::max<int64_t>(outer, 1);
      for (int64_t i = 0; i < block; ++i) out.data[n++] = p->data[o * block + i];
    }
  }
  return out;
}

// ---- raw element bits ---------------------------------------------------------------

struct Bits128 {
  uint64_t lo = 0, hi = 0;
};

// Calls f(U{}) with U an unsigned type of dtype's element size.
template <class F>
auto with_raw_type(DType dtype, F&& f) {
  switch (dtype_size(dtype)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16: return f(Bits128{});
    default: throw Error("cannot move elements of type " + std::string(dtype_name(dtype)));
  }
}

template <class U>
Array<U> raw_array(const Tensor& t) {
  Array<U> a;
  a.dims = t.dims();
  a.data.resize(static_cast<size_t>(t.numel()));
  if (t.byte_size()) std::memcpy(a.data.data(), t.bytes().data(), t.byte_size());
  return a;
}

template <class U>
Tensor raw_tensor(DType dtype, const Array<U>& a) {
  std::string bytes(a.data.size() * sizeof(U), '\0');
  if (!bytes.empty()) std::memcpy(bytes.data(), a.data.data(), bytes.size());
  return Tensor(dtype, a.dims, std::move(bytes));
}

// Field values read back as integers: shape operands and indices are small
// integers, so p - k is read as -k (symmetric range). Values of magnitude >= p/2
// (e.g. INT64_MAX sentinels) cannot be represented in the field at all.
inline int64_t signed_value(Fp x) {
  uint64_t v = x.value();
  return v <= Fp::kP / 2 ? static_cast<int64_t>(v) : -static_cast<int64_t>(Fp::kP - v);
}

inline std::vector<int64_t> field_ints(const FieldArray& a) {
  std::vector<int64_t> out;
  out.reserve(a.data.size());
  for (Fp x : a.data) out.push_back(signed_value(x));
  return out;
}

// Integer operands of either exact semantics.
inline std::vector<int64_t> exact_ints(const FieldArray& a) { return field_ints(a); }
inline std::vector<int64_t> exact_ints(const SymArray& a) { return sym_ints(a); }

// ---- adapters ----------------------------------------------------------------------

// What a layout kernel sees, for either semantics. Data inputs (those of the
// data's element type) are arrays of T; integer operands (shapes, axes, indices)
// are also given as int64 values. An omitted optional input has present = false.
template <class T>
struct LayoutArgs {
  const Attributes& attrs;
  std::vector<Array<T>> data;                  // data inputs (empty array for others)
  std::vector<std::vector<int64_t>> ints;      // integer operands (empty for others)
  std::vector<std::vector<int64_t>> dims;      // dims of every input
  std::vector<bool> present;
  size_t num_outputs = 0;                      // 0 = not known (field semantics)

  bool has(size_t i) const { return i < present.size() && present[i]; }
};

// Float semantics: Op::is_data(i) tells which inputs carry the data type; the
// kernel runs on their raw bits; outputs have input 0's dtype.
template <class Op>
std::vector<Tensor> eval_layout(const EvalContext& ctx) {
  const DType dtype = ctx.in(0).dtype();
  return with_raw_type(dtype, [&](auto tag) {
    using U = decltype(tag);
    LayoutArgs<U> args{ctx.attrs, {}, {}, {}, {}, ctx.num_outputs};
    for (size_t i = 0; i < ctx.inputs.size(); ++i) {
      const bool present = ctx.has_input(i);
      args.present.push_back(present);
      args.dims.push_back(present ? ctx.in(i).dims() : std::vector<int64_t>{});
      args.data.push_back(present && Op::is_data(i) ? raw_array<U>(ctx.in(i)) : Array<U>{});
      args.ints.push_back(present && !Op::is_data(i) ? ints_of(ctx.in(i)) : std::vector<int64_t>{});
    }
    std::vector<Tensor> out;
    for (const Array<U>& a : Op::run(args)) out.push_back(raw_tensor(dtype, a));
    return out;
  });
}

// Field (T = Fp) and symbolic (T = Sym) semantics from the same Op::run. An
// omitted optional input reaches those evaluators as a default Array (no dims, no data).
template <class Op, class T>
std::vector<Array<T>> exact_layout(const Attributes& attrs, std::span<const Array<T>> in) {
  LayoutArgs<T> args{attrs, {}, {}, {}, {}, 0};
  for (size_t i = 0; i < in.size(); ++i) {
    const bool present = !(in[i].dims.empty() && in[i].data.empty());
    args.present.push_back(present);
    args.dims.push_back(in[i].dims);
    args.data.push_back(Op::is_data(i) ? in[i] : Array<T>{});
    args.ints.push_back(present && !Op::is_data(i) ? exact_ints(in[i]) : std::vector<int64_t>{});
  }
  return Op::run(args);
}

// View operators (Reshape, Flatten, Squeeze, Unsqueeze) only give the data new
// dims: Op::view_dims(attrs, dims, operand) with input 1's integer values (nullptr
// if omitted) serves both semantics, and tensor data is shared, not copied.
template <class Op>
std::vector<Tensor> eval_view(const EvalContext& ctx) {
  const bool has = ctx.has_input(1);
  const std::vector<int64_t> operand = has ? ints_of(ctx.in(1)) : std::vector<int64_t>{};
  return {ctx.in(0).reshaped(Op::view_dims(ctx.attrs, ctx.in(0).dims(), has ? &operand : nullptr))};
}

template <class Op, class T>
std::vector<Array<T>> exact_view(const Attributes& attrs, std::span<const Array<T>> in) {
  const bool has = in.size() > 1 && !(in[1].dims.empty() && in[1].data.empty());
  const std::vector<int64_t> operand = has ? exact_ints(in[1]) : std::vector<int64_t>{};
  Array<T> out = in[0];
  out.dims = Op::view_dims(attrs, in[0].dims, has ? &operand : nullptr);
  require(num_elements(out.dims) == out.numel(), "view changes the number of elements");
  return {out};
}

// ---- shared operand rules ------------------------------------------------------------

// Axes normalized against `rank`; errors on out-of-range or repeated axes.
inline std::vector<int64_t> normalized_axes(const std::vector<int64_t>& axes, int64_t rank, const std::string& op) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    require_valid(a >= -rank && a < rank, op + " axis " + std::to_string(a) + " is out of range for rank " +
                                              std::to_string(rank));
    int64_t n = a < 0 ? a + rank : a;
    require_valid(std::find(out.begin(), out.end(), n) == out.end(), op + " axes " + to_string(axes) + " repeat an axis");
    out.push_back(n);
  }
  return out;
}

// Equal parts; when uneven, every part but the last has ceil(extent / n) (opset 18).
inline std::vector<int64_t> equal_split(int64_t extent, int64_t n) {
  require(n > 0, "Split needs at least one output");
  const int64_t chunk = (extent + n - 1) / n;
  std::vector<int64_t> sizes(static_cast<size_t>(n), chunk);
  sizes.back() = extent - chunk * (n - 1);
  require(sizes.back() >= 0, "cannot split an axis of extent " + std::to_string(extent) + " into " +
                                 std::to_string(n) + " parts");
  return sizes;
}

// ONNX version adapters of the layout operators (ops/layout_onnx.cpp).
std::string import_concat(OnnxForm& f, int64_t opset, GraphBuilder& b);
std::string import_split(OnnxForm& f, int64_t opset, GraphBuilder& b);
std::string import_reshape(OnnxForm& f, int64_t opset, GraphBuilder& b);
std::string import_axes_input(OnnxForm& f, int64_t opset, GraphBuilder& b);  // Squeeze, Unsqueeze
std::string import_slice(OnnxForm& f, int64_t opset, GraphBuilder& b);
std::string import_pad(OnnxForm& f, int64_t opset, GraphBuilder& b);
void export_split(OnnxForm& f, int64_t opset);
void export_reshape(OnnxForm& f, int64_t opset);
void export_squeeze(OnnxForm& f, int64_t opset);
void export_unsqueeze(OnnxForm& f, int64_t opset);
void export_slice(OnnxForm& f, int64_t opset);
void export_pad(OnnxForm& f, int64_t opset);

}  // namespace isomer::ops
