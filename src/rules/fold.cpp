// The fold functions rules may call (see rules/fold.h). Value folds compute on
// attribute values; tensor folds are templates over the element type so that the
// verifiers run the same function on field and symbolic elements.
#include "rules/fold.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "ops/kernels.h"
#include "rules/expr.h"

namespace isomer {
namespace {

using ops::broadcast_map;
using ops::map;

// ---- argument helpers --------------------------------------------------------------

[[noreturn]] void not_applicable(std::string_view fold, const std::string& why) {
  throw NotApplicable(std::string(fold) + ": " + why);
}

std::vector<int64_t> ints_arg(std::span<const AttrValue> a, size_t i, std::string_view fold) {
  try {
    return expr_ints(a[i], std::string(fold) + " argument " + std::to_string(i + 1));
  } catch (const Error& e) {
    not_applicable(fold, e.what());
  }
}
int64_t int_arg(std::span<const AttrValue> a, size_t i, std::string_view fold) {
  try {
    return expr_int(a[i], std::string(fold) + " argument " + std::to_string(i + 1));
  } catch (const Error& e) {
    not_applicable(fold, e.what());
  }
}
double float_arg(std::span<const AttrValue> a, size_t i, std::string_view fold) {
  if (const auto* d = std::get_if<double>(&a[i])) return *d;
  if (const auto* n = std::get_if<int64_t>(&a[i])) return static_cast<double>(*n);
  if (const auto* t = std::get_if<Tensor>(&a[i]); t && t->numel() == 1) return t->f64_at(0);
  not_applicable(fold, "argument " + std::to_string(i + 1) + " is not a number");
}

AttrValue boolean(bool b) { return int64_t{b ? 1 : 0}; }

// ---- value folds ---------------------------------------------------------------------

// compose_perm(p, q)[i] = p[q[i]]: Transpose(Transpose(x, p), q) = Transpose(x, compose_perm(p, q))
AttrValue compose_perm(std::span<const AttrValue> a) {
  std::vector<int64_t> p = ints_arg(a, 0, "compose_perm"), q = ints_arg(a, 1, "compose_perm");
  if (p.size() != q.size()) not_applicable("compose_perm", "permutations of different lengths");
  std::vector<int64_t> r;
  for (int64_t axis : q) {
    if (axis < 0 || axis >= static_cast<int64_t>(p.size())) not_applicable("compose_perm", "axis out of range");
    r.push_back(p[static_cast<size_t>(axis)]);
  }
  return r;
}

AttrValue is_identity_perm(std::span<const AttrValue> a) {
  std::vector<int64_t> p = ints_arg(a, 0, "is_identity_perm");
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return boolean(false);
  return boolean(true);
}

// all_equal(list or tensor, v): every element equals v (true for an empty list).
AttrValue all_equal(std::span<const AttrValue> a) {
  double v = float_arg(a, 1, "all_equal");
  std::vector<double> items;
  if (const auto* t = std::get_if<Tensor>(&a[0])) {
    if (!is_numeric(t->dtype())) not_applicable("all_equal", "not a numeric tensor");
    items = t->to_f64();
  } else if (const auto* f = std::get_if<std::vector<double>>(&a[0])) {
    items = *f;
  } else {
    for (int64_t x : ints_arg(a, 0, "all_equal")) items.push_back(static_cast<double>(x));
  }
  return boolean(std::all_of(items.begin(), items.end(), [v](double x) { return x == v; }));
}

// contains(list or tensor, v): some element equals v.
AttrValue contains(std::span<const AttrValue> a) {
  double v = float_arg(a, 1, "contains");
  std::vector<double> items;
  if (const auto* t = std::get_if<Tensor>(&a[0])) {
    if (!is_numeric(t->dtype())) not_applicable("contains", "not a numeric tensor");
    items = t->to_f64();
  } else if (const auto* f = std::get_if<std::vector<double>>(&a[0])) {
    items = *f;
  } else {
    for (int64_t x : ints_arg(a, 0, "contains")) items.push_back(static_cast<double>(x));
  }
  return boolean(std::any_of(items.begin(), items.end(), [v](double x) { return x == v; }));
}

// values(t): an integer tensor's elements as a list.
AttrValue values(std::span<const AttrValue> a) {
  const auto* t = std::get_if<Tensor>(&a[0]);
  if (!t || !is_integer(t->dtype())) not_applicable("values", "not an integer tensor");
  return t->to_i64();
}

// slice_dims(dims, start, end): dims[start:end] with Shape-15's clamping of negative
// and out-of-range bounds.
AttrValue slice_dims(std::span<const AttrValue> a) {
  std::vector<int64_t> d = ints_arg(a, 0, "slice_dims");
  const int64_t rank = static_cast<int64_t>(d.size());
  auto clamp_axis = [rank](int64_t x) { return std::clamp(x < 0 ? x + rank : x, int64_t{0}, rank); };
  int64_t start = clamp_axis(int_arg(a, 1, "slice_dims")), end = clamp_axis(int_arg(a, 2, "slice_dims"));
  return std::vector<int64_t>(d.begin() + start, d.begin() + std::max(start, end));
}

// all_static(dims): no dim is symbolic (-1 in shape()'s list).
AttrValue all_static(std::span<const AttrValue> a) {
  std::vector<int64_t> d = ints_arg(a, 0, "all_static");
  return boolean(std::all_of(d.begin(), d.end(), [](int64_t x) { return x >= 0; }));
}

// i64_tensor(list): the list as a 1-D int64 tensor (a Reshape or Shape operand).
AttrValue i64_tensor(std::span<const AttrValue> a) { return Tensor::vector_i64(ints_arg(a, 0, "i64_tensor")); }

// gather_dims(dims, indices): dims at the indices (an int64 tensor of the indices'
// shape), negative indices counted from the end; not applicable if a gathered dim is
// symbolic (-1) or an index is out of range.
AttrValue gather_dims(std::span<const AttrValue> a) {
  std::vector<int64_t> d = ints_arg(a, 0, "gather_dims");
  const auto* idx = std::get_if<Tensor>(&a[1]);
  if (!idx || !is_integer(idx->dtype())) not_applicable("gather_dims", "indices are not an integer tensor");
  std::vector<int64_t> out;
  const int64_t n = static_cast<int64_t>(d.size());
  for (int64_t i : idx->to_i64()) {
    if (i < 0) i += n;
    if (i < 0 || i >= n || d[static_cast<size_t>(i)] < 0) not_applicable("gather_dims", "index out of range or symbolic");
    out.push_back(d[static_cast<size_t>(i)]);
  }
  return Tensor::from_i64(DType::Int64, idx->dims(), out);
}

// per_channel_dims(dims, rank, channels): a constant of these dims broadcasts against
// an output of `rank` dims as [1, channels, 1, ...] (one value per channel, or one value).
AttrValue per_channel_dims(std::span<const AttrValue> a) {
  std::vector<int64_t> d = ints_arg(a, 0, "per_channel_dims");
  const int64_t rank = int_arg(a, 1, "per_channel_dims"), channels = int_arg(a, 2, "per_channel_dims");
  if (rank < 2 || static_cast<int64_t>(d.size()) > rank) return boolean(false);
  const int64_t pad = rank - static_cast<int64_t>(d.size());
  for (int64_t i = 0; i < static_cast<int64_t>(d.size()); ++i)
    if (d[static_cast<size_t>(i)] != 1 && (i + pad != 1 || d[static_cast<size_t>(i)] != channels)) return boolean(false);
  return boolean(true);
}

// axes_below(axes, rank, k): every axis of the list, counted against `rank` (negative
// from the end), lies in [0, k). A selection on such axes of a rank-`rank` result
// skips what an operand of rank `rank - k` broadcasts over, and misses the last
// (k = rank - 1) or the normalized axes (k = the first of them).
AttrValue axes_below(std::span<const AttrValue> a) {
  std::vector<int64_t> axes = ints_arg(a, 0, "axes_below");
  const int64_t rank = int_arg(a, 1, "axes_below"), k = int_arg(a, 2, "axes_below");
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) not_applicable("axes_below", "axis out of range");
    if ((axis < 0 ? axis + rank : axis) >= k) return boolean(false);
  }
  return boolean(true);
}

