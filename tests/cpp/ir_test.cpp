#include <gtest/gtest.h>

#include "eval/evaluator.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ops/op.h"

namespace isomer {
namespace {

TEST(Graph, BuilderHashConsesEqualNodes) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  Value r1 = b.op1("Relu", {x});
  Value r2 = b.op1("Relu", {x});
  EXPECT_EQ(r1, r2);
  Value s = b.op1("Add", {r1, r2});
  Graph g = b.finish({s}, {"y"});
  EXPECT_EQ(g.num_ops(), 2u);
}

TEST(Graph, ImportStyleBuilderKeepsDuplicates) {
  GraphBuilder b(/*dedupe=*/false);
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  Value r1 = b.op1("Relu", {x});
  Value r2 = b.op1("Relu", {x});
  EXPECT_NE(r1, r2);
  Graph g = b.finish({b.op1("Add", {r1, r2})}, {"y"});
  EXPECT_EQ(g.num_ops(), 3u);
}

TEST(Graph, ShapeErrorsNameTheNode) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  Value y = b.input("y", {DType::Float32, make_shape({4, 3})});
  try {
    b.op("Add", {x, y}, {}, 0, "add1");
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'add1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("broadcast"), std::string::npos) << e.what();
  }
}

TEST(Graph, RebuildWithNoChangeReturnsSameGraph) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Graph g = b.finish({b.op1("Relu", {x})}, {"y"});
  Graph h = rebuild(g, [](const Node&, const std::vector<Value>&, GraphBuilder&) { return std::vector<Value>{}; });
  EXPECT_TRUE(same_graph(g, h));
  EXPECT_EQ(g.outputs()[0], h.outputs()[0]);
}

TEST(Evaluator, BroadcastAddAndRelu) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2, 3})});
  Value c = b.constant(Tensor::from_f64(DType::Float32, {3}, std::vector<double>{1, -2, 0.5}));
  Graph g = b.finish({b.op1("Relu", {b.op1("Add", {x, c})})}, {"y"});
  Tensor in = Tensor::from_f64(DType::Float32, {2, 3}, std::vector<double>{0, 0, 0, -2, 3, 1});
  std::vector<Tensor> out = evaluate(g, {in});
  EXPECT_EQ(out[0].to_f64(), (std::vector<double>{1, 0, 0.5, 0, 1, 1.5}));
}

TEST(Field, MersenneArithmetic) {
  Fp a(Fp::kP - 1), b(2);
  EXPECT_EQ((a + b).value(), 1u);
  EXPECT_EQ((a * a).value(), 1u);  // (-1)^2
  EXPECT_EQ(Fp::from_signed(-1), a);
  EXPECT_EQ((Fp(12345) * Fp(12345).inverse()).value(), 1u);
}

TEST(Field, EvaluateFieldUsesTableSemantics) {
  GraphBuilder b;
  Value x = b.input("x", {DType::Float32, make_shape({2})});
  Value y = b.input("y", {DType::Float32, make_shape({2})});
  Graph g = b.finish({b.op1("Mul", {b.op1("Add", {x, y}), y})}, {"z"});
  FieldArray fx{{2}, {Fp(3), Fp(5)}}, fy{{2}, {Fp(7), Fp::from_signed(-1)}};
  std::vector<FieldArray> out = evaluate_field(g, {fx, fy});
  EXPECT_EQ(out[0].data[0], Fp(70));
  EXPECT_EQ(out[0].data[1], Fp::from_signed(-4));
}

TEST(OpTable, EveryEntryIsComplete) {
  for (const OpDef* op : all_ops()) {
    EXPECT_NE(op->infer, nullptr) << op->name;
    EXPECT_NE(op->eval, nullptr) << op->name;
    EXPECT_NE(op->lower, Lowering::None) << op->name << " has no runtime lowering";
    EXPECT_EQ(find_op(op->name), op);
  }
  EXPECT_EQ(find_op("NoSuchOp"), nullptr);
}

}  // namespace
}  // namespace isomer
