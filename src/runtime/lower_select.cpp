// Native lowerings of selection and placement by value or index: TopK,
// ScatterElements and OneHot (kernels/select.h), GridSample
// (kernels/grid_sample.h), and Col2Im's sum of columns back into an image
// (ops/col2im.h). Where an instance is outside what the kernels take
// (other element types, an operand not known when it must be), the lowering
// returns false and the reference kernel runs the node.
#include <cstring>

#include "kernels/grid_sample.h"
#include "kernels/parallel.h"
#include "kernels/select.h"
#include "ops/col2im.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

template <class T>
void run_top_k(const std::vector<char*>& p, int64_t outer, int64_t len, int64_t inner, int64_t k, bool smallest) {
  kernels::top_k(reinterpret_cast<const T*>(p[0]), reinterpret_cast<T*>(p[1]),
                 p.size() > 2 ? reinterpret_cast<int64_t*>(p[2]) : nullptr, outer, len, inner, k, smallest);
}

}  // namespace

// Float32, int64 and int32 data (torch's pack_padded_sequence sorts the int64
// lengths with a TopK).
bool lower_top_k(Compiler& c, const Node& n) {
  const DType t = c.dtype(n.inputs()[0]);
  using Run = void (*)(const std::vector<char*>&, int64_t, int64_t, int64_t, int64_t, bool);
  const Run run = t == DType::Float32 ? run_top_k<float>
                  : t == DType::Int64 ? run_top_k<int64_t>
                  : t == DType::Int32 ? run_top_k<int32_t>
                                      : nullptr;
  if (!run) return false;
  int x = t == DType::Float32 ? dense_f32(c, n.inputs()[0]) : c.as_plain(c.id(n.inputs()[0]));
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  const int64_t rank = static_cast<int64_t>(xd.size());
  if (rank == 0) return false;
  const auto axis = static_cast<size_t>(normalize_axis(n.attrs().get_int("axis", -1), rank));
  const int64_t outer = num_elements(xd, 0, axis), len = xd[axis], inner = num_elements(xd, axis + 1, xd.size());
  const int64_t k = n.attrs().get_int("k");
  if (k < 0 || k > len || len >= (int64_t{1} << 31)) return false;  // the reference kernel says why
  const bool smallest = n.attrs().get_int("largest", 1) == 0;
  std::vector<int> writes{dense_output(c, n, 0)};
  if (n.num_outputs() > 1) writes.push_back(dense_output(c, n, 1));
  add_native_step(c,
                  step_info(n, "topk",
                            std::string(smallest ? "bottomk " : "topk ") + std::string(dtype_name(t)) + " " +
                                std::to_string(k) + " " + to_string(std::vector<int64_t>{outer, len, inner}),
                            static_cast<double>(num_elements(xd)) * 4),
                  {x}, writes, [=](const std::vector<char*>& p) { run(p, outer, len, inner, k, smallest); });
  for (size_t i = 0; i < writes.size(); ++i) c.bind(n.output(static_cast<uint32_t>(i)), writes[i]);
  return true;
}

// The data copied into the output, then the updates written over it (or combined
// into it: the reductions, on float32 data). Every index is checked first.
bool lower_scatter_elements(Compiler& c, const Node& n) {
  const DType index_type = c.dtype(n.inputs()[1]);
  if (index_type != DType::Int64 && index_type != DType::Int32) return false;
  const std::optional<ScatterOperands> ops = scatter_operands(c, n);
  if (!ops) return false;
  const kernels::ScatterReduce reduce = ops->reduce;
  const int x = ops->x, idx = ops->idx, upd = ops->upd;
  const std::vector<int64_t> xd = c.val(x).dims, id = c.val(idx).dims;
  if (xd.empty() || id.size() != xd.size() || c.val(upd).dims != id) return false;
  const int64_t axis = normalize_axis(n.attrs().get_int("axis", 0), static_cast<int64_t>(xd.size()));
  for (size_t d = 0; d < xd.size(); ++d)
    if (static_cast<int64_t>(d) != axis && id[d] > xd[d]) return false;  // the reference kernel says why
  const size_t elem = dtype_size(c.val(x).dtype), ielem = dtype_size(index_type), bytes = c.val(x).bytes;
  int y = dense_output(c, n);
  const std::string who = describe(n);
  add_native_step(c,
                  step_info(n, "scatter", "scatter_elements " + std::string(dtype_name(c.val(x).dtype)) +
                                              to_string(xd) + " i" + to_string(id) + " axis" + std::to_string(axis)),
                  {x, idx, upd}, {y}, [=](const std::vector<char*>& p) {
                    std::memcpy(p[3], p[0], bytes);
                    int64_t bad = 0;
                    if (!kernels::scatter_elements(elem, p[3], xd, p[1], ielem, id, axis, p[2], reduce, &bad))
                      throw Error(who + ": index " + std::to_string(bad) + " is out of range for an axis of extent " +
                                  std::to_string(xd[static_cast<size_t>(axis)]));
                  });
  c.bind(n.output(0), y);
  return true;
}