// perm_gather(p, axis, k): the permutation q with
// Gather(Transpose(x, p), i, axis) = Transpose(Gather(x, i, p[axis]), q) for indices of
// rank k: the gathered axis p[axis] of x becomes k axes in its place, at `axis` of the result.
AttrValue perm_gather(std::span<const AttrValue> a) {
  std::vector<int64_t> p = ints_arg(a, 0, "perm_gather");
  const int64_t rank = static_cast<int64_t>(p.size());
  const int64_t axis = int_arg(a, 1, "perm_gather"), k = int_arg(a, 2, "perm_gather");
  if (axis < 0 || axis >= rank || k < 0) not_applicable("perm_gather", "axis out of range");
  const int64_t g = p[static_cast<size_t>(axis)];
  std::vector<int64_t> q;
  for (int64_t j = 0; j < rank; ++j) {
    const int64_t from = p[static_cast<size_t>(j)];
    if (from < 0 || from >= rank) not_applicable("perm_gather", "not a permutation");
    if (j == axis)
      for (int64_t t = 0; t < k; ++t) q.push_back(g + t);
    else
      q.push_back(from < g ? from : from + k - 1);
  }
  return q;
}

// permuted_axes(p, axes, rank): the axes of Transpose(x, p) (negative from the end) as
// axes of x, p[axis].
AttrValue permuted_axes(std::span<const AttrValue> a) {
  std::vector<int64_t> p = ints_arg(a, 0, "permuted_axes"), axes = ints_arg(a, 1, "permuted_axes");
  const int64_t rank = int_arg(a, 2, "permuted_axes");
  if (static_cast<int64_t>(p.size()) != rank) not_applicable("permuted_axes", "permutation of another rank");
  std::vector<int64_t> out;
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) not_applicable("permuted_axes", "axis out of range");
    out.push_back(p[static_cast<size_t>(axis < 0 ? axis + rank : axis)]);
  }
  return out;
}

