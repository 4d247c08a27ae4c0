// Region programs, the verification field and the abstract-expression e-graph.
#include <gtest/gtest.h>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/text.h"
#include "mugraph/egraph.h"
#include "mugraph/field.h"
#include "mugraph/interpreter.h"
#include "mugraph/program.h"
#include "mugraph_test_util.h"

namespace isomer::mugraph {
namespace {

TEST(MuGraphField, SafePrimeAndGenerator) {
  EXPECT_TRUE(is_prime_u64(kSafeP));
  EXPECT_TRUE(is_prime_u64(kSafeQ));
  EXPECT_EQ(kSafeP, 2 * kSafeQ + 1);
  EXPECT_GT(kSafeP, uint64_t{1} << 60);
  // g = 4 = 2^2 is a quadratic residue: its order divides q, and is not 1, so it is q.
  EXPECT_EQ(pow_mod(kGenerator, kSafeQ, kSafeP), 1u);
  EXPECT_NE(kGenerator % kSafeP, 1u);
  // Miller-Rabin itself: known primes and composites (Carmichael numbers included).
  EXPECT_TRUE(is_prime_u64((uint64_t{1} << 61) - 1));
  EXPECT_FALSE(is_prime_u64(561));
  EXPECT_FALSE(is_prime_u64(3215031751ull));
  EXPECT_FALSE(is_prime_u64(kSafeP - 2));
}

TEST(MuGraphField, ExpIsAHomomorphismAndMasksVanish) {
  FieldVal a = FieldVal::of_double(3.25), b = FieldVal::of_double(-1.5);
  EXPECT_EQ(field_exp(a + b), field_exp(a) * field_exp(b));
  EXPECT_EQ(field_exp(a - b), field_exp(a) / field_exp(b));
  EXPECT_EQ(field_exp(FieldVal::neg_inf() + a), FieldVal::of_int(0));
  EXPECT_EQ(FieldVal::of_double(0.5) * FieldVal::of_int(2), FieldVal::of_int(1));
  EXPECT_EQ(FieldVal::of_double(-0.375) * FieldVal::of_int(8), FieldVal::of_int(-3));
  // exp of an exp has no image: refused, never guessed.
  EXPECT_EQ(field_exp(field_exp(a)).kind, FieldVal::Kind::Poison);
}

TEST(MuGraphProgram, GqaAttentionAbsorbsViews) {
  Graph body = parse_graph(testing::gqa_attention_body(4, 2, 8, 4));
  Program p = from_body(body);
  // Atoms: kv (2), rep (2), i (8), d (4), j (8) and the output's head dim (4).
  EXPECT_EQ(p.atoms.size(), 6u) << p.to_string();
  // K is read at head h / rep: K's atoms do not include the rep atom.
  const IoTensor& k = p.inputs[1];
  EXPECT_EQ(p.stmts[k.stmt].axes.size(), 3u);
  EXPECT_EQ(p.outputs[0].dims, (std::vector<int64_t>{1, 4, 8, 4}));
}

// The program of every test body computes what the reference evaluator computes.
void expect_program_matches_reference(const std::string& text) {
  Graph body = parse_graph(text);
  Program p = from_body(body);
  std::vector<Tensor> inputs = random_inputs(body, 7);
  Buffers<double> in;
  for (const Tensor& t : inputs) in.push_back(t.to_f64());
  std::vector<Tensor> want = evaluate(body, inputs);
  Buffers<double> got = evaluate_program(p, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < want.size(); ++o) {
    std::vector<double> w = want[o].to_f64();
    ASSERT_EQ(got[o].size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(got[o][i], w[i], 1e-4 * (1 + std::abs(w[i]))) << text << " at " << i;
  }
}

TEST(MuGraphProgram, MatchesTheReferenceEvaluator) {
  expect_program_matches_reference(testing::gqa_attention_body(4, 2, 8, 4));
  expect_program_matches_reference(testing::rmsnorm_matmul_body(3, 8, 5));
  expect_program_matches_reference(testing::swiglu_body(3, 8, 6));
  expect_program_matches_reference(testing::layernorm_gelu_body(3, 10));
  expect_program_matches_reference(testing::softmax_body(3, 7));
}

TEST(MuGraphProgram, RejectsWhatItCannotExpress) {
  Graph g = parse_graph("graph g(%x: f32[4,4]) {\n  %t = Transpose(%x) {perm=[1, 0]}\n  %y = MatMul(%x, %t)\n  return %y\n}\n");
  EXPECT_THROW(from_body(g), Error);
}

}  // namespace
}  // namespace isomer::mugraph
