// Native lowerings of the operators current exporters add beyond the basic set:
// ArgMax/ArgMin and CumSum along an axis, GroupNormalization and
// InstanceNormalization (kernels/rows.h), Tile, Trilu, GatherElements, GatherND and
// ScatterND (kernels/copy.h), and Range, which is known when the graph is compiled.
#include <cstring>

#include "kernels/copy.h"
#include "kernels/rows.h"
#include "runtime/compiler.h"
#include "runtime/native.h"

namespace isomer::runtime {

namespace {

std::string shape3(int64_t outer, int64_t len, int64_t inner) {
  return to_string(std::vector<int64_t>{outer, len, inner});
}

}  // namespace

// Float32, int32 and int64 data (CLIP's text pooling takes the arg-max of token ids).
bool lower_arg_extreme(Compiler& c, const Node& n) {
  const DType t = c.dtype(n.inputs()[0]);
  if (t != DType::Float32 && t != DType::Int32 && t != DType::Int64) return false;
  int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t> xd = c.val(x).dims;
  const auto axis = static_cast<size_t>(normalize_axis(n.attrs().get_int("axis", 0), static_cast<int64_t>(xd.size())));
  const int64_t outer = num_elements(xd, 0, axis), len = xd[axis], inner = num_elements(xd, axis + 1, xd.size());
  if (len < 1) return false;
  const bool max = n.op_type() == "ArgMax", last = n.attrs().get_int("select_last_index", 0) != 0;
  int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "argmax", n.op_type() + (last ? " last " : " ") + shape3(outer, len, inner),
                            static_cast<double>(num_elements(xd))),
                  {x}, {y}, [t, outer, len, inner, max, last](const std::vector<char*>& p) {
                    auto* out = reinterpret_cast<int64_t*>(p[1]);
                    if (t == DType::Int32)
                      kernels::argmax_axis(reinterpret_cast<const int32_t*>(p[0]), out, outer, len, inner, max, last);
                    else if (t == DType::Int64)
                      kernels::argmax_axis(reinterpret_cast<const int64_t*>(p[0]), out, outer, len, inner, max, last);
                    else
                      kernels::argmax_axis(reinterpret_cast<const float*>(p[0]), out, outer, len, inner, max, last);
                  });
  c.bind(n.output(0), y);
  return true;
}