// item(list, i): the list's i-th element.
AttrValue item(std::span<const AttrValue> a) {
  std::vector<int64_t> list = ints_arg(a, 0, "item");
  const int64_t i = int_arg(a, 1, "item");
  if (i < 0 || i >= static_cast<int64_t>(list.size())) not_applicable("item", "index out of range");
  return list[static_cast<size_t>(i)];
}

// ---- tensor folds: templates over the element type ------------------------------------

template <class T>
T number(double v, std::string_view fold) {
  if constexpr (std::is_same_v<T, Fp>) {
    if (v != std::floor(v) || std::fabs(v) > 9.0e15) not_applicable(fold, "a non-integer scalar has no field value");
    return Fp::from_signed(static_cast<int64_t>(v));
  } else {
    return T(v);
  }
}

template <class T>
const Array<T>& tensor_at(std::span<const FoldArg<T>> a, size_t i, std::string_view fold) {
  if (!a[i].is_tensor) not_applicable(fold, "argument " + std::to_string(i + 1) + " must be a tensor");
  return a[i].array;
}
template <class T>
int64_t int_at(std::span<const FoldArg<T>> a, size_t i, std::string_view fold) {
  if (a[i].is_tensor) not_applicable(fold, "argument " + std::to_string(i + 1) + " must be a number");
  return int_arg(std::span<const AttrValue>(&a[i].value, 1), 0, fold);
}
template <class T>
double float_at(std::span<const FoldArg<T>> a, size_t i, std::string_view fold) {
  if (a[i].is_tensor) not_applicable(fold, "argument " + std::to_string(i + 1) + " must be a number");
  return float_arg(std::span<const AttrValue>(&a[i].value, 1), 0, fold);
}

// per_channel(c, channels): c (broadcasting as [1, C, 1, ...] or a single value) as a [C] vector.
template <class T>
Array<T> per_channel(std::span<const FoldArg<T>> a) {
  const Array<T>& c = tensor_at(a, 0, "per_channel");
  const int64_t channels = int_at(a, 1, "per_channel");
  if (c.numel() == 1) return Array<T>({channels}, c.data[0]);
  if (c.numel() != channels) not_applicable("per_channel", "not one value per channel");
  return Array<T>({channels}, c.data);
}

// scale_rows(w, k): w[o, ...] * k[o] (a weight whose axis 0 is the output channel).
template <class T>
Array<T> scale_rows(std::span<const FoldArg<T>> a) {
  Array<T> w = tensor_at(a, 0, "scale_rows");
  const Array<T>& k = tensor_at(a, 1, "scale_rows");
  if (w.rank() < 1 || k.numel() != w.dims[0]) not_applicable("scale_rows", "k needs one value per row");
  const size_t per_row = w.dims[0] ? w.data.size() / static_cast<size_t>(w.dims[0]) : 0;
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = w.data[i] * k.data[i / per_row];
  return w;
}

