// Parallel operators (Unity's parallel computation graph): Partition, Combine,
// Replicate and Reduce, and the collectives that compose them (AllReduce =
// Replicate(Reduce), AllGather = Replicate(Combine), ReduceScatter =
// Partition(Reduce)).
//
// Their semantics simulate the devices in one process: a tensor spread over d
// devices is an ordinary tensor with a leading device dimension of extent d, shard
// i being slice i of it. Partition cuts a tensor into d equal blocks along an axis
// and stacks them; Combine concatenates the stacked shards back along an axis;
// Replicate stacks d copies; Reduce sums the stacked partial sums. Operators
// between them act on every shard at once through broadcasting (MatMul of a
// [d, m, k] stack by a [d, k, n] stack is d per-device products), so a parallel
// rewrite is an ordinary rule over ordinary graphs, checked by the same verifiers
// (rules/parallel/parallel.rules):
//
//   MatMul(x, w) = Combine(MatMul(Replicate(x), Partition(w, axis=1)), axis=1)
//
// Every entry is linear in its input and has field and symbolic semantics. Axes
// (`axis`) count the dimensions of one shard, not the device dimension. ONNX has no
// such operators: they export in the domain "isomer.parallel". Plans run them as
// MPI collectives (parallel/lower.h); these entries are what the plans mean.
#include "ops/layout_common.h"

