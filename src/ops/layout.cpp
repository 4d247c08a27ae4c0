// Operators that relabel or permute the axes of their input: Transpose, Reshape,
// Flatten, Squeeze, Unsqueeze, DepthToSpace, SpaceToDepth (the copying ones, Concat, Split, Slice, Gather, Pad,
// Expand, are in ops/layout_copy.cpp).
//
// Each operator has a shape rule (symbolic dims pass through where the math
// allows) and one templated kernel that serves both the float semantics (on raw
// element bits, so every dtype is copied exactly) and the field and symbolic
// semantics (see ops/layout_kernels.h). In the field, integer operands (shapes,
// axes) are read back from F_p as small signed integers: they must have magnitude
// below p/2.
//
// Properties: every entry is shape_only and linear in its data input 0.
#include <algorithm>
#include <map>
#include <numeric>

#include "ir/invalid_node.h"
#include "ops/layout_common.h"

namespace isomer {
using namespace ops;

namespace {

// ---- Transpose ---------------------------------------------------------------------

std::vector<int64_t> transpose_perm(const Attributes& attrs, int64_t rank) {
  std::vector<int64_t> perm;
  if (attrs.has("perm")) {
    perm = attrs.get_ints("perm");
  } else {
    for (int64_t a = rank - 1; a >= 0; --a) perm.push_back(a);
  }
  require(static_cast<int64_t>(perm.size()) == rank,
          "Transpose perm " + list(perm) + " does not match rank " + std::to_string(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    require(p >= 0 && p < rank && !seen[p], "Transpose perm " + list(perm) + " is not a permutation of 0.." +
                                                std::to_string(rank - 1));
    seen[p] = true;
  }
  return perm;
}

std::vector<TensorType> infer_transpose(const InferContext& ctx) {
  TensorType out = ctx.in(0);
  std::vector<int64_t> perm = transpose_perm(ctx.attrs, out.rank());
  for (size_t a = 0; a < perm.size(); ++a) out.shape[a] = ctx.in(0).shape[perm[a]];
  return {out};
}

struct TransposeOp {
  static bool is_data(size_t) { return true; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    std::vector<int64_t> perm = transpose_perm(a.attrs, x.rank());
    std::vector<int64_t> st = strides_of(x.dims);
    AxisTables tables;
    for (int64_t p : perm) tables.push_back(axis_range(x.dims[p], 0, 1, st[p]));
    return {gather_axes(x, tables)};
  }
};


// ---- DepthToSpace, SpaceToDepth ----------------------------------------------------

// Both move blocks of b x b channels to b x b pixels (nn.PixelShuffle and its
// inverse): one transposition of a [N, C, H, W] tensor seen with two more axes.
int64_t block_size(const Attributes& attrs, const std::string& op) {
  const int64_t b = attrs.get_int("blocksize");
  require_valid(b >= 1, op + " blocksize must be positive, got " + std::to_string(b));
  return b;
}

bool depth_to_space_crd(const Attributes& attrs) {
  const std::string mode = attrs.get_string("mode", "DCR");
  require_valid(mode == "DCR" || mode == "CRD", "DepthToSpace mode must be DCR or CRD, got " + mode);
  return mode == "CRD";
}

Dim times(const Dim& d, int64_t f) { return d.is_static() ? Dim(d.value * f) : f == 1 ? d : Dim::unknown(); }

// d / f, checking divisibility where d is known.
Dim divided(const Dim& d, int64_t f, const std::string& what) {
  if (!d.is_static()) return f == 1 ? d : Dim::unknown();
  require_valid(d.value % f == 0, what + " " + std::to_string(d.value) + " is not divisible by " + std::to_string(f));
  return d.value / f;
}

std::vector<TensorType> infer_depth_to_space(const InferContext& ctx) {
  TensorType out = ctx.in(0);
  require(out.rank() == 4, "DepthToSpace input must be [N, C, H, W], got " + to_string(out.shape));
  const int64_t b = block_size(ctx.attrs, "DepthToSpace");
  depth_to_space_crd(ctx.attrs);
  // A blocksize over 2^31 has a square past int64 (2^40 wrapped to 0): no channel count
  // divides by it.
  require_valid(b <= (int64_t{1} << 31), "DepthToSpace blocksize " + std::to_string(b) + " is too large");
  out.shape[1] = divided(out.shape[1], b * b, "DepthToSpace: channels");
  out.shape[2] = times(out.shape[2], b);
  out.shape[3] = times(out.shape[3], b);
  return {out};
}

std::vector<TensorType> infer_space_to_depth(const InferContext& ctx) {
  TensorType out = ctx.in(0);
  require(out.rank() == 4, "SpaceToDepth input must be [N, C, H, W], got " + to_string(out.shape));
  const int64_t b = block_size(ctx.attrs, "SpaceToDepth");
  out.shape[1] = times(out.shape[1], b * b);
  out.shape[2] = divided(out.shape[2], b, "SpaceToDepth: height");
  out.shape[3] = divided(out.shape[3], b, "SpaceToDepth: width");
  return {out};
}

// DCR: y[n, c, h b + i, w b + j] = x[n, (i b + j) C' + c, h, w];
// CRD: y[n, c, h b + i, w b + j] = x[n, c b b + i b + j, h, w].
struct DepthToSpaceOp {
  static bool is_data(size_t) { return true; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    require(x.rank() == 4, "DepthToSpace input must be [N, C, H, W]");
    const int64_t b = block_size(a.attrs, "DepthToSpace"), N = x.dims[0], C = x.dims[1], H = x.dims[2],
                  W = x.dims[3];
    // b <= C / b first: b * b of a huge blocksize wraps (to 0 for 2^40, a division by zero).
    require_valid(b <= C / b && C % (b * b) == 0, "DepthToSpace: channels are not divisible by blocksize^2");
    const int64_t Co = C / (b * b), sc = H * W;
    const bool crd = depth_to_space_crd(a.attrs);
    const AxisTables tables{axis_range(N, 0, 1, C * sc),
                            axis_range(Co, 0, 1, (crd ? b * b : 1) * sc),
                            axis_range(H, 0, 1, W),
                            axis_range(b, 0, 1, (crd ? b : b * Co) * sc),
                            axis_range(W, 0, 1, 1),
                            axis_range(b, 0, 1, (crd ? 1 : Co) * sc)};
    Array<T> y = gather_axes(x, tables);
    y.dims = {N, Co, H * b, W * b};
    return {y};
  }
};

// y[n, (i b + j) C + c, h, w] = x[n, c, h b + i, w b + j].
struct SpaceToDepthOp {
  static bool is_data(size_t) { return true; }
  template <class T>
  static std::vector<Array<T>> run(const LayoutArgs<T>& a) {
    const Array<T>& x = a.data[0];
    require(x.rank() == 4, "SpaceToDepth input must be [N, C, H, W]");
    const int64_t b = block_size(a.attrs, "SpaceToDepth"), N = x.dims[0], C = x.dims[1], H = x.dims[2],
                  W = x.dims[3];
    require_valid(H % b == 0 && W % b == 0, "SpaceToDepth: height and width are not divisible by blocksize");
    const AxisTables tables{axis_range(N, 0, 1, C * H * W), axis_range(b, 0, 1, W),     axis_range(b, 0, 1, 1),
                            axis_range(C, 0, 1, H * W),     axis_range(H / b, 0, b, W), axis_range(W / b, 0, b, 1)};
    Array<T> y = gather_axes(x, tables);
    y.dims = {N, C * b * b, H / b, W / b};
    return {y};
  }
};

// ---- Reshape -----------------------------------------------------------------------

// The output shape of Reshape(in, spec). Static and symbolic factors common to both
// sides cancel, so [N,3,4] with [0,-1] gives [N,12] and [N,12] with [-1,12] gives [N].
Shape reshape_shape(const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  const std::string what = "cannot reshape " + to_string(in) + " to " + list(spec);
  Shape out;
  int64_t infer_at = -1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t v = spec[i];
    if (v == 0 && !allowzero) {
      require_valid(i < in.size(), what + ": 0 at position " + std::to_string(i) + " copies a missing dimension");
      out.push_back(in[i]);
    } else if (v == -1) {
      require_valid(infer_at < 0, what + ": more than one -1");
      infer_at = static_cast<int64_t>(i);
      out.push_back(Dim::unknown());
    } else {
      require_valid(v >= 0, what + ": invalid dimension " + std::to_string(v));
      has_zero |= v == 0;
      out.push_back(v);
    }
  }
  require_valid(!(allowzero && has_zero && infer_at >= 0), what + ": 0 and -1 together with allowzero=1");
  // Static products and symbol counts of both sides, with common symbols cancelled.
  int64_t in_static = 1, out_static = 1;
  bool opaque = false;  // an anonymous unknown dim: nothing can be concluded
  std::map<std::string, int> symbols;
  for (const Dim& d : in) {
    if (d.is_static()) in_static *= d.value;
    else if (d.symbol.empty()) opaque = true;
    else ++symbols[d.symbol];
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int64_t>(i) == infer_at) continue;
    const Dim& d = out[i];
    if (d.is_static()) out_static *= d.value;
    else if (d.symbol.empty()) opaque = true;
    else --symbols[d.symbol];
  }
  if (opaque) return out;
  std::vector<std::string> in_left;
  bool out_left = false;
  for (const auto& [name, count] : symbols) {
    if (count < 0) out_left = true;
    for (int k = 0; k < count; ++k) in_left.push_back(name);
  }
  if (infer_at < 0) {
    if (in_left.empty() && !out_left) require_valid(in_static == out_static, what);
    return out;
  }
  if (out_left) return out;
  if (in_left.empty()) {
    require_valid(out_static != 0, what + ": -1 is ambiguous when the other dimensions have no elements");
    require_valid(in_static % out_static == 0, what);
    out[infer_at] = in_static / out_static;
  } else if (in_left.size() == 1 && in_static == out_static && out_static != 0) {
    out[infer_at] = Dim::sym(in_left[0]);
  }
  return out;
}

std::vector<TensorType> infer_reshape(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  std::optional<int64_t> len = operand_length(ctx, 1, "Reshape shape");
  if (std::optional<std::vector<int64_t>> spec = constant_ints(ctx, 1))
    return {{x.dtype, reshape_shape(x.shape, *spec, ctx.attrs.get_int("allowzero", 0) != 0)}};
  require(len.has_value(), "Reshape with a dynamic shape of unknown length has unknown rank");
  return {{x.dtype, unknown_dims(*len)}};
}

struct ReshapeOp {
  static std::vector<int64_t> view_dims(const Attributes& attrs, const std::vector<int64_t>& dims,
                                        const std::vector<int64_t>* shape) {
    return static_dims(reshape_shape(make_shape(dims), *shape, attrs.get_int("allowzero", 0) != 0), "Reshape output");
  }
};


// ---- Flatten -----------------------------------------------------------------------

int64_t flatten_axis(const Attributes& attrs, int64_t rank) {
  int64_t axis = attrs.get_int("axis", 1);
  require_valid(axis >= -rank && axis <= rank,
                "Flatten axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<TensorType> infer_flatten(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const size_t axis = static_cast<size_t>(flatten_axis(ctx.attrs, x.rank()));
  return {{x.dtype, {product_dim(x.shape, 0, axis), product_dim(x.shape, axis, x.shape.size())}}};
}

struct FlattenOp {
  static std::vector<int64_t> view_dims(const Attributes& attrs, const std::vector<int64_t>& dims,
                                        const std::vector<int64_t>*) {
    const int64_t axis = flatten_axis(attrs, static_cast<int64_t>(dims.size()));
    return {num_elements(std::vector<int64_t>(dims.begin(), dims.begin() + axis)),
            num_elements(std::vector<int64_t>(dims.begin() + axis, dims.end()))};
  }
};


// ---- Squeeze / Unsqueeze -----------------------------------------------------------

std::vector<TensorType> infer_squeeze(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  TensorType out{x.dtype, {}};
  if (!ctx.has_input(1)) {
    // Without axes every extent-1 dim goes; symbolic dims are assumed not to be 1.
    for (const Dim& d : x.shape)
      if (!(d.is_static() && d.value == 1)) out.shape.push_back(d);
    return {out};
  }
  std::optional<int64_t> len = operand_length(ctx, 1, "Squeeze axes");
  std::optional<std::vector<int64_t>> axes = constant_ints(ctx, 1);
  if (!axes) {
    require(len.has_value() && *len <= x.rank(), "Squeeze with dynamic axes of unknown length has unknown rank");
    out.shape = unknown_dims(x.rank() - *len);
    return {out};
  }
  std::vector<int64_t> ax = normalized_axes(*axes, x.rank(), "Squeeze");
  for (int64_t a = 0; a < x.rank(); ++a) {
    const Dim& d = x.shape[a];
    if (std::find(ax.begin(), ax.end(), a) == ax.end()) {
      out.shape.push_back(d);
    } else {
      require(!d.is_static() || d.value == 1,
              "Squeeze axis " + std::to_string(a) + " has extent " + std::to_string(d.value) + ", not 1");
    }
  }
  return {out};
}

struct SqueezeOp {
  // Without axes every extent-1 dim goes (ONNX), whatever the shape rule assumed.
  static std::vector<int64_t> view_dims(const Attributes&, const std::vector<int64_t>& dims,
                                        const std::vector<int64_t>* axes) {
    const int64_t rank = static_cast<int64_t>(dims.size());
    std::vector<int64_t> ax;
    if (axes) {
      ax = normalized_axes(*axes, rank, "Squeeze");
    } else {
      for (int64_t k = 0; k < rank; ++k)
        if (dims[k] == 1) ax.push_back(k);
    }
    std::vector<int64_t> out;
    for (int64_t k = 0; k < rank; ++k) {
      if (std::find(ax.begin(), ax.end(), k) == ax.end()) {
        out.push_back(dims[k]);
      } else {
        require(dims[k] == 1, "Squeeze axis " + std::to_string(k) + " has extent " + std::to_string(dims[k]) +
                                  ", not 1");
      }
    }
    return out;
  }
};

// Output shape of Unsqueeze: 1s at `axes` (normalized against the output rank).
Shape unsqueeze_shape(const Shape& in, const std::vector<int64_t>& axes) {
  const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<int64_t> ax = normalized_axes(axes, rank, "Unsqueeze");
  Shape out;
  size_t next = 0;
  for (int64_t a = 0; a < rank; ++a)
    out.push_back(std::find(ax.begin(), ax.end(), a) != ax.end() ? Dim(1) : in[next++]);
  return out;
}

std::vector<TensorType> infer_unsqueeze(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  std::optional<int64_t> len = operand_length(ctx, 1, "Unsqueeze axes");
  if (std::optional<std::vector<int64_t>> axes = constant_ints(ctx, 1)) return {{x.dtype, unsqueeze_shape(x.shape, *axes)}};
  require(len.has_value(), "Unsqueeze with dynamic axes of unknown length has unknown rank");
  return {{x.dtype, unknown_dims(x.rank() + *len)}};
}

struct UnsqueezeOp {
  static std::vector<int64_t> view_dims(const Attributes&, const std::vector<int64_t>& dims,
                                        const std::vector<int64_t>* axes) {
    return static_dims(unsqueeze_shape(make_shape(dims), *axes));
  }
};


}  // namespace

OpDef def_Transpose() {
  OpDef d = layout_op("Transpose", 1, 1, 1);
  d.attributes = {{"perm", "ints"}};
  d.infer = infer_transpose;
  set_semantics<TransposeOp>(d);
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> in) {
    Attributes a = attrs;  // the default perm reverses the axes
    std::vector<int64_t> reversed(static_cast<size_t>(std::max<int64_t>(input_rank(in, 0), 0)));
    for (size_t i = 0; i < reversed.size(); ++i) reversed[i] = static_cast<int64_t>(reversed.size() - 1 - i);
    if (input_rank(in, 0) >= 0) set_default(a, "perm", reversed);
    return a;
  };
  d.lower = Lowering::Transpose;
  return d;
}