// scale_cols(w, k): w[..., n] * k[n] (a weight whose last axis is the output column).
template <class T>
Array<T> scale_cols(std::span<const FoldArg<T>> a) {
  Array<T> w = tensor_at(a, 0, "scale_cols");
  const Array<T>& k = tensor_at(a, 1, "scale_cols");
  if (w.rank() < 1 || k.numel() != w.dims.back()) not_applicable("scale_cols", "k needs one value per column");
  for (size_t i = 0; i < w.data.size(); ++i) w.data[i] = w.data[i] * k.data[i % k.data.size()];
  return w;
}

template <class T>
T square_root(T x) {
  if constexpr (std::is_same_v<T, Sym>) {
    return Sym::apply("Sqrt", std::span<const Sym>(&x, 1));  // as the Sqrt operator: uninterpreted
  } else {
    return std::sqrt(x);
  }
}

// bn_factor(scale, var, eps) = scale / sqrt(var + eps): BatchNormalization's per-channel factor.
template <class T>
Array<T> bn_factor(std::span<const FoldArg<T>> a) {
  if constexpr (std::is_same_v<T, Fp>) {
    not_applicable("bn_factor", "square roots have no field semantics");
  } else {
    const Array<T>& s = tensor_at(a, 0, "bn_factor");
    const Array<T>& v = tensor_at(a, 1, "bn_factor");
    const T eps = number<T>(float_at(a, 2, "bn_factor"), "bn_factor");
    if (s.dims != v.dims) not_applicable("bn_factor", "scale and var differ in shape");
    Array<T> out = s;
    for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = s.data[i] / square_root(v.data[i] + eps);
    return out;
  }
}

template <class T, class F>
Array<T> elementwise(std::span<const FoldArg<T>> a, std::string_view fold, F f) {
  const Array<T>& x = tensor_at(a, 0, fold);
  const Array<T>& y = tensor_at(a, 1, fold);
  try {
    (void)broadcast_dims(x.dims, y.dims);
  } catch (const Error&) {
    not_applicable(fold, "shapes do not broadcast");
  }
  return broadcast_map(x, y, f);
}

// add(a, b), sub(a, b), mul(a, b): elementwise with broadcasting.
template <class T>
Array<T> add(std::span<const FoldArg<T>> a) {
  return elementwise(a, "add", [](T x, T y) { return x + y; });
}
template <class T>
Array<T> sub(std::span<const FoldArg<T>> a) {
  return elementwise(a, "sub", [](T x, T y) { return x - y; });
}
template <class T>
Array<T> mul(std::span<const FoldArg<T>> a) {
  return elementwise(a, "mul", [](T x, T y) { return x * y; });
}
// neg(a) = -a;  scale(a, f) = a * f for a number f.
template <class T>
Array<T> neg(std::span<const FoldArg<T>> a) {
  return map(tensor_at(a, 0, "neg"), [](T x) { return -x; });
}
template <class T>
Array<T> scale(std::span<const FoldArg<T>> a) {
  const T f = number<T>(float_at(a, 1, "scale"), "scale");
  return map(tensor_at(a, 0, "scale"), [f](T x) { return x * f; });
}

// pad_kernel_to(w, kh, kw): a [O, I, h, w] kernel zero-padded to [O, I, kh, kw], centred
// (a 1x1 kernel becomes a 3x3 one with zeros around it: with one more padding on each
// side of the input, the convolution is the same).
template <class T>
Array<T> pad_kernel_to(std::span<const FoldArg<T>> a) {
  const Array<T>& w = tensor_at(a, 0, "pad_kernel_to");
  const int64_t kh = int_at(a, 1, "pad_kernel_to"), kw = int_at(a, 2, "pad_kernel_to");
  if (w.rank() != 4) not_applicable("pad_kernel_to", "the kernel must be [O, I, h, w]");
  const int64_t h = w.dims[2], wd = w.dims[3];
  if (kh < h || kw < wd || (kh - h) % 2 || (kw - wd) % 2) not_applicable("pad_kernel_to", "cannot centre the kernel");
  const int64_t top = (kh - h) / 2, left = (kw - wd) / 2;
  Array<T> out({w.dims[0], w.dims[1], kh, kw});
  for (int64_t o = 0; o < w.dims[0] * w.dims[1]; ++o)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < wd; ++x)
        out.data[static_cast<size_t>((o * kh + y + top) * kw + x + left)] = w.data[static_cast<size_t>((o * h + y) * wd + x)];
  return out;
}

