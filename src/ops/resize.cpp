// Resize (opsets 10 to 19): nearest, linear and cubic interpolation along any
// axes, as the ONNX reference computes it. Every mode is separable: each axis
// maps output index o to a few input indices with weights (ResizeAxis), and the
// result is those 1-D maps applied axis after axis. The weights are
// real numbers of the scales, so Resize is float-only: no field or symbolic
// semantics (the rule generator and the e-graph leave it alone), like ArgMax.
// antialias (opset 18) is not implemented: such nodes stay opaque. Upsample
// (opsets 7 to 10) is Resize-10 under its old name (see export_resize).
#include "ops/resize.h"

#include <algorithm>
#include <cmath>

#include "ir/graph.h"
#include "ir/invalid_node.h"
#include "ir/shape_overflow.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace ops {

// Clamping can make several taps read the same pixel (pytorch_half_pixel on an
// axis of extent 1 reads index -1 and 0 with weight 1/2 each): what counts is the
// total weight on each input index.
bool ResizeAxis::identity() const {
  if (out != in) return false;
  for (int64_t o = 0; o < out; ++o) {
    double own = 0;
    for (int k = 0; k < taps; ++k) {
      const double w = weight[o * taps + k];
      if (index[o * taps + k] == o) own += w;
      else if (w != 0.0) return false;
    }
    if (own != 1.0) return false;
  }
  return true;
}

std::vector<int64_t> ResizePlan::out_dims() const {
  std::vector<int64_t> d;
  for (const ResizeAxis& a : axes) d.push_back(a.out);
  return d;
}

