// E-matching compares a pattern operator's literal attributes with an e-node's by the
// id of their canonical form (EGraph::canonical_attrs_equal, kept per operator,
// pattern and input classes) rather than canonicalizing the pattern for every
// candidate. It must answer exactly what match_attributes, the comparison the graph
// matcher shares, answers: here for every literal pattern operator of the shipped
// rules against every e-node of its operator, in a graph that spells defaults out in
// some places and leaves them out in others.
#include <gtest/gtest.h>

#include <map>

#include "egraph/egraph.h"
#include "egraph/ematch.h"
#include "ir/text.h"
#include "ops/op.h"
#include "rules/binding.h"
#include "search/search.h"

namespace isomer {
namespace {

const char* kDefaults = R"(graph g(%x: f32[1,4,6,6], %m: f32[4,4], %v: f32[2,4,3,4]) {
  %w1 = const f32[4,4,1,1] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
  %w3 = const f32[4,1,3,3] {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                            1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9}
  %b = const f32[4] {1, -1, 2, -2}
  %0 = Conv(%x, %w1)
  %1 = Conv(%x, %w1, %b) {dilations=[1, 1], group=1, pads=[0, 0, 0, 0], strides=[1, 1]}
  %2 = Conv(%x, %w3) {group=4, pads=[1, 1, 1, 1]}
  %3 = Relu(%0)
  %4 = Add(%3, %1)
  %5 = MaxPool(%4) {kernel_shape=[2, 2], strides=[2, 2]}
  %6 = Transpose(%m)
  %7 = Transpose(%m) {perm=[1, 0]}
  %8 = Transpose(%v) {perm=[0, 2, 1, 3]}
  %9 = Softmax(%m)
  %10 = Softmax(%m) {axis=1}
  %11 = Concat(%m, %6) {axis=1}
  %12 = Concat(%7, %m) {axis=-1}
  %13 = MatMul(%m, %7)
  %14 = Gemm(%m, %6) {transB=1}
  %15 = Sigmoid(%13)
  %16 = Mul(%15, %14)
  %17 = ReduceSum(%v) {axes=[1], keepdims=1}
  %18 = Concat(%2, %x) {axis=1}
  return %5, %8, %9, %10, %11, %12, %16, %17, %18
}
)";

TEST(EMatchAttributes, CanonicalIdsAnswerWhatMatchAttributesAnswers) {
  const std::vector<Rule> rules = search_rules(load_rule_files({default_rules_path()}));
  eg::EGraph g;
  eg::load_graph(g, parse_graph(kDefaults));
  g.rebuild();
  eg::VariadicExpansions expansions;
  size_t equal = 0, different = 0;
  std::map<std::string, size_t> ops_compared;
  for (const Rule& rule : rules) {
    const Rule& r = rule.variadic ? expansions.of_size(rule, 2) : rule;
    for (const PatternNode& p : r.source.nodes) {
      if (p.kind != PatternNode::Kind::Op || p.spread >= 0) continue;
      Attributes literals;
      bool all_literal = true;
      for (const AttrPattern& a : p.attrs) {
        if (a.kind != AttrPattern::Kind::Literal) all_literal = false;
        else literals.set(a.name, a.literal);
      }
      if (!all_literal) continue;
      const uint32_t pattern = g.intern_pattern_attrs(literals);
      for (eg::ClassId c : g.class_ids())
        for (const eg::ENode& n : g.cls(c).nodes) {
          if (n.kind != eg::ENodeKind::Op || n.op != p.op || n.children.size() != p.inputs.size()) continue;
          std::vector<TensorType> types;
          for (eg::ClassId ch : n.children) types.push_back(ch == eg::kNoClass ? TensorType{} : g.type(ch));
          std::vector<std::optional<AttrValue>> attrs(r.vars.size());
          std::vector<std::optional<Attributes>> sets(r.vars.size());
          std::vector<std::pair<const AttrPattern*, AttrValue>> deferred;
          const bool expected = match_attributes(p, g.attrs(n.attrs), types, attrs, sets, deferred);
          const bool by_id = g.canonical_attrs_equal(*p.op, pattern, n.children, n.attrs);
          EXPECT_EQ(by_id, expected) << r.name << ": " << p.op->name;
          ++(expected ? equal : different);
          ++ops_compared[std::string(p.op->name)];
        }
    }
  }
  // Both answers occur, over the operators whose defaults differ in form.
  EXPECT_GT(equal, 0u);
  EXPECT_GT(different, 0u);
  for (const char* op : {"Conv", "Transpose", "Concat", "MaxPool"}) EXPECT_GT(ops_compared[op], 0u) << op;
}

}  // namespace
}  // namespace isomer
