#include "runtime/native.h"

#include "kernels/copy.h"

namespace isomer::runtime {

std::vector<int64_t> row_major(const std::vector<int64_t>& dims) {
  return kernels::contiguous_strides(dims);
}

int dense_f32(Compiler& c, const Value& v) {
  if (c.dtype(v) != DType::Float32) return -1;
  return c.as_plain(c.id(v));
}

int dense_output(Compiler& c, const Node& n, size_t k) {
  const TensorType t = c.concrete_types(n)[k];
  const std::vector<int64_t> dims = static_dims(t.shape);
  auto type = dnnl_type(t.dtype);
  return c.new_value(t.dtype, dims, type ? plain_md(dims, *type) : md_t(), n.name());
}

std::optional<ScatterOperands> scatter_operands(Compiler& c, const Node& n) {
  const std::optional<kernels::ScatterReduce> reduce =
      kernels::scatter_reduce_named(n.attrs().get_string("reduction", "none"));
  if (!reduce || (*reduce != kernels::ScatterReduce::None && c.dtype(n.inputs()[0]) != DType::Float32))
    return std::nullopt;
  return ScatterOperands{*reduce, c.as_plain(c.id(n.inputs()[0])), c.as_plain(c.id(n.inputs()[1])),
                         c.as_plain(c.id(n.inputs()[2]))};
}

void add_native_step(Compiler& c, StepInfo info, std::vector<int> reads, std::vector<int> writes,
                     std::function<void(const std::vector<char*>& ptrs)> fn) {
  RtStep s;
  info.signature += " t" + std::to_string(c.threads());
  if (info.bytes == 0) {
    for (int r : reads) info.bytes += static_cast<double>(c.val(r).bytes);
    for (int w : writes) info.bytes += static_cast<double>(c.val(w).bytes);
  }
  s.info = std::move(info);
  s.reads = reads;
  s.writes = writes;
  s.make_fn = [reads, writes, fn](const std::function<char*(int)>& data) {
    std::vector<char*> ptrs;
    for (int r : reads) ptrs.push_back(data(r));
    for (int w : writes) ptrs.push_back(data(w));
    return std::function<void()>([ptrs, fn] { fn(ptrs); });
  };
  c.add_step(std::move(s));
}

kernels::StridedRef strided_ref(Compiler& c, int id, const std::vector<int64_t>& dims) {
  const RtValue& v = c.val(id);
  auto own = c.strides_of(id);
  require(own.has_value(), "a native kernel cannot read the blocked layout of '" + v.name + "'");
  kernels::StridedRef r;
  r.dtype = v.dtype;
  r.strides.assign(dims.size(), 0);
  const size_t off = dims.size() - v.dims.size();
  for (size_t i = 0; i < v.dims.size(); ++i)
    if (v.dims[i] != 1) r.strides[off + i] = (*own)[i];
  return r;
}

int Compiler::copy_strided(int src, const std::string& name) {
  const RtValue& s = values_[src];
  auto strides = strides_of(src);
  require(strides.has_value(), "copy_strided: '" + s.name + "' is blocked");
  auto type = dnnl_type(s.dtype);
  int out = new_value(s.dtype, s.dims, type ? plain_md(s.dims, *type) : md_t(), name);
  StepInfo info;
  info.kind = "copy";
  info.label = s.name;
  info.ops = {"Copy"};
  info.signature = "copy " + std::string(dtype_name(s.dtype)) + to_string(s.dims) + " s" + to_string(*strides);
  const size_t elem = dtype_size(s.dtype);
  std::vector<int64_t> dims = s.dims, from = *strides, to = row_major(s.dims);
  add_native_step(*this, info, {src}, {out}, [elem, dims, from, to](const std::vector<char*>& p) {
    kernels::strided_copy(elem, p[0], from, p[1], to, dims);
  });
  return out;
}

ConvGeometry conv_geometry(int64_t batch, int64_t channels, const std::vector<ops::WindowAxis>& axes) {
  ConvGeometry g;
  g.out = {batch, channels};
  for (const ops::WindowAxis& a : axes) {
    g.out.push_back(a.out);
    g.strides.push_back(a.stride);
    g.dilations.push_back(a.dilation - 1);
    g.pad_begin.push_back(a.pad_begin);
    g.pad_end.push_back((a.out - 1) * a.stride + (a.kernel - 1) * a.dilation + 1 - a.in - a.pad_begin);
  }
  return g;
}

std::vector<ops::WindowAxis> plan_padded_window(const ops::Window& w, const std::vector<int64_t>& in,
                                                const std::vector<int64_t>& extra) {
  std::vector<int64_t> padded = in;
  const size_t r = extra.size() / 2;
  for (size_t i = 0; i < r; ++i) padded[i] += extra[i] + extra[r + i];
  std::vector<ops::WindowAxis> axes = ops::plan_window(w, padded);
  for (size_t i = 0; i < r; ++i) {
    axes[i].pad_begin += extra[i];
    axes[i].in = in[i];
  }
  return axes;
}

}  // namespace isomer::runtime