namespace {

bool one_of(const std::string& v, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (v == o) return true;
  return false;
}

// Where output index x lies in the input, per coordinate_transformation_mode.
double source_coordinate(const std::string& coord, double x, int64_t in, int64_t out, double scale, double rs,
                         double re) {
  if (coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (coord == "half_pixel_symmetric") {
    const double adjustment = static_cast<double>(out) / (scale * static_cast<double>(in));
    const double center = static_cast<double>(in) / 2;
    return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  if (coord == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : -0.5;
  if (coord == "align_corners") {
    // Over the unrounded output length scale * in, as ONNX's reference and test data
    // have it (it is the output extent itself when sizes are given).
    const double length = scale * static_cast<double>(in);
    return length == 1 ? 0.0 : x * static_cast<double>(in - 1) / (length - 1);
  }
  if (coord == "asymmetric") return x / scale;
  if (coord == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize
  const double span = static_cast<double>(in - 1);
  return out > 1 ? rs * span + x * (re - rs) * span / static_cast<double>(out - 1) : 0.5 * (rs + re) * span;
}

int64_t nearest_index(const std::string& mode, double x) {
  if (mode == "round_prefer_floor") return static_cast<int64_t>(std::ceil(x - 0.5));
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(std::floor(x + 0.5));
  if (mode == "floor") return static_cast<int64_t>(std::floor(x));
  return static_cast<int64_t>(std::ceil(x));
}

void cubic_weights(double s, double A, double* w) {
  auto near = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };           // |d| <= 1
  auto far = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };      // 1 < |d| < 2
  w[0] = far(s + 1), w[1] = near(s), w[2] = near(1 - s), w[3] = far(2 - s);
}

ResizeAxis plan_axis(const ResizeAttrs& a, int64_t in, int64_t out, double scale, double rs, double re) {
  ResizeAxis ax;
  ax.in = in, ax.out = out, ax.scale = scale;
  ax.taps = a.mode == "nearest" ? 1 : a.mode == "linear" ? 2 : 4;
  ax.outside.assign(static_cast<size_t>(out), false);
  for (int64_t o = 0; o < out; ++o) {
    const double x = source_coordinate(a.coord, static_cast<double>(o), in, out, scale, rs, re);
    if (a.coord == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) ax.outside[o] = true;
    int64_t first;
    double w[4] = {1, 0, 0, 0};
    if (a.mode == "nearest") {
      first = nearest_index(a.nearest, x);
    } else {
      const double x0 = std::floor(x), s = x - x0;
      if (a.mode == "linear") {
        first = static_cast<int64_t>(x0);
        w[0] = 1 - s, w[1] = s;
      } else {
        first = static_cast<int64_t>(x0) - 1;
        cubic_weights(s, a.cubic_a, w);
      }
    }
    if (a.exclude_outside && ax.taps > 1) {
      double sum = 0;
      for (int k = 0; k < ax.taps; ++k) {
        if (first + k < 0 || first + k >= in) w[k] = 0;
        sum += w[k];
      }
      if (sum != 0)
        for (int k = 0; k < ax.taps; ++k) w[k] /= sum;
    }
    for (int k = 0; k < ax.taps; ++k) {
      ax.index.push_back(std::clamp<int64_t>(first + k, 0, in - 1));
      ax.weight.push_back(w[k]);
    }
  }
  return ax;
}

}  // namespace

ResizeAttrs read_resize_attrs(const Attributes& attrs, int64_t rank) {
  ResizeAttrs a;
  a.mode = attrs.get_string("mode", "nearest");
  require_valid(one_of(a.mode, {"nearest", "linear", "cubic"}),
                "Resize mode must be nearest, linear or cubic, got " + a.mode);
  a.coord = attrs.get_string("coordinate_transformation_mode", "half_pixel");
  require_valid(one_of(a.coord, {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                 "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"}),
                "Resize coordinate_transformation_mode " + a.coord + " is not an ONNX mode");
  a.nearest = attrs.get_string("nearest_mode", "round_prefer_floor");
  // Only nearest resizing reads it: ONNX Runtime runs other modes whatever it says.
  require(one_of(a.nearest, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}),
                "Resize nearest_mode " + a.nearest + " is not an ONNX mode");
  a.policy = attrs.get_string("keep_aspect_ratio_policy", "stretch");
  require_valid(one_of(a.policy, {"stretch", "not_larger", "not_smaller"}),
          "Resize keep_aspect_ratio_policy " + a.policy + " is not an ONNX policy");
  a.cubic_a = attrs.get_float("cubic_coeff_a", -0.75);
  a.extrapolation = attrs.get_float("extrapolation_value", 0.0);
  a.exclude_outside = attrs.get_int("exclude_outside", 0) != 0;
  a.antialias = attrs.get_int("antialias", 0) != 0;
  if (attrs.has("axes")) {
    std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
    for (int64_t ax : attrs.get_ints("axes")) {
      require_valid(ax >= -rank && ax < rank, "Resize axis " + std::to_string(ax) + " is out of range for rank " +
                                                  std::to_string(rank));
      if (ax < 0) ax += rank;
      require_valid(!seen[ax], "Resize axes " + to_string(attrs.get_ints("axes")) + " repeat an axis");
      seen[ax] = true;
      a.axes.push_back(ax);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) a.axes.push_back(i);
  }
  return a;
}

ResizeExtents resize_extents(const ResizeAttrs& a, const std::vector<int64_t>& in, const std::vector<double>& roi,
                             const std::vector<double>& scales, const std::vector<int64_t>& sizes) {
  const size_t r = in.size(), n = a.axes.size();
  require(scales.empty() != sizes.empty(), "Resize needs exactly one of scales and sizes");
  ResizeExtents e;
  e.out = in;
  e.scales.assign(r, 1.0);
  e.roi_start.assign(r, 0.0);
  e.roi_end.assign(r, 1.0);
  if (a.coord == "tf_crop_and_resize" && !roi.empty()) {
    require(roi.size() == 2 * n, "Resize roi has " + std::to_string(roi.size()) + " values, expected " +
                                     std::to_string(2 * n));
    for (size_t i = 0; i < n; ++i) e.roi_start[a.axes[i]] = roi[i], e.roi_end[a.axes[i]] = roi[n + i];
  }
  if (!scales.empty()) {
    require(scales.size() == n, "Resize scales has " + std::to_string(scales.size()) + " values, expected " +
                                    std::to_string(n));
    for (size_t i = 0; i < n; ++i) {
      const size_t ax = static_cast<size_t>(a.axes[i]);
      // ONNX asks for scales above 0; ONNX Runtime refuses NaN and infinity too (an
      // infinite extent has no int64 to be).
      require_valid(std::isfinite(scales[i]) && scales[i] > 0,
                    "Resize scales must be positive and finite, got " + std::to_string(scales[i]));
      e.scales[ax] = scales[i];
      const double crop = a.coord == "tf_crop_and_resize" ? e.roi_end[ax] - e.roi_start[ax] : 1.0;
      const double extent = std::floor(static_cast<double>(in[ax]) * crop * scales[i]);
      if (!(std::fabs(extent) < 0x1p62))
        throw ShapeOverflow("Resize scale " + std::to_string(scales[i]) + " makes an extent of " +
                            std::to_string(extent) + ", which does not fit in 64 bits");
      e.out[ax] = static_cast<int64_t>(extent);
    }
    return e;
  }
  require(sizes.size() == n, "Resize sizes has " + std::to_string(sizes.size()) + " values, expected " +
                                 std::to_string(n));
  // A size is the extent times its scale, which ONNX asks above 0 (ONNX Runtime refuses a
  // size of 0 as a scale of 0): only an empty axis may stay empty.
  for (size_t i = 0; i < n; ++i)
    require_valid(sizes[i] > 0 || (sizes[i] == 0 && in[static_cast<size_t>(a.axes[i])] == 0),
                  "Resize sizes must be positive, got " + std::to_string(sizes[i]) + " for an extent of " +
                      std::to_string(in[static_cast<size_t>(a.axes[i])]));
  if (a.policy == "stretch") {
    for (size_t i = 0; i < n; ++i) {
      const size_t ax = static_cast<size_t>(a.axes[i]);
      e.out[ax] = sizes[i];
      e.scales[ax] = static_cast<double>(sizes[i]) / static_cast<double>(in[ax]);
    }
    return e;
  }
  double s = a.policy == "not_larger" ? INFINITY : 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double si = static_cast<double>(sizes[i]) / static_cast<double>(in[a.axes[i]]);
    s = a.policy == "not_larger" ? std::min(s, si) : std::max(s, si);
  }
  for (int64_t ax : a.axes) {
    e.scales[ax] = s;
    e.out[ax] = static_cast<int64_t>(std::floor(s * static_cast<double>(in[ax]) + 0.5));
  }
  return e;
}

