// Each fold function against the operators it stands for (rules/fold.h): the same
// numbers from the fold as from evaluating the operators, and the same function at
// the field and symbolic element types as at double.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "rules/expr.h"
#include "rules/fold.h"

namespace isomer {
namespace {

Tensor f32(std::vector<int64_t> dims, uint64_t seed, double lo = -1, double hi = 1) {
  std::vector<double> v(static_cast<size_t>(num_elements(dims)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = lo + (hi - lo) * (0.5 + 0.5 * std::sin(static_cast<double>(seed * 131 + i * 7 + 1)));
  return Tensor::from_f64(DType::Float32, std::move(dims), v);
}

// Calls a fold by name on concrete values.
AttrValue call(std::string_view name, std::vector<AttrValue> args) {
  const FoldDef* f = find_fold(name);
  EXPECT_NE(f, nullptr) << name;
  if (!f->tensor_fold()) return f->eval(args);
  std::vector<FoldArg<double>> a(args.size());
  DType dtype = DType::Undefined;
  for (size_t i = 0; i < args.size(); ++i) {
    if (const auto* t = std::get_if<Tensor>(&args[i])) {
      a[i].is_tensor = true;
      a[i].array = Array<double>(t->dims(), t->to_f64());
      if (dtype == DType::Undefined) dtype = t->dtype();
    } else {
      a[i].value = args[i];
    }
  }
  Array<double> r = f->eval_f64(a);
  return Tensor::from_f64(dtype, r.dims, r.data);
}

// One graph: `build` makes the operators from constants; its output's data.
Tensor evaluated(const std::function<Value(GraphBuilder&)>& build) {
  GraphBuilder b;
  Graph g = b.finish({build(b)}, {"y"});
  return evaluate(g, {})[0];
}

void expect_close(const Tensor& a, const Tensor& b, double tol = 1e-6) {
  ASSERT_EQ(a.dims(), b.dims());
  std::vector<double> x = a.to_f64(), y = b.to_f64();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol * (1 + std::fabs(x[i]))) << "element " << i;
}

TEST(Fold, EveryFoldIsDocumentedAndTensorFoldsHaveSymbolicSemantics) {
  for (const FoldDef* f : all_folds()) {
    EXPECT_FALSE(f->doc.empty()) << f->name;
    EXPECT_LE(f->min_args, f->max_args) << f->name;
    if (f->tensor_fold()) {
      EXPECT_NE(f->eval_f64, nullptr) << f->name;
      EXPECT_NE(f->eval_sym, nullptr) << f->name;  // every rule with it can be proved
    } else {
      EXPECT_NE(f->eval, nullptr) << f->name;
    }
  }
}

TEST(Fold, ComposePermIsTwoTransposes) {
  Tensor x = f32({2, 3, 4}, 1);
  std::vector<int64_t> p{1, 2, 0}, q{2, 0, 1};
  Tensor two = evaluated([&](GraphBuilder& b) {
    Value t = b.op1("Transpose", {b.constant(x)}, {{"perm", p}});
    return b.op1("Transpose", {t}, {{"perm", q}});
  });
  auto composed = std::get<std::vector<int64_t>>(call("compose_perm", {p, q}));
  Tensor one = evaluated([&](GraphBuilder& b) { return b.op1("Transpose", {b.constant(x)}, {{"perm", composed}}); });
  expect_close(two, one, 0);
  EXPECT_EQ(std::get<int64_t>(call("is_identity_perm", {std::vector<int64_t>{0, 1, 2}})), 1);
  const bool identity = composed == std::vector<int64_t>{0, 1, 2};
  EXPECT_EQ(std::get<int64_t>(call("is_identity_perm", {composed})), identity ? 1 : 0);
  EXPECT_THROW(call("compose_perm", {p, std::vector<int64_t>{0, 1}}), NotApplicable);
}

TEST(Fold, PermGatherAndPermutedAxesMoveASelectionAboveATranspose) {
  // Gather(Transpose(x, p), i, axis a) = Transpose(Gather(x, i, p[a]), perm_gather(p, a, rank(i)))
  // for every axis and index ranks 0, 1 and 2.
  Tensor x = f32({2, 3, 4}, 4);
  const std::vector<int64_t> p{2, 0, 1};
  for (int64_t a = 0; a < 3; ++a)
    for (const Tensor& idx : std::vector<Tensor>{Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{1}),
                                                 Tensor::vector_i64({1, 0}),
                                                 Tensor::from_i64(DType::Int64, {2, 2}, std::vector<int64_t>{0, 1, 1, -1})}) {
      Tensor below = evaluated([&](GraphBuilder& b) {
        Value t = b.op1("Transpose", {b.constant(x)}, {{"perm", p}});
        return b.op1("Gather", {t, b.constant(idx)}, {{"axis", a}});
      });
      const int64_t from = std::get<int64_t>(call("item", {p, a}));
      auto q = std::get<std::vector<int64_t>>(call("perm_gather", {p, a, int64_t{idx.rank()}}));
      Tensor above = evaluated([&](GraphBuilder& b) {
        Value g = b.op1("Gather", {b.constant(x), b.constant(idx)}, {{"axis", from}});
        return b.op1("Transpose", {g}, {{"perm", q}});
      });
      expect_close(below, above, 0);
    }
  EXPECT_EQ(std::get<std::vector<int64_t>>(call("permuted_axes", {p, std::vector<int64_t>{-1, 0}, int64_t{3}})),
            (std::vector<int64_t>{1, 2}));
  EXPECT_THROW(call("permuted_axes", {p, std::vector<int64_t>{3}, int64_t{3}}), NotApplicable);
  EXPECT_THROW(call("item", {p, int64_t{3}}), NotApplicable);
}

TEST(Fold, AxesBelowCountsNegativeAxesFromTheEnd) {
  auto below = [](std::vector<int64_t> axes, int64_t rank, int64_t k) {
    return std::get<int64_t>(call("axes_below", {axes, rank, k}));
  };
  EXPECT_EQ(below({1}, 3, 2), 1);
  EXPECT_EQ(below({-1}, 3, 2), 0);  // the last axis of a rank-3 result
  EXPECT_EQ(below({0, -2}, 3, 2), 1);
  EXPECT_EQ(below({}, 3, 0), 1);
  EXPECT_THROW(below({3}, 3, 3), NotApplicable);
}

TEST(Fold, ScaleRowsAndColumnsAreBroadcastMuls) {
  Tensor w = f32({4, 3, 2, 2}, 2), k = f32({4}, 3);
  Tensor by_ops = evaluated([&](GraphBuilder& b) {
    Value kr = b.op1("Reshape", {b.constant(k), b.constant(Tensor::vector_i64({4, 1, 1, 1}))});
    return b.op1("Mul", {b.constant(w), kr});
  });
  expect_close(std::get<Tensor>(call("scale_rows", {w, k})), by_ops);
  Tensor m = f32({3, 5}, 4), c = f32({5}, 5);
  expect_close(std::get<Tensor>(call("scale_cols", {m, c})),
               evaluated([&](GraphBuilder& b) { return b.op1("Mul", {b.constant(m), b.constant(c)}); }));
  EXPECT_THROW(call("scale_rows", {w, f32({3}, 6)}), NotApplicable);
}

TEST(Fold, BnFactorAndElementwiseFoldsAreTheOperators) {
  Tensor s = f32({6}, 7), v = f32({6}, 8, 0.1, 2);
  Tensor by_ops = evaluated([&](GraphBuilder& b) {
    Value veps = b.op1("Add", {b.constant(v), b.constant(Tensor::scalar_f32(1e-3f))});
    return b.op1("Div", {b.constant(s), b.op1("Sqrt", {veps})});
  });
  expect_close(std::get<Tensor>(call("bn_factor", {s, v, static_cast<double>(1e-3f)})), by_ops, 1e-6);
  Tensor a = f32({2, 3}, 9), c = f32({3}, 10);
  for (auto [fold, op] : {std::pair{"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"}})
    expect_close(std::get<Tensor>(call(fold, {a, c})),
                 evaluated([&, op = op](GraphBuilder& b) { return b.op1(op, {b.constant(a), b.constant(c)}); }));
  expect_close(std::get<Tensor>(call("neg", {a})),
               evaluated([&](GraphBuilder& b) { return b.op1("Neg", {b.constant(a)}); }));
  expect_close(std::get<Tensor>(call("scale", {a, 2.5})),
               evaluated([&](GraphBuilder& b) { return b.op1("Mul", {b.constant(a), b.constant(Tensor::scalar_f32(2.5f))}); }));
}

TEST(Fold, PadKernelToMakesTheSameConvolutionWithMorePadding) {
  Tensor x = f32({1, 3, 5, 5}, 11), w = f32({4, 3, 1, 1}, 12);
  Tensor one = evaluated([&](GraphBuilder& b) { return b.op1("Conv", {b.constant(x), b.constant(w)}); });
  Tensor padded_w = std::get<Tensor>(call("pad_kernel_to", {w, int64_t{3}, int64_t{3}}));
  EXPECT_EQ(padded_w.dims(), (std::vector<int64_t>{4, 3, 3, 3}));
  Tensor three = evaluated([&](GraphBuilder& b) {
    return b.op1("Conv", {b.constant(x), b.constant(padded_w)}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  });
  expect_close(one, three);
  EXPECT_THROW(call("pad_kernel_to", {w, int64_t{2}, int64_t{3}}), NotApplicable);  // cannot centre
}

TEST(Fold, PerChannelAndShapeFolds) {
  Tensor c = f32({1, 4, 1, 1}, 13);
  Tensor v = std::get<Tensor>(call("per_channel", {c, int64_t{4}}));
  EXPECT_EQ(v.dims(), (std::vector<int64_t>{4}));
  EXPECT_EQ(v.to_f64(), c.to_f64());
  EXPECT_EQ(std::get<Tensor>(call("per_channel", {Tensor::scalar_f32(2), int64_t{3}})).to_f64(),
            (std::vector<double>{2, 2, 2}));
  auto yes = [](std::vector<int64_t> dims, int64_t rank, int64_t ch) {
    return std::get<int64_t>(call("per_channel_dims", {dims, rank, ch}));
  };
  EXPECT_EQ(yes({1, 4, 1, 1}, 4, 4), 1);
  EXPECT_EQ(yes({4, 1, 1}, 4, 4), 1);
  EXPECT_EQ(yes({1}, 4, 4), 1);
  EXPECT_EQ(yes({4}, 4, 4), 0);  // broadcasts along the last axis, not the channels
  EXPECT_EQ(yes({2, 4, 1, 1}, 4, 4), 0);
  std::vector<int64_t> dims{2, -1, 5};
  EXPECT_EQ(std::get<std::vector<int64_t>>(call("slice_dims", {dims, int64_t{-1}, int64_t{9}})),
            (std::vector<int64_t>{5}));
  EXPECT_EQ(std::get<int64_t>(call("all_static", {dims})), 0);
  Tensor idx = Tensor::from_i64(DType::Int64, {}, std::vector<int64_t>{-1});
  EXPECT_EQ(std::get<Tensor>(call("gather_dims", {dims, idx})).to_i64(), (std::vector<int64_t>{5}));
  EXPECT_THROW(call("gather_dims", {dims, Tensor::vector_i64({1})}), NotApplicable);  // symbolic
}

// The field and symbolic instantiations compute the same function as the double one.
TEST(Fold, FieldAndSymbolicInstantiationsAgreeWithDouble) {
  const FoldDef* f = find_fold("scale_rows");
  std::vector<FoldArg<Fp>> fa(2);
  fa[0].is_tensor = fa[1].is_tensor = true;
  fa[0].array = Array<Fp>({2, 2}, {Fp(1), Fp(2), Fp(3), Fp(4)});
  fa[1].array = Array<Fp>({2}, {Fp(5), Fp(7)});
  Array<Fp> r = f->eval_field(fa);
  EXPECT_EQ(r.data, (std::vector<Fp>{Fp(5), Fp(10), Fp(21), Fp(28)}));
  SymArenaScope arena;
  std::vector<FoldArg<Sym>> sa(3);
  sa[0].is_tensor = sa[1].is_tensor = true;
  sa[0].array = Array<Sym>({1}, {Sym::var(0)});
  sa[1].array = Array<Sym>({1}, {Sym::var(1)});
  sa[2].value = 0.5;
  Array<Sym> k = find_fold("bn_factor")->eval_sym(sa);
  // s / Sqrt(v + 0.5), the Sqrt uninterpreted as the Sqrt operator's semantics are.
  EXPECT_NE(to_string(k.data[0]).find("Sqrt"), std::string::npos) << to_string(k.data[0]);
  EXPECT_EQ(find_fold("bn_factor")->eval_field, nullptr);
}

}  // namespace
}  // namespace isomer
