// DFT (torch.fft's export: FNet's token mixing, spectrograms): the discrete
// Fourier transform along one axis of a real ([..., 1]) or complex ([..., 2])
// signal, complex out. isomer's form is opset 20's: the axis is input 2 (default
// -2); opset 17's axis attribute (default 1) becomes that input at import and
// goes back at export. The arithmetic is kernels/dft.h's, for this evaluator and
// the runtime's kernel alike.
#include "ops/dft.h"

#include "ir/graph.h"
#include "ir/invalid_node.h"
#include "ops/kernels.h"

namespace isomer {
using namespace ops;

int64_t ops::dft_axis(const Tensor* axis, int64_t rank) {
  int64_t a = -2;
  if (axis) {
    require_valid(axis->numel() == 1, "DFT axis must be one value, got " + to_string(axis->dims()));
    a = axis->to_i64()[0];
  }
  require_valid(a >= -rank && a <= rank - 2 && a != -1,
                "DFT axis " + std::to_string(a) + " is out of range for a rank-" + std::to_string(rank) + " signal");
  return a < 0 ? a + rank : a;
}

kernels::DftShape ops::dft_geometry(const Attributes& attrs, const std::vector<int64_t>& dims, int64_t axis,
                                    int64_t length) {
  const auto rank = static_cast<int64_t>(dims.size());
  require_valid(rank >= 2 && (dims.back() == 1 || dims.back() == 2),
                "DFT input " + to_string(dims) + " must end in 1 (real) or 2 (complex) parts");
  kernels::DftShape s;
  s.parts = dims.back();
  s.n_in = dims[static_cast<size_t>(axis)];
  for (int64_t i = 0; i < axis; ++i) s.outer *= dims[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank - 1; ++i) s.inner *= dims[static_cast<size_t>(i)];
  s.length = length < 0 ? s.n_in : length;
  require_valid(s.length > 0, "DFT length must be positive, got " + std::to_string(s.length));
  s.inverse = attrs.get_int("inverse", 0) != 0;
  const bool onesided = attrs.get_int("onesided", 0) != 0;
  require_valid(!onesided || (s.parts == 1 && !s.inverse), "a one-sided DFT takes a real signal, forward only");
  s.n_out = onesided ? s.length / 2 + 1 : s.length;
  return s;
}

namespace {

std::vector<TensorType> infer_dft(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  require_float(x, "DFT input");
  const auto rank = static_cast<int64_t>(x.rank());
  require_valid(rank >= 2, "DFT input " + to_string(x.shape) + " must have a signal axis and a parts axis");
  const Dim& last = x.shape.back();
  require_valid(!last.is_static() || last.value == 1 || last.value == 2,
                "DFT input " + to_string(x.shape) + " must end in 1 (real) or 2 (complex) parts");
  require(!ctx.has_input(2) || ctx.constant(2), "DFT with an axis computed at run time");
  const int64_t axis = dft_axis(ctx.has_input(2) ? ctx.constant(2) : nullptr, rank);
  const bool onesided = ctx.attrs.get_int("onesided", 0) != 0;
  require_valid(!onesided || !last.is_static() || last.value == 1, "a one-sided DFT takes a real signal");
  require_valid(!onesided || ctx.attrs.get_int("inverse", 0) == 0, "a one-sided DFT is forward only");
  Shape out = x.shape;
  out.back() = Dim(2);
  Dim& n = out[static_cast<size_t>(axis)];
  if (ctx.has_input(1)) {
    const Tensor* len = ctx.constant(1);
    if (len) {
      require_valid(len->numel() == 1 && len->to_i64()[0] > 0, "DFT dft_length must be one positive value");
      n = Dim(len->to_i64()[0]);
    } else {
      n = Dim::unknown();
    }
  }
  if (onesided && n.is_static()) n = Dim(n.value / 2 + 1);
  else if (onesided) n = Dim::unknown();
  return {{x.dtype, out}};
}

std::vector<Tensor> eval_dft(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t axis = dft_axis(ctx.has_input(2) ? &ctx.in(2) : nullptr, static_cast<int64_t>(x.dims().size()));
  const int64_t length = ctx.has_input(1) ? ctx.in(1).to_i64().at(0) : -1;
  const kernels::DftShape s = dft_geometry(ctx.attrs, x.dims(), axis, length);
  const auto [cosines, sines] = kernels::dft_twiddles(s.length);
  const std::vector<double> xv = x.to_f64();
  std::vector<double> y(static_cast<size_t>(s.outer * s.n_out * s.inner * 2));
  kernels::dft_rows(xv.data(), y.data(), s, cosines.data(), sines.data(), 0, s.outer);
  std::vector<int64_t> od = x.dims();
  od.back() = 2;
  od[static_cast<size_t>(axis)] = s.n_out;
  return {Tensor::from_f64(x.dtype(), od, y)};
}

// Opsets 17 to 19 name the axis as an attribute, default 1.
std::string import_dft(OnnxForm& form, int64_t opset, GraphBuilder& b) {
  if (opset >= 20) return "";
  const int64_t axis = form.attrs.has("axis") ? form.attrs.get_int("axis") : 1;
  form.attrs.erase("axis");
  if (form.inputs.size() < 3) form.inputs.resize(3);
  form.inputs[2] = b.constant(Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{axis}));
  return "";
}

void export_dft(OnnxForm& form, int64_t opset) {
  if (opset >= 20) return;
  int64_t axis = -2;
  if (form.inputs.size() > 2 && form.inputs[2].present()) {
    const Tensor* a = form.inputs[2].constant();
    require(a != nullptr && a->numel() == 1, "a DFT axis computed at run time cannot be written at opset " +
                                                 std::to_string(opset));
    axis = a->to_i64()[0];
    form.inputs.resize(2);
  }
  form.attrs.set("axis", axis);
  while (!form.inputs.empty() && !form.inputs.back().present()) form.inputs.pop_back();
}

}  // namespace

OpDef def_DFT() {
  OpDef d;
  d.name = "DFT";
  d.min_inputs = 1;
  d.max_inputs = 3;
  d.min_opset = 17;
  d.attributes = {{"inverse", "int"}, {"onesided", "int"}};
  d.props.linear_in = {0};
  d.infer = infer_dft;
  d.eval = eval_dft;
  d.onnx_import = import_dft;
  d.onnx_export = export_dft;
  d.canonical_attrs = [](const Attributes& attrs, std::span<const TensorType>) {
    Attributes a = attrs;
    set_default(a, "inverse", int64_t{0});
    set_default(a, "onesided", int64_t{0});
    return a;
  };
  d.lower = Lowering::Dft;
  return d;
}

}  // namespace isomer