namespace {

// The axis operand of CumSum (int32 or int64, one element) read from its buffer.
int64_t read_axis(const char* p, DType t) {
  if (t == DType::Int32) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

template <class T>
void run_cumsum(const char* x, char* y, int64_t outer, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  kernels::cumsum_axis(reinterpret_cast<const T*>(x), reinterpret_cast<T*>(y), outer, len, inner, exclusive, reverse);
}

}  // namespace

// Float32, float64, int64 and int32 data (HuggingFace exports count positions with
// an int64 CumSum); an axis that is an input is read when the step runs.
bool lower_cumsum(Compiler& c, const Node& n) {
  const DType t = c.dtype(n.inputs()[0]), axis_type = c.dtype(n.inputs()[1]);
  using Run = void (*)(const char*, char*, int64_t, int64_t, int64_t, bool, bool);
  Run run = t == DType::Float32 ? run_cumsum<float>
            : t == DType::Float64 ? run_cumsum<double>
            : t == DType::Int64   ? run_cumsum<int64_t>
            : t == DType::Int32   ? run_cumsum<int32_t>
                                  : nullptr;
  if (!run || (axis_type != DType::Int64 && axis_type != DType::Int32)) return false;
  int x = c.as_plain(c.id(n.inputs()[0]));
  int axis_id = c.as_plain(c.id(n.inputs()[1]));
  if (num_elements(c.val(axis_id).dims) != 1) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  const bool exclusive = n.attrs().get_int("exclusive", 0) != 0, reverse = n.attrs().get_int("reverse", 0) != 0;
  const std::optional<Tensor> known = c.val(axis_id).known;
  const int64_t fixed = known ? normalize_axis(known->i64_at(0), static_cast<int64_t>(xd.size())) : -1;
  int y = dense_output(c, n);
  const std::string who = describe(n);
  add_native_step(c,
                  step_info(n, "cumsum",
                            std::string("cumsum ") + std::string(dtype_name(t)) + to_string(xd) +
                                (known ? " axis" + std::to_string(fixed) : " axis?") + (exclusive ? " exclusive" : "") +
                                (reverse ? " reverse" : ""),
                            static_cast<double>(num_elements(xd))),
                  {x, axis_id}, {y}, [run, xd, fixed, axis_type, exclusive, reverse, who](const std::vector<char*>& p) {
                    int64_t axis = fixed;
                    if (axis < 0) {
                      const int64_t rank = static_cast<int64_t>(xd.size()), a = read_axis(p[1], axis_type);
                      if (a < -rank || a >= rank)
                        throw Error(who + ": axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
                      axis = a < 0 ? a + rank : a;
                    }
                    const auto ax = static_cast<size_t>(axis);
                    run(p[0], p[2], num_elements(xd, 0, ax), xd[ax], num_elements(xd, ax + 1, xd.size()), exclusive, reverse);
                  });
  c.bind(n.output(0), y);
  return true;
}

namespace {

// The layout a group-norm step reads x in and writes y in, as a block of
// channels (kernels::normalize_groups): plain (1); channel blocks as a
// convolution leaves them (nChw16c: 16, no padding); channels last (all the
// channels), each dense. Another layout, or groups that neither fill whole blocks
// nor fit in one, is converted to plain first. Returns the block and x.
int64_t group_norm_layout(Compiler& c, int& x, int64_t groups) {
  const std::vector<int64_t> xd = c.val(x).dims;
  const dnnl_memory_desc_t& d = c.val(x).md.data;
  const auto& blk = d.format_desc.blocking;
  const bool blocked = !c.strides_of(x);
  if (c.is_dense(x) || xd.size() < 3 || d.ndims == 0 || d.offset0 != 0 || d.format_kind != dnnl_blocked ||
      c.val(x).md.data_type() != dt::f32 || static_cast<size_t>(d.ndims) != xd.size() ||
      (blocked && (blk.inner_nblks != 1 || blk.inner_idxs[0] != 1))) {
    x = c.as_plain(x);
    return 1;
  }
  const int64_t channels = xd[1], per = channels / groups, block = blocked ? blk.inner_blks[0] : channels;
  bool ok = per % block == 0 || block % per == 0;
  // Dense in that layout: the block innermost, then the spatial dims, the channel
  // blocks, the batch (dims of extent 1 have any stride).
  int64_t expect = block;
  for (size_t i = xd.size(); ok && i-- > 0;) {
    const int64_t extent = i == 1 ? channels / block : xd[i];
    ok = d.padded_dims[i] == xd[i] && (extent == 1 || blk.strides[i] == expect);
    expect *= extent;
  }
  if (ok) return block;
  x = c.as_plain(x);
  return 1;
}

// One step normalizing x [batch, channels, ...] in `groups` groups, y = x̂ *
// scale[c] + bias[c], y in x's layout.
int add_group_norm_step(Compiler& c, StepInfo info, int x, int scale, int bias, int64_t groups, float eps,
                        const std::string& name) {
  const int64_t block = group_norm_layout(c, x, groups);
  const std::vector<int64_t> xd = c.val(x).dims;
  const int64_t batch = xd[0], channels = xd[1], spatial = num_elements(xd, 2, xd.size());
  const md_t md = block > 1 ? md_t(c.val(x).md) : plain_md(xd, dt::f32);
  int y = c.new_value(DType::Float32, xd, md, name);
  info.signature = "groupnorm " + to_string(std::vector<int64_t>{batch, channels, spatial}) + " g" +
                   std::to_string(groups) + (block > 1 ? " b" + std::to_string(block) : "");
  info.flops = 8.0 * static_cast<double>(num_elements(xd));
  add_native_step(c, std::move(info), {x, scale, bias}, {y},
                  [batch, channels, spatial, groups, eps, block](const std::vector<char*>& p) {
                    kernels::normalize_groups(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[3]),
                                              batch, channels, spatial, groups, reinterpret_cast<const float*>(p[1]),
                                              reinterpret_cast<const float*>(p[2]), eps, 0, block);
                  });
  return y;
}

}  // namespace

// GroupNormalization and InstanceNormalization (a group per channel). Scale and
// bias are read when the step runs: they need not be constants.
bool lower_group_norm(Compiler& c, const Node& n) {
  if (c.dtype(n.inputs()[0]) != DType::Float32) return false;
  int x = c.id(n.inputs()[0]);
  int scale = dense_f32(c, n.inputs()[1]), bias = dense_f32(c, n.inputs()[2]);
  if (scale < 0 || bias < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.size() < 2) return false;
  const int64_t channels = xd[1];
  const int64_t groups = n.op_type() == "GroupNormalization" ? n.attrs().get_int("num_groups", 0) : channels;
  if (groups <= 0 || channels % groups != 0 || num_elements(c.val(scale).dims) != channels ||
      num_elements(c.val(bias).dims) != channels)
    return false;
  const float eps = static_cast<float>(n.attrs().get_float("epsilon", 1e-5));
  c.bind(n.output(0), add_group_norm_step(c, step_info(n, "groupnorm", ""), x, scale, bias, groups, eps, n.name()));
  return true;
}

// True if Reshape `n` takes dims `from` to `to`, by the operator's shape rule on its
// constant shape. Its output's type cannot be asked for: that would lower its producer.
static bool reshapes_to(Compiler& c, const Node& n, const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (c.depends_on_pending(n.inputs()[1])) return false;
  const Tensor* shape = c.known(n.inputs()[1]);
  if (!shape) return false;
  const TensorType types[2] = {{DType::Float32, make_shape(from)}, {shape->dtype(), make_shape(shape->dims())}};
  const Tensor* constants[2] = {nullptr, shape};
  try {
    const std::vector<TensorType> out = n.op()->infer(InferContext{n.attrs(), types, constants, 1});
    return is_static(out[0].shape) && static_dims(out[0].shape) == to;
  } catch (const Error&) {
    return false;  // a shape this Reshape cannot take: not the chain
  }
}

// PyTorch's GroupNorm as TorchScript (opset 17) and dynamo's decomposition write
// it: Reshape x [N, C, ...] to [N, G, -1], InstanceNormalization (scale and bias
// per group), Reshape back, then a product and a sum by constants per channel.
// One group-norm step on x with the affine folded into its scale and bias, in x's
// layout: the Reshape alone would copy a convolution's blocked output to plain.
bool lower_reshaped_group_norm(Compiler& c, const Node& reshape) {
  const Value in = reshape.inputs()[0];
  if (c.dtype(in) != DType::Float32) return false;
  const Node* norm = c.sole_consumer(reshape.output(0));
  if (!norm || norm->op_type() != "InstanceNormalization" || c.lowered(*norm) || c.is_pending(*norm) ||
      norm->inputs()[0] != reshape.output(0))
    return false;
  const Node* back = c.sole_consumer(norm->output(0));
  if (!back || back->op_type() != "Reshape" || c.lowered(*back) || c.is_pending(*back)) return false;
  const std::vector<int64_t> xd = c.dims(in);
  const std::vector<int64_t> rd = static_dims(c.concrete_types(reshape)[0].shape);
  if (xd.size() < 3 || rd.size() != 3 || rd[0] != xd[0] || !reshapes_to(c, *back, rd, xd)) return false;
  const int64_t channels = xd[1], groups = rd[1];
  if (groups <= 0 || channels % groups != 0) return false;
  if (c.depends_on_pending(norm->inputs()[1]) || c.depends_on_pending(norm->inputs()[2])) return false;
  const Tensor* s = c.known(norm->inputs()[1]);
  const Tensor* b = c.known(norm->inputs()[2]);
  if (!s || !b || !is_float(s->dtype()) || !is_float(b->dtype()) || num_elements(s->dims()) != groups ||
      num_elements(b->dims()) != groups)
    return false;
  const std::vector<double> sg = s->to_f64(), bg = b->to_f64();
  std::vector<double> w(static_cast<size_t>(channels)), bias(static_cast<size_t>(channels));
  for (int64_t k = 0; k < channels; ++k) {
    w[static_cast<size_t>(k)] = sg[static_cast<size_t>(k / (channels / groups))];
    bias[static_cast<size_t>(k)] = bg[static_cast<size_t>(k / (channels / groups))];
  }
  std::vector<const Node*> chain{norm, back};
  const Value cur = fold_channel_affines(c, back->output(0), xd.size(), w, bias, channels, chain);
  StepInfo info = step_info(reshape, "groupnorm", "");
  info.label = norm->name();
  for (const Node* m : chain) {
    info.ops.push_back(m->op_type());
    info.nodes.push_back(node_key(*m));
  }
  const int sid = c.constant_value(Tensor::from_f64(DType::Float32, {channels}, w), norm->name() + ".scale");
  const int bid = c.constant_value(Tensor::from_f64(DType::Float32, {channels}, bias), norm->name() + ".bias");
  const float eps = static_cast<float>(norm->attrs().get_float("epsilon", 1e-5));
  c.bind(cur, add_group_norm_step(c, std::move(info), c.id(in), sid, bid, groups, eps, norm->name()));
  for (const Node* m : chain) c.mark_done(*m);
  return true;
}

bool lower_lrn(Compiler& c, const Node& n) {
  int x = dense_f32(c, n.inputs()[0]);
  if (x < 0) return false;
  const std::vector<int64_t> xd = c.val(x).dims;
  if (xd.size() < 3) return false;
  const int64_t batch = xd[0], channels = xd[1], spatial = num_elements(xd, 2, xd.size());
  const int64_t size = n.attrs().get_int("size");
  const int64_t below = (size - 1) / 2, above = size - 1 - below;
  const float alpha = static_cast<float>(n.attrs().get_float("alpha", 1e-4) / static_cast<double>(size));
  const float beta = static_cast<float>(n.attrs().get_float("beta", 0.75));
  const float bias = static_cast<float>(n.attrs().get_float("bias", 1.0));
  int y = dense_output(c, n);
  add_native_step(c,
                  step_info(n, "lrn", "lrn " + to_string(std::vector<int64_t>{batch, channels, spatial}) + " n" +
                                          std::to_string(size),
                            static_cast<double>(num_elements(xd)) * static_cast<double>(2 * size + 4)),
                  {x}, {y}, [=](const std::vector<char*>& p) {
                    kernels::local_response_norm(reinterpret_cast<const float*>(p[0]), reinterpret_cast<float*>(p[1]),
                                                 batch, channels, spatial, below, above, alpha, beta, bias);
                  });
  c.bind(n.output(0), y);
  return true;
}

// Range's length is its data: with the inputs known the result is a constant (the
// compiler folds it before it gets here; this covers a direct call too).
bool lower_range(Compiler& c, const Node& n) {
  std::vector<Tensor> args;
  for (const Value& v : n.inputs()) {
    const Tensor* t = c.known(v);
    if (!t) return false;
    args.push_back(*t);
  }
  EvalContext ctx{n.attrs(), args, 1};
  c.bind(n.output(0), c.constant_value(n.op()->eval(ctx)[0], n.name()));
  return true;
}

// Tile is one strided copy: the output seen as [r0, d0, r1, d1, ...] reads the
// input with stride 0 along every repeat dim.
bool lower_tile(Compiler& c, const Node& n) {
  const Tensor* reps_value = c.known(n.inputs()[1]);
  if (!reps_value) return false;
  int x = c.id(n.inputs()[0]);
  if (!c.strides_of(x)) x = c.as_plain(x);
  const std::vector<int64_t> xd = c.val(x).dims, xs = *c.strides_of(x), reps = reps_value->to_i64();
  if (reps.size() != xd.size()) return false;
  // Repeats only of dims of extent 1 (repeat_kv written with Tile): a broadcast
  // view, as Expand gives, which a Reshape and a product read in place.
  bool broadcast = true;
  for (size_t a = 0; a < xd.size(); ++a) broadcast = broadcast && (reps[a] == 1 || xd[a] == 1);
  if (broadcast) {
    std::vector<int64_t> dims, st;
    for (size_t a = 0; a < xd.size(); ++a) {
      dims.push_back(xd[a] * reps[a]);
      st.push_back(reps[a] != 1 ? 0 : xs[a]);
    }
    c.bind(n.output(0), c.view(x, dims, st, 0, n.name()));
    return true;
  }
  int y = dense_output(c, n);
  const std::vector<int64_t> ys = row_major(c.val(y).dims);
  std::vector<int64_t> dims, from, to;
  for (size_t a = 0; a < xd.size(); ++a) {
    dims.insert(dims.end(), {reps[a], xd[a]});
    from.insert(from.end(), {0, xd[a] == 1 ? 0 : xs[a]});
    to.insert(to.end(), {xd[a] * ys[a], ys[a]});
  }
  const size_t elem = dtype_size(c.val(x).dtype);
  add_native_step(c, step_info(n, "copy", "tile " + std::string(dtype_name(c.val(x).dtype)) + to_string(dims) + " s" + to_string(from)),
                  {x}, {y}, [elem, dims, from, to](const std::vector<char*>& p) {
                    kernels::strided_copy(elem, p[0], from, p[1], to, dims);
                  });
  c.bind(n.output(0), y);
  return true;
}

// k, when it is an input, is read when the step runs.
bool lower_trilu(Compiler& c, const Node& n) {
  int k_id = -1;
  if (n.inputs().size() > 1 && n.inputs()[1].present()) {
    k_id = c.as_plain(c.id(n.inputs()[1]));
    if (c.val(k_id).dtype != DType::Int64 || num_elements(c.val(k_id).dims) != 1) return false;
  }
  int x = c.as_plain(c.id(n.inputs()[0]));
  const std::vector<int64_t> xd = c.val(x).dims;
  const int64_t rows = xd[xd.size() - 2], cols = xd.back(), mats = num_elements(xd, 0, xd.size() - 2);
  const bool upper = n.attrs().get_int("upper", 1) != 0;
  const size_t elem = dtype_size(c.val(x).dtype);
  std::optional<int64_t> fixed;
  if (k_id < 0) fixed = 0;
  else if (c.val(k_id).known) fixed = c.val(k_id).known->i64_at(0);
  int y = dense_output(c, n);
  std::vector<int> reads{x};
  if (k_id >= 0) reads.push_back(k_id);
  add_native_step(c,
                  step_info(n, "trilu",
                            std::string(upper ? "triu " : "tril ") + std::string(dtype_name(c.val(x).dtype)) +
                                to_string(std::vector<int64_t>{mats, rows, cols}) +
                                (fixed ? " k" + std::to_string(*fixed) : " k?")),
                  reads, {y}, [elem, mats, rows, cols, fixed, upper](const std::vector<char*>& p) {
                    int64_t k = 0;
                    if (fixed) k = *fixed;
                    else std::memcpy(&k, p[1], 8);
                    kernels::trilu(elem, p[0], p.back(), mats, rows, cols, k, upper);
                  });
  c.bind(n.output(0), y);
  return true;
}

bool lower_gather_elements(Compiler& c, const Node& n) {
  const DType index_type = c.dtype(n.inputs()[1]);
  if (index_type != DType::Int64 && index_type != DType::Int32) return false;
  int x = c.as_plain(c.id(n.inputs()[0]));
  int idx = c.as_plain(c.id(n.inputs()[1]));
  const std::vector<int64_t> xd = c.val(x).dims, id = c.val(idx).dims;
  if (xd.size() != id.size() || xd.empty()) return false;
  const int64_t axis = normalize_axis(n.attrs().get_int("axis", 0), static_cast<int64_t>(xd.size()));
  for (size_t d = 0; d < xd.size(); ++d)
    if (static_cast<int64_t>(d) != axis && id[d] > xd[d]) return false;  // the reference kernel says why
  const size_t elem = dtype_size(c.val(x).dtype), ielem = dtype_size(index_type);
  int y = dense_output(c, n);
  const std::string who = describe(n);
  add_native_step(c,
                  step_info(n, "gather", "gather_elements " + std::string(dtype_name(c.val(x).dtype)) + to_string(xd) +
                                             " i" + to_string(id) + " axis" + std::to_string(axis)),
                  {x, idx}, {y}, [elem, xd, id, ielem, axis, who](const std::vector<char*>& p) {
                    int64_t bad = 0;
                    if (!kernels::gather_elements(elem, p[0], xd, p[1], ielem, id, axis, p[2], &bad))
                      throw Error(who + ": index " + std::to_string(bad) + " is out of range");
                  });
  c.bind(n.output(0), y);
  return true;
}

// GatherND: one slice copy per index tuple (torch's advanced indexing, e.g. the
// attention masks transformers builds). Any element type: slices move as bytes.
bool lower_gather_nd(Compiler& c, const Node& n) {
  if (c.dtype(n.inputs()[1]) != DType::Int64) return false;
  if (lower_expert_matmul(c, n)) return true;
  int x = c.as_plain(c.id(n.inputs()[0]));
  int idx = c.as_plain(c.id(n.inputs()[1]));
  const std::vector<int64_t> xd = c.val(x).dims, id = c.val(idx).dims;
  const int64_t b = n.attrs().get_int("batch_dims", 0);
  const int64_t rank = static_cast<int64_t>(xd.size());
  if (id.empty() || b < 0 || b >= static_cast<int64_t>(id.size())) return false;
  const int64_t k = id.back();
  if (k < 1 || b + k > rank) return false;  // the reference kernel says why
  int64_t batches = 1, tuples = 1, slice = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (id[static_cast<size_t>(d)] != xd[static_cast<size_t>(d)]) return false;
    batches *= xd[static_cast<size_t>(d)];
  }
  for (size_t d = static_cast<size_t>(b); d + 1 < id.size(); ++d) tuples *= id[d];
  for (int64_t d = b + k; d < rank; ++d) slice *= xd[static_cast<size_t>(d)];
  std::vector<int64_t> strides(xd.size(), 1);
  for (int64_t d = rank - 2; d >= 0; --d) strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d) + 1] * xd[static_cast<size_t>(d) + 1];
  const int64_t batch_stride = b > 0 ? strides[static_cast<size_t>(b) - 1] : num_elements(xd);
  const size_t elem = dtype_size(c.val(x).dtype);
  int y = dense_output(c, n);
  const std::string who = describe(n);
  add_native_step(c,
                  step_info(n, "gather", "gather_nd " + std::string(dtype_name(c.val(x).dtype)) + to_string(xd) + " i" +
                                             to_string(id) + " batch_dims" + std::to_string(b)),
                  {x, idx}, {y}, [=](const std::vector<char*>& p) {
                    const auto* indices = reinterpret_cast<const int64_t*>(p[1]);
                    const size_t bytes = static_cast<size_t>(slice) * elem;
                    for (int64_t bi = 0; bi < batches; ++bi)
                      for (int64_t t = 0; t < tuples; ++t) {
                        const int64_t tuple = bi * tuples + t;
                        int64_t off = bi * batch_stride;
                        for (int64_t d = 0; d < k; ++d) {
                          const int64_t extent = xd[static_cast<size_t>(b + d)];
                          int64_t i = indices[tuple * k + d];
                          if (i < -extent || i >= extent)
                            throw Error(who + ": index " + std::to_string(i) + " is out of range for an axis of extent " +
                                        std::to_string(extent));
                          off += (i < 0 ? i + extent : i) * strides[static_cast<size_t>(b + d)];
                        }
                        std::memcpy(p[2] + static_cast<size_t>(tuple) * bytes, p[0] + static_cast<size_t>(off) * elem, bytes);
                      }
                  });
  c.bind(n.output(0), y);
  return true;
}

