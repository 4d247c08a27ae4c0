// GridSample (F.grid_sample: spatial transformers, deformable sampling, optical
// flow warps): each output point samples the input image at a point the grid gives.
// isomer's form is opset 20's (modes linear, nearest, cubic); opset 16's names
// (bilinear, bicubic) are mapped at import and back at export. 4-D images only:
// opset 20's N-D form stays opaque. The sampling itself is stated once, in
// kernels/grid_sample.h, for this evaluator and the runtime's kernel alike.
#include "ir/invalid_node.h"
#include "kernels/grid_sample.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

namespace {

using kernels::GridMode;
using kernels::GridPadding;

struct GridAttrs {
  GridMode mode;
  GridPadding padding;
  bool align_corners;
};

GridAttrs grid_attrs(const Attributes& attrs) {
  const std::string mode = attrs.get_string("mode", "linear"), pad = attrs.get_string("padding_mode", "zeros");
  const int64_t align = attrs.get_int("align_corners", 0);
  const std::optional<GridMode> m = kernels::grid_mode(mode);
  const std::optional<GridPadding> p = kernels::grid_padding(pad);
  require_valid(m.has_value(), "GridSample mode '" + mode + "' is unknown");
  require_valid(p.has_value(), "GridSample padding_mode '" + pad + "' is unknown");
  require_valid(align == 0 || align == 1, "GridSample align_corners must be 0 or 1, got " + std::to_string(align));
  return {*m, *p, align == 1};
}

std::vector<TensorType> infer_grid_sample(const InferContext& ctx) {
  const TensorType &x = ctx.in(0), &grid = ctx.in(1);
  grid_attrs(ctx.attrs);
  require_float(x, "GridSample input");
  require_float(grid, "GridSample grid");
  require(x.rank() == 4, "GridSample on a rank-" + std::to_string(x.rank()) +
                             " input: isomer samples 4-D images only (N, C, H, W)");
  require_valid(grid.rank() == 4, "GridSample grid " + to_string(grid.shape) + " must be [N, H_out, W_out, 2]");
  require_valid(!grid.shape[3].is_static() || grid.shape[3].value == 2,
                "GridSample grid " + to_string(grid.shape) + " must hold (x, y) pairs in its last axis");
  require_valid(!x.shape[0].is_static() || !grid.shape[0].is_static() || x.shape[0].value == grid.shape[0].value,
                "GridSample input " + to_string(x.shape) + " and grid " + to_string(grid.shape) + " differ in batch");
  return {{x.dtype, {x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]}}};
}

std::vector<Tensor> eval_grid_sample(const EvalContext& ctx) {
  const Tensor &x = ctx.in(0), &grid = ctx.in(1);
  const GridAttrs a = grid_attrs(ctx.attrs);
  const std::vector<int64_t>& xd = x.dims();
  const std::vector<int64_t>& gd = grid.dims();
  require(xd.size() == 4 && gd.size() == 4 && gd[3] == 2 && gd[0] == xd[0],
          "GridSample input " + to_string(xd) + " and grid " + to_string(gd) + " do not fit");
  const std::vector<double> xv = x.to_f64(), gv = grid.to_f64();
  const int64_t planes = xd[0] * xd[1], points = gd[1] * gd[2], in = xd[2] * xd[3];
  std::vector<double> y(static_cast<size_t>(planes * points));
  for (int64_t plane = 0; plane < planes; ++plane) {
    const double* g = gv.data() + (plane / xd[1]) * points * 2;
    for (int64_t q = 0; q < points; ++q)
      y[plane * points + q] = kernels::grid_sample_point(xv.data() + plane * in, xd[2], xd[3], g[2 * q], g[2 * q + 1],
                                                         a.mode, a.padding, a.align_corners);
  }
  return {Tensor::from_f64(x.dtype(), {xd[0], xd[1], gd[1], gd[2]}, y)};
}

// Opset 20 renamed bilinear and bicubic to linear and cubic.
std::string import_grid_sample(OnnxForm& form, int64_t opset, GraphBuilder&) {
  if (opset >= 20 || !form.attrs.has("mode")) return "";
  const std::string mode = form.attrs.get_string("mode");
  if (mode == "bilinear") form.attrs.set("mode", std::string("linear"));
  else if (mode == "bicubic") form.attrs.set("mode", std::string("cubic"));
  else require_valid(mode == "nearest", "GridSample-" + std::to_string(opset) + " mode '" + mode + "' is unknown");
  return "";
}

void export_grid_sample(OnnxForm& form, int64_t opset) {
  if (opset >= 20 || !form.attrs.has("mode")) return;
  const std::string mode = form.attrs.get_string("mode");
  form.attrs.set("mode", std::string(mode == "linear" ? "bilinear" : mode == "cubic" ? "bicubic" : mode));
}

}  // namespace

OpDef def_GridSample() {
  OpDef d;
  d.name = "GridSample";
  d.min_inputs = d.max_inputs = 2;
  d.min_opset = 16;
  d.attributes = {{"mode", "string"}, {"padding_mode", "string"}, {"align_corners", "int"}};
  d.infer = infer_grid_sample;
  d.eval = eval_grid_sample;
  d.onnx_import = import_grid_sample;
  d.onnx_export = export_grid_sample;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "mode", std::string("linear"));
    set_default(a, "padding_mode", std::string("zeros"));
    set_default(a, "align_corners", int64_t{0});
    return a;
  };
  d.lower = Lowering::GridSample;
  return d;
}

}  // namespace isomer
