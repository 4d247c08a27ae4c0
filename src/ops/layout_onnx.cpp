// ONNX version adapters of the layout operators: older opsets carried shape
// operands (Split split, Reshape shape, Squeeze/Unsqueeze axes, Slice starts/ends/
// axes, Pad pads/value) as attributes; opset 18 added Split num_outputs and Pad
// axes. Import turns every form into the canonical opset-17 form; export turns it
// back for the model's opset and fails with a clear message where it cannot.
// Axes are written as they are: a model that used negative axes before opset 11
// (PyTorch did) gets them back unchanged.
#include <algorithm>

#include "ir/graph.h"
#include "ir/invalid_node.h"
#include "ops/layout_kernels.h"

namespace isomer::ops {

namespace {

// Moves an integer-list attribute (older opsets) into input `slot` as a constant.
void attr_to_input(OnnxForm& f, const std::string& name, size_t slot, GraphBuilder& b) {
  if (!f.attrs.has(name)) return;
  if (f.inputs.size() <= slot) f.inputs.resize(slot + 1);
  f.inputs[slot] = b.constant(Tensor::vector_i64(f.attrs.get_ints(name)));
  f.attrs.erase(name);
}

bool has_operand(const OnnxForm& f, size_t slot) { return slot < f.inputs.size() && f.inputs[slot].present(); }

const Tensor& constant_operand(const OnnxForm& f, size_t slot, const std::string& what, int64_t opset) {
  const Tensor* c = f.inputs[slot].constant();
  require(c != nullptr, "a non-constant " + what + " cannot be written at opset " + std::to_string(opset));
  return *c;
}

void trim_inputs(OnnxForm& f) {
  while (!f.inputs.empty() && !f.inputs.back().present()) f.inputs.pop_back();
}

// Moves constant input `slot` back into an integer-list attribute (older opsets).
void input_to_attr(OnnxForm& f, size_t slot, const std::string& name, int64_t opset) {
  if (!has_operand(f, slot)) return;
  f.attrs.set(name, constant_operand(f, slot, name, opset).to_i64());
  f.inputs[slot] = Value{};
  trim_inputs(f);
}

}  // namespace

std::string import_concat(OnnxForm& f, int64_t opset, GraphBuilder&) {
  if (opset < 4 && !f.attrs.has("axis")) f.attrs.set("axis", int64_t{1});
  return "";
}

std::string import_split(OnnxForm& f, int64_t opset, GraphBuilder& b) {
  if (opset < 13) attr_to_input(f, "split", 1, b);
  if (f.attrs.has("num_outputs")) {  // opset 18: the node's output count says the same
    const int64_t n = f.attrs.get_int("num_outputs");
    if (n != static_cast<int64_t>(f.num_outputs))
      return "Split num_outputs " + std::to_string(n) + " differs from its " + std::to_string(f.num_outputs) +
             " outputs";
    f.attrs.erase("num_outputs");
  }
  return "";
}

void export_split(OnnxForm& f, int64_t opset) {
  const TensorType& x = f.inputs[0].type();
  if (!has_operand(f, 1) && opset < 18) {
    // Before opset 18 an implicit split had to be even: write uneven sizes out.
    const Dim& extent = x.shape[normalize_axis(f.attrs.get_int("axis", 0), x.rank())];
    const int64_t n = static_cast<int64_t>(f.num_outputs);
    if (extent.is_static() && extent.value % n != 0) {
      f.inputs.resize(2);
      f.inputs[1] = Node::make_constant(Tensor::vector_i64(equal_split(extent.value, n)))->output(0);
    }
  }
  if (opset < 13) input_to_attr(f, 1, "split", opset);
  else if (opset >= 18 && !has_operand(f, 1)) f.attrs.set("num_outputs", static_cast<int64_t>(f.num_outputs));
}

std::string import_reshape(OnnxForm& f, int64_t opset, GraphBuilder& b) {
  if (opset < 5) attr_to_input(f, "shape", 1, b);
  return "";
}

void export_reshape(OnnxForm& f, int64_t opset) {
  if (opset < 14 && f.attrs.has("allowzero")) {
    if (f.attrs.get_int("allowzero") != 0) {
      std::vector<int64_t> shape = constant_operand(f, 1, "Reshape shape with allowzero", opset).to_i64();
      require(std::find(shape.begin(), shape.end(), 0) == shape.end(),
              "Reshape with allowzero=1 and a 0 in its shape cannot be written at opset " + std::to_string(opset));
    }
    f.attrs.erase("allowzero");
  }
  if (opset < 5) input_to_attr(f, 1, "shape", opset);
}

std::string import_axes_input(OnnxForm& f, int64_t opset, GraphBuilder& b) {
  if (opset < 13) {
    attr_to_input(f, "axes", 1, b);
    return "";
  }
  // A 0-d axes tensor names one axis: torch's dynamo exporter (2.15) writes such
  // Unsqueezes for scaled_dot_product_attention with enable_gqa, and ONNX Runtime
  // reads them so. It becomes the 1-D tensor the standard asks for.
  if (f.inputs.size() > 1 && f.inputs[1].present())
    if (const Tensor* axes = f.inputs[1].constant(); axes && axes->dims().empty())
      f.inputs[1] = b.constant(axes->reshaped({1}));
  return "";
}

void export_squeeze(OnnxForm& f, int64_t opset) {
  if (opset >= 13) return;
  input_to_attr(f, 1, "axes", opset);
}

void export_unsqueeze(OnnxForm& f, int64_t opset) {
  if (opset >= 13) return;
  input_to_attr(f, 1, "axes", opset);
}

std::string import_slice(OnnxForm& f, int64_t opset, GraphBuilder& b) {
  if (opset >= 10) return "";
  f.inputs.resize(1);
  if (!f.attrs.has("starts") || !f.attrs.has("ends")) return "Slice without starts or ends";
  attr_to_input(f, "starts", 1, b);
  attr_to_input(f, "ends", 2, b);
  attr_to_input(f, "axes", 3, b);
  return "";
}

void export_slice(OnnxForm& f, int64_t opset) {
  if (opset >= 10) return;
  if (has_operand(f, 4)) {
    std::vector<int64_t> steps = constant_operand(f, 4, "Slice steps", opset).to_i64();
    require(std::all_of(steps.begin(), steps.end(), [](int64_t s) { return s == 1; }),
            "Slice with steps other than 1 cannot be written at opset " + std::to_string(opset));
    f.inputs[4] = Value{};
  }
  input_to_attr(f, 3, "axes", opset);
  input_to_attr(f, 2, "ends", opset);
  input_to_attr(f, 1, "starts", opset);
}

std::string import_pad(OnnxForm& f, int64_t opset, GraphBuilder& b) {
  const std::string mode = f.attrs.get_string("mode", "constant");
  require_valid(mode == "constant" || mode == "reflect" || mode == "edge" || mode == "wrap",
                "Pad mode '" + mode + "' is not an ONNX mode");
  if (mode == "wrap") return "Pad mode 'wrap' is not supported";
  const TensorType x = f.inputs[0].type();
  if (opset < 11) {
    const std::string name = f.attrs.has("paddings") ? "paddings" : "pads";  // opset 1 named it paddings
    if (!f.attrs.has(name)) return "Pad without pads";
    f.inputs.resize(1);
    f.inputs.push_back(b.constant(Tensor::vector_i64(f.attrs.get_ints(name))));
    f.attrs.erase(name);
    const double value = f.attrs.get_float("value", 0.0);
    f.attrs.erase("value");
    if (value != 0.0)
      f.inputs.push_back(b.constant(Tensor::from_f64(x.dtype, {}, std::vector<double>{value}, FloatToInt::Saturate)));
  }
  if (has_operand(f, 3)) {  // opset 18: pads for the listed axes only
    const Tensor* axes = f.inputs[3].constant();
    const Tensor* pads = f.inputs[1].constant();
    if (!axes) return "Pad axes input is not constant";
    if (!pads) return "Pad pads input is not constant while an axes input is given";
    const int64_t rank = x.rank();
    std::vector<int64_t> ax = normalized_axes(axes->to_i64(), rank, "Pad");
    std::vector<int64_t> given = pads->to_i64();
    if (given.size() != 2 * ax.size()) return "Pad pads and axes differ in length";
    std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
    for (size_t i = 0; i < ax.size(); ++i) {
      full[ax[i]] = given[i];
      full[ax[i] + rank] = given[i + ax.size()];
    }
    f.inputs[1] = b.constant(Tensor::vector_i64(full));
  }
  if (f.inputs.size() > 3) f.inputs.resize(3);
  trim_inputs(f);
  return "";
}

void export_pad(OnnxForm& f, int64_t opset) {
  if (opset >= 11) return;
  if (has_operand(f, 2)) {
    f.attrs.set("value", constant_operand(f, 2, "Pad constant_value", opset).f64_at(0));
    f.inputs[2] = Value{};
  }
  input_to_attr(f, 1, opset < 2 ? "paddings" : "pads", opset);
}

}  // namespace isomer::ops