ResizePlan plan_resize(const ResizeAttrs& a, const std::vector<int64_t>& in, const ResizeExtents& e) {
  require(!a.antialias, "Resize antialias is not implemented");
  ResizePlan p;
  p.extrapolation = a.extrapolation;
  for (size_t i = 0; i < in.size(); ++i) {
    require(in[i] > 0 || e.out[i] == 0, "Resize of an empty axis");
    p.axes.push_back(plan_axis(a, in[i], e.out[i], e.scales[i], e.roi_start[i], e.roi_end[i]));
    for (bool o : p.axes.back().outside) p.any_outside = p.any_outside || o;
  }
  return p;
}

}  // namespace ops

namespace {

std::vector<double> floats_of(const Tensor* t) { return t ? t->to_f64() : std::vector<double>{}; }

// y = the 1-D map of `ax` applied along axis `axis` of x.
Array<double> resize_axis(const Array<double>& x, size_t axis, const ResizeAxis& ax) {
  std::vector<int64_t> dims = x.dims;
  dims[axis] = ax.out;
  Array<double> y(dims);
  const int64_t outer = num_elements(x.dims, 0, axis), inner = num_elements(x.dims, axis + 1, x.dims.size());
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t o = 0; o < ax.out; ++o) {
      double* dst = y.data.data() + (b * ax.out + o) * inner;
      for (int k = 0; k < ax.taps; ++k) {
        const double w = ax.weight[o * ax.taps + k];
        if (w == 0.0) continue;
        const double* src = x.data.data() + (b * ax.in + ax.index[o * ax.taps + k]) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
      }
    }
  return y;
}

