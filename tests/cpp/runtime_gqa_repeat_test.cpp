// Grouped-query attention as torch exports repeat_kv: K [B, kv, T, D] unsqueezed,
// expanded to [B, kv, rep, T, D] (stride 0 along rep) and reshaped to [B, kv * rep,
// T, D]. No strides express the reshape: it is a split view (runtime::SplitView),
// which the products read in place, per KV head. Where something else reads the
// repeated heads (a model output) they are copied dense, by isomer's strided copy
// (whole contiguous runs per repeat), not a oneDNN reorder. The values must equal
// the reference's, in the attention product and as a model output of their own.
#include <gtest/gtest.h>

#include <string>

#include "runtime_test_util.h"

namespace isomer {
namespace {

Value ints(GraphBuilder& b, std::vector<int64_t> v) { return b.constant(Tensor::vector_i64(std::move(v))); }

// K or V [B, kv, T, D] repeated to [B, kv * rep, T, D].
Value repeat_kv(GraphBuilder& b, Value t, int64_t B, int64_t kv, int64_t rep, int64_t T, int64_t D) {
  t = b.op1("Unsqueeze", {t, ints(b, {2})});
  t = b.op1("Expand", {t, ints(b, {B, kv, rep, T, D})});
  return b.op1("Reshape", {t, ints(b, {B, kv * rep, T, D})});
}

size_t broadcast_copies(const std::vector<runtime::StepInfo>& steps) {
  size_t n = 0;
  for (const runtime::StepInfo& s : steps)
    if (s.kind == "copy" && s.signature.find(",0,") != std::string::npos) ++n;
  return n;
}

// softmax(q k^T) v with k and v of kv heads repeated rep times; the repeated v is a
// second output where `v_output`. The steps it ran on.
std::vector<runtime::StepInfo> attention_against_reference(int64_t B, int64_t kv, int64_t rep, int64_t T, int64_t D,
                                                           int64_t S, bool v_output) {
  GraphBuilder b;
  Value q = b.input("q", {DType::Float32, make_shape({B, kv * rep, S, D})});
  Value k = b.input("k", {DType::Float32, make_shape({B, kv, T, D})});
  Value v = b.input("v", {DType::Float32, make_shape({B, kv, T, D})});
  Value kr = repeat_kv(b, k, B, kv, rep, T, D);
  Value vr = repeat_kv(b, v, B, kv, rep, T, D);
  Value kt = b.op1("Transpose", {kr}, Attributes{{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
  Value s = b.op1("MatMul", {q, kt});
  Value p = b.op1("Softmax", {s}, Attributes{{"axis", int64_t{-1}}});
  Value y = b.op1("MatMul", {p, vr});
  Graph g = v_output ? b.finish({y, vr}, {"y", "v_repeated"}) : b.finish({y}, {"y"});
  return testing::run_against_reference(g);
}

TEST(RuntimeGqaRepeat, DecodeStepAgainstRepeatedHeadsMatchesReference) {
  const auto steps = attention_against_reference(1, 2, 3, 9, 16, 1, /*v_output=*/true);
  EXPECT_EQ(broadcast_copies(steps), 1u);  // V's, for the output; K is read in place
}

TEST(RuntimeGqaRepeat, ProductsReadRepeatedHeadsInPlace) {
  // 17 query rows, batch 2, 5 query heads per KV head; nothing else reads K or V.
  EXPECT_EQ(broadcast_copies(attention_against_reference(2, 2, 5, 19, 8, 17, /*v_output=*/false)), 0u);
}

TEST(RuntimeGqaRepeat, RepeatedHeadsOfAPermutedSourceMatchReference) {
  // K taken from a projection's [B, T, kv, D] rows (permuted view) before repeating.
  const int64_t B = 2, kv = 2, rep = 4, T = 7, D = 8;
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({B, T, kv, D})});
  Value k = b.op1("Transpose", {x}, Attributes{{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  Value kr = repeat_kv(b, k, B, kv, rep, T, D);
  Value y = b.op1("Mul", {kr, b.constant(testing::random_tensor({D}, 5))});
  Graph g = b.finish({y, kr}, {"y", "k_repeated"});
  testing::run_against_reference(g);
}

}  // namespace
}  // namespace isomer
