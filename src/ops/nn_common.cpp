#include "ops/nn_common.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/invalid_node.h"

namespace isomer::ops {

namespace {

std::vector<int64_t> per_axis(const Attributes& attrs, const std::string& name, size_t count, int64_t dflt,
                              int64_t min_value) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(count, dflt));
  require_valid(v.size() == count, name + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(count));
  for (int64_t x : v) require_valid(x >= min_value, name + " value " + std::to_string(x) + " is out of range");
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

bool same_padding(const Window& w) { return w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER"; }

}  // namespace

Window read_window(const Attributes& attrs, std::vector<int64_t> kernel) {
  Window w;
  const size_t r = kernel.size();
  for (int64_t k : kernel) require_valid(k >= 1, "kernel extent " + std::to_string(k) + " is out of range");
  w.kernel = std::move(kernel);
  w.strides = per_axis(attrs, "strides", r, 1, 1);
  w.dilations = per_axis(attrs, "dilations", r, 1, 1);
  std::vector<int64_t> pads = per_axis(attrs, "pads", 2 * r, 0, 0);
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  w.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  w.auto_pad = attrs.get_string("auto_pad", "NOTSET");
  require_valid(w.auto_pad == "NOTSET" || w.auto_pad == "VALID" || same_padding(w),
          "auto_pad '" + w.auto_pad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  int64_t ceil_mode = attrs.get_int("ceil_mode", 0);
  require(ceil_mode == 0 || ceil_mode == 1, "ceil_mode must be 0 or 1");
  w.ceil_mode = ceil_mode == 1;
  return w;
}

std::pair<int64_t, int64_t> resolved_pads(const Window& w, size_t i, int64_t in) {
  if (w.auto_pad == "VALID") return {0, 0};
  if (!same_padding(w)) return {w.pad_begin[i], w.pad_end[i]};
  // "Same" padding: ceil(in / stride) windows; the odd pad goes last (UPPER) or first (LOWER).
  int64_t out = ceil_div(in, w.strides[i]);
  int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + w.extent(i) - in);
  int64_t small = total / 2, large = total - total / 2;
  return w.auto_pad == "SAME_UPPER" ? std::pair{small, large} : std::pair{large, small};
}

WindowAxis plan_window_axis(const Window& w, size_t i, int64_t in) {
  WindowAxis a;
  a.in = in;
  a.kernel = w.kernel[i];
  a.stride = w.strides[i];
  a.dilation = w.dilations[i];
  auto [begin, end] = resolved_pads(w, i, in);
  a.pad_begin = begin;
  const int64_t span = in + begin + end - w.extent(i);
  require_valid(span >= 0, "window extent " + std::to_string(w.extent(i)) + " exceeds padded input extent " +
                         std::to_string(in + begin + end) + " on spatial axis " + std::to_string(i));
  if (w.ceil_mode && w.auto_pad == "NOTSET") {
    a.out = ceil_div(span, a.stride) + 1;
    // A window that would start in the right padding is dropped (ONNX, as PyTorch).
    if ((a.out - 1) * a.stride >= in + begin) --a.out;
  } else {
    a.out = floor_div(span, a.stride) + 1;
  }
  return a;
}

std::vector<WindowAxis> plan_window(const Window& w, const std::vector<int64_t>& in) {
  require(in.size() == w.rank(),
          "window has " + std::to_string(w.rank()) + " spatial axes, input has " + std::to_string(in.size()));
  std::vector<WindowAxis> axes;
  for (size_t i = 0; i < w.rank(); ++i) axes.push_back(plan_window_axis(w, i, in[i]));
  return axes;
}

Dim window_output_dim(const Window& w, size_t i, const Dim& in) {
  if (in.is_static()) return plan_window_axis(w, i, in.value).out;
  if (w.strides[i] != 1) return Dim::unknown();
  bool keeps_extent = same_padding(w) || (w.auto_pad == "NOTSET" && w.pad_begin[i] + w.pad_end[i] == w.extent(i) - 1) ||
                      (w.auto_pad == "VALID" && w.extent(i) == 1);
  return keeps_extent ? in : Dim::unknown();
}

void resolve_auto_pad(Attributes& attrs, const Window& w, const Shape& spatial) {
  if (w.auto_pad == "NOTSET") {
    attrs.erase("auto_pad");
    return;
  }
  if (!is_static(spatial)) return;
  std::vector<int64_t> begin, end;
  for (size_t i = 0; i < w.rank(); ++i) {
    auto [b, e] = resolved_pads(w, i, spatial[i].value);
    begin.push_back(b);
    end.push_back(e);
  }
  begin.insert(begin.end(), end.begin(), end.end());
  attrs.set("pads", begin);
  attrs.erase("auto_pad");
  attrs.erase("ceil_mode");
}

Attributes canonical_window_attrs(const Attributes& attrs, std::span<const TensorType> inputs, bool conv) {
  if (inputs.empty() || inputs[0].dtype == DType::Undefined || inputs[0].rank() < 3) return attrs;
  const size_t r = static_cast<size_t>(inputs[0].rank() - 2);
  Attributes a = attrs;
  if (a.get_string("auto_pad", "NOTSET") == "NOTSET") {
    a.erase("auto_pad");
    if (!a.has("pads")) a.set("pads", std::vector<int64_t>(2 * r, 0));
  }
  if (!a.has("strides")) a.set("strides", std::vector<int64_t>(r, 1));
  if (!a.has("dilations")) a.set("dilations", std::vector<int64_t>(r, 1));
  if (conv) {
    if (!a.has("group")) a.set("group", int64_t{1});
    a.erase("kernel_shape");
  } else if (!a.has("ceil_mode")) {
    a.set("ceil_mode", int64_t{0});
  }
  return a;
}

}  // namespace isomer::ops