OpDef def_DepthToSpace() {
  OpDef d = layout_op("DepthToSpace", 1, 1, 11);
  d.attributes = {{"blocksize", "int"}, {"mode", "string"}};
  // Opset 1 had no mode: its one layout is DCR, the default.
  d.onnx_import = [](OnnxForm&, int64_t, GraphBuilder&) { return std::string(); };
  d.infer = infer_depth_to_space;
  set_semantics<DepthToSpaceOp>(d);
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "mode", std::string("DCR"));
    return a;
  };
  d.lower = Lowering::SpaceDepth;
  return d;
}

OpDef def_SpaceToDepth() {
  OpDef d = layout_op("SpaceToDepth", 1, 1, 1);
  d.attributes = {{"blocksize", "int"}};
  // Opset 28 changed more than its types: a node with anything beyond blocksize
  // (a layout mode) stays opaque rather than be read as the one layout known here.
  d.onnx_import = [](OnnxForm& f, int64_t, GraphBuilder&) {
    for (const auto& item : f.attrs.items())
      if (item.first != "blocksize") return "SpaceToDepth attribute " + item.first + " is not implemented";
    return std::string();
  };
  d.infer = infer_space_to_depth;
  set_semantics<SpaceToDepthOp>(d);
  d.lower = Lowering::SpaceDepth;
  return d;
}

