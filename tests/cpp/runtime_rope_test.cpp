// Rotary position embedding in its rotate-half form (runtime/lower_rope.cpp):
// y = x * cos + concat(-x[..., h:], x[..., :h]) * sin runs as one row kernel in
// the forms exporters write it, and every near miss (another split point, the
// other half negated, a table on another tensor) keeps its decomposed steps. The
// results are the reference evaluator's either way.
#include <gtest/gtest.h>

#include <climits>

#include "runtime_test_util.h"

namespace isomer {
namespace {

struct RopeForm {
  bool swap_mul = false;        // Mul(cos, x) and Mul(sin, cat)
  bool swap_add = false;        // Add(rot * sin, x * cos)
  int64_t hi_end = LLONG_MAX;   // the high half's end as written (clamped to D)
  int64_t axis = -1;            // the slices' and the concat's axis as written
  bool steps = false;           // the slices carry steps [1]
  bool row_tables = false;      // cos and sin [seq, D] (else one value per row, [seq, 1])
  bool x_last_strided = false;  // x's last dim not contiguous (a transpose that moves it)
  // Near misses, each refused:
  int64_t split = 8;            // the high half's start and the low half's end (D = 16)
  bool negate_low = false;      // concat(-x[..., :h], x[..., h:])
  bool cos_on_other = false;    // x * cos replaced by (x + 1) * cos
  bool cat_is_output = false;   // the concatenation read outside the pattern
};

constexpr int64_t kHeads = 4, kSeq = 6, kDim = 16;

Graph rope_graph(const RopeForm& f) {
  GraphBuilder b;
  auto ints = [&](std::vector<int64_t> v) { return b.constant(Tensor::vector_i64(std::move(v))); };
  Value x;
  if (f.x_last_strided) {
    // [1, seq, D, heads] -> [1, heads, seq, D]: the last dim has stride heads.
    Value in = b.input("q", {DType::Float32, make_shape({1, kSeq, kDim, kHeads})});
    x = b.op1("Transpose", {in}, Attributes{{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  } else {
    // A projection's [1, seq, heads x D] seen as [1, heads, seq, D] (LLaMA's q).
    Value in = b.input("q", {DType::Float32, make_shape({1, kSeq, kHeads * kDim})});
    x = b.op1("Reshape", {in, ints({1, kSeq, kHeads, kDim})});
    x = b.op1("Transpose", {x}, Attributes{{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  }
  const int64_t tw = f.row_tables ? kDim : 1;
  Value cos = b.op1("Reshape", {b.input("cos", {DType::Float32, make_shape({kSeq, tw})}), ints({1, 1, kSeq, tw})});
  Value sin = b.op1("Reshape", {b.input("sin", {DType::Float32, make_shape({kSeq, tw})}), ints({1, 1, kSeq, tw})});
  auto slice = [&](int64_t start, int64_t end) {
    std::vector<Value> in = {x, ints({start}), ints({end}), ints({f.axis})};
    if (f.steps) in.push_back(ints({1}));
    return b.op1("Slice", in);
  };
  Value lo = slice(0, f.split), hi = slice(f.split, f.hi_end);
  Value cat = f.negate_low ? b.op1("Concat", {b.op1("Neg", {lo}), hi}, Attributes{{"axis", f.axis}})
                           : b.op1("Concat", {b.op1("Neg", {hi}), lo}, Attributes{{"axis", f.axis}});
  Value xc = f.cos_on_other ? b.op1("Add", {x, b.constant(Tensor::scalar_f32(1.0f))}) : x;
  Value a = f.swap_mul ? b.op1("Mul", {cos, xc}) : b.op1("Mul", {xc, cos});
  Value r = f.swap_mul ? b.op1("Mul", {sin, cat}) : b.op1("Mul", {cat, sin});
  Value y = f.swap_add ? b.op1("Add", {r, a}) : b.op1("Add", {a, r});
  // Attention's scale after it, as LLaMA's q has.
  y = b.op1("Mul", {y, b.constant(Tensor::scalar_f32(0.35f))});
  if (f.cat_is_output) return b.finish({y, cat}, {"y", "cat"});
  return b.finish({y}, {"y"});
}

int rope_steps(const std::vector<runtime::StepInfo>& steps) {
  int n = 0;
  for (const runtime::StepInfo& s : steps) n += s.signature.rfind("rope ", 0) == 0;
  return n;
}

bool has_op(const std::vector<runtime::StepInfo>& steps, const std::string& op, bool outside_rope) {
  for (const runtime::StepInfo& s : steps)
    if (!outside_rope || s.signature.rfind("rope ", 0) != 0)
      for (const std::string& o : s.ops)
        if (o == op) return true;
  return false;
}

TEST(RuntimeRope, RotateHalfInEveryExportedFormIsOneRowKernel) {
  std::vector<RopeForm> forms(9);
  forms[1].swap_mul = true;
  forms[2].swap_add = true;
  forms[3].hi_end = kDim;
  forms[4].axis = 3;
  forms[4].hi_end = 1000;
  forms[5].steps = true;
  forms[6].row_tables = false;
  forms[6].x_last_strided = true;
  forms[7].x_last_strided = true;
  forms[7].row_tables = true;
  forms[8].swap_mul = forms[8].swap_add = true;
  for (size_t i = 0; i < forms.size(); ++i) {
    if (i != 6) forms[i].row_tables = true;
    SCOPED_TRACE("form " + std::to_string(i));
    std::vector<runtime::StepInfo> steps = testing::run_against_reference(rope_graph(forms[i]), 1e-5);
    EXPECT_EQ(rope_steps(steps), 1);
    // Nothing of the pattern is left to other steps: no Neg, no Concat copy.
    EXPECT_FALSE(has_op(steps, "Neg", true));
    EXPECT_FALSE(has_op(steps, "Concat", true));
  }
}

TEST(RuntimeRope, NearMissesKeepTheirDecomposedSteps) {
  std::vector<RopeForm> forms(4);
  forms[0].split = 6;  // concat(-x[6:], x[:6]): a rotation, but not by half
  forms[1].negate_low = true;
  forms[2].cos_on_other = true;
  forms[3].cat_is_output = true;
  for (size_t i = 0; i < forms.size(); ++i) {
    forms[i].row_tables = true;
    SCOPED_TRACE("near miss " + std::to_string(i));
    std::vector<runtime::StepInfo> steps = testing::run_against_reference(rope_graph(forms[i]), 1e-5);
    EXPECT_EQ(rope_steps(steps), 0);
    EXPECT_TRUE(has_op(steps, "Neg", false));
  }
}

}  // namespace
}  // namespace isomer
