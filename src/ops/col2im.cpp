// Col2Im (opset 18, torch's nn.Fold / F.fold: MobileViTV2 folds its patches back into
// an image with it): the columns of sliding blocks summed back into their places. It
// is linear in its input, so one templated kernel gives the float, field and
// symbolic semantics.
//
// input [N, C * prod(block), L], image_shape [k], block_shape [k]; attributes
// dilations, strides (k each, default 1) and pads (2k, begins then ends, default 0).
// L is the number of block positions, prod over d of
// (image[d] + pads - dilation[d] (block[d] - 1) - 1) / stride[d] + 1, and
//   y[n, c, p] += x[n, c * prod(block) + b, l]  at  p[d] = l[d] stride[d] - pad_begin[d] + b[d] dilation[d]
// for every block offset b and position l, where p falls inside the image.
#include "ops/col2im.h"

#include "eval/sym.h"
#include "ops/kernels.h"
#include "ops/layout_kernels.h"

namespace isomer {
using namespace ops;

namespace {

std::vector<int64_t> ints_or(const Attributes& attrs, const std::string& name, size_t n, int64_t dflt) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(n, dflt));
  require_valid(v.size() == n, "Col2Im " + name + " must have " + std::to_string(n) + " values, got " +
                                   std::to_string(v.size()));
  return v;
}

}  // namespace

Col2ImGeometry ops::col2im_geometry(const Attributes& attrs, std::vector<int64_t> image, std::vector<int64_t> block) {
  require_valid(!image.empty() && image.size() == block.size(),
                "Col2Im image_shape and block_shape must be non-empty and of one length");
  Col2ImGeometry g;
  const size_t k = image.size();
  g.dilations = ints_or(attrs, "dilations", k, 1);
  g.strides = ints_or(attrs, "strides", k, 1);
  g.pads = ints_or(attrs, "pads", 2 * k, 0);
  for (size_t d = 0; d < k; ++d) {
    require_valid(image[d] >= 1 && block[d] >= 1 && g.dilations[d] >= 1 && g.strides[d] >= 1 && g.pads[d] >= 0 &&
                      g.pads[d + k] >= 0,
                  "Col2Im image, block, dilations and strides must be positive and pads not negative");
    require_valid(image[d] <= (int64_t{1} << 31) && block[d] <= (int64_t{1} << 31) &&
                      g.dilations[d] <= (int64_t{1} << 31) && g.pads[d] <= (int64_t{1} << 31) &&
                      g.pads[d + k] <= (int64_t{1} << 31),
                  "Col2Im extents past 2^31");
    const int64_t span = g.dilations[d] * (block[d] - 1) + 1, padded = image[d] + g.pads[d] + g.pads[d + k];
    require_valid(padded >= span, "Col2Im block of " + std::to_string(span) + " does not fit the padded image of " +
                                      std::to_string(padded));
    g.positions.push_back((padded - span) / g.strides[d] + 1);
  }
  g.block_size = checked_num_elements(block, "Col2Im block_shape");
  g.count = checked_num_elements(g.positions, "Col2Im block positions");
  g.image = std::move(image);
  g.block = std::move(block);
  for (int64_t v : g.image) g.pixels *= v;
  return g;
}

namespace {

std::vector<TensorType> infer_col2im(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require(is_float(x.dtype), "Col2Im input must be floating point, got " + to_string(x));
  require(x.rank() == 3, "Col2Im input must be [N, C * prod(block_shape), L], got " + to_string(x.shape));
  const std::optional<std::vector<int64_t>> image = constant_ints(ctx, 1), block = constant_ints(ctx, 2);
  if (!image || !block) {
    require(ctx.in(1).rank() == 1 && ctx.in(1).shape[0].is_static(), "Col2Im image_shape must be a 1-D constant");
    return {{x.dtype, Shape(2 + static_cast<size_t>(ctx.in(1).shape[0].value), Dim::unknown())}};
  }
  const Col2ImGeometry g = col2im_geometry(ctx.attrs, *image, *block);
  Shape out{x.shape[0], Dim::unknown()};
  if (x.shape[1].is_static()) {
    require_valid(x.shape[1].value % g.block_size == 0, "Col2Im input channels " + std::to_string(x.shape[1].value) +
                                                            " are not a multiple of prod(block_shape) " +
                                                            std::to_string(g.block_size));
    out[1] = x.shape[1].value / g.block_size;
  }
  require_valid(!x.shape[2].is_static() || x.shape[2].value == g.count,
                "Col2Im input has " + std::to_string(x.shape[2].value) + " blocks, the image and block shapes make " +
                    std::to_string(g.count));
  for (int64_t v : g.image) out.push_back(v);
  return {{x.dtype, out}};
}

template <class T>
Array<T> col2im(const Array<T>& x, const Col2ImGeometry& g) {
  require(x.rank() == 3 && x.dims[1] % g.block_size == 0 && x.dims[2] == g.count,
          "Col2Im input does not match its image and block shapes");
  std::vector<int64_t> dims{x.dims[0], x.dims[1] / g.block_size};
  dims.insert(dims.end(), g.image.begin(), g.image.end());
  Array<T> y(dims);
  col2im_add(x.data.data(), y.data.data(), x.dims[0] * dims[1], g);
  return y;
}

std::vector<Tensor> eval_col2im(const EvalContext& ctx) {
  const Col2ImGeometry g = col2im_geometry(ctx.attrs, ints_of(ctx.in(1)), ints_of(ctx.in(2)));
  return {tensor(ctx.in(0).dtype(), col2im(f64(ctx.in(0)), g))};
}

template <class T>
std::vector<Array<T>> exact_col2im(const Attributes& attrs, std::span<const Array<T>> in) {
  return {col2im(in[0], col2im_geometry(attrs, exact_ints(in[1]), exact_ints(in[2])))};
}

}  // namespace

OpDef def_Col2Im() {
  OpDef d;
  d.name = "Col2Im";
  d.min_inputs = d.max_inputs = 3;
  d.min_opset = 18;
  d.attributes = {{"dilations", "ints"}, {"pads", "ints"}, {"strides", "ints"}};
  d.props.linear_in = {0};
  d.infer = infer_col2im;
  d.eval = eval_col2im;
  d.eval_field = exact_col2im<Fp>;
  d.eval_sym = exact_col2im<Sym>;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType> in) {
    Attributes a = attrs;
    if (in.size() > 1 && in[1].rank() == 1 && in[1].shape[0].is_static()) {
      const size_t k = static_cast<size_t>(in[1].shape[0].value);
      set_default(a, "dilations", std::vector<int64_t>(k, 1));
      set_default(a, "strides", std::vector<int64_t>(k, 1));
      set_default(a, "pads", std::vector<int64_t>(2 * k, 0));
    }
    return a;
  };
  d.lower = Lowering::Col2Im;
  return d;
}

}  // namespace isomer