namespace isomer {
using namespace ops;

namespace {

constexpr std::string_view kDomain = "isomer.parallel";

int64_t degree_of(const Attributes& attrs, const std::string& op) {
  const int64_t d = attrs.get_int("degree");
  require(d >= 1, op + " degree must be at least 1, got " + std::to_string(d));
  return d;
}

// The static extent of dim `axis` of `t`, which `op` splits or stacks.
int64_t static_extent(const TensorType& t, int64_t axis, const std::string& op) {
  const Dim& d = t.shape[static_cast<size_t>(axis)];
  require(d.is_static(), op + " needs a static extent along axis " + std::to_string(axis) + ", got " + to_string(t));
  return d.value;
}

// ---- shape rules -----------------------------------------------------------------------

std::vector<TensorType> infer_partition(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const int64_t d = degree_of(ctx.attrs, "Partition");
  const int64_t axis = axis_of(ctx.attrs, std::nullopt, x.rank(), "Partition");
  const int64_t n = static_extent(x, axis, "Partition");
  require(n % d == 0, "Partition cannot cut axis " + std::to_string(axis) + " of extent " + std::to_string(n) +
                          " into " + std::to_string(d) + " equal parts");
  TensorType out{x.dtype, {d}};
  for (int64_t a = 0; a < x.rank(); ++a) out.shape.push_back(a == axis ? Dim(n / d) : x.shape[a]);
  return {out};
}

// Shards are stacked along dim 0: an input of rank >= 2 whose dim 0 is static.
int64_t shard_count(const TensorType& x, const std::string& op) {
  require(x.rank() >= 1, op + " needs stacked shards (a leading device dimension), got " + to_string(x));
  return static_extent(x, 0, op);
}

std::vector<TensorType> infer_combine(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const int64_t d = shard_count(x, "Combine");
  const int64_t axis = axis_of(ctx.attrs, std::nullopt, x.rank() - 1, "Combine");
  const int64_t m = static_extent(x, axis + 1, "Combine");
  TensorType out{x.dtype, {}};
  for (int64_t a = 1; a < x.rank(); ++a) out.shape.push_back(a == axis + 1 ? Dim(m * d) : x.shape[a]);
  return {out};
}

std::vector<TensorType> infer_replicate(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  TensorType out{x.dtype, {degree_of(ctx.attrs, "Replicate")}};
  out.shape.insert(out.shape.end(), x.shape.begin(), x.shape.end());
  return {out};
}

std::vector<TensorType> infer_reduce(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  shard_count(x, "Reduce");
  require_float(x, "Reduce input");
  return {{x.dtype, Shape(x.shape.begin() + 1, x.shape.end())}};
}

std::vector<TensorType> infer_all_reduce(const InferContext& ctx) {
  shard_count(ctx.in(0), "AllReduce");
  require_float(ctx.in(0), "AllReduce input");
  return {ctx.in(0)};
}

std::vector<TensorType> infer_all_gather(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const int64_t d = shard_count(x, "AllGather");
  const int64_t axis = axis_of(ctx.attrs, std::nullopt, x.rank() - 1, "AllGather");
  TensorType out = x;
  out.shape[axis + 1] = static_extent(x, axis + 1, "AllGather") * d;
  return {out};
}

std::vector<TensorType> infer_reduce_scatter(const InferContext& ctx) {
  const TensorType& x = ctx.in(0);
  const int64_t d = shard_count(x, "ReduceScatter");
  require_float(x, "ReduceScatter input");
  const int64_t axis = axis_of(ctx.attrs, std::nullopt, x.rank() - 1, "ReduceScatter");
  const int64_t n = static_extent(x, axis + 1, "ReduceScatter");
  require(n % d == 0, "ReduceScatter cannot cut axis " + std::to_string(axis) + " of extent " + std::to_string(n) +
                          " into " + std::to_string(d) + " equal parts");
  TensorType out = x;
  out.shape[axis + 1] = n / d;
  return {out};
}

// ---- kernels (one template per operator: raw bits, F_p and symbolic) ---------------------

// Stacked shards: block i of `x` along `axis` (extent n/d each) becomes slice i of dim 0.
template <class T>
Array<T> partition(const Array<T>& x, int64_t axis, int64_t d) {
  const std::vector<int64_t> st = strides_of(x.dims);
  const int64_t part = x.dims[axis] / d;
  AxisTables tables{axis_range(d, 0, part, st[axis])};
  for (int64_t a = 0; a < x.rank(); ++a)
    tables.push_back(a == axis ? axis_range(part, 0, 1, st[a]) : axis_range(x.dims[a], 0, 1, st[a]));
  return gather_axes(x, tables);
}

// The inverse: dim 0's slices concatenated along `axis` of a shard.
template <class T>
Array<T> combine(const Array<T>& x, int64_t axis) {
  const std::vector<int64_t> st = strides_of(x.dims);
  const int64_t d = x.dims[0], m = x.dims[axis + 1];
  AxisTables tables;
  for (int64_t a = 1; a < x.rank(); ++a) {
    if (a != axis + 1) {
      tables.push_back(axis_range(x.dims[a], 0, 1, st[a]));
      continue;
    }
    std::vector<int64_t> t;  // index j of the combined axis: shard j / m, row j % m
    for (int64_t j = 0; j < d * m; ++j) t.push_back((j / m) * st[0] + (j % m) * st[a]);
    tables.push_back(std::move(t));
  }
  return gather_axes(x, tables);
}

template <class T>
Array<T> replicate(const Array<T>& x, int64_t d) {
  Array<T> out;
  out.dims = x.dims;
  out.dims.insert(out.dims.begin(), d);
  for (int64_t i = 0; i < d; ++i) out.data.insert(out.data.end(), x.data.begin(), x.data.end());
  return out;
}

template <class T>
Array<T> reduce(const Array<T>& x) {
  Array<T> out(std::vector<int64_t>(x.dims.begin() + 1, x.dims.end()));
  const size_t n = out.data.size();
  for (int64_t i = 0; i < x.dims[0]; ++i)
    for (size_t k = 0; k < n; ++k) out.data[k] += x.data[static_cast<size_t>(i) * n + k];
  return out;
}

// Which element kernel an operator is, for both adapters below.
enum class Kind { Partition, Combine, Replicate, Reduce, AllReduce, AllGather, ReduceScatter };

constexpr bool sums(Kind kind) { return kind == Kind::Reduce || kind == Kind::AllReduce || kind == Kind::ReduceScatter; }

template <Kind K, class T>
Array<T> run(const Attributes& attrs, const Array<T>& x) {
  if constexpr (K == Kind::Partition) return partition(x, normalize_axis(attrs.get_int("axis"), x.rank()), attrs.get_int("degree"));
  if constexpr (K == Kind::Combine) return combine(x, normalize_axis(attrs.get_int("axis"), x.rank() - 1));
  if constexpr (K == Kind::Replicate) return replicate(x, attrs.get_int("degree"));
  if constexpr (K == Kind::Reduce) return reduce(x);
  if constexpr (K == Kind::AllReduce) return replicate(reduce(x), x.dims[0]);
  if constexpr (K == Kind::AllGather) return replicate(combine(x, normalize_axis(attrs.get_int("axis"), x.rank() - 1)), x.dims[0]);
  if constexpr (K == Kind::ReduceScatter)
    return partition(reduce(x), normalize_axis(attrs.get_int("axis"), x.rank() - 1), x.dims[0]);
}

// Float semantics: operators that only move data run on the raw element bits (every
// dtype exact); the summing ones in double, rounded to the element type.
template <Kind K>
std::vector<Tensor> eval_parallel(const EvalContext& ctx) {
  const Tensor& x = ctx.in(0);
  if constexpr (sums(K)) {
    return {tensor(x.dtype(), run<K, double>(ctx.attrs, f64(x)))};
  } else {
    return with_raw_type(x.dtype(), [&](auto tag) {
      using U = decltype(tag);
      return std::vector<Tensor>{raw_tensor(x.dtype(), run<K, U>(ctx.attrs, raw_array<U>(x)))};
    });
  }
}

template <Kind K, class T>
std::vector<Array<T>> exact_parallel(const Attributes& attrs, std::span<const Array<T>> in) {
  return {run<K, T>(attrs, in[0])};
}

// Plans never run these operators: run-plan runs MPI collectives in their place
// (parallel/execute.h). Where a graph does hold one (a rule's side, a test), the
// runtime has no fast path for it and runs the reference semantics above
// (Lowering::ReferenceOnly).

template <Kind K>
OpDef parallel_op(std::string_view name, InferFn infer, std::vector<AttrSpec> attributes) {
  OpDef d;
  d.name = name;
  d.onnx_domain = kDomain;
  d.attributes = std::move(attributes);
  d.props.linear_in = {0};
  d.props.shape_only = !sums(K);
  d.infer = infer;
  d.eval = eval_parallel<K>;
  d.eval_field = exact_parallel<K, Fp>;
  d.eval_sym = exact_parallel<K, Sym>;
  d.lower = Lowering::ReferenceOnly;
  return d;
}

}  // namespace

OpDef def_Partition() {
  return parallel_op<Kind::Partition>("Partition", infer_partition, {{"axis", "int"}, {"degree", "int"}});
}
OpDef def_Combine() { return parallel_op<Kind::Combine>("Combine", infer_combine, {{"axis", "int"}}); }
OpDef def_Replicate() { return parallel_op<Kind::Replicate>("Replicate", infer_replicate, {{"degree", "int"}}); }
OpDef def_Reduce() { return parallel_op<Kind::Reduce>("Reduce", infer_reduce, {}); }
OpDef def_AllReduce() { return parallel_op<Kind::AllReduce>("AllReduce", infer_all_reduce, {}); }
OpDef def_AllGather() { return parallel_op<Kind::AllGather>("AllGather", infer_all_gather, {{"axis", "int"}}); }
OpDef def_ReduceScatter() {
  return parallel_op<Kind::ReduceScatter>("ReduceScatter", infer_reduce_scatter, {{"axis", "int"}});
}

}  // namespace isomer