OpDef def_Reshape() {
  OpDef d = layout_op("Reshape", 2, 2, 14);
  d.attributes = {{"allowzero", "int"}};
  d.infer = infer_reshape;
  set_view_semantics<ReshapeOp>(d);
  d.onnx_import = import_reshape;
  d.onnx_export = export_reshape;
  d.lower = Lowering::Reshape;
  return d;
}

OpDef def_Flatten() {
  // Flatten-1 and -9 are Flatten-11 without a negative axis (see Gather).
  OpDef d = layout_op("Flatten", 1, 1, 1);
  d.attributes = {{"axis", "int"}};
  d.infer = infer_flatten;
  set_view_semantics<FlattenOp>(d);
  d.canonical_attrs = canonical_axis_of_input0<1>;
  d.lower = Lowering::Reshape;
  return d;
}

OpDef def_Squeeze() {
  OpDef d = layout_op("Squeeze", 1, 2, 13);
  d.infer = infer_squeeze;
  set_view_semantics<SqueezeOp>(d);
  d.onnx_import = import_axes_input;
  d.onnx_export = export_squeeze;
  d.lower = Lowering::Reshape;
  return d;
}

OpDef def_Unsqueeze() {
  OpDef d = layout_op("Unsqueeze", 2, 2, 13);
  d.infer = infer_unsqueeze;
  set_view_semantics<UnsqueezeOp>(d);
  d.onnx_import = import_axes_input;
  d.onnx_export = export_unsqueeze;
  d.lower = Lowering::Reshape;
  return d;
}

}  // namespace isomer