// int64, int32 or float32 indices, depth known when the graph is compiled, off and
// on values read when the step runs.
bool lower_one_hot(Compiler& c, const Node& n) {
  const Tensor* depth_value = c.known(n.inputs()[1]);
  const DType index_type = c.dtype(n.inputs()[0]);
  if (!depth_value || (index_type != DType::Int64 && index_type != DType::Int32 && index_type != DType::Float32))
    return false;
  const kernels::IndexKind kind = index_type == DType::Int64   ? kernels::IndexKind::Int64
                                  : index_type == DType::Int32 ? kernels::IndexKind::Int32
                                                               : kernels::IndexKind::Float32;
  int idx = c.as_plain(c.id(n.inputs()[0]));
  int values = c.as_plain(c.id(n.inputs()[2]));
  const std::vector<int64_t> id = c.val(idx).dims;
  const double depth_f = depth_value->numel() == 1 ? depth_value->f64_at(0) : 0;
  if (!(depth_f >= 1 && depth_f < 1e12) || num_elements(c.val(values).dims) != 2) return false;  // the reference says why
  const auto depth = static_cast<int64_t>(depth_f);
  const auto axis = static_cast<size_t>(normalize_axis(n.attrs().get_int("axis", -1), static_cast<int64_t>(id.size()) + 1));
  const int64_t outer = num_elements(id, 0, axis), inner = num_elements(id, axis, id.size());
  const size_t elem = dtype_size(c.val(values).dtype);
  int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "onehot", "one_hot " + std::string(dtype_name(c.val(values).dtype)) + " " +
                                             to_string(std::vector<int64_t>{outer, depth, inner})),
                  {idx, values}, {y}, [=](const std::vector<char*>& p) {
                    kernels::one_hot(elem, p[0], kind, outer, inner, depth, p[1] + elem, p[1], p[2]);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool lower_grid_sample(Compiler& c, const Node& n) {
  int x = dense_f32(c, n.inputs()[0]), grid = dense_f32(c, n.inputs()[1]);
  if (x < 0 || grid < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims, gd = c.val(grid).dims;
  if (xd.size() != 4 || gd.size() != 4 || gd[3] != 2 || gd[0] != xd[0]) return false;
  const std::string mode_name = n.attrs().get_string("mode", "linear"), pad_name = n.attrs().get_string("padding_mode", "zeros");
  const std::optional<kernels::GridMode> mode = kernels::grid_mode(mode_name);
  const std::optional<kernels::GridPadding> pad = kernels::grid_padding(pad_name);
  if (!mode || !pad) return false;
  const bool align = n.attrs().get_int("align_corners", 0) != 0;
  const kernels::GridSampleShape s{xd[0], xd[1], xd[2], xd[3], gd[1], gd[2]};
  const kernels::GridMode m = *mode;
  const kernels::GridPadding pm = *pad;
  int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "gridsample",
                            "grid_sample " + mode_name + " " + pad_name + (align ? " aligned " : " ") + to_string(xd) +
                                " g" + to_string(gd),
                            static_cast<double>(xd[0] * xd[1] * gd[1] * gd[2]) * (m == kernels::GridMode::Cubic ? 40 : 12)),
                  {x, grid}, {y}, [=](const std::vector<char*>& p) {
                    kernels::grid_sample(reinterpret_cast<const float*>(p[0]), reinterpret_cast<const float*>(p[1]),
                                         reinterpret_cast<float*>(p[2]), s, m, pm, align);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool lower_col2im(Compiler& c, const Node& n) {
  const Tensor* image = c.known(n.inputs()[1]);
  const Tensor* block = c.known(n.inputs()[2]);
  if (!image || !block) return false;
  const int x = dense_f32(c, n.inputs()[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  const ops::Col2ImGeometry g = ops::col2im_geometry(n.attrs(), image->to_i64(), block->to_i64());
  if (xd.size() != 3 || xd[1] % g.block_size != 0 || xd[2] != g.count) return false;  // the reference says why
  const int64_t images = xd[0] * (xd[1] / g.block_size);
  const int team = static_cast<int>(std::min<int64_t>(
      kernels::team_for_work(c.threads(), 8.0 * static_cast<double>(num_elements(xd)) / kernels::kTeamBytes), images));
  const int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "col2im",
                            "col2im " + to_string(xd) + " image " + to_string(g.image) + " block " + to_string(g.block) +
                                " t" + std::to_string(team),
                            static_cast<double>(num_elements(xd))),
                  {x}, {y}, [=](const std::vector<char*>& p) {
                    const auto* in = reinterpret_cast<const float*>(p[0]);
                    auto* out = reinterpret_cast<float*>(p[1]);
                    kernels::parallel_teams(team, [&](int t, int nt) {
                      const int64_t begin = images * t / nt, end = images * (t + 1) / nt;
                      std::fill(out + begin * g.pixels, out + end * g.pixels, 0.0f);
                      ops::col2im_add(in + begin * g.block_size * g.count, out + begin * g.pixels, end - begin, g);
                    });
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