// ScatterND: the data copied into the output, then the updates written over it
// (or combined into it: the reductions, on float32 data).
bool lower_scatter_nd(Compiler& c, const Node& n) {
  if (c.dtype(n.inputs()[1]) != DType::Int64) return false;
  const std::optional<ScatterOperands> ops = scatter_operands(c, n);
  if (!ops) return false;
  const kernels::ScatterReduce reduce = ops->reduce;
  const int x = ops->x, idx = ops->idx, upd = ops->upd;
  const std::vector<int64_t> xd = c.val(x).dims, id = c.val(idx).dims;
  if (id.empty()) return false;
  const int64_t k = id.back(), tuples = k ? num_elements(id) / k : 0;
  const size_t elem = dtype_size(c.val(x).dtype), bytes = c.val(x).bytes;
  int y = dense_output(c, n);
  const std::string who = describe(n);
  add_native_step(c,
                  step_info(n, "scatter", "scatter_nd " + std::string(dtype_name(c.val(x).dtype)) + to_string(xd) +
                                              " i" + to_string(id)),
                  {x, idx, upd}, {y}, [elem, bytes, xd, k, tuples, who, reduce](const std::vector<char*>& p) {
                    std::memcpy(p[3], p[0], bytes);
                    int64_t bad = 0;
                    if (!kernels::scatter_nd(elem, p[3], xd, reinterpret_cast<const int64_t*>(p[1]), tuples, k, p[2],
                                             &bad, reduce))
                      throw Error(who + ": index " + std::to_string(bad) + " is out of range");
                  });
  c.bind(n.output(0), y);
  return true;
}

}  // namespace isomer::runtime