std::vector<Tensor> eval_resize(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const ResizeAttrs a = read_resize_attrs(ctx.attrs, x.rank());
  const std::vector<double> roi = ctx.has_input(1) ? ctx.in(1).to_f64() : std::vector<double>{};
  const std::vector<double> scales = ctx.has_input(2) ? ctx.in(2).to_f64() : std::vector<double>{};
  const std::vector<int64_t> sizes = ctx.has_input(3) ? ints_of(ctx.in(3)) : std::vector<int64_t>{};
  const ResizePlan p = plan_resize(a, x.dims(), resize_extents(a, x.dims(), roi, scales, sizes));
  Array<double> y = f64(x);
  for (size_t i = 0; i < p.axes.size(); ++i)
    if (!p.axes[i].identity()) y = resize_axis(y, i, p.axes[i]);
  if (p.any_outside) {
    const std::vector<int64_t> st = strides_of(y.dims);
    for (int64_t e = 0; e < static_cast<int64_t>(y.data.size()); ++e)
      for (size_t i = 0; i < p.axes.size(); ++i)
        if (p.axes[i].outside[(e / st[i]) % y.dims[i]]) {
          y.data[e] = p.extrapolation;
          break;
        }
  }
  return {tensor(x.dtype(), y)};
}

std::vector<TensorType> infer_resize(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require(is_numeric(x.dtype), "Resize input must be numeric, got " + to_string(x));
  const ResizeAttrs a = read_resize_attrs(ctx.attrs, x.rank());
  require(!a.antialias || a.mode != "nearest", "Resize antialias applies to linear and cubic modes only");
  auto operand = [&](size_t i, const char* what) -> const Tensor* {
    if (!ctx.has_input(i)) return nullptr;
    require(ctx.in(i).rank() == 1, std::string("Resize ") + what + " must be a 1-D tensor, got " + to_string(ctx.in(i)));
    return ctx.constant(i);
  };
  const Tensor *roi = operand(1, "roi"), *scales = operand(2, "scales"), *sizes = operand(3, "sizes");
  if (ctx.has_input(2)) require(is_float(ctx.in(2).dtype), "Resize scales must be float, got " + to_string(ctx.in(2)));
  if (ctx.has_input(3))
    require(ctx.in(3).dtype == DType::Int64, "Resize sizes must be int64, got " + to_string(ctx.in(3)));
  // An operand of static length 0 is absent.
  auto empty = [&](size_t i) { return !ctx.has_input(i) || (ctx.in(i).shape[0].is_static() && ctx.in(i).shape[0].value == 0); };
  require(!(empty(2) && empty(3)), "Resize needs a scales or a sizes input");
  require(empty(2) || empty(3), "Resize takes scales or sizes, not both");
  TensorType out = x;
  const bool by_scales = !empty(2);
  const Tensor* given = by_scales ? scales : sizes;
  bool static_in = true;
  for (const Dim& d : x.shape) static_in = static_in && d.is_static();
  // A crop's roi sets the extents only with scales: sizes are the extents themselves.
  if (!given || (a.coord == "tf_crop_and_resize" && by_scales && ctx.has_input(1) && !roi) || !static_in) {
    // Extents known only at run time (or input extents unknown): the resized axes are unknown.
    for (int64_t ax : a.axes) {
      const bool unit = given && by_scales && a.coord != "tf_crop_and_resize" &&
                        given->to_f64().size() == a.axes.size() &&
                        given->to_f64()[std::find(a.axes.begin(), a.axes.end(), ax) - a.axes.begin()] == 1.0;
      if (!unit) out.shape[ax] = Dim::unknown();
    }
    return {out};
  }
  std::vector<int64_t> in;
  for (const Dim& d : x.shape) in.push_back(d.value);
  const ResizeExtents e = resize_extents(a, in, floats_of(roi), by_scales ? given->to_f64() : std::vector<double>{},
                                         by_scales ? std::vector<int64_t>{} : given->to_i64());
  for (size_t i = 0; i < in.size(); ++i) out.shape[i] = e.out[i];
  return {out};
}