// ---- registration ----------------------------------------------------------------------

#define ISOMER_TENSOR_FOLD(NAME, DOC, MIN, MAX, FIELD, ...)                                            \
  FoldDef {                                                                                              \
    #NAME, DOC, MIN, MAX, nullptr, {__VA_ARGS__}, NAME<double>, FIELD ? NAME<Fp> : nullptr, NAME<Sym> \
  }

std::vector<FoldDef> make_folds() {
  std::vector<FoldDef> f;
  auto value = [&](std::string_view name, std::string_view doc, int lo, int hi, AttrValue (*fn)(std::span<const AttrValue>)) {
    f.push_back(FoldDef{name, doc, lo, hi, fn, {}, nullptr, nullptr, nullptr});
  };
  value("compose_perm", "p[q[i]]: the permutation of Transpose(Transpose(x, p), q)", 2, 2, compose_perm);
  value("is_identity_perm", "p[i] == i for every i", 1, 1, is_identity_perm);
  value("all_equal", "every element of a list or tensor equals v", 2, 2, all_equal);
  value("contains", "some element of a list or tensor equals v", 2, 2, contains);
  value("values", "an integer tensor's elements as a list", 1, 1, values);
  value("slice_dims", "dims[start:end] with Shape's clamping", 3, 3, slice_dims);
  value("all_static", "no dim of the list is symbolic", 1, 1, all_static);
  value("i64_tensor", "a list as a 1-D int64 tensor", 1, 1, i64_tensor);
  value("gather_dims", "dims at an int tensor of indices, as an int64 tensor", 2, 2, gather_dims);
  value("per_channel_dims", "dims broadcast as [1, C, 1, ...] against an output of this rank", 3, 3,
        per_channel_dims);
  value("axes_below", "every axis of a list, counted against a rank, is below k", 3, 3, axes_below);
  value("perm_gather", "the permutation that follows a Gather moved above a Transpose", 3, 3, perm_gather);
  value("permuted_axes", "axes of Transpose(x, p) as axes of x, p[axis]", 3, 3, permuted_axes);
  value("item", "a list's i-th element", 2, 2, item);
  f.push_back(ISOMER_TENSOR_FOLD(per_channel, "a [1,C,1,..] or one-value constant as a [C] vector", 2, 2, true, 0));
  f.push_back(ISOMER_TENSOR_FOLD(scale_rows, "w[o, ...] * k[o]", 2, 2, true, 0, 1));
  f.push_back(ISOMER_TENSOR_FOLD(scale_cols, "w[..., n] * k[n]", 2, 2, true, 0, 1));
  f.push_back(ISOMER_TENSOR_FOLD(bn_factor, "scale / sqrt(var + eps)", 3, 3, false, 0, 1));
  f.push_back(ISOMER_TENSOR_FOLD(add, "a + b (broadcasting)", 2, 2, true, 0, 1));
  f.push_back(ISOMER_TENSOR_FOLD(sub, "a - b (broadcasting)", 2, 2, true, 0, 1));
  f.push_back(ISOMER_TENSOR_FOLD(mul, "a * b (broadcasting)", 2, 2, true, 0, 1));
  f.push_back(ISOMER_TENSOR_FOLD(neg, "-a", 1, 1, true, 0));
  f.push_back(ISOMER_TENSOR_FOLD(scale, "a * f for a number f", 2, 2, true, 0));
  f.push_back(ISOMER_TENSOR_FOLD(pad_kernel_to, "a [O,I,h,w] kernel zero-padded, centred, to [O,I,kh,kw]", 3, 3,
                                 true, 0));
  return f;
}

#undef ISOMER_TENSOR_FOLD

const std::vector<FoldDef>& folds() {
  static const std::vector<FoldDef> table = make_folds();
  return table;
}

}  // namespace

const FoldDef* find_fold(std::string_view name) {
  for (const FoldDef& f : folds())
    if (f.name == name) return &f;
  return nullptr;
}

std::span<const FoldDef* const> all_folds() {
  static const std::vector<const FoldDef*> ptrs = [] {
    std::vector<const FoldDef*> p;
    for (const FoldDef& f : folds()) p.push_back(&f);
    return p;
  }();
  return ptrs;
}

}  // namespace isomer