// Opset 10 had only scales, asymmetric coordinates, and for nearest the floor of
// the source coordinate where it upsamples (ONNX Runtime takes the ceiling where
// it downsamples: kept opaque). Opset 18's antialias is not implemented.
std::string import_resize(OnnxForm& f, int64_t opset, GraphBuilder& b) {
  if (f.attrs.get_int("antialias", 0) != 0) return "Resize antialias is not implemented";
  if (opset >= 11) return "";
  if (opset < 9) {  // Upsample-7 (the importer maps Upsample of opsets 7 to 10 here)
    std::vector<double> scales = f.attrs.get_floats("scales", {});
    if (f.inputs.size() != 1 || scales.empty()) return "Upsample-7 needs one input and its scales attribute";
    f.attrs.erase("scales");
    f.inputs.push_back(b.constant(Tensor::from_f64(DType::Float32, {static_cast<int64_t>(scales.size())}, scales)));
  }
  if (f.inputs.size() != 2 || !f.inputs[1].present()) return "Resize-10 needs its scales input";
  const Tensor* scales = f.inputs[1].constant();
  const std::string mode = f.attrs.get_string("mode", "nearest");
  if (mode == "nearest") {
    if (!scales) return "Resize-10 nearest with scales computed at run time";
    for (double s : scales->to_f64())
      if (s < 1) return "Resize-10 nearest downsampling (rounding as ONNX Runtime does is not implemented)";
    f.attrs.set("nearest_mode", std::string("floor"));
  }
  f.attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
  f.inputs.insert(f.inputs.begin() + 1, b.constant(Tensor::from_f64(DType::Float32, {0}, {})));
  return "";
}

// Before opset 11, Resize (10) and Upsample (7 to 10, its older name) take
// (X, scales) and mean asymmetric coordinates, nearest rounding down; Upsample
// before opset 9 has the scales as an attribute. The canonical form goes back to
// that where it says the same, and is refused otherwise.
void export_resize(OnnxForm& f, int64_t opset) {
  if (opset >= 11) return;
  const std::string op = opset < 10 ? "Upsample" : "Resize";
  require(opset >= 7, "neither Resize nor Upsample exists before opset 7");
  require(f.inputs.size() >= 3 && f.inputs[2].present() && (f.inputs.size() < 4 || !f.inputs[3].present()),
          op + " before opset 11 takes scales, not sizes");
  const Tensor* roi = f.inputs[1].present() ? f.inputs[1].constant() : nullptr;
  require(!f.inputs[1].present() || (roi && roi->numel() == 0), op + " before opset 11 has no region of interest");
  const std::string mode = f.attrs.get_string("mode", "nearest");
  require(mode == "nearest" || mode == "linear", op + " before opset 11 has no mode '" + mode + "'");
  require(f.attrs.get_string("coordinate_transformation_mode", "half_pixel") == "asymmetric",
          op + " before opset 11 has only asymmetric coordinates");
  require(mode != "nearest" || f.attrs.get_string("nearest_mode", "round_prefer_floor") == "floor",
          op + " before opset 11 rounds nearest indices down only");
  // The others say nothing for these modes and coordinates (the cubic coefficient,
  // the value outside a crop) or are at their default.
  for (const auto& [name, v] : f.attrs.items())
    require(name == "mode" || name == "coordinate_transformation_mode" || name == "nearest_mode" ||
                name == "cubic_coeff_a" || name == "extrapolation_value" ||
                (name == "exclude_outside" && f.attrs.get_int(name) == 0),
            op + " before opset 11 has no attribute '" + name + "'");
  Attributes a;
  a.set("mode", mode);
  f.attrs = a;
  f.inputs = {f.inputs[0], f.inputs[2]};
  if (opset < 10) f.op_type = op;
  if (opset < 9) {
    const Tensor* scales = f.inputs[1].constant();
    require(scales != nullptr, "Upsample before opset 9 needs constant scales");
    f.attrs.set("scales", scales->to_f64());
    f.inputs.resize(1);
  }
}

}  // namespace

OpDef def_Resize() {
  OpDef d;
  d.name = "Resize";
  d.min_inputs = 1;
  d.max_inputs = 4;
  d.min_opset = 11;
  d.attributes = {{"antialias", "int"},
                  {"axes", "ints"},
                  {"coordinate_transformation_mode", "string"},
                  {"cubic_coeff_a", "float"},
                  {"exclude_outside", "int"},
                  {"extrapolation_value", "float"},
                  {"keep_aspect_ratio_policy", "string"},
                  {"mode", "string"},
                  {"nearest_mode", "string"}};
  d.infer = infer_resize;
  d.eval = eval_resize;
  d.onnx_import = import_resize;
  d.onnx_export = export_resize;
  d.lower = Lowering::Resize;
  return d;
}

}  // namespace isomer
